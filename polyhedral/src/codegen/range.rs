//! Where a statement's instances lie on the schedule dimension about to be scanned: its
//! [`Range`], and the parameter context of a whole program.
//!
//! A range is computed from the statement's instance relation (parameters, schedule
//! dimensions, iterators, division locals) in three steps:
//!
//! 1. the **rational shadow** on the parameters and the dimensions up to the current one:
//!    equalities are eliminated first, then every other variable by Fourier–Motzkin.
//!    A step is exact over the integers when one side's coefficients are all 1, or when the
//!    dark shadow covers everything (the two rows that define an integer division), and then
//!    the dark shadow is what is kept; otherwise the rational shadow is a superset of the
//!    integer projection. Combinations that Imbert's first acceleration theorem proves
//!    redundant (more parent rows than eliminated variables plus one) are never formed, and
//!    parallel rows keep only the tightest, so the shadow stays small. Any subset of valid rows
//!    is still a superset of the projection, so none of this can make a bound wrong;
//! 2. when some step was not exact, every row is **tightened**: its constant is lowered as far
//!    as the exact relation (Omega test) allows, so rows that differ from the integer hull by a
//!    constant become tight;
//! 3. rows that the context (enclosing loops and guards) and the other rows imply are dropped,
//!    exactly (Omega test on the small system of rows).
//!
//! What is left is split into lower and upper bounds of the current dimension and a guard of
//! rows on the outer dimensions only: conditions the enclosing code has not established and
//! that the existence of a value in the range does not imply.
//!
//! Every row of a range holds at every instance of the statement under the context; the
//! range may contain values where the statement has no instance (the rational shadow, or
//! strides), which the guard at the statement itself excludes.

use crate::schedule::instances::Instances;
use crate::sets::conj::{combine, negate, Conj, Row};
use crate::sets::int::Overflow;
use crate::sets::omega::is_feasible;
use crate::sets::Error;
use std::collections::HashMap;

/// The rational shadow of a conjunction on its first variables.
pub(super) struct Shadow {
    pub conj: Conj,
    /// Whether every elimination was exact over the integers (then the rows cannot be
    /// tightened by a constant).
    pub exact: bool,
}

/// A small bit set over row or variable indices.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64).max(1)])
    }

    fn with(n: usize, i: usize) -> Bits {
        let mut b = Bits::new(n);
        b.0[i / 64] |= 1 << (i % 64);
        b
    }

    fn union(&self, other: &Bits) -> Bits {
        Bits(self.0.iter().zip(&other.0).map(|(a, b)| a | b).collect())
    }

    fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// Elements of `self` not in `other`.
    fn minus_count(&self, other: &Bits) -> u32 {
        self.0
            .iter()
            .zip(&other.0)
            .map(|(a, b)| (a & !b).count_ones())
            .sum()
    }
}

/// The variables a row uses.
fn support(r: &[i64]) -> Bits {
    let n = r.len() - 1;
    let mut b = Bits::new(n);
    for (v, &x) in r[1..].iter().enumerate() {
        if x != 0 {
            b.0[v / 64] |= 1 << (v % 64);
        }
    }
    b
}

/// An inequality during elimination: the original inequalities it combines (its history) and
/// every variable those use.
struct Tracked {
    row: Row,
    history: Bits,
    vars: Bits,
}

/// The non-negative gcd of two coefficients of a stored row (neither is `i64::MIN`, which
/// normalised rows never hold).
fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

/// `r` divided by the gcd of its coefficients, the constant rounded down (the same integer
/// points).
pub(super) fn normalized(mut r: Row) -> Row {
    tighten_gcd(&mut r);
    r
}

/// Divides by the gcd of the coefficients and rounds the constant down (valid over the
/// integers). When no variable is left, `Some(whether the constant row holds)`.
fn tighten_gcd(r: &mut Row) -> Option<bool> {
    let g = r[1..].iter().fold(0i64, |g, &x| gcd(g, x));
    if g == 0 {
        return Some(r[0] >= 0);
    }
    if g > 1 {
        for x in r[1..].iter_mut() {
            *x /= g;
        }
        r[0] = r[0].div_euclid(g);
    }
    None
}

