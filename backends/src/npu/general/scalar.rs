//! Statement instances on the scalar unit: the body's expression tree in registers, the
//! transcendental functions on one lane of the Vector unit.

use polyhedral::ast::AstExpr;
use polyhedral::program::{
    Access, BinaryOp, Expr, ExprArena, ExprId, Program, ScalarType, Statement, StmtId, UnaryOp,
};
use sim::isa::{Addr, CmpOp, DType, Instr, Reg, SOp, Scalar};

use super::call::Frame;
use super::emit::{dtype, Emitter, Int};
use super::promote;
use crate::npu::Error;

/// A value of a statement's expression.
#[derive(Clone, Debug)]
pub(super) enum Val {
    /// A float register holding a temporary.
    F(u8),
    Float(f64),
    I(Int),
}

impl Val {
    pub(super) fn scalar(&self) -> Scalar {
        match self {
            Val::F(r) => Scalar::Reg(Reg::F(*r)),
            Val::Float(v) => Scalar::Float(*v),
            Val::I(i) => i.scalar(),
        }
    }
}

/// Where expressions are evaluated: one instance of a statement (the statement and its
/// iterators' values) and, while a scalar function it calls is lowered, the call's frame.
pub(super) struct Instance<'s> {
    pub(super) stmt: &'s Statement,
    pub(super) args: &'s [AstExpr],
    pub(super) call: Option<&'s Frame<'s>>,
}

impl<'s> Instance<'s> {
    pub(super) fn new(stmt: &'s Statement, args: &'s [AstExpr]) -> Instance<'s> {
        Instance {
            stmt,
            args,
            call: None,
        }
    }

    /// The expressions being evaluated: the statement's, or the called function's.
    pub(super) fn exprs(&self) -> &'s ExprArena {
        self.call.map_or(&self.stmt.exprs, |f| &f.function.exprs)
    }

    pub(super) fn expr(&self, id: ExprId) -> &'s Expr {
        &self.exprs()[id]
    }

    pub(super) fn ty(&self, program: &Program, id: ExprId) -> ScalarType {
        match self.call {
            Some(f) => f.function.expr_type(program, id),
            None => program.expr_type(self.stmt, id),
        }
    }

    /// The array reads the expressions refer to (none in a function).
    pub(super) fn reads(&self) -> &'s [Access] {
        match self.call {
            Some(_) => &[],
            None => &self.stmt.reads,
        }
    }

    /// What the expressions belong to, for messages.
    fn name(&self) -> String {
        match self.call {
            Some(f) => format!("function `{}`", f.function.name),
            None => format!("statement {}", self.stmt.name),
        }
    }
}

