//! The CPU target: C99 + OpenMP.
//!
//! [`Writer`] turns a program and its loop AST into one C translation unit holding the kernel
//! function (its interface is described on [`Writer`]). [`run`] builds that kernel with a generated
//! `main` harness using the system C compiler, runs it on given inputs and reads back every
//! live-out array; [`check`] does what `polyfuse run --target cpu` reports: the interpreter's
//! outputs against the kernel's on the same random inputs, and the kernel's time.
//! [`replace_scop`] is the source-to-source form for C input: the file the program came from,
//! its `#pragma scop` region replaced by the generated loops.
//!
//! The generated C computes exactly what the interpreter computes (every value in its type,
//! rounded where the interpreter rounds; transcendental functions in `double`) and has no
//! undefined behaviour for any input, which the tests check with `-fsanitize=address,undefined`.

mod accumulate;
mod body;
mod helpers;
mod lanes;
mod micro;
mod micro_vector;
pub mod models;
mod names;
pub mod profit;
mod reduction;
mod runner;
mod scop;
mod syntax;
mod vector;
mod writer;

pub use models::{CacheLevel, Caches, CpuModel};
pub use runner::{check, check_transformed, run, CheckReport, CpuRun};
pub use scop::replace_scop;
pub use writer::Writer;

use polyhedral::interp::InterpError;
use polyhedral::pipeline::{self, Compiled};
use polyhedral::program::{Program, ScalarType, SourceKind};
use polyhedral::target::{
    CacheGeometry, MemoryTree, ParallelLevel, TargetDescription, Tlb, VectorUnit,
};

use crate::report;
use crate::target::{self as table, RunOutput, Source, Target, TargetOptions};

/// The machine the CPU target optimizes for, as the middle end sees it: the caches and the
/// vector unit of the default [`CpuModel`] (a 32 KiB 8-way L1 data cache, a 1 MiB 16-way L2
/// and a shared 32 MiB 16-way L3, all with 64-byte lines; 256-bit vectors, 16 registers, as on
/// current x86 cores with AVX2; [`description_for`] gives the others), threads sharing memory.
/// The miss penalties (the next level's latency beyond this one's, in cycles) are typical of
/// current x86 server cores. Fixed rather than read from the build machine, so that generated
/// code does not depend on where it was generated. The data TLB holds 64 translations of 4 KiB
/// pages.
pub fn description() -> TargetDescription {
    description_for(&CpuModel::default())
}

/// The description of [`description`] with the caches and the vector unit of `model`.
pub fn description_for(model: &CpuModel) -> TargetDescription {
    let caches = &model.caches;
    let cache = |ways, miss_penalty_cycles| CacheGeometry {
        line_bytes: caches.line_bytes,
        ways,
        miss_penalty_cycles,
    };
    let mut memory = MemoryTree::global("DRAM", 1 << 36);
    let l3 = memory.add_cache(
        "L3",
        caches.l3.bytes,
        cache(caches.l3.ways, 200),
        memory.root(),
    );
    let l2 = memory.add_cache("L2", caches.l2.bytes, cache(caches.l2.ways, 40), l3);
    memory.add_cache("L1d", caches.l1d.bytes, cache(caches.l1d.ways, 10), l2);
    TargetDescription {
        name: "cpu".to_string(),
        memory,
        parallel: vec![ParallelLevel::Threads { count: None }],
        vector: Some(VectorUnit {
            bytes: model.vector_bytes,
            tile_iterations: 128,
            registers: model.vector_registers,
            tile_registers: model.tile_registers,
            fma_latency: model.fma_latency,
            fma_pipes: model.fma_pipes,
        }),
        tlb: Some(Tlb {
            entries: 64,
            page_bytes: 4096,
        }),
        element_types: vec![
            ScalarType::F16,
            ScalarType::F32,
            ScalarType::F64,
            ScalarType::I32,
        ],
    }
}

/// The CPU target of the table.
pub struct Cpu;

/// The CPU target's own command-line options.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CpuArgs {
    /// CPU: the CPU to optimize for: x86-64-v3 (AVX2: 32-byte vectors, 16 registers; the
    /// default), x86-64-v4 (AVX-512: 64-byte vectors, 32 registers) or native (the one of this
    /// machine).
    #[arg(long, value_name = "NAME", value_parser = parse_cpu)]
    pub cpu: Option<CpuModel>,
    /// CPU: run scalar functions one element at a time instead of vectorised over the
    /// innermost parallel loop (for comparison).
    #[arg(long)]
    pub no_vectorize_functions: bool,
}

fn parse_cpu(text: &str) -> Result<CpuModel, String> {
    CpuModel::find(text.trim())
        .ok_or_else(|| format!("unknown CPU `{text}` (known: {})", CpuModel::names()))
}

impl Cpu {
    /// The writer's options: the target's own, the threads, and whether the pipeline marked
    /// register tiles.
    fn options(options: &TargetOptions, register_tile: bool) -> Options {
        let own: CpuArgs = options.own(Cpu.name());
        Options::for_model(own.cpu.unwrap_or_default()).with(|o| {
            o.threads = options.threads;
            o.register_tile = register_tile;
            o.vectorize_functions = !own.no_vectorize_functions;
        })
    }
}

