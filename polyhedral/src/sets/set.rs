//! [`Set`]: a union of integer polyhedra with locals, over named tuples.
//!
//! Every method that does arithmetic runs inside [`widening!`], so an intermediate value that
//! outgrows `i64` restarts it on wider integers; see [`super::int`].

use super::conj::Conj;
use super::int::{widening, Fail, Int};
use super::map::Map;
use super::omega::Interval;
use super::parse::{parse, ParseError};
use super::rel::{narrow_int, Basic, Rel};
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

/// The pieces of `r` in tuple `t`.
fn restrict_to<T: Int>(r: &Rel<T>, t: &Tuple) -> Rel<T> {
    Rel {
        params: r.params.clone(),
        parts: r.parts.iter().filter(|b| b.ran == *t).cloned().collect(),
    }
}

/// The distinct tuples the pieces of `r` live in, sorted.
fn tuples_of<T: Int>(r: &Rel<T>) -> Vec<Tuple> {
    let mut v: Vec<Tuple> = r.parts.iter().map(|b| b.ran.clone()).collect();
    v.sort();
    v.dedup();
    v
}

/// Exact integer range of dimension `d` over the pieces of `r` that have it.
fn dim_range_in<T: Int>(r: &Rel<T>, d: usize) -> Result<Option<Interval<T>>, Fail> {
    let mut acc: Option<Interval<T>> = None;
    for b in &r.parts {
        if d >= b.no() {
            continue;
        }
        let mut row = vec![T::zero(); b.nfix() + 1];
        row[1 + b.np + d] = T::one();
        if let Some(x) = Rel::range_of(b, &row)? {
            acc = Some(match acc {
                None => (x.lo, x.hi),
                Some((lo, hi)) => (
                    lo.zip(x.lo).map(|(a, b)| a.min(b)),
                    hi.zip(x.hi).map(|(a, b)| a.max(b)),
                ),
            });
        }
    }
    Ok(acc)
}

/// See [`Set::box_hull`].
fn box_hull_in<T: Int>(r: &Rel<T>) -> Result<Rel, Fail> {
    let mut out = Rel::<T>::empty(r.params.clone());
    for t in tuples_of(r) {
        let mine = restrict_to(r, &t);
        if mine.is_empty()? {
            continue;
        }
        let mut b = Basic::universe(r.params.len(), None, t.clone());
        for d in 0..t.arity() {
            let Some((lo, hi)) = dim_range_in(&mine, d)? else {
                continue;
            };
            let col = 1 + b.np + d;
            if let Some(lo) = lo {
                let mut row = vec![T::zero(); b.c.n + 1];
                row[0] = lo.neg()?;
                row[col] = T::one();
                b.c.ineqs.push(row);
            }
            if let Some(hi) = hi {
                let mut row = vec![T::zero(); b.c.n + 1];
                row[0] = hi;
                row[col] = T::from_i64(-1);
                b.c.ineqs.push(row);
            }
        }
        out.parts.push(b);
    }
    out.narrow()
}

/// See [`Set::simple_hull`].
fn simple_hull_in<T: Int>(r: &Rel<T>) -> Result<Rel, Fail> {
    let mut out = Rel::<T>::empty(r.params.clone());
    for t in tuples_of(r) {
        let mine = restrict_to(r, &t);
        let mut pieces = Vec::new();
        for b in &mine.parts {
            pieces.extend(b.stride_form()?);
        }
        if pieces.is_empty() {
            continue;
        }
        let nf = pieces[0].nfix();
        let mut dirs: Vec<Vec<T>> = Vec::new();
        for p in &pieces {
            for r in &p.c.ineqs {
                dirs.push(r[1..=nf].to_vec());
            }
            for r in &p.c.eqs {
                if r[nf + 1..].iter().all(Int::is_zero) {
                    dirs.push(r[1..=nf].to_vec());
                    dirs.push(r[1..=nf].iter().map(Int::neg).collect::<Result<_, _>>()?);
                }
            }
        }
        dirs.sort();
        dirs.dedup();
        let mut hull = Basic::universe(r.params.len(), None, t.clone());
        for dir in dirs {
            let mut row = vec![T::zero()];
            row.extend(dir);
            // The minimum of the direction over all pieces; unbounded below in one piece is
            // unbounded below overall.
            let mut min: Option<Option<T>> = None;
            for p in &pieces {
                if let Some(x) = Rel::range_of(p, &row)? {
                    min = Some(match min {
                        None => x.lo,
                        Some(m) => m.zip(x.lo).map(|(a, b)| a.min(b)),
                    });
                }
            }
            if let Some(Some(m)) = min {
                row[0] = m.neg()?;
                hull.c.ineqs.push(row);
            }
        }
        hull.c.normalize()?;
        out.parts.push(hull);
    }
    out.narrow()
}