impl Emitter<'_> {
    /// One instance of `stmt` with iterators `args` (tallied for the report).
    pub(super) fn statement(&mut self, stmt: StmtId, args: &[AstExpr]) -> Result<(), Error> {
        self.push(Instr::Tally);
        let program = self.program;
        let s = &program.statements[stmt.index()];
        let at = Instance::new(s, args);
        let v = self.value(&at, s.body)?;
        let mut temps = Vec::new();
        let dst = self.element(&at, &s.write, &mut temps)?;
        self.push(Instr::St {
            ty: dtype(program.array(s.write.array).elem)?,
            dst,
            src: v.scalar(),
        });
        self.drop_val(v);
        temps.into_iter().for_each(|t| self.free_s(t));
        Ok(())
    }

    fn element(
        &mut self,
        at: &Instance,
        access: &Access,
        temps: &mut Vec<u8>,
    ) -> Result<Addr, Error> {
        let subs: Vec<AstExpr> = access
            .subscripts
            .iter()
            .map(|e| AstExpr::from_subscript(&at.stmt.divs, e, &|d| at.args[d].clone()))
            .collect();
        promote::element(self, access.array, &subs, temps)
    }

    pub(super) fn drop_val(&mut self, v: Val) {
        match v {
            Val::F(r) => self.free_f(r),
            Val::I(i) => self.release(i),
            Val::Float(_) => {}
        }
    }

    /// A float register for the result of an operation on `a` and `b`: one of theirs when it
    /// is a temporary (the other is freed).
    fn float_dst(&mut self, a: &Val, b: Option<&Val>) -> Result<u8, Error> {
        let dst = match (a, b) {
            (Val::F(r), _) | (_, Some(Val::F(r))) => *r,
            _ => self.freg()?,
        };
        for v in [Some(a), b].into_iter().flatten() {
            if let Val::F(r) = v {
                if *r != dst {
                    self.free_f(*r);
                }
            }
        }
        Ok(dst)
    }

    pub(super) fn fbin(&mut self, op: SOp, a: Val, b: Val) -> Result<Val, Error> {
        let (sa, sb) = (a.scalar(), b.scalar());
        let dst = self.float_dst(&a, Some(&b))?;
        self.push(Instr::SBin {
            op,
            dst: Reg::F(dst),
            a: sa,
            b: sb,
        });
        Ok(Val::F(dst))
    }

    pub(super) fn int_val(v: Val) -> Result<Int, Error> {
        match v {
            Val::I(i) => Ok(i),
            other => Err(Error::NotYet(format!(
                "a floating-point value {other:?} where an integer is needed"
            ))),
        }
    }

    pub(super) fn value(&mut self, at: &Instance, id: ExprId) -> Result<Val, Error> {
        let ty = at.ty(self.program, id);
        if ty == ScalarType::Bool {
            let flag = self.flag(at, id)?;
            return Ok(Val::I(Int::Temp(flag)));
        }
        let v = self.computed(at, id, ty)?;
        // The interpreter rounds every f16 operation to f16; registers hold f32.
        if ty == ScalarType::F16 && matches!(at.expr(id), Expr::Binary(..) | Expr::Math(..)) {
            return self.round_f16(v);
        }
        Ok(v)
    }

    /// The value of `id`, of type `ty` (not `bool`), in f32 where `ty` is f16.
    pub(super) fn computed(
        &mut self,
        at: &Instance,
        id: ExprId,
        ty: ScalarType,
    ) -> Result<Val, Error> {
        let program = self.program;
        Ok(match at.expr(id) {
            // A literal has its type's precision, as in the interpreter (f32 is what the
            // scalar unit makes of any float operand).
            Expr::Literal(l) if l.ty == ScalarType::F16 => {
                Val::Float(half::f16::from_f64(l.value).to_f64())
            }
            Expr::Literal(l) if l.ty.is_float() => Val::Float(l.value),
            Expr::Literal(l) => Val::I(Int::Const(l.value as i64)),
            Expr::Iter(d) => Val::I(self.int(&at.args[*d])?),
            Expr::Param(p) => Val::I(Int::Const(self.params[p.index()])),
            Expr::Read(r) if at.call.is_none() => {
                let access = &at.stmt.reads[*r];
                let elem = dtype(program.array(access.array).elem)?;
                let mut temps = Vec::new();
                let src = self.element(at, access, &mut temps)?;
                temps.into_iter().for_each(|t| self.free_s(t));
                if elem == DType::I32 {
                    let r = self.sreg()?;
                    self.push(Instr::Ld {
                        ty: elem,
                        dst: Reg::S(r),
                        src,
                    });
                    Val::I(Int::Temp(r))
                } else {
                    let r = self.freg()?;
                    self.push(Instr::Ld {
                        ty: elem,
                        dst: Reg::F(r),
                        src,
                    });
                    Val::F(r)
                }
            }
            Expr::Unary(UnaryOp::Neg, a) => {
                let a = self.value(at, *a)?;
                if ty.is_float() {
                    self.fbin(SOp::Sub, Val::Float(0.0), a)?
                } else {
                    let a = Self::int_val(a)?;
                    Val::I(self.sbin(SOp::Sub, Int::Const(0), a)?)
                }
            }
            Expr::Binary(op, a, b) => {
                let (a, b) = (self.value(at, *a)?, self.value(at, *b)?);
                self.arith(*op, ty, a, b)?
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } if extremum(at.exprs(), at.reads(), *cond, *then, *otherwise).is_some() => {
                let (op, a, b) = extremum(at.exprs(), at.reads(), *cond, *then, *otherwise)
                    .expect("an extremum");
                let (a, b) = (self.value(at, a)?, self.value(at, b)?);
                self.arith(op, ty, a, b)?
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                let dst = if ty.is_float() {
                    Reg::F(self.freg()?)
                } else {
                    Reg::S(self.sreg()?)
                };
                self.select(at, (*cond, *then, *otherwise), dst)?;
                match dst {
                    Reg::F(r) => Val::F(r),
                    Reg::S(r) => Val::I(Int::Temp(r)),
                }
            }
            Expr::Math(f, args) => {
                let vals: Vec<Val> = args
                    .iter()
                    .map(|a| self.value(at, *a))
                    .collect::<Result<_, _>>()?;
                self.math(*f, ty, vals, at, args)?
            }
            Expr::Cast(to, a) => {
                let from = at.ty(program, *a);
                let v = self.value(at, *a)?;
                self.cast(from, *to, v)?
            }
            Expr::Call(f, args) => {
                let vals: Vec<Val> = args
                    .iter()
                    .map(|a| self.value(at, *a))
                    .collect::<Result<_, _>>()?;
                self.call(at, *f, vals)?
            }
            Expr::Local(l) if at.call.is_some() => self.local(at, *l)?,
            e => {
                return Err(Error::NotYet(format!(
                    "the expression {e:?} of {}",
                    at.name()
                )))
            }
        })
    }

    fn arith(&mut self, op: BinaryOp, ty: ScalarType, a: Val, b: Val) -> Result<Val, Error> {
        let sop = match op {
            BinaryOp::Add => SOp::Add,
            BinaryOp::Sub => SOp::Sub,
            BinaryOp::Mul => SOp::Mul,
            BinaryOp::Div => SOp::Div,
            BinaryOp::Min => SOp::Min,
            BinaryOp::Max => SOp::Max,
            BinaryOp::Rem if !ty.is_float() => {
                // a - (a / b) · b, with C's truncating division.
                let (a, b) = (Self::int_val(a)?, Self::int_val(b)?);
                let q = self.sreg()?;
                self.push(Instr::SBin {
                    op: SOp::Div,
                    dst: Reg::S(q),
                    a: a.scalar(),
                    b: b.scalar(),
                });
                let qb = self.sbin(SOp::Mul, Int::Temp(q), b)?;
                return Ok(Val::I(self.sbin(SOp::Sub, a, qb)?));
            }
            _ => {
                return Err(Error::NotYet(format!(
                    "the operator `{}` on {ty:?}",
                    op.symbol()
                )))
            }
        };
        if ty.is_float() {
            self.fbin(sop, a, b)
        } else {
            let (a, b) = (Self::int_val(a)?, Self::int_val(b)?);
            Ok(Val::I(self.sbin(sop, a, b)?))
        }
    }

    /// A condition's value, 0 or 1, in a fresh integer register.
    pub(super) fn flag(&mut self, at: &Instance, id: ExprId) -> Result<u8, Error> {
        let program = self.program;
        let set = |r: u8, v: i64| Instr::Mov {
            dst: Reg::S(r),
            src: Scalar::Int(v),
        };
        match at.expr(id) {
            Expr::Binary(op, a, b) if op.is_comparison() => {
                let (x, y) = (self.value(at, *a)?, self.value(at, *b)?);
                let cmp = match op {
                    BinaryOp::Lt => CmpOp::Lt,
                    BinaryOp::Le => CmpOp::Le,
                    BinaryOp::Gt => CmpOp::Gt,
                    BinaryOp::Ge => CmpOp::Ge,
                    BinaryOp::Eq => CmpOp::Eq,
                    _ => CmpOp::Ne,
                };
                self.compared(x, cmp, y)
            }
            Expr::Binary(op @ (BinaryOp::And | BinaryOp::Or), a, b) => {
                let f = self.flag(at, *a)?;
                // The right operand only when the left one does not decide.
                let rest = self.nested(|e| {
                    let g = e.flag(at, *b)?;
                    e.push(Instr::Mov {
                        dst: Reg::S(f),
                        src: Scalar::Reg(Reg::S(g)),
                    });
                    e.free_s(g);
                    Ok(())
                })?;
                let decided = if *op == BinaryOp::And { 1 } else { 0 };
                self.branch(
                    Scalar::Reg(Reg::S(f)),
                    CmpOp::Eq,
                    Scalar::Int(decided),
                    rest,
                );
                Ok(f)
            }
            Expr::Unary(UnaryOp::Not, a) => {
                let f = self.flag(at, *a)?;
                self.push(Instr::SBin {
                    op: SOp::Sub,
                    dst: Reg::S(f),
                    a: Scalar::Int(1),
                    b: Scalar::Reg(Reg::S(f)),
                });
                Ok(f)
            }
            Expr::Literal(l) => {
                let f = self.sreg()?;
                self.push(set(f, i64::from(l.value != 0.0)));
                Ok(f)
            }
            Expr::Cast(_, a) => {
                let v = self.value(at, *a)?;
                let zero = if at.ty(program, *a).is_float() {
                    Val::Float(0.0)
                } else {
                    Val::I(Int::Const(0))
                };
                self.compared(v, CmpOp::Ne, zero)
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                let f = self.sreg()?;
                self.select(at, (*cond, *then, *otherwise), Reg::S(f))?;
                Ok(f)
            }
            Expr::Local(_) | Expr::Call(..) => {
                let v = self.computed(at, id, ScalarType::Bool)?;
                self.compared(v, CmpOp::Ne, Val::I(Int::Const(0)))
            }
            other => Err(Error::NotYet(format!(
                "the condition {other:?} of {}",
                at.name()
            ))),
        }
    }

    /// Whether `x cmp y`, 0 or 1, in a fresh integer register (`x` and `y` are dropped).
    fn compared(&mut self, x: Val, cmp: CmpOp, y: Val) -> Result<u8, Error> {
        let set = |r: u8, v: i64| Instr::Mov {
            dst: Reg::S(r),
            src: Scalar::Int(v),
        };
        let f = self.sreg()?;
        self.push(set(f, 0));
        let one = self.nested(|e| {
            e.push(set(f, 1));
            Ok(())
        })?;
        self.branch(x.scalar(), cmp, y.scalar(), one);
        self.drop_val(x);
        self.drop_val(y);
        Ok(f)
    }

    /// `dst = cond ? then : otherwise`, each side computed only when it is taken.
    fn select(
        &mut self,
        at: &Instance,
        (cond, then, otherwise): (ExprId, ExprId, ExprId),
        dst: Reg,
    ) -> Result<(), Error> {
        let flag = self.flag(at, cond)?;
        let branch = |e: &mut Self, x: ExprId| {
            e.nested(|e| {
                let v = e.value(at, x)?;
                e.push(Instr::Mov {
                    dst,
                    src: v.scalar(),
                });
                e.drop_val(v);
                Ok(())
            })
        };
        let then = branch(self, then)?;
        let otherwise = branch(self, otherwise)?;
        self.if_set(flag, then, otherwise);
        Ok(())
    }

    fn cast(&mut self, from: ScalarType, to: ScalarType, v: Val) -> Result<Val, Error> {
        let widened = match (from.is_float(), to.is_float()) {
            (true, true) => v,
            (false, true) => {
                let f = self.freg()?;
                self.push(Instr::Mov {
                    dst: Reg::F(f),
                    src: v.scalar(),
                });
                self.drop_val(v);
                Val::F(f)
            }
            (false, false) => return Ok(v),
            (true, false) => return self.truncate(v),
        };
        if to == ScalarType::F16 && from != ScalarType::F16 {
            return self.round_f16(widened);
        }
        Ok(widened)
    }
}

