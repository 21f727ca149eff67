//! The reference interpreter as a target of the table: it runs a kernel in its original order
//! and prints its outputs; it generates no code.

use polyhedral::pipeline::{self, Compiled};
use polyhedral::program::Program;
use polyhedral::target::TargetDescription;

use crate::progress::Progress;
use crate::report;
use crate::target::{Error, RunOutput, Source, Target, TargetOptions};

/// The reference interpreter.
pub struct Interp;

impl Target for Interp {
    fn name(&self) -> &'static str {
        "interp"
    }

    fn about(&self) -> &'static str {
        "the reference interpreter"
    }

    fn code(&self) -> Option<&'static str> {
        None
    }

    fn description(&self, _: &TargetOptions) -> Option<TargetDescription> {
        None
    }

    fn write(&self, _: &Source, _: &Compiled, _: &TargetOptions) -> Result<String, Error> {
        Err(Error::NoCode {
            target: self.name(),
        })
    }

    fn run(
        &self,
        program: &Program,
        _: &pipeline::Options,
        options: &TargetOptions,
        seed: u64,
    ) -> Result<RunOutput, Error> {
        let mut memory = polyhedral::interp::random_inputs(program, seed);
        let start = std::time::Instant::now();
        interpret(program, &mut memory, options)?;
        let elapsed = start.elapsed();
        let results = report::summarize(program, &memory);
        Ok(RunOutput {
            text: report::to_text(program, self.name(), seed, &results, elapsed),
            json: report::to_value(program, self.name(), seed, &results),
            matches: true,
        })
    }
}

/// Runs `program` on the interpreter with the options' threads, and a progress line on a
/// terminal when they allow one.
pub(crate) fn interpret(
    program: &Program,
    memory: &mut polyhedral::interp::Memory,
    options: &TargetOptions,
) -> Result<polyhedral::interp::RunStats, polyhedral::interp::InterpError> {
    let label = format!("{} on interp", program.name);
    let progress = options
        .progress
        .then(|| Progress::for_terminal(&label))
        .flatten();
    let report = |fraction: f64| {
        if let Some(p) = &progress {
            p.update(fraction);
        }
    };
    let run_options = polyhedral::interp::RunOptions {
        threads: options.thread_count(),
        progress: Some(&report),
    };
    let result = polyhedral::interp::run_with(program, memory, &run_options);
    if let Some(p) = &progress {
        p.finish();
    }
    result
}
