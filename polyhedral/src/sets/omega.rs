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

use super::conj::{add, combine, mul, neg, Conj, Row};
use super::Error;

/// Symmetric remainder: `a - m·floor(a/m + 1/2)`, in `(-m/2, m/2]`.
fn mod_hat(a: i64, m: i64) -> i64 {
    let r = a.rem_euclid(m);
    if 2 * r > m {
        r - m
    } else {
        r
    }
}

/// Replaces variable `k` by the affine expression `s` (with `s[1 + k] == 0`) in every row.
fn substitute(c: &mut Conj, k: usize, s: &[i64]) -> Result<(), Error> {
    for r in c.eqs.iter_mut().chain(c.ineqs.iter_mut()) {
        let f = r[1 + k];
        if f != 0 {
            for (x, y) in r.iter_mut().zip(s) {
                *x = add(*x, mul(f, *y)?)?;
            }
            r[1 + k] = 0;
        }
    }
    Ok(())
}

/// Whether equality `e` is a finished stride: one variable `q ≥ keep` with `|coef| > 1` that
/// occurs nowhere else.
fn is_stride(c: &Conj, e: usize, keep: usize) -> bool {
    let row = &c.eqs[e];
    let mut elim = (keep..c.n).filter(|&v| row[1 + v] != 0);
    let Some(q) = elim.next() else { return false };
    if elim.next().is_some() {
        return false;
    }
    c.eqs
        .iter()
        .enumerate()
        .all(|(i, r)| i == e || r[1 + q] == 0)
        && c.ineqs.iter().all(|r| r[1 + q] == 0)
}

/// Removes eliminable variables (index `≥ keep`) from equalities until every equality left
/// either has no eliminable variable or is a finished stride. Returns `false` on infeasibility.
fn solve_equalities(c: &mut Conj, keep: usize) -> Result<bool, Error> {
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
            .find_map(|(e, row)| (keep..c.n).find(|&v| row[1 + v].abs() == 1).map(|v| (e, v)))
        {
            let mut s = c.eqs.remove(e);
            // x_v = -(row without v) / coef, coef = ±1.
            if s[1 + v] == 1 {
                for x in s.iter_mut() {
                    *x = neg(*x)?;
                }
            }
            s[1 + v] = 0;
            substitute(c, v, &s)?;
            substituted = true;
        }
        if substituted {
            continue;
        }
        // Prefer an equality with a unit coefficient on an eliminable variable.
        let mut unit: Option<(usize, usize)> = None;
        let mut other: Option<usize> = None;
        for (e, row) in c.eqs.iter().enumerate() {
            let mut has = false;
            for v in keep..c.n {
                if row[1 + v] != 0 {
                    has = true;
                    if row[1 + v].abs() == 1 {
                        unit = Some((e, v));
                        break;
                    }
                }
            }
            if unit.is_some() {
                break;
            }
            if has && other.is_none() && !is_stride(c, e, keep) {
                other = Some(e);
            }
        }
        if let Some((e, v)) = unit {
            let row = c.eqs.remove(e);
            // x_v = -(row without v) / coef, coef = ±1.
            let s: Row = if row[1 + v] == 1 {
                row.iter().map(|&x| -x).collect()
            } else {
                row.clone()
            };
            let mut s = s;
            s[1 + v] = 0;
            substitute(c, v, &s)?;
            continue;
        }
        let Some(e) = other else { return Ok(true) };
        let row = c.eqs[e].clone();
        let elim: Vec<usize> = (keep..c.n).filter(|&v| row[1 + v] != 0).collect();
        if elim.len() == 1 {
            // Only one eliminable variable, but it occurs elsewhere: q = -e/a exactly, so
            // scale every other row to cancel q; the equality becomes a stride.
            let q = elim[0];
            let a = row[1 + q];
            let sa = a.signum();
            let aa = a.abs();
            for (i, r) in c.eqs.iter_mut().enumerate() {
                if i != e && r[1 + q] != 0 {
                    let b = r[1 + q];
                    *r = combine(r, aa, &row, -sa * b)?;
                }
            }
            for r in c.ineqs.iter_mut() {
                if r[1 + q] != 0 {
                    let b = r[1 + q];
                    *r = combine(r, aa, &row, -sa * b)?;
                }
            }
            continue;
        }
        // Symmetric-modulo step on the eliminable variable with the smallest coefficient.
        let k = *elim
            .iter()
            .min_by_key(|&&v| row[1 + v].abs())
            .expect("elim has at least two entries");
        let ak = row[1 + k];
        let m = add(ak.abs(), 1)?;
        c.add_vars(1);
        let sigma = c.n - 1;
        // x_k = sign(a_k)·(Σ_{i≠k} mod̂(a_i, m)·x_i + mod̂(c, m) − m·σ)
        let mut s: Row = vec![0; c.n + 1];
        s[0] = mod_hat(row[0], m);
        for v in 0..c.n - 1 {
            if v != k {
                s[1 + v] = mod_hat(row[1 + v], m);
            }
        }
        s[1 + sigma] = neg(m)?;
        if ak < 0 {
            for x in s.iter_mut() {
                *x = neg(*x)?;
            }
        }
        substitute(c, k, &s)?;
    }
}

