//! An exact integer linear programming solver: lexicographic minima and emptiness of the integer
//! points of a polyhedron `{ x : A x + b ≥ 0, C x + d = 0 }`.
//!
//! The rational relaxation is solved by a two-phase primal simplex on a fraction-free tableau
//! (every row holds integers over one positive common denominator, divided by its gcd after each
//! pivot) with Bland's rule, so it never cycles. A lexicographic minimum is found one objective
//! at a time: after minimising `x_k`, every non-basic column with a positive reduced cost is
//! fixed at zero, which confines the next objective to the optimal face. Integrality comes from
//! a depth-first branch and bound ordered lexicographically: a node whose relaxed lexmin is not
//! smaller than the best integer point so far cannot contain a smaller one.
//!
//! Arithmetic is exact. The tableau is generic over its integer type (the [`Int`] of the
//! integer-set library): a solve starts on checked `i64`, restarts on `i128` when a value
//! overflows, and on big integers after that, so the answer never depends on the size of the
//! numbers. Constraint rows are stored as `i64` unless they need more (the integer-set library
//! asks about rows of any width), and branching bounds are big integers.
//!
//! Variables may be marked rational (not required to be integral); they take part in the
//! lexicographic order like the others but are never branched on. This is what Farkas
//! multipliers need.
//!
//! Invariants: constraint rows have `1 + n` entries, entry 0 the constant; a returned point
//! satisfies every constraint exactly and its integer variables are integral.

use crate::sets::int::{Int, Overflow};
use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, ToPrimitive, Zero};
use std::cmp::Ordering;

/// What can go wrong when solving.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A constraint row has the wrong number of entries.
    #[error("constraint row has {got} entries, expected {expected}")]
    RowLength { got: usize, expected: usize },
    /// Branch and bound explored its node limit without settling the answer (only possible
    /// when the integer variables are unbounded).
    #[error("branch and bound exceeded {0} nodes")]
    NodeLimit(usize),
}

/// The answer to a lexicographic minimisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexMin {
    /// No point satisfies the constraints.
    Empty,
    /// The rational relaxation has no lexicographic minimum (some variable decreases without
    /// bound on the optimal face of the variables before it). When the problem has integer
    /// points, its integer lexmin does not exist either.
    Unbounded,
    /// The lexicographically smallest point.
    Point(Vec<BigRational>),
}

impl LexMin {
    /// The point as `i64`s, when there is one and every coordinate is an integer that fits.
    pub fn integer_point(&self) -> Option<Vec<i64>> {
        match self {
            LexMin::Point(p) => p
                .iter()
                .map(|v| {
                    if v.is_integer() {
                        ToPrimitive::to_i64(&v.to_integer())
                    } else {
                        None
                    }
                })
                .collect(),
            _ => None,
        }
    }
}

/// One constraint row: `i64` entries where they fit, big integers otherwise.
#[derive(Clone, Debug)]
enum Row {
    Narrow(Vec<i64>),
    Wide(Vec<BigInt>),
}

impl Row {
    fn of<T: Int>(r: &[T]) -> Row {
        match r.iter().map(Int::to_i64).collect::<Option<Vec<i64>>>() {
            Some(v) => Row::Narrow(v),
            None => Row::Wide(r.iter().map(Int::to_big).collect()),
        }
    }

    /// The row over `T`; `Overflow` when an entry does not fit.
    fn entries<T: Int>(&self) -> Result<Vec<T>, Overflow> {
        match self {
            Row::Narrow(v) => Ok(v.iter().map(|&x| T::from_i64(x)).collect()),
            Row::Wide(v) => v.iter().map(T::from_big).collect(),
        }
    }

    /// How many variables have a non-zero coefficient.
    fn variables(&self) -> usize {
        match self {
            Row::Narrow(r) => r[1..].iter().filter(|a| **a != 0).count(),
            Row::Wide(r) => r[1..].iter().filter(|a| !Zero::is_zero(*a)).count(),
        }
    }

