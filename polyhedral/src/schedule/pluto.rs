//! The Pluto scheduler (Bondhugula et al., CC'08 / PLDI'08) and the flat multi-dimensional
//! schedules it produces.
//!
//! A schedule gives every statement `S` one quasi-affine expression per dimension; instances
//! run in the lexicographic order of their schedule vectors. A dimension is either a *loop*
//! (a hyperplane `φ_S(i) = c_S · i + c_S0` per statement) or a *scalar* dimension (a constant
//! per statement) that distributes groups of statements. Consecutive loop dimensions form
//! *bands*; a permutable band's members can be interchanged and tiled.
//!
//! The scheduler finds hyperplanes outermost first. For each one it solves an integer program
//! over the coefficients `c_S` (iterators and constant; parameters get 0, as in Pluto's default)
//! and the bounding function `u · n + w`:
//!
//! - legality: `φ_T(j) − φ_S(i) ≥ 0` on every legality dependence not satisfied by an earlier
//!   band, linearised with the affine form of Farkas' lemma and the multipliers eliminated by
//!   Gaussian elimination and Fourier–Motzkin (an exact rational projection);
//! - bounding: `u · n + w − (φ_T(j) − φ_S(i)) ≥ 0` on those dependences and, for locality only,
//!   `u' · n + w' − (φ_T(j) − φ_S(i)) ≥ 0` on input dependences;
//! - all coefficients non-negative, iterator coefficients at most a bound;
//! - linear independence per statement: Pluto's orthogonal-subspace constraints `h · c_S ≥ 0`
//!   for the rows `h` of the projection onto the complement of the hyperplanes found so far,
//!   and `Σ h · c_S ≥ 1` (which also makes the hyperplane non-trivial);
//!
//! and takes the lexicographic minimum of `(Σu, w, Σu', w', c_S…, u, u')` (primes: the bound
//! on input dependences, a tie-breaker for locality), each statement's iterator
//! coefficients innermost first, so that ties keep the original loop order. Hyperplanes are
//! found under one dependence set until none exists or every statement has full rank: they
//! form a permutable band. The dependence pairs on which the band's distances are all zero
//! stay for the next band (exactly, as relations); the others are satisfied. When no band can
//! be found, the statements are distributed along the strongly connected components of the
//! remaining dependence graph with a scalar dimension.
//!
//! Invariants of a [`PlutoSchedule`]: every dimension has one expression per statement; a
//! scalar dimension's expressions are constants; bands cover loop dimensions only and do not
//! overlap; `coincident` is exact (no legality dependence is carried by the dimension once the
//! outer dimensions are equal), as computed by [`coincident_dims`] (exact before tiling).

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use super::expr::QuasiAffine;
pub use super::legality::{check_legality, coincident_dims, coincident_dims_among};

use num_rational::BigRational;
use num_traits::{One, ToPrimitive, Zero};

use crate::deps::Dependences;
use crate::ilp::{self, LexMin, Problem};
use crate::program::{AffineExpr, ParamId, Program, Statement, StmtId, Var};
use crate::sets::{self, Map, Tuple};

/// How eagerly statements are fused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// Distribute all strongly connected components at the outermost level.
    NoFuse,
    /// Pluto's default: first distribute components of different loop depth.
    #[default]
    SmartFuse,
    /// Distribute only when no legal hyperplane exists otherwise.
    MaxFuse,
}

impl Fusion {
    pub fn name(self) -> &'static str {
        match self {
            Fusion::NoFuse => "nofuse",
            Fusion::SmartFuse => "smartfuse",
            Fusion::MaxFuse => "maxfuse",
        }
    }

    /// Parses `nofuse`, `smartfuse` or `maxfuse`.
    pub fn from_name(s: &str) -> Option<Fusion> {
        match s {
            "nofuse" => Some(Fusion::NoFuse),
            "smartfuse" => Some(Fusion::SmartFuse),
            "maxfuse" => Some(Fusion::MaxFuse),
            _ => None,
        }
    }
}

/// Scheduler options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub fuse: Fusion,
    /// Whether input (read-after-read) dependences take part in the bounding function.
    pub input_deps: bool,
    /// Upper bound of every iterator coefficient of a hyperplane.
    pub coeff_bound: i64,
    /// Statements fused with no other, whatever the strategy: before any hyperplane, the
    /// strongly connected components of the dependence graph are distributed around each
    /// component holding one of them (as a target's matrix unit wants a contraction's band
    /// to itself). Distributing components in their topological order is always legal.
    pub alone: Vec<StmtId>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            fuse: Fusion::SmartFuse,
            input_deps: true,
            coeff_bound: 4,
            alone: Vec::new(),
        }
    }
}

/// What can go wrong while scheduling.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("schedule: {0}")]
    Sets(#[from] sets::Error),
    #[error("schedule: {0}")]
    Ilp(#[from] ilp::Error),
    /// No legal hyperplane with non-negative coefficients exists and distribution cannot help.
    #[error("no legal schedule with non-negative coefficients found for {0} (not supported yet)")]
    NoHyperplane(String),
    /// The schedule violates a dependence.
    #[error("illegal schedule: {0}")]
    Illegal(String),
    /// A dependence the scheduler cannot take yet.
    #[error("not supported yet: {0}")]
    Unsupported(String),
    #[error("schedule: {0}")]
    Invalid(String),
}

/// A schedule expression in isl's notation, with the statement's iterator names and the
/// program's parameters.
pub fn display_expr(e: &QuasiAffine, program: &Program, stmt: &Statement) -> String {
    let iter = |i: usize| stmt.iterators[i].clone();
    let param = |p: ParamId| program.param(p).name.clone();
    let text = e.display_with(&iter, &param).to_string();
    text
}

/// Whether a dimension is a loop or distributes statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DimKind {
    /// Constant per statement.
    Scalar,
    Loop,
}

/// One schedule dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleDim {
    pub kind: DimKind,
    /// One expression per statement, indexed by [`StmtId`].
    pub exprs: Vec<QuasiAffine>,
    /// No legality dependence is carried by this dimension when the outer ones are equal: a
    /// parallel loop.
    pub coincident: bool,
}

/// What a band is in the tiled structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BandKind {
    /// Found by the scheduler, not tiled.
    Plain,
    /// Tile dimensions `floor(φ_k / T_k)` (the first may be a wavefront, their sum).
    Tile,
    /// Point dimensions `φ_k` inside a tile.
    Point,
}

/// Consecutive loop dimensions `start .. start + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    pub start: usize,
    pub len: usize,
    pub permutable: bool,
    pub kind: BandKind,
}

