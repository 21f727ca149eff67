//! Quasi-affine expressions of the C front end: divisions by constants in bounds, conditions
//! and subscripts, made exact with division variables.
//!
//! C's `e / k` and `e % k` truncate toward zero; Pluto's `floord(a, b)` and `ceild(a, b)` are
//! the floor and the ceiling of `a / b` for a positive constant `b`. Every one of them is
//! written with `floor(num / den)` for a positive `den` ([`Divisions::floor`]): `e / k` is
//! `floor(e / k)` where `e` is provably non-negative and `-floor(-e / k)` where it is provably
//! non-positive, `e % k` is `e - k·(e / k)`, `ceild(a, b)` is `-floor(-a / b)` (the lowering
//! decides the signs, see [`Divisions::infeasible`]).
//!
//! One table of divisions serves the whole SCoP: [`Var::Div`] `k` of a bound or subscript
//! under construction is `divs[k]`, whose numerator uses iterators (by depth), sizes and
//! divisions before it; a division is a function of its numerator alone, so one entry serves
//! every statement that uses it. Statements carry their own renumbered copy of the divisions
//! their subscripts use ([`Divisions::localize`]).
//!
//! Domains stay affine: a constraint with divisions is rewritten without them where that is
//! exact ([`Divisions::linearize`]): `j <= floor(i / 2)` is `2j <= i`. That is possible for a
//! division whose coefficient is ±1 once the constraint is divided by the gcd of its
//! coefficients; others (`i % 2 == 0`) need a division variable in the domain, which the IR
//! does not have, and are refused by the caller.
//!
//! Questions about signs and feasibility are asked of the integer-set library, over the
//! enclosing loops' domain with every size non-negative, so their answers hold at every size
//! the generated code can run with.

use polyhedral::program::{AffineExpr, Constraint, ConstraintKind, Division, Var};
use polyhedral::sets::{Set, Tuple};

/// The divisions of a SCoP being lowered.
#[derive(Clone, Debug, Default)]
pub(crate) struct Divisions {
    pub divs: Vec<Division>,
}

/// The largest magnitude of a coefficient or constant that the rewritings here take, so that
/// their products (by a denominator, itself no larger) fit `i64`.
const LIMIT: i64 = 1 << 31;