    /// Whether the row's constant is divisible by its only non-zero coefficient `a > 0` on
    /// variable `v`: then `a·x_v + b ≥ 0` is the integral lower bound `x_v ≥ −b/a`.
    fn integral_lower_bound(&self) -> Option<(usize, BigInt)> {
        match self {
            Row::Narrow(r) => {
                let mut nz = r[1..].iter().enumerate().filter(|(_, a)| **a != 0);
                let (Some((v, &a)), None) = (nz.next(), nz.next()) else {
                    return None;
                };
                // `a > 0`, so `r[0] / a` cannot overflow; its negation may not fit `i64`.
                (a > 0 && r[0] % a == 0).then(|| (v, BigInt::from(-i128::from(r[0] / a))))
            }
            Row::Wide(r) => {
                let mut nz = r[1..]
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| !Zero::is_zero(*a));
                let (Some((v, a)), None) = (nz.next(), nz.next()) else {
                    return None;
                };
                (a.sign() == num_bigint::Sign::Plus && Zero::is_zero(&(&r[0] % a)))
                    .then(|| (v, -(&r[0] / a)))
            }
        }
    }
}

/// A system of affine constraints over `n` variables, integer unless marked rational.
#[derive(Clone, Debug, Default)]
pub struct Problem {
    n: usize,
    rational: Vec<bool>,
    ineqs: Vec<Row>,
    eqs: Vec<Row>,
    node_limit: usize,
}

const DEFAULT_NODE_LIMIT: usize = 5_000;

/// Inequalities past which [`Problem::solve`] generates them as they are needed rather than
/// putting all of them in the tableau (every pivot touches every row).
const GENERATED_ROWS_FROM: usize = 200;

/// A rational point as integers over one common denominator, for testing rows exactly.
struct ScaledPoint {
    den: BigInt,
    nums: Vec<BigInt>,
    narrow: Option<(i64, Vec<i64>)>,
}

impl ScaledPoint {
    fn of(point: &[BigRational]) -> ScaledPoint {
        let den = point
            .iter()
            .fold(<BigInt as One>::one(), |d, x| d.lcm(x.denom()));
        let nums: Vec<BigInt> = point
            .iter()
            .map(|x| x.numer() * (&den / x.denom()))
            .collect();
        let narrow = ToPrimitive::to_i64(&den).zip(
            nums.iter()
                .map(ToPrimitive::to_i64)
                .collect::<Option<Vec<i64>>>(),
        );
        ScaledPoint { den, nums, narrow }
    }

    /// Whether `row[0] + Σ row[1 + v]·x_v ≥ 0` holds at the point.
    fn satisfies(&self, row: &Row) -> bool {
        if let (Row::Narrow(r), Some((den, nums))) = (row, &self.narrow) {
            let sum = r[1..]
                .iter()
                .zip(nums)
                .try_fold(i128::from(r[0]) * i128::from(*den), |acc, (&a, &x)| {
                    acc.checked_add(i128::from(a) * i128::from(x))
                });
            if let Some(sum) = sum {
                return sum >= 0;
            }
        }
        let r = row
            .entries::<BigInt>()
            .expect("big integers hold every entry");
        let sum = r[1..]
            .iter()
            .zip(&self.nums)
            .fold(&r[0] * &self.den, |acc, (a, x)| acc + a * x);
        sum.sign() != num_bigint::Sign::Minus
    }
}

impl Problem {
    /// A problem over `n` integer variables without constraints.
    pub fn new(n: usize) -> Problem {
        Problem {
            n,
            rational: vec![false; n],
            ineqs: Vec::new(),
            eqs: Vec::new(),
            node_limit: DEFAULT_NODE_LIMIT,
        }
    }

    pub fn n_vars(&self) -> usize {
        self.n
    }

    /// Lets variable `v` take rational values.
    pub fn set_rational(&mut self, v: usize) {
        self.rational[v] = true;
    }