/// Whether the dark shadow of every pair of bounds on `v` is all of the real shadow's
/// integer points: each pair `a·v ≥ L`, `b·v ≤ U` has `a·U − b·L` constant and at least
/// `(a−1)(b−1)` (the two rows that define an integer division).
fn dark_covers_all(lower: &[&Tracked], upper: &[&Tracked], v: usize) -> bool {
    lower.iter().all(|l| {
        upper.iter().all(|u| {
            let (a, b) = (l.row[1 + v] as i128, -u.row[1 + v] as i128);
            (1..l.row.len()).all(|i| b * l.row[i] as i128 + a * u.row[i] as i128 == 0)
                && b * l.row[0] as i128 + a * u.row[0] as i128 >= (a - 1) * (b - 1)
        })
    })
}

/// The rational shadow of `c` on its first `keep` variables (see the module docs).
pub(super) fn shadow(c: &Conj, keep: usize) -> Result<Shadow, Error> {
    let empty = || Shadow {
        conj: Conj::empty(keep),
        exact: true,
    };
    let mut c = c.clone();
    let mut exact = true;
    loop {
        if !c.normalize()? {
            return Ok(empty());
        }
        let pick = c
            .eqs
            .iter()
            .enumerate()
            .flat_map(|(e, r)| {
                (keep..r.len() - 1)
                    .filter(move |&v| r[1 + v] != 0)
                    .map(move |v| (r[1 + v].abs(), e, v))
            })
            .min();
        let Some((a, e, v)) = pick else { break };
        if a != 1 {
            exact = false;
        }
        let row = c.eqs.remove(e);
        let (sa, aa) = (row[1 + v].signum(), row[1 + v].abs());
        for r in c.eqs.iter_mut().chain(c.ineqs.iter_mut()) {
            let b = r[1 + v];
            if b != 0 {
                *r = combine(r, &aa, &row, &(-sa * b))?;
            }
        }
    }
    let n = c.n;
    let m = c.ineqs.len();
    let mut rows: Vec<Tracked> = c
        .ineqs
        .into_iter()
        .enumerate()
        .map(|(i, row)| Tracked {
            history: Bits::with(m, i),
            vars: support(&row),
            row,
        })
        .collect();
    loop {
        let mut best: Option<(i64, usize)> = None;
        for v in keep..n {
            let lo = rows.iter().filter(|r| r.row[1 + v] > 0).count() as i64;
            let up = rows.iter().filter(|r| r.row[1 + v] < 0).count() as i64;
            if lo + up == 0 {
                continue;
            }
            let cost = lo * up - lo - up;
            if best.is_none_or(|(bc, _)| cost < bc) {
                best = Some((cost, v));
            }
        }
        let Some((_, v)) = best else { break };
        let (mut lower, mut upper, mut rest) = (Vec::new(), Vec::new(), Vec::new());
        for r in rows {
            match r.row[1 + v].signum() {
                1 => lower.push(r),
                -1 => upper.push(r),
                _ => rest.push(r),
            }
        }
        let lref: Vec<&Tracked> = lower.iter().collect();
        let uref: Vec<&Tracked> = upper.iter().collect();
        let unit =
            lower.iter().all(|r| r.row[1 + v] == 1) || upper.iter().all(|r| r.row[1 + v] == -1);
        let dark = !unit && dark_covers_all(&lref, &uref, v);
        if !unit && !dark {
            exact = false;
        }
        for l in &lower {
            let a = l.row[1 + v];
            for u in &upper {
                let b = -u.row[1 + v];
                let mut row = combine(&l.row, &b, &u.row, &a)?;
                if dark {
                    row[0] = row[0]
                        .checked_sub((a - 1).checked_mul(b - 1).ok_or(Overflow)?)
                        .ok_or(Overflow)?;
                }
                match tighten_gcd(&mut row) {
                    Some(true) => continue,
                    Some(false) => return Ok(empty()),
                    None => {}
                }
                let history = l.history.union(&u.history);
                let vars = l.vars.union(&u.vars);
                // Imbert: a combination of more rows than the variables it has lost, plus
                // one, is implied by the others.
                if history.count() > 1 + vars.minus_count(&support(&row)) {
                    continue;
                }
                rest.push(Tracked { row, history, vars });
            }
        }
        // Parallel rows: the tightest only.
        let mut at: HashMap<Vec<i64>, usize> = HashMap::new();
        rows = Vec::with_capacity(rest.len());
        for r in rest {
            match at.get(&r.row[1..]) {
                Some(&i) => {
                    if r.row[0] < rows[i].row[0] {
                        rows[i] = r;
                    }
                }
                None => {
                    at.insert(r.row[1..].to_vec(), rows.len());
                    rows.push(r);
                }
            }
        }
    }
    let cut = |r: &Row| r[..=keep].to_vec();
    let mut conj = Conj {
        n: keep,
        eqs: c.eqs.iter().map(cut).collect(),
        ineqs: rows.iter().map(|r| cut(&r.row)).collect(),
    };
    if !conj.normalize()? {
        return Ok(empty());
    }
    Ok(Shadow { conj, exact })
}

