//! Loop bounds of a domain in iterator order.
//!
//! A loop nest that runs a domain's iterators outermost first computes each loop's range from
//! the constraints whose innermost iterator is the loop's. A domain need not have such
//! constraints for every iterator: in `{ S[k, j] : 0 <= k and k <= j < N }` (a `.pf` range
//! `k in 0:j + 1` on an index that comes before `j`), `k` has no upper bound of its own; it is
//! bounded only through `j`. [`loop_bounds`] adds, for every iterator left without a lower or
//! an upper bound, the bounds the inner iterators' constraints imply on it (`k <= N - 1`), by
//! Fourier–Motzkin elimination of the inner iterators. The added constraints hold at every point
//! of the domain, so the domain is unchanged; over the integers they may be looser than the exact
//! projection, which only lets an outer loop run values whose inner loops are empty.

use super::affine::{AffineExpr, Constraint, ConstraintKind, Var};

/// More constraints than this in one elimination step and the elimination stops: the iterators
/// still unbounded stay so.
const LIMIT: usize = 400;

/// `domain` with the implied bounds of iterators that have no lower or no upper bound of their
/// own (see the module docs). Iterators are `Var::Iter(0..depth)`, outermost first.
pub fn loop_bounds(domain: &[Constraint], depth: usize) -> Vec<Constraint> {
    let level = |e: &AffineExpr| e.innermost_iter();
    let has = |d: usize, positive: bool| {
        domain.iter().any(|c| {
            level(&c.expr) == Some(d)
                && (c.kind == ConstraintKind::Zero || (c.expr.coeff(Var::Iter(d)) > 0) == positive)
        })
    };
    let missing: Vec<(bool, bool)> = (0..depth)
        .map(|d| (!has(d, true), !has(d, false)))
        .collect();
    let mut out = domain.to_vec();
    if missing.iter().all(|&(lo, hi)| !lo && !hi) {
        return out;
    }
    // Every constraint as `expr >= 0`.
    let mut current: Vec<AffineExpr> = Vec::new();
    for c in domain {
        push_unique(&mut current, normalise(c.expr.clone()));
        if c.kind == ConstraintKind::Zero {
            push_unique(&mut current, normalise(c.expr.scale(-1)));
        }
    }
    for d in (0..depth).rev() {
        let var = Var::Iter(d);
        let (lo, hi) = missing[d];
        for e in &current {
            let a = e.coeff(var);
            if level(e) == Some(d) && ((lo && a > 0) || (hi && a < 0)) {
                let c = Constraint::non_negative(e.clone());
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        if d == 0 {
            break;
        }
        let (with, mut next): (Vec<AffineExpr>, Vec<AffineExpr>) =
            current.into_iter().partition(|e| e.coeff(var) != 0);
        let lower: Vec<&AffineExpr> = with.iter().filter(|e| e.coeff(var) > 0).collect();
        let upper: Vec<&AffineExpr> = with.iter().filter(|e| e.coeff(var) < 0).collect();
        for l in &lower {
            for u in &upper {
                let a = l.coeff(var);
                let b = -u.coeff(var);
                // b·l + a·u cancels the iterator; both are non-negative, so the sum is.
                let (Some(l), Some(u)) = (checked_scale(l, b), checked_scale(u, a)) else {
                    return out;
                };
                let Some(combined) = checked_add(&l, &u) else {
                    return out;
                };
                if !combined.terms().is_empty() {
                    push_unique(&mut next, normalise(combined));
                }
                if next.len() > LIMIT {
                    return out;
                }
            }
        }
        current = next;
    }
    out
}

/// The number of integer points of `domain` (over `depth` iterators, outermost first) for the
/// parameter values `params`: the outer iterators run over their ranges and the innermost
/// one's range is counted. `None` where an iterator is unbounded, a value overflows, or more
/// than `limit` ranges of the innermost iterator would be counted.
pub fn count_points(
    domain: &[Constraint],
    depth: usize,
    params: &[i64],
    limit: u64,
) -> Option<u64> {
    let bounded = loop_bounds(domain, depth);
    let mut levels: Vec<Vec<&Constraint>> = vec![Vec::new(); depth + 1];
    for c in &bounded {
        levels[c.expr.innermost_iter().map_or(0, |d| d + 1)].push(c);
    }
    // Constraints on parameters alone.
    if !levels[0].iter().all(|c| c.holds(&vec![0; depth], params)) {
        return Some(0);
    }
    let mut counter = Counter {
        levels: &levels[1..],
        params,
        iters: vec![0; depth],
        ranges: 0,
        limit,
    };
    counter.count(0)
}

/// The state of [`count_points`].
struct Counter<'a> {
    /// Per iterator, the constraints whose innermost iterator it is.
    levels: &'a [Vec<&'a Constraint>],
    params: &'a [i64],
    iters: Vec<i64>,
    ranges: u64,
    limit: u64,
}