/// The lexicographically smallest (largest with `max`) point of `r`, parameters first.
fn lex_point_in<T: Int>(r: &Rel<T>, max: bool) -> Result<Option<Vec<i64>>, Fail> {
    let mut best: Option<Vec<T>> = None;
    for b in &r.parts {
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
    best.map(|p| p.iter().map(|x| narrow_int(x, "a coordinate")).collect())
        .transpose()
}

/// Every point of `r` as (tuple, coordinates), unsorted.
fn points_in<T: Int>(r: &Rel<T>) -> Result<Vec<(Tuple, Vec<i64>)>, Fail> {
    let mut pts: Vec<(Tuple, Vec<i64>)> = Vec::new();
    r.for_each_point(&mut |b, x| {
        let x = x
            .iter()
            .map(|v| narrow_int(v, "a coordinate"))
            .collect::<Result<_, _>>()?;
        pts.push((b.ran.clone(), x));
        Ok(())
    })?;
    Ok(pts)
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
    ///
    /// ```
    /// use polyhedral::sets::{Set, Tuple};
    ///
    /// // { S[i] : i >= 0 and 9 - i >= 0 }
    /// let rows = [vec![0, 1], vec![9, -1]];
    /// let s = Set::from_constraints(&[], Tuple::new(Some("S"), &["i"]), &[], &rows).unwrap();
    /// assert_eq!(s.count().unwrap(), 10);
    /// ```
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
        tuples_of(&self.0)
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
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let a: Set = "{ [i] : 0 <= i < 10 }".parse().unwrap();
    /// let b: Set = "{ [i] : i mod 3 = 0 }".parse().unwrap();
    /// let d = a.subtract(&b).unwrap();
    /// assert_eq!(d.count().unwrap(), 6);
    /// ```
    pub fn subtract(&self, o: &Set) -> Result<Set, Error> {
        widening!(T => self.0.cast::<T>().subtract(&o.0.cast::<T>())?.narrow()).map(Set)
    }

    /// Whether the set has no integer point (for any parameter value).
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// // 3x is 3 or 6 at x = 1, 2: never in [4, 5].
    /// let s: Set = "{ [x] : 4 <= 3x <= 5 }".parse().unwrap();
    /// assert!(s.is_empty().unwrap());
    /// ```
    pub fn is_empty(&self) -> Result<bool, Error> {
        widening!(T => Ok(self.0.cast::<T>().is_empty()?))
    }

    /// Whether every point of `self` is in `o`.
    pub fn is_subset(&self, o: &Set) -> Result<bool, Error> {
        widening!(T => Ok(self.0.cast::<T>().is_subset(&o.0.cast::<T>())?))
    }

    /// Whether `self` and `o` have the same points.
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let a: Set = "{ [i] : 0 <= i <= 4 and i mod 2 = 0 }".parse().unwrap();
    /// let b: Set = "{ [0]; [2]; [4] }".parse().unwrap();
    /// assert!(a.is_equal(&b).unwrap());
    /// ```
    pub fn is_equal(&self, o: &Set) -> Result<bool, Error> {
        widening!(T => {
            let (a, b) = (self.0.cast::<T>(), o.0.cast::<T>());
            Ok(a.is_subset(&b)? && b.is_subset(&a)?)
        })
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
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let s: Set = "{ [i, j] : 0 <= j < 4 and i = 3j }".parse().unwrap();
    /// let p = s.project_out(1, 1);
    /// assert!(p.is_equal(&"{ [i] : 0 <= i <= 9 and i mod 3 = 0 }".parse().unwrap()).unwrap());
    /// ```
    pub fn project_out(&self, first: usize, n: usize) -> Set {
        Set(self.0.project_out(first, n))
    }

    /// The image `{ y : ∃x ∈ self, (x, y) ∈ m }`.
    pub fn apply(&self, m: &Map) -> Set {
        Set(self.0.apply_range(&m.0))
    }

    /// The preimage `{ x : ∃y ∈ self, (x, y) ∈ m }`.
    ///
    /// ```
    /// use polyhedral::sets::{Map, Set};
    ///
    /// let s: Set = "{ A[a] : 4 <= a <= 6 }".parse().unwrap();
    /// let m: Map = "{ S[i] -> A[2i] }".parse().unwrap();
    /// assert!(s.preimage(&m).is_equal(&"{ S[i] : 2 <= i <= 3 }".parse().unwrap()).unwrap());
    /// ```
    pub fn preimage(&self, m: &Map) -> Set {
        Set(m.0.intersect_side(&self.0, false).project_side(true))
    }

    /// The same points with every local that is not a congruence eliminated (exact
    /// projection): cheaper to ask many questions of.
    pub(crate) fn without_locals(&self) -> Result<Set, Error> {
        widening!(T => {
            let r = self.0.cast::<T>();
            let mut parts = Vec::new();
            for b in &r.parts {
                parts.extend(b.stride_form()?);
            }
            Rel { params: r.params.clone(), parts }.narrow()
        })
        .map(Set)
    }

    /// The lexicographically smallest point per space and per parameter value.
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let s: Set = "[N] -> { [i, j] : 0 <= i < N and i < j < N }".parse().unwrap();
    /// let m = s.lexmin().unwrap();
    /// assert!(m.is_equal(&"[N] -> { [0, 1] : N >= 2 }".parse().unwrap()).unwrap());
    /// ```
    pub fn lexmin(&self) -> Result<Set, Error> {
        widening!(T => self.0.cast::<T>().lexopt(false)?.narrow()).map(Set)
    }

    /// The lexicographically largest point per space and per parameter value.
    pub fn lexmax(&self) -> Result<Set, Error> {
        widening!(T => self.0.cast::<T>().lexopt(true)?.narrow()).map(Set)
    }

    /// The lexicographically smallest point, parameters first: `None` if empty.
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let s: Set = "{ [i, j] : 0 <= i <= 3 and 0 <= j <= 3 and i + j = 4 }".parse().unwrap();
    /// assert_eq!(s.lexmin_point().unwrap(), Some(vec![1, 3]));
    /// assert_eq!(s.lexmax_point().unwrap(), Some(vec![3, 1]));
    /// ```
    pub fn lexmin_point(&self) -> Result<Option<Vec<i64>>, Error> {
        self.lex_point(false)
    }

    /// The lexicographically largest point, parameters first: `None` if empty.
    pub fn lexmax_point(&self) -> Result<Option<Vec<i64>>, Error> {
        self.lex_point(true)
    }

    fn lex_point(&self, max: bool) -> Result<Option<Vec<i64>>, Error> {
        if self.tuples().len() > 1 {
            return Err(Error::Space(
                "lexicographic point of a set over several tuples".into(),
            ));
        }
        widening!(T => lex_point_in(&self.0.cast::<T>(), max))
    }

    /// Exact integer minimum and maximum of dimension `d` over all points (and all parameter
    /// values); `None` when no piece with that dimension is non-empty.
    ///
    /// ```
    /// use polyhedral::sets::{DimRange, Set};
    ///
    /// let s: Set = "{ [i, j] : 0 <= i <= 5 and 2j = i }".parse().unwrap();
    /// assert_eq!(s.dim_range(1).unwrap(), Some(DimRange { min: Some(0), max: Some(2) }));
    /// ```
    pub fn dim_range(&self, d: usize) -> Result<Option<DimRange>, Error> {
        widening!(T => {
            let Some((lo, hi)) = dim_range_in(&self.0.cast::<T>(), d)? else {
                return Ok(None);
            };
            Ok(Some(DimRange {
                min: lo.map(|x| narrow_int(&x, "a bound")).transpose()?,
                max: hi.map(|x| narrow_int(&x, "a bound")).transpose()?,
            }))
        })
    }

    /// The smallest box `lo ≤ x_d ≤ hi` (constant bounds) containing each space's points.
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let s: Set = "{ [i, j] : 0 <= i <= 4 and 0 <= j <= i }".parse().unwrap();
    /// let b = s.box_hull().unwrap();
    /// assert!(b.is_equal(&"{ [i, j] : 0 <= i <= 4 and 0 <= j <= 4 }".parse().unwrap()).unwrap());
    /// ```
    pub fn box_hull(&self) -> Result<Set, Error> {
        widening!(T => box_hull_in(&self.0.cast::<T>())).map(Set)
    }

    /// Per space, the intersection of every constraint direction found in the pieces, each
    /// moved outward just enough to contain all points: a single conjunction containing the
    /// set, exact when the set is one convex piece without locals.
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let s: Set = "{ [i, j] : 0 <= i <= 2 and j = 0; [i, j] : 0 <= i <= 2 and j = 3 }"
    ///     .parse()
    ///     .unwrap();
    /// let h = s.simple_hull().unwrap();
    /// assert!(h.is_equal(&"{ [i, j] : 0 <= i <= 2 and 0 <= j <= 3 }".parse().unwrap()).unwrap());
    /// ```
    pub fn simple_hull(&self) -> Result<Set, Error> {
        widening!(T => simple_hull_in(&self.0.cast::<T>())).map(Set)
    }

    /// Every point, sorted, as (tuple, coordinates). Needs a bounded set without parameters.
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let s: Set = "{ [i] : 0 <= 2i <= 5 }".parse().unwrap();
    /// let pts: Vec<Vec<i64>> = s.points().unwrap().into_iter().map(|p| p.1).collect();
    /// assert_eq!(pts, [[0], [1], [2]]);
    /// ```
    pub fn points(&self) -> Result<Vec<(Tuple, Vec<i64>)>, Error> {
        if !self.0.params.is_empty() {
            return Err(Error::Parametric("point enumeration"));
        }
        let mut pts = widening!(T => points_in(&self.0.cast::<T>()))?;
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
    ///
    /// ```
    /// use polyhedral::sets::Set;
    ///
    /// let s: Set = "{ [i] : 0 <= i <= 5 and i <= 7 and 2 <= i + 2; [i] : 3 <= i <= 4 }"
    ///     .parse()
    ///     .unwrap();
    /// let t = s.simplify().unwrap();
    /// assert_eq!(t.n_basic(), 1);
    /// assert_eq!(t.to_string(), "{ [i] : i >= 0 and 5 >= i }");
    /// ```
    pub fn simplify(&self) -> Result<Set, Error> {
        widening!(T => self.0.cast::<T>().simplify()?.narrow()).map(Set)
    }
}

/// Whether the non-local assignment `vals` of `b` extends to its locals.
pub(crate) fn member(b: &Basic, vals: &[i64]) -> Result<bool, Error> {
    widening!(T => {
        let mut c = b.c.cast::<T>();
        for &v in vals {
            c = c.fix(0, &T::from_i64(v))?;
        }
        if b.nd == 0 {
            return Ok(c.contains_point(&[])?);
        }
        Ok(super::omega::feasible(&c)?)
    })
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