    /// Bounds how many branch-and-bound nodes a solve may explore.
    pub fn set_node_limit(&mut self, limit: usize) {
        self.node_limit = limit;
    }

    /// Adds `row[0] + Σ row[1 + v]·x_v ≥ 0`.
    pub fn add_ineq(&mut self, row: &[i64]) -> Result<(), Error> {
        self.add_row(row, true)
    }

    /// Adds `row[0] + Σ row[1 + v]·x_v = 0`.
    pub fn add_eq(&mut self, row: &[i64]) -> Result<(), Error> {
        self.add_row(row, false)
    }

    /// Adds an inequality (`ineq`) or equality whose entries are of any integer type.
    pub(crate) fn add_row<T: Int>(&mut self, row: &[T], ineq: bool) -> Result<(), Error> {
        if row.len() != self.n + 1 {
            return Err(Error::RowLength {
                got: row.len(),
                expected: self.n + 1,
            });
        }
        let r = Row::of(row);
        if ineq {
            self.ineqs.push(r);
        } else {
            self.eqs.push(r);
        }
        Ok(())
    }

    /// The lexicographic minimum over the integer points (rational variables excepted).
    pub fn lexmin(&self) -> Result<LexMin, Error> {
        self.solve(true)
    }

    /// The lexicographic minimum of the rational relaxation.
    pub fn lp_lexmin(&self) -> Result<LexMin, Error> {
        Ok(relaxed(self, &[], true))
    }

    /// Whether the problem has no point with integral integer variables.
    pub fn is_empty(&self) -> Result<bool, Error> {
        Ok(matches!(self.solve(false)?, LexMin::Empty))
    }

    /// Any point with integral integer variables (a lexicographic minimum when one exists).
    pub fn find_point(&self) -> Result<Option<Vec<BigRational>>, Error> {
        match self.solve(false)? {
            LexMin::Point(p) => Ok(Some(p)),
            _ => Ok(None),
        }
    }

    /// Whether an equality over integer variables only has a constant that the gcd of its
    /// coefficients does not divide (no integer point, whatever the bounds).
    fn equality_gcd_infeasible(&self) -> bool {
        self.eqs.iter().any(|r| {
            let Ok(r) = r.entries::<BigInt>() else {
                return false;
            };
            let integral = r[1..]
                .iter()
                .enumerate()
                .all(|(v, a)| Zero::is_zero(a) || !self.rational[v]);
            let g = r[1..]
                .iter()
                .fold(<BigInt as Zero>::zero(), |g, a| Integer::gcd(&g, a));
            integral && !Zero::is_zero(&g) && !Zero::is_zero(&(&r[0] % &g))
        })
    }

    /// Solves with the inequalities generated as they are needed when there are many: the
    /// bounds of single variables first, then, round by round, every inequality the answer of
    /// the round violates. The answers agree with the whole system's: the subsystem's
    /// feasible set contains the whole one, so its empty set, its lexicographic minimum when
    /// that satisfies every inequality, and any of its points that does are the whole
    /// system's as well. A round whose relaxation is unbounded (the missing inequalities may
    /// bound it) or that exhausts its node limit falls back to the whole system.
    fn solve(&self, lex: bool) -> Result<LexMin, Error> {
        if self.ineqs.len() <= GENERATED_ROWS_FROM {
            return self.branch_and_bound(lex);
        }
        let mut active: Vec<bool> = self.ineqs.iter().map(|r| r.variables() <= 1).collect();
        loop {
            let sub = Problem {
                ineqs: self
                    .ineqs
                    .iter()
                    .zip(&active)
                    .filter(|(_, &a)| a)
                    .map(|(r, _)| r.clone())
                    .collect(),
                ..self.clone_without_ineqs()
            };
            let point = match sub.branch_and_bound(lex) {
                Ok(LexMin::Point(p)) => p,
                Ok(LexMin::Empty) => return Ok(LexMin::Empty),
                Ok(LexMin::Unbounded) | Err(Error::NodeLimit(_)) => {
                    return self.branch_and_bound(lex)
                }
                Err(e) => return Err(e),
            };
            let scaled = ScaledPoint::of(&point);
            let mut added = false;
            for (r, a) in self.ineqs.iter().zip(active.iter_mut()) {
                if !*a && !scaled.satisfies(r) {
                    *a = true;
                    added = true;
                }
            }
            if !added {
                return Ok(LexMin::Point(point));
            }
        }
    }

