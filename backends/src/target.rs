//! The table of targets: everything the command line knows about a target comes from here.
//!
//! A [`Target`] gives its name and a line of help, its own command-line arguments and the
//! options it reads from them ([`Target::args`], [`Target::read_args`]), its
//! [`TargetDescription`] (what the middle end optimizes for), its writer (the code it emits,
//! its errors behind [`TargetError`]) and its runner ([`Target::run`]: the kernel run on
//! deterministic random inputs and compared with the reference interpreter). [`TARGETS`] lists
//! them in the order `run --target all` runs them; [`with_args`] and [`read_args`] give the
//! command line every target's arguments, and [`compile`] and [`emit`] drive the optimizing
//! pipeline for any target, so a target added to the table (or defined elsewhere, as the tests
//! do) needs nothing else.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use polyhedral::passes;
use polyhedral::pipeline::{self, Compiled};
use polyhedral::program::Program;
use polyhedral::target::TargetDescription;

use crate::{cpu, gpu, interp, npu};

/// The targets, in the order `run --target all` runs them.
pub static TARGETS: &[&dyn Target] = &[&interp::Interp, &cpu::Cpu, &gpu::Gpu, &npu::Npu];

/// The target called `name`.
pub fn find(name: &str) -> Result<&'static dyn Target, Error> {
    TARGETS
        .iter()
        .copied()
        .find(|t| t.name() == name)
        .ok_or_else(|| Error::UnknownTarget {
            name: name.to_string(),
            known: names(),
        })
}

