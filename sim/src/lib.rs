//! A DaVinci-like AI accelerator: machine description, instruction set, `.npuasm` assembly text
//! and an instruction-level simulator with exact numerics, per-pipe timing, buffer accounting
//! and race detection.
//!
//! The pipeline is `parse` → `assemble` (against a `Machine`) → `simulate` (with GM input
//! tensors) → `Outcome` (output tensors, `Report`, optional `Timeline`). `run_command` is the
//! whole of `polyfuse sim`.
//!
//! - `machine`: the machine description (default embedded from `machines/davinci910.machine`)
//! - `isa`: memories, pipes, the program tree, and the instruction table from which the
//!   parser, printer, assembler and simulator learn each instruction's fields, pipe and timing
//! - `asm`: lexer, parser with located errors, printer (`parse(print(p)) == p`)
//! - `assemble`: name resolution, buffer placement, operand checks, flattening
//! - `exec`: numerics; `timing`: pipe clocks and issue queues; `gmbus`: GM bandwidth shared
//!   over time; `hazards`: happens-before race detection
//! - `run`: the driver; `report`: text, JSON and SVG output; `inputs`: tensors from files
//! - `launches`: files of several kernels, launched one after another on one GM

mod asm;
mod assemble;
mod diagnostic;
mod exec;
mod gmbus;
mod hazards;
mod inputs;
pub mod isa;
mod launches;
mod machine;
mod report;
mod run;
mod timing;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub use assemble::Kernel;
pub use diagnostic::{Diagnostic, Error, Span};
pub use inputs::{load_inputs, random_inputs};
pub use isa::{DType, Program};
pub use launches::{inputs_of, load_all, random_inputs_all, simulate_all};
pub use machine::{Machine, MemSpec, PathSpec, DEFAULT_MACHINE};
pub use report::{MemStat, OutputSummary, PipeStat, Report, Timeline};
pub use run::{Outcome, SimOptions};

/// A GM tensor's values, each exactly representable in its element type.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub data: Vec<f64>,
}

impl Tensor {
    /// A tensor with the values rounded to `dtype` (nearest even).
    pub fn new(dtype: DType, shape: Vec<u64>, values: impl IntoIterator<Item = f64>) -> Tensor {
        Tensor {
            dtype,
            shape,
            data: values
                .into_iter()
                .map(|v| exec::round_to(v, dtype))
                .collect(),
        }
    }
}

/// Parses `.npuasm` text; `file` is the name shown in diagnostics.
pub fn parse(file: &str, text: &str) -> Result<Program, Error> {
    asm::parse_program(text).map_err(|d| Error::new(file, text, d))
}

/// Prints a program; the text parses back to an equal program.
pub fn print(program: &Program) -> String {
    asm::print_program(program)
}

/// Resolves and places a parsed program on a machine. `file` and `text` are what errors point
/// into (the program's source).
pub fn assemble(
    file: &str,
    text: &str,
    program: &Program,
    machine: &Machine,
) -> Result<Kernel, Error> {
    assemble::assemble(program, machine, Arc::from(file), Arc::from(text))
}

/// Parses and assembles in one step.
pub fn load(file: &str, text: &str, machine: &Machine) -> Result<Kernel, Error> {
    let program = parse(file, text)?;
    assemble(file, text, &program, machine)
}

/// Runs a kernel on the given GM inputs (by parameter name).
pub fn simulate(
    kernel: &Kernel,
    inputs: &BTreeMap<String, Tensor>,
    options: &SimOptions,
) -> Result<Outcome, Error> {
    run::simulate(kernel, inputs, options)
}

/// The seed of inputs generated when no inputs directory is given.
pub const DEFAULT_SEED: u64 = 0x5eed;

/// `polyfuse sim FILE.npuasm [--inputs DIR] [--json] [--timeline out.svg]`: returns the text
/// for stdout, or the rendered diagnostic for stderr (exit status 1).
pub fn run_command(
    path: &Path,
    inputs: Option<&Path>,
    json: bool,
    timeline: Option<&Path>,
) -> Result<String, String> {
    run_command_on(None, path, inputs, json, timeline, &SimOptions::default())
        .map_err(|e| e.message)
}

/// Why a command failed: the rendered diagnostic for stderr, and whether the simulation
/// stopped at one of its budgets (`--max-instructions`, `--max-cycles`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandError {
    pub message: String,
    pub budget: bool,
}

impl From<String> for CommandError {
    fn from(message: String) -> CommandError {
        CommandError {
            message,
            budget: false,
        }
    }
}

/// `run_command` on the machine described by the file `machine` (the default machine if None),
/// within the budgets of `limits` (its `timeline` is `timeline.is_some()`).
pub fn run_command_on(
    machine: Option<&Path>,
    path: &Path,
    inputs: Option<&Path>,
    json: bool,
    timeline: Option<&Path>,
    limits: &SimOptions,
) -> Result<String, CommandError> {
    let machine = match machine {
        None => Machine::default(),
        Some(m) => {
            let text = std::fs::read_to_string(m)
                .map_err(|e| format!("error: cannot read {}: {e}\n", m.display()))?;
            Machine::parse(&m.display().to_string(), &text).map_err(|e| e.render(false))?
        }
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("error: cannot read {}: {e}\n", path.display()))?;
    let file = path.display().to_string();
    let kernels = load_all(&file, &text, &machine).map_err(|e| e.render(false))?;
    let tensors = match inputs {
        Some(dir) => {
            let mut all = BTreeMap::new();
            for (i, name) in inputs_of(&kernels) {
                // Only the tensor no earlier kernel writes is read from the folder.
                let mut program = kernels[i].program().clone();
                program.params.retain(|p| p.name == name);
                all.extend(load_inputs(&program, dir)?);
            }
            all
        }
        None => random_inputs_all(&kernels, DEFAULT_SEED),
    };
    let options = SimOptions {
        timeline: timeline.is_some(),
        ..limits.clone()
    };
    let outcome = simulate_all(&kernels, &tensors, &options).map_err(|e| CommandError {
        message: e.render(false),
        budget: e.budget,
    })?;
    if let (Some(out), Some(t)) = (timeline, &outcome.timeline) {
        std::fs::write(out, t.to_svg())
            .map_err(|e| format!("error: cannot write {}: {e}\n", out.display()))?;
    }
    Ok(if json {
        outcome.report.to_json() + "\n"
    } else {
        outcome.report.to_text()
    })
}
