//! Statement instances on the scalar unit: the body's expression tree in registers, the
//! transcendental functions on one lane of the Vector unit.

use polyhedral::ast::AstExpr;
use polyhedral::program::{
    Access, BinaryOp, Expr, ExprId, MathFn, ScalarType, Statement, StmtId, UnaryOp,
};
use sim::isa::{Addr, Affine, CmpOp, DType, Instr, Reg, SOp, Scalar, Stmt, VUnOp, VecCfg};

use super::emit::{dtype, Emitter, Int};
use super::promote;
use crate::npu::function::TANH_SERIES;
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

/// One instance of a statement being lowered: the statement and its iterators' values.
pub(super) struct Instance<'s> {
    pub(super) stmt: &'s Statement,
    pub(super) args: &'s [AstExpr],
}

impl Emitter<'_> {
    /// One instance of `stmt` with iterators `args`.
    pub(super) fn statement(&mut self, stmt: StmtId, args: &[AstExpr]) -> Result<(), Error> {
        let program = self.program;
        let s = &program.statements[stmt.index()];
        let at = Instance { stmt: s, args };
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
            .map(|e| AstExpr::from_affine(e, &|d| at.args[d].clone()))
            .collect();
        promote::element(self, access.array, &subs, temps)
    }

    fn drop_val(&mut self, v: Val) {
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

    fn fbin(&mut self, op: SOp, a: Val, b: Val) -> Result<Val, Error> {
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

    fn int_val(v: Val) -> Result<Int, Error> {
        match v {
            Val::I(i) => Ok(i),
            other => Err(Error::NotYet(format!(
                "a floating-point value {other:?} where an integer is needed"
            ))),
        }
    }

    pub(super) fn value(&mut self, at: &Instance, id: ExprId) -> Result<Val, Error> {
        let program = self.program;
        let s = at.stmt;
        let ty = program.expr_type(s, id);
        if ty == ScalarType::Bool {
            let flag = self.flag(at, id)?;
            return Ok(Val::I(Int::Temp(flag)));
        }
        let v = self.computed(at, id, ty)?;
        // The interpreter rounds every f16 operation to f16; registers hold f32.
        if ty == ScalarType::F16 && matches!(s.exprs[id], Expr::Binary(..) | Expr::Math(..)) {
            return self.round_f16(v);
        }
        Ok(v)
    }

    /// The value of `id`, of type `ty` (not `bool`), in f32 where `ty` is f16.
    fn computed(&mut self, at: &Instance, id: ExprId, ty: ScalarType) -> Result<Val, Error> {
        let program = self.program;
        let s = at.stmt;
        Ok(match &s.exprs[id] {
            Expr::Literal(l) if l.ty.is_float() => Val::Float(l.value),
            Expr::Literal(l) => Val::I(Int::Const(l.value as i64)),
            Expr::Iter(d) => Val::I(self.int(&at.args[*d])?),
            Expr::Param(p) => Val::I(Int::Const(self.params[p.index()])),
            Expr::Read(r) => {
                let access = &s.reads[*r];
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
            } if extremum(s, *cond, *then, *otherwise).is_some() => {
                let (op, a, b) = extremum(s, *cond, *then, *otherwise).expect("an extremum");
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
                let from = program.expr_type(s, *a);
                let v = self.value(at, *a)?;
                self.cast(from, *to, v)?
            }
            Expr::Unary(UnaryOp::Not, _) | Expr::Call(..) | Expr::Local(_) => {
                return Err(Error::NotYet(format!(
                    "the expression {:?} of statement {}",
                    s.exprs[id], s.name
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
    fn flag(&mut self, at: &Instance, id: ExprId) -> Result<u8, Error> {
        let program = self.program;
        let s = at.stmt;
        let set = |r: u8, v: i64| Instr::Mov {
            dst: Reg::S(r),
            src: Scalar::Int(v),
        };
        match &s.exprs[id] {
            Expr::Binary(op, a, b) if op.is_comparison() => {
                let (x, y) = (self.value(at, *a)?, self.value(at, *b)?);
                let f = self.sreg()?;
                self.push(set(f, 0));
                let cmp = match op {
                    BinaryOp::Lt => CmpOp::Lt,
                    BinaryOp::Le => CmpOp::Le,
                    BinaryOp::Gt => CmpOp::Gt,
                    BinaryOp::Ge => CmpOp::Ge,
                    BinaryOp::Eq => CmpOp::Eq,
                    _ => CmpOp::Ne,
                };
                let one = self.nested(|e| {
                    e.push(set(f, 1));
                    Ok(())
                })?;
                self.branch(x.scalar(), cmp, y.scalar(), one);
                self.drop_val(x);
                self.drop_val(y);
                Ok(f)
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
                let f = self.sreg()?;
                self.push(set(f, 0));
                let one = self.nested(|e| {
                    e.push(set(f, 1));
                    Ok(())
                })?;
                let zero = if program.expr_type(s, *a).is_float() {
                    Scalar::Float(0.0)
                } else {
                    Scalar::Int(0)
                };
                self.branch(v.scalar(), CmpOp::Ne, zero, one);
                self.drop_val(v);
                Ok(f)
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
            other => Err(Error::NotYet(format!(
                "the condition {other:?} of statement {}",
                s.name
            ))),
        }
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

    /// `v` rounded to f16, through the scratch word.
    fn round_f16(&mut self, v: Val) -> Result<Val, Error> {
        let at = self.ub_at(Affine::constant(0));
        self.push(Instr::St {
            ty: DType::F16,
            dst: at.clone(),
            src: v.scalar(),
        });
        self.drop_val(v);
        let f = self.freg()?;
        self.push(Instr::Ld {
            ty: DType::F16,
            dst: Reg::F(f),
            src: at,
        });
        Ok(Val::F(f))
    }

    /// `op` of `v` on one lane of the Vector unit: stored to the scratch block, computed into
    /// the next one, loaded back once the Vector unit is done.
    fn vector_unary(&mut self, op: VUnOp, v: Val) -> Result<Val, Error> {
        self.one_lane(v, DType::F32, |dst, src| Instr::VUn {
            op,
            ty: DType::F32,
            dst,
            src,
            cfg: VecCfg {
                repeat: 1,
                blk: vec![1, 1],
                rep: vec![8, 8],
            },
        })
    }

    /// The f32 value `v` through `instr` (from the scratch block into the next one) on one lane
    /// of the Vector unit, loaded back as `result`.
    fn one_lane(
        &mut self,
        v: Val,
        result: DType,
        instr: impl FnOnce(Addr, Addr) -> Instr,
    ) -> Result<Val, Error> {
        let (src, dst) = (
            self.ub_at(Affine::constant(0)),
            self.ub_at(Affine::constant(32)),
        );
        self.push(Instr::St {
            ty: DType::F32,
            dst: src.clone(),
            src: v.scalar(),
        });
        self.drop_val(v);
        self.push(Instr::SetMask { hi: 0, lo: 1 });
        self.push(instr(dst.clone(), src));
        self.wait_for_vector();
        Ok(if result == DType::I32 {
            let r = self.sreg()?;
            self.push(Instr::Ld {
                ty: DType::I32,
                dst: Reg::S(r),
                src: dst,
            });
            Val::I(Int::Temp(r))
        } else {
            let f = self.freg()?;
            self.push(Instr::Ld {
                ty: DType::F32,
                dst: Reg::F(f),
                src: dst,
            });
            Val::F(f)
        })
    }

    /// The nearest integer to `x` (ties to even), in an integer register (`vconv` on one lane).
    fn nearest(&mut self, x: Val) -> Result<u8, Error> {
        let v = self.one_lane(x, DType::I32, |dst, src| Instr::VConv {
            from: DType::F32,
            to: DType::I32,
            dst,
            src,
            cfg: VecCfg {
                repeat: 1,
                blk: vec![1, 1],
                rep: vec![8, 8],
            },
        })?;
        match v {
            Val::I(Int::Temp(r)) => Ok(r),
            _ => Err(Error::NotYet("a conversion to i32".to_string())),
        }
    }

    /// `x` converted to i32 as C does, towards zero: the nearest integer, one nearer to zero
    /// where that passed `x`. Exact for values in i32's range.
    fn truncate(&mut self, x: Val) -> Result<Val, Error> {
        let x = self.in_freg(x)?;
        let xs = Scalar::Reg(Reg::F(x));
        let copy = self.copy_f(x)?;
        let r = self.nearest(Val::F(copy))?;
        let back = self.freg()?;
        self.push(Instr::Mov {
            dst: Reg::F(back),
            src: Scalar::Reg(Reg::S(r)),
        });
        let step = |e: &mut Self, op: SOp, cmp: CmpOp| -> Result<Vec<Stmt>, Error> {
            let fix = e.nested(|e| {
                e.push(Instr::SBin {
                    op,
                    dst: Reg::S(r),
                    a: Scalar::Reg(Reg::S(r)),
                    b: Scalar::Int(1),
                });
                Ok(())
            })?;
            e.nested(|e| {
                e.branch(Scalar::Reg(Reg::F(back)), cmp, xs.clone(), fix);
                Ok(())
            })
        };
        let down = step(self, SOp::Sub, CmpOp::Gt)?;
        let up = step(self, SOp::Add, CmpOp::Lt)?;
        self.branch_else(xs.clone(), CmpOp::Ge, Scalar::Float(0.0), down, up);
        self.free_f(back);
        self.free_f(x);
        Ok(Val::I(Int::Temp(r)))
    }

    /// `floor x` (or `ceil x` with `up`): the nearest integer, one lower (higher) where that
    /// passed `x`; values of 2^23 and more in size are integers already (and infinities and
    /// NaN stay as they are).
    fn floor_ceil(&mut self, x: Val, up: bool) -> Result<Val, Error> {
        let x = self.in_freg(x)?;
        let xs = Scalar::Reg(Reg::F(x));
        let out = self.freg()?;
        self.push(Instr::Mov {
            dst: Reg::F(out),
            src: xs.clone(),
        });
        let small = self.nested(|e| {
            let copy = e.copy_f(x)?;
            let r = e.nearest(Val::F(copy))?;
            e.push(Instr::Mov {
                dst: Reg::F(out),
                src: Scalar::Reg(Reg::S(r)),
            });
            e.free_s(r);
            let (cmp, op) = if up {
                (CmpOp::Lt, SOp::Add)
            } else {
                (CmpOp::Gt, SOp::Sub)
            };
            let fix = e.nested(|e| {
                e.fop(op, out, Scalar::Reg(Reg::F(out)), Scalar::Float(1.0));
                Ok(())
            })?;
            e.branch(Scalar::Reg(Reg::F(out)), cmp, xs.clone(), fix);
            Ok(())
        })?;
        // |x| < 2^23
        let inner = self.nested(|e| {
            e.branch(xs.clone(), CmpOp::Lt, Scalar::Float(8388608.0), small);
            Ok(())
        })?;
        self.branch(xs, CmpOp::Gt, Scalar::Float(-8388608.0), inner);
        self.free_f(x);
        Ok(Val::F(out))
    }

    /// A copy of float register `x` in a fresh one.
    fn copy_f(&mut self, x: u8) -> Result<u8, Error> {
        let c = self.freg()?;
        self.push(Instr::Mov {
            dst: Reg::F(c),
            src: Scalar::Reg(Reg::F(x)),
        });
        Ok(c)
    }

    /// A copy of a value in a register of its own (a value used twice).
    fn dup(&mut self, v: &Val) -> Result<Val, Error> {
        Ok(match v {
            Val::Float(x) => Val::Float(*x),
            Val::I(Int::Const(x)) => Val::I(Int::Const(*x)),
            Val::I(Int::Var(x)) => Val::I(Int::Var(x.clone())),
            Val::I(Int::Temp(r)) => {
                let d = self.sreg()?;
                self.push(Instr::Mov {
                    dst: Reg::S(d),
                    src: Scalar::Reg(Reg::S(*r)),
                });
                Val::I(Int::Temp(d))
            }
            Val::F(r) => {
                let d = self.freg()?;
                self.push(Instr::Mov {
                    dst: Reg::F(d),
                    src: Scalar::Reg(Reg::F(*r)),
                });
                Val::F(d)
            }
        })
    }

    fn math(
        &mut self,
        f: MathFn,
        ty: ScalarType,
        mut vals: Vec<Val>,
        at: &Instance,
        args: &[ExprId],
    ) -> Result<Val, Error> {
        let x = vals.remove(0);
        match f {
            MathFn::Exp => self.vector_unary(VUnOp::Exp, x),
            MathFn::Log => self.vector_unary(VUnOp::Ln, x),
            MathFn::Sqrt => self.vector_unary(VUnOp::Sqrt, x),
            MathFn::Rsqrt => self.vector_unary(VUnOp::Rsqrt, x),
            MathFn::Abs if ty.is_float() => {
                let neg = self.dup(&x)?;
                let neg = self.fbin(SOp::Sub, Val::Float(0.0), neg)?;
                self.fbin(SOp::Max, x, neg)
            }
            MathFn::Abs => {
                let neg = Self::int_val(self.dup(&x)?)?;
                let neg = self.sbin(SOp::Sub, Int::Const(0), neg)?;
                Ok(Val::I(self.sbin(SOp::Max, Self::int_val(x)?, neg)?))
            }
            MathFn::Pow => {
                let y = vals.remove(0);
                match &at.stmt.exprs[args[1]] {
                    Expr::Literal(l) if l.value.fract() == 0.0 && l.value.abs() <= 64.0 => {
                        self.drop_val(y);
                        self.power(x, l.value as i64)
                    }
                    _ => {
                        // x^y = exp(y · ln x)
                        let ln = self.vector_unary(VUnOp::Ln, x)?;
                        let p = self.fbin(SOp::Mul, y, ln)?;
                        self.vector_unary(VUnOp::Exp, p)
                    }
                }
            }
            MathFn::Tanh => self.tanh(x),
            MathFn::Floor => self.floor_ceil(x, false),
            MathFn::Ceil => self.floor_ceil(x, true),
            MathFn::Sin | MathFn::Cos => {
                Err(Error::NotYet(format!("`{}` on the accelerator", f.name())))
            }
        }
    }

    /// `x^n` by repeated squaring (a reciprocal for negative `n`).
    fn power(&mut self, x: Val, n: i64) -> Result<Val, Error> {
        let mut acc = Val::Float(1.0);
        let mut base = x;
        let mut k = n.unsigned_abs();
        while k > 0 {
            if k & 1 == 1 {
                let b = self.dup(&base)?;
                acc = self.fbin(SOp::Mul, acc, b)?;
            }
            k >>= 1;
            if k > 0 {
                let b = self.dup(&base)?;
                base = self.fbin(SOp::Mul, base, b)?;
            }
        }
        self.drop_val(base);
        if n < 0 {
            acc = self.fbin(SOp::Div, Val::Float(1.0), acc)?;
        }
        Ok(acc)
    }

    /// `v` in a float register of its own.
    fn in_freg(&mut self, v: Val) -> Result<u8, Error> {
        if let Val::F(r) = v {
            return Ok(r);
        }
        let r = self.freg()?;
        self.push(Instr::Mov {
            dst: Reg::F(r),
            src: v.scalar(),
        });
        self.drop_val(v);
        Ok(r)
    }

    fn fop(&mut self, op: SOp, dst: u8, a: Scalar, b: Scalar) {
        self.push(Instr::SBin {
            op,
            dst: Reg::F(dst),
            a,
            b,
        });
    }

    /// `tanh x`: the odd Taylor series for |x| < 0.5, `1 - 2 / (e^{2|x|} + 1)` with the sign of
    /// `x` elsewhere (where the series would need many terms and the formula loses no digits).
    fn tanh(&mut self, x: Val) -> Result<Val, Error> {
        let x = self.in_freg(x)?;
        let out = self.freg()?;
        let xs = Scalar::Reg(Reg::F(x));
        let series = self.nested(|e| e.tanh_series(x, out))?;
        let formula = self.nested(|e| e.tanh_formula(x, out))?;
        let inner = self.nested(|e| {
            e.branch_else(
                xs.clone(),
                CmpOp::Lt,
                Scalar::Float(0.5),
                series,
                formula.clone(),
            );
            Ok(())
        })?;
        self.branch_else(xs, CmpOp::Gt, Scalar::Float(-0.5), inner, formula);
        self.free_f(x);
        Ok(Val::F(out))
    }

    /// `out = x + x · x² · (c3 + x² · (c5 + …))`.
    fn tanh_series(&mut self, x: u8, out: u8) -> Result<(), Error> {
        let xs = Scalar::Reg(Reg::F(x));
        let (x2, acc) = (self.freg()?, self.freg()?);
        let (x2s, accs) = (Scalar::Reg(Reg::F(x2)), Scalar::Reg(Reg::F(acc)));
        self.fop(SOp::Mul, x2, xs.clone(), xs.clone());
        self.push(Instr::Mov {
            dst: Reg::F(acc),
            src: Scalar::Float(TANH_SERIES[TANH_SERIES.len() - 1]),
        });
        for c in TANH_SERIES[..TANH_SERIES.len() - 1].iter().rev() {
            self.fop(SOp::Mul, acc, accs.clone(), x2s.clone());
            self.fop(SOp::Add, acc, accs.clone(), Scalar::Float(*c));
        }
        self.fop(SOp::Mul, acc, accs.clone(), x2s);
        self.fop(SOp::Mul, acc, accs.clone(), xs.clone());
        self.fop(SOp::Add, out, accs, xs);
        self.free_f(x2);
        self.free_f(acc);
        Ok(())
    }

    /// `out = sign(x) · (1 - 2 / (e^{2|x|} + 1))`.
    fn tanh_formula(&mut self, x: u8, out: u8) -> Result<(), Error> {
        let xs = Scalar::Reg(Reg::F(x));
        let a = self.freg()?;
        let a_s = Scalar::Reg(Reg::F(a));
        self.fop(SOp::Sub, a, Scalar::Float(0.0), xs.clone());
        self.fop(SOp::Max, a, a_s.clone(), xs.clone());
        self.fop(SOp::Mul, a, a_s, Scalar::Float(2.0));
        let ex = self.vector_unary(VUnOp::Exp, Val::F(a))?;
        let ex = self.in_freg(ex)?;
        let es = Scalar::Reg(Reg::F(ex));
        self.fop(SOp::Add, ex, es.clone(), Scalar::Float(1.0));
        self.fop(SOp::Div, ex, Scalar::Float(2.0), es.clone());
        self.fop(SOp::Sub, out, Scalar::Float(1.0), es);
        self.free_f(ex);
        let os = Scalar::Reg(Reg::F(out));
        let negate = self.nested(|e| {
            e.fop(SOp::Sub, out, Scalar::Float(0.0), os.clone());
            Ok(())
        })?;
        self.branch(xs, CmpOp::Lt, Scalar::Float(0.0), negate);
        Ok(())
    }
}

/// The minimum or maximum a selection computes, as (`Min` or `Max`, operands): `a < b ? a : b`
/// is `min(a, b)`, and likewise for the other comparisons and the swapped branches.
pub(super) fn extremum(
    s: &Statement,
    cond: ExprId,
    then: ExprId,
    otherwise: ExprId,
) -> Option<(BinaryOp, ExprId, ExprId)> {
    let Expr::Binary(cmp, a, b) = &s.exprs[cond] else {
        return None;
    };
    let less = match cmp {
        BinaryOp::Lt | BinaryOp::Le => true,
        BinaryOp::Gt | BinaryOp::Ge => false,
        _ => return None,
    };
    let op = if same(s, *a, then) && same(s, *b, otherwise) {
        less
    } else if same(s, *b, then) && same(s, *a, otherwise) {
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

/// Whether two expressions of a statement compute the same value (reads of one element count
/// as the same).
fn same(s: &Statement, x: ExprId, y: ExprId) -> bool {
    let all = |a: &[ExprId], b: &[ExprId]| {
        a.len() == b.len() && a.iter().zip(b).all(|(&p, &q)| same(s, p, q))
    };
    match (&s.exprs[x], &s.exprs[y]) {
        (Expr::Read(p), Expr::Read(q)) => {
            let (p, q) = (&s.reads[*p], &s.reads[*q]);
            p.array == q.array && p.subscripts == q.subscripts
        }
        (Expr::Literal(p), Expr::Literal(q)) => p == q,
        (Expr::Iter(p), Expr::Iter(q)) => p == q,
        (Expr::Param(p), Expr::Param(q)) => p == q,
        (Expr::Unary(o, p), Expr::Unary(r, q)) => o == r && same(s, *p, *q),
        (Expr::Binary(o, p, q), Expr::Binary(r, u, v)) => {
            o == r && same(s, *p, *u) && same(s, *q, *v)
        }
        (Expr::Cast(t, p), Expr::Cast(u, q)) => t == u && same(s, *p, *q),
        (Expr::Math(f, p), Expr::Math(g, q)) => f == g && all(p, q),
        _ => false,
    }
}
