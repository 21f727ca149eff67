//! Calls of the kernel's scalar functions, inlined on the scalar unit.
//!
//! A call gets a register per local (its parameters hold the arguments, the others start at
//! 0, as in the interpreter), a register for the value it returns and a flag that becomes 1
//! when it returns. The body's statements are lowered in order; after one that may return,
//! the rest of its block runs only while the flag is 0, and a loop tests it with its
//! condition. A loop that never ends runs until the simulator's instruction budget does.

use polyhedral::program::{Block, Function, FunctionId, LocalId, ScalarType, Stmt as FStmt};
use sim::isa::{CmpOp, Cond, Instr, Reg, Scalar, Stmt};
use sim::Span;

use super::emit::{Emitter, Int};
use super::scalar::{Instance, Val};
use crate::npu::Error;

/// Calls nested deeper than this are refused (functions that call themselves).
const MAX_DEPTH: usize = 16;

/// A call being lowered.
pub(super) struct Frame<'s> {
    pub(super) function: &'s Function,
    /// The register of each local, parameters first.
    locals: Vec<Reg>,
    /// An integer register that is 1 once the function has returned.
    done: u8,
    /// The register the returned value is left in.
    result: Reg,
    /// Calls that enclose this one.
    depth: usize,
}

impl Emitter<'_> {
    /// The value of `f` called with `args` from where `at` is.
    pub(super) fn call(
        &mut self,
        at: &Instance,
        f: FunctionId,
        args: Vec<Val>,
    ) -> Result<Val, Error> {
        let function = self.program.function(f);
        let depth = at.call.map_or(0, |c| c.depth + 1);
        if depth >= MAX_DEPTH {
            return Err(Error::NotYet(format!(
                "calls of scalar functions nested more than {MAX_DEPTH} deep (`{}`)",
                function.name
            )));
        }
        let mut locals = Vec::with_capacity(function.locals.len());
        for local in &function.locals {
            locals.push(self.reg_for(local.ty)?);
        }
        let mut args = args.into_iter();
        for (k, &reg) in locals.iter().enumerate() {
            let value = if k < function.params {
                args.next()
            } else {
                None
            };
            let src = value.as_ref().map_or(Scalar::Int(0), Val::scalar);
            self.push(Instr::Mov { dst: reg, src });
            if let Some(v) = value {
                self.drop_val(v);
            }
        }
        let done = self.sreg()?;
        let result = self.reg_for(function.ret)?;
        for reg in [Reg::S(done), result] {
            self.push(Instr::Mov {
                dst: reg,
                src: Scalar::Int(0),
            });
        }
        let frame = Frame {
            function,
            locals,
            done,
            result,
            depth,
        };
        let inner = Instance {
            stmt: at.stmt,
            args: at.args,
            call: Some(&frame),
        };
        self.block(&inner, &function.body)?;
        for &reg in &frame.locals {
            self.free_reg(reg);
        }
        self.free_s(done);
        Ok(match result {
            Reg::F(r) => Val::F(r),
            Reg::S(r) => Val::I(Int::Temp(r)),
        })
    }

    /// The value of a local of the call `at` is in.
    pub(super) fn local(&mut self, at: &Instance, l: LocalId) -> Result<Val, Error> {
        let frame = at.call.ok_or_else(|| {
            Error::NotYet(format!("a local variable in statement {}", at.stmt.name))
        })?;
        // A copy: the local may change while the value is in use.
        let src = Scalar::Reg(frame.locals[l.index()]);
        Ok(match frame.locals[l.index()] {
            Reg::F(_) => {
                let r = self.freg()?;
                self.push(Instr::Mov {
                    dst: Reg::F(r),
                    src,
                });
                Val::F(r)
            }
            Reg::S(_) => {
                let r = self.sreg()?;
                self.push(Instr::Mov {
                    dst: Reg::S(r),
                    src,
                });
                Val::I(Int::Temp(r))
            }
        })
    }

    /// A register for a value of type `ty`.
    fn reg_for(&mut self, ty: ScalarType) -> Result<Reg, Error> {
        Ok(if ty.is_float() {
            Reg::F(self.freg()?)
        } else {
            Reg::S(self.sreg()?)
        })
    }

    fn free_reg(&mut self, reg: Reg) {
        match reg {
            Reg::F(r) => self.free_f(r),
            Reg::S(r) => self.free_s(r),
        }
    }

    /// The statements of `block`, those after one that may return only while it has not.
    fn block(&mut self, at: &Instance, block: &[FStmt]) -> Result<(), Error> {
        let frame = at.call.expect("a function's block is lowered in its call");
        for (k, stmt) in block.iter().enumerate() {
            self.function_stmt(at, stmt)?;
            if returns(stmt) && k + 1 < block.len() {
                let rest = self.nested(|e| e.block(at, &block[k + 1..]))?;
                self.branch(
                    Scalar::Reg(Reg::S(frame.done)),
                    CmpOp::Eq,
                    Scalar::Int(0),
                    rest,
                );
                break;
            }
        }
        Ok(())
    }

    fn function_stmt(&mut self, at: &Instance, stmt: &FStmt) -> Result<(), Error> {
        let frame = at
            .call
            .expect("a function's statement is lowered in its call");
        match stmt {
            FStmt::Assign(l, e) => {
                let v = self.value(at, *e)?;
                self.push(Instr::Mov {
                    dst: frame.locals[l.index()],
                    src: v.scalar(),
                });
                self.drop_val(v);
            }
            FStmt::Return(e) => {
                let v = self.value(at, *e)?;
                self.push(Instr::Mov {
                    dst: frame.result,
                    src: v.scalar(),
                });
                self.drop_val(v);
                self.push(Instr::Mov {
                    dst: Reg::S(frame.done),
                    src: Scalar::Int(1),
                });
            }
            FStmt::If {
                cond,
                then,
                otherwise,
            } => {
                let flag = self.flag(at, *cond)?;
                let then = self.nested(|e| e.block(at, then))?;
                let otherwise = self.nested(|e| e.block(at, otherwise))?;
                self.if_set(flag, then, otherwise);
            }
            FStmt::While { cond, body } => {
                // go = cond; while go == 1 { body; go = done == 0 && cond }
                let go = self.sreg()?;
                let set_go = |e: &mut Self| -> Result<(), Error> {
                    let f = e.flag(at, *cond)?;
                    e.push(Instr::Mov {
                        dst: Reg::S(go),
                        src: Scalar::Reg(Reg::S(f)),
                    });
                    e.free_s(f);
                    Ok(())
                };
                set_go(self)?;
                let body = self.nested(|e| {
                    e.block(at, body)?;
                    let again = e.nested(set_go)?;
                    let stop = e.nested(|e| {
                        e.push(Instr::Mov {
                            dst: Reg::S(go),
                            src: Scalar::Int(0),
                        });
                        Ok(())
                    })?;
                    e.branch_else(
                        Scalar::Reg(Reg::S(frame.done)),
                        CmpOp::Eq,
                        Scalar::Int(0),
                        again,
                        stop,
                    );
                    Ok(())
                })?;
                self.push_stmt(Stmt::While {
                    cond: Cond {
                        lhs: Scalar::Reg(Reg::S(go)),
                        op: CmpOp::Eq,
                        rhs: Scalar::Int(1),
                    },
                    body,
                    span: Span::default(),
                });
                self.free_s(go);
            }
        }
        Ok(())
    }
}

/// Whether `stmt` may return from its function.
fn returns(stmt: &FStmt) -> bool {
    let any = |b: &Block| b.iter().any(returns);
    match stmt {
        FStmt::Return(_) => true,
        FStmt::Assign(..) => false,
        FStmt::If {
            then, otherwise, ..
        } => any(then) || any(otherwise),
        FStmt::While { body, .. } => any(body),
    }
}
