//! The general lowering: any kernel the middle end scheduled, from its loop AST.
//!
//! The lowerings beside this one take kernels of shapes they recognise (contractions on the
//! Cube, element-wise stages, row reductions) and tile them themselves. This one takes the AST
//! the pipeline generated for the accelerator's description, as the CPU and GPU writers do, and
//! lowers what it says:
//!
//! - **Loops and conditions** run on the scalar unit: a loop with constant bounds is a `for`, one
//!   whose bounds depend on outer loops a `while` over an integer register; conditions and the
//!   floor divisions, moduli, minima and maxima of bounds are computed in integer registers
//!   ([`emit`]).
//! - **Promotion** ([`promote`]). The outermost subtrees whose footprints fit the unified buffer
//!   are *regions*: before one runs, the box of every array it accesses (the rectangular hull of
//!   its accesses over the region's loops, an affine function of the loops outside it, kept
//!   inside the array) is copied from GM into UB; the region computes there; the boxes of the
//!   arrays it writes go back to GM. Elements of a box the region does not write go back as
//!   they came, and regions run one after the other, so that is exact.
//! - **Statements** ([`scalar`]) run one instance at a time on the scalar unit (each counted by
//!   a `tally`, which the simulator's report totals): loads from the
//!   boxes, f32 arithmetic in float registers (f16 values too, rounded to f16 after every
//!   operation as in the interpreter), i32 arithmetic in integer registers, comparisons and selections as branches;
//!   what the scalar unit has no instruction for ([`math`]): the transcendental functions on
//!   one lane of the Vector unit, sine and cosine by reduction and polynomials, conversions to
//!   integers, floor and ceil. Calls of the kernel's scalar functions are inlined ([`call`]).
//! - **Vector loops** ([`vector`]): innermost loops whose iterations are independent and whose
//!   statements write consecutive elements run as vector instructions over the boxes, the
//!   last partial repeat under a counted mask; innermost loops that fold their iterations into
//!   one element run as the Vector unit's reductions, in the loop's order; a statement that
//!   calls a function runs in its masked form ([`masked`]): branches as selects, loops on
//!   the count of their active lanes. A parallel loop over rows around such a loop runs
//!   its rows as the repeats of each instruction ([`rows`]).
//! - **Cores** ([`cores`]): the iterations of outermost parallel loops spread over the blocks.
//!
//! Pipes are ordered with `pipe_barrier ALL` around every region's copies, a flag pair before
//! the first instruction after vector work that may see it unfinished ([`waits`]), and flags between the pipes of
//! the Cube's tiles ([`matrix`]), so the programs are race-free.
//! Every kernel the middle end schedules is lowered; f64 is computed in f32 when asked for
//! (`--npu-f32`) and refused otherwise.

mod call;
mod cores;
mod emit;
mod masked;
mod math;
mod matrix;
mod promote;
mod rows;
mod scalar;
mod vector;
mod waits;

use polyhedral::pipeline;
use polyhedral::program::{Program, ScalarType};

use super::{Error, NpuTarget, Options};

/// The `.npuasm` program of `program`, lowered from the AST the pipeline generates for it.
pub(super) fn compile(
    program: &Program,
    target: &NpuTarget,
    options: &Options,
) -> Result<String, Error> {
    let narrowed;
    let program = if options.f64_as_f32 {
        narrowed = crate::narrow::narrow_f64(program);
        &narrowed
    } else {
        program
    };
    supports(program, false)?;
    let compiled = pipeline::compile(program, &target.description(false), &options.pipeline)
        .map_err(|e| Error::Pipeline(e.to_string()))?;
    let isa = emit::Emitter::lower(&compiled.program, &compiled.deps, &compiled.ast, target)?;
    Ok(sim::print(&isa))
}

/// Whether the statements of `program` use only what this lowering computes, or why not
/// (f64 only when it is computed in f32).
pub(super) fn supports(program: &Program, f64_as_f32: bool) -> Result<(), Error> {
    const F32: &str = "the machine computes in f16 and f32; `--npu-f32` computes f64 in f32";
    if !f64_as_f32 {
        if let Some(a) = program.arrays.iter().find(|a| a.elem == ScalarType::F64) {
            return Err(Error::Unsupported(format!(
                "f64 (array `{}`; {F32})",
                a.name
            )));
        }
        if let Some(s) = program.statements.iter().find(|s| {
            s.exprs
                .iter()
                .any(|(id, _)| program.expr_type(s, id) == ScalarType::F64)
        }) {
            return Err(Error::Unsupported(format!(
                "f64 arithmetic (statement {}; {F32})",
                s.name
            )));
        }
        if let Some(f) = program
            .functions
            .iter()
            .find(|f| f.ret == ScalarType::F64 || f.locals.iter().any(|l| l.ty == ScalarType::F64))
        {
            return Err(Error::Unsupported(format!(
                "f64 (function `{}`; {F32})",
                f.name
            )));
        }
    }
    Ok(())
}
