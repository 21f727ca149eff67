//! Conjunctions of integer affine constraints: the row store every set operation works on.
//!
//! A [`Conj`] holds `n` integer variables and two lists of rows, equalities (`row · (1, x) = 0`)
//! and inequalities (`row · (1, x) ≥ 0`). Every row has `n + 1` entries; entry 0 is the constant
//! term, entry `1 + v` the coefficient of variable `v`. All variables range over the integers.
//!
//! The entries are of any [`Int`] type; sets and maps store `i64` (the default) and the
//! operations compute on wider types when an intermediate value needs it (see
//! [`super::int`]). Arithmetic is checked: an overflow is reported, never wrapped.
//! [`Conj::normalize`] keeps rows small (gcd division, integer tightening of inequality
//! constants), which is what keeps the `i64` path sufficient in practice.

use super::int::{Int, Overflow};
use super::Error;

pub(crate) type Row<T = i64> = Vec<T>;

/// `a + b` for constraint rows built outside the exact core, where an overflow means the row
/// itself cannot be stored.
pub(crate) fn add(a: i64, b: i64) -> Result<i64, Error> {
    a.checked_add(b)
        .ok_or(Error::TooLarge("a constraint coefficient"))
}

/// `ca · a + cb · b`, entry by entry.
pub(crate) fn combine<T: Int>(a: &[T], ca: &T, b: &[T], cb: &T) -> Result<Row<T>, Overflow> {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.mul(ca)?.add(&y.mul(cb)?))
        .collect()
}

pub(crate) fn negate<T: Int>(a: &[T]) -> Result<Row<T>, Overflow> {
    a.iter().map(Int::neg).collect()
}

/// The gcd of a row's coefficients (entry 0 excluded).
pub(crate) fn coef_gcd<T: Int>(r: &[T]) -> Result<T, Overflow> {
    let mut g = T::zero();
    for x in &r[1..] {
        if !x.is_zero() {
            g = g.gcd(x)?;
            if g.is_one() {
                break;
            }
        }
    }
    Ok(g)
}