impl Target for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn about(&self) -> &'static str {
        "C99 + OpenMP, built with the system C compiler"
    }

    fn args(&self, command: clap::Command) -> clap::Command {
        table::own_args::<CpuArgs>(command)
    }

    fn read_args(
        &self,
        matches: &clap::ArgMatches,
        options: TargetOptions,
    ) -> Result<TargetOptions, clap::Error> {
        table::read_own::<CpuArgs>(self.name(), matches, options)
    }

    fn code(&self) -> Option<&'static str> {
        Some("c")
    }

    fn description(&self, options: &TargetOptions) -> Option<TargetDescription> {
        let own: CpuArgs = options.own(self.name());
        Some(description_for(&own.cpu.unwrap_or_default()))
    }

    fn write(
        &self,
        source: &Source,
        compiled: &Compiled,
        options: &TargetOptions,
    ) -> Result<String, table::Error> {
        let options = Cpu::options(options, compiled.options.register_tile);
        let generated = match (&source.program.source, source.text) {
            (SourceKind::CScop { .. }, Some(text)) => {
                replace_scop(&compiled.program, &compiled.ast, text, &options)
            }
            _ => Writer::new(&compiled.program, &options).write(&compiled.ast),
        };
        generated.map_err(|e| table::Error::target(&source.program.name, e))
    }

    fn run(
        &self,
        program: &Program,
        pipeline: &pipeline::Options,
        options: &TargetOptions,
        seed: u64,
    ) -> Result<RunOutput, table::Error> {
        let compiled = table::compile(self, program, pipeline, options)?;
        let report = check_transformed(
            program,
            &compiled.program,
            &compiled.ast,
            &Cpu::options(options, pipeline.register_tile),
            seed,
        )
        .map_err(|e| table::Error::target(&program.name, e))?;
        let results = report::summarize_outputs(program, &report.outputs);
        let mut json = report::to_value(program, self.name(), seed, &results);
        json["kernel_seconds"] = serde_json::json!(report.kernel_seconds);
        report::add_comparison(&mut json, &report.comparison);
        Ok(RunOutput {
            text: report.to_text(program),
            json,
            matches: report.comparison.passed(),
        })
    }
}

/// What the C writer emits and how the runner builds and runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Whether to emit OpenMP pragmas for parallel and vectorizable loops.
    pub openmp: bool,
    /// The C compiler.
    pub cc: String,
    /// Flags for the C compiler. `-ffp-contract=off` must stay: fused multiply-adds round
    /// differently from the interpreter.
    pub cflags: Vec<String>,
    /// A parallel loop becomes `omp parallel for` only when one execution of it runs at least
    /// this many statement instances at the program's sizes (estimated with
    /// [`polyhedral::ast::estimate_work`]); below that, starting the threads costs more than
    /// they save, and the loop runs sequentially (an inner parallel loop may take its place).
    /// Nor does a loop that runs a single iteration there (the middle execution of the
    /// loops around it). 0 makes every parallel loop `omp parallel for`.
    pub min_parallel_work: u64,
    /// OpenMP threads: a `num_threads(N)` clause on every parallel loop, and `OMP_NUM_THREADS`
    /// for the runner; `None` leaves the OpenMP default (every core).
    pub threads: Option<usize>,
    /// Unroll a loop that carries no dependence around a vectorized innermost loop and jam
    /// the copies into that loop (a register tile: one vector operand reused by several rows),
    /// by a quarter of the vector registers of `cpu`.
    pub register_tile: bool,
    /// Whether loops that call scalar functions run them vectorised (see [`vector`]): the
    /// default; off, the functions run one element at a time.
    pub vectorize_functions: bool,
    /// Vectorise even the bodies that the C compiler vectorises by itself
    /// ([`profit`]), which otherwise stay scalar.
    pub vectorize_plain_functions: bool,
    /// The CPU the code is for: its vector unit sizes vectors and register tiles.
    pub cpu: CpuModel,
}

impl Options {
    /// The default options for `model`.
    pub fn for_model(model: CpuModel) -> Options {
        Options {
            cpu: model,
            ..Options::default()
        }
    }

    /// These options changed by `change`.
    pub fn with(mut self, change: impl FnOnce(&mut Options)) -> Options {
        change(&mut self);
        self
    }

    /// The target description the code is written for.
    pub fn description(&self) -> TargetDescription {
        description_for(&self.cpu)
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            openmp: true,
            cc: "cc".to_string(),
            cflags: ["-O3", "-march=native", "-fopenmp", "-ffp-contract=off"]
                .map(String::from)
                .to_vec(),
            threads: None,
            min_parallel_work: 1 << 15,
            register_tile: true,
            vectorize_functions: true,
            vectorize_plain_functions: false,
            cpu: CpuModel::default(),
        }
    }
}

impl table::TargetError for Error {
    fn is_budget(&self) -> bool {
        match self {
            Error::Interp(e) => table::interp_budget(e),
            Error::TimeLimit { .. } => true,
            _ => false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid program: {0}")]
    InvalidProgram(String),
    #[error("invalid AST: {0}")]
    InvalidAst(String),
    #[error("not supported by the cpu target yet: {0}")]
    Unsupported(String),
    #[error("the reference interpreter stopped: {0}")]
    Interp(#[from] InterpError),
    #[error("cannot {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("the C compiler `{cc}` could not be started: {source}")]
    CompilerMissing { cc: String, source: std::io::Error },
    #[error("the generated C does not build ({command}):\n{log}")]
    Build { command: String, log: String },
    #[error("the generated kernel failed ({status}):\n{log}")]
    Kernel { status: String, log: String },
    /// The built kernel ran past its time limit and was stopped.
    #[error(
        "the generated kernel ran longer than its limit of {seconds:.0} s (a minute plus twenty \
         times the interpreter's time) and was stopped"
    )]
    TimeLimit { seconds: f64 },
}
