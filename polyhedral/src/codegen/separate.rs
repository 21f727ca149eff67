//! The loops that scan one schedule dimension for several statements at once: one loop over
//! the hull of their ranges, or a sequence of loops over the pieces where different subsets of
//! them are active (separation).
//!
//! A [`Region`] is one loop: its conjunctive bounds (rows the context may assume inside it) and
//! at most one disjunctive bound per side, "at least the smallest of several lower bounds" and
//! "at most the largest of several upper bounds", written `max(…, min(…))` and `min(…, max(…))`.
//!
//! **Separation.** When the statements' lower bounds can be ordered under the context,
//! `l_π1 ≤ … ≤ l_πk`, and so can their upper bounds, `u_σ1 ≤ … ≤ u_σk`, every value of the
//! dimension lies in exactly one piece `(a, b)`: past exactly `a` lower bounds and exactly `b`
//! upper bounds, `l_πa ≤ c < l_π(a+1)` and `u_σb < c ≤ u_σ(b+1)`. The statements active there
//! are `{π1 … πa} ∖ {σ1 … σb}`, and each has all its bounds implied by the piece's conjunctive
//! ones. Two non-empty pieces are ordered the same way in the dimension and in `(a, b)`
//! (lexicographically), whatever the outer values, so emitting the pieces in `(a, b)` order
//! keeps every statement instance in schedule order. Pieces the context proves empty are left
//! out, and a disjunctive bound keeps only the alternatives that the piece's other bounds allow.
//! Nothing is assumed about the order of a lower bound and an upper bound, so the pieces are
//! right for empty ranges too.

use super::range::{feasible_with, implied, Range};
use crate::sets::conj::{negate, Conj, Row};
use crate::sets::Error;

/// One loop over the current dimension `c`.
#[derive(Clone, Debug)]
pub(super) struct Region {
    /// The statements (indices into the ranges) that run in it.
    pub active: Vec<usize>,
    /// `c` is at least the maximum of these.
    pub lower: Vec<Row>,
    /// `c` is at most the minimum of these.
    pub upper: Vec<Row>,
    /// When not empty: `c` satisfies every row of at least one alternative.
    pub lower_any: Vec<Vec<Row>>,
    pub upper_any: Vec<Vec<Row>>,
}

/// `¬(r ≥ 0)` as a row: `−r − 1 ≥ 0`.
fn complement(r: &[i64]) -> Result<Row, Error> {
    let mut n = negate(r)?;
    n[0] -= 1;
    Ok(n)
}

fn implied_all(ctx: &Conj, extra: &[Row], rows: &[Row]) -> Result<bool, Error> {
    let mut c = ctx.clone();
    c.ineqs.extend(extra.iter().cloned());
    for r in rows {
        if !implied(&c, r)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// An order of `0..k` by `le(i, j)` (`i` before `j` only when `le(i, j)`), or `None` when some
/// pair cannot be ordered.
fn order(k: usize, le: &[Vec<bool>]) -> Option<Vec<usize>> {
    let mut left: Vec<usize> = (0..k).collect();
    let mut out = Vec::with_capacity(k);
    while !left.is_empty() {
        let pos = left
            .iter()
            .position(|&i| left.iter().all(|&j| i == j || le[i][j]))?;
        out.push(left.remove(pos));
    }
    Some(out)
}

impl Region {
    /// The loop over one range, for the statements `active` that all have it.
    pub fn plain(active: Vec<usize>, range: &Range) -> Region {
        Region {
            active,
            lower: range.lower.clone(),
            upper: range.upper.clone(),
            lower_any: Vec::new(),
            upper_any: Vec::new(),
        }
    }

    /// Simplifies the disjunctive bounds under `ctx` and the conjunctive ones (an alternative
    /// they exclude goes, a disjunction one of whose alternatives they imply goes, a single
    /// alternative becomes conjunctive), and drops conjunctive rows the others imply; `None`
    /// when the region is empty.
    fn finish(mut self, ctx: &Conj) -> Result<Option<Region>, Error> {
        loop {
            let mut base = ctx.clone();
            base.ineqs.extend(self.lower.iter().cloned());
            base.ineqs.extend(self.upper.iter().cloned());
            if !feasible_with(&base, &[], &[])? {
                return Ok(None);
            }
            let mut moved = false;
            for lower_side in [true, false] {
                let side = if lower_side {
                    std::mem::take(&mut self.lower_any)
                } else {
                    std::mem::take(&mut self.upper_any)
                };
                if side.is_empty() {
                    continue;
                }
                let mut kept: Vec<Vec<Row>> = Vec::new();
                let mut always = false;
                for alt in side {
                    let mut alt_rows = Vec::with_capacity(alt.len());
                    for r in alt {
                        if !implied(&base, &r)? {
                            alt_rows.push(r);
                        }
                    }
                    let alt = alt_rows;
                    if alt.is_empty() {
                        always = true;
                        break;
                    }
                    if feasible_with(&base, &[], &alt)? && !kept.contains(&alt) {
                        kept.push(alt);
                    }
                }
                if always {
                    continue;
                }
                match kept.len() {
                    0 => return Ok(None),
                    1 => {
                        moved = true;
                        for r in kept.pop().into_iter().flatten() {
                            self.add_row(r);
                        }
                    }
                    _ if lower_side => self.lower_any = kept,
                    _ => self.upper_any = kept,
                }
                if moved {
                    break;
                }
            }
            if !moved {
                break;
            }
        }
        // Drop conjunctive rows the context and the others imply.
        let mut rows: Vec<Row> = self.lower.iter().chain(&self.upper).cloned().collect();
        let mut i = 0;
        while i < rows.len() {
            let mut c = ctx.clone();
            c.ineqs.extend(
                rows.iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, r)| r.clone()),
            );
            if implied(&c, &rows[i])? {
                rows.remove(i);
            } else {
                i += 1;
            }
        }
        self.lower = rows.iter().filter(|r| is_lower(r)).cloned().collect();
        self.upper = rows.iter().filter(|r| !is_lower(r)).cloned().collect();
        self.lower.sort();
        self.upper.sort();
        Ok(Some(self))
    }

    fn add_row(&mut self, r: Row) {
        let side = if is_lower(&r) {
            &mut self.lower
        } else {
            &mut self.upper
        };
        if !side.contains(&r) {
            side.push(r);
        }
    }
}

