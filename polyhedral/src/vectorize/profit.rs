//! Whether the explicit vector variant of a statement body pays on a CPU whose C compiler
//! vectorises loops itself.
//!
//! A loop vectoriser (gcc's and clang's at `-O3`) if-converts a loop body that has branches
//! but no inner loop, once the scalar functions it calls are inlined, as long as every
//! operation has a vector form: arithmetic, comparisons, selects, min / max, `sqrt`, `abs`,
//! `floor`, `ceil`. Such a body gains nothing from the masked form: the compiler's code is the
//! same selects without the mask tests of the branches on superword condition, and may use
//! wider vectors. The masked form pays where the compiler gives up: a `while` loop whose trip
//! count varies between lanes, a transcendental function (`exp`, `tanh`, … are library calls
//! it does not vectorise without a vector math library), integer division.

use super::mask::MNode;
use super::ssa::Op;
use super::VectorProgram;
use crate::program::{BinaryOp, MathFn};

/// Why the compiler is expected to vectorise the scalar loop around variant `variant` by
/// itself, or `None` when the masked form is worth writing.
pub fn compiler_vectorises(vp: &VectorProgram, variant: usize) -> Option<&'static str> {
    plain(vp, variant, &vp.variants[variant].masked.body).then_some(
        "no loop, no transcendental function, no integer division: the C compiler if-converts \
         and vectorises the scalar loop itself, so the CPU keeps it scalar",
    )
}

fn plain(vp: &VectorProgram, variant: usize, nodes: &[MNode]) -> bool {
    let f = &vp.variants[variant];
    nodes.iter().all(|n| match n {
        MNode::Def(v) => {
            let value = f.ssa.value(*v);
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