impl Counter<'_> {
    /// The points with the iterators before `d` at their values in `iters`.
    fn count(&mut self, d: usize) -> Option<u64> {
        if d == self.levels.len() {
            return Some(1);
        }
        let (lo, hi) = self.range(d)?;
        if lo > hi {
            return Some(0);
        }
        if d + 1 == self.levels.len() {
            self.ranges += 1;
            return (self.ranges <= self.limit).then(|| (hi - lo + 1) as u64);
        }
        let mut total: u64 = 0;
        for v in lo..=hi {
            self.iters[d] = v;
            total = total.checked_add(self.count(d + 1)?)?;
        }
        self.iters[d] = 0;
        Some(total)
    }

    /// The range of iterator `d` given the outer ones (empty when `lo > hi`).
    fn range(&mut self, d: usize) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (i64::MIN, i64::MAX);
        self.iters[d] = 0;
        for c in &self.levels[d] {
            let a = c.expr.coeff(Var::Iter(d));
            // a·x + rest >= 0 (or = 0)
            let rest = c.expr.eval(&self.iters, self.params);
            match c.kind {
                ConstraintKind::Zero if rest % a != 0 => return Some((1, 0)),
                ConstraintKind::Zero => {
                    let x = -rest / a;
                    lo = lo.max(x);
                    hi = hi.min(x);
                }
                ConstraintKind::NonNegative if a > 0 => {
                    lo = lo.max((-rest).div_euclid(a) + i64::from((-rest).rem_euclid(a) != 0))
                }
                ConstraintKind::NonNegative => hi = hi.min(rest.div_euclid(-a)),
            }
        }
        (lo > i64::MIN && hi < i64::MAX).then_some((lo, hi))
    }
}

fn push_unique(list: &mut Vec<AffineExpr>, e: AffineExpr) {
    if !list.contains(&e) {
        list.push(e);
    }
}

/// `e >= 0` with the coefficients divided by their gcd and the constant rounded down: the same
/// integer points.
fn normalise(e: AffineExpr) -> AffineExpr {
    let g = e
        .terms()
        .iter()
        .fold(0i64, |g, &(_, c)| gcd(g, c.unsigned_abs() as i64));
    if g <= 1 {
        return e;
    }
    AffineExpr::from_terms(
        e.terms().iter().map(|&(v, c)| (v, c / g)),
        e.constant.div_euclid(g),
    )
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn checked_scale(e: &AffineExpr, k: i64) -> Option<AffineExpr> {
    let mut terms = Vec::new();
    for &(v, c) in e.terms() {
        terms.push((v, c.checked_mul(k)?));
    }
    Some(AffineExpr::from_terms(terms, e.constant.checked_mul(k)?))
}

fn checked_add(a: &AffineExpr, b: &AffineExpr) -> Option<AffineExpr> {
    let mut terms: Vec<(Var, i64)> = a.terms().to_vec();
    for &(v, c) in b.terms() {
        match terms.iter_mut().find(|(w, _)| *w == v) {
            Some((_, x)) => *x = x.checked_add(c)?,
            None => terms.push((v, c)),
        }
    }
    Some(AffineExpr::from_terms(
        terms,
        a.constant.checked_add(b.constant)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::ParamId;

    fn iter(d: usize) -> AffineExpr {
        AffineExpr::var(Var::Iter(d))
    }

    #[test]
    fn an_index_bounded_through_an_inner_one_gets_its_bound() {
        // { [k, j] : 0 <= k and k <= j and j < N }: k <= N - 1 is implied.
        let n = AffineExpr::var(Var::Param(ParamId(0)));
        let domain = vec![
            Constraint::le(&AffineExpr::constant(0), &iter(0)),
            Constraint::le(&iter(0), &iter(1)),
            Constraint::lt(&iter(1), &n),
        ];
        let out = loop_bounds(&domain, 2);
        let implied = Constraint::non_negative(n.sub(&iter(0)).add(&AffineExpr::constant(-1)));
        assert!(out.contains(&implied), "{out:?}");
        assert_eq!(&out[..3], &domain[..]);
        // Each point of the domain satisfies every added constraint, and no other point is
        // added: the set is the same.
        for k in -2..6 {
            for j in -2..6 {
                let inside = |list: &[Constraint]| list.iter().all(|c| c.holds(&[k, j], &[4]));
                assert_eq!(inside(&domain), inside(&out));
            }
        }
    }

    #[test]
    fn points_are_counted_as_enumeration_counts_them() {
        // { [k, j, i] : 0 <= k and k <= j < N and 2i = j + k and 3j - 2k <= 2N } for N = 7,
        // with the upper bound of k implied through j.
        let n = AffineExpr::var(Var::Param(ParamId(0)));
        let c = AffineExpr::constant;
        let domain = vec![
            Constraint::le(&c(0), &iter(0)),
            Constraint::le(&iter(0), &iter(1)),
            Constraint::lt(&iter(1), &n),
            Constraint::eq(&iter(2).scale(2), &iter(1).add(&iter(0))),
            Constraint::le(&iter(1).scale(3).sub(&iter(0).scale(2)), &n.scale(2)),
        ];
        let mut enumerated = 0;
        for k in -3..10 {
            for j in -3..10 {
                for i in -3..10 {
                    enumerated += u64::from(domain.iter().all(|c| c.holds(&[k, j, i], &[7])));
                }
            }
        }
        assert!(enumerated > 0);
        assert_eq!(count_points(&domain, 3, &[7], 1000), Some(enumerated));
        assert_eq!(count_points(&domain, 3, &[7], 2), None);
        assert_eq!(count_points(&domain[..2], 3, &[7], 1000), None);
    }

    #[test]
    fn bounded_domains_are_returned_as_they_are() {
        let n = AffineExpr::var(Var::Param(ParamId(0)));
        let domain = vec![
            Constraint::le(&AffineExpr::constant(0), &iter(0)),
            Constraint::lt(&iter(0), &n),
            Constraint::le(&iter(0), &iter(1)),
            Constraint::lt(&iter(1), &n),
        ];
        assert_eq!(loop_bounds(&domain, 2), domain);
    }
}
