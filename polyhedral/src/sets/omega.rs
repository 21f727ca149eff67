//! Exact integer elimination: Pugh's Omega test.
//!
//! Two entry points work on a [`Conj`] whose variables are all integers:
//!
//! - [`is_feasible`] decides whether the conjunction has an integer solution;
//! - [`project`] eliminates every variable from index `keep` on and returns a union of
//!   conjunctions over the first `keep` variables plus *stride locals*: each extra variable
//!   occurs in exactly one equality, with no other extra variable, and in no inequality. So a
//!   stride local `σ` stands for a congruence `e(x) ≡ 0 (mod a)` written `e(x) + a·σ = 0`, and its
//!   value is a function of the kept variables. The union is exactly the integer projection.
//!
//! Equalities are solved first (unit coefficients by substitution, others with Pugh's
//! symmetric-modulo reduction, which introduces a fresh variable and shrinks coefficients). A
//! variable bounded only by inequalities is removed by Fourier–Motzkin when that is exact (all
//! lower or all upper coefficients are 1, or one side is missing); otherwise by the dark shadow
//! plus the splinters, whose union is exact. No step rounds anything away, so both answers are
//! exact over the integers.
//!
//! The number of splinters grows with the coefficients (about `a` conjunctions for a lower
//! bound `a·q ≥ L`), which is harmless for the small coefficients of loop nests but hopeless
//! for coefficients like `2^40`. When one elimination would split into more than
//! [`SPLINTER_LIMIT`] pieces, feasibility asks the exact ILP solver ([`crate::ilp`]: simplex
//! and branch and bound) instead, and projection keeps only the splinters that have points,
//! found by exact range queries. Only if branch and bound runs out of nodes (possible for
//! unbounded sets) are the splinters walked one by one; every route is exact. Feasibility
//! also hands a system to the ILP solver when Fourier–Motzkin would grow it past
//! [`ROW_LIMIT`] inequalities, which happens with several congruence locals at once.
//!
//! Both entry points take `i64` rows and widen internally (see [`super::int`]): the generic
//! [`feasible`] and [`project_in`] are what the rest of the library calls on whatever integer
//! type its operation runs on.

use super::bounds::range_of_first;
use super::conj::{combine, negate, Conj, Row};
use super::int::{widening, Int, Overflow};
use super::Error;

/// Symmetric remainder: `a - m·floor(a/m + 1/2)`, in `(-m/2, m/2]`.
fn mod_hat<T: Int>(a: &T, m: &T) -> Result<T, Overflow> {
    let r = a.rem_floor(m);
    if r.add(&r)? > *m {
        r.sub(m)
    } else {
        Ok(r)
    }
}

/// Replaces variable `k` by the affine expression `s` (with `s[1 + k] == 0`) in every row.
fn substitute<T: Int>(c: &mut Conj<T>, k: usize, s: &[T]) -> Result<(), Overflow> {
    for r in c.eqs.iter_mut().chain(c.ineqs.iter_mut()) {
        let f = r[1 + k].clone();
        if !f.is_zero() {
            for (x, y) in r.iter_mut().zip(s) {
                if !y.is_zero() {
                    *x = x.add(&f.mul(y)?)?;
                }
            }
            r[1 + k] = T::zero();
        }
    }
    Ok(())
}

/// Whether equality `e` is a finished stride: one variable `q ≥ keep` with `|coef| > 1` that
/// occurs nowhere else.
fn is_stride<T: Int>(c: &Conj<T>, e: usize, keep: usize) -> bool {
    let row = &c.eqs[e];
    let mut elim = (keep..c.n).filter(|&v| !row[1 + v].is_zero());
    let Some(q) = elim.next() else { return false };
    if elim.next().is_some() {
        return false;
    }
    c.eqs
        .iter()
        .enumerate()
        .all(|(i, r)| i == e || r[1 + q].is_zero())
        && c.ineqs.iter().all(|r| r[1 + q].is_zero())
}

/// Uses equality `e`, whose coefficient of `v` is ±1, to substitute `v` away; the equality is
/// removed.
fn eliminate_unit<T: Int>(c: &mut Conj<T>, e: usize, v: usize) -> Result<(), Overflow> {
    let mut s = c.eqs.remove(e);
    // x_v = -(row without v) / coef, coef = ±1.
    if s[1 + v].is_one() {
        s = negate(&s)?;
    }
    s[1 + v] = T::zero();
    substitute(c, v, &s)
}

