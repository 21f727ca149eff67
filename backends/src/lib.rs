//! The targets of polyfuse: each turns a [`polyhedral::Program`] and its loop AST
//! ([`polyhedral::ast::Ast`]) into code for one kind of machine, and runs it.
//!
//! - [`target`]: the one table of targets ([`target::TARGETS`]) the command line reads, the
//!   [`target::Target`] trait each target implements, and the drivers of the optimizing
//!   pipeline for any target;
//! - [`interp`]: the reference interpreter, as a target that runs kernels in their original
//!   order;
//! - [`cpu`]: C99 + OpenMP, built with the system C compiler and run by a generated harness;
//! - [`gpu`]: WGSL compute shaders, validated by naga and run through wgpu;
//! - [`npu`]: `.npuasm` for the DaVinci-like accelerator, run on the simulator in `sim`;
//! - [`compare`]: checks a target's outputs against the reference interpreter's, with a
//!   tolerance by element type; shared by every runner;
//! - [`report`]: what `polyfuse run` prints about a kernel's outputs, as text and JSON;
//! - shared by several back ends: `loops` (affine forms, accesses and bounds of the loop AST),
//!   `promote` (memory promotion: workgroup tiles and registers on the GPU, tile-local
//!   temporaries and packed boxes on the CPU), `narrow` (f64 kernels computed in f32, on the
//!   GPU and the accelerator).

pub mod compare;
pub mod cpu;
pub mod gpu;
pub mod interp;
mod loops;
mod narrow;
pub mod npu;
mod progress;
pub(crate) mod promote;
pub mod report;
pub mod target;
