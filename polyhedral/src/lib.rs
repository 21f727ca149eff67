//! The polyhedral middle end of polyfuse.
//!
//! - [`program`]: the Program IR every front end produces and every pass reads;
//! - [`ast`]: the loop AST that AST generation produces and the back ends consume, with its
//!   interpreter;
//! - [`schedule`]: schedule trees (isl's node kinds), the original-order tree, rewrites, the
//!   verifier and the printer; the Pluto scheduler and tiling;
//! - [`codegen`]: AST generation from a schedule tree;
//! - [`contraction`]: recognition of contractions (reductions of a product of two operands);
//! - [`pipeline`]: the optimizing pipeline in one place (dependences → Pluto → tree → the
//!   list of tree passes → AST);
//! - [`target`]: the [`target::TargetDescription`] that steers the passes;
//! - [`cache_model`]: the stack-distance cache model of a schedule and the tile-size search it
//!   drives on targets whose caches are described;
//! - [`deps`]: dependence analysis under the original schedule;
//! - [`fusion`]: post-tiling fusion with extension nodes;
//! - [`expand`]: array expansion, which makes loops that only reuse storage parallel;
//! - [`ilp`]: an exact integer linear programming solver (lexicographic minima, emptiness);
//! - [`pack`]: packing (GPAT): which arrays to copy into contiguous buffers before which loop,
//!   in which layout, recorded as marks in the tree;
//! - [`register_tile`]: which point bands become register tiles (outer products kept in
//!   vector registers), recorded as marks in the tree;
//! - [`reduction_tile`]: which point bands jam rows of a parallel loop into an innermost loop
//!   of reductions (independent chains), recorded as marks in the tree;
//! - [`interp`]: the reference interpreter, the oracle every target is checked against.
//! - [`vectorize`]: function-level vectorization: SSA, uniform / linear / varying classes, masks.
//! - [`sets`]: exact integer sets and maps (isl semantics and notation).

pub mod ast;
pub mod cache_model;
pub mod codegen;
pub mod contraction;
pub mod deps;
pub mod expand;
pub mod fusion;
pub mod ilp;
pub mod interp;
pub mod pack;
pub mod pipeline;
pub mod program;
pub mod reduction_tile;
pub mod register_tile;
pub mod schedule;
pub mod sets;
pub mod target;
pub mod vectorize;

pub use codegen::generate_ast;
pub use program::Program;
pub use schedule::{schedule_tree_of, ScheduleTree};
