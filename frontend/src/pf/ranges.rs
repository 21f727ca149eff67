//! Integer reasoning about one statement's iteration domain for the given size values: bounds
//! of every iterator, and a search for a point where an affine function reaches a threshold
//! (used to prove an access out of bounds with a concrete witness), and that check itself
//! ([`check_bounds`]), which both front ends run on every statement.
//!
//! Bounds come from interval propagation over the constraints, which is exact for rectangular
//! domains and an over-approximation otherwise; the search enumerates points depth-first,
//! pruning by those bounds, so a reported witness is always a real point of the domain. All
//! arithmetic is in `i128`: inputs are bounded by the front end (coefficients and size values
//! fit `i32`), so nothing here can overflow.

use polyhedral::program::{AffineExpr, Constraint, ConstraintKind, Program, Statement, Var};

use crate::diagnostic::Diagnostic;

/// `Σ coeffs[k]·x_k + constant >= 0`.
#[derive(Clone, Debug)]
struct Row {
    coeffs: Vec<i128>,
    constant: i128,
}

/// A domain with its parameters bound to values.
#[derive(Clone, Debug)]
pub(crate) struct Domain {
    n: usize,
    rows: Vec<Row>,
}

pub(crate) type Interval = (Option<i128>, Option<i128>);

/// The result of [`Domain::find`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Search {
    Found(Vec<i128>),
    NotFound,
    /// The search ran out of budget; nothing is known.
    GaveUp,
}

fn div_floor(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    -div_floor(-a, b)
}

/// Coefficients (per iterator) and constant of `e` with parameters bound to `params`; `e` has
/// no division variables.
pub(crate) fn bind(e: &AffineExpr, n: usize, params: &[i64]) -> (Vec<i128>, i128) {
    bind_at(e, n, n, params)
}

/// [`bind`] over `n` variables, the iterators first and division variable `k` at `divs + k`.
fn bind_at(e: &AffineExpr, n: usize, divs: usize, params: &[i64]) -> (Vec<i128>, i128) {
    let mut coeffs = vec![0i128; n];
    let mut constant = e.constant as i128;
    for &(v, c) in e.terms() {
        match v {
            Var::Iter(i) => coeffs[i] += c as i128,
            Var::Param(p) => constant += c as i128 * params[p.index()] as i128,
            Var::Div(k) => coeffs[divs + k] += c as i128,
        }
    }
    (coeffs, constant)
}

impl Domain {
    /// A statement's domain over its iterators and then its division variables, each bound
    /// by its two defining inequalities: a point of it is an instance with the divisions'
    /// values.
    pub(crate) fn of_statement(s: &Statement, params: &[i64]) -> Domain {
        let depth = s.depth();
        let n = depth + s.divs.len();
        let mut d = Domain::new(n, &s.domain, params);
        for (k, div) in s.divs.iter().enumerate() {
            // den·q <= num <= den·q + den - 1
            let (mut coeffs, constant) = bind_at(&div.num, n, depth, params);
            coeffs[depth + k] -= div.den as i128;
            d.rows.push(Row {
                coeffs: coeffs.clone(),
                constant,
            });
            d.rows.push(Row {
                coeffs: coeffs.iter().map(|x| -x).collect(),
                constant: div.den as i128 - 1 - constant,
            });
        }
        d
    }

    pub(crate) fn new(n: usize, constraints: &[Constraint], params: &[i64]) -> Domain {
        let mut rows = Vec::new();
        for c in constraints {
            let (coeffs, constant) = bind(&c.expr, n, params);
            if c.kind == ConstraintKind::Zero {
                rows.push(Row {
                    coeffs: coeffs.iter().map(|x| -x).collect(),
                    constant: -constant,
                });
            }
            rows.push(Row { coeffs, constant });
        }
        Domain { n, rows }
    }

