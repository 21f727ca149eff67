//! The GPU target: WGSL compute shaders, validated by naga and run through wgpu.
//!
//! [`compile`] runs the optimizing pipeline on the GPU's description ([`target`]: tiles sized
//! for the invocation limits and the workgroup memory; no vector unit, so point bands keep
//! their coincident members outermost, where they can map to invocations), whose last pass
//! inserts the kernel and thread marks of [`polyhedral::passes::map`]. [`Writer`] turns the
//! loop AST into a [`Module`]: one WGSL module with one entry point per kernel and the host
//! program that dispatches them (sequential outer loops, one dispatch per kernel instance),
//! every module validated with naga before it is returned. [`run`] and [`check`] execute a module with wgpu
//! and compare its outputs with the interpreter's.
//!
//! WGSL has no `f64`: f64 kernels are refused unless [`Options::f64_as_f32`] asks to compute
//! them in `f32` ([`narrow_f64`]); they are then compared with the interpreter running the
//! same narrowed program, at the `f32` tolerance. `f16` values are computed in `f32` and rounded
//! back to `f16` after every operation, as the interpreter rounds them; they are stored as
//! `f16` (`enable f16;`) where the adapter has `shader-f16`, else as `f32`. Native `f16`
//! arithmetic is not used: WGSL does not require it to be correctly rounded.

mod body;
mod host;
mod runner;
mod uniform;
mod writer;

pub use crate::narrow::narrow_f64;
pub use host::{HostOp, Kernel, KernelMapping};
pub use runner::{adapter_limits, check, run, GpuCheckReport, GpuRun};
pub use writer::{validate, Module, Writer};

use polyhedral::interp::InterpError;
use polyhedral::pipeline::{self, Compiled};
use polyhedral::program::{Program, ScalarType};
use polyhedral::target::{MemoryKind, MemoryTree, ParallelLevel, TargetDescription};

use crate::report;
use crate::target::{self as table, RunOutput, Source, Target, TargetOptions};

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
    /// The most loop iterations the driver runs in one invocation before it leaves the loop
    /// silently, when it has such a cap: Mesa's llvmpipe (lavapipe) stops every loop after
    /// 65535 iterations of all the loops of one shader invocation together (counted per SIMD
    /// group of invocations, one more for each loop's exit test). With a cap, the writer checks
    /// after every loop that it ran to its end and the runner reports a loop that did not;
    /// the tile sizes keep the sequential work of one invocation well below it.
    pub loop_iterations: Option<u32>,
    /// The adapter has WebGPU's `shader-f16`: `f16` arrays are stored as `array<f16>`
    /// (`enable f16;`), half the bytes of `f32`, and still computed in `f32` with every result
    /// rounded to `f16`, as the interpreter computes them.
    pub f16_storage: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_invocations_per_workgroup: 256,
            max_workgroup_size: [256, 256, 64],
            max_workgroups_per_dimension: 65535,
            workgroup_memory_bytes: 16384,
            subgroup_width: 32,
            loop_iterations: None,
            f16_storage: false,
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

/// The GPU as the middle end sees it: storage buffers in global memory, the workgroup memory
/// (a scratchpad the code copies tiles into), a grid of workgroups of invocations, no vector
/// unit, and no 64-bit floats.
pub fn target(limits: &Limits) -> TargetDescription {
    let mut memory = MemoryTree::global("storage", 1 << 30);
    memory.add(
        "workgroup",
        MemoryKind::Scratchpad,
        u64::from(limits.workgroup_memory_bytes),
        memory.root(),
    );
    TargetDescription {
        name: "gpu".to_string(),
        memory,
        parallel: vec![
            ParallelLevel::Workgroups,
            ParallelLevel::Invocations {
                max_total: limits.max_invocations_per_workgroup,
                max_per_dim: limits.max_workgroup_size,
                max_loop_iterations: limits.loop_iterations,
            },
        ],
        vector: None,
        tlb: None,
        element_types: vec![ScalarType::F16, ScalarType::F32, ScalarType::I32],
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
    #[error(
        "the driver of `{adapter}` stopped a loop before its end (it runs at most {limit} loop \
         iterations per invocation); the results would be wrong: use smaller tiles (--tile) or \
         another adapter"
    )]
    LoopLimit { adapter: String, limit: u32 },
    /// An array larger than one storage buffer binding of the adapter may be.
    #[error(
        "`{array}` does not fit the GPU: {bytes} bytes, and a storage buffer of `{adapter}` \
         holds at most {limit}; use smaller sizes"
    )]
    DoesNotFit {
        array: String,
        bytes: u64,
        adapter: String,
        limit: u64,
    },
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

