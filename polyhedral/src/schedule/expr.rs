//! Quasi-affine expressions: affine expressions plus integer divisions of quasi-affine
//! expressions by positive constants (`i - 32*floor(i/32)`), the functions a band schedules
//! with and the constraints filters and extensions are written in.
//!
//! Invariants: every division has a positive denominator; a [`FloorTerm`] with coefficient 0
//! is never stored (the constructors drop it).

use std::fmt;

use crate::program::{AffineExpr, ConstraintKind, ParamId, Var};

/// `coeff * floor(num / den)` with `den > 0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FloorTerm {
    pub coeff: i64,
    pub num: QuasiAffine,
    pub den: i64,
}

/// `affine + Σ coeff·floor(num/den)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct QuasiAffine {
    pub affine: AffineExpr,
    pub floors: Vec<FloorTerm>,
}

impl From<AffineExpr> for QuasiAffine {
    fn from(affine: AffineExpr) -> QuasiAffine {
        QuasiAffine {
            affine,
            floors: Vec::new(),
        }
    }
}

impl QuasiAffine {
    pub fn var(v: Var) -> QuasiAffine {
        AffineExpr::var(v).into()
    }

    pub fn constant(c: i64) -> QuasiAffine {
        AffineExpr::constant(c).into()
    }

    /// `floor(self / den)`; `None` unless `den > 0`.
    pub fn floor_div(&self, den: i64) -> Option<QuasiAffine> {
        if den <= 0 {
            return None;
        }
        if den == 1 {
            return Some(self.clone());
        }
        if self.floors.is_empty() && self.affine.terms().is_empty() {
            let value = self.affine.constant.div_euclid(den);
            return Some(QuasiAffine {
                affine: AffineExpr::constant(value),
                floors: Vec::new(),
            });
        }
        Some(QuasiAffine {
            affine: AffineExpr::default(),
            floors: vec![FloorTerm {
                coeff: 1,
                num: self.clone(),
                den,
            }],
        })
    }

    /// `self mod den` as `self - den*floor(self/den)`; `None` unless `den > 0`.
    pub fn modulo(&self, den: i64) -> Option<QuasiAffine> {
        Some(self.add(&self.floor_div(den)?.scale(-den)))
    }

    pub fn add(&self, other: &QuasiAffine) -> QuasiAffine {
        let mut floors = self.floors.clone();
        floors.extend(other.floors.iter().cloned());
        QuasiAffine {
            affine: self.affine.add(&other.affine),
            floors,
        }
    }

    pub fn scale(&self, k: i64) -> QuasiAffine {
        if k == 0 {
            return QuasiAffine::default();
        }
        QuasiAffine {
            affine: self.affine.scale(k),
            floors: self
                .floors
                .iter()
                .map(|f| FloorTerm {
                    coeff: f.coeff * k,
                    num: f.num.clone(),
                    den: f.den,
                })
                .collect(),
        }
    }

    /// Renumbers iterators by `map` (old depth → new depth), inside divisions too.
    pub fn map_iters(&self, map: &impl Fn(usize) -> usize) -> QuasiAffine {
        QuasiAffine {
            affine: self.affine.map_iters(map),
            floors: self
                .floors
                .iter()
                .map(|f| FloorTerm {
                    coeff: f.coeff,
                    num: f.num.map_iters(map),
                    den: f.den,
                })
                .collect(),
        }
    }

    /// Whether the expression has no division.
    pub fn is_affine(&self) -> bool {
        self.floors.is_empty()
    }

    /// The expression as an affine one, when it has no division.
    pub fn as_affine(&self) -> Option<&AffineExpr> {
        self.is_affine().then_some(&self.affine)
    }

    /// The number of divisions, nested ones included.
    pub fn n_divisions(&self) -> usize {
        self.floors.iter().map(|f| 1 + f.num.n_divisions()).sum()
    }

    /// Whether every iterator is below `depth` and every parameter below `n_params`.
    pub fn uses_only(&self, depth: usize, n_params: usize) -> bool {
        self.affine.uses_only(depth, n_params)
            && self
                .floors
                .iter()
                .all(|f| f.den > 0 && f.num.uses_only(depth, n_params))
    }