/// Removes eliminable variables (index `≥ keep`) from equalities until every equality left
/// either has no eliminable variable or is a finished stride. Returns `false` on infeasibility.
fn solve_equalities<T: Int>(c: &mut Conj<T>, keep: usize) -> Result<bool, Overflow> {
    loop {
        if !c.normalize()? {
            return Ok(false);
        }
        // Unit-coefficient substitutions never need normalised rows: do them all before
        // normalising again.
        let mut substituted = false;
        while let Some((e, v)) = c
            .eqs
            .iter()
            .enumerate()
            .find_map(|(e, row)| (keep..c.n).find(|&v| row[1 + v].is_unit()).map(|v| (e, v)))
        {
            eliminate_unit(c, e, v)?;
            substituted = true;
        }
        if substituted {
            continue;
        }
        let Some(e) = (0..c.eqs.len())
            .find(|&e| (keep..c.n).any(|v| !c.eqs[e][1 + v].is_zero()) && !is_stride(c, e, keep))
        else {
            return Ok(true);
        };
        let row = c.eqs[e].clone();
        let elim: Vec<usize> = (keep..c.n).filter(|&v| !row[1 + v].is_zero()).collect();
        if elim.len() == 1 {
            // Only one eliminable variable, but it occurs elsewhere: q = -e/a exactly, so
            // scale every other row to cancel q; the equality becomes a stride.
            let q = elim[0];
            let a = &row[1 + q];
            let aa = a.abs()?;
            let cancel = |r: &mut Row<T>| -> Result<(), Overflow> {
                if !r[1 + q].is_zero() {
                    let b = r[1 + q].clone();
                    let f = if a.is_neg() { b } else { b.neg()? };
                    *r = combine(r, &aa, &row, &f)?;
                }
                Ok(())
            };
            for (i, r) in c.eqs.iter_mut().enumerate() {
                if i != e {
                    cancel(r)?;
                }
            }
            for r in c.ineqs.iter_mut() {
                cancel(r)?;
            }
            continue;
        }
        // Symmetric-modulo step on the eliminable variable with the smallest coefficient.
        let mut k = elim[0];
        for &v in &elim[1..] {
            if row[1 + v].abs()? < row[1 + k].abs()? {
                k = v;
            }
        }
        let ak = row[1 + k].clone();
        let m = ak.abs()?.add_i(1)?;
        c.add_vars(1);
        let sigma = c.n - 1;
        // x_k = sign(a_k)·(Σ_{i≠k} mod̂(a_i, m)·x_i + mod̂(c, m) − m·σ)
        let mut s: Row<T> = vec![T::zero(); c.n + 1];
        s[0] = mod_hat(&row[0], &m)?;
        for v in 0..c.n - 1 {
            if v != k {
                s[1 + v] = mod_hat(&row[1 + v], &m)?;
            }
        }
        s[1 + sigma] = m.neg()?;
        if ak.is_neg() {
            s = negate(&s)?;
        }
        substitute(c, k, &s)?;
    }
}

/// `c` with every equality that has a unit coefficient used to substitute its variable away
/// (and dropped). The inequalities keep their positions, and `c'` has an integer solution
/// exactly when `c` has: a cheaper system to ask many feasibility questions about.
pub(crate) fn without_unit_equalities<T: Int>(c: &Conj<T>) -> Result<Conj<T>, Overflow> {
    let mut c = c.clone();
    while let Some((e, v)) = c
        .eqs
        .iter()
        .enumerate()
        .find_map(|(e, row)| (0..c.n).find(|&v| row[1 + v].is_unit()).map(|v| (e, v)))
    {
        eliminate_unit(&mut c, e, v)?;
    }
    Ok(c)
}

struct Bounds {
    lower: Vec<usize>,
    upper: Vec<usize>,
}

fn bounds_of<T: Int>(c: &Conj<T>, q: usize) -> Bounds {
    let mut b = Bounds {
        lower: Vec::new(),
        upper: Vec::new(),
    };
    for (i, r) in c.ineqs.iter().enumerate() {
        if r[1 + q].is_pos() {
            b.lower.push(i);
        } else if r[1 + q].is_neg() {
            b.upper.push(i);
        }
    }
    b
}

