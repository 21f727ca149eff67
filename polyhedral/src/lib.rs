//! The polyhedral middle end of polyfuse.
//!
//! - [`program`]: the Program IR every front end produces and every pass reads;
//! - [`ast`]: the loop AST that AST generation produces and the back ends consume, with its
//!   interpreter;
//! - [`deps`]: dependence analysis under the original schedule;
//! - [`ilp`]: an exact integer linear programming solver (lexicographic minima, emptiness);
//! - [`schedule`]: the Pluto scheduler, its schedules and tiling;
//! - [`interp`]: the reference interpreter, the oracle every target is checked against.
//! - [`sets`]: exact integer sets and maps (isl semantics and notation).

pub mod ast;
pub mod deps;
pub mod ilp;
pub mod interp;
pub mod program;
pub mod schedule;
pub mod sets;

pub use program::Program;
