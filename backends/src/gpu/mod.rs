//! The GPU target: WGSL compute shaders, validated by naga and run through wgpu.
//!
//! [`compile`] runs the optimizing pipeline for the GPU's [`Limits`] (tiles sized for the
//! workgroup memory, no intra-tile permutation: the point band keeps its coincident members
//! outermost so they can map to invocations), inserts the kernel and thread marks of
//! [`polyhedral::schedule::map`] and generates the loop AST. [`Writer`] turns that AST into a
//! [`Module`]: one WGSL module with one entry point per kernel and the host program that
//! dispatches them (sequential outer loops, one dispatch per kernel instance), every module
//! validated with naga before it is returned. [`run`] and [`check`] execute a module with wgpu
//! and compare its outputs with the interpreter's.
//!
//! WGSL has no `f64`: f64 kernels are refused unless [`Options::f64_as_f32`] asks to compute
//! them in `f32` ([`narrow_f64`]); they are then compared with the interpreter running the
//! same narrowed program, at the `f32` tolerance. `f16` values are stored and computed in `f32`
//! and rounded back to `f16` after every operation, as the interpreter rounds them.

mod body;
mod host;
mod narrow;
mod promote;
mod runner;
mod writer;

pub use host::{HostOp, Kernel, KernelMapping};
pub use narrow::narrow_f64;
pub use runner::{adapter_limits, check, run, GpuCheckReport, GpuRun};
pub use writer::{validate, Module, Writer};

use polyhedral::interp::InterpError;
use polyhedral::pipeline::{self, Compiled, MemoryLevel, TargetDescription};
use polyhedral::program::{Program, ScalarType};
use polyhedral::schedule::map::insert_mapping_marks;

/// What the middle end and the writer know about a GPU: WebGPU's names for its limits. Read
/// from the adapter's `limits()` when a device is present ([`adapter_limits`]), from
/// [`Limits::default`] (WebGPU's guaranteed minimums) when only compiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `maxComputeInvocationsPerWorkgroup`.
    pub max_invocations_per_workgroup: u32,
    /// `maxComputeWorkgroupSizeX/Y/Z`.
    pub max_workgroup_size: [u32; 3],
    /// `maxComputeWorkgroupsPerDimension`: a larger grid is folded into a loop.
    pub max_workgroups_per_dimension: u32,
    /// `maxComputeWorkgroupStorageSize`, in bytes: the budget of promoted tiles.
    pub workgroup_memory_bytes: u32,
    /// The preferred subgroup (warp) width.
    pub subgroup_width: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_invocations_per_workgroup: 256,
            max_workgroup_size: [256, 256, 64],
            max_workgroups_per_dimension: 65535,
            workgroup_memory_bytes: 16384,
            subgroup_width: 32,
        }
    }
}

impl Limits {
    /// The workgroup shape for `dims` mapped loops, innermost first (x, then y, then z):
    /// as many invocations as the limits allow, up to 256, split as evenly as powers of two go.
    pub fn block(&self, dims: usize) -> [u32; 3] {
        let total = self.max_invocations_per_workgroup.clamp(1, 256);
        let mut block = [1u32; 3];
        if dims == 0 {
            return block;
        }
        let mut left = total;
        let dims = dims.min(3);
        let mut d = 0;
        while left >= 2 {
            let k = d % dims;
            if block[k] * 2 > self.max_workgroup_size[k] {
                if (0..dims).all(|j| block[j] * 2 > self.max_workgroup_size[j]) {
                    break;
                }
                d += 1;
                continue;
            }
            block[k] *= 2;
            left /= 2;
            d += 1;
        }
        block
    }
}

/// The GPU as the middle end sees it: one memory level, the workgroup memory, which tiles are
/// sized for.
pub fn target(limits: &Limits) -> TargetDescription {
    TargetDescription {
        name: "gpu".to_string(),
        memory: vec![MemoryLevel {
            name: "workgroup".to_string(),
            bytes: u64::from(limits.workgroup_memory_bytes),
            line_bytes: 128,
        }],
        vector_bytes: 0,
    }
}