/// The variable to eliminate next.
struct Choice {
    q: usize,
    exact: bool,
    /// Whether an inexact elimination needs more than [`SPLINTER_LIMIT`] splinters.
    many: bool,
    bounds: Bounds,
}

/// The variable to eliminate next among `keep..n` that occur in inequalities. Exact ones win,
/// then inexact ones within [`SPLINTER_LIMIT`]; among equals, the one with the fewest new rows.
fn choose<T: Int>(c: &Conj<T>, keep: usize) -> Result<Option<Choice>, Overflow> {
    // Per variable: lower and upper bound counts and whether all of either side are unit.
    let width = c.n - keep;
    if width == 0 {
        return Ok(None);
    }
    let mut in_eq = vec![false; width];
    for r in &c.eqs {
        for (q, f) in in_eq.iter_mut().enumerate() {
            *f |= !r[1 + keep + q].is_zero();
        }
    }
    let mut lo = vec![0usize; width];
    let mut hi = vec![0usize; width];
    let mut lo_unit = vec![true; width];
    let mut hi_unit = vec![true; width];
    for r in &c.ineqs {
        for q in 0..width {
            let a = &r[1 + keep + q];
            if a.is_pos() {
                lo[q] += 1;
                lo_unit[q] &= a.is_one();
            } else if a.is_neg() {
                hi[q] += 1;
                hi_unit[q] &= a.is_unit();
            }
        }
    }
    // (variable, rank: 0 exact, 1 few splinters, 2 many, new rows)
    let mut best: Option<(usize, u8, usize)> = None;
    for q in 0..width {
        if in_eq[q] || lo[q] + hi[q] == 0 {
            continue;
        }
        let exact = lo[q] == 0 || hi[q] == 0 || lo_unit[q] || hi_unit[q];
        let cost = lo[q] * hi[q];
        if best.is_some_and(|(_, br, bc)| (br, bc) <= (u8::from(!exact), cost)) {
            continue;
        }
        let rank = if exact {
            0
        } else if splinter_ranges(c, keep + q, &bounds_of(c, keep + q))?.1 <= SPLINTER_LIMIT {
            1
        } else {
            2
        };
        if best.is_none_or(|(_, br, bc)| (rank, cost) < (br, bc)) {
            best = Some((q, rank, cost));
        }
    }
    Ok(best.map(|(q, rank, _)| Choice {
        q: keep + q,
        exact: rank == 0,
        many: rank == 2,
        bounds: bounds_of(c, keep + q),
    }))
}

/// Shortens the coefficient columns of the eliminable variables (index `≥ keep`, in no
/// equality) by unimodular changes of variables: while some column `a_i` gets shorter as
/// `a_i − k·a_j` (`k` the nearest integer to `⟨a_i, a_j⟩ / ⟨a_j, a_j⟩`), it is replaced, which
/// is the substitution `x_j ← x_j − k·x_i`. The integer points correspond one to one, so
/// feasibility and the projection onto the other variables are unchanged, and a direction in
/// which the set is thin becomes a variable with small coefficients: few splinters. (Pairwise
/// Gauss reduction; in two variables it finds the shortest lattice vector.) Returns whether
/// anything changed.
fn reduce_columns<T: Int>(c: &mut Conj<T>, keep: usize) -> Result<bool, Overflow> {
    let vars: Vec<usize> = (keep..c.n)
        .filter(|&v| c.eqs.iter().all(|r| r[1 + v].is_zero()))
        .filter(|&v| c.ineqs.iter().any(|r| !r[1 + v].is_zero()))
        .collect();
    let dot = |c: &Conj<T>, i: usize, j: usize| -> Result<T, Overflow> {
        let mut s = T::zero();
        for r in &c.ineqs {
            s = s.add(&r[1 + i].mul(&r[1 + j])?)?;
        }
        Ok(s)
    };
    let two = T::from_i64(2);
    let mut changed = false;
    loop {
        let mut progress = false;
        for &i in &vars {
            for &j in &vars {
                if i == j {
                    continue;
                }
                let nj = dot(c, j, j)?;
                if nj.is_zero() {
                    continue;
                }
                // k = round(⟨a_i, a_j⟩ / ⟨a_j, a_j⟩).
                let k = dot(c, i, j)?.mul(&two)?.add(&nj)?.div_floor(&nj.mul(&two)?);
                if k.is_zero() {
                    continue;
                }
                let ni = dot(c, i, i)?;
                let mut shorter = T::zero();
                for r in &c.ineqs {
                    let x = r[1 + i].sub(&k.mul(&r[1 + j])?)?;
                    shorter = shorter.add(&x.mul(&x)?)?;
                }
                if shorter >= ni {
                    continue;
                }
                for r in c.ineqs.iter_mut() {
                    r[1 + i] = r[1 + i].sub(&k.mul(&r[1 + j])?)?;
                }
                progress = true;
                changed = true;
            }
        }
        if !progress {
            return Ok(changed);
        }
    }
}

