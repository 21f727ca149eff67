//! Whether the explicit vector variant of a statement body pays on a CPU whose C compiler
//! vectorises loops itself: a model of the C compiler's loop vectoriser, which only the CPU
//! target has.
//!
//! A loop vectoriser (gcc's and clang's at `-O3`) if-converts a loop body that has branches
//! but no inner loop, once the scalar functions it calls are inlined, as long as every
//! operation has a vector form: arithmetic, comparisons, selects, min / max, `sqrt`, `abs`,
//! `floor`, `ceil`. Such a body gains nothing from the masked form: the compiler's code is the
//! same selects without the mask tests of the branches on superword condition, and may use
//! wider vectors. The masked form pays where the compiler gives up: a `while` loop whose trip
//! count varies between lanes, a transcendental function (`exp`, `tanh`, … are library calls
//! it does not vectorise without a vector math library), integer division, `f16` arithmetic
//! (the scalar code rounds each result to `f16` through a helper with branches on the bits of
//! a `double`, which gcc 12 does not vectorise; the masked form rounds whole vectors).
//!
//! [`interleave`] decides how many vectors one run of a masked form interleaves.

use polyhedral::program::{BinaryOp, MathFn, ScalarType};
use polyhedral::vectorize::classify::Class;
use polyhedral::vectorize::mask::MNode;
use polyhedral::vectorize::ssa::{Op, ValueId};
use polyhedral::vectorize::VectorProgram;

/// Why the compiler is expected to vectorise the scalar loop around variant `variant` by
/// itself, or `None` when the masked form is worth writing.
pub fn compiler_vectorises(vp: &VectorProgram, variant: usize) -> Option<&'static str> {
    plain(vp, variant, &vp.variants[variant].masked.body).then_some(
        "no loop, no transcendental function, no integer division, no f16 arithmetic: the C \
         compiler if-converts and vectorises the scalar loop itself, so the CPU keeps it scalar",
    )
}

fn plain(vp: &VectorProgram, variant: usize, nodes: &[MNode]) -> bool {
    let f = &vp.variants[variant];
    nodes.iter().all(|n| match n {
        MNode::Def(v) => {
            let value = f.ssa.value(*v);
            let rounds_f16 = value.ty == ScalarType::F16
                && match &value.op {
                    Op::Binary(op, ..) => {
                        !matches!(op, BinaryOp::Min | BinaryOp::Max) && !op.is_comparison()
                    }
                    Op::Math(..) | Op::Cast(..) => true,
                    _ => false,
                };
            if rounds_f16 {
                return false;
            }
            match &value.op {
                Op::Math(m, _) => {
                    matches!(m, MathFn::Sqrt | MathFn::Abs | MathFn::Floor | MathFn::Ceil)
                }
                // `fmod` is a library call; integer division has no vector instruction.
                Op::Binary(BinaryOp::Div, a, _) => f.ssa.value(*a).ty.is_float(),
                Op::Binary(BinaryOp::Rem, ..) => false,
                Op::Call(..) => {
                    let callee = f.calls[v];
                    plain(vp, callee, &vp.variants[callee].masked.body)
                }
                _ => true,
            }
        }
        MNode::Return(_) => true,
        MNode::UniformIf {
            then, otherwise, ..
        } => plain(vp, variant, then) && plain(vp, variant, otherwise),
        MNode::MaskedIf {
            then, otherwise, ..
        } => plain(vp, variant, &then.nodes) && plain(vp, variant, &otherwise.nodes),
        MNode::UniformLoop { .. } | MNode::MaskedLoop { .. } => false,
    })
}

/// How many independent vectors of lanes one run of variant `variant` should interleave on a
/// machine with `registers` vector registers.
///
/// A divergent loop's iterations form one chain of dependent operations per vector (each
/// iteration needs the previous one's values), so one vector leaves the execution units
/// waiting on latencies; two independent vectors run side by side fill them. Interleaving
/// pays only there: iterations of straight-line code are independent already. The copies'
/// loop-carried state (the values the loops carry and read, and the active mask) must fit in
/// half the registers, the other half left for temporaries and uniform values.
pub fn interleave(vp: &VectorProgram, variant: usize, registers: u32) -> usize {
    let state = loop_state(vp, variant, &vp.variants[variant].masked.body);
    if state == 0 {
        return 1;
    }
    [4usize, 2]
        .into_iter()
        .find(|g| 2 * g * state <= registers as usize)
        .unwrap_or(1)
}

/// The most vector values live across an iteration of a divergent loop of `nodes` (or of the
/// functions they call): the varying loop-carried values something reads, and the active mask;
/// 0 without divergent loop.
fn loop_state(vp: &VectorProgram, variant: usize, nodes: &[MNode]) -> usize {
    let f = &vp.variants[variant];
    let read = |v: ValueId| {
        f.frozen[v.index()]
            || f.ssa
                .values
                .iter()
                .any(|x| x.op.operands().contains(&v) && !matches!(x.op, Op::Phi(..)))
    };
    nodes
        .iter()
        .map(|n| match n {
            MNode::Def(v) => match &f.ssa.value(*v).op {
                Op::Call(..) => {
                    let callee = f.calls[v];
                    loop_state(vp, callee, &vp.variants[callee].masked.body)
                }
                _ => 0,
            },
            MNode::Return(_) => 0,
            MNode::UniformIf {
                then, otherwise, ..
            } => loop_state(vp, variant, then).max(loop_state(vp, variant, otherwise)),
            MNode::MaskedIf {
                then, otherwise, ..
            } => {
                loop_state(vp, variant, &then.nodes).max(loop_state(vp, variant, &otherwise.nodes))
            }
            MNode::UniformLoop { header, body, .. } => {
                loop_state(vp, variant, header).max(loop_state(vp, variant, body))
            }
            MNode::MaskedLoop {
                phis, header, body, ..
            } => {
                let carried = phis
                    .iter()
                    .filter(|j| f.classes[j.phi.index()] == Class::Varying && read(j.phi))
                    .count();
                (carried + 1)
                    .max(loop_state(vp, variant, header))
                    .max(loop_state(vp, variant, body))
            }
        })
        .max()
        .unwrap_or(0)
}

/// The cost model's line for `check --emit vector` about statement variant `variant`.
pub fn note(vp: &VectorProgram, variant: usize) -> String {
    match compiler_vectorises(vp, variant) {
        Some(why) => format!("cost model: {why}"),
        None => "cost model: the CPU runs this masked form".to_string(),
    }
}
