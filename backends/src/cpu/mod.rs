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

mod body;
mod helpers;
mod names;
mod runner;
mod scop;
mod writer;

pub use runner::{check, check_transformed, run, CheckReport, CpuRun};
pub use scop::replace_scop;
pub use writer::Writer;

use polyhedral::interp::InterpError;
use polyhedral::pipeline::{MemoryLevel, TargetDescription};

/// The machine the CPU target optimizes for, as the middle end sees it: a 32 KiB L1 data
/// cache, a 1 MiB L2 and a shared L3, 64-byte lines, 256-bit vectors. Fixed rather than read
/// from the build machine, so that generated code does not depend on where it was generated.
pub fn target() -> TargetDescription {
    let level = |name: &str, bytes: u64| MemoryLevel {
        name: name.to_string(),
        bytes,
        line_bytes: 64,
    };
    TargetDescription {
        name: "cpu".to_string(),
        memory: vec![
            level("L1d", 32 << 10),
            level("L2", 1 << 20),
            level("L3", 32 << 20),
        ],
        vector_bytes: 32,
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
    pub min_parallel_work: u64,
    /// OpenMP threads: a `num_threads(N)` clause on every parallel loop, and `OMP_NUM_THREADS`
    /// for the runner; `None` leaves the OpenMP default (every core).
    pub threads: Option<usize>,
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
}