/// A flat multi-dimensional schedule with its band structure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlutoSchedule {
    pub dims: Vec<ScheduleDim>,
    pub bands: Vec<Band>,
}

impl PlutoSchedule {
    /// The schedule vector of one statement instance.
    pub fn eval(&self, stmt: StmtId, iters: &[i64], params: &[i64]) -> Vec<i64> {
        self.dims
            .iter()
            .map(|d| d.exprs[stmt.index()].eval(iters, params))
            .collect()
    }

    /// How many of `band`'s members statement `s` moves along (those whose expression for it
    /// is not a constant).
    pub fn members_moved(&self, band: &Band, s: StmtId) -> usize {
        (band.start..band.start + band.len)
            .filter(|&d| !self.dims[d].exprs[s.index()].affine.terms().is_empty())
            .count()
    }

    /// The statements grouped by the loop nest they are in at dimension `d`: statements whose
    /// scalar dimensions before `d` have the same constants share the loops from `d` on,
    /// others are distributed apart. Groups in order of first statement.
    pub fn nests_at(&self, d: usize) -> Vec<Vec<StmtId>> {
        let n = self.dims.first().map_or(0, |x| x.exprs.len());
        let mut nests: Vec<(Vec<i64>, Vec<StmtId>)> = Vec::new();
        for s in 0..n {
            let key: Vec<i64> = self.dims[..d]
                .iter()
                .filter(|x| x.kind == DimKind::Scalar)
                .map(|x| x.exprs[s].eval(&[], &[]))
                .collect();
            let id = StmtId(s as u32);
            match nests.iter_mut().find(|(k, _)| *k == key) {
                Some((_, g)) => g.push(id),
                None => nests.push((key, vec![id])),
            }
        }
        nests.into_iter().map(|(_, g)| g).collect()
    }

    /// The schedule with a scalar dimension (zero for every statement) inserted before
    /// dimension `at`; bands from `at` on move one dimension later (a band that contains `at`
    /// past its start is left for the caller to split).
    pub fn with_scalar_dim(&self, at: usize) -> PlutoSchedule {
        let statements = self.dims.first().map_or(0, |x| x.exprs.len());
        let mut out = self.clone();
        out.dims.insert(
            at,
            ScheduleDim {
                kind: DimKind::Scalar,
                exprs: vec![QuasiAffine::constant(0); statements],
                coincident: true,
            },
        );
        for b in &mut out.bands {
            if b.start >= at {
                b.start += 1;
            }
        }
        out
    }

    /// The band that contains dimension `d`, if any.
    pub fn band_of(&self, d: usize) -> Option<&Band> {
        self.bands
            .iter()
            .find(|b| b.start <= d && d < b.start + b.len)
    }

    /// The printed form: one line per statement, then one per band.
    pub fn display(&self, program: &Program) -> String {
        let mut out = String::new();
        for (s, stmt) in program.statements.iter().enumerate() {
            let dims: Vec<String> = self
                .dims
                .iter()
                .map(|d| display_expr(&d.exprs[s], program, stmt))
                .collect();
            let _ = writeln!(
                out,
                "{}[{}] -> [{}]",
                stmt.name,
                stmt.iterators.join(", "),
                dims.join(", ")
            );
        }
        for b in &self.bands {
            let flags: Vec<&str> = (b.start..b.start + b.len)
                .map(|d| if self.dims[d].coincident { "1" } else { "0" })
                .collect();
            let kind = match b.kind {
                BandKind::Plain => "band",
                BandKind::Tile => "tile band",
                BandKind::Point => "point band",
            };
            let _ = writeln!(
                out,
                "{kind} [{}, {}){} coincident [{}]",
                b.start,
                b.start + b.len,
                if b.permutable { " permutable" } else { "" },
                flags.join(", ")
            );
        }
        out
    }

    /// `{ S[i] -> [d_0, …, d_(m-1)] }` on the statement's domain, divisions (nested ones
    /// included) as existentials.
    pub fn schedule_map(&self, program: &Program, stmt: StmtId) -> Result<Map, Error> {
        let s = &program.statements[stmt.index()];
        let np = program.params.len();
        let ds = s.depth();
        let m = self.dims.len();
        let n_div: usize = self
            .dims
            .iter()
            .map(|d| d.exprs[stmt.index()].n_divisions())
            .sum();
        let width = ds + m + n_div;
        let mut rows = DivRows {
            np,
            width,
            next: ds + m,
            ineqs: Vec::new(),
        };
        let mut eqs = Vec::new();
        for c in &s.domain {
            let row = affine_row(&c.expr, np, width);
            match c.kind {
                crate::program::ConstraintKind::Zero => eqs.push(row),
                crate::program::ConstraintKind::NonNegative => rows.ineqs.push(row),
            }
        }
        for (d, dim) in self.dims.iter().enumerate() {
            let mut row = rows.quasi_row(&dim.exprs[stmt.index()])?;
            row[1 + np + ds + d] = -1;
            eqs.push(row);
        }
        let params: Vec<&str> = program.params.iter().map(|p| p.name.as_str()).collect();
        let map = Map::from_constraints(
            &params,
            stmt_tuple(s),
            Tuple::anonymous_dims(None, m + n_div),
            &eqs,
            &rows.ineqs,
        )?;
        Ok(Map(map.0.project_out(m, n_div)))
    }
}

/// Rows over `[constant, params…, iterators…, dimensions…, divisions…]` for quasi-affine
/// expressions: every division gets the next auxiliary column `q` and the constraints
/// `den·q ≤ num ≤ den·q + den − 1`.
struct DivRows {
    np: usize,
    width: usize,
    /// The next free auxiliary column (a variable index, not counting constant and params).
    next: usize,
    ineqs: Vec<Vec<i64>>,
}

impl DivRows {
    fn quasi_row(&mut self, e: &QuasiAffine) -> Result<Vec<i64>, Error> {
        let mut row = affine_row(&e.affine, self.np, self.width);
        for t in &e.floors {
            let num = self.quasi_row(&t.num)?;
            let q = 1 + self.np + self.next;
            self.next += 1;
            let mut lo = num;
            lo[q] = checked_add(lo[q], -t.den)?;
            let mut hi: Vec<i64> = lo.iter().map(|x| -x).collect();
            hi[0] = checked_add(hi[0], t.den - 1)?;
            self.ineqs.push(lo);
            self.ineqs.push(hi);
            row[q] = checked_add(row[q], t.coeff)?;
        }
        Ok(row)
    }
}

fn checked_add(a: i64, b: i64) -> Result<i64, Error> {
    a.checked_add(b).ok_or(Error::Sets(sets::Error::TooLarge(
        "a schedule constraint coefficient",
    )))
}

