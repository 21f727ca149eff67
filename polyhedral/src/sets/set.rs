//! [`Set`]: a union of integer polyhedra with locals, over named tuples.

use super::conj::Conj;
use super::map::Map;
use super::parse::{parse, ParseError};
use super::rel::{Basic, Rel};
use super::space::Tuple;
use super::Error;
use std::fmt;
use std::str::FromStr;

/// A finite union of basic sets; see the [module docs](super).
#[derive(Clone, Debug)]
pub struct Set(pub(crate) Rel);

/// The exact integer range of one dimension; a bound is `None` when unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DimRange {
    pub min: Option<i64>,
    pub max: Option<i64>,
}

fn params_of(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| (*s).to_owned()).collect()
}

impl Set {
    /// All points of `tuple`, for every value of `params`.
    pub fn universe(params: &[&str], tuple: Tuple) -> Set {
        Set(Rel {
            params: params_of(params),
            parts: vec![Basic::universe(params.len(), None, tuple)],
        })
    }

    pub fn empty(params: &[&str]) -> Set {
        Set(Rel::empty(params_of(params)))
    }

    /// Builds a basic set from constraint rows `[constant, params…, dims…] · (1, x) ≥ 0`
    /// (inequalities) and `= 0` (equalities).
    pub fn from_constraints(
        params: &[&str],
        tuple: Tuple,
        eqs: &[Vec<i64>],
        ineqs: &[Vec<i64>],
    ) -> Result<Set, Error> {
        let mut b = Basic::universe(params.len(), None, tuple);
        let width = b.c.n + 1;
        if eqs.iter().chain(ineqs).any(|r| r.len() != width) {
            return Err(Error::Space(format!(
                "constraint rows must have {width} entries"
            )));
        }
        b.c = Conj {
            n: b.c.n,
            eqs: eqs.to_vec(),
            ineqs: ineqs.to_vec(),
        };
        Ok(Set(Rel {
            params: params_of(params),
            parts: vec![b],
        }))
    }

    pub fn params(&self) -> &[String] {
        &self.0.params
    }

