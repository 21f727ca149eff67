//! Exact integer bounds and point enumeration for one conjunction.
//!
//! [`range_of_first`] gives the exact integer minimum and maximum of variable 0 over all
//! integer solutions of a conjunction (the other variables existential): rational bounds from
//! Fourier–Motzkin, then galloping and bisection with the exact feasibility test.
//! [`enumerate`] walks the leading variables dimension by dimension with those ranges, so it
//! only visits values that lead to points.

use super::conj::Conj;
use super::omega::{is_feasible, real_bounds_first};
use super::Error;

/// The integer range of a variable: `None` for empty, a bound of `None` for unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

/// Whether `c` has a solution with `x0 ≤ v` (`upper`) or `x0 ≥ v`.
fn feasible_with(c: &Conj, v: i64, upper: bool) -> Result<bool, Error> {
    let mut t = c.clone();
    let mut r = vec![0; c.n + 1];
    if upper {
        r[0] = v;
        r[1] = -1;
    } else {
        r[0] = v.checked_neg().ok_or(Error::Overflow)?;
        r[1] = 1;
    }
    t.ineqs.push(r);
    is_feasible(&t)
}

/// The extreme integer value of `x0` in direction `upper == false` (minimum) starting from a
/// valid rational bound `start`, with `other` a rational bound on the far side if known.
fn search(c: &Conj, start: i64, other: Option<i64>, min: bool) -> Result<i64, Error> {
    // For the minimum, f(v) = feasible(x0 ≤ v) is monotone, false below `start`.
    let f = |v: i64| feasible_with(c, v, min);
    let step_dir: i64 = if min { 1 } else { -1 };
    if f(start)? {
        return Ok(start);
    }
    let mut bad = start;
    let mut step: i64 = 1;
    let good = loop {
        let mut cand = start.checked_add(step_dir * step).ok_or(Error::Overflow)?;
        if let Some(o) = other {
            if (min && cand >= o) || (!min && cand <= o) {
                cand = o;
            }
        }
        if f(cand)? {
            break cand;
        }
        if Some(cand) == other {
            // The set is non-empty and lies within the rational bounds.
            return Err(Error::Overflow);
        }
        bad = cand;
        step = step.checked_mul(2).ok_or(Error::Overflow)?;
    };
    let (mut b, mut g) = (bad, good);
    while (g - b).abs() > 1 {
        let mid = b + (g - b) / 2;
        if f(mid)? {
            g = mid;
        } else {
            b = mid;
        }
    }
    Ok(g)
}

/// The exact integer range of variable 0 of `c`; `None` when `c` has no integer point.
///
/// The rational shadow gives valid starting bounds; the integer optimum is then found by
/// galloping and bisection on exact feasibility. An unbounded rational range means an
/// unbounded integer range once the set has an integer point (the integer hull of a rational
/// polyhedron has the polyhedron's recession cone).
pub(crate) fn range_of_first(c: &Conj) -> Result<Option<Range>, Error> {
    let Some((rlo, rhi)) = real_bounds_first(c)? else {
        return Ok(None);
    };
    if !is_feasible(c)? {
        return Ok(None);
    }
    let lo = match rlo {
        Some(l) => Some(search(c, l, rhi, true)?),
        None => None,
    };
    let hi = match rhi {
        Some(h) => Some(search(c, h, rlo, false)?),
        None => None,
    };
    Ok(Some(Range { lo, hi }))
}

/// Calls `f` with every integer assignment of the first `nvis` variables of `c` that extends
/// to a solution (the rest existential), in lexicographic order. Fails with
/// [`Error::Unbounded`] when one of them is unbounded.
pub(crate) fn enumerate(
    c: &Conj,
    nvis: usize,
    f: &mut dyn FnMut(&[i64]) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut prefix = Vec::with_capacity(nvis);
    enumerate_rec(c, nvis, &mut prefix, f)
}

fn enumerate_rec(
    c: &Conj,
    nvis: usize,
    prefix: &mut Vec<i64>,
    f: &mut dyn FnMut(&[i64]) -> Result<(), Error>,
) -> Result<(), Error> {
    if nvis == 0 {
        if is_feasible(c)? {
            f(prefix)?;
        }
        return Ok(());
    }
    let Some(r) = range_of_first(c)? else {
        return Ok(());
    };
    let (Some(lo), Some(hi)) = (r.lo, r.hi) else {
        return Err(Error::Unbounded);
    };
    for v in lo..=hi {
        let sub = c.fix(0, v)?;
        prefix.push(v);
        enumerate_rec(&sub, nvis - 1, prefix, f)?;
        prefix.pop();
    }
    Ok(())
}

/// The lexicographically smallest (or largest) assignment of the first `nvis` variables that
/// extends to a solution; `None` when there is none.
pub(crate) fn lex_extreme(c: &Conj, nvis: usize, max: bool) -> Result<Option<Vec<i64>>, Error> {
    let mut c = c.clone();
    let mut out = Vec::with_capacity(nvis);
    for _ in 0..nvis {
        let Some(r) = range_of_first(&c)? else {
            return Ok(None);
        };
        let v = if max { r.hi } else { r.lo };
        let Some(v) = v else {
            return Err(Error::Unbounded);
        };
        out.push(v);
        c = c.fix(0, v)?;
    }
    if nvis == 0 && !is_feasible(&c)? {
        return Ok(None);
    }
    Ok(Some(out))
}