/// `c` with every equality that has a unit coefficient used to substitute its variable away
/// (and dropped). The inequalities keep their positions, and `c'` has an integer solution
/// exactly when `c` has: a cheaper system to ask many feasibility questions about.
pub(crate) fn without_unit_equalities(c: &Conj) -> Result<Conj, Error> {
    let mut c = c.clone();
    while let Some((e, v)) = c
        .eqs
        .iter()
        .enumerate()
        .find_map(|(e, row)| (0..c.n).find(|&v| row[1 + v].abs() == 1).map(|v| (e, v)))
    {
        let mut s = c.eqs.remove(e);
        if s[1 + v] == 1 {
            for x in s.iter_mut() {
                *x = neg(*x)?;
            }
        }
        s[1 + v] = 0;
        substitute(&mut c, v, &s)?;
    }
    Ok(c)
}

struct Bounds {
    lower: Vec<usize>,
    upper: Vec<usize>,
}

fn bounds_of(c: &Conj, q: usize) -> Bounds {
    let mut b = Bounds {
        lower: Vec::new(),
        upper: Vec::new(),
    };
    for (i, r) in c.ineqs.iter().enumerate() {
        if r[1 + q] > 0 {
            b.lower.push(i);
        } else if r[1 + q] < 0 {
            b.upper.push(i);
        }
    }
    b
}

/// The variable to eliminate next among `keep..n` that occur in inequalities, with whether
/// its elimination is exact. Exact ones with the fewest new rows win.
fn choose(c: &Conj, keep: usize) -> Option<(usize, bool, Bounds)> {
    let mut best: Option<(usize, bool, Bounds, usize)> = None;
    for q in keep..c.n {
        if c.eqs.iter().any(|r| r[1 + q] != 0) {
            continue;
        }
        let b = bounds_of(c, q);
        if b.lower.is_empty() && b.upper.is_empty() {
            continue;
        }
        let exact = b.lower.is_empty()
            || b.upper.is_empty()
            || b.lower.iter().all(|&i| c.ineqs[i][1 + q] == 1)
            || b.upper.iter().all(|&i| c.ineqs[i][1 + q] == -1);
        let cost = b.lower.len() * b.upper.len();
        let better = match &best {
            None => true,
            Some((_, be, _, bc)) => (exact && !*be) || (exact == *be && cost < *bc),
        };
        if better {
            best = Some((q, exact, b, cost));
        }
    }
    best.map(|(q, e, b, _)| (q, e, b))
}

