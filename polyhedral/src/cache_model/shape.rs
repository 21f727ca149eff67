//! The shape of a statement's iteration domain at the program's sizes: how many instances it
//! has, the range of each loop function over it, and which iterators a constraint ties to
//! another iterator (a triangular or skewed domain).
//!
//! A domain is a conjunction of affine constraints over the iterators (parameters bound to
//! their values). Counting walks the iterators outermost first: each constraint is checked at
//! the level of the innermost iterator it mentions, where every other iterator it mentions is
//! fixed, and the innermost iterator is counted as an interval, so the count is exact for any
//! conjunction. A rectangular domain (no constraint mentions two iterators) is counted as the
//! product of its ranges without walking; a walk that would visit more than [`WALK_BUDGET`]
//! outer points samples the outermost iterator evenly and scales.

use crate::program::{AffineExpr, ConstraintKind, Statement, Var};

use super::Unsupported;

/// The most outer points a count visits before it samples.
const WALK_BUDGET: f64 = 1_000_000.0;

/// What [`domain_shape`] finds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DomainShape {
    /// Statement instances.
    pub instances: f64,
    /// Per function asked for: its least and greatest value over the domain.
    pub ranges: Vec<(i64, i64)>,
    /// Per iterator: whether some constraint mentions it together with another iterator.
    pub coupled: Vec<bool>,
}

/// One constraint `Σ coeffs·iters + constant (= 0 | ≥ 0)`, parameters bound.
struct Row {
    coeffs: Vec<i64>,
    constant: i64,
    equality: bool,
}

/// The shape of `stmt`'s domain at parameter values `params`, with the ranges of `functions`
/// (affine in the iterators and parameters).
pub(crate) fn domain_shape(
    stmt: &Statement,
    params: &[i64],
    functions: &[AffineExpr],
) -> Result<DomainShape, Unsupported> {
    let n = stmt.depth();
    let rows: Vec<Row> = stmt
        .domain
        .iter()
        .map(|c| {
            let e = c.expr.bind_params(params);
            Row {
                coeffs: (0..n).map(|k| e.coeff(Var::Iter(k))).collect(),
                constant: e.constant,
                equality: c.kind == ConstraintKind::Zero,
            }
        })
        .collect();
    let functions: Vec<(Vec<i64>, i64)> = functions
        .iter()
        .map(|f| {
            let e = f.bind_params(params);
            ((0..n).map(|k| e.coeff(Var::Iter(k))).collect(), e.constant)
        })
        .collect();
    let mut coupled = vec![false; n];
    for r in &rows {
        let used: Vec<usize> = (0..n).filter(|&k| r.coeffs[k] != 0).collect();
        if used.len() > 1 {
            for k in used {
                coupled[k] = true;
            }
        }
    }
    // Constraints by the innermost iterator they mention.
    let mut levels: Vec<Vec<&Row>> = vec![Vec::new(); n];
    for r in &rows {
        if let Some(k) = (0..n).rev().find(|&k| r.coeffs[k] != 0) {
            levels[k].push(r);
        }
    }
    if n == 0 {
        return Ok(DomainShape {
            instances: 1.0,
            ranges: functions.iter().map(|(_, c)| (*c, *c)).collect(),
            coupled,
        });
    }
    let mut walk = Walk {
        levels: &levels,
        functions: &functions,
        fixed: vec![0; n],
        instances: 0.0,
        ranges: vec![(i64::MAX, i64::MIN); functions.len()],
        weight: 1.0,
    };
    if !coupled.iter().any(|&c| c) {
        // A box: every iterator's range on its own.
        let mut bounds = Vec::with_capacity(n);
        for k in 0..n {
            match walk.range(k)? {
                Some(b) => bounds.push(b),
                None => {
                    return Ok(DomainShape {
                        instances: 0.0,
                        ranges: functions.iter().map(|(_, c)| (*c, *c)).collect(),
                        coupled,
                    })
                }
            }
        }
        let instances = bounds
            .iter()
            .map(|&(lo, hi)| (hi - lo + 1) as f64)
            .product();
        let ranges = functions
            .iter()
            .map(|(coeffs, c)| {
                let (mut lo, mut hi) = (*c, *c);
                for (&a, &(l, h)) in coeffs.iter().zip(&bounds) {
                    lo += (a * l).min(a * h);
                    hi += (a * l).max(a * h);
                }
                (lo, hi)
            })
            .collect();
        return Ok(DomainShape {
            instances,
            ranges,
            coupled,
        });
    }
    // Outer points a full walk would visit, from the ranges the constraints give each
    // iterator when the outer ones are not yet fixed: an estimate for the sampling decision.
    let outer: f64 = (0..n - 1)
        .map(|k| walk.loose_extent(k))
        .product::<f64>()
        .max(1.0);
    let stride = (outer / WALK_BUDGET).ceil().max(1.0) as i64;
    walk.weight = stride as f64;
    walk.visit(0, stride)?;
    let ranges = walk
        .ranges
        .iter()
        .zip(&functions)
        .map(|(&(lo, hi), (_, c))| if lo > hi { (*c, *c) } else { (lo, hi) })
        .collect();
    Ok(DomainShape {
        instances: walk.instances,
        ranges,
        coupled,
    })
}

