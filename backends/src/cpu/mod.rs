//! The CPU target: C99 + OpenMP.
//!
//! [`Writer`] turns a program and its loop AST into one C translation unit holding the kernel
//! function (its interface is described on [`Writer`]). [`run`] builds that kernel with a generated
//! `main` harness using the system C compiler, runs it on given inputs and reads back every
//! live-out array; [`check`] does what `polyfuse run --target cpu` reports: the interpreter's
//! outputs against the kernel's on the same random inputs, and the kernel's time.
//!
//! The generated C computes exactly what the interpreter computes (every value in its type,
//! rounded where the interpreter rounds; transcendental functions in `double`) and has no
//! undefined behaviour for any input, which the tests check with `-fsanitize=address,undefined`.

mod body;
mod helpers;
mod names;
mod runner;
mod writer;

pub use runner::{check, run, CheckReport, CpuRun};
pub use writer::Writer;

use polyhedral::interp::InterpError;

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
    /// OpenMP threads (`OMP_NUM_THREADS`); `None` leaves the OpenMP default (every core).
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