    /// The problem with its equalities and variables but no inequalities.
    fn clone_without_ineqs(&self) -> Problem {
        Problem {
            n: self.n,
            rational: self.rational.clone(),
            ineqs: Vec::new(),
            eqs: self.eqs.clone(),
            node_limit: self.node_limit,
        }
    }

    /// Depth-first branch and bound. With `lex`, nodes are solved for their relaxed lexmin and
    /// the best point wins; without it, any vertex will do and the first integral one is
    /// returned.
    fn branch_and_bound(&self, lex: bool) -> Result<LexMin, Error> {
        if self.equality_gcd_infeasible() {
            return Ok(LexMin::Empty);
        }
        // A node is the extra bound rows added by branching.
        let mut stack: Vec<Vec<Row>> = vec![Vec::new()];
        let mut best: Option<Vec<BigRational>> = None;
        let mut nodes = 0usize;
        while let Some(extra) = stack.pop() {
            nodes += 1;
            if nodes > self.node_limit {
                return Err(Error::NodeLimit(self.node_limit));
            }
            let point = match relaxed(self, &extra, lex) {
                LexMin::Empty => continue,
                LexMin::Unbounded => {
                    if nodes == 1 {
                        // Unboundedness of the relaxed lexmin is inherited by every node (their
                        // recession cones are contained in the root's), so only the root sees it.
                        return Ok(LexMin::Unbounded);
                    }
                    continue;
                }
                LexMin::Point(p) => p,
            };
            if let Some(b) = &best {
                if lex_cmp(&point, b) != Ordering::Less {
                    continue;
                }
            }
            let fractional = (0..self.n).find(|&v| !self.rational[v] && !point[v].is_integer());
            let Some(v) = fractional else {
                if !lex {
                    return Ok(LexMin::Point(point));
                }
                best = Some(point);
                continue;
            };
            let lo = point[v].floor().to_integer();
            let hi = &lo + <BigInt as One>::one();
            // x_v ≥ lo + 1, pushed first so that x_v ≤ lo is explored first.
            let mut up = extra.clone();
            let mut row = vec![<BigInt as Zero>::zero(); self.n + 1];
            row[0] = -hi;
            row[1 + v] = <BigInt as One>::one();
            up.push(Row::of(&row));
            stack.push(up);
            let mut down = extra;
            let mut row = vec![<BigInt as Zero>::zero(); self.n + 1];
            row[0] = lo;
            row[1 + v] = -<BigInt as One>::one();
            down.push(Row::of(&row));
            stack.push(down);
        }
        Ok(match best {
            Some(p) => LexMin::Point(p),
            None => LexMin::Empty,
        })
    }
}

fn lex_cmp(a: &[BigRational], b: &[BigRational]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.cmp(y) {
            Ordering::Equal => continue,
            o => return o,
        }
    }
    Ordering::Equal
}

/// Solves the relaxation with the widest integer type needed.
fn relaxed(p: &Problem, extra: &[Row], lex: bool) -> LexMin {
    if let Ok(r) = Lp::<i64>::solve(p, extra, lex) {
        return r;
    }
    if let Ok(r) = Lp::<i128>::solve(p, extra, lex) {
        return r;
    }
    match Lp::<BigInt>::solve(p, extra, lex) {
        Ok(r) => r,
        // Big integers never overflow.
        Err(Overflow) => unreachable!("big-integer arithmetic cannot overflow"),
    }
}

