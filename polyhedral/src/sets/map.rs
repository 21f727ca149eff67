//! [`Map`]: a union of integer relations between named tuples.

use super::int::{widening, Fail};
use super::parse::{parse, ParseError};
use super::rel::{narrow_int, Basic, Rel};
use super::set::{member, Set};
use super::space::Tuple;
use super::Error;
use std::fmt;
use std::str::FromStr;

/// One element of a map: domain tuple and point, range tuple and point.
pub type Pair = (Tuple, Vec<i64>, Tuple, Vec<i64>);

/// A finite union of basic maps; see the [module docs](super).
#[derive(Clone, Debug)]
pub struct Map(pub(crate) Rel);

fn params_of(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| (*s).to_owned()).collect()
}

fn single(params: &[&str], b: Basic) -> Map {
    Map(Rel {
        params: params_of(params),
        parts: vec![b],
    })
}

/// How the first differing dimension compares in a lexicographic order map.
#[derive(Clone, Copy)]
enum Cmp {
    Lt,
    Gt,
}

fn lex_at(params: &[&str], dom: &Tuple, ran: &Tuple, depth: usize, cmp: Cmp) -> Basic {
    let mut b = Basic::universe(params.len(), Some(dom.clone()), ran.clone());
    let (np, ni) = (b.np, b.ni());
    for j in 0..=depth {
        let mut r = vec![0; b.c.n + 1];
        r[1 + np + j] = -1;
        r[1 + np + ni + j] = 1;
        if j < depth {
            b.c.eqs.push(r);
        } else {
            if let Cmp::Gt = cmp {
                r = r.iter().map(|x| -x).collect();
            }
            r[0] = -1;
            b.c.ineqs.push(r);
        }
    }
    b
}

impl Map {
    /// Builds a basic map from constraint rows `[constant, params…, domain dims…, range
    /// dims…] · (1, x) ≥ 0` (inequalities) and `= 0` (equalities).
    pub fn from_constraints(
        params: &[&str],
        dom: Tuple,
        ran: Tuple,
        eqs: &[Vec<i64>],
        ineqs: &[Vec<i64>],
    ) -> Result<Map, Error> {
        Map::from_constraints_with_locals(params, dom, ran, 0, eqs, ineqs)
    }

    /// [`Map::from_constraints`] with `locals` existentially quantified variables after the
    /// range dimensions: rows are `[constant, params…, domain dims…, range dims…, locals…]`.
    ///
    /// ```
    /// use polyhedral::sets::{Map, Tuple};
    ///
    /// // { S[t] -> A[a] : exists q : a = t - 2q and 0 <= t - 2q <= 1 }: A[t mod 2].
    /// let eqs = [vec![0, 1, -1, -2]];
    /// let ineqs = [vec![0, 1, 0, -2], vec![1, -1, 0, 2]];
    /// let dom = Tuple::new(Some("S"), &["t"]);
    /// let ran = Tuple::anonymous_dims(Some("A"), 1);
    /// let m = Map::from_constraints_with_locals(&[], dom, ran, 1, &eqs, &ineqs).unwrap();
    /// assert!(m.contains(&[5], &[1]).unwrap());
    /// assert!(!m.contains(&[5], &[0]).unwrap());
    /// ```
    pub fn from_constraints_with_locals(
        params: &[&str],
        dom: Tuple,
        ran: Tuple,
        locals: usize,
        eqs: &[Vec<i64>],
        ineqs: &[Vec<i64>],
    ) -> Result<Map, Error> {
        let mut b = Basic::universe(params.len(), Some(dom), ran);
        b.add_locals(locals);
        let width = b.c.n + 1;
        if eqs.iter().chain(ineqs).any(|r| r.len() != width) {
            return Err(Error::Space(format!(
                "constraint rows must have {width} entries"
            )));
        }
        b.c.eqs = eqs.to_vec();
        b.c.ineqs = ineqs.to_vec();
        Ok(single(params, b))
    }

    pub fn universe(params: &[&str], dom: Tuple, ran: Tuple) -> Map {
        single(params, Basic::universe(params.len(), Some(dom), ran))
    }

    pub fn empty(params: &[&str]) -> Map {
        Map(Rel::empty(params_of(params)))
    }

    /// `{ t[x] -> t[x] }`.
    pub fn identity(params: &[&str], t: Tuple) -> Map {
        Map::eq_prefix(params, &t, &t, t.arity())
    }