/// Narrows `lo..=hi` by the constraint `a·x + rest (= 0 | ≥ 0)`; `false` when it is an
/// equality no integer satisfies.
fn bound(lo: &mut i64, hi: &mut i64, a: i64, rest: i64, equality: bool) -> bool {
    if equality {
        if rest % a != 0 {
            return false;
        }
        let x = -rest / a;
        *lo = (*lo).max(x);
        *hi = (*hi).min(x);
    } else if a > 0 {
        *lo = (*lo).max((-rest).div_euclid(a) + i64::from((-rest).rem_euclid(a) != 0));
    } else {
        *hi = (*hi).min(rest.div_euclid(-a));
    }
    true
}

/// The innermost iterator's values with the one before it at `x`, from its constraints
/// `rows` of [`Walk::visit_last_two`]; `None` when there are none.
fn innermost_range(
    rows: &[(i64, i64, i64, bool)],
    x: i64,
) -> Result<Option<(i64, i64)>, Unsupported> {
    let (mut l, mut h) = (i64::MIN, i64::MAX);
    for &(base, ck, a, equality) in rows {
        if !bound(&mut l, &mut h, a, base + ck * x, equality) {
            return Ok(None);
        }
    }
    if l == i64::MIN || h == i64::MAX {
        return Err(Unsupported(
            "an iterator is unbounded at the kernel's sizes".into(),
        ));
    }
    Ok((l <= h).then_some((l, h)))
}

/// Widens `ranges` by the values of `functions` (as in [`Walk::visit_last_two`]) with the
/// iterator before the innermost at `x` and the innermost from `l` to `h`.
fn widen(ranges: &mut [(i64, i64)], functions: &[(i64, i64, i64)], x: i64, l: i64, h: i64) {
    for (&(base, ck, cl), range) in functions.iter().zip(ranges.iter_mut()) {
        let rest = base + ck * x;
        let (a, b) = (rest + cl * l, rest + cl * h);
        range.0 = range.0.min(a.min(b));
        range.1 = range.1.max(a.max(b));
    }
}

struct Walk<'a> {
    levels: &'a [Vec<&'a Row>],
    functions: &'a [(Vec<i64>, i64)],
    fixed: Vec<i64>,
    instances: f64,
    ranges: Vec<(i64, i64)>,
    /// How many points each visited outermost value stands for.
    weight: f64,
}