fn checked_mul(a: i64, b: i64) -> Result<i64, Error> {
    a.checked_mul(b).ok_or(Error::Sets(sets::Error::TooLarge(
        "a schedule constraint coefficient",
    )))
}

pub(crate) fn stmt_tuple(s: &Statement) -> Tuple {
    let dims: Vec<&str> = s.iterators.iter().map(String::as_str).collect();
    Tuple::new(Some(&s.name), &dims)
}

/// A row `[constant, params…, iterators…, 0…]` of `1 + np + width` entries, of an
/// expression without division variables (a domain's or a schedule's).
pub(crate) fn affine_row(e: &AffineExpr, np: usize, width: usize) -> Vec<i64> {
    affine_row_with_divs(e, np, width, width)
}

/// [`affine_row`] of a subscript: division variable `q` in the column `divs + q` after the
/// parameters.
pub(crate) fn affine_row_with_divs(
    e: &AffineExpr,
    np: usize,
    divs: usize,
    width: usize,
) -> Vec<i64> {
    let mut row = vec![0; 1 + np + width];
    row[0] = e.constant;
    for &(v, c) in e.terms() {
        match v {
            Var::Param(p) => row[1 + p.index()] += c,
            Var::Iter(k) => row[1 + np + k] += c,
            Var::Div(q) => row[1 + np + divs + q] += c,
        }
    }
    row
}

/// Computes a Pluto schedule for `program` under its dependences `deps`.
///
/// The result has one expression per statement and dimension, permutable bands of hyperplanes
/// and scalar dimensions between distributed groups, with exact coincident flags. Statements
/// whose dependences admit no schedule with non-negative coefficients give
/// [`Error::NoHyperplane`].
pub fn schedule(
    program: &Program,
    deps: &Dependences,
    options: &Options,
) -> Result<PlutoSchedule, Error> {
    let mut s = Scheduler::new(program, deps, options)?;
    s.run()?;
    let mut out = PlutoSchedule {
        dims: s.dims,
        bands: s.bands,
    };
    let flags = coincident_dims(program, deps, &out)?;
    for (d, f) in out.dims.iter_mut().zip(flags) {
        d.coincident = f;
    }
    Ok(out)
}

/// ILP variable of `Σ_p u_p`.
const U_SUM_VAR: usize = 0;
/// ILP variable of `w`.
const W_VAR: usize = 1;
/// ILP variables of the bound on input dependences: it only breaks ties between hyperplanes
/// that bound the legality dependences equally well, so parallelism comes before reuse.
const U_INPUT_SUM_VAR: usize = 2;
const W_INPUT_VAR: usize = 3;

/// A dependence as the scheduler tracks it: the pairs not yet satisfied.
#[derive(Clone)]
struct DepState {
    src: usize,
    dst: usize,
    legality: bool,
    relation: Map,
}

/// The scheduler's state before a band, for smart fusion to go back to.
struct Snapshot {
    hyperplanes: Vec<Vec<Vec<i64>>>,
    rank: Vec<usize>,
    deps: Vec<DepState>,
    dims: Vec<ScheduleDim>,
    bands: Vec<Band>,
    /// The strongly connected components at that point.
    sccs: Vec<Vec<usize>>,
}

/// Whether `c` is a rational combination of `rows`.
fn in_row_span(rows: &[Vec<i64>], c: &[i64]) -> bool {
    let to_q = |r: &[i64]| -> Vec<BigRational> {
        r.iter()
            .map(|&x| BigRational::from_integer(x.into()))
            .collect()
    };
    let rank = |m: &[Vec<BigRational>]| -> usize {
        let mut m = m.to_vec();
        let cols = m.first().map_or(0, Vec::len);
        let mut r = 0;
        for col in 0..cols {
            let Some(p) = (r..m.len()).find(|&i| !m[i][col].is_zero()) else {
                continue;
            };
            m.swap(r, p);
            let pivot = m[r].clone();
            for row in m.iter_mut().skip(r + 1) {
                let f = &row[col] / &pivot[col];
                for (x, y) in row.iter_mut().zip(&pivot) {
                    *x -= &f * y;
                }
            }
            r += 1;
        }
        r
    };
    let mut m: Vec<Vec<BigRational>> = rows.iter().map(|r| to_q(r)).collect();
    let before = rank(&m);
    m.push(to_q(c));
    rank(&m) == before
}

/// Constraint rows over the ILP's variables.
#[derive(Default, Clone)]
struct Rows {
    eqs: Vec<Vec<i64>>,
    ineqs: Vec<Vec<i64>>,
}

struct Scheduler<'a> {
    program: &'a Program,
    options: &'a Options,
    np: usize,
    depth: Vec<usize>,
    /// ILP variable of statement `s`'s first column; see [`Scheduler::coeff_var`].
    base: Vec<usize>,
    /// ILP variable of the first parameter's `u` of the legality bound; the input bound's
    /// follow.
    u_base: usize,
    n_vars: usize,
    /// Iterator parts of the loop hyperplanes found per statement.
    hyperplanes: Vec<Vec<Vec<i64>>>,
    rank: Vec<usize>,
    deps: Vec<DepState>,
    dims: Vec<ScheduleDim>,
    bands: Vec<Band>,
}