/// `row` with zero coefficients appended up to `n` variables.
pub(super) fn widen(row: &[i64], n: usize) -> Row {
    let mut r = row.to_vec();
    r.resize(n + 1, 0);
    r
}

/// Whether `ctx` implies `row ≥ 0` over the integers (`row` may have fewer variables).
pub(super) fn implied(ctx: &Conj, row: &[i64]) -> Result<bool, Error> {
    let mut c = ctx.clone();
    let mut neg = widen(&negate(row)?, ctx.n);
    neg[0] -= 1;
    c.ineqs.push(neg);
    Ok(!is_feasible(&c)?)
}

/// Whether `ctx` implies `row = 0`.
pub(super) fn implied_eq(ctx: &Conj, row: &[i64]) -> Result<bool, Error> {
    Ok(implied(ctx, row)? && implied(ctx, &negate(row)?)?)
}

/// Whether `ctx` and the extra rows have an integer point.
pub(super) fn feasible_with(ctx: &Conj, eqs: &[Row], ineqs: &[Row]) -> Result<bool, Error> {
    let mut c = ctx.clone();
    c.eqs.extend(eqs.iter().map(|r| widen(r, ctx.n)));
    c.ineqs.extend(ineqs.iter().map(|r| widen(r, ctx.n)));
    is_feasible(&c)
}

/// Lowers the constant of `row` as far as `full` still implies the row (at most by 2^20).
fn tighten(full: &Conj, row: &mut Row) -> Result<(), Error> {
    let holds = |d: i64| -> Result<bool, Error> {
        let mut r = row.clone();
        r[0] -= d;
        implied(full, &r)
    };
    if !holds(1)? {
        return Ok(());
    }
    let (mut lo, mut hi) = (1i64, 2i64);
    while holds(hi)? {
        lo = hi;
        if hi >= 1 << 20 {
            row[0] -= lo;
            return Ok(());
        }
        hi *= 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    row[0] -= lo;
    Ok(())
}

/// Conditions on the outer dimensions (and parameters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Guard {
    pub eqs: Vec<Row>,
    pub ineqs: Vec<Row>,
}

impl Guard {
    pub fn is_empty(&self) -> bool {
        self.eqs.is_empty() && self.ineqs.is_empty()
    }

    /// The rows both guards contain.
    pub fn common(&self, other: &Guard) -> Guard {
        Guard {
            eqs: self
                .eqs
                .iter()
                .filter(|r| other.eqs.contains(r))
                .cloned()
                .collect(),
            ineqs: self
                .ineqs
                .iter()
                .filter(|r| other.ineqs.contains(r))
                .cloned()
                .collect(),
        }
    }

