//! The reference interpreter as a target of the table: it runs a kernel in its original order
//! and prints its outputs; it generates no code.

use polyhedral::pipeline::{self, Compiled};
use polyhedral::program::Program;
use polyhedral::target::TargetDescription;

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
        _: &TargetOptions,
        seed: u64,
    ) -> Result<RunOutput, Error> {
        let mut memory = polyhedral::interp::random_inputs(program, seed);
        let start = std::time::Instant::now();
        polyhedral::interp::run(program, &mut memory)?;
        let elapsed = start.elapsed();
        let results = report::summarize(program, &memory);
        Ok(RunOutput {
            text: report::to_text(program, self.name(), seed, &results, elapsed),
            json: report::to_value(program, self.name(), seed, &results),
            matches: true,
        })
    }
}