impl<'a> Scheduler<'a> {
    fn new(
        program: &'a Program,
        deps: &Dependences,
        options: &'a Options,
    ) -> Result<Scheduler<'a>, Error> {
        let np = program.params.len();
        let names: Vec<&str> = program.params.iter().map(|p| p.name.as_str()).collect();
        let depth: Vec<usize> = program.statements.iter().map(Statement::depth).collect();
        // Variables: Σu, w of legality dependences, Σu, w of input dependences, the
        // statements' coefficients, then u per parameter for each of the two bounds.
        let mut base = Vec::with_capacity(depth.len());
        let mut n_vars = 4;
        for &d in &depth {
            base.push(n_vars);
            n_vars += d + 1;
        }
        let u_base = n_vars;
        n_vars += 2 * np;
        let mut states = Vec::new();
        for d in &deps.memory {
            if !d.kind.is_legality() && !options.input_deps {
                continue;
            }
            if d.relation.params() != names.as_slice() {
                return Err(Error::Invalid(
                    "dependence relations must use the program's parameters in order".into(),
                ));
            }
            states.push(DepState {
                src: d.source.index(),
                dst: d.sink.index(),
                legality: d.kind.is_legality(),
                relation: d.relation.clone(),
            });
        }
        Ok(Scheduler {
            program,
            options,
            np,
            hyperplanes: vec![Vec::new(); depth.len()],
            rank: vec![0; depth.len()],
            depth,
            base,
            u_base,
            n_vars,
            deps: states,
            dims: Vec::new(),
            bands: Vec::new(),
        })
    }

    /// ILP variable of iterator coefficient `k` of statement `s` (`k = depth` is the constant).
    /// Iterator coefficients are laid out innermost first so that the lexicographic minimum
    /// prefers outer loops.
    fn coeff_var(&self, s: usize, k: usize) -> usize {
        let d = self.depth[s];
        if k == d {
            self.base[s] + d
        } else {
            self.base[s] + (d - 1 - k)
        }
    }

    fn full_rank(&self, s: usize) -> bool {
        self.rank[s] >= self.depth[s]
    }

    fn run(&mut self) -> Result<(), Error> {
        if !self.options.alone.is_empty() {
            self.cut_alone()?;
        }
        match self.options.fuse {
            Fusion::NoFuse => {
                self.cut(false)?;
            }
            Fusion::SmartFuse => {
                self.cut(true)?;
            }
            Fusion::MaxFuse => {}
        }
        // The state before the last band, while smart fusion may still take that band back.
        let mut before_band: Option<Snapshot> = None;
        // Where a band was taken back without a cut to show for it: not again there.
        let mut kept: HashSet<usize> = HashSet::new();
        loop {
            let all_full = (0..self.depth.len()).all(|s| self.full_rank(s));
            if all_full && !self.deps.iter().any(|d| d.legality) {
                return Ok(());
            }
            let constraints = self.band_constraints()?;
            let snapshot = self.snapshot();
            let start = self.dims.len();
            while !(0..self.depth.len()).all(|s| self.full_rank(s)) {
                match self.find_hyperplane(&constraints)? {
                    Some(h) => self.push_hyperplane(h),
                    None => break,
                }
            }
            if self.dims.len() > start {
                self.bands.push(Band {
                    start,
                    len: self.dims.len() - start,
                    permutable: true,
                    kind: BandKind::Plain,
                });
                self.restrict_deps(start)?;
                before_band = Some(snapshot);
                continue;
            }
            if self.options.fuse == Fusion::SmartFuse {
                if let Some(earlier) = before_band.take() {
                    let at = earlier.dims.len();
                    if !kept.contains(&at) && self.fusion_walks_columns(&earlier) {
                        let fused = self.snapshot();
                        self.restore(earlier);
                        if self.cut(false)? {
                            continue;
                        }
                        kept.insert(at);
                        self.restore(fused);
                    }
                }
            }
            let progress =
                (self.options.fuse == Fusion::SmartFuse && self.cut(true)?) || self.cut(false)?;
            if !progress {
                let stuck: HashSet<usize> = self
                    .deps
                    .iter()
                    .filter(|d| d.legality)
                    .flat_map(|d| [d.src, d.dst])
                    .collect();
                let mut names: Vec<&str> = stuck
                    .iter()
                    .map(|&s| self.program.statements[s].name.as_str())
                    .collect();
                names.sort_unstable();
                return Err(Error::NoHyperplane(names.join(", ")));
            }
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            hyperplanes: self.hyperplanes.clone(),
            rank: self.rank.clone(),
            deps: self.deps.clone(),
            dims: self.dims.clone(),
            bands: self.bands.clone(),
            sccs: self.sccs(),
        }
    }

    fn restore(&mut self, s: Snapshot) {
        self.hyperplanes = s.hyperplanes;
        self.rank = s.rank;
        self.deps = s.deps;
        self.dims = s.dims;
        self.bands = s.bands;
    }

    /// Smart fusion's second thought about the band found after `earlier`: the band fused
    /// strongly connected components of one loop nest that must now be cut apart although
    /// they have loops left, and in those statements the band's loops (with the outer ones)
    /// already fix the last, contiguous subscript of most accesses. Then the fusion shares
    /// only loops that walk arrays across their rows, and the distributed inner loops would
    /// step through memory with a stride; distributing the components before the band instead
    /// lets each keep all its loops in one permutable band, which intra-tile permutation can
    /// turn so that a stride-one loop is innermost.
    fn fusion_walks_columns(&self, earlier: &Snapshot) -> bool {
        let partial: Vec<usize> = (0..self.depth.len())
            .filter(|&s| !self.full_rank(s))
            .collect();
        let nest = |s: usize| -> Vec<i64> {
            earlier
                .dims
                .iter()
                .filter(|d| d.kind == DimKind::Scalar)
                .map(|d| d.exprs[s].eval(&[], &[]))
                .collect()
        };
        let fused_apart = earlier.sccs.iter().enumerate().any(|(a, x)| {
            earlier.sccs.iter().skip(a + 1).any(|y| {
                x.iter().any(|&s| {
                    partial.contains(&s)
                        && y.iter()
                            .any(|&t| partial.contains(&t) && nest(s) == nest(t))
                })
            })
        });
        if !fused_apart {
            return false;
        }
        let (mut fixed, mut moving) = (0usize, 0usize);
        for &s in &partial {
            let stmt = &self.program.statements[s];
            let rows = &self.hyperplanes[s];
            for (_, access) in stmt.accesses() {
                let Some(last) = access.subscripts.last().filter(|e| !e.has_divisions()) else {
                    continue;
                };
                let c: Vec<i64> = (0..self.depth[s])
                    .map(|k| last.coeff(Var::Iter(k)))
                    .collect();
                if c.iter().all(|&x| x == 0) {
                    continue;
                }
                if in_row_span(rows, &c) {
                    fixed += 1;
                } else {
                    moving += 1;
                }
            }
        }
        fixed > moving
    }

    /// Statements linked by a remaining dependence (of any kind), each list sorted. Separate
    /// components get separate integer programs, so that one component's bound `u · n + w`
    /// does not steer another's hyperplanes.
    fn components(&self) -> Vec<Vec<usize>> {
        let n = self.depth.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        for d in &self.deps {
            let (a, b) = (find(&mut parent, d.src), find(&mut parent, d.dst));
            parent[a] = b;
        }
        let mut comps: Vec<Vec<usize>> = Vec::new();
        let mut index: HashMap<usize, usize> = HashMap::new();
        for s in 0..n {
            let r = find(&mut parent, s);
            let k = *index.entry(r).or_insert_with(|| {
                comps.push(Vec::new());
                comps.len() - 1
            });
            comps[k].push(s);
        }
        comps
    }

    /// Legality and bounding constraints of the current dependence set per component, Farkas
    /// multipliers eliminated, deduplicated.
    fn band_constraints(&self) -> Result<Vec<(Vec<usize>, Rows)>, Error> {
        let comps = self.components();
        let mut of = vec![0usize; self.depth.len()];
        for (k, c) in comps.iter().enumerate() {
            for &s in c {
                of[s] = k;
            }
        }
        let mut eqs: Vec<HashSet<Vec<i64>>> = vec![HashSet::new(); comps.len()];
        let mut ineqs: Vec<HashSet<Vec<i64>>> = vec![HashSet::new(); comps.len()];
        let nv = self.n_vars;
        for dep in &self.deps {
            let (s, t) = (dep.src, dep.dst);
            let k = of[s];
            let (ds, dt) = (self.depth[s], self.depth[t]);
            for piece in &dep.relation.0.parts {
                let ny = piece.c.n;
                // Parameters are sizes: the context `n ≥ 0` lets `u · n` bound distances that
                // grow with a parameter the polyhedron does not otherwise constrain.
                let mut piece_ineqs = piece.c.ineqs.clone();
                for p in 0..self.np {
                    let mut r = vec![0; ny + 1];
                    r[1 + p] = 1;
                    piece_ineqs.push(r);
                }
                let unit = |v: usize, c: i64| {
                    let mut f = vec![0i64; nv + 1];
                    f[1 + v] = c;
                    f
                };
                // φ_T(j) − φ_S(i) as linear forms over the ILP variables, per polyhedron
                // variable [params | i | j | locals], and its constant.
                let mut diff: Vec<Vec<i64>> = vec![vec![0; nv + 1]; ny];
                for k in 0..ds {
                    diff[self.np + k] = unit(self.coeff_var(s, k), -1);
                }
                for k in 0..dt {
                    diff[self.np + ds + k] = unit(self.coeff_var(t, k), 1);
                }
                let mut diff0 = unit(self.coeff_var(t, dt), 1);
                diff0[1 + self.coeff_var(s, ds)] -= 1;
                if dep.legality {
                    let rows = farkas(&piece.c.eqs, &piece_ineqs, &diff0, &diff, nv)?.ok_or_else(
                        || {
                            Error::Unsupported(format!(
                                "the legality constraints of a dependence of {} on {} have more \
                                 than {MAX_PROJECTED_ROWS} inequalities once projected",
                                self.program.statements[t].name, self.program.statements[s].name
                            ))
                        },
                    )?;
                    eqs[k].extend(rows.eqs);
                    ineqs[k].extend(rows.ineqs);
                }
                let mut bound: Vec<Vec<i64>> = diff
                    .iter()
                    .map(|f| f.iter().map(|x| -x).collect())
                    .collect();
                let (u, w) = if dep.legality {
                    (self.u_base, W_VAR)
                } else {
                    (self.u_base + self.np, W_INPUT_VAR)
                };
                for (p, b) in bound.iter_mut().enumerate().take(self.np) {
                    b[1 + u + p] += 1;
                }
                let mut bound0: Vec<i64> = diff0.iter().map(|x| -x).collect();
                bound0[1 + w] += 1;
                // The bound only steers the objective (the distance, or an input dependence's
                // reuse distance, to keep small): where its projection is too large to solve
                // with, the dependence does without, and the schedule stays legal.
                if let Some(rows) = farkas(&piece.c.eqs, &piece_ineqs, &bound0, &bound, nv)? {
                    eqs[k].extend(rows.eqs);
                    ineqs[k].extend(rows.ineqs);
                }
            }
        }
        Ok(comps
            .into_iter()
            .zip(eqs.into_iter().zip(ineqs))
            .map(|(c, (e, i))| {
                let mut eqs: Vec<Vec<i64>> = e.into_iter().collect();
                let mut ineqs: Vec<Vec<i64>> = i.into_iter().collect();
                eqs.sort();
                ineqs.sort();
                (c, Rows { eqs, ineqs })
            })
            .collect())
    }

    /// The next hyperplane, one integer program per component: per statement, iterator
    /// coefficients then the constant. `None` when some component has none.
    fn find_hyperplane(
        &self,
        constraints: &[(Vec<usize>, Rows)],
    ) -> Result<Option<Vec<Vec<i64>>>, Error> {
        let mut out: Vec<Vec<i64>> = self.depth.iter().map(|&d| vec![0; d + 1]).collect();
        for (comp, rows) in constraints {
            match self.solve_component(comp, rows)? {
                Some(x) => {
                    for &s in comp {
                        out[s] = (0..=self.depth[s])
                            .map(|k| x[self.coeff_var(s, k)])
                            .collect();
                    }
                }
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    fn solve_component(
        &self,
        comp: &[usize],
        constraints: &Rows,
    ) -> Result<Option<Vec<i64>>, Error> {
        let nv = self.n_vars;
        let mut p = Problem::new(nv);
        for r in &constraints.eqs {
            p.add_eq(r)?;
        }
        for r in &constraints.ineqs {
            p.add_ineq(r)?;
        }
        for v in 0..nv {
            let mut r = vec![0; nv + 1];
            r[1 + v] = 1;
            p.add_ineq(&r)?;
        }
        // The objectives are the total growth Σu of each bound, so that no parameter is
        // preferred over another; the individual u come last.
        for (sum, first) in [
            (U_SUM_VAR, self.u_base),
            (U_INPUT_SUM_VAR, self.u_base + self.np),
        ] {
            let mut total = vec![0; nv + 1];
            total[1 + sum] = -1;
            for q in 0..self.np {
                total[1 + first + q] = 1;
            }
            p.add_eq(&total)?;
        }
        for &s in comp {
            for k in 0..self.depth[s] {
                let mut r = vec![0; nv + 1];
                r[0] = self.options.coeff_bound;
                r[1 + self.coeff_var(s, k)] = -1;
                p.add_ineq(&r)?;
            }
            if self.full_rank(s) {
                continue;
            }
            let ortho = orthogonal_rows(&self.hyperplanes[s], self.depth[s]);
            let mut sum = vec![0; nv + 1];
            sum[0] = -1;
            for h in &ortho {
                let mut r = vec![0; nv + 1];
                for (k, &a) in h.iter().enumerate() {
                    r[1 + self.coeff_var(s, k)] = a;
                    sum[1 + self.coeff_var(s, k)] += a;
                }
                p.add_ineq(&r)?;
            }
            p.add_ineq(&sum)?;
        }
        match p.lexmin()? {
            LexMin::Empty => Ok(None),
            LexMin::Unbounded => Err(Error::Invalid("the hyperplane problem is unbounded".into())),
            sol @ LexMin::Point(_) => sol.integer_point().map(Some).ok_or_else(|| {
                Error::Invalid("hyperplane coefficients do not fit in 64 bits".into())
            }),
        }
    }

    fn push_hyperplane(&mut self, h: Vec<Vec<i64>>) {
        let mut exprs = Vec::with_capacity(h.len());
        for (s, row) in h.into_iter().enumerate() {
            let d = self.depth[s];
            let iters = &row[..d];
            if !self.full_rank(s) {
                // The orthogonality constraints make the row independent of the earlier ones.
                self.rank[s] += 1;
                self.hyperplanes[s].push(iters.to_vec());
            }
            let e = AffineExpr::from_terms(
                iters.iter().enumerate().map(|(k, &c)| (Var::Iter(k), c)),
                row[d],
            );
            exprs.push(QuasiAffine::from(e));
        }
        self.dims.push(ScheduleDim {
            kind: DimKind::Loop,
            exprs,
            coincident: false,
        });
    }

    /// Keeps only the dependence pairs on which every dimension from `start` on has distance 0.
    fn restrict_deps(&mut self, start: usize) -> Result<(), Error> {
        let params: Vec<&str> = self
            .program
            .params
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        let np = self.np;
        let mut kept = Vec::new();
        for dep in std::mem::take(&mut self.deps) {
            let (s, t) = (dep.src, dep.dst);
            let (ss, ts) = (&self.program.statements[s], &self.program.statements[t]);
            let (ds, dt) = (ss.depth(), ts.depth());
            let mut eqs = Vec::new();
            let mut zero_only = true;
            for dim in &self.dims[start..] {
                let (Some(es), Some(et)) = (dim.exprs[s].as_affine(), dim.exprs[t].as_affine())
                else {
                    return Err(Error::Invalid("scheduler dimensions are affine".into()));
                };
                let mut row = vec![0i64; 1 + np + ds + dt];
                let rs = affine_row(es, np, ds + dt);
                let rt = affine_row(&et.map_iters(|k| k + ds), np, ds + dt);
                for (x, (a, b)) in row.iter_mut().zip(rs.iter().zip(&rt)) {
                    *x = b - a;
                }
                if row.iter().any(|&x| x != 0) {
                    zero_only = false;
                }
                eqs.push(row);
            }
            if zero_only {
                kept.push(dep);
                continue;
            }
            let zero = Map::from_constraints(&params, stmt_tuple(ss), stmt_tuple(ts), &eqs, &[])?;
            let relation = dep.relation.intersect(&zero).simplify()?;
            if !relation.is_empty()? {
                kept.push(DepState { relation, ..dep });
            }
        }
        self.deps = kept;
        Ok(())
    }

    /// Strongly connected components of the remaining legality dependences, in a topological
    /// order that prefers earlier statements.
    fn sccs(&self) -> Vec<Vec<usize>> {
        let n = self.depth.len();
        let mut reach = vec![vec![false; n]; n];
        for (s, row) in reach.iter_mut().enumerate() {
            row[s] = true;
        }
        for d in self.deps.iter().filter(|d| d.legality) {
            reach[d.src][d.dst] = true;
        }
        for k in 0..n {
            let via = reach[k].clone();
            for row in reach.iter_mut() {
                if row[k] {
                    for (x, &y) in row.iter_mut().zip(&via) {
                        *x |= y;
                    }
                }
            }
        }
        let mut comp = vec![usize::MAX; n];
        let mut comps: Vec<Vec<usize>> = Vec::new();
        for i in 0..n {
            if comp[i] != usize::MAX {
                continue;
            }
            let members: Vec<usize> = (0..n).filter(|&j| reach[i][j] && reach[j][i]).collect();
            for &j in &members {
                comp[j] = comps.len();
            }
            comps.push(members);
        }
        // Kahn's algorithm, smallest first statement first.
        let nc = comps.len();
        let mut preds = vec![0usize; nc];
        let mut edges: HashSet<(usize, usize)> = HashSet::new();
        for d in self.deps.iter().filter(|d| d.legality) {
            let (a, b) = (comp[d.src], comp[d.dst]);
            if a != b && edges.insert((a, b)) {
                preds[b] += 1;
            }
        }
        let mut done = vec![false; nc];
        let mut order = Vec::with_capacity(nc);
        for _ in 0..nc {
            // A DAG always has a ready component; components are ordered by first statement.
            let Some(c) = (0..nc).find(|&c| !done[c] && preds[c] == 0) else {
                break;
            };
            done[c] = true;
            for &(a, b) in &edges {
                if a == c {
                    preds[b] -= 1;
                }
            }
            order.push(comps[c].clone());
        }
        order
    }

    /// Distributes statements with a scalar dimension: every component apart, or, with
    /// `by_depth`, only between consecutive components of different loop depth. Returns
    /// whether a dependence was satisfied by it (or, at the start, whether anything was cut).
    fn cut(&mut self, by_depth: bool) -> Result<bool, Error> {
        let depth = |scc: &[usize]| scc.iter().map(|&s| self.depth[s]).max().unwrap_or(0);
        let groups = self.groups(|prev, next| !by_depth || depth(prev) != depth(next));
        self.distribute(groups)
    }

    /// Distributes the components around each one holding a statement of
    /// [`Options::alone`].
    fn cut_alone(&mut self) -> Result<bool, Error> {
        let alone = |scc: &[usize]| {
            scc.iter()
                .any(|&s| self.options.alone.contains(&StmtId(s as u32)))
        };
        let groups = self.groups(|prev, next| alone(prev) || alone(next));
        self.distribute(groups)
    }

    /// The group of each statement when the strongly connected components, in topological
    /// order, start a new group where `apart` says of two neighbours; `None` for one group.
    fn groups(&self, apart: impl Fn(&[usize], &[usize]) -> bool) -> Option<Vec<i64>> {
        let sccs = self.sccs();
        let mut group = vec![0i64; self.depth.len()];
        let mut g = 0i64;
        for (k, scc) in sccs.iter().enumerate() {
            if k > 0 && apart(&sccs[k - 1], scc) {
                g += 1;
            }
            for &s in scc {
                group[s] = g;
            }
        }
        (g > 0).then_some(group)
    }

    /// A scalar dimension ordering the statements by `group`, and the dependences between
    /// groups dropped; `false` (and nothing done) when that gains nothing.
    fn distribute(&mut self, group: Option<Vec<i64>>) -> Result<bool, Error> {
        let Some(group) = group else {
            return Ok(false);
        };
        let before = self.deps.iter().filter(|d| d.legality).count();
        self.deps.retain(|d| group[d.src] == group[d.dst]);
        let after = self.deps.iter().filter(|d| d.legality).count();
        if after == before && !self.dims.is_empty() {
            // Nothing was gained; the ILP would be the same as before. Keep the schedule
            // free of a useless dimension.
            return Ok(false);
        }
        self.dims.push(ScheduleDim {
            kind: DimKind::Scalar,
            exprs: group.iter().map(|&v| QuasiAffine::constant(v)).collect(),
            coincident: false,
        });
        Ok(true)
    }
}

/// Pluto's orthogonal-subspace rows for hyperplanes `h` (independent, over `d` iterators):
/// the rows of `I − Hᵀ(H Hᵀ)⁻¹H` scaled to coprime integers, zero rows and rows whose
/// negation is already present dropped.
fn orthogonal_rows(h: &[Vec<i64>], d: usize) -> Vec<Vec<i64>> {
    let q = |v: i64| BigRational::from_integer(v.into());
    let r = h.len();
    let mut proj: Vec<Vec<BigRational>> = (0..d)
        .map(|i| (0..d).map(|j| if i == j { q(1) } else { q(0) }).collect())
        .collect();
    if r > 0 {
        // M = H Hᵀ, inverted by Gauss–Jordan (H has independent rows, so M is invertible).
        let mut m: Vec<Vec<BigRational>> = (0..r)
            .map(|a| {
                let mut row: Vec<BigRational> = (0..r)
                    .map(|b| q(h[a].iter().zip(&h[b]).map(|(x, y)| x * y).sum()))
                    .collect();
                row.extend((0..r).map(|b| if a == b { q(1) } else { q(0) }));
                row
            })
            .collect();
        for c in 0..r {
            let Some(p) = (c..r).find(|&i| !m[i][c].is_zero()) else {
                return Vec::new();
            };
            m.swap(c, p);
            let piv = m[c][c].clone();
            for x in m[c].iter_mut() {
                *x = &*x / &piv;
            }
            for i in 0..r {
                if i != c && !m[i][c].is_zero() {
                    let f = m[i][c].clone();
                    let pr = m[c].clone();
                    for (x, y) in m[i].iter_mut().zip(&pr) {
                        *x = &*x - &f * y;
                    }
                }
            }
        }
        for i in 0..d {
            for j in 0..d {
                let mut s = q(0);
                for a in 0..r {
                    for b in 0..r {
                        s += q(h[a][i]) * &m[a][r + b] * q(h[b][j]);
                    }
                }
                proj[i][j] = &proj[i][j] - s;
            }
        }
    }
    let mut out: Vec<Vec<i64>> = Vec::new();
    for row in proj {
        if row.iter().all(Zero::is_zero) {
            continue;
        }
        let lcm = row.iter().fold(num_bigint::BigInt::one(), |l, x| {
            num_integer::Integer::lcm(&l, x.denom())
        });
        let ints: Vec<num_bigint::BigInt> = row
            .iter()
            .map(|x| (x * BigRational::from_integer(lcm.clone())).to_integer())
            .collect();
        let g = ints.iter().fold(num_bigint::BigInt::zero(), |g, x| {
            num_integer::Integer::gcd(&g, x)
        });
        let ints: Vec<i64> = ints
            .iter()
            .map(|x| (x / &g).to_i64().unwrap_or(i64::MAX))
            .collect();
        let neg: Vec<i64> = ints.iter().map(|x| -x).collect();
        if !out.contains(&ints) && !out.contains(&neg) {
            out.push(ints);
        }
    }
    out
}

/// Inequalities a Fourier–Motzkin projection may have after any of its steps; past it the
/// projection is given up. The scheduler's kernels need a few dozen; a dependence polyhedron
/// with many constraints can make the projection grow without bound.
const MAX_PROJECTED_ROWS: usize = 400;

/// Farkas' lemma, affine form: the constraints on the ILP variables `z` under which
/// `f0(z) + Σ_v f[v](z) · y_v ≥ 0` for every rational `y` with `eqs · (1, y) = 0` and
/// `ineqs · (1, y) ≥ 0`, with the multipliers projected out (Gaussian elimination on the
/// coefficient identities, then Fourier–Motzkin). Each form has `1 + nz` entries. `None` when
/// the projection grows past [`MAX_PROJECTED_ROWS`].
fn farkas(
    eqs: &[Vec<i64>],
    ineqs: &[Vec<i64>],
    f0: &[i64],
    f: &[Vec<i64>],
    nz: usize,
) -> Result<Option<Rows>, Error> {
    let ny = f.len();
    let (mi, me) = (ineqs.len(), eqs.len());
    let width = 1 + nz + mi + me;
    let lam = |k: usize| 1 + nz + k;
    let mu = |e: usize| 1 + nz + mi + e;
    let mut e_rows: Vec<Vec<i64>> = Vec::with_capacity(ny);
    for v in 0..ny {
        let mut r = f[v].clone();
        r.resize(width, 0);
        for (k, g) in ineqs.iter().enumerate() {
            r[lam(k)] = -g[1 + v];
        }
        for (e, h) in eqs.iter().enumerate() {
            r[mu(e)] = -h[1 + v];
        }
        e_rows.push(r);
    }
    let mut i_rows: Vec<Vec<i64>> = Vec::with_capacity(mi + 1);
    let mut r = f0.to_vec();
    r.resize(width, 0);
    for (k, g) in ineqs.iter().enumerate() {
        r[lam(k)] = -g[0];
    }
    for (e, h) in eqs.iter().enumerate() {
        r[mu(e)] = -h[0];
    }
    i_rows.push(r);
    for k in 0..mi {
        let mut r = vec![0; width];
        r[lam(k)] = 1;
        i_rows.push(r);
    }
    let elim: Vec<usize> = (1 + nz..width).collect();
    let Some((e_rows, i_rows)) = eliminate(e_rows, i_rows, &elim)? else {
        return Ok(None);
    };
    let mut out = Rows::default();
    for mut r in e_rows {
        r.truncate(1 + nz);
        if let Some(r) = tighten(r, true) {
            out.eqs.push(r);
        }
    }
    for mut r in i_rows {
        r.truncate(1 + nz);
        if let Some(r) = tighten(r, false) {
            out.ineqs.push(r);
        }
    }
    Ok(Some(out))
}

/// Normalises a row over integer variables: divides by the gcd of the coefficients, rounding
/// an inequality's constant down; `None` for a trivially true row, `[-1, 0…]` for a false one.
fn tighten(mut r: Vec<i64>, eq: bool) -> Option<Vec<i64>> {
    let g = r[1..]
        .iter()
        .fold(0i64, |g, &x| num_integer::Integer::gcd(&g, &x));
    if g == 0 {
        let ok = if eq { r[0] == 0 } else { r[0] >= 0 };
        if ok {
            return None;
        }
        let mut bad = vec![0; r.len()];
        bad[0] = -1;
        return Some(bad);
    }
    if eq && r[0] % g != 0 {
        let mut bad = vec![0; r.len()];
        bad[0] = -1;
        return Some(bad);
    }
    for x in r[1..].iter_mut() {
        *x /= g;
    }
    r[0] = r[0].div_euclid(g);
    Some(r)
}

/// Divides a row by the gcd of all its entries (a rational scaling, valid while rational
/// multipliers remain in it).
fn scale_down(r: &mut [i64]) {
    let g = r
        .iter()
        .fold(0i64, |g, &x| num_integer::Integer::gcd(&g, &x));
    if g > 1 {
        for x in r.iter_mut() {
            *x /= g;
        }
    }
}

/// `a·x − b·y` entry by entry, checked.
fn combine(x: &[i64], a: i64, y: &[i64], b: i64) -> Result<Vec<i64>, Error> {
    x.iter()
        .zip(y)
        .map(|(&p, &q)| checked_add(checked_mul(p, a)?, -checked_mul(q, b)?))
        .collect()
}

/// Equalities and inequalities as rows.
type System = (Vec<Vec<i64>>, Vec<Vec<i64>>);

/// Projects the variables `elim` out of `{ eqs = 0, ineqs ≥ 0 }` over the rationals; `None`
/// when a step leaves more than [`MAX_PROJECTED_ROWS`] inequalities.
fn eliminate(
    mut eqs: Vec<Vec<i64>>,
    mut ineqs: Vec<Vec<i64>>,
    elim: &[usize],
) -> Result<Option<System>, Error> {
    let mut remaining: Vec<usize> = elim.to_vec();
    // Gaussian elimination through the equalities first: it never grows the system.
    while let Some((ei, c)) = eqs.iter().enumerate().find_map(|(i, r)| {
        remaining
            .iter()
            .copied()
            .find(|&c| r[c] != 0)
            .map(|c| (i, c))
    }) {
        let piv = eqs.swap_remove(ei);
        let p = piv[c];
        for r in eqs.iter_mut().chain(ineqs.iter_mut()) {
            if r[c] != 0 {
                // |p|·r − sign(p)·r_c·piv keeps an inequality's direction.
                let mut n = combine(r, p.abs(), &piv, p.signum() * r[c])?;
                scale_down(&mut n);
                *r = n;
            }
        }
        remaining.retain(|&v| v != c);
    }
    dedup(&mut ineqs);
    // Fourier–Motzkin on what is left, cheapest variable first.
    while !remaining.is_empty() {
        let cost = |c: usize| {
            let p = ineqs.iter().filter(|r| r[c] > 0).count();
            let n = ineqs.iter().filter(|r| r[c] < 0).count();
            (p * n) as isize - (p + n) as isize
        };
        let (idx, &c) = remaining
            .iter()
            .enumerate()
            .min_by_key(|(_, &c)| cost(c))
            .expect("the loop runs while variables remain");
        remaining.swap_remove(idx);
        let (pos, rest): (Vec<Vec<i64>>, Vec<Vec<i64>>) = ineqs.into_iter().partition(|r| r[c] > 0);
        let (neg, mut zero): (Vec<Vec<i64>>, Vec<Vec<i64>>) =
            rest.into_iter().partition(|r| r[c] < 0);
        if zero.len() + pos.len() * neg.len() > MAX_PROJECTED_ROWS * 4 {
            return Ok(None);
        }
        for a in &pos {
            for b in &neg {
                // b_c < 0 < a_c: (−b_c)·a + a_c·b eliminates c.
                let mut n = combine(a, -b[c], b, -a[c])?;
                scale_down(&mut n);
                zero.push(n);
            }
        }
        ineqs = zero;
        dedup(&mut ineqs);
        if ineqs.len() > MAX_PROJECTED_ROWS {
            return Ok(None);
        }
    }
    Ok(Some((eqs, ineqs)))
}

/// Removes duplicate rows, trivially true rows, and rows dominated by a parallel one.
fn dedup(rows: &mut Vec<Vec<i64>>) {
    let mut best: HashMap<Vec<i64>, i64> = HashMap::new();
    let mut order = Vec::new();
    for r in rows.drain(..) {
        if r[1..].iter().all(|&x| x == 0) && r[0] >= 0 {
            continue;
        }
        let key = r[1..].to_vec();
        match best.get_mut(&key) {
            Some(c) => *c = (*c).min(r[0]),
            None => {
                best.insert(key.clone(), r[0]);
                order.push(key);
            }
        }
    }
    for key in order {
        let mut r = Vec::with_capacity(key.len() + 1);
        r.push(best[&key]);
        r.extend(key);
        rows.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orthogonal_rows_of_textbook_cases() {
        assert_eq!(orthogonal_rows(&[], 2), vec![vec![1, 0], vec![0, 1]]);
        assert_eq!(
            orthogonal_rows(&[vec![1, 0, 0]], 3),
            vec![vec![0, 1, 0], vec![0, 0, 1]]
        );
        assert_eq!(
            orthogonal_rows(&[vec![1, 0, 0], vec![2, 1, 0]], 3),
            vec![vec![0, 0, 1]]
        );
        assert_eq!(orthogonal_rows(&[vec![1, 1]], 2), vec![vec![1, -1]]);
    }

    #[test]
    fn farkas_of_an_interval() {
        // y in [0, 10]: c0 + c1·y ≥ 0 everywhere iff c0 ≥ 0 and c0 + 10·c1 ≥ 0.
        let rows = farkas(
            &[],
            &[vec![0, 1], vec![10, -1]],
            &[0, 1, 0],
            &[vec![0, 0, 1]],
            2,
        )
        .unwrap()
        .expect("a small projection");
        let mut got = rows.ineqs.clone();
        got.sort();
        assert_eq!(got, vec![vec![0, 1, 0], vec![0, 1, 10]]);
        assert!(rows.eqs.is_empty());
    }

    #[test]
    fn farkas_with_an_equality() {
        // y = 3: c0 + c1·y ≥ 0 iff c0 + 3·c1 ≥ 0.
        let rows = farkas(&[vec![-3, 1]], &[], &[0, 1, 0], &[vec![0, 0, 1]], 2)
            .unwrap()
            .expect("a small projection");
        assert_eq!(rows.ineqs, vec![vec![0, 1, 3]]);
    }
}