    /// This guard without the rows of `other`.
    pub fn without(&self, other: &Guard) -> Guard {
        Guard {
            eqs: self
                .eqs
                .iter()
                .filter(|r| !other.eqs.contains(r))
                .cloned()
                .collect(),
            ineqs: self
                .ineqs
                .iter()
                .filter(|r| !other.ineqs.contains(r))
                .cloned()
                .collect(),
        }
    }

    /// The union of the rows of both.
    pub fn and(&self, other: &Guard) -> Guard {
        let mut g = self.clone();
        for r in &other.eqs {
            if !g.eqs.contains(r) {
                g.eqs.push(r.clone());
            }
        }
        for r in &other.ineqs {
            if !g.ineqs.contains(r) {
                g.ineqs.push(r.clone());
            }
        }
        g
    }

    /// Adds the rows to a conjunction with at least as many variables.
    pub fn add_to(&self, ctx: &mut Conj) {
        ctx.eqs.extend(self.eqs.iter().map(|r| widen(r, ctx.n)));
        ctx.ineqs.extend(self.ineqs.iter().map(|r| widen(r, ctx.n)));
    }
}

/// Where one statement's instances lie on the current dimension `cur`, over the variables of
/// the context (parameters and dimensions up to `cur`).
#[derive(Clone, Debug)]
pub(super) struct Range {
    /// Rows with a positive coefficient of `cur`: `cur` is at least their maximum.
    pub lower: Vec<Row>,
    /// Rows with a negative coefficient of `cur`: `cur` is at most their minimum.
    pub upper: Vec<Row>,
    /// `cur − e = 0` (coefficient 1) when the statement fixes the dimension to an affine
    /// function of the outer ones; then `lower` and `upper` hold that row and its negation.
    pub eq: Option<Row>,
    /// Rows without `cur` that the statement needs and the context does not imply.
    pub guard: Guard,
}

impl Range {
    /// Every row of the range, as a conjunction on top of `ctx`.
    pub fn with_context(&self, ctx: &Conj) -> Conj {
        let mut c = ctx.clone();
        c.ineqs.extend(self.lower.iter().cloned());
        c.ineqs.extend(self.upper.iter().cloned());
        self.guard.add_to(&mut c);
        c
    }

    pub fn same_bounds(&self, other: &Range) -> bool {
        self.lower == other.lower && self.upper == other.upper
    }
}

/// Drops the inequalities (and equalities) that `ctx`, `fixed` and the others imply.
fn drop_redundant(
    ctx: &Conj,
    fixed: &[Row],
    eqs: Vec<Row>,
    ineqs: Vec<Row>,
) -> Result<(Vec<Row>, Vec<Row>), Error> {
    let base = |skip_eq: Option<usize>, eqs: &[Row], ineqs: &[Row], skip: Option<usize>| {
        let mut c = ctx.clone();
        c.eqs.extend(fixed.iter().cloned());
        c.eqs.extend(
            eqs.iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != skip_eq)
                .map(|(_, r)| r.clone()),
        );
        c.ineqs.extend(
            ineqs
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != skip)
                .map(|(_, r)| r.clone()),
        );
        c
    };
    let mut ineqs = ineqs;
    let mut i = 0;
    while i < ineqs.len() {
        if implied(&base(None, &eqs, &ineqs, Some(i)), &ineqs[i])? {
            ineqs.remove(i);
        } else {
            i += 1;
        }
    }
    let mut eqs = eqs;
    let mut i = 0;
    while i < eqs.len() {
        if implied_eq(&base(Some(i), &eqs, &ineqs, None), &eqs[i])? {
            eqs.remove(i);
        } else {
            i += 1;
        }
    }
    Ok((eqs, ineqs))
}

