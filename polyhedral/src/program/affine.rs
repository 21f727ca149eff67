//! Affine expressions and constraints over a statement's iterators and the size parameters.
//!
//! An [`AffineExpr`] keeps its terms sorted by variable with no zero coefficient and no variable
//! twice, so two equal expressions compare equal structurally.
//!
//! Besides iterators and parameters, an expression of a statement may use the statement's
//! *division variables* ([`Var::Div`]): integers `floor(num / den)` that the statement defines
//! ([`Division`], [`super::Statement::divs`]). They make subscripts quasi-affine (`t % 2` is
//! `t - 2·floor(t/2)`) while every relation built from them stays exact: a division is an
//! existentially quantified integer `q` with `den·q <= num <= den·q + den - 1`.

use super::ParamId;

/// A variable of an affine expression: a loop iterator of the enclosing statement (by depth,
/// outermost 0), a size parameter, or a division variable of the statement (by index into
/// its [`super::Statement::divs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Var {
    Iter(usize),
    Param(ParamId),
    Div(usize),
}

/// `floor(num / den)` with `den > 0`: the value of a division variable. `num` uses the
/// statement's iterators, the parameters and division variables defined before this one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Division {
    pub num: AffineExpr,
    pub den: i64,
}

/// `Σ coeff·var + constant`, with integer coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AffineExpr {
    terms: Vec<(Var, i64)>,
    pub constant: i64,
}

impl AffineExpr {
    pub fn constant(c: i64) -> AffineExpr {
        AffineExpr {
            terms: Vec::new(),
            constant: c,
        }
    }

    pub fn var(v: Var) -> AffineExpr {
        AffineExpr::term(v, 1)
    }

    pub fn term(v: Var, coeff: i64) -> AffineExpr {
        let mut e = AffineExpr::default();
        e.add_term(v, coeff);
        e
    }

    /// Builds an expression from terms in any order, merging repeated variables.
    pub fn from_terms(terms: impl IntoIterator<Item = (Var, i64)>, constant: i64) -> AffineExpr {
        let mut e = AffineExpr::constant(constant);
        for (v, c) in terms {
            e.add_term(v, c);
        }
        e
    }

    /// The non-zero terms, sorted by variable.
    pub fn terms(&self) -> &[(Var, i64)] {
        &self.terms
    }

    pub fn coeff(&self, v: Var) -> i64 {
        match self.terms.binary_search_by(|(w, _)| w.cmp(&v)) {
            Ok(i) => self.terms[i].1,
            Err(_) => 0,
        }
    }