    /// The distinct tuples the pieces live in.
    pub fn tuples(&self) -> Vec<Tuple> {
        let mut v: Vec<Tuple> = self.0.parts.iter().map(|b| b.ran.clone()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Number of conjunctions in the union.
    pub fn n_basic(&self) -> usize {
        self.0.parts.len()
    }

    pub fn intersect(&self, o: &Set) -> Set {
        Set(self.0.intersect(&o.0))
    }

    pub fn union(&self, o: &Set) -> Set {
        Set(self.0.union(&o.0))
    }

    /// Points of `self` not in `o`, exactly (also when `o` has locals).
    pub fn subtract(&self, o: &Set) -> Result<Set, Error> {
        Ok(Set(self.0.subtract(&o.0)?))
    }

    pub fn is_empty(&self) -> Result<bool, Error> {
        self.0.is_empty()
    }

    pub fn is_subset(&self, o: &Set) -> Result<bool, Error> {
        self.0.is_subset(&o.0)
    }

    pub fn is_equal(&self, o: &Set) -> Result<bool, Error> {
        Ok(self.is_subset(o)? && o.is_subset(self)?)
    }

    /// Whether the point with parameter values `params` and coordinates `point` lies in a
    /// piece of a tuple of that arity (any name).
    pub fn contains(&self, params: &[i64], point: &[i64]) -> Result<bool, Error> {
        self.contains_in(None, params, point)
    }

    /// Like [`Set::contains`], restricted to pieces whose tuple is called `name`.
    pub fn contains_in(
        &self,
        name: Option<Option<&str>>,
        params: &[i64],
        point: &[i64],
    ) -> Result<bool, Error> {
        if params.len() != self.0.params.len() {
            return Err(Error::Space("wrong number of parameter values".into()));
        }
        let vals: Vec<i64> = params.iter().chain(point).copied().collect();
        for b in &self.0.parts {
            if b.ran.arity() != point.len() || name.is_some_and(|n| n != b.ran.name()) {
                continue;
            }
            if member(b, &vals)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Existentially quantifies `n` dimensions from `first` on.
    pub fn project_out(&self, first: usize, n: usize) -> Set {
        Set(self.0.project_out(first, n))
    }

    /// The image `{ y : ∃x ∈ self, (x, y) ∈ m }`.
    pub fn apply(&self, m: &Map) -> Set {
        Set(self.0.apply_range(&m.0))
    }

    /// The preimage `{ x : ∃y ∈ self, (x, y) ∈ m }`.
    pub fn preimage(&self, m: &Map) -> Set {
        Set(m.0.intersect_side(&self.0, false).project_side(true))
    }

    /// The same points with every local that is not a congruence eliminated (exact
    /// projection): cheaper to ask many questions of.
    pub(crate) fn without_locals(&self) -> Result<Set, Error> {
        let mut parts = Vec::new();
        for b in &self.0.parts {
            parts.extend(b.stride_form()?);
        }
        Ok(Set(Rel {
            params: self.0.params.clone(),
            parts,
        }))
    }

    /// The lexicographically smallest point per space and per parameter value.
    pub fn lexmin(&self) -> Result<Set, Error> {
        Ok(Set(self.0.lexopt(false)?))
    }

    pub fn lexmax(&self) -> Result<Set, Error> {
        Ok(Set(self.0.lexopt(true)?))
    }

    /// The lexicographically smallest point, parameters first: `None` if empty.
    pub fn lexmin_point(&self) -> Result<Option<Vec<i64>>, Error> {
        self.lex_point(false)
    }

    pub fn lexmax_point(&self) -> Result<Option<Vec<i64>>, Error> {
        self.lex_point(true)
    }

    fn lex_point(&self, max: bool) -> Result<Option<Vec<i64>>, Error> {
        if self.tuples().len() > 1 {
            return Err(Error::Space(
                "lexicographic point of a set over several tuples".into(),
            ));
        }
        let mut best: Option<Vec<i64>> = None;
        for b in &self.0.parts {
            if let Some(p) = Rel::lex_point(b, max)? {
                let better = match &best {
                    None => true,
                    Some(q) => (max && p > *q) || (!max && p < *q),
                };
                if better {
                    best = Some(p);
                }
            }
        }
        Ok(best)
    }

    /// Exact integer minimum and maximum of dimension `d` over all points (and all parameter
    /// values); `None` when no piece with that dimension is non-empty.
    pub fn dim_range(&self, d: usize) -> Result<Option<DimRange>, Error> {
        let mut acc: Option<DimRange> = None;
        for b in &self.0.parts {
            if d >= b.no() {
                continue;
            }
            let mut row = vec![0; b.nfix() + 1];
            row[1 + b.np + d] = 1;
            if let Some(r) = Rel::range_of(b, &row)? {
                acc = Some(match acc {
                    None => DimRange {
                        min: r.lo,
                        max: r.hi,
                    },
                    Some(a) => DimRange {
                        min: a.min.zip(r.lo).map(|(x, y)| x.min(y)),
                        max: a.max.zip(r.hi).map(|(x, y)| x.max(y)),
                    },
                });
            }
        }
        Ok(acc)
    }

    /// The smallest box `lo ≤ x_d ≤ hi` (constant bounds) containing each space's points.
    pub fn box_hull(&self) -> Result<Set, Error> {
        let mut out = Rel::empty(self.0.params.clone());
        for t in self.tuples() {
            let mine = self.restrict_to(&t);
            let mut b = Basic::universe(self.0.params.len(), None, t.clone());
            if mine.is_empty()? {
                continue;
            }
            for d in 0..t.arity() {
                let Some(r) = mine.dim_range(d)? else {
                    continue;
                };
                let col = 1 + b.np + d;
                if let Some(lo) = r.min {
                    let mut row = vec![0; b.c.n + 1];
                    row[0] = -lo;
                    row[col] = 1;
                    b.c.ineqs.push(row);
                }
                if let Some(hi) = r.max {
                    let mut row = vec![0; b.c.n + 1];
                    row[0] = hi;
                    row[col] = -1;
                    b.c.ineqs.push(row);
                }
            }
            out.parts.push(b);
        }
        Ok(Set(out))
    }

    /// Per space, the intersection of every constraint direction found in the pieces, each
    /// moved outward just enough to contain all points: a single conjunction containing the
    /// set, exact when the set is one convex piece without locals.
    pub fn simple_hull(&self) -> Result<Set, Error> {
        let mut out = Rel::empty(self.0.params.clone());
        for t in self.tuples() {
            let mine = self.restrict_to(&t);
            let mut pieces = Vec::new();
            for b in &mine.0.parts {
                pieces.extend(b.stride_form()?);
            }
            if pieces.is_empty() {
                continue;
            }
            let nf = pieces[0].nfix();
            let mut dirs: Vec<Vec<i64>> = Vec::new();
            for p in &pieces {
                for r in &p.c.ineqs {
                    dirs.push(r[1..=nf].to_vec());
                }
                for r in &p.c.eqs {
                    if r[nf + 1..].iter().all(|&x| x == 0) {
                        dirs.push(r[1..=nf].to_vec());
                        dirs.push(r[1..=nf].iter().map(|&x| -x).collect());
                    }
                }
            }
            dirs.sort();
            dirs.dedup();
            let mut hull = Basic::universe(self.0.params.len(), None, t.clone());
            for dir in dirs {
                let mut row = vec![0];
                row.extend(&dir);
                let mut min: Option<Option<i64>> = None;
                for p in &pieces {
                    if let Some(r) = Rel::range_of(p, &row)? {
                        min = Some(match min {
                            None => r.lo,
                            Some(m) => m.zip(r.lo).map(|(x, y)| x.min(y)),
                        });
                    }
                }
                if let Some(Some(m)) = min {
                    row[0] = -m;
                    hull.c.ineqs.push(row);
                }
            }
            hull.c.normalize()?;
            out.parts.push(hull);
        }
        Ok(Set(out))
    }

    fn restrict_to(&self, t: &Tuple) -> Set {
        Set(Rel {
            params: self.0.params.clone(),
            parts: self
                .0
                .parts
                .iter()
                .filter(|b| b.ran == *t)
                .cloned()
                .collect(),
        })
    }

    /// Every point, sorted, as (tuple, coordinates). Needs a bounded set without parameters.
    pub fn points(&self) -> Result<Vec<(Tuple, Vec<i64>)>, Error> {
        if !self.0.params.is_empty() {
            return Err(Error::Parametric("point enumeration"));
        }
        let mut pts: Vec<(Tuple, Vec<i64>)> = Vec::new();
        self.0.for_each_point(&mut |b, x| {
            pts.push((b.ran.clone(), x.to_vec()));
            Ok(())
        })?;
        pts.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        pts.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        Ok(pts)
    }

    /// The number of points. Needs a bounded set without parameters.
    pub fn count(&self) -> Result<u64, Error> {
        Ok(self.points()?.len() as u64)
    }

    /// Removes empty pieces, redundant constraints, implicit equalities and locals that can be
    /// written as congruences, and pieces covered by other pieces.
    pub fn simplify(&self) -> Result<Set, Error> {
        Ok(Set(self.0.simplify()?))
    }
}

/// Whether the non-local assignment `vals` of `b` extends to its locals.
pub(crate) fn member(b: &Basic, vals: &[i64]) -> Result<bool, Error> {
    let mut c = b.c.clone();
    for &v in vals {
        c = c.fix(0, v)?;
    }
    if b.nd == 0 {
        return c.contains_point(&[]);
    }
    super::omega::is_feasible(&c)
}

impl FromStr for Set {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Set, ParseError> {
        let (r, is_map) = parse(s)?;
        if is_map {
            return Err(ParseError {
                pos: 0,
                message: "expected a set, found a map".into(),
            });
        }
        Ok(Set(r))
    }
}

impl fmt::Display for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