/// Fourier–Motzkin step on `q`; `dark` subtracts `(a-1)(b-1)` from each combined row.
fn fourier_motzkin<T: Int>(
    c: &Conj<T>,
    q: usize,
    b: &Bounds,
    dark: bool,
) -> Result<Conj<T>, Overflow> {
    let mut out = Conj {
        n: c.n,
        eqs: c.eqs.clone(),
        ineqs: Vec::with_capacity(c.ineqs.len() + b.lower.len() * b.upper.len()),
    };
    for r in &c.ineqs {
        if r[1 + q].is_zero() {
            out.ineqs.push(r.clone());
        }
    }
    for &l in &b.lower {
        let lr = &c.ineqs[l];
        let a = &lr[1 + q];
        for &u in &b.upper {
            let ur = &c.ineqs[u];
            let bb = ur[1 + q].neg()?;
            let mut row = combine(lr, &bb, ur, a)?;
            if dark {
                let slack = a.add_i(-1)?.mul(&bb.add_i(-1)?)?;
                row[0] = row[0].sub(&slack)?;
            }
            out.ineqs.push(row);
        }
    }
    Ok(out)
}

/// More inequalities than this after one elimination make feasibility ask the ILP solver:
/// Fourier–Motzkin's rows multiply with every elimination (a few congruence locals can take
/// a small system past a million rows), the simplex's do not. Systems of a few hundred rows,
/// such as those of tiled loop nests, are still answered faster by elimination.
pub(crate) const ROW_LIMIT: usize = 2048;

/// More splinters than this for one elimination take the routes described in the module docs.
pub(crate) const SPLINTER_LIMIT: u64 = 64;

/// The splinters of an inexact elimination of `q`: for every lower bound `a·q ≥ L` (row `l`),
/// the conjunctions with `a·q = L + j` for `0 ≤ j ≤ top_l = (m·a − a − m)/m`, `m` the largest
/// upper coefficient. Together with the dark shadow they cover every integer solution. The
/// same holds with the roles of lower and upper bounds exchanged (the elimination of `−q`);
/// that side is used when the lower side would need more than [`SPLINTER_LIMIT`] splinters
/// and it needs fewer. Returns the pairs `(row, top)` with `top ≥ 0` and the total count
/// (saturating).
fn splinter_ranges<T: Int>(
    c: &Conj<T>,
    q: usize,
    b: &Bounds,
) -> Result<(Vec<(usize, T)>, u64), Overflow> {
    let lower = side_splinters(c, q, &b.lower, &b.upper)?;
    if lower.1 <= SPLINTER_LIMIT {
        return Ok(lower);
    }
    let upper = side_splinters(c, q, &b.upper, &b.lower)?;
    Ok(if upper.1 < lower.1 { upper } else { lower })
}

/// The splinters held at the rows `held`, against the largest coefficient of `other`.
fn side_splinters<T: Int>(
    c: &Conj<T>,
    q: usize,
    held: &[usize],
    other: &[usize],
) -> Result<(Vec<(usize, T)>, u64), Overflow> {
    let mut m = T::one();
    for &u in other {
        let x = c.ineqs[u][1 + q].abs()?;
        if x > m {
            m = x;
        }
    }
    let mut out = Vec::new();
    let mut count: u64 = 0;
    for &l in held {
        let a = c.ineqs[l][1 + q].abs()?;
        let a = &a;
        let top = m.mul(a)?.sub(a)?.sub(&m)?.div_floor(&m);
        if top.is_neg() {
            continue;
        }
        let n = top
            .to_i64()
            .map_or(u64::MAX, |t| t as u64)
            .saturating_add(1);
        count = count.saturating_add(n);
        out.push((l, top));
    }
    Ok((out, count))
}