    pub fn is_constant(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn add_term(&mut self, v: Var, coeff: i64) {
        match self.terms.binary_search_by(|(w, _)| w.cmp(&v)) {
            Ok(i) => {
                self.terms[i].1 += coeff;
                if self.terms[i].1 == 0 {
                    self.terms.remove(i);
                }
            }
            Err(i) => {
                if coeff != 0 {
                    self.terms.insert(i, (v, coeff));
                }
            }
        }
    }

    pub fn add(&self, other: &AffineExpr) -> AffineExpr {
        let mut e = self.clone();
        for &(v, c) in &other.terms {
            e.add_term(v, c);
        }
        e.constant += other.constant;
        e
    }

    pub fn sub(&self, other: &AffineExpr) -> AffineExpr {
        self.add(&other.scale(-1))
    }

    pub fn scale(&self, k: i64) -> AffineExpr {
        if k == 0 {
            return AffineExpr::constant(0);
        }
        AffineExpr {
            terms: self.terms.iter().map(|&(v, c)| (v, c * k)).collect(),
            constant: self.constant * k,
        }
    }

    /// The deepest iterator with a non-zero coefficient (division variables not looked into).
    pub fn innermost_iter(&self) -> Option<usize> {
        self.terms
            .iter()
            .filter_map(|&(v, _)| match v {
                Var::Iter(i) => Some(i),
                Var::Param(_) | Var::Div(_) => None,
            })
            .max()
    }

    /// Whether every iterator is below `depth`, every parameter below `n_params`, and no
    /// division variable is used.
    pub fn uses_only(&self, depth: usize, n_params: usize) -> bool {
        self.uses_only_with(depth, n_params, 0)
    }

    /// Whether every iterator is below `depth`, every parameter below `n_params` and every
    /// division variable below `n_divs`.
    pub fn uses_only_with(&self, depth: usize, n_params: usize, n_divs: usize) -> bool {
        self.terms.iter().all(|&(v, _)| match v {
            Var::Iter(i) => i < depth,
            Var::Param(p) => p.index() < n_params,
            Var::Div(k) => k < n_divs,
        })
    }

    /// Whether a division variable appears.
    pub fn has_divisions(&self) -> bool {
        self.terms.iter().any(|&(v, _)| matches!(v, Var::Div(_)))
    }

    /// Value for the given iterator and parameter values, of an expression without division
    /// variables (domains and shapes are such; see [`AffineExpr::eval_with`] for the others).
    pub fn eval(&self, iters: &[i64], params: &[i64]) -> i64 {
        self.eval_with(iters, &[], params)
    }

    /// Value for the given iterator, division variable and parameter values
    /// ([`super::Statement::division_values`] gives a statement's divisions at a point).
    pub fn eval_with(&self, iters: &[i64], divs: &[i64], params: &[i64]) -> i64 {
        let mut sum = self.constant;
        for &(v, c) in &self.terms {
            sum += c * match v {
                Var::Iter(i) => iters[i],
                Var::Param(p) => params[p.index()],
                Var::Div(k) => divs[k],
            };
        }
        sum
    }

    /// Replaces every parameter by its value.
    pub fn bind_params(&self, params: &[i64]) -> AffineExpr {
        let mut e = AffineExpr::constant(self.constant);
        for &(v, c) in &self.terms {
            match v {
                Var::Param(p) => e.constant += c * params[p.index()],
                Var::Iter(_) | Var::Div(_) => e.add_term(v, c),
            }
        }
        e
    }

    /// Renumbers iterators by `map` (old depth → new depth).
    pub fn map_iters(&self, map: impl Fn(usize) -> usize) -> AffineExpr {
        AffineExpr::from_terms(
            self.terms.iter().map(|&(v, c)| match v {
                Var::Iter(i) => (Var::Iter(map(i)), c),
                Var::Param(_) | Var::Div(_) => (v, c),
            }),
            self.constant,
        )
    }

    /// Renumbers division variables by `map` (old index → new index).
    pub fn map_divs(&self, map: impl Fn(usize) -> usize) -> AffineExpr {
        AffineExpr::from_terms(
            self.terms.iter().map(|&(v, c)| match v {
                Var::Div(k) => (Var::Div(map(k)), c),
                Var::Iter(_) | Var::Param(_) => (v, c),
            }),
            self.constant,
        )
    }

    /// Writes the expression with the given names for iterators and parameters, in the
    /// notation of isl (`2i + N - 1`). Division variables are written `q0`, `q1`, …; see
    /// [`AffineExpr::display_with_divs`] to write them out.
    pub fn display_with<'a>(
        &'a self,
        iter_name: &'a dyn Fn(usize) -> String,
        param_name: &'a dyn Fn(ParamId) -> String,
    ) -> impl std::fmt::Display + 'a {
        DisplayAffine {
            expr: self,
            iter_name,
            param_name,
            divs: &[],
        }
    }

    /// [`AffineExpr::display_with`], each division variable written as its definition in
    /// isl's notation (`floor((t + 1)/2)`).
    pub fn display_with_divs<'a>(
        &'a self,
        divs: &'a [Division],
        iter_name: &'a dyn Fn(usize) -> String,
        param_name: &'a dyn Fn(ParamId) -> String,
    ) -> impl std::fmt::Display + 'a {
        DisplayAffine {
            expr: self,
            iter_name,
            param_name,
            divs,
        }
    }
}

struct DisplayAffine<'a> {
    expr: &'a AffineExpr,
    iter_name: &'a dyn Fn(usize) -> String,
    param_name: &'a dyn Fn(ParamId) -> String,
    divs: &'a [Division],
}