/// The names of every target, comma-separated, for messages.
pub fn names() -> String {
    TARGETS
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Options the command line gives every target, and each target's own options.
#[derive(Clone, Debug, Default)]
pub struct TargetOptions {
    /// Threads of the generated code and of the interpreter (`None`: every core).
    pub threads: Option<usize>,
    /// Record the run's timeline where the target has one (written by `run --timeline`).
    pub timeline: bool,
    /// Whether a long interpreter run may show a progress line (on a terminal only).
    pub progress: bool,
    /// Every statement group its own kernel (`--fuse nofuse`), for targets that fuse by their
    /// own rules otherwise.
    pub unfused: bool,
    /// The options each target read from its own arguments, by target name.
    own: BTreeMap<&'static str, Arc<dyn Any + Send + Sync>>,
}

impl TargetOptions {
    /// The threads to use: the ones asked for, or every core.
    pub fn thread_count(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// These options with `own` as the options of the target `name`.
    pub fn with_own<T: Any + Send + Sync>(mut self, name: &'static str, own: T) -> TargetOptions {
        self.own.insert(name, Arc::new(own));
        self
    }

    /// The options of the target `name`, or the defaults of their type where it has none.
    pub fn own<T: Any + Clone + Default>(&self, name: &str) -> T {
        self.own
            .get(name)
            .and_then(|o| o.downcast_ref::<T>())
            .cloned()
            .unwrap_or_default()
    }
}

/// `command` with the arguments of `A`, a target's own (clap's derived `Args`): what a
/// target's [`Target::args`] returns.
pub fn own_args<A: clap::Args>(command: clap::Command) -> clap::Command {
    A::augment_args(command)
}

/// `options` with the target `name`'s own options `A` read from `matches`: what a target's
/// [`Target::read_args`] returns.
pub fn read_own<A: clap::FromArgMatches + Any + Send + Sync>(
    name: &'static str,
    matches: &clap::ArgMatches,
    options: TargetOptions,
) -> Result<TargetOptions, clap::Error> {
    Ok(options.with_own(name, A::from_arg_matches(matches)?))
}

/// `command` with the own arguments of every target of `targets`.
pub fn with_args(command: clap::Command, targets: &[&dyn Target]) -> clap::Command {
    targets.iter().fold(command, |c, t| t.args(c))
}

/// `options` with the own options every target of `targets` reads from `matches`.
pub fn read_args(
    targets: &[&dyn Target],
    matches: &clap::ArgMatches,
    options: TargetOptions,
) -> Result<TargetOptions, clap::Error> {
    targets
        .iter()
        .try_fold(options, |o, t| t.read_args(matches, o))
}

/// A kernel as read: the program and, for C input, the text of the file it came from (for
/// source-to-source output).
pub struct Source<'a> {
    pub program: &'a Program,
    pub text: Option<&'a str>,
}

/// What a target's run produced.
pub struct RunOutput {
    /// What `polyfuse run` prints.
    pub text: String,
    /// The JSON document of `polyfuse run --json`.
    pub json: serde_json::Value,
    /// Whether the outputs match the interpreter's.
    pub matches: bool,
}

/// One target.
pub trait Target: Sync {
    /// The `--target` value.
    fn name(&self) -> &'static str;
    /// One line for `--help`.
    fn about(&self) -> &'static str;
    /// The target's own command-line arguments, added to `compile` and `run` (their help names
    /// the target); none by default.
    fn args(&self, command: clap::Command) -> clap::Command {
        command
    }
    /// `options` with the target's own options read from `matches` (see
    /// [`TargetOptions::with_own`]); `options` as they are by default.
    fn read_args(
        &self,
        _matches: &clap::ArgMatches,
        options: TargetOptions,
    ) -> Result<TargetOptions, clap::Error> {
        Ok(options)
    }
    /// The `--emit` name of the code the target writes (`c`), or `None` for a target that
    /// only runs kernels (the interpreter).
    fn code(&self) -> Option<&'static str>;
    /// What the middle end optimizes for; `None` for a target that only runs kernels.
    fn description(&self, options: &TargetOptions) -> Option<TargetDescription>;
    /// The code for `compiled`, the optimized form of `source`.
    fn write(
        &self,
        source: &Source,
        compiled: &Compiled,
        options: &TargetOptions,
    ) -> Result<String, Error>;
    /// Runs `program` (optimized with `pipeline`) on the random inputs of `seed` and compares
    /// its outputs with the interpreter's.
    fn run(
        &self,
        program: &Program,
        pipeline: &pipeline::Options,
        options: &TargetOptions,
        seed: u64,
    ) -> Result<RunOutput, Error>;
    /// The program the target compiles for `program` (the GPU narrows f64 to f32 when asked);
    /// the program itself by default.
    fn program_for(&self, program: &Program, _options: &TargetOptions) -> Result<Program, Error> {
        Ok(program.clone())
    }
    /// Whether the target can run here; `run --target all` skips the ones that cannot.
    fn available(&self) -> Result<(), Error> {
        Ok(())
    }
    /// Whether the target takes this kernel; `run --target all` skips the ones that do not.
    fn supports(&self, _program: &Program, _options: &TargetOptions) -> Result<(), Error> {
        Ok(())
    }
}

/// What `compile --emit` writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Emit {
    /// The target's code.
    Code,
    /// The optimized schedule tree, or the tree after one stage of the pipeline.
    Tree { after: Option<String> },
    /// The loop AST generated from the optimized tree.
    Ast,
    /// The dependences the scheduler worked from.
    Deps,
    /// The cache model's predicted misses per tile band and cache level, for the chosen tile
    /// sizes and the search's runner-up.
    CacheModel,
    /// The program the schedule is for: the input, with arrays expanded where the pipeline
    /// expanded them.
    Program,
}

impl Emit {
    /// Reads an `--emit` value for `target`: its code's name, `tree`, `tree=after:STAGE`,
    /// `ast`, `deps`, `program` or `cache-model`.
    pub fn parse(text: &str, target: &dyn Target) -> Result<Emit, Error> {
        let emit = match text {
            "tree" => Emit::Tree { after: None },
            "ast" => Emit::Ast,
            "deps" => Emit::Deps,
            "cache-model" => Emit::CacheModel,
            "program" => Emit::Program,
            _ if Some(text) == target.code() => Emit::Code,
            _ => match text.strip_prefix("tree=after:") {
                Some(stage) if passes::stages().any(|s| s == stage) => Emit::Tree {
                    after: Some(stage.to_string()),
                },
                Some(stage) => {
                    return Err(Error::Usage(format!(
                        "`{stage}` is not a stage of the pipeline; the stages are {}",
                        passes::stages().collect::<Vec<_>>().join(", ")
                    )))
                }
                None => {
                    let code = target.code().map(|c| format!("{c}, ")).unwrap_or_default();
                    return Err(Error::Usage(format!(
                        "`--emit {text}` is not something the {} target writes; it writes {code}\
                         tree, tree=after:STAGE, ast, deps, program or cache-model",
                        target.name()
                    )));
                }
            },
        };
        Ok(emit)
    }
}