/// Runs the optimizing pipeline for the GPU, whose passes end with the mapping marks (see the
/// module docs).
pub fn compile(
    program: &Program,
    pipeline_options: &pipeline::Options,
    options: &Options,
) -> Result<GpuCompiled, Error> {
    if let Some(a) = program.arrays.iter().find(|a| a.elem == ScalarType::Bool) {
        return Err(Error::Unsupported(format!("the bool array `{}`", a.name)));
    }
    let reference = gpu_program(program, options)?;
    let compiled = pipeline::compile(&reference, &target(&options.limits), pipeline_options)?;
    Ok(GpuCompiled {
        reference,
        compiled,
    })
}

/// The GPU in the table of targets.
pub struct Gpu;

/// The GPU target's own command-line options.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct GpuArgs {
    /// GPU: do not promote tiles to workgroup memory or accumulators to registers.
    #[arg(long)]
    pub no_promote: bool,
    /// GPU: compute f64 kernels in f32 (WGSL has no f64).
    #[arg(long)]
    pub gpu_f32: bool,
    /// GPU: run on the adapter whose name contains NAME (default: `POLYFUSE_GPU_ADAPTER`, else
    /// the first GPU, else a software adapter).
    #[arg(long, value_name = "NAME")]
    pub adapter: Option<String>,
}

impl Gpu {
    fn options(options: &TargetOptions) -> Options {
        let own: GpuArgs = options.own(Gpu.name());
        Options {
            promote: !own.no_promote,
            f64_as_f32: own.gpu_f32,
            adapter: own.adapter,
            ..Options::default()
        }
    }

    fn error(program: &Program, error: Error) -> table::Error {
        table::Error::target(&program.name, error)
    }
}

impl table::TargetError for Error {
    fn is_budget(&self) -> bool {
        matches!(self, Error::Interp(e) if table::interp_budget(e))
    }
}

impl Target for Gpu {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn about(&self) -> &'static str {
        "WGSL compute shaders, validated by naga and run through wgpu (Vulkan; lavapipe without a GPU)"
    }

    fn args(&self, command: clap::Command) -> clap::Command {
        table::own_args::<GpuArgs>(command)
    }

    fn read_args(
        &self,
        matches: &clap::ArgMatches,
        options: TargetOptions,
    ) -> Result<TargetOptions, clap::Error> {
        table::read_own::<GpuArgs>(self.name(), matches, options)
    }

    fn code(&self) -> Option<&'static str> {
        Some("wgsl")
    }

    fn description(&self, _: &TargetOptions) -> Option<TargetDescription> {
        Some(target(&Limits::default()))
    }

    fn program_for(
        &self,
        program: &Program,
        options: &TargetOptions,
    ) -> Result<Program, table::Error> {
        gpu_program(program, &Gpu::options(options)).map_err(|e| Gpu::error(program, e))
    }

    fn write(
        &self,
        source: &Source,
        compiled: &Compiled,
        options: &TargetOptions,
    ) -> Result<String, table::Error> {
        let options = Gpu::options(options);
        Writer::new(&compiled.program, &options)
            .write(&compiled.ast)
            .map(|m| m.wgsl)
            .map_err(|e| Gpu::error(source.program, e))
    }

    fn run(
        &self,
        program: &Program,
        pipeline: &pipeline::Options,
        options: &TargetOptions,
        seed: u64,
    ) -> Result<RunOutput, table::Error> {
        let mut options = Gpu::options(options);
        // Code for the adapter that runs it.
        let (_, limits) =
            adapter_limits(options.adapter.as_deref()).map_err(|e| Gpu::error(program, e))?;
        options.limits = limits;
        let gpu = compile(program, pipeline, &options).map_err(|e| Gpu::error(program, e))?;
        let module = Writer::new(&gpu.compiled.program, &options)
            .write(&gpu.compiled.ast)
            .map_err(|e| Gpu::error(program, e))?;
        let report = check(
            &gpu.reference,
            &gpu.compiled.program,
            &module,
            &options,
            seed,
        )
        .map_err(|e| Gpu::error(program, e))?;
        let reference = &gpu.reference;
        let results = report::summarize_outputs(reference, &report.outputs);
        let mut json = report::to_value(reference, self.name(), seed, &results);
        json["kernel_seconds"] = serde_json::json!(report.kernel_seconds);
        json["timestamps"] = serde_json::json!(report.timestamps);
        json["dispatches"] = serde_json::json!(report.dispatches);
        json["adapter"] = serde_json::json!(report.adapter);
        report::add_comparison(&mut json, &report.comparison);
        let mut text = String::new();
        if gpu.reference != *program {
            text += "note: f64 computed in f32 (--gpu-f32); compared with the interpreter running \
                     the kernel in f32\n";
        }
        for n in &module.notes {
            text += &format!("note: {n}\n");
        }
        text += &report.to_text(reference);
        Ok(RunOutput {
            text,
            json,
            matches: report.comparison.passed(),
        })
    }

    fn supports(&self, program: &Program, options: &TargetOptions) -> Result<(), table::Error> {
        self.program_for(program, options).map(|_| ())
    }

    fn available(&self) -> Result<(), table::Error> {
        adapter_limits(None)
            .map(|_| ())
            .map_err(|e| table::Error::target("gpu", e))
    }
}