impl Walk<'_> {
    /// The values of iterator `k` allowed by its constraints with the outer iterators at
    /// `self.fixed` (`None`: none).
    fn range(&self, k: usize) -> Result<Option<(i64, i64)>, Unsupported> {
        let (mut lo, mut hi) = (i64::MIN, i64::MAX);
        for r in &self.levels[k] {
            let a = r.coeffs[k];
            let rest: i64 = r.constant + (0..k).map(|j| r.coeffs[j] * self.fixed[j]).sum::<i64>();
            if !bound(&mut lo, &mut hi, a, rest, r.equality) {
                return Ok(None);
            }
        }
        if lo == i64::MIN || hi == i64::MAX {
            return Err(Unsupported(
                "an iterator is unbounded at the kernel's sizes".into(),
            ));
        }
        Ok((lo <= hi).then_some((lo, hi)))
    }

    /// The extent of iterator `k` from the constraints that mention no other iterator.
    fn loose_extent(&self, k: usize) -> f64 {
        let (mut lo, mut hi) = (i64::MIN, i64::MAX);
        for r in &self.levels[k] {
            if (0..k).any(|j| r.coeffs[j] != 0) || r.equality {
                continue;
            }
            let a = r.coeffs[k];
            if a > 0 {
                lo = lo.max((-r.constant).div_euclid(a));
            } else {
                hi = hi.min(r.constant.div_euclid(-a));
            }
        }
        if lo == i64::MIN || hi == i64::MAX || hi < lo {
            return 1.0;
        }
        (hi - lo + 1) as f64
    }

    /// [`Walk::visit`] of the innermost iterator for every value `lo..=hi` of iterator `k`,
    /// the one before it: the same count, with the outer iterators' part of each bound
    /// computed once.
    fn visit_last_two(&mut self, k: usize, lo: i64, hi: i64) -> Result<(), Unsupported> {
        let last = k + 1;
        let outer = |coeffs: &[i64], constant: i64| -> i64 {
            constant + (0..k).map(|j| coeffs[j] * self.fixed[j]).sum::<i64>()
        };
        // Per constraint of the innermost iterator: (its part without iterators k and
        // last, k's coefficient, last's coefficient, whether an equality).
        let rows: Vec<(i64, i64, i64, bool)> = self.levels[last]
            .iter()
            .map(|r| {
                (
                    outer(&r.coeffs, r.constant),
                    r.coeffs[k],
                    r.coeffs[last],
                    r.equality,
                )
            })
            .collect();
        let functions: Vec<(i64, i64, i64)> = self
            .functions
            .iter()
            .map(|f| (outer(&f.0, f.1), f.0[k], f.0[last]))
            .collect();
        // With no bound of the innermost iterator depending on `k`, its range is the same for
        // every value of `k`, and each function, affine in both, is extreme at a corner.
        if rows.iter().all(|&(_, ck, _, _)| ck == 0) {
            if let Some((l, h)) = innermost_range(&rows, lo)? {
                self.instances += self.weight * ((h - l + 1) as f64) * ((hi - lo + 1) as f64);
                for x in [lo, hi] {
                    widen(&mut self.ranges, &functions, x, l, h);
                }
            }
            return Ok(());
        }
        for x in lo..=hi {
            if let Some((l, h)) = innermost_range(&rows, x)? {
                self.instances += self.weight * (h - l + 1) as f64;
                widen(&mut self.ranges, &functions, x, l, h);
            }
        }
        Ok(())
    }

    fn visit(&mut self, k: usize, stride: i64) -> Result<(), Unsupported> {
        let Some((lo, hi)) = self.range(k)? else {
            return Ok(());
        };
        let n = self.fixed.len();
        if k + 1 == n {
            self.instances += self.weight * (hi - lo + 1) as f64;
            for (f, range) in self.functions.iter().zip(self.ranges.iter_mut()) {
                let rest: i64 = f.1 + (0..k).map(|j| f.0[j] * self.fixed[j]).sum::<i64>();
                let (a, b) = (rest + f.0[k] * lo, rest + f.0[k] * hi);
                range.0 = range.0.min(a.min(b));
                range.1 = range.1.max(a.max(b));
            }
            return Ok(());
        }
        if k + 2 == n && (k > 0 || stride == 1) {
            return self.visit_last_two(k, lo, hi);
        }
        let step = if k == 0 { stride } else { 1 };
        let mut x = lo;
        while x <= hi {
            self.fixed[k] = x;
            self.visit(k + 1, stride)?;
            x += step;
        }
        if k == 0 && stride > 1 && (hi - lo) % stride != 0 {
            // The last outermost value keeps the extremes of the ranges exact.
            let saved = self.weight;
            let saved_instances = self.instances;
            self.weight = 0.0;
            self.fixed[0] = hi;
            self.visit(1, stride)?;
            self.weight = saved;
            self.instances = saved_instances;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Access, ArrayId, Constraint, Expr, ExprArena, Literal, ScalarType, Span};

    fn statement(depth: usize, domain: Vec<Constraint>) -> Statement {
        let mut exprs = ExprArena::new();
        let body = exprs.push(Expr::Literal(Literal {
            value: 0.0,
            ty: ScalarType::F64,
        }));
        Statement {
            divs: Vec::new(),
            name: "S".into(),
            iterators: (0..depth).map(|k| format!("i{k}")).collect(),
            domain,
            write: Access {
                array: ArrayId(0),
                subscripts: Vec::new(),
                span: Span::default(),
            },
            reads: Vec::new(),
            exprs,
            body,
            position: vec![0; depth + 1],
            reduction: None,
            span: Span::default(),
        }
    }

    fn it(k: usize) -> AffineExpr {
        AffineExpr::var(Var::Iter(k))
    }

    fn c(v: i64) -> AffineExpr {
        AffineExpr::constant(v)
    }

    #[test]
    fn a_triangle_has_half_a_square_and_couples_its_iterators() {
        // 0 <= i < 10, 0 <= j <= i, 0 <= k < 4.
        let s = statement(
            3,
            vec![
                Constraint::le(&c(0), &it(0)),
                Constraint::lt(&it(0), &c(10)),
                Constraint::le(&c(0), &it(1)),
                Constraint::le(&it(1), &it(0)),
                Constraint::le(&c(0), &it(2)),
                Constraint::lt(&it(2), &c(4)),
            ],
        );
        let shape = domain_shape(&s, &[], &[it(1), it(0).add(&it(2))]).unwrap();
        assert_eq!(shape.instances, 55.0 * 4.0);
        assert_eq!(shape.ranges, [(0, 9), (0, 12)]);
        assert_eq!(shape.coupled, [true, true, false]);
    }

    /// The innermost two iterators walked as a rectangle per outer value (no bound of the
    /// innermost depends on the one before it) give what enumerating every point gives.
    #[test]
    fn rectangles_of_the_last_two_iterators_match_enumeration() {
        // 0 <= i < 6, i - 2 <= j <= 4, i + 1 <= k <= 6: k's bounds move with i, not j.
        let s = statement(
            3,
            vec![
                Constraint::le(&c(0), &it(0)),
                Constraint::lt(&it(0), &c(6)),
                Constraint::le(&it(0).sub(&c(2)), &it(1)),
                Constraint::le(&it(1), &c(4)),
                Constraint::le(&it(0).add(&c(1)), &it(2)),
                Constraint::le(&it(2), &c(6)),
            ],
        );
        let functions = [
            it(1).sub(&it(2)),
            it(1).add(&it(1)).add(&it(2)).sub(&it(0)),
            it(2).sub(&it(0)),
        ];
        let shape = domain_shape(&s, &[], &functions).unwrap();
        let mut instances = 0.0;
        let mut ranges = vec![(i64::MAX, i64::MIN); functions.len()];
        for i in 0..6 {
            for j in (i - 2)..=4 {
                for k in (i + 1)..=6 {
                    instances += 1.0;
                    for (f, r) in functions.iter().zip(ranges.iter_mut()) {
                        let v = f.eval(&[i, j, k], &[]);
                        *r = (r.0.min(v), r.1.max(v));
                    }
                }
            }
        }
        assert_eq!(shape.instances, instances);
        assert_eq!(shape.ranges, ranges);
    }

    #[test]
    fn a_box_is_counted_without_walking() {
        let s = statement(
            2,
            vec![
                Constraint::le(&c(2), &it(0)),
                Constraint::lt(&it(0), &c(7)),
                Constraint::le(&c(0), &it(1)),
                Constraint::lt(&it(1), &c(3)),
            ],
        );
        let shape = domain_shape(&s, &[], &[it(0).sub(&it(1))]).unwrap();
        assert_eq!(shape.instances, 15.0);
        assert_eq!(shape.ranges, [(0, 6)]);
        let unbounded = statement(1, vec![Constraint::le(&c(0), &it(0))]);
        assert!(domain_shape(&unbounded, &[], &[]).is_err());
    }
}
