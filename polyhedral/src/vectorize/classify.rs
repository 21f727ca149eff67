//! Vector attributes of SSA values: uniform, linear(stride) or varying across the lanes of a
//! vectorised loop (the seed's uniform / consecutive classification).
//!
//! A value is *uniform* when every lane holds the same value, *linear(s)* when lane `k` holds
//! `v0 + s·k` (integers only; `s ≠ 0`), *varying* otherwise. The classes of a function's
//! parameters come from its call sites; those of a statement body's leaves from the vectorised
//! loop: its iterator is linear(1), other iterators and sizes are uniform, a read is uniform
//! when its subscripts do not depend on the vectorised iterator.
//!
//! Propagation is a fixpoint from the optimistic start (everything uniform) over the lattice
//! uniform < linear(s) < varying, where two different strides join to varying:
//! - arithmetic: `+`/`-` add strides, `*` by a constant scales one, negation negates it; any
//!   other operator with a non-uniform operand is varying;
//! - a phi is varying when the condition that chooses between its inputs is (control
//!   divergence: lanes took different paths, or left a loop at different iterations), and the
//!   join of its inputs otherwise.

use std::fmt;

use super::ssa::{Node, Op, Ssa, ValueId};
use crate::program::{BinaryOp, ScalarType, UnaryOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Uniform,
    /// Lane `k` holds `lane0 + stride·k`.
    Linear(i64),
    Varying,
}

impl Class {
    fn join(self, other: Class) -> Class {
        match (self, other) {
            (a, b) if a == b => a,
            _ => Class::Varying,
        }
    }

    fn linear(stride: i64) -> Class {
        if stride == 0 {
            Class::Uniform
        } else {
            Class::Linear(stride)
        }
    }

    pub fn is_uniform(self) -> bool {
        self == Class::Uniform
    }

    /// A short code for names of vector variants: `u`, `l<s>`, `v`.
    pub fn code(self) -> String {
        match self {
            Class::Uniform => "u".to_string(),
            Class::Linear(s) if s < 0 => format!("ln{}", -s),
            Class::Linear(s) => format!("l{s}"),
            Class::Varying => "v".to_string(),
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Class::Uniform => f.write_str("uniform"),
            Class::Linear(s) => write!(f, "linear({s})"),
            Class::Varying => f.write_str("varying"),
        }
    }
}

/// The class of every value of `ssa`, given those of the leaves: `leaf(op)` for
/// [`Op::Param`], [`Op::Iter`] and [`Op::Read`].
pub fn classify(ssa: &Ssa, leaf: &dyn Fn(&Op) -> Class) -> Vec<Class> {
    // The condition that selects between each phi's inputs.
    let mut chooser = vec![None; ssa.values.len()];
    collect_choosers(&ssa.body, &mut chooser);
    let mut classes = vec![Class::Uniform; ssa.values.len()];
    loop {
        let mut changed = false;
        for (k, value) in ssa.values.iter().enumerate() {
            let c = |v: &ValueId| classes[v.index()];
            let new = match &value.op {
                Op::Param(_) | Op::Iter(_) | Op::Read(_) => leaf(&value.op),
                Op::Size(_) | Op::Const(_) => Class::Uniform,
                Op::Unary(UnaryOp::Neg, a) if value.ty == ScalarType::I32 => match c(a) {
                    Class::Linear(s) => Class::linear(s.wrapping_neg()),
                    other => other,
                },
                Op::Binary(op, a, b) if value.ty == ScalarType::I32 => {
                    integer_class(ssa, *op, (*a, c(a)), (*b, c(b)))
                }
                Op::Cast(to, a) if *to == ssa.values[a.index()].ty => c(a),
                Op::Phi(_, inputs) => {
                    let control = chooser[k].map_or(Class::Uniform, |v: ValueId| c(&v));
                    if control.is_uniform() || inputs[0] == inputs[1] {
                        c(&inputs[0]).join(c(&inputs[1]))
                    } else {
                        Class::Varying
                    }
                }
                op => {
                    if op.operands().iter().all(|v| c(v).is_uniform()) {
                        Class::Uniform
                    } else {
                        Class::Varying
                    }
                }
            };
            // Monotone: a class only ever rises.
            let new = if classes[k] == Class::Uniform {
                new
            } else {
                classes[k].join(new)
            };
            if new != classes[k] {
                classes[k] = new;
                changed = true;
            }
        }
        if !changed {
            return classes;
        }
    }
}

fn integer_class(ssa: &Ssa, op: BinaryOp, a: (ValueId, Class), b: (ValueId, Class)) -> Class {
    let stride = |c: Class| match c {
        Class::Uniform => Some(0),
        Class::Linear(s) => Some(s),
        Class::Varying => None,
    };
    let constant = |v: ValueId| match &ssa.values[v.index()].op {
        Op::Const(l) => Some(l.value as i64),
        _ => None,
    };
    let (Some(sa), Some(sb)) = (stride(a.1), stride(b.1)) else {
        return Class::Varying;
    };
    match op {
        BinaryOp::Add => Class::linear(sa.wrapping_add(sb)),
        BinaryOp::Sub => Class::linear(sa.wrapping_sub(sb)),
        BinaryOp::Mul if sb == 0 && sa != 0 => match constant(b.0) {
            Some(k) => Class::linear(sa.wrapping_mul(k)),
            None => Class::Varying,
        },
        BinaryOp::Mul if sa == 0 && sb != 0 => match constant(a.0) {
            Some(k) => Class::linear(sb.wrapping_mul(k)),
            None => Class::Varying,
        },
        _ if sa == 0 && sb == 0 => Class::Uniform,
        _ => Class::Varying,
    }
}

fn collect_choosers(nodes: &[Node], chooser: &mut [Option<ValueId>]) {
    for n in nodes {
        match n {
            Node::If {
                cond,
                then,
                otherwise,
                joins,
            } => {
                for j in joins {
                    chooser[j.phi.index()] = Some(*cond);
                }
                collect_choosers(then, chooser);
                collect_choosers(otherwise, chooser);
            }
            Node::Loop {
                phis,
                header,
                cond,
                body,
            } => {
                for j in phis {
                    chooser[j.phi.index()] = Some(*cond);
                }
                collect_choosers(header, chooser);
                collect_choosers(body, chooser);
            }
            Node::Def(_) | Node::Return(_) => {}
        }
    }
}