/// Fourier–Motzkin step on `q`; `dark` subtracts `(a-1)(b-1)` from each combined row.
fn fourier_motzkin(c: &Conj, q: usize, b: &Bounds, dark: bool) -> Result<Conj, Error> {
    let mut out = Conj {
        n: c.n,
        eqs: c.eqs.clone(),
        ineqs: Vec::with_capacity(c.ineqs.len() + b.lower.len() * b.upper.len()),
    };
    for r in &c.ineqs {
        if r[1 + q] == 0 {
            out.ineqs.push(r.clone());
        }
    }
    for &l in &b.lower {
        let lr = &c.ineqs[l];
        let a = lr[1 + q];
        for &u in &b.upper {
            let ur = &c.ineqs[u];
            let bb = -ur[1 + q];
            let mut row = combine(lr, bb, ur, a)?;
            if dark {
                row[0] = add(row[0], -mul(a - 1, bb - 1)?)?;
            }
            out.ineqs.push(row);
        }
    }
    Ok(out)
}

/// The splinters of an inexact elimination of `q`: for every lower bound `a·q ≥ L`, the
/// conjunctions with `a·q = L + j` for `0 ≤ j ≤ (m·a − a − m)/m`, `m` the largest upper
/// coefficient. Together with the dark shadow they cover every integer solution.
fn splinters(c: &Conj, q: usize, b: &Bounds) -> Result<Vec<Conj>, Error> {
    let m = b
        .upper
        .iter()
        .map(|&u| -c.ineqs[u][1 + q])
        .max()
        .unwrap_or(1);
    let mut out = Vec::new();
    for &l in &b.lower {
        let lr = &c.ineqs[l];
        let a = lr[1 + q];
        let top = (mul(m, a)? - a - m).div_euclid(m);
        for j in 0..=top {
            let mut s = c.clone();
            let mut e = lr.clone();
            e[0] = add(e[0], -j)?;
            s.eqs.push(e);
            out.push(s);
        }
    }
    Ok(out)
}

/// Whether every pair of bounds on `q` leaves room for an integer whatever the other
/// variables are: each pair `a·q ≥ L`, `b·q ≤ U` has `a·U − b·L` constant and at least
/// `(a−1)(b−1)`. Then the dark shadow is the whole projection and no splinter is needed. This
/// is the case of the two rows that define an integer division.
fn dark_covers_all(c: &Conj, q: usize, b: &Bounds) -> bool {
    b.lower.iter().all(|&l| {
        b.upper.iter().all(|&u| {
            let (lr, ur) = (&c.ineqs[l], &c.ineqs[u]);
            let (a, bb) = (lr[1 + q] as i128, -ur[1 + q] as i128);
            (1..lr.len()).all(|i| bb * lr[i] as i128 + a * ur[i] as i128 == 0)
                && bb * lr[0] as i128 + a * ur[0] as i128 >= (a - 1) * (bb - 1)
        })
    })
}

/// Whether `c` has an integer solution.
pub(crate) fn is_feasible(c: &Conj) -> Result<bool, Error> {
    feasible(c.clone())
}

fn feasible(mut c: Conj) -> Result<bool, Error> {
    loop {
        if !solve_equalities(&mut c, 0)? {
            return Ok(false);
        }
        let Some((q, exact, b)) = choose(&c, 0) else {
            // No variable left in any row: normalisation has checked the constants.
            return Ok(true);
        };
        if exact {
            c = fourier_motzkin(&c, q, &b, false)?;
            continue;
        }
        if dark_covers_all(&c, q, &b) {
            c = fourier_motzkin(&c, q, &b, true)?;
            continue;
        }
        let real = fourier_motzkin(&c, q, &b, false)?;
        if !feasible(real)? {
            return Ok(false);
        }
        let dark = fourier_motzkin(&c, q, &b, true)?;
        if feasible(dark)? {
            return Ok(true);
        }
        for s in splinters(&c, q, &b)? {
            if feasible(s)? {
                return Ok(true);
            }
        }
        return Ok(false);
    }
}

/// The integer projection of `c` onto its first `keep` variables, as a union of conjunctions
/// in stride form (see the module docs). Infeasible pieces are left out.
pub(crate) fn project(c: &Conj, keep: usize) -> Result<Vec<Conj>, Error> {
    let mut out = Vec::new();
    project_into(c.clone(), keep, &mut out)?;
    Ok(out)
}

