//! The back ends of polyfuse: each turns a [`polyhedral::Program`] and its loop AST
//! ([`polyhedral::ast::Ast`]) into code for one kind of machine, and runs it.
//!
//! - [`cpu`]: C99 + OpenMP, built with the system C compiler and run by a generated harness;
//! - [`gpu`]: WGSL compute shaders, validated by naga and run through wgpu;
//! - [`compare`]: checks a target's outputs against the reference interpreter's, with a
//!   tolerance by element type; shared by every runner.

pub mod compare;
pub mod cpu;
pub mod gpu;