/// The range of `inst` on dimension `cur` under `ctx` (over `cur + 1` variables); `None` when
/// the statement has no instance there.
pub(super) fn statement_range(
    inst: &Instances,
    ctx: &Conj,
    cur: usize,
) -> Result<Option<Range>, Error> {
    let k = cur + 1;
    debug_assert_eq!(ctx.n, k);
    let sh = shadow(&inst.rel, k)?;
    let mut c = sh.conj;
    if !feasible_with(ctx, &c.eqs, &c.ineqs)? {
        return Ok(None);
    }
    if !sh.exact {
        let full = inst.with_context(ctx);
        if !is_feasible(&full)? {
            return Ok(None);
        }
        for r in c.ineqs.iter_mut() {
            tighten(&full, r)?;
        }
        if !c.normalize()? {
            return Ok(None);
        }
    }
    // A unit equality on `cur` fixes it: the other rows become conditions on the outer
    // dimensions.
    let eq = match c.eqs.iter().position(|r| r[1 + cur].abs() == 1) {
        Some(i) => {
            let r = c.eqs.remove(i);
            let r = if r[1 + cur] == 1 { r } else { negate(&r)? };
            for x in c.eqs.iter_mut().chain(c.ineqs.iter_mut()) {
                let b = x[1 + cur];
                if b != 0 {
                    *x = combine(x, &1, &r, &-b)?;
                }
            }
            if !c.normalize()? {
                return Ok(None);
            }
            Some(r)
        }
        None => None,
    };
    let fixed: Vec<Row> = eq.iter().cloned().collect();
    let (eqs, ineqs) = drop_redundant(ctx, &fixed, c.eqs, c.ineqs)?;
    let mut range = Range {
        lower: Vec::new(),
        upper: Vec::new(),
        eq: eq.clone(),
        guard: Guard::default(),
    };
    if let Some(e) = eq {
        range.upper.push(negate(&e)?);
        range.lower.push(e);
    }
    for r in ineqs {
        match r[1 + cur].signum() {
            1 => range.lower.push(r),
            -1 => range.upper.push(r),
            _ => range.guard.ineqs.push(r),
        }
    }
    for r in eqs {
        match r[1 + cur].signum() {
            0 => range.guard.eqs.push(r),
            1 => {
                range.upper.push(negate(&r)?);
                range.lower.push(r);
            }
            _ => {
                range.lower.push(negate(&r)?);
                range.upper.push(r);
            }
        }
    }
    range.lower.sort();
    range.upper.sort();
    range.guard.eqs.sort();
    range.guard.ineqs.sort();
    Ok(Some(range))
}

/// The parameter context: the rows on the parameters that hold wherever some statement of
/// `stmts` has an instance (the simple hull of the union of their parameter domains), without
/// redundant rows. Outside it no statement has an instance.
pub(super) fn parameter_context(stmts: &[Instances], np: usize) -> Result<Conj, Error> {
    let mut cands: Vec<Row> = Vec::new();
    for inst in stmts {
        let sh = shadow(&inst.rel, np)?;
        let mut c = sh.conj;
        if !sh.exact && is_feasible(&inst.rel)? {
            for r in c.ineqs.iter_mut() {
                tighten(&inst.rel, r)?;
            }
        }
        let mut rows = c.ineqs;
        for e in &c.eqs {
            rows.push(e.clone());
            rows.push(negate(e)?);
        }
        for r in rows {
            if !cands.contains(&r) {
                cands.push(r);
            }
        }
    }
    let mut valid = Vec::new();
    for r in cands {
        let mut all = true;
        for inst in stmts {
            if !implied(&inst.rel, &r)? {
                all = false;
                break;
            }
        }
        if all {
            valid.push(r);
        }
    }
    let (eqs, ineqs) = drop_redundant(&Conj::universe(np), &[], Vec::new(), valid)?;
    let mut ctx = Conj { n: np, eqs, ineqs };
    ctx.normalize()?;
    Ok(ctx)
}