fn project_into(mut c: Conj, keep: usize, out: &mut Vec<Conj>) -> Result<(), Error> {
    loop {
        if !solve_equalities(&mut c, keep)? {
            return Ok(());
        }
        let Some((q, exact, b)) = choose(&c, keep) else {
            break;
        };
        if exact {
            c = fourier_motzkin(&c, q, &b, false)?;
            continue;
        }
        let dark = fourier_motzkin(&c, q, &b, true)?;
        if dark_covers_all(&c, q, &b) {
            c = dark;
            continue;
        }
        project_into(dark, keep, out)?;
        for s in splinters(&c, q, &b)? {
            project_into(s, keep, out)?;
        }
        return Ok(());
    }
    // Only stride locals remain among the eliminated variables; check the piece is not empty
    // (strides never make a feasible kept part infeasible on their own only if the congruence
    // is solvable, which feasibility decides).
    let used: Vec<bool> = (0..c.n).map(|v| v < keep || c.uses(v)).collect();
    let c = c.drop_vars(&|v| !used[v]);
    if is_feasible(&c)? {
        out.push(c);
    }
    Ok(())
}

/// Lower and upper bound, `None` where unbounded.
pub(crate) type Interval = (Option<i64>, Option<i64>);

/// Rational bounds on variable 0 (rounded inward to integers, which is valid because it is an
/// integer variable): every other variable eliminated by real Fourier–Motzkin. `None` when
/// the rational relaxation is already infeasible.
pub(crate) fn real_bounds_first(c: &Conj) -> Result<Option<Interval>, Error> {
    let mut c = c.clone();
    if !c.normalize()? {
        return Ok(None);
    }
    // Bounds written directly on x0 are valid starting points and spare the elimination.
    let only_x0 = |r: &Row| r[2..].iter().all(|&x| x == 0) && r[1] != 0;
    let direct = first_var_bounds(&Conj {
        n: c.n,
        eqs: c.eqs.iter().filter(|r| only_x0(r)).cloned().collect(),
        ineqs: c.ineqs.iter().filter(|r| only_x0(r)).cloned().collect(),
    });
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
            .find_map(|(e, r)| (1..c.n).find(|&v| r[1 + v] != 0).map(|v| (e, v)))
        {
            let row = c.eqs.remove(e);
            let a = row[1 + v];
            let (sa, aa) = (a.signum(), a.abs());
            for r in c.eqs.iter_mut().chain(c.ineqs.iter_mut()) {
                if r[1 + v] != 0 {
                    let b = r[1 + v];
                    *r = combine(r, aa, &row, -sa * b)?;
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
    Ok(first_var_bounds(&c))
}

/// Bounds on x0 from rows that mention only x0; `None` if they contradict.
fn first_var_bounds(c: &Conj) -> Option<Interval> {
    let (mut lo, mut hi): (Option<i64>, Option<i64>) = (None, None);
    for r in &c.eqs {
        if r[1] == 0 {
            continue;
        }
        // x0 = −k / a, rounded outward: only a valid bound is needed here.
        let (a, k) = (r[1], r[0]);
        let l = (-k).div_euclid(a.abs()) * a.signum() - 1;
        let h = l + 2;
        lo = Some(lo.map_or(l, |x: i64| x.max(l)));
        hi = Some(hi.map_or(h, |x: i64| x.min(h)));
    }
    for r in &c.ineqs {
        let a = r[1];
        if a > 0 {
            // a·x0 ≥ −k
            let l = (-r[0]).div_euclid(a) + i64::from((-r[0]).rem_euclid(a) != 0);
            lo = Some(lo.map_or(l, |x| x.max(l)));
        } else if a < 0 {
            let h = r[0].div_euclid(-a);
            hi = Some(hi.map_or(h, |x| x.min(h)));
        }
    }
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            return None;
        }
    }
    Some((lo, hi))
}