/// Splinter `j` of lower bound `l`: `c` with row `l` held at `j`.
fn splinter<T: Int>(c: &Conj<T>, l: usize, j: &T) -> Result<Conj<T>, Overflow> {
    let mut s = c.clone();
    let mut e = c.ineqs[l].clone();
    e[0] = e[0].sub(j)?;
    s.eqs.push(e);
    Ok(s)
}

/// The values `j` in `0..=top` that row `l` takes at integer points of `c`, smallest first:
/// the splinters of `l` that are not empty. Each next value is a lexicographic minimum, asked
/// of the ILP solver (or, if branch and bound runs out of nodes, found by exact range search).
fn attained<T: Int>(c: &Conj<T>, l: usize, top: &T) -> Result<Vec<T>, Overflow> {
    // Variable 0 of `w` is the row's value; the others are `c`'s.
    let map: Vec<usize> = (0..c.n).map(|v| v + 1).collect();
    let mut w = c.remap(c.n + 1, &map);
    let mut def = vec![T::zero(); c.n + 2];
    def[0] = c.ineqs[l][0].clone();
    def[2..].clone_from_slice(&c.ineqs[l][1..]);
    def[1] = T::from_i64(-1);
    w.eqs.push(def);
    let mut upper = vec![T::zero(); c.n + 2];
    upper[0] = top.clone();
    upper[1] = T::from_i64(-1);
    w.ineqs.push(upper);
    let mut out = Vec::new();
    let mut from = T::zero();
    while from <= *top {
        let mut t = w.clone();
        let mut lower = vec![T::zero(); c.n + 2];
        lower[0] = from.neg()?;
        lower[1] = T::one();
        t.ineqs.push(lower);
        let next = match ilp_lexmin_first(&t) {
            Some(j) => j,
            // `t` is bounded in variable 0 from both sides, so a non-empty range has a minimum.
            None => range_of_first(&t)?.and_then(|r| r.lo),
        };
        let Some(j) = next else { break };
        from = j.add_i(1)?;
        out.push(j);
    }
    Ok(out)
}

/// The ILP solver's smallest value of variable 0 over the integer points of `c` (`Some(None)`
/// when there are none); `None` when branch and bound runs out of nodes or the minimum is not
/// bounded.
fn ilp_lexmin_first<T: Int>(c: &Conj<T>) -> Option<Option<T>> {
    let p = ilp_problem(c)?;
    match p.lexmin().ok()? {
        crate::ilp::LexMin::Empty => Some(None),
        crate::ilp::LexMin::Unbounded => None,
        crate::ilp::LexMin::Point(x) => {
            let v = x.first()?;
            // Integer variables of an integer solution are integers.
            v.is_integer()
                .then(|| T::from_big(&v.to_integer()).ok())
                .flatten()
                .map(Some)
        }
    }
}

/// Branch-and-bound nodes the ILP solver may explore for the Omega test. Every question it
/// is asked here has an exact answer by elimination as well, and a depth-first search that
/// has not settled after this many nodes is usually walking an unbounded direction (sets of
/// tiled loop nests are unbounded in their parameters), where it would not settle at all.
const ILP_NODES: usize = 256;

fn ilp_problem<T: Int>(c: &Conj<T>) -> Option<crate::ilp::Problem> {
    let mut p = crate::ilp::Problem::new(c.n);
    p.set_node_limit(ILP_NODES);
    for r in &c.ineqs {
        p.add_row(r, true).ok()?;
    }
    for r in &c.eqs {
        p.add_row(r, false).ok()?;
    }
    Some(p)
}

/// The ILP solver's answer to whether `c` has an integer point; `None` when branch and bound
/// runs out of nodes.
fn ilp_feasible<T: Int>(c: &Conj<T>) -> Option<bool> {
    ilp_problem(c)?.is_empty().ok().map(|empty| !empty)
}

