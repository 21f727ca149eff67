//! Arithmetic the scalar unit has no instruction for: rounding to f16, the transcendental
//! functions on one lane of the Vector unit, conversions to integers, powers, the hyperbolic
//! tangent, sine and cosine.

use polyhedral::program::{Expr, ExprId, MathFn, ScalarType};
use std::f64::consts::FRAC_2_PI;

use sim::isa::{Addr, Affine, CmpOp, DType, Instr, Reg, SOp, Scalar, Stmt, VUnOp, VecCfg};

use super::emit::{Emitter, Int};
use super::scalar::{Instance, Val};
use crate::npu::function::TANH_SERIES;
use crate::npu::Error;

impl Emitter<'_> {
    /// `v` rounded to f16, through the scratch word.
    pub(super) fn round_f16(&mut self, v: Val) -> Result<Val, Error> {
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
    pub(super) fn truncate(&mut self, x: Val) -> Result<Val, Error> {
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
    pub(super) fn dup(&mut self, v: &Val) -> Result<Val, Error> {
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

    pub(super) fn math(
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
                match at.expr(args[1]) {
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
            MathFn::Sin => self.sin_cos(x, false),
            MathFn::Cos => self.sin_cos(x, true),
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
    pub(super) fn in_freg(&mut self, v: Val) -> Result<u8, Error> {
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

    pub(super) fn fop(&mut self, op: SOp, dst: u8, a: Scalar, b: Scalar) {
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
        self.horner(acc, &x2s, &TANH_SERIES);
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
        self.negate_if(out, xs, CmpOp::Lt, Scalar::Float(0.0))?;
        Ok(())
    }

    /// `sin x` (or `cos x` with `cos`): `x = k·π/2 + r` with `|r| <= π/4`, then the
    /// polynomial of `±sin r` or `±cos r` that the quadrant `k mod 4` calls for.
    ///
    /// `k·π/2` is subtracted in parts ([`HALF_PI_PARTS`]) whose products with both 12-bit
    /// halves of `k` are exact, and then once more with the `k` of the remainder (the first
    /// `k` is rounded from an f32 product and can be one off): within the f32 tolerance for
    /// `|x| < 2·10⁷`.
    fn sin_cos(&mut self, x: Val, cos: bool) -> Result<Val, Error> {
        let r = self.in_freg(x)?;
        let k = self.quadrant(r)?;
        let k2 = self.quadrant(r)?;
        self.sop(SOp::Add, k, Scalar::Reg(Reg::S(k)), Scalar::Reg(Reg::S(k2)));
        self.free_s(k2);
        // q = (k + cos) mod 4, in 0..4.
        let ks = Scalar::Reg(Reg::S(k));
        if cos {
            self.sop(SOp::Add, k, ks.clone(), Scalar::Int(1));
        }
        let q = self.sreg()?;
        let qs = Scalar::Reg(Reg::S(q));
        self.sop(SOp::Div, q, ks.clone(), Scalar::Int(4));
        self.sop(SOp::Mul, q, qs.clone(), Scalar::Int(4));
        self.sop(SOp::Sub, q, ks, qs.clone());
        self.free_s(k);
        let wrap = self.nested(|e| {
            e.sop(SOp::Add, q, qs.clone(), Scalar::Int(4));
            Ok(())
        })?;
        self.branch(qs.clone(), CmpOp::Lt, Scalar::Int(0), wrap);
        let (z, out, c) = (self.freg()?, self.freg()?, self.freg()?);
        let [rs, zs, os, cs] = [r, z, out, c].map(|f| Scalar::Reg(Reg::F(f)));
        self.fop(SOp::Mul, z, rs.clone(), rs.clone());
        // out = r + r·z·(s1 + z·(s2 + z·s3))
        self.horner(out, &zs, &SIN_SERIES);
        self.fop(SOp::Mul, out, os.clone(), zs.clone());
        self.fop(SOp::Mul, out, os.clone(), rs.clone());
        self.fop(SOp::Add, out, os.clone(), rs);
        // c = (1 - z/2) + z·z·(c1 + z·(c2 + z·c3))
        self.horner(c, &zs, &COS_SERIES);
        self.fop(SOp::Mul, c, cs.clone(), zs.clone());
        self.fop(SOp::Mul, c, cs.clone(), zs.clone());
        self.fop(SOp::Mul, z, zs.clone(), Scalar::Float(0.5));
        self.fop(SOp::Sub, z, Scalar::Float(1.0), zs.clone());
        self.fop(SOp::Add, c, zs, cs.clone());
        for odd in [1, 3] {
            let take = self.nested(|e| {
                e.push(Instr::Mov {
                    dst: Reg::F(out),
                    src: cs.clone(),
                });
                Ok(())
            })?;
            self.branch(qs.clone(), CmpOp::Eq, Scalar::Int(odd), take);
        }
        self.negate_if(out, qs, CmpOp::Ge, Scalar::Int(2))?;
        self.free_s(q);
        for f in [r, z, c] {
            self.free_f(f);
        }
        Ok(Val::F(out))
    }

    /// `out = -out` where `lhs op rhs`.
    fn negate_if(&mut self, out: u8, lhs: Scalar, op: CmpOp, rhs: Scalar) -> Result<(), Error> {
        let negate = self.nested(|e| {
            e.fop(SOp::Sub, out, Scalar::Float(0.0), Scalar::Reg(Reg::F(out)));
            Ok(())
        })?;
        self.branch(lhs, op, rhs, negate);
        Ok(())
    }

    /// `dst = c[0] + z·(c[1] + z·(… + z·c[n-1]))`.
    fn horner(&mut self, dst: u8, z: &Scalar, c: &[f64]) {
        let ds = Scalar::Reg(Reg::F(dst));
        self.push(Instr::Mov {
            dst: Reg::F(dst),
            src: Scalar::Float(c[c.len() - 1]),
        });
        for c in c[..c.len() - 1].iter().rev() {
            self.fop(SOp::Mul, dst, ds.clone(), z.clone());
            self.fop(SOp::Add, dst, ds.clone(), Scalar::Float(*c));
        }
    }

    /// The nearest integer `k` to `r·2/π`, in an integer register; `r` becomes `r - k·π/2`.
    fn quadrant(&mut self, r: u8) -> Result<u8, Error> {
        let rs = Scalar::Reg(Reg::F(r));
        let t = self.freg()?;
        self.fop(SOp::Mul, t, rs.clone(), Scalar::Float(FRAC_2_PI));
        let k = self.nearest(Val::F(t))?;
        // k = high·4096 + low
        let (high, low) = (self.sreg()?, self.sreg()?);
        let [ks, hs, ls] = [k, high, low].map(|s| Scalar::Reg(Reg::S(s)));
        self.sop(SOp::Div, high, ks.clone(), Scalar::Int(4096));
        self.sop(SOp::Mul, low, hs.clone(), Scalar::Int(4096));
        self.sop(SOp::Sub, low, ks, ls.clone());
        let (fh, fl, p) = (self.freg()?, self.freg()?, self.freg()?);
        for (f, i) in [(fh, hs), (fl, ls)] {
            self.push(Instr::Mov {
                dst: Reg::F(f),
                src: i,
            });
        }
        self.free_s(high);
        self.free_s(low);
        for part in HALF_PI_PARTS {
            for (f, scale) in [(fh, 4096.0), (fl, 1.0)] {
                self.fop(
                    SOp::Mul,
                    p,
                    Scalar::Reg(Reg::F(f)),
                    Scalar::Float(part * scale),
                );
                self.fop(SOp::Sub, r, rs.clone(), Scalar::Reg(Reg::F(p)));
            }
        }
        for f in [fh, fl, p] {
            self.free_f(f);
        }
        Ok(k)
    }

    /// `dst = a op b` in integer register `dst`.
    fn sop(&mut self, op: SOp, dst: u8, a: Scalar, b: Scalar) {
        self.push(Instr::SBin {
            op,
            dst: Reg::S(dst),
            a,
            b,
        });
    }
}

/// π/2 as a sum of parts of 12 significant bits each (the last rounded to f32): the product of
/// each with an integer below 2^12, or with 4096 times one, is exact in f32.
const HALF_PI_PARTS: [f64; 5] = [
    1.57080078125,
    -4.453584551811218e-06,
    -8.706138032721356e-10,
    6.222800053024002e-14,
    5.721188916458728e-18,
];

/// The coefficients of `(sin r - r) / r³` in `r²` on `|r| <= π/4` (Cephes' `sinf`).
const SIN_SERIES: [f64; 3] = [-1.6666654611E-1, 8.3321608736E-3, -1.9515295891E-4];

/// The coefficients of `(cos r - 1 + r²/2) / r⁴` in `r²` on `|r| <= π/4` (Cephes' `cosf`).
const COS_SERIES: [f64; 3] = [
    4.166664568298827E-2,
    -1.388731625493765E-3,
    2.443315711809948E-5,
];