    /// Pairs whose first `depth` dimensions are equal.
    pub fn eq_prefix(params: &[&str], dom: &Tuple, ran: &Tuple, depth: usize) -> Map {
        let mut b = Basic::universe(params.len(), Some(dom.clone()), ran.clone());
        let (np, ni) = (b.np, b.ni());
        for j in 0..depth.min(dom.arity()).min(ran.arity()) {
            let mut r = vec![0; b.c.n + 1];
            r[1 + np + j] = -1;
            r[1 + np + ni + j] = 1;
            b.c.eqs.push(r);
        }
        single(params, b)
    }

    /// `{ x -> y : x_0..depth−1 = y_0..depth−1 and x_depth < y_depth }`: `x` precedes `y`
    /// and they first differ at `depth`.
    pub fn lex_lt_at(
        params: &[&str],
        dom: &Tuple,
        ran: &Tuple,
        depth: usize,
    ) -> Result<Map, Error> {
        if depth >= dom.arity().min(ran.arity()) {
            return Err(Error::Space(format!(
                "depth {depth} beyond the tuples' common dimensions"
            )));
        }
        Ok(single(params, lex_at(params, dom, ran, depth, Cmp::Lt)))
    }

    /// Like [`Map::lex_lt_at`] with `x_depth > y_depth`.
    pub fn lex_gt_at(
        params: &[&str],
        dom: &Tuple,
        ran: &Tuple,
        depth: usize,
    ) -> Result<Map, Error> {
        if depth >= dom.arity().min(ran.arity()) {
            return Err(Error::Space(format!(
                "depth {depth} beyond the tuples' common dimensions"
            )));
        }
        Ok(single(params, lex_at(params, dom, ran, depth, Cmp::Gt)))
    }

    /// `x ≺ y` on the common leading dimensions.
    pub fn lex_lt(params: &[&str], dom: &Tuple, ran: &Tuple) -> Map {
        Map::lex_union(params, dom, ran, Cmp::Lt, false)
    }

    /// `x ⪯ y` on the common leading dimensions.
    pub fn lex_le(params: &[&str], dom: &Tuple, ran: &Tuple) -> Map {
        Map::lex_union(params, dom, ran, Cmp::Lt, true)
    }

    pub fn lex_gt(params: &[&str], dom: &Tuple, ran: &Tuple) -> Map {
        Map::lex_union(params, dom, ran, Cmp::Gt, false)
    }

    pub fn lex_ge(params: &[&str], dom: &Tuple, ran: &Tuple) -> Map {
        Map::lex_union(params, dom, ran, Cmp::Gt, true)
    }

    fn lex_union(params: &[&str], dom: &Tuple, ran: &Tuple, cmp: Cmp, eq: bool) -> Map {
        let k = dom.arity().min(ran.arity());
        let mut parts: Vec<Basic> = (0..k).map(|d| lex_at(params, dom, ran, d, cmp)).collect();
        if eq {
            parts.extend(Map::eq_prefix(params, dom, ran, k).0.parts);
        }
        Map(Rel {
            params: params_of(params),
            parts,
        })
    }

    /// `{ x -> y : x ∈ dom, y ∈ ran }`.
    pub fn from_domain_and_range(dom: &Set, ran: &Set) -> Map {
        let (d, r) = Rel::align(&dom.0, &ran.0);
        let mut out = Rel::empty(d.params.clone());
        for a in &d.parts {
            for b in &r.parts {
                let u = Basic::universe(a.np, Some(a.ran.clone()), b.ran.clone());
                let m = Rel {
                    params: d.params.clone(),
                    parts: vec![u],
                };
                let m = m
                    .intersect_side(
                        &Rel {
                            params: d.params.clone(),
                            parts: vec![a.clone()],
                        },
                        true,
                    )
                    .intersect_side(
                        &Rel {
                            params: d.params.clone(),
                            parts: vec![b.clone()],
                        },
                        false,
                    );
                out.parts.extend(m.parts);
            }
        }
        Map(out)
    }

    pub fn params(&self) -> &[String] {
        &self.0.params
    }

    pub fn n_basic(&self) -> usize {
        self.0.parts.len()
    }

    pub fn intersect(&self, o: &Map) -> Map {
        Map(self.0.intersect(&o.0))
    }

    pub fn union(&self, o: &Map) -> Map {
        Map(self.0.union(&o.0))
    }

    /// Pairs of `self` not in `o`, exactly.
    pub fn subtract(&self, o: &Map) -> Result<Map, Error> {
        widening!(T => self.0.cast::<T>().subtract(&o.0.cast::<T>())?.narrow()).map(Map)
    }

    pub fn is_empty(&self) -> Result<bool, Error> {
        widening!(T => Ok(self.0.cast::<T>().is_empty()?))
    }

    pub fn is_subset(&self, o: &Map) -> Result<bool, Error> {
        widening!(T => Ok(self.0.cast::<T>().is_subset(&o.0.cast::<T>())?))
    }