/// How a problem variable maps to tableau columns (by column id, see [`Lp::ids`]):
/// `x = offset + col` (a variable with an integral lower bound) or `x = col⁺ − col⁻` (a free
/// variable).
#[derive(Clone)]
enum VarCols<T> {
    Shifted { col: usize, offset: T },
    Split { pos: usize, neg: usize },
}

/// Consecutive degenerate pivots after which pricing falls back to Bland's rule until the
/// objective moves again; the most negative reduced cost is chosen otherwise.
const DEGENERATE_RUN: usize = 32;

/// A tableau in standard form: `rows[r] · (z, 1)` with `z ≥ 0`, each row meaning
/// `Σ_j rows[r][j]·z_j = rows[r][rhs]` over the denominator `den[r]`, its basic column having
/// entry `den[r]`.
///
/// Columns that can no longer take a non-zero value (artificials after phase 1, columns fixed
/// at zero by an earlier lexicographic objective) are removed from the tableau, so every pivot
/// touches live columns only; `ids[j]` is the column id (its position when the tableau was
/// built) of the column now at position `j`, in increasing order.
struct Lp<T> {
    cols: usize,
    rows: Vec<Vec<T>>,
    den: Vec<T>,
    basis: Vec<usize>,
    ids: Vec<usize>,
    vars: Vec<VarCols<T>>,
}

