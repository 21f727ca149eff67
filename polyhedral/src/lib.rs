//! The polyhedral middle end of polyfuse.
//!
//! - [`program`]: the Program IR every front end produces and every pass reads;
//! - [`interp`]: the reference interpreter, the oracle every target is checked against.
//! - [`sets`]: exact integer sets and maps (isl semantics and notation).

pub mod interp;
pub mod program;
pub mod sets;

pub use program::Program;