/// Whether a row over `[parameters | dimensions]` is a lower bound of the last dimension.
fn is_lower(r: &[i64]) -> bool {
    r.last().is_some_and(|&x| x > 0)
}

/// One loop over the union of the ranges: rows every statement satisfies where they exist;
/// on a side without such rows, or with `exact` where those rows are looser than every
/// statement's own bounds, the smallest lower (largest upper) bound of the statements too.
pub(super) fn hull(ctx: &Conj, ranges: &[Range], exact: bool) -> Result<Option<Region>, Error> {
    let contexts: Vec<Conj> = ranges.iter().map(|r| r.with_context(ctx)).collect();
    let valid = |cands: Vec<&Row>| -> Result<Vec<Row>, Error> {
        let mut out: Vec<Row> = Vec::new();
        for r in cands {
            if out.contains(r) {
                continue;
            }
            let mut all = true;
            for c in &contexts {
                if !implied(c, r)? {
                    all = false;
                    break;
                }
            }
            if all {
                out.push(r.clone());
            }
        }
        Ok(out)
    };
    let lower = valid(ranges.iter().flat_map(|r| &r.lower).collect())?;
    let upper = valid(ranges.iter().flat_map(|r| &r.upper).collect())?;
    // The valid rows are the bound when they are as tight as some statement's bounds (the
    // union's bound is that statement's then); otherwise, with `exact`, the statements'
    // bounds are kept as alternatives, so the loop runs exactly the union.
    let alternatives = |valid: &[Row], side: &dyn Fn(&Range) -> &Vec<Row>| {
        let mut alts: Vec<Vec<Row>> = Vec::new();
        for r in ranges {
            if !valid.is_empty() && (!exact || implied_all(ctx, valid, side(r))?) {
                return Ok(Vec::new());
            }
            if !alts.contains(side(r)) {
                alts.push(side(r).clone());
            }
        }
        Ok::<_, Error>(alts)
    };
    let region = Region {
        active: (0..ranges.len()).collect(),
        lower_any: alternatives(&lower, &|r| &r.lower)?,
        upper_any: alternatives(&upper, &|r| &r.upper)?,
        lower,
        upper,
    };
    region.finish(ctx)
}

/// The separated loops of the ranges (see the module docs), in schedule order, or `None` when
/// their bounds cannot be ordered.
pub(super) fn separate(ctx: &Conj, ranges: &[Range]) -> Result<Option<Vec<Region>>, Error> {
    let k = ranges.len();
    let mut lower_le = vec![vec![false; k]; k];
    let mut upper_le = vec![vec![false; k]; k];
    for i in 0..k {
        for j in 0..k {
            if i == j {
                continue;
            }
            // l_i ≤ l_j: every c above l_j is above l_i.
            lower_le[i][j] = implied_all(ctx, &ranges[j].lower, &ranges[i].lower)?;
            // u_i ≤ u_j: every c below u_i is below u_j.
            upper_le[i][j] = implied_all(ctx, &ranges[i].upper, &ranges[j].upper)?;
        }
    }
    let (Some(pi), Some(sigma)) = (order(k, &lower_le), order(k, &upper_le)) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for a in 1..=k {
        for b in 0..k {
            let active: Vec<usize> = (0..k)
                .filter(|s| pi[..a].contains(s) && !sigma[..b].contains(s))
                .collect();
            if active.is_empty() {
                continue;
            }
            let mut region = Region {
                active,
                lower: ranges[pi[a - 1]].lower.clone(),
                upper: ranges[sigma[b]].upper.clone(),
                lower_any: Vec::new(),
                upper_any: Vec::new(),
            };
            if b > 0 {
                // c > u_σb: above one of its rows.
                region.lower_any = ranges[sigma[b - 1]]
                    .upper
                    .iter()
                    .map(|r| complement(r).map(|c| vec![c]))
                    .collect::<Result<_, _>>()?;
            }
            if a < k {
                // c < l_π(a+1): below one of its rows.
                region.upper_any = ranges[pi[a]]
                    .lower
                    .iter()
                    .map(|r| complement(r).map(|c| vec![c]))
                    .collect::<Result<_, _>>()?;
            }
            if let Some(r) = region.finish(ctx)? {
                out.push(r);
            }
        }
    }
    Ok(Some(out))
}