impl<T: Int> Lp<T> {
    fn solve(p: &Problem, extra: &[Row], lex: bool) -> Result<LexMin, Overflow> {
        let n = p.n;
        // A single-variable row `a·x_v + b ≥ 0` with `a > 0` and `a | b` is an integral lower
        // bound; the largest one per variable lets the variable use one column.
        let mut lower: Vec<Option<BigInt>> = vec![None; n];
        let ineqs: Vec<&Row> = p.ineqs.iter().chain(extra).collect();
        for r in &ineqs {
            if let Some((v, lb)) = r.integral_lower_bound() {
                if lower[v].as_ref().is_none_or(|l| lb > *l) {
                    lower[v] = Some(lb);
                }
            }
        }
        let mut cols = 0;
        let vars: Vec<VarCols<T>> = lower
            .iter()
            .map(|l| {
                Ok(match l {
                    Some(offset) => {
                        cols += 1;
                        VarCols::Shifted {
                            col: cols - 1,
                            offset: T::from_big(offset)?,
                        }
                    }
                    None => {
                        cols += 2;
                        VarCols::Split {
                            pos: cols - 2,
                            neg: cols - 1,
                        }
                    }
                })
            })
            .collect::<Result<_, Overflow>>()?;
        // Rows over the structural columns: Σ a_v x_v + b {≥, =} 0 becomes
        // Σ a_v (col terms) − s = −b − Σ a_v offset_v.
        let n_struct = cols;
        let mut body: Vec<(Vec<T>, T, bool)> = Vec::new();
        let mut add_row = |r: &Row, ineq: bool| -> Result<(), Overflow> {
            let r = r.entries::<T>()?;
            let mut coeffs = vec![T::zero(); n_struct];
            let mut rhs = r[0].neg()?;
            for (v, a) in r[1..].iter().enumerate() {
                if a.is_zero() {
                    continue;
                }
                match &vars[v] {
                    VarCols::Shifted { col, offset } => {
                        coeffs[*col] = a.clone();
                        rhs = rhs.sub(&a.mul(offset)?)?;
                    }
                    VarCols::Split { pos, neg } => {
                        coeffs[*pos] = a.clone();
                        coeffs[*neg] = a.neg()?;
                    }
                }
            }
            if ineq && coeffs.iter().filter(|a| !a.is_zero()).count() == 1 {
                // A single-column row: a bound that the shift may already imply.
                // Only a shifted variable owns a column alone (a split one has two), so the
                // column is non-negative and `a·z ≥ rhs` holds whenever `a > 0 ≥ rhs`.
                let a = coeffs.iter().find(|a| !a.is_zero()).cloned();
                if a.is_some_and(|a| a.is_pos()) && !rhs.is_pos() {
                    return Ok(());
                }
            }
            body.push((coeffs, rhs, ineq));
            Ok(())
        };
        for r in &ineqs {
            add_row(r, true)?;
        }
        for r in &p.eqs {
            add_row(r, false)?;
        }
        // An inequality `Σ a z − s = rhs` with `rhs ≤ 0` is written `−Σ a z + s = −rhs`: its
        // slack starts basic and feasible. Every other row starts on an artificial column.
        let slack_basic = |ineq: bool, rhs: &T| ineq && !rhs.is_pos();
        let n_slack = body.iter().filter(|b| b.2).count();
        let n_art = body.iter().filter(|b| !slack_basic(b.2, &b.1)).count();
        let first_art = n_struct + n_slack;
        let total = first_art + n_art;
        let rhs_col = total;
        let mut rows = Vec::with_capacity(body.len());
        let mut basis = Vec::with_capacity(body.len());
        let (mut slack, mut art) = (n_struct, first_art);
        for (coeffs, rhs, ineq) in &body {
            let mut row = vec![T::zero(); total + 1];
            for (j, a) in coeffs.iter().enumerate() {
                row[j] = a.clone();
            }
            row[rhs_col] = rhs.clone();
            if *ineq {
                row[slack] = T::from_i64(-1);
            }
            if slack_basic(*ineq, rhs) || rhs.is_neg() {
                for x in row.iter_mut() {
                    *x = x.neg()?;
                }
            }
            if slack_basic(*ineq, rhs) {
                basis.push(slack);
            } else {
                row[art] = T::from_i64(1);
                basis.push(art);
                art += 1;
            }
            if *ineq {
                slack += 1;
            }
            rows.push(row);
        }
        let mut lp = Lp {
            cols: total,
            den: vec![T::from_i64(1); rows.len()],
            basis,
            rows,
            ids: (0..total).collect(),
            vars,
        };
        if n_art > 0 {
            // Phase 1: minimise the sum of the artificials.
            let mut obj = vec![T::zero(); total + 1];
            for x in obj.iter_mut().take(total).skip(first_art) {
                *x = T::from_i64(1);
            }
            let obj = lp.price(obj)?;
            let (_, obj) = lp.optimise(obj)?;
            if obj[lp.cols].signum() != 0 {
                return Ok(LexMin::Empty);
            }
            lp.drive_out_artificials(first_art)?;
            let keep: Vec<bool> = (0..lp.cols).map(|j| j < first_art).collect();
            lp.retain_columns(&keep);
        }
        if lex {
            for v in 0..n {
                let mut obj = vec![T::zero(); lp.cols + 1];
                match lp.vars[v] {
                    VarCols::Shifted { col, .. } => {
                        if let Some(j) = lp.position(col) {
                            obj[j] = T::from_i64(1);
                        }
                    }
                    VarCols::Split { pos, neg } => {
                        if let Some(j) = lp.position(pos) {
                            obj[j] = T::from_i64(1);
                        }
                        if let Some(j) = lp.position(neg) {
                            obj[j] = T::from_i64(-1);
                        }
                    }
                }
                let obj = lp.price(obj)?;
                let (bounded, obj) = lp.optimise(obj)?;
                if !bounded {
                    return Ok(LexMin::Unbounded);
                }
                // Non-basic columns with a positive reduced cost are zero on the optimal face:
                // they leave the tableau, which confines later objectives to that face.
                let mut keep = vec![true; lp.cols];
                for (j, k) in keep.iter_mut().enumerate() {
                    *k = obj[j].signum() <= 0;
                }
                for &b in &lp.basis {
                    keep[b] = true;
                }
                lp.retain_columns(&keep);
            }
        }
        Ok(LexMin::Point(lp.point()))
    }