/// Runs the optimizing pipeline on `program` for `target`.
pub fn compile(
    target: &dyn Target,
    program: &Program,
    pipeline: &pipeline::Options,
    options: &TargetOptions,
) -> Result<Compiled, Error> {
    let description = target.description(options).ok_or(Error::NoCode {
        target: target.name(),
    })?;
    let program = &target.program_for(program, options)?;
    pipeline::compile(program, &description, pipeline).map_err(|source| Error::Pipeline {
        kernel: program.name.clone(),
        source,
    })
}

/// What `polyfuse compile --emit …` writes for `source` on `target`.
pub fn emit(
    target: &dyn Target,
    source: &Source,
    what: &Emit,
    pipeline: &pipeline::Options,
    options: &TargetOptions,
) -> Result<String, Error> {
    let compiled = compile(target, source.program, pipeline, options)?;
    Ok(match what {
        Emit::Code => target.write(source, &compiled, options)?,
        Emit::Tree { after: None } => compiled.tree.display(&compiled.program),
        Emit::Tree { after: Some(stage) } => match compiled.tree_after(stage) {
            Some(tree) => tree.display(&compiled.program),
            None => {
                return Err(Error::Usage(format!(
                    "the stage `{stage}` did not run for this kernel on {}; the stages that \
                     ran are {}",
                    target.name(),
                    compiled
                        .stages
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        },
        Emit::Ast => compiled.ast.display(&compiled.program).to_string(),
        Emit::Deps => compiled.deps.display(&compiled.program).to_string(),
        Emit::Program => compiled.program.to_string(),
        Emit::CacheModel => {
            let description = target.description(options).ok_or(Error::NoCode {
                target: target.name(),
            })?;
            polyhedral::cache_model::report(&compiled, &description).map_err(|e| {
                Error::CacheModel {
                    kernel: compiled.program.name.clone(),
                    what: e.0,
                }
            })?
        }
    })
}

/// What can go wrong behind the table; each message is one line, except the build and run
/// logs of generated code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown target `{name}`; the targets are {known}")]
    UnknownTarget { name: String, known: String },
    #[error("the {target} target generates no code: it runs kernels in their original order")]
    NoCode { target: &'static str },
    #[error("{0}")]
    Usage(String),
    #[error("{kernel}: {source}")]
    Pipeline {
        kernel: String,
        source: pipeline::Error,
    },
    /// What a target's writer or runner found (see [`TargetError`]).
    #[error("{kernel}: {error}")]
    Target {
        kernel: String,
        error: Box<dyn TargetError>,
    },
    #[error("{kernel}: not supported yet by the cache model: {what}")]
    CacheModel { kernel: String, what: String },
    #[error("the interpreter stopped: {0}")]
    Interp(#[from] polyhedral::interp::InterpError),
}

/// An error of a target's own (its writer's, its runner's), one line.
pub trait TargetError: std::error::Error + Send + Sync + 'static {
    /// Whether a budget ended the run (a time or instruction limit, or the interpreter's, see
    /// [`interp_budget`]) rather than a fault of the kernel or the compiler.
    fn is_budget(&self) -> bool {
        false
    }
}

/// Whether the interpreter stopped at one of its budgets (its loop limit or its instance
/// budget).
pub fn interp_budget(e: &polyhedral::interp::InterpError) -> bool {
    use polyhedral::interp::InterpError;
    matches!(
        e,
        InterpError::NonTerminating { .. } | InterpError::InstanceBudget { .. }
    )
}

impl Error {
    /// `error` of a target, about `kernel`.
    pub fn target(kernel: &str, error: impl TargetError) -> Error {
        Error::Target {
            kernel: kernel.to_string(),
            error: Box::new(error),
        }
    }

    /// Whether a budget ended the run (the interpreter's loop limit and instance budget, the
    /// simulator's instruction or cycle budget, the CPU kernel's time limit) rather than a
    /// fault of the kernel or the compiler.
    pub fn is_budget(&self) -> bool {
        match self {
            Error::Interp(e) => interp_budget(e),
            Error::Target { error, .. } => error.is_budget(),
            _ => false,
        }
    }
}

impl fmt::Debug for dyn Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