/// The minimum or maximum a selection computes, as (`Min` or `Max`, operands): `a < b ? a : b`
/// is `min(a, b)`, and likewise for the other comparisons and the swapped branches.
pub(super) fn extremum(
    exprs: &ExprArena,
    reads: &[Access],
    cond: ExprId,
    then: ExprId,
    otherwise: ExprId,
) -> Option<(BinaryOp, ExprId, ExprId)> {
    let Expr::Binary(cmp, a, b) = &exprs[cond] else {
        return None;
    };
    let less = match cmp {
        BinaryOp::Lt | BinaryOp::Le => true,
        BinaryOp::Gt | BinaryOp::Ge => false,
        _ => return None,
    };
    let same = |x, y| same(exprs, reads, x, y);
    let op = if same(*a, then) && same(*b, otherwise) {
        less
    } else if same(*b, then) && same(*a, otherwise) {
        !less
    } else {
        return None;
    };
    Some((
        if op { BinaryOp::Min } else { BinaryOp::Max },
        then,
        otherwise,
    ))
}

/// Whether two expressions compute the same value (reads of one element count as the same).
fn same(exprs: &ExprArena, reads: &[Access], x: ExprId, y: ExprId) -> bool {
    let same = |p, q| same(exprs, reads, p, q);
    let all = |a: &[ExprId], b: &[ExprId]| {
        a.len() == b.len() && a.iter().zip(b).all(|(&p, &q)| same(p, q))
    };
    match (&exprs[x], &exprs[y]) {
        (Expr::Read(p), Expr::Read(q)) => {
            let (p, q) = (&reads[*p], &reads[*q]);
            p.array == q.array && p.subscripts == q.subscripts
        }
        (Expr::Literal(p), Expr::Literal(q)) => p == q,
        (Expr::Iter(p), Expr::Iter(q)) => p == q,
        (Expr::Param(p), Expr::Param(q)) => p == q,
        (Expr::Local(p), Expr::Local(q)) => p == q,
        (Expr::Unary(o, p), Expr::Unary(r, q)) => o == r && same(*p, *q),
        (Expr::Binary(o, p, q), Expr::Binary(r, u, v)) => o == r && same(*p, *u) && same(*q, *v),
        (Expr::Cast(t, p), Expr::Cast(u, q)) => t == u && same(*p, *q),
        (Expr::Math(f, p), Expr::Math(g, q)) => f == g && all(p, q),
        _ => false,
    }
}