    /// The current position of the column with id `id`, if it is still in the tableau.
    fn position(&self, id: usize) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    /// Keeps the columns `j` with `keep[j]` (every basic column among them), in order.
    fn retain_columns(&mut self, keep: &[bool]) {
        if keep.iter().all(|&k| k) {
            return;
        }
        let mut new_pos = vec![usize::MAX; self.cols];
        let mut next = 0;
        for (j, &k) in keep.iter().enumerate() {
            if k {
                new_pos[j] = next;
                next += 1;
            }
        }
        // The kept columns and the right-hand side, in order; each moves left or stays.
        let kept: Vec<usize> = (0..self.cols)
            .filter(|&j| keep[j])
            .chain([self.cols])
            .collect();
        for row in self.rows.iter_mut() {
            for (w, &j) in kept.iter().enumerate() {
                row.swap(w, j);
            }
            row.truncate(kept.len());
        }
        for b in self.basis.iter_mut() {
            *b = new_pos[*b];
        }
        let mut k = keep.iter();
        self.ids.retain(|_| *k.next().unwrap_or(&false));
        self.cols = next;
    }

    /// Reduced costs of an objective row for the current basis.
    fn price(&self, mut obj: Vec<T>) -> Result<Vec<T>, Overflow> {
        let mut den = T::from_i64(1);
        for (r, &b) in self.basis.iter().enumerate() {
            if obj[b].signum() == 0 {
                continue;
            }
            let f = obj[b].clone();
            let dr = &self.den[r];
            for (x, y) in obj.iter_mut().zip(&self.rows[r]) {
                *x = x.mul(dr)?.sub(&f.mul(y)?)?;
            }
            den = den.mul(dr)?;
            normalise(&mut obj, Some(&mut den))?;
        }
        Ok(obj)
    }

    /// Primal simplex on the columns of the tableau; the objective row's sign is all that
    /// matters (its denominator is positive). The entering column has the most negative
    /// reduced cost, except after [`DEGENERATE_RUN`] pivots in a row that left the objective
    /// where it was: then Bland's rule (the first negative column, ties in the ratio test to
    /// the smallest basic column) until it moves, which rules out cycling. Returns whether
    /// the optimum is bounded.
    fn optimise(&mut self, mut obj: Vec<T>) -> Result<(bool, Vec<T>), Overflow> {
        let rhs = self.cols;
        let mut degenerate = 0usize;
        loop {
            let entering = if degenerate >= DEGENERATE_RUN {
                (0..self.cols).find(|&j| obj[j].signum() < 0)
            } else {
                let mut best: Option<usize> = None;
                for j in 0..self.cols {
                    if obj[j].signum() < 0 && best.is_none_or(|b| obj[j] < obj[b]) {
                        best = Some(j);
                    }
                }
                best
            };
            let Some(c) = entering else {
                return Ok((true, obj));
            };
            let mut leave: Option<usize> = None;
            for r in 0..self.rows.len() {
                if self.rows[r][c].signum() <= 0 {
                    continue;
                }
                leave = Some(match leave {
                    None => r,
                    Some(l) => {
                        // Compare rhs_r / a_rc with rhs_l / a_lc (denominators cancel).
                        let a = self.rows[r][rhs].mul(&self.rows[l][c])?;
                        let b = self.rows[l][rhs].mul(&self.rows[r][c])?;
                        match a.sub(&b)?.signum() {
                            s if s < 0 => r,
                            0 if self.basis[r] < self.basis[l] => r,
                            _ => l,
                        }
                    }
                });
            }
            let Some(r) = leave else {
                return Ok((false, obj));
            };
            if self.rows[r][rhs].is_zero() {
                degenerate += 1;
            } else {
                degenerate = 0;
            }
            self.pivot(r, c, &mut obj)?;
        }
    }