/// Whether every pair of bounds on `q` leaves room for an integer whatever the other
/// variables are: each pair `a·q ≥ L`, `b·q ≤ U` has `a·U − b·L` constant and at least
/// `(a−1)(b−1)`. Then the dark shadow is the whole projection and no splinter is needed. This
/// is the case of the two rows that define an integer division.
fn dark_covers_all<T: Int>(c: &Conj<T>, q: usize, b: &Bounds) -> Result<bool, Overflow> {
    for &l in &b.lower {
        for &u in &b.upper {
            let (lr, ur) = (&c.ineqs[l], &c.ineqs[u]);
            let (a, bb) = (&lr[1 + q], ur[1 + q].neg()?);
            for i in 1..lr.len() {
                if !bb.mul(&lr[i])?.add(&a.mul(&ur[i])?)?.is_zero() {
                    return Ok(false);
                }
            }
            let gap = bb.mul(&lr[0])?.add(&a.mul(&ur[0])?)?;
            if gap < a.add_i(-1)?.mul(&bb.add_i(-1)?)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Whether `c` has an integer solution.
pub(crate) fn is_feasible(c: &Conj) -> Result<bool, Error> {
    widening!(T => Ok(feasible::<T>(&c.cast::<T>())?))
}

/// Whether `c` has an integer solution, on integer type `T`.
///
/// The Omega test answers unless one of its eliminations would split into more than
/// [`SPLINTER_LIMIT`] pieces; then the ILP solver answers for `c` itself, whose variables
/// (parameters, dimensions, then locals) are the ones worth branching on. Only if branch and
/// bound runs out of nodes does the Omega test go on through every splinter.
pub(crate) fn feasible<T: Int>(c: &Conj<T>) -> Result<bool, Overflow> {
    if let Some(answer) = omega_feasible(c.clone(), true)? {
        return Ok(answer);
    }
    if let Some(answer) = ilp_feasible(c) {
        return Ok(answer);
    }
    // Without a splinter limit the Omega test always answers.
    Ok(omega_feasible(c.clone(), false)?.unwrap_or(false))
}

/// The Omega test's answer; `None` when `limited` and an elimination would split into more
/// than [`SPLINTER_LIMIT`] pieces.
fn omega_feasible<T: Int>(mut c: Conj<T>, limited: bool) -> Result<Option<bool>, Overflow> {
    loop {
        if !solve_equalities(&mut c, 0)? {
            return Ok(Some(false));
        }
        let Some(Choice {
            q,
            exact,
            many,
            bounds: b,
        }) = choose(&c, 0)?
        else {
            // No variable left in any row: normalisation has checked the constants.
            return Ok(Some(true));
        };
        if many && reduce_columns(&mut c, 0)? {
            continue;
        }
        if limited && c.ineqs.len() + b.lower.len() * b.upper.len() > ROW_LIMIT {
            return Ok(None);
        }
        if exact {
            c = fourier_motzkin(&c, q, &b, false)?;
            continue;
        }
        if dark_covers_all(&c, q, &b)? {
            c = fourier_motzkin(&c, q, &b, true)?;
            continue;
        }
        let real = fourier_motzkin(&c, q, &b, false)?;
        match omega_feasible(real, limited)? {
            Some(false) => return Ok(Some(false)),
            Some(true) => {}
            None => return Ok(None),
        }
        let (ranges, count) = splinter_ranges(&c, q, &b)?;
        if limited && count > SPLINTER_LIMIT {
            return Ok(None);
        }
        let dark = fourier_motzkin(&c, q, &b, true)?;
        match omega_feasible(dark, limited)? {
            Some(true) => return Ok(Some(true)),
            Some(false) => {}
            None => return Ok(None),
        }
        for (l, top) in ranges {
            let mut j = T::zero();
            while j <= top {
                match omega_feasible(splinter(&c, l, &j)?, limited)? {
                    Some(true) => return Ok(Some(true)),
                    Some(false) => {}
                    None => return Ok(None),
                }
                j = j.add_i(1)?;
            }
        }
        return Ok(Some(false));
    }
}

/// The integer projection of `c` onto its first `keep` variables, as a union of conjunctions
/// in stride form (see the module docs). Infeasible pieces are left out. A piece whose rows do
/// not fit in `i64` is [`Error::TooLarge`].
pub(crate) fn project(c: &Conj, keep: usize) -> Result<Vec<Conj>, Error> {
    widening!(T => {
        let pieces = project_in::<T>(&c.cast::<T>(), keep)?;
        pieces
            .into_iter()
            .map(super::rel::narrow_conj)
            .filter_map(|p: Result<Option<Conj>, super::int::Fail>| p.transpose())
            .collect()
    })
}

/// [`project`] on integer type `T`.
pub(crate) fn project_in<T: Int>(c: &Conj<T>, keep: usize) -> Result<Vec<Conj<T>>, Overflow> {
    let mut out = Vec::new();
    project_into(c.clone(), keep, &mut out)?;
    Ok(out)
}

fn project_into<T: Int>(
    mut c: Conj<T>,
    keep: usize,
    out: &mut Vec<Conj<T>>,
) -> Result<(), Overflow> {
    loop {
        if !solve_equalities(&mut c, keep)? {
            return Ok(());
        }
        let Some(Choice {
            q,
            exact,
            many,
            bounds: b,
        }) = choose(&c, keep)?
        else {
            break;
        };
        if many && reduce_columns(&mut c, keep)? {
            continue;
        }
        if exact {
            c = fourier_motzkin(&c, q, &b, false)?;
            continue;
        }
        let dark = fourier_motzkin(&c, q, &b, true)?;
        if dark_covers_all(&c, q, &b)? {
            c = dark;
            continue;
        }
        project_into(dark, keep, out)?;
        let (ranges, count) = splinter_ranges(&c, q, &b)?;
        for (l, top) in ranges {
            if count > SPLINTER_LIMIT {
                for j in attained(&c, l, &top)? {
                    project_into(splinter(&c, l, &j)?, keep, out)?;
                }
            } else {
                let mut j = T::zero();
                while j <= top {
                    project_into(splinter(&c, l, &j)?, keep, out)?;
                    j = j.add_i(1)?;
                }
            }
        }
        return Ok(());
    }
    // Only stride locals remain among the eliminated variables; the congruences may still
    // be unsolvable together with the kept constraints, which feasibility decides.
    let used: Vec<bool> = (0..c.n).map(|v| v < keep || c.uses(v)).collect();
    let c = c.drop_vars(&|v| !used[v]);
    if feasible(&c)? {
        out.push(c);
    }
    Ok(())
}

/// Lower and upper bound, `None` where unbounded.
pub(crate) type Interval<T> = (Option<T>, Option<T>);

/// Rational bounds on variable 0 (rounded inward to integers, which is valid because it is an
/// integer variable): every other variable eliminated by real Fourier–Motzkin. `None` when
/// the rational relaxation is already infeasible.
pub(crate) fn real_bounds_first<T: Int>(c: &Conj<T>) -> Result<Option<Interval<T>>, Overflow> {
    let mut c = c.clone();
    if !c.normalize()? {
        return Ok(None);
    }
    // Bounds written directly on x0 are valid starting points and spare the elimination.
    let only_x0 = |r: &Row<T>| r[2..].iter().all(Int::is_zero) && !r[1].is_zero();
    let direct = first_var_bounds(&Conj {
        n: c.n,
        eqs: c.eqs.iter().filter(|r| only_x0(r)).cloned().collect(),
        ineqs: c.ineqs.iter().filter(|r| only_x0(r)).cloned().collect(),
    })?;
    if let Some((Some(l), Some(h))) = direct {
        return Ok(if l > h {
            None
        } else {
            Some((Some(l), Some(h)))
        });
    }
    loop {
        if !c.normalize()? {
            return Ok(None);
        }
        if let Some((e, v)) = c
            .eqs
            .iter()
            .enumerate()
            .find_map(|(e, r)| (1..c.n).find(|&v| !r[1 + v].is_zero()).map(|v| (e, v)))
        {
            let row = c.eqs.remove(e);
            let a = &row[1 + v];
            let aa = a.abs()?;
            for r in c.eqs.iter_mut().chain(c.ineqs.iter_mut()) {
                if !r[1 + v].is_zero() {
                    let b = r[1 + v].clone();
                    let f = if a.is_neg() { b } else { b.neg()? };
                    *r = combine(r, &aa, &row, &f)?;
                }
            }
            continue;
        }
        // Greedy order: the variable whose elimination adds the fewest rows.
        let best = (1..c.n)
            .map(|v| (v, bounds_of(&c, v)))
            .filter(|(_, b)| !b.lower.is_empty() || !b.upper.is_empty())
            .min_by_key(|(_, b)| {
                (b.lower.len() * b.upper.len()) as i64 - (b.lower.len() + b.upper.len()) as i64
            });
        let Some((v, b)) = best else { break };
        c = fourier_motzkin(&c, v, &b, false)?;
    }
    first_var_bounds(&c)
}

/// Bounds on x0 from rows that mention only x0; `None` if they contradict.
fn first_var_bounds<T: Int>(c: &Conj<T>) -> Result<Option<Interval<T>>, Overflow> {
    let (mut lo, mut hi): (Option<T>, Option<T>) = (None, None);
    let mut tighten = |l: Option<T>, h: Option<T>| {
        if let Some(l) = l {
            if lo.as_ref().is_none_or(|x| l > *x) {
                lo = Some(l);
            }
        }
        if let Some(h) = h {
            if hi.as_ref().is_none_or(|x| h < *x) {
                hi = Some(h);
            }
        }
    };
    for r in &c.eqs {
        if r[1].is_zero() {
            continue;
        }
        // a·x0 + k = 0: x0 = −k/a, bounded outward by floor(−k/|a|)·sign(a) ∓ 1; only a
        // valid bound is needed here.
        let (a, k) = (&r[1], &r[0]);
        let q = k.neg()?.div_floor(&a.abs()?);
        let q = if a.is_neg() { q.neg()? } else { q };
        tighten(Some(q.add_i(-1)?), Some(q.add_i(1)?));
    }
    for r in &c.ineqs {
        let a = &r[1];
        if a.is_pos() {
            // a·x0 ≥ −k: x0 ≥ ceil(−k/a) = −floor(k/a).
            tighten(Some(r[0].div_floor(a).neg()?), None);
        } else if a.is_neg() {
            tighten(None, Some(r[0].div_floor(&a.neg()?)));
        }
    }
    if let (Some(l), Some(h)) = (&lo, &hi) {
        if l > h {
            return Ok(None);
        }
    }
    Ok(Some((lo, hi)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigInt;

    const B: i64 = 1 << 40;

    /// `{ (x, y) : 1 ≤ (B+1)·x − (B−1)·y ≤ B, 0 ≤ x, y ≤ 3 }` and a variant that is empty.
    fn big(lo: i64, hi: i64) -> Conj {
        let (a, b) = (B + 1, B - 1);
        Conj {
            n: 2,
            eqs: Vec::new(),
            ineqs: vec![
                vec![-lo, a, -b],
                vec![hi, -a, b],
                vec![0, 1, 0],
                vec![3, -1, 0],
                vec![0, 0, 1],
                vec![3, 0, -1],
            ],
        }
    }

    fn brute(lo: i64, hi: i64) -> Vec<(i64, i64)> {
        let (a, b) = ((B + 1) as i128, (B - 1) as i128);
        let mut out = Vec::new();
        for x in 0..=3i64 {
            for y in 0..=3i64 {
                let v = a * x as i128 - b * y as i128;
                if lo as i128 <= v && v <= hi as i128 {
                    out.push((x, y));
                }
            }
        }
        out
    }

    #[test]
    fn elimination_overflowing_i64_is_answered_on_wider_integers() {
        // (B+1)·x − (B−1)·y = B·(x − y) + x + y: between 1 and B exactly when x = y ≥ 1
        // (x + y ≤ 6 < B) or x = y + 1 (B + 2y + 1 > B, never); so the points are (1,1)…(3,3).
        let c = big(1, B);
        assert_eq!(brute(1, B), [(1, 1), (2, 2), (3, 3)]);
        // Eliminating y multiplies two coefficients near 2^40: beyond i64.
        assert_eq!(feasible::<i64>(&c), Err(Overflow));
        assert_eq!(feasible::<i128>(&c.cast()), Ok(true));
        assert_eq!(feasible::<BigInt>(&c.cast()), Ok(true));
        assert_eq!(is_feasible(&c), Ok(true));
        // Between 7 and B − 1 nothing fits: x = y gives 2x ≤ 6.
        let e = big(7, B - 1);
        assert!(brute(7, B - 1).is_empty());
        assert_eq!(is_feasible(&e), Ok(false));
    }

    #[test]
    fn projection_overflowing_i64_is_exact_and_fits_again() {
        // Projecting y out of the first set leaves 1 ≤ x ≤ 3.
        let pieces = project(&big(1, B), 1).unwrap();
        let mut xs: Vec<i64> = (-2..=6)
            .filter(|&x| {
                pieces
                    .iter()
                    .any(|p| is_feasible(&p.fix(0, &x).unwrap()).unwrap())
            })
            .collect();
        xs.dedup();
        assert_eq!(xs, [1, 2, 3]);
    }
}
