//! Runs a compiled program on the simulator and checks it against the interpreter.
//!
//! The inputs are the interpreter's random inputs (`polyhedral::interp::random_inputs`), as
//! the CPU runner uses them, so the comparison is element by element with the same tolerances
//! ([`crate::compare`]). With [`Options::f64_as_f32`] the program is narrowed to f32 first
//! ([`crate::narrow::narrow_f64`], as the GPU does): the machine computes it in f32 and is
//! compared with the interpreter running the same narrowed program, at the f32 tolerance.

use std::collections::BTreeMap;

use polyhedral::interp;
use polyhedral::program::ArrayId;
use polyhedral::Program;
use sim::{SimOptions, Tensor};

use super::{compile, Error, NpuTarget, Options};
use crate::compare::{compare, Comparison};

/// What `polyfuse run --target npu` reports.
#[derive(Clone, Debug)]
pub struct NpuCheck {
    /// The program that ran.
    pub asm: String,
    pub comparison: Comparison,
    /// Every live-out array as the machine computed it, in [`ArrayId`] order.
    pub outputs: Vec<(ArrayId, Vec<f64>)>,
    pub report: sim::Report,
    pub timeline: Option<sim::Timeline>,
    pub seed: u64,
}

impl NpuCheck {
    /// The text `polyfuse run --target npu` prints.
    pub fn to_text(&self, program: &Program) -> String {
        let mut out = format!("kernel {} on npu (seed {})\n", program.name, self.seed);
        out += &self.comparison.to_text(program);
        out += &self.report.to_text();
        out += &self.comparison.verdict();
        out
    }
}

/// Every live-out array's contents, in [`ArrayId`] order.
pub type Outputs = Vec<(ArrayId, Vec<f64>)>;

/// Assembles `asm` and runs it on the interpreter's random inputs of `seed`, stopping after
/// `budget` instructions.
pub fn simulate(
    program: &Program,
    asm: &str,
    target: &NpuTarget,
    seed: u64,
    timeline: bool,
    budget: u64,
) -> Result<(Outputs, sim::Outcome), Error> {
    let file = format!("{}.npuasm", program.name);
    let kernels = sim::load_all(&file, asm, &target.machine)
        .map_err(|e| Error::Simulator(e.render(false)))?;
    let memory = interp::random_inputs(program, seed);
    let mut inputs = BTreeMap::new();
    // What the kernels read before writing: the program's inputs (a temporary one kernel
    // writes for the next is not one).
    for (k, name) in sim::inputs_of(&kernels) {
        let Some(id) = program.array_by_name(&name) else {
            continue;
        };
        // An output the kernels declare `inout` starts with the caller's contents, and a
        // temporary written in part (declared `inout` so that the rest is kept) with the
        // interpreter's zeros.
        let Some(param) = kernels[k].program().params.iter().find(|p| p.name == name) else {
            continue;
        };
        inputs.insert(
            name,
            Tensor::new(
                param.dtype,
                param.shape.clone(),
                memory.array(id).iter().copied(),
            ),
        );
    }
    let options = SimOptions {
        timeline,
        max_instructions: budget,
        ..SimOptions::default()
    };
    let outcome = sim::simulate_all(&kernels, &inputs, &options).map_err(|e| match e.budget {
        true => Error::Budget(e.render(false)),
        false => Error::Simulator(e.render(false)),
    })?;
    let mut outputs = Vec::new();
    for (k, arr) in program.arrays.iter().enumerate() {
        if !arr.role.is_live_out() {
            continue;
        }
        let id = ArrayId(k as u32);
        match outcome.outputs.get(&arr.name) {
            Some(t) => outputs.push((id, t.data.clone())),
            // An output no kernel names (no instance writes it) keeps the caller's contents.
            None => outputs.push((id, memory.array(id).to_vec())),
        }
    }
    Ok((outputs, outcome))
}

/// Instructions executed per statement instance that the budget allows: the general lowering
/// runs an instance that the Vector unit does not take in a few dozen scalar instructions.
const INSTRUCTIONS_PER_INSTANCE: f64 = 48.0;

/// The most instructions any run is allowed (a few minutes of simulation): a kernel whose
/// scalar program needs more stops with the simulator's budget error instead of running for
/// hours.
const MOST_INSTRUCTIONS: u64 = 500_000_000;

/// The simulator's instruction budget for `program`: the default, or more for a kernel with
/// more statement instances than it allows, so that the budget stops programs that run away
/// rather than programs that are merely long. The instances are those of the original loops and
/// of the middle end's AST for `target` with `options` (whose loops may run over more
/// iterations than hold instances, with guards inside), whichever is more.
fn instruction_budget(program: &Program, target: &NpuTarget, options: &Options) -> u64 {
    let params = program.param_values();
    let work =
        |ast: &polyhedral::ast::Ast| polyhedral::ast::estimate_work(ast, &params, &mut Vec::new());
    let original = polyhedral::ast::original_ast(program)
        .map(|ast| work(&ast))
        .unwrap_or(0.0);
    let scheduled = polyhedral::pipeline::compile(
        program,
        &target.description(options.f64_as_f32),
        &options.pipeline,
    )
    .map(|c| work(&c.ast))
    .unwrap_or(0.0);
    let wanted = (original.max(scheduled) * INSTRUCTIONS_PER_INSTANCE) as u64;
    wanted.clamp(SimOptions::MAX_INSTRUCTIONS, MOST_INSTRUCTIONS)
}

/// Compiles `program`, runs it on the simulator and compares with the interpreter.
pub fn check(
    program: &Program,
    target: &NpuTarget,
    options: &Options,
    seed: u64,
    timeline: bool,
) -> Result<NpuCheck, Error> {
    let narrowed;
    let program = if options.f64_as_f32 {
        narrowed = crate::narrow::narrow_f64(program);
        &narrowed
    } else {
        program
    };
    let asm = compile(program, target, options)?;
    // The reference first, as on the other targets: a kernel the interpreter stops on (a
    // runaway loop, a division by zero) stops the same way on every target.
    let mut expected = interp::random_inputs(program, seed);
    interp::run(program, &mut expected)?;
    let budget = instruction_budget(program, target, options);
    let (outputs, outcome) = simulate(program, &asm, target, seed, timeline, budget)?;
    Ok(NpuCheck {
        asm,
        comparison: compare(program, &expected, &outputs),
        outputs,
        report: outcome.report,
        timeline: outcome.timeline,
        seed,
    })
}