/// What the GPU target generates and how it runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The device limits code is generated for.
    pub limits: Limits,
    /// Copy tiles with reuse into workgroup memory and single-invocation accumulators into
    /// registers.
    pub promote: bool,
    /// Compute `f64` kernels in `f32` instead of refusing them.
    pub f64_as_f32: bool,
    /// Part of the adapter's name to pick (case-insensitive); the first adapter otherwise.
    pub adapter: Option<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            limits: Limits::default(),
            promote: true,
            f64_as_f32: false,
            adapter: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not supported on gpu: f64 (WGSL has no 64-bit floats; --gpu-f32 computes the kernel in f32)")]
    F64,
    #[error("not supported by the gpu target yet: {0}")]
    Unsupported(String),
    #[error("invalid AST: {0}")]
    InvalidAst(String),
    #[error("{0}")]
    Pipeline(#[from] pipeline::Error),
    #[error("{0}")]
    Schedule(#[from] polyhedral::schedule::ScheduleError),
    /// A bug of the writer: naga rejected the module it wrote.
    #[error("compiler bug: the generated WGSL does not validate: {message}\n{source_text}")]
    Validation {
        message: String,
        source_text: String,
    },
    #[error("no GPU adapter: {0}")]
    NoAdapter(String),
    #[error("the GPU device failed: {0}")]
    Device(String),
    #[error("the reference interpreter stopped: {0}")]
    Interp(#[from] InterpError),
    #[error("invalid program: {0}")]
    InvalidProgram(String),
}

/// What [`compile`] produced: the program the code is for (narrowed to `f32` when asked) and
/// the pipeline's results with the mapping marks in the tree and the AST.
#[derive(Clone, Debug)]
pub struct GpuCompiled {
    /// The program as given, narrowed to `f32` when [`Options::f64_as_f32`] asked for it:
    /// what the interpreter checks the GPU against.
    pub reference: Program,
    pub compiled: Compiled,
}

/// The program the GPU computes for `program`: the program itself, or the program with every
/// `f64` narrowed to `f32` when `options` allow it; f64 kernels are refused otherwise.
pub fn gpu_program(program: &Program, options: &Options) -> Result<Program, Error> {
    let uses_f64 = program.arrays.iter().any(|a| a.elem == ScalarType::F64)
        || program
            .functions
            .iter()
            .any(|f| f.ret == ScalarType::F64 || f.locals.iter().any(|l| l.ty == ScalarType::F64))
        || program.statements.iter().any(|s| {
            (0..s.exprs.len()).any(|i| {
                program.expr_type(s, polyhedral::program::ExprId(i as u32)) == ScalarType::F64
            })
        });
    if !uses_f64 {
        return Ok(program.clone());
    }
    if !options.f64_as_f32 {
        return Err(Error::F64);
    }
    Ok(narrow_f64(program))
}

/// Runs the optimizing pipeline for the GPU and maps the result (see the module docs).
pub fn compile(
    program: &Program,
    pipeline_options: &pipeline::Options,
    options: &Options,
) -> Result<GpuCompiled, Error> {
    if let Some(a) = program.arrays.iter().find(|a| a.elem == ScalarType::Bool) {
        return Err(Error::Unsupported(format!("the bool array `{}`", a.name)));
    }
    let reference = gpu_program(program, options)?;
    let pipeline_options = pipeline::Options {
        intra_tile: false,
        ..pipeline_options.clone()
    };
    let mut compiled = pipeline::compile(&reference, &target(&options.limits), &pipeline_options)?;
    insert_mapping_marks(&mut compiled.tree)?;
    if pipeline_options.verify {
        polyhedral::schedule::verify(&compiled.program, &compiled.tree)?;
    }
    compiled.ast = polyhedral::generate_ast(&compiled.program, &compiled.tree)?;
    Ok(GpuCompiled {
        reference,
        compiled,
    })
}