impl std::fmt::Display for DisplayAffine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `m·num - m·den·floor(num/den)` is written `m((num) mod den)`.
        let mut rest = self.expr.clone();
        let mut mods: Vec<(i64, &Division)> = Vec::new();
        for &(v, c) in &self.expr.terms {
            let Var::Div(k) = v else { continue };
            let Some(d) = self.divs.get(k) else { continue };
            if c < 0 && c % d.den == 0 {
                let m = -c / d.den;
                rest = rest.sub(&d.num.scale(m));
                rest.add_term(v, -c);
                mods.push((m, d));
            }
        }
        let mut first = true;
        for &(v, c) in &rest.terms {
            let name = match v {
                Var::Iter(i) => (self.iter_name)(i),
                Var::Param(p) => (self.param_name)(p),
                Var::Div(k) => match self.divs.get(k) {
                    Some(d) => {
                        let num = DisplayAffine {
                            expr: &d.num,
                            ..*self
                        };
                        format!("floor(({num})/{})", d.den)
                    }
                    None => format!("q{k}"),
                },
            };
            let (sign, mag) = if c < 0 { ("-", -c) } else { ("+", c) };
            match (first, sign) {
                (true, "-") => f.write_str("-")?,
                (true, _) => {}
                (false, s) => write!(f, " {s} ")?,
            }
            if mag != 1 {
                write!(f, "{mag}")?;
            }
            f.write_str(&name)?;
            first = false;
        }
        for (m, d) in mods {
            if !first {
                f.write_str(" + ")?;
            }
            let num = DisplayAffine {
                expr: &d.num,
                ..*self
            };
            if m == 1 {
                write!(f, "({num}) mod {}", d.den)?;
            } else {
                write!(f, "{m}(({num}) mod {})", d.den)?;
            }
            first = false;
        }
        let c = rest.constant;
        if first {
            write!(f, "{c}")
        } else if c > 0 {
            write!(f, " + {c}")
        } else if c < 0 {
            write!(f, " - {}", -c)
        } else {
            Ok(())
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConstraintKind {
    /// `expr >= 0`
    NonNegative,
    /// `expr = 0`
    Zero,
}

/// `expr >= 0` or `expr = 0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Constraint {
    pub expr: AffineExpr,
    pub kind: ConstraintKind,
}

impl Constraint {
    pub fn non_negative(expr: AffineExpr) -> Constraint {
        Constraint {
            expr,
            kind: ConstraintKind::NonNegative,
        }
    }

    pub fn zero(expr: AffineExpr) -> Constraint {
        Constraint {
            expr,
            kind: ConstraintKind::Zero,
        }
    }

    /// `lhs <= rhs`
    pub fn le(lhs: &AffineExpr, rhs: &AffineExpr) -> Constraint {
        Constraint::non_negative(rhs.sub(lhs))
    }

    /// `lhs < rhs`, that is `lhs + 1 <= rhs` over the integers.
    pub fn lt(lhs: &AffineExpr, rhs: &AffineExpr) -> Constraint {
        Constraint::non_negative(rhs.sub(lhs).add(&AffineExpr::constant(-1)))
    }

    pub fn eq(lhs: &AffineExpr, rhs: &AffineExpr) -> Constraint {
        Constraint::zero(lhs.sub(rhs))
    }

    pub fn holds(&self, iters: &[i64], params: &[i64]) -> bool {
        let v = self.expr.eval(iters, params);
        match self.kind {
            ConstraintKind::NonNegative => v >= 0,
            ConstraintKind::Zero => v == 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_stay_normalised() {
        let i = Var::Iter(0);
        let n = Var::Param(ParamId(0));
        let a = AffineExpr::from_terms([(n, 1), (i, 2), (i, -2)], 3);
        assert_eq!(a.terms(), &[(n, 1)]);
        assert_eq!(a, AffineExpr::from_terms([(n, 1)], 3));
        assert_eq!(a.eval(&[7], &[10]), 13);
    }

    #[test]
    fn division_variables_print_and_evaluate() {
        let t = Var::Iter(0);
        // floor((t + 1)/2), then (t + 1) mod 2 = t + 1 - 2·floor((t + 1)/2).
        let divs = [Division {
            num: AffineExpr::from_terms([(t, 1)], 1),
            den: 2,
        }];
        let m = AffineExpr::from_terms([(t, 1), (Var::Div(0), -2)], 1);
        let it = |_: usize| "t".to_string();
        let pn = |_: ParamId| "N".to_string();
        assert_eq!(
            m.display_with_divs(&divs, &it, &pn).to_string(),
            "(t + 1) mod 2"
        );
        assert_eq!(m.display_with(&it, &pn).to_string(), "t - 2q0 + 1");
        let q = AffineExpr::term(Var::Div(0), 3);
        assert_eq!(
            q.display_with_divs(&divs, &it, &pn).to_string(),
            "3floor((t + 1)/2)"
        );
        for v in -3..4 {
            let d = [(v + 1i64).div_euclid(2)];
            assert_eq!(m.eval_with(&[v], &d, &[]), (v + 1).rem_euclid(2));
        }
        assert!(m.has_divisions() && !m.uses_only(1, 0) && m.uses_only_with(1, 0, 1));
    }

    #[test]
    fn prints_like_isl() {
        let e = AffineExpr::from_terms([(Var::Iter(0), 2), (Var::Iter(1), -1)], -1);
        let it = |i: usize| ["i", "j"][i].to_string();
        let pn = |_: ParamId| "N".to_string();
        assert_eq!(e.display_with(&it, &pn).to_string(), "2i - j - 1");
        assert_eq!(
            AffineExpr::constant(0).display_with(&it, &pn).to_string(),
            "0"
        );
    }
}
