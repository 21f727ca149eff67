//! The polyhedral middle end of polyfuse.
//!
//! - [`program`]: the Program IR every front end produces and every pass reads;
//! - [`ast`]: the loop AST that AST generation produces and the back ends consume, with its
//!   interpreter;
//! - [`schedule`]: schedule trees (isl's node kinds), the original-order tree, rewrites, marks,
//!   the verifier and the printer; the Pluto scheduler and legality;
//! - [`passes`]: the passes of the pipeline, one module each (expansion, tiling, intra-tile
//!   permutation, distribution, fission, post-tiling fusion, packing, register and reduction
//!   tiles, mapping marks), and the table of tree passes in the order they run;
//! - [`codegen`]: AST generation from a schedule tree;
//! - [`contraction`]: recognition of contractions (reductions of a product of two operands);
//! - [`pipeline`]: the optimizing pipeline in one place (dependences → expansion → Pluto →
//!   tree → the tree passes → AST);
//! - [`target`]: the [`target::TargetDescription`] that steers the passes;
//! - [`cache_model`]: the stack-distance cache model of a schedule and the tile-size search it
//!   drives on targets whose caches are described;
//! - [`deps`]: dependence analysis under the original schedule;
//! - [`ilp`]: an exact integer linear programming solver (lexicographic minima, emptiness);
//! - [`interp`]: the reference interpreter, the oracle every target is checked against.
//! - [`vectorize`]: function-level vectorization: SSA, uniform / linear / varying classes, masks.
//! - [`sets`]: exact integer sets and maps (isl semantics and notation).

pub mod ast;
pub mod cache_model;
pub mod codegen;
pub mod contraction;
pub mod deps;
pub mod ilp;
pub mod interp;
pub mod passes;
pub mod pipeline;
pub mod program;
pub mod schedule;
pub mod sets;
pub mod target;
pub mod vectorize;

pub use codegen::generate_ast;
pub use program::Program;
pub use schedule::{schedule_tree_of, ScheduleTree};
