//! Exact integer bounds and point enumeration for one conjunction.
//!
//! [`range_of_first`] gives the exact integer minimum and maximum of variable 0 over all
//! integer solutions of a conjunction (the other variables existential): the conjunction is
//! projected onto variable 0 exactly (see [`super::omega::project`]), and in every piece the
//! bounds are moved inward to the nearest value that satisfies the piece's congruences.
//! [`enumerate`] walks the leading variables dimension by dimension with those ranges, so it
//! only visits values that lead to points.

use super::conj::{ceil_div, floor_div, gcd, Conj};
use super::omega::{is_feasible, project};
use super::Error;

/// The integer range of a variable: `None` for empty, a bound of `None` for unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

/// Congruences above this period are searched no further; the answer is then an error.
const MAX_PERIOD: i64 = 1 << 20;

fn piece_range(p: &Conj) -> Result<Option<Range>, Error> {
    let mut lo: Option<i64> = None;
    let mut hi: Option<i64> = None;
    let mut strides: Vec<(i64, i64, i64)> = Vec::new(); // c1·x + c0 ≡ 0 (mod m)
    let tighten_lo = |lo: &mut Option<i64>, v: i64| *lo = Some(lo.map_or(v, |l| l.max(v)));
    let tighten_hi = |hi: &mut Option<i64>, v: i64| *hi = Some(hi.map_or(v, |h| h.min(v)));
    for e in &p.eqs {
        if let Some(s) = (1..p.n).find(|&v| e[1 + v] != 0) {
            strides.push((e[1], e[0], e[1 + s].abs()));
        } else if e[1] != 0 {
            if e[0] % e[1] != 0 {
                return Ok(None);
            }
            let v = -e[0] / e[1];
            tighten_lo(&mut lo, v);
            tighten_hi(&mut hi, v);
        } else if e[0] != 0 {
            return Ok(None);
        }
    }
    for r in &p.ineqs {
        let a = r[1];
        if a > 0 {
            tighten_lo(&mut lo, ceil_div(-r[0], a));
        } else if a < 0 {
            tighten_hi(&mut hi, floor_div(r[0], -a));
        } else if r[0] < 0 {
            return Ok(None);
        }
    }
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            return Ok(None);
        }
    }
    if strides.is_empty() {
        return Ok(Some(Range { lo, hi }));
    }
    let mut period: i64 = 1;
    for &(_, _, m) in &strides {
        period = period / gcd(period, m) * m;
        if period > MAX_PERIOD {
            return Err(Error::Overflow);
        }
    }
    let ok = |x: i64| {
        strides
            .iter()
            .all(|&(c1, c0, m)| (c1 as i128 * x as i128 + c0 as i128).rem_euclid(m as i128) == 0)
    };
    let new_lo = match lo {
        Some(l) => {
            let top = hi.map_or(l + period - 1, |h| h.min(l + period - 1));
            match (l..=top).find(|&x| ok(x)) {
                Some(x) => Some(x),
                None => return Ok(None),
            }
        }
        None => None,
    };
    let new_hi = match hi {
        Some(h) => {
            let bottom = lo.map_or(h - period + 1, |l| l.max(h - period + 1));
            match (bottom..=h).rev().find(|&x| ok(x)) {
                Some(x) => Some(x),
                None => return Ok(None),
            }
        }
        None => None,
    };
    Ok(Some(Range {
        lo: new_lo,
        hi: new_hi,
    }))
}

/// The exact integer range of variable 0 of `c`; `None` when `c` has no integer point.
pub(crate) fn range_of_first(c: &Conj) -> Result<Option<Range>, Error> {
    let mut acc: Option<Range> = None;
    for p in project(c, 1)? {
        if let Some(r) = piece_range(&p)? {
            acc = Some(match acc {
                None => r,
                Some(a) => Range {
                    lo: a.lo.zip(r.lo).map(|(x, y)| x.min(y)),
                    hi: a.hi.zip(r.hi).map(|(x, y)| x.max(y)),
                },
            });
        }
    }
    Ok(acc)
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