    /// Bounds of every iterator with the first `fixed.len()` iterators set to `fixed`; `None`
    /// when the propagation proves the domain empty.
    pub(crate) fn bounds(&self, fixed: &[i128]) -> Option<Vec<Interval>> {
        let mut iv: Vec<Interval> = vec![(None, None); self.n];
        for (k, &v) in fixed.iter().enumerate() {
            iv[k] = (Some(v), Some(v));
        }
        for _round in 0..32 {
            let mut changed = false;
            for row in &self.rows {
                for j in 0..self.n {
                    let a = row.coeffs[j];
                    if a == 0 {
                        continue;
                    }
                    // The largest value of the row without x_j.
                    let mut rest = Some(row.constant);
                    for (k, &c) in row.coeffs.iter().enumerate() {
                        if k == j || c == 0 {
                            continue;
                        }
                        let b = if c > 0 { iv[k].1 } else { iv[k].0 };
                        rest = match (rest, b) {
                            (Some(r), Some(b)) => Some(r + c * b),
                            _ => None,
                        };
                    }
                    let Some(rest) = rest else { continue };
                    if a > 0 {
                        let lo = div_ceil(-rest, a);
                        if iv[j].0.is_none_or(|l| lo > l) {
                            iv[j].0 = Some(lo);
                            changed = true;
                        }
                    } else {
                        let hi = div_floor(rest, -a);
                        if iv[j].1.is_none_or(|h| hi < h) {
                            iv[j].1 = Some(hi);
                            changed = true;
                        }
                    }
                    if let (Some(l), Some(h)) = iv[j] {
                        if l > h {
                            return None;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        Some(iv)
    }

    fn contains(&self, point: &[i128]) -> bool {
        self.rows
            .iter()
            .all(|r| r.coeffs.iter().zip(point).map(|(a, x)| a * x).sum::<i128>() + r.constant >= 0)
    }

    /// A point of the domain where `Σ g[k]·x_k + g0 >= threshold`, searching at most `budget`
    /// nodes.
    pub(crate) fn find(&self, g: &[i128], g0: i128, threshold: i128, budget: usize) -> Search {
        let mut budget = budget;
        let mut fixed = Vec::with_capacity(self.n);
        self.search(g, g0, threshold, &mut fixed, &mut budget)
    }

    fn search(
        &self,
        g: &[i128],
        g0: i128,
        threshold: i128,
        fixed: &mut Vec<i128>,
        budget: &mut usize,
    ) -> Search {
        if *budget == 0 {
            return Search::GaveUp;
        }
        *budget -= 1;
        let Some(iv) = self.bounds(fixed) else {
            return Search::NotFound;
        };
        let mut best = g0;
        for (k, &c) in g.iter().enumerate() {
            let b = if c > 0 { iv[k].1 } else { iv[k].0 };
            match b {
                _ if c == 0 => {}
                Some(b) => best += c * b,
                None => return Search::GaveUp,
            }
        }
        if best < threshold {
            return Search::NotFound;
        }
        let level = fixed.len();
        if level == self.n {
            return if self.contains(fixed) {
                Search::Found(fixed.clone())
            } else {
                Search::NotFound
            };
        }
        let (Some(lo), Some(hi)) = iv[level] else {
            return Search::GaveUp;
        };
        let descending = g[level] > 0;
        let mut gave_up = false;
        let count = hi - lo + 1;
        for step in 0..count {
            let v = if descending { hi - step } else { lo + step };
            fixed.push(v);
            let r = self.search(g, g0, threshold, fixed, budget);
            fixed.pop();
            match r {
                Search::Found(p) => return Search::Found(p),
                Search::GaveUp => {
                    gave_up = true;
                    if *budget == 0 {
                        break;
                    }
                }
                Search::NotFound => {}
            }
        }
        if gave_up {
            Search::GaveUp
        } else {
            Search::NotFound
        }
    }
}

/// How many nodes the out-of-bounds search may visit per subscript.
const SEARCH_BUDGET: usize = 4_000;

/// Rejects accesses that leave their array at some point of the statement's domain (with
/// `hint` on the error), and iterators whose range does not fit `i32`.
pub(crate) fn check_bounds(program: &Program, s: &Statement, hint: &str) -> Result<(), Diagnostic> {
    let params = program.param_values();
    let n = s.depth() + s.divs.len();
    let domain = Domain::of_statement(s, &params);
    let Some(b) = domain.bounds(&[]) else {
        return Ok(());
    };
    for (k, iv) in b.iter().enumerate().take(s.depth()) {
        let fits = |v: Option<i128>| v.is_some_and(|v| v.abs() <= i32::MAX as i128);
        if !fits(iv.0) || !fits(iv.1) {
            return Err(Diagnostic::new(
                s.span,
                format!(
                    "the range of `{}` is unbounded or exceeds i32",
                    s.iterators[k]
                ),
            )
            .with_hint(format!(
                "give it a range with `where {} in lo:hi`",
                s.iterators[k]
            )));
        }
    }
    for (kind, acc) in s.accesses() {
        let array = program.array(acc.array);
        let extents = program.array_extents(acc.array);
        for (d, sub) in acc.subscripts.iter().enumerate() {
            let (g, g0) = bind_at(sub, n, s.depth(), &params);
            let neg: Vec<i128> = g.iter().map(|x| -x).collect();
            let low = domain.find(&neg, -g0, 1, SEARCH_BUDGET);
            let high = domain.find(&g, g0, extents[d] as i128, SEARCH_BUDGET);
            for (found, below) in [(low, true), (high, false)] {
                let Search::Found(p) = found else { continue };
                let value: i128 = g.iter().zip(&p).map(|(a, x)| a * x).sum::<i128>() + g0;
                let at: Vec<String> = s
                    .iterators
                    .iter()
                    .zip(&p)
                    .map(|(i, v)| format!("{i} = {v}"))
                    .collect();
                let verb = match kind {
                    polyhedral::program::AccessKind::Read => "reads",
                    polyhedral::program::AccessKind::Write => "writes",
                };
                let why = if below {
                    "below 0".to_string()
                } else {
                    format!("past the extent {}", extents[d])
                };
                return Err(Diagnostic::new(
                    acc.span,
                    format!(
                        "out-of-bounds access: `{}` {verb} index {value} of dimension {d} ({why}) at {}",
                        array.name,
                        at.join(", ")
                    ),
                )
                .with_hint(hint));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(a: AffineExpr, b: AffineExpr) -> Constraint {
        Constraint::le(&a, &b)
    }

    #[test]
    fn triangle_bounds_and_witness() {
        let i = AffineExpr::var(Var::Iter(0));
        let j = AffineExpr::var(Var::Iter(1));
        let c = |v| AffineExpr::constant(v);
        // 0 <= i < 10, 0 <= j <= i
        let cons = vec![
            le(c(0), i.clone()),
            le(i.clone(), c(9)),
            le(c(0), j.clone()),
            le(j.clone(), i.clone()),
        ];
        let d = Domain::new(2, &cons, &[]);
        let b = d.bounds(&[]).unwrap();
        assert_eq!(b, vec![(Some(0), Some(9)), (Some(0), Some(9))]);
        // i - j >= 0 everywhere: no point with j - i >= 1.
        assert_eq!(d.find(&[-1, 1], 0, 1, 10_000), Search::NotFound);
        // i + j reaches 18 at (9, 9).
        assert_eq!(d.find(&[1, 1], 0, 18, 10_000), Search::Found(vec![9, 9]));
        assert_eq!(d.find(&[1, 1], 0, 19, 10_000), Search::NotFound);
    }

    #[test]
    fn empty_domain_has_no_bounds() {
        let i = AffineExpr::var(Var::Iter(0));
        let cons = vec![
            le(AffineExpr::constant(5), i.clone()),
            le(i, AffineExpr::constant(4)),
        ];
        assert!(Domain::new(1, &cons, &[]).bounds(&[]).is_none());
        assert_eq!(div_floor(-7, 2), -4);
        assert_eq!(div_ceil(-7, 2), -3);
    }
}