/// A fast hash of a coefficient vector (of its negation with `negated`), for grouping
/// parallel rows; equal hashes are confirmed by comparing the rows.
fn row_hash<T: Int>(r: &[T], negated: bool) -> u64 {
    r.iter().fold(0x9e37_79b9_7f4a_7c15, |h: u64, x| {
        (h.rotate_left(5) ^ x.fingerprint(negated)).wrapping_mul(0x517c_c1b7_2722_0a95)
    })
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Conj<T = i64> {
    pub n: usize,
    pub eqs: Vec<Row<T>>,
    pub ineqs: Vec<Row<T>>,
}

impl Conj {
    /// The same conjunction over integer type `U` (exact: every type holds every `i64`).
    pub fn cast<U: Int>(&self) -> Conj<U> {
        let rows = |v: &Vec<Row>| {
            v.iter()
                .map(|r| r.iter().map(|&x| U::from_i64(x)).collect())
                .collect()
        };
        Conj {
            n: self.n,
            eqs: rows(&self.eqs),
            ineqs: rows(&self.ineqs),
        }
    }
}

impl<T: Int> Conj<T> {
    pub fn universe(n: usize) -> Conj<T> {
        Conj {
            n,
            eqs: Vec::new(),
            ineqs: Vec::new(),
        }
    }

    /// An obviously infeasible conjunction (`-1 ≥ 0`).
    pub fn empty(n: usize) -> Conj<T> {
        let mut r = vec![T::zero(); n + 1];
        r[0] = T::from_i64(-1);
        Conj {
            n,
            eqs: Vec::new(),
            ineqs: vec![r],
        }
    }

    pub fn uses(&self, v: usize) -> bool {
        self.eqs
            .iter()
            .chain(&self.ineqs)
            .any(|r| !r[1 + v].is_zero())
    }

    /// Moves variable `v` to position `map[v]` in a conjunction of `new_n` variables; variables
    /// not mapped onto are unconstrained. `map` must be injective.
    pub fn remap(&self, new_n: usize, map: &[usize]) -> Conj<T> {
        let f = |r: &Row<T>| {
            let mut o = vec![T::zero(); new_n + 1];
            o[0] = r[0].clone();
            for (v, &t) in map.iter().enumerate() {
                o[1 + t] = r[1 + v].clone();
            }
            o
        };
        Conj {
            n: new_n,
            eqs: self.eqs.iter().map(f).collect(),
            ineqs: self.ineqs.iter().map(f).collect(),
        }
    }

    /// Appends `k` unconstrained variables at the end.
    pub fn add_vars(&mut self, k: usize) {
        self.n += k;
        for r in self.eqs.iter_mut().chain(self.ineqs.iter_mut()) {
            r.resize(r.len() + k, T::zero());
        }
    }

    /// Removes variables whose column is zero everywhere, given by a predicate on their index.
    pub fn drop_vars(&self, drop: &dyn Fn(usize) -> bool) -> Conj<T> {
        let keep: Vec<usize> = (0..self.n).filter(|&v| !drop(v)).collect();
        let f = |r: &Row<T>| {
            let mut o = Vec::with_capacity(keep.len() + 1);
            o.push(r[0].clone());
            o.extend(keep.iter().map(|&v| r[1 + v].clone()));
            o
        };
        Conj {
            n: keep.len(),
            eqs: self.eqs.iter().map(f).collect(),
            ineqs: self.ineqs.iter().map(f).collect(),
        }
    }

    /// Sets variable `v` to `val` and removes it.
    pub fn fix(&self, v: usize, val: &T) -> Result<Conj<T>, Overflow> {
        let f = |r: &Row<T>| -> Result<Row<T>, Overflow> {
            let mut o = Vec::with_capacity(r.len() - 1);
            o.push(r[0].add(&r[1 + v].mul(val)?)?);
            o.extend(
                r[1..]
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != v)
                    .map(|(_, x)| x.clone()),
            );
            Ok(o)
        };
        Ok(Conj {
            n: self.n - 1,
            eqs: self.eqs.iter().map(f).collect::<Result<_, _>>()?,
            ineqs: self.ineqs.iter().map(f).collect::<Result<_, _>>()?,
        })
    }

    pub fn and(&mut self, other: &Conj<T>) {
        debug_assert_eq!(self.n, other.n);
        self.eqs.extend(other.eqs.iter().cloned());
        self.ineqs.extend(other.ineqs.iter().cloned());
    }

    /// Divides rows by the gcd of their coefficients, tightens inequality constants to the
    /// integers, drops trivially true rows, merges parallel inequalities and turns opposite
    /// pairs with matching constants into equalities. Returns `false` when a contradiction was
    /// found (the conjunction is then replaced by [`Conj::empty`]). On overflow the
    /// conjunction is left unchanged.
    pub fn normalize(&mut self) -> Result<bool, Overflow> {
        // The only steps that can overflow involve the type's smallest value (its negation,
        // a gcd equal to its magnitude); refusing it up front lets every step below succeed.
        if self
            .eqs
            .iter()
            .chain(&self.ineqs)
            .any(|r| r.iter().any(Int::is_min))
        {
            return Err(Overflow);
        }
        let n = self.n;
        let mut eqs: Vec<Row<T>> = Vec::with_capacity(self.eqs.len());
        for mut r in std::mem::take(&mut self.eqs) {
            let g = coef_gcd(&r)?;
            if g.is_zero() {
                if !r[0].is_zero() {
                    *self = Conj::empty(n);
                    return Ok(false);
                }
                continue;
            }
            if !r[0].rem_floor(&g).is_zero() {
                *self = Conj::empty(n);
                return Ok(false);
            }
            // Sign convention: first non-zero coefficient positive, so duplicates compare equal.
            let flip = r[1..]
                .iter()
                .find(|x| !x.is_zero())
                .is_some_and(Int::is_neg);
            if !g.is_one() {
                for x in r.iter_mut() {
                    *x = x.div_exact(&g);
                }
            }
            if flip {
                for x in r.iter_mut() {
                    *x = x.neg()?;
                }
            }
            if !eqs.contains(&r) {
                eqs.push(r);
            }
        }
        let mut rows = std::mem::take(&mut self.ineqs);
        let mut live: Vec<usize> = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter_mut().enumerate() {
            let g = coef_gcd(r)?;
            if g.is_zero() {
                if r[0].is_neg() {
                    *self = Conj::empty(n);
                    return Ok(false);
                }
                continue;
            }
            if !g.is_one() {
                for x in r[1..].iter_mut() {
                    *x = x.div_exact(&g);
                }
                r[0] = r[0].div_floor(&g);
            }
            live.push(i);
        }
        // Parallel rows share their coefficients: sorting by (hash of the coefficients,
        // constant, position) puts the tightest row of each group first, and the group is
        // emitted where its first row stood, so the output order does not depend on the sort.
        let mut keyed: Vec<(u64, &T, usize)> = live
            .iter()
            .map(|&i| (row_hash(&rows[i][1..], false), &rows[i][0], i))
            .collect();
        keyed.sort_unstable();
        // Per group, in hash order: (hash, tightest row, first position).
        let mut groups: Vec<(u64, usize, usize)> = Vec::with_capacity(keyed.len());
        let mut run = 0;
        for &(h, _, i) in &keyed {
            if groups.last().is_none_or(|g| g.0 != h) {
                run = groups.len();
            }
            match groups[run..]
                .iter_mut()
                .find(|g| rows[g.1][1..] == rows[i][1..])
            {
                Some(g) => g.2 = g.2.min(i),
                None => groups.push((h, i, i)),
            }
        }
        let find_opposite = |key: &[T]| -> Option<usize> {
            let h = row_hash(key, true);
            let start = groups.partition_point(|g| g.0 < h);
            (start..groups.len())
                .take_while(|&g| groups[g].0 == h)
                .find(|&g| {
                    rows[groups[g].1][1..]
                        .iter()
                        .zip(key)
                        .all(|(a, b)| a.is_neg_of(b))
                })
        };
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_unstable_by_key(|&g| groups[g].2);
        let mut done: Vec<bool> = vec![false; groups.len()];
        // Rows kept, by position in `rows`: moved out once every group is settled.
        let mut kept: Vec<usize> = Vec::with_capacity(groups.len());
        for &gi in &order {
            if done[gi] {
                continue;
            }
            done[gi] = true;
            let rep = groups[gi].1;
            if let Some(gj) = find_opposite(&rows[rep][1..]) {
                let c2 = &rows[groups[gj].1][0];
                // key·x ≥ -c and key·x ≤ c2.
                match rows[rep][0].sum_sign(c2) {
                    std::cmp::Ordering::Less => {
                        *self = Conj::empty(n);
                        return Ok(false);
                    }
                    std::cmp::Ordering::Equal => {
                        done[gj] = true;
                        let key = &rows[rep][1..];
                        let first_neg = key.iter().find(|x| !x.is_zero()).is_some_and(Int::is_neg);
                        let r = if first_neg {
                            negate(&rows[rep])?
                        } else {
                            rows[rep].clone()
                        };
                        if !eqs.contains(&r) {
                            eqs.push(r);
                        }
                        continue;
                    }
                    std::cmp::Ordering::Greater => {}
                }
            }
            kept.push(rep);
        }
        self.eqs = eqs;
        self.ineqs = kept
            .into_iter()
            .map(|i| std::mem::take(&mut rows[i]))
            .collect();
        Ok(true)
    }

    /// Whether one row of the conjunction already states `r ≥ 0` (`eq == false`) or `r = 0`:
    /// the same coefficients up to a positive factor and a constant at least as tight. A cheap
    /// syntactic test; `false` says nothing (also on overflow).
    pub fn states(&self, r: &[T], eq: bool) -> bool {
        let Ok(g) = coef_gcd(r) else { return false };
        if g.is_zero() {
            return false;
        }
        let reduced: Vec<T> = r[1..].iter().map(|x| x.div_exact(&g)).collect();
        let same = |s: &Row<T>| s[1..] == reduced[..];
        let opposite = |s: &Row<T>| s[1..].iter().zip(&reduced).all(|(a, b)| a.is_neg_of(b));
        // r = g·(k·x) + r0; the tightened constant of `r/g ≥ 0` is floor(r0 / g).
        if eq {
            if !r[0].rem_floor(&g).is_zero() {
                return false;
            }
            let c = r[0].div_exact(&g);
            return self
                .eqs
                .iter()
                .any(|s| (same(s) && s[0] == c) || (opposite(s) && s[0].is_neg_of(&c)));
        }
        let c = r[0].div_floor(&g);
        self.ineqs.iter().any(|s| same(s) && s[0] <= c)
            || self.eqs.iter().any(|s| {
                (same(s) && c >= s[0])
                    || (opposite(s) && c.sum_sign(&s[0]) != std::cmp::Ordering::Less)
            })
    }

    /// Evaluates every row at an integer point of all `n` variables.
    pub fn contains_point(&self, x: &[T]) -> Result<bool, Overflow> {
        let eval = |r: &Row<T>| -> Result<T, Overflow> {
            let mut s = r[0].clone();
            for (c, v) in r[1..].iter().zip(x) {
                if !c.is_zero() {
                    s = s.add(&c.mul(v)?)?;
                }
            }
            Ok(s)
        };
        for r in &self.eqs {
            if !eval(r)?.is_zero() {
                return Ok(false);
            }
        }
        for r in &self.ineqs {
            if eval(r)?.is_neg() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