    pub fn is_equal(&self, o: &Map) -> Result<bool, Error> {
        widening!(T => {
            let (a, b) = (self.0.cast::<T>(), o.0.cast::<T>());
            Ok(a.is_subset(&b)? && b.is_subset(&a)?)
        })
    }

    /// `{ y -> x : (x, y) ∈ self }`.
    pub fn reverse(&self) -> Map {
        Map(self.0.reverse())
    }

    /// `{ x -> z : ∃y: (x, y) ∈ self, (y, z) ∈ o }` (isl's `apply_range`).
    pub fn apply_range(&self, o: &Map) -> Map {
        Map(self.0.apply_range(&o.0))
    }

    /// `{ z -> y : ∃x: (x, y) ∈ self, (x, z) ∈ o }` (isl's `apply_domain`).
    pub fn apply_domain(&self, o: &Map) -> Map {
        Map(self.0.reverse().apply_range(&o.0).reverse())
    }

    /// Function composition `o ∘ self`: the same as [`Map::apply_range`].
    pub fn compose(&self, o: &Map) -> Map {
        self.apply_range(o)
    }

    pub fn domain(&self) -> Set {
        Set(self.0.project_side(true))
    }

    pub fn range(&self) -> Set {
        Set(self.0.project_side(false))
    }

    pub fn intersect_domain(&self, s: &Set) -> Map {
        Map(self.0.intersect_side(&s.0, true))
    }

    pub fn intersect_range(&self, s: &Set) -> Map {
        Map(self.0.intersect_side(&s.0, false))
    }

    /// The distance vectors `{ y − x : (x, y) ∈ self }` of pieces with equal arities.
    pub fn deltas(&self) -> Set {
        Set(self.0.deltas())
    }

    /// For every domain point (and parameter value), its lexicographically smallest image;
    /// a single-valued map. Domain points with no smallest image (unbounded) are left out.
    pub fn lexmin(&self) -> Result<Map, Error> {
        widening!(T => self.0.cast::<T>().lexopt(false)?.narrow()).map(Map)
    }

    /// For every domain point (and parameter value), its lexicographically largest image.
    pub fn lexmax(&self) -> Result<Map, Error> {
        widening!(T => self.0.cast::<T>().lexopt(true)?.narrow()).map(Map)
    }

    /// Removes empty pieces, redundant constraints, implicit equalities and locals that can be
    /// written as congruences, and pieces covered by other pieces.
    pub fn simplify(&self) -> Result<Map, Error> {
        widening!(T => self.0.cast::<T>().simplify()?.narrow()).map(Map)
    }

    /// Whether `(x, y)` is in the map (with parameter values first in `x` when there are
    /// parameters: `x = params ++ domain point`).
    pub fn contains(&self, x: &[i64], y: &[i64]) -> Result<bool, Error> {
        let np = self.0.params.len();
        if x.len() < np {
            return Err(Error::Space("missing parameter values".into()));
        }
        let vals: Vec<i64> = x.iter().chain(y).copied().collect();
        for b in &self.0.parts {
            if b.ni() + np != x.len() || b.no() != y.len() {
                continue;
            }
            if member(b, &vals)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Every pair `(domain point, range point)` with its tuples. Needs a bounded map without
    /// parameters.
    pub fn pairs(&self) -> Result<Vec<Pair>, Error> {
        if !self.0.params.is_empty() {
            return Err(Error::Parametric("pair enumeration"));
        }
        let mut out = widening!(T => {
            let mut out = Vec::new();
            self.0.cast::<T>().for_each_point(&mut |b, x| {
                let ni = b.ni();
                let dom = b
                    .dom
                    .clone()
                    .unwrap_or_else(|| Tuple::anonymous_dims(None, 0));
                let x: Vec<i64> = x
                    .iter()
                    .map(|v| narrow_int(v, "a coordinate"))
                    .collect::<Result<_, Fail>>()?;
                out.push((dom, x[..ni].to_vec(), b.ran.clone(), x[ni..].to_vec()));
                Ok(())
            })?;
            Ok(out)
        })?;
        out.sort_by(|a, b| (&a.0, &a.1, &a.2, &a.3).cmp(&(&b.0, &b.1, &b.2, &b.3)));
        out.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1 && a.2 == b.2 && a.3 == b.3);
        Ok(out)
    }
}

impl FromStr for Map {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Map, ParseError> {
        let (r, is_map) = parse(s)?;
        if !is_map && !r.parts.is_empty() {
            return Err(ParseError {
                pos: 0,
                message: "expected a map, found a set".into(),
            });
        }
        Ok(Map(r))
    }
}

impl fmt::Display for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