    /// Value for the given iterator and parameter values.
    pub fn eval(&self, iters: &[i64], params: &[i64]) -> i64 {
        let mut v = self.affine.eval(iters, params);
        for f in &self.floors {
            v += f.coeff * f.num.eval(iters, params).div_euclid(f.den);
        }
        v
    }

    /// Writes the expression in isl's notation (`i - 32*floor((i)/32)`).
    pub fn display_with<'a>(
        &'a self,
        iter_name: &'a dyn Fn(usize) -> String,
        param_name: &'a dyn Fn(ParamId) -> String,
    ) -> impl fmt::Display + 'a {
        DisplayQuasi {
            expr: self,
            iter_name,
            param_name,
        }
    }
}

struct DisplayQuasi<'a> {
    expr: &'a QuasiAffine,
    iter_name: &'a dyn Fn(usize) -> String,
    param_name: &'a dyn Fn(ParamId) -> String,
}

impl fmt::Display for DisplayQuasi<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let affine_zero = self.expr.affine == AffineExpr::default();
        if !affine_zero || self.expr.floors.is_empty() {
            write!(
                f,
                "{}",
                self.expr
                    .affine
                    .display_with(self.iter_name, self.param_name)
            )?;
        }
        for (k, t) in self.expr.floors.iter().enumerate() {
            let first = affine_zero && k == 0;
            let (sign, mag) = if t.coeff < 0 {
                ("-", -t.coeff)
            } else {
                ("+", t.coeff)
            };
            match (first, sign) {
                (true, "-") => f.write_str("-")?,
                (true, _) => {}
                (false, s) => write!(f, " {s} ")?,
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            let inner = t.num.display_with(self.iter_name, self.param_name);
            write!(f, "floor(({inner})/{})", t.den)?;
        }
        Ok(())
    }
}

/// `expr >= 0` or `expr = 0` over a quasi-affine expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuasiConstraint {
    pub expr: QuasiAffine,
    pub kind: ConstraintKind,
}

impl QuasiConstraint {
    pub fn non_negative(expr: QuasiAffine) -> QuasiConstraint {
        QuasiConstraint {
            expr,
            kind: ConstraintKind::NonNegative,
        }
    }

    pub fn zero(expr: QuasiAffine) -> QuasiConstraint {
        QuasiConstraint {
            expr,
            kind: ConstraintKind::Zero,
        }
    }

    /// `lhs <= rhs`
    pub fn le(lhs: &QuasiAffine, rhs: &QuasiAffine) -> QuasiConstraint {
        QuasiConstraint::non_negative(rhs.add(&lhs.scale(-1)))
    }

    /// `lhs = rhs`
    pub fn eq(lhs: &QuasiAffine, rhs: &QuasiAffine) -> QuasiConstraint {
        QuasiConstraint::zero(lhs.add(&rhs.scale(-1)))
    }

    pub fn holds(&self, iters: &[i64], params: &[i64]) -> bool {
        let v = self.expr.eval(iters, params);
        match self.kind {
            ConstraintKind::NonNegative => v >= 0,
            ConstraintKind::Zero => v == 0,
        }
    }

    pub fn display_with<'a>(
        &'a self,
        iter_name: &'a dyn Fn(usize) -> String,
        param_name: &'a dyn Fn(ParamId) -> String,
    ) -> String {
        let op = match self.kind {
            ConstraintKind::NonNegative => ">=",
            ConstraintKind::Zero => "=",
        };
        format!("{} {op} 0", self.expr.display_with(iter_name, param_name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_evaluate_and_print() {
        let i = QuasiAffine::var(Var::Iter(0));
        let tile = i.floor_div(32).unwrap();
        let point = i.modulo(32).unwrap();
        assert_eq!(tile.eval(&[-1], &[]), -1);
        assert_eq!(point.eval(&[-1], &[]), 31);
        assert_eq!(point.eval(&[70], &[]), 6);
        let names = |d: usize| ["i"][d].to_string();
        let params = |_: ParamId| "N".to_string();
        assert_eq!(
            tile.display_with(&names, &params).to_string(),
            "floor((i)/32)"
        );
        assert_eq!(
            point.display_with(&names, &params).to_string(),
            "i - 32*floor((i)/32)"
        );
        assert!(i.floor_div(0).is_none());
    }
}