    fn pivot(&mut self, r: usize, c: usize, obj: &mut [T]) -> Result<(), Overflow> {
        let width = self.cols + 1;
        if self.rows[r][c].signum() < 0 {
            for x in self.rows[r].iter_mut() {
                *x = x.neg()?;
            }
        }
        self.den[r] = self.rows[r][c].clone();
        let pr = std::mem::take(&mut self.rows[r]);
        let p = pr[c].clone();
        // The pivot row's non-zero entries: the update of another row touches only these
        // beyond its own scaling.
        let support: Vec<usize> = (0..width).filter(|&j| !pr[j].is_zero()).collect();
        let update = |row: &mut [T], den: Option<&mut T>| -> Result<(), Overflow> {
            if row[c].signum() == 0 {
                return Ok(());
            }
            let f = row[c].clone();
            if !p.is_one() {
                for x in row.iter_mut() {
                    if !x.is_zero() {
                        *x = x.mul(&p)?;
                    }
                }
            }
            for &j in &support {
                row[j] = row[j].sub(&f.mul(&pr[j])?)?;
            }
            match den {
                Some(d) => {
                    *d = d.mul(&p)?;
                    normalise(row, Some(d))
                }
                None => normalise(row, None),
            }
        };
        for i in 0..self.rows.len() {
            if i != r {
                let (row, den) = (&mut self.rows[i], &mut self.den[i]);
                update(row, Some(den))?;
            }
        }
        // The objective row's positive denominator is irrelevant to signs; keep it scaled.
        update(obj, None)?;
        self.rows[r] = pr;
        let (row, den) = (&mut self.rows[r], &mut self.den[r]);
        normalise(row, Some(den))?;
        self.basis[r] = c;
        Ok(())
    }

    /// After phase 1 every artificial is zero; pivot the basic ones out or drop their rows
    /// (which are then linear combinations of the others).
    fn drive_out_artificials(&mut self, first_artificial: usize) -> Result<(), Overflow> {
        let mut r = 0;
        while r < self.rows.len() {
            if self.basis[r] < first_artificial {
                r += 1;
                continue;
            }
            let col = (0..first_artificial).find(|&j| self.rows[r][j].signum() != 0);
            match col {
                Some(c) => {
                    let mut dummy = vec![T::zero(); self.cols + 1];
                    self.pivot(r, c, &mut dummy)?;
                    r += 1;
                }
                None => {
                    self.rows.remove(r);
                    self.den.remove(r);
                    self.basis.remove(r);
                }
            }
        }
        Ok(())
    }

    fn point(&self) -> Vec<BigRational> {
        let n_ids = self.ids.last().map_or(0, |&l| l + 1);
        let mut z = vec![BigRational::zero(); n_ids];
        for (r, &b) in self.basis.iter().enumerate() {
            z[self.ids[b]] =
                BigRational::new(self.rows[r][self.cols].to_big(), self.den[r].to_big());
        }
        let at = |id: usize| z.get(id).cloned().unwrap_or_else(BigRational::zero);
        self.vars
            .iter()
            .map(|v| match v {
                VarCols::Shifted { col, offset } => at(*col) + BigRational::from(offset.to_big()),
                VarCols::Split { pos, neg } => at(*pos) - at(*neg),
            })
            .collect()
    }
}

/// Divides a row and its denominator (when it has one) by their common gcd.
fn normalise<T: Int>(row: &mut [T], den: Option<&mut T>) -> Result<(), Overflow> {
    let mut g = den.as_deref().cloned().unwrap_or_else(T::zero);
    for x in row.iter() {
        if g.is_one() {
            return Ok(());
        }
        if !x.is_zero() {
            g = g.gcd(x)?;
        }
    }
    if g.is_zero() || g.is_one() {
        return Ok(());
    }
    for x in row.iter_mut() {
        *x = x.div_exact(&g);
    }
    if let Some(d) = den {
        *d = d.div_exact(&g);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