/// Whether every coefficient and the constant of `e` are at most [`LIMIT`] in magnitude.
pub(crate) fn small(e: &AffineExpr) -> bool {
    e.constant.abs() <= LIMIT && e.terms().iter().all(|&(_, c)| c.abs() <= LIMIT)
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

/// The gcd of the coefficients of an expression's terms (0 when it has none).
fn coefficient_gcd(e: &AffineExpr) -> i64 {
    e.terms().iter().fold(0, |g, &(_, c)| gcd(g, c))
}

/// The largest division index an expression uses.
fn last_division(e: &AffineExpr) -> Option<usize> {
    e.terms()
        .iter()
        .filter_map(|&(v, _)| match v {
            Var::Div(k) => Some(k),
            Var::Iter(_) | Var::Param(_) => None,
        })
        .max()
}

impl Divisions {
    /// `floor(num / den)` for `den > 0`, simplified: an exact quotient stays affine, and a
    /// division of a division with coefficient 1 is one division
    /// (`floor((floor(x/a) + r)/b) = floor((x + a·r)/(a·b))` for integers `r`).
    pub fn floor(&mut self, num: &AffineExpr, den: i64) -> AffineExpr {
        debug_assert!(den > 0);
        if den == 1 {
            return num.clone();
        }
        let g = coefficient_gcd(num);
        if g % den == 0 {
            // floor((den·e + c) / den) = e + floor(c / den)
            let e = AffineExpr::from_terms(
                num.terms().iter().map(|&(v, c)| (v, c / den)),
                num.constant.div_euclid(den),
            );
            return e;
        }
        let inner = num.terms().iter().rev().find_map(|&(v, c)| match v {
            Var::Div(k) if c == 1 => Some(k),
            _ => None,
        });
        if let Some(k) = inner {
            let d = self.divs[k].clone();
            let mut rest = num.clone();
            rest.add_term(Var::Div(k), -1);
            let product = d.den.saturating_mul(den);
            if product <= LIMIT && small(&rest) {
                let flat = d.num.add(&rest.scale(d.den));
                if small(&flat) {
                    return self.floor(&flat, product);
                }
            }
        }
        let division = Division {
            num: num.clone(),
            den,
        };
        let k = match self.divs.iter().position(|d| *d == division) {
            Some(k) => k,
            None => {
                self.divs.push(division);
                self.divs.len() - 1
            }
        };
        AffineExpr::var(Var::Div(k))
    }

    /// `ceil(num / den)` for `den > 0`, as `-floor(-num / den)`.
    pub fn ceil(&mut self, num: &AffineExpr, den: i64) -> AffineExpr {
        self.floor(&num.scale(-1), den).scale(-1)
    }

    /// Constraints without division variables that hold exactly where `c` does, or `None`
    /// when some division of `c` cannot be removed (see the module docs), or only with
    /// numbers beyond [`LIMIT`].
    pub fn linearize(&self, c: &Constraint) -> Option<Vec<Constraint>> {
        let mut work = vec![c.clone()];
        let mut out = Vec::new();
        while let Some(c) = work.pop() {
            let Some(k) = last_division(&c.expr) else {
                out.push(c);
                continue;
            };
            let q = Var::Div(k);
            let cq = c.expr.coeff(q);
            let mut r = c.expr.clone();
            r.add_term(q, -cq);
            let g = gcd(cq, coefficient_gcd(&r));
            let zero = c.kind == ConstraintKind::Zero;
            if zero && r.constant % g != 0 {
                // No integer point: `g` divides every other term.
                return Some(vec![Constraint::non_negative(AffineExpr::constant(-1))]);
            }
            let (cq, r) = (
                cq / g,
                AffineExpr::from_terms(
                    r.terms().iter().map(|&(v, a)| (v, a / g)),
                    r.constant.div_euclid(g),
                ),
            );
            if cq.abs() != 1 {
                return None;
            }
            let Division { num, den } = &self.divs[k];
            if !small(&r) || !small(num) || *den > LIMIT {
                return None;
            }
            // q ≥ v  ⟺  num ≥ den·v;   q ≤ v  ⟺  num ≤ den·v + den - 1.
            let at_least = |v: &AffineExpr| Constraint::non_negative(num.sub(&v.scale(*den)));
            let at_most = |v: &AffineExpr| {
                Constraint::non_negative(v.scale(*den).add(&AffineExpr::constant(den - 1)).sub(num))
            };
            // cq·q + r (≥ | =) 0
            let v = r.scale(-cq);
            match (zero, cq) {
                (true, _) => {
                    work.push(at_least(&v));
                    work.push(at_most(&v));
                }
                (false, 1) => work.push(at_least(&v)),
                (false, _) => work.push(at_most(&v)),
            }
        }
        out.reverse();
        Some(out)
    }

    /// The divisions the expressions use, with those their numerators use, renumbered from 0
    /// in their order here (so each numerator still uses only divisions before it); the
    /// expressions are rewritten to the new numbers.
    pub fn localize(&self, exprs: &mut [&mut AffineExpr]) -> Vec<Division> {
        let mut used = vec![false; self.divs.len()];
        let mut stack: Vec<usize> = Vec::new();
        for e in exprs.iter() {
            for &(v, _) in e.terms() {
                if let Var::Div(k) = v {
                    stack.push(k);
                }
            }
        }
        while let Some(k) = stack.pop() {
            if std::mem::replace(&mut used[k], true) {
                continue;
            }
            for &(v, _) in self.divs[k].num.terms() {
                if let Var::Div(j) = v {
                    stack.push(j);
                }
            }
        }
        let mut number = vec![usize::MAX; self.divs.len()];
        let mut local = Vec::new();
        for k in 0..self.divs.len() {
            if used[k] {
                number[k] = local.len();
                let d = &self.divs[k];
                local.push(Division {
                    num: d.num.map_divs(|j| number[j]),
                    den: d.den,
                });
            }
        }
        for e in exprs.iter_mut() {
            **e = e.map_divs(|j| number[j]);
        }
        local
    }

    /// The divisions `constraints` use (with those their numerators use), as extra
    /// dimensions after `depth` iterators: the set's rows and its width. With `sizes`, every
    /// size is replaced by its value (and `n_params` must be 0).
    fn rows(
        &self,
        constraints: &[Constraint],
        depth: usize,
        n_params: usize,
        sizes: Option<&[i64]>,
    ) -> (Vec<Vec<i64>>, Vec<Vec<i64>>, usize) {
        let mut exprs: Vec<AffineExpr> = constraints.iter().map(|c| c.expr.clone()).collect();
        let mut divs = {
            let mut refs: Vec<&mut AffineExpr> = exprs.iter_mut().collect();
            self.localize(&mut refs)
        };
        if let Some(values) = sizes {
            for e in exprs.iter_mut() {
                *e = e.bind_params(values);
            }
            for d in divs.iter_mut() {
                d.num = d.num.bind_params(values);
            }
        }
        let width = depth + divs.len();
        let row = |e: &AffineExpr| {
            let mut r = vec![0; 1 + n_params + width];
            r[0] = e.constant;
            for &(v, c) in e.terms() {
                let col = match v {
                    Var::Param(p) => p.index(),
                    Var::Iter(d) => n_params + d,
                    Var::Div(k) => n_params + depth + k,
                };
                r[1 + col] += c;
            }
            r
        };
        let mut eqs = Vec::new();
        let mut ineqs = Vec::new();
        for (c, e) in constraints.iter().zip(&exprs) {
            match c.kind {
                ConstraintKind::Zero => eqs.push(row(e)),
                ConstraintKind::NonNegative => ineqs.push(row(e)),
            }
        }
        for (k, d) in divs.iter().enumerate() {
            // den·q <= num <= den·q + den - 1
            let mut lo = row(&d.num);
            lo[1 + n_params + depth + k] -= d.den;
            let mut hi: Vec<i64> = lo.iter().map(|x| -x).collect();
            hi[0] += d.den - 1;
            ineqs.push(lo);
            ineqs.push(hi);
        }
        (eqs, ineqs, width)
    }

    /// Whether no point satisfies `constraints` (over `depth` iterators, `n_params` sizes and
    /// these divisions) with every size non-negative. `false` where the answer is not known.
    pub fn infeasible(&self, constraints: &[Constraint], depth: usize, n_params: usize) -> bool {
        let (eqs, mut ineqs, width) = self.rows(constraints, depth, n_params, None);
        for p in 0..n_params {
            let mut r = vec![0; 1 + n_params + width];
            r[1 + p] = 1;
            ineqs.push(r);
        }
        let names: Vec<String> = (0..n_params).map(|p| format!("p{p}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Set::from_constraints(&names, Tuple::anonymous_dims(None, width), &eqs, &ineqs)
            .and_then(|s| s.is_empty())
            .unwrap_or(false)
    }

    /// The least and greatest value of `e` over the points of `domain` (over `depth`
    /// iterators) at the sizes `params`; `None` when there is no point, `Err` when the set
    /// library cannot bound it.
    pub fn range(
        &self,
        domain: &[Constraint],
        e: &AffineExpr,
        depth: usize,
        params: &[i64],
    ) -> Result<Option<(i64, i64)>, polyhedral::sets::Error> {
        // The value is one more dimension, after the iterators: `v - e = 0`.
        let mut all = domain.to_vec();
        let mut value = e.scale(-1);
        value.add_term(Var::Iter(depth), 1);
        all.push(Constraint::zero(value));
        let (eqs, ineqs, width) = self.rows(&all, depth + 1, 0, Some(params));
        let set = Set::from_constraints(&[], Tuple::anonymous_dims(None, width), &eqs, &ineqs)?;
        Ok(match set.dim_range(depth)? {
            Some(r) => match (r.min, r.max) {
                (Some(lo), Some(hi)) => Some((lo, hi)),
                _ => return Err(polyhedral::sets::Error::Unbounded),
            },
            None => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn it(d: usize) -> AffineExpr {
        AffineExpr::var(Var::Iter(d))
    }

    #[test]
    fn exact_quotients_stay_affine_and_divisions_are_shared() {
        let mut d = Divisions::default();
        // (2i + 5) / 2 = i + 2
        let e = d.floor(&it(0).scale(2).add(&AffineExpr::constant(5)), 2);
        assert_eq!(e, it(0).add(&AffineExpr::constant(2)));
        let a = d.floor(&it(0), 2);
        let b = d.floor(&it(0), 2);
        assert_eq!(a, b);
        assert_eq!(d.divs.len(), 1);
        // floor(floor(i/2)/3) = floor(i/6)
        let c = d.floor(&a, 3);
        assert_eq!(d.divs[1].den, 6);
        assert_eq!(c, AffineExpr::var(Var::Div(1)));
    }

    #[test]
    fn bounds_with_a_division_become_affine() {
        let mut d = Divisions::default();
        // j <= floor(i / 2)  ⟺  2j <= i
        let q = d.floor(&it(0), 2);
        let c = Constraint::le(&it(1), &q);
        assert_eq!(
            d.linearize(&c).unwrap(),
            vec![Constraint::non_negative(it(0).sub(&it(1).scale(2)))]
        );
        // j >= ceil(i / 3)  ⟺  3j >= i
        let q = d.ceil(&it(0), 3);
        let c = Constraint::le(&q, &it(1));
        assert_eq!(
            d.linearize(&c).unwrap(),
            vec![Constraint::non_negative(it(1).scale(3).sub(&it(0)))]
        );
        // i - 2·floor(i/2) = 0 (i even) needs a division variable.
        let q = d.floor(&it(0), 2);
        let even = Constraint::zero(it(0).sub(&q.scale(2)));
        assert!(d.linearize(&even).is_none());
    }

    #[test]
    fn signs_are_decided_over_the_domain() {
        let d = Divisions::default();
        // 0 <= i < N: i <= -1 has no point.
        let n = AffineExpr::var(Var::Param(polyhedral::program::ParamId(0)));
        let domain = vec![Constraint::non_negative(it(0)), Constraint::lt(&it(0), &n)];
        let mut neg = domain.clone();
        neg.push(Constraint::le(&it(0), &AffineExpr::constant(-1)));
        assert!(d.infeasible(&neg, 1, 1));
        let mut pos = domain.clone();
        pos.push(Constraint::le(&AffineExpr::constant(1), &it(0)));
        assert!(!d.infeasible(&pos, 1, 1));
        assert_eq!(d.range(&domain, &it(0), 1, &[10]).unwrap(), Some((0, 9)));
    }

    #[test]
    fn statements_get_their_own_numbering() {
        let mut d = Divisions::default();
        let _unused = d.floor(&it(1), 5);
        let a = d.floor(&it(0).add(&AffineExpr::constant(1)), 2);
        let mut sub = it(0).add(&AffineExpr::constant(1)).sub(&a.scale(2));
        let local = d.localize(&mut [&mut sub]);
        assert_eq!(local.len(), 1);
        assert_eq!(sub.coeff(Var::Div(0)), -2);
    }
}
