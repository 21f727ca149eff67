//! The scalar unit's waits for the Vector unit, placed where they are needed.
//!
//! The lowering issues vector instructions without waiting for them; this pass walks the
//! finished program and puts a `set_flag V, S` / `wait_flag V, S` pair right before the first
//! instruction after vector work that could see it unfinished: anything but another vector
//! instruction and the scalar unit's register-only instructions (moves, integer arithmetic,
//! the mask). A `pipe_barrier ALL` or `sync_all` drains the pipes itself. Whether vector work
//! may be pending is a property of each program point: after a conditional, either branch's
//! state; at a loop's head, the state before the loop or at the end of its body (the loop
//! goes round), found by running over the body twice.
//!
//! So a loop of vector work over rows issues row after row while the scalar unit computes the
//! next row's addresses, and waits once, where the results are read or copied out.

use sim::isa::{Instr, Pipe, PipeRule, Stmt, TimingClass};
use sim::Span;

/// `body` with the waits in place.
pub(super) fn place(body: &mut Vec<Stmt>) {
    walk(body, false, true);
}

/// Whether vector work may be pending after `stmts`, entered with `pending`; inserts the
/// waits when `insert`.
fn walk(stmts: &mut Vec<Stmt>, mut pending: bool, insert: bool) -> bool {
    let mut out = Vec::with_capacity(stmts.len());
    for mut stmt in std::mem::take(stmts) {
        match &mut stmt {
            Stmt::Instr { instr, .. } => {
                if drains(instr) {
                    pending = false;
                } else if pending && needs_vector_done(instr) {
                    if insert {
                        out.extend(wait());
                    }
                    pending = false;
                }
                if on_vector(instr) {
                    pending = true;
                }
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                let a = walk(then, pending, insert);
                let b = walk(otherwise, pending, insert);
                pending = a || b;
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => {
                let round = walk(&mut body.clone(), pending, false);
                let after = walk(body, pending || round, insert);
                pending |= after;
            }
        }
        out.push(stmt);
    }
    *stmts = out;
    pending
}

fn on_vector(instr: &Instr) -> bool {
    instr.pipe_rule() == PipeRule::Fixed(Pipe::V)
}

fn drains(instr: &Instr) -> bool {
    matches!(instr, Instr::Barrier { pipe: None } | Instr::SyncAll)
}

fn needs_vector_done(instr: &Instr) -> bool {
    !on_vector(instr) && instr.timing_class() != TimingClass::Issue
}

fn wait() -> [Stmt; 2] {
    let flag = |instr| Stmt::Instr {
        instr: Box::new(instr),
        span: Span::default(),
    };
    [
        flag(Instr::SetFlag {
            src: Pipe::V,
            dst: Pipe::S,
            event: 0,
        }),
        flag(Instr::WaitFlag {
            src: Pipe::V,
            dst: Pipe::S,
            event: 0,
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::isa::{Addr, Affine, CmpOp, Cond, DType, Reg, Scalar, VRedOp, VecCfg};

    fn at(offset: i64) -> Addr {
        Addr {
            buffer: "ub".into(),
            offset: Affine::constant(offset),
            span: Span::default(),
        }
    }

    fn instr(i: Instr) -> Stmt {
        Stmt::Instr {
            instr: Box::new(i),
            span: Span::default(),
        }
    }

    fn count_waits(stmts: &[Stmt]) -> usize {
        stmts
            .iter()
            .map(|s| match s {
                Stmt::Instr { instr, .. } => usize::from(matches!(**instr, Instr::WaitFlag { .. })),
                Stmt::If {
                    then, otherwise, ..
                } => count_waits(then) + count_waits(otherwise),
                Stmt::For { body, .. } | Stmt::While { body, .. } => count_waits(body),
            })
            .sum()
    }

    #[test]
    fn a_load_after_vector_work_in_an_earlier_loop_waits() {
        let red = instr(Instr::VRed {
            op: VRedOp::Cmax,
            ty: DType::F32,
            dst: at(320),
            src: at(64),
            cfg: VecCfg {
                repeat: 1,
                blk: vec![1; 2],
                rep: vec![0, 8],
            },
            acc: true,
        });
        let ld = instr(Instr::Ld {
            ty: DType::F32,
            dst: Reg::F(0),
            src: at(320),
        });
        let cond = Cond {
            lhs: Scalar::Int(0),
            op: CmpOp::Le,
            rhs: Scalar::Int(1),
        };
        let counted = |body| Stmt::For {
            var: "c1".into(),
            start: 0,
            end: 1,
            step: 1,
            body,
            span: Span::default(),
        };
        let mut body = vec![
            counted(vec![red.clone()]),
            counted(vec![Stmt::If {
                cond,
                then: vec![ld.clone()],
                otherwise: Vec::new(),
                span: Span::default(),
            }]),
        ];
        place(&mut body);
        assert_eq!(count_waits(&body), 1);
        // Vector work at the end of a loop's body reaches the load at its start.
        let mut looped = vec![counted(vec![ld, red])];
        place(&mut looped);
        assert_eq!(count_waits(&looped), 1);
    }
}
