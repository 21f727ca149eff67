//! Exact integer bounds and point enumeration for one conjunction.
//!
//! [`range_of_first`] gives the exact integer minimum and maximum of variable 0 over all
//! integer solutions of a conjunction (the other variables existential): rational bounds from
//! Fourier–Motzkin, then galloping and bisection with the exact feasibility test.
//! [`enumerate`] walks the leading variables dimension by dimension with those ranges, so it
//! only visits values that lead to points.

use super::conj::Conj;
use super::int::{Fail, Int, Overflow};
use super::omega::{feasible, real_bounds_first};
use super::Error;

/// The integer range of a variable: `None` for empty, a bound of `None` for unbounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Range<T = i64> {
    pub lo: Option<T>,
    pub hi: Option<T>,
}

/// Whether `c` has a solution with `x0 ≤ v` (`upper`) or `x0 ≥ v`.
fn feasible_with<T: Int>(c: &Conj<T>, v: &T, upper: bool) -> Result<bool, Overflow> {
    let mut t = c.clone();
    let mut r = vec![T::zero(); c.n + 1];
    if upper {
        r[0] = v.clone();
        r[1] = T::from_i64(-1);
    } else {
        r[0] = v.neg()?;
        r[1] = T::one();
    }
    t.ineqs.push(r);
    feasible(&t)
}

/// The extreme integer value of `x0` (the minimum with `min`) of a conjunction that has an
/// integer point, starting from a valid rational bound `start` on that side, with `other` a
/// rational bound on the far side if known.
fn search<T: Int>(c: &Conj<T>, start: T, other: Option<&T>, min: bool) -> Result<T, Overflow> {
    // For the minimum, f(v) = feasible(x0 ≤ v) is monotone, false below the answer.
    let f = |v: &T| feasible_with(c, v, min);
    if f(&start)? {
        return Ok(start);
    }
    let mut bad = start.clone();
    let mut step = T::one();
    let good = loop {
        let mut cand = if min {
            start.add(&step)?
        } else {
            start.sub(&step)?
        };
        if let Some(o) = other {
            if (min && cand >= *o) || (!min && cand <= *o) {
                cand = o.clone();
            }
        }
        if f(&cand)? {
            break cand;
        }
        if Some(&cand) == other {
            // The conjunction has an integer point and lies within its rational bounds, so the
            // far bound is feasible; reaching it without success means the caller broke the
            // precondition. Report the conjunction as if it were too large to search rather
            // than loop.
            return Err(Overflow);
        }
        bad = cand;
        step = step.add(&step)?;
    };
    // Bisection between `bad` (infeasible) and `good` (feasible).
    let (mut b, mut g) = (bad, good);
    loop {
        let gap = g.sub(&b)?.abs()?;
        if gap <= T::one() {
            return Ok(g);
        }
        let half = gap.div_floor(&T::from_i64(2));
        let mid = if min { b.add(&half)? } else { b.sub(&half)? };
        if f(&mid)? {
            g = mid;
        } else {
            b = mid;
        }
    }
}

/// The exact integer range of variable 0 of `c`; `None` when `c` has no integer point.
///
/// The rational shadow gives valid starting bounds; the integer optimum is then found by
/// galloping and bisection on exact feasibility. An unbounded rational range means an
/// unbounded integer range once the set has an integer point (the integer hull of a rational
/// polyhedron has the polyhedron's recession cone).
pub(crate) fn range_of_first<T: Int>(c: &Conj<T>) -> Result<Option<Range<T>>, Overflow> {
    let Some((rlo, rhi)) = real_bounds_first(c)? else {
        return Ok(None);
    };
    if !feasible(c)? {
        return Ok(None);
    }
    let lo = match &rlo {
        Some(l) => Some(search(c, l.clone(), rhi.as_ref(), true)?),
        None => None,
    };
    let hi = match rhi {
        Some(h) => Some(search(c, h, rlo.as_ref(), false)?),
        None => None,
    };
    Ok(Some(Range { lo, hi }))
}

/// Calls `f` with every integer assignment of the first `nvis` variables of `c` that extends
/// to a solution (the rest existential), in lexicographic order. Fails with
/// [`Error::Unbounded`] when one of them is unbounded.
pub(crate) fn enumerate<T: Int>(
    c: &Conj<T>,
    nvis: usize,
    f: &mut dyn FnMut(&[T]) -> Result<(), Fail>,
) -> Result<(), Fail> {
    let mut prefix = Vec::with_capacity(nvis);
    enumerate_rec(c, nvis, &mut prefix, f)
}

fn enumerate_rec<T: Int>(
    c: &Conj<T>,
    nvis: usize,
    prefix: &mut Vec<T>,
    f: &mut dyn FnMut(&[T]) -> Result<(), Fail>,
) -> Result<(), Fail> {
    if nvis == 0 {
        if feasible(c)? {
            f(prefix)?;
        }
        return Ok(());
    }
    let Some(r) = range_of_first(c)? else {
        return Ok(());
    };
    let (Some(lo), Some(hi)) = (r.lo, r.hi) else {
        return Err(Error::Unbounded.into());
    };
    let mut v = lo;
    while v <= hi {
        let sub = c.fix(0, &v)?;
        prefix.push(v.clone());
        enumerate_rec(&sub, nvis - 1, prefix, f)?;
        prefix.pop();
        v = v.add_i(1)?;
    }
    Ok(())
}

/// The lexicographically smallest (or largest) assignment of the first `nvis` variables that
/// extends to a solution; `None` when there is none.
pub(crate) fn lex_extreme<T: Int>(
    c: &Conj<T>,
    nvis: usize,
    max: bool,
) -> Result<Option<Vec<T>>, Fail> {
    let mut c = c.clone();
    let mut out = Vec::with_capacity(nvis);
    for _ in 0..nvis {
        let Some(r) = range_of_first(&c)? else {
            return Ok(None);
        };
        let v = if max { r.hi } else { r.lo };
        let Some(v) = v else {
            return Err(Error::Unbounded.into());
        };
        c = c.fix(0, &v)?;
        out.push(v);
    }
    if nvis == 0 && !feasible(&c)? {
        return Ok(None);
    }
    Ok(Some(out))
}
