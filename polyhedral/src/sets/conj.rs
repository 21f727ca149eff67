//! Conjunctions of integer affine constraints: the row store every set operation works on.
//!
//! A [`Conj`] holds `n` integer variables and two lists of rows, equalities (`row · (1, x) = 0`)
//! and inequalities (`row · (1, x) ≥ 0`). Every row has `n + 1` entries; entry 0 is the constant
//! term, entry `1 + v` the coefficient of variable `v`. All variables range over the integers.
//!
//! Arithmetic is on `i64` and checked: an overflow is reported as [`Error::Overflow`], never
//! wrapped. [`Conj::normalize`] keeps rows small (gcd division, integer tightening of inequality
//! constants), which is what keeps the `i64` path sufficient in practice.

use super::Error;

pub(crate) type Row = Vec<i64>;

pub(crate) fn add(a: i64, b: i64) -> Result<i64, Error> {
    a.checked_add(b).ok_or(Error::Overflow)
}

pub(crate) fn mul(a: i64, b: i64) -> Result<i64, Error> {
    a.checked_mul(b).ok_or(Error::Overflow)
}

pub(crate) fn neg(a: i64) -> Result<i64, Error> {
    a.checked_neg().ok_or(Error::Overflow)
}

pub(crate) fn gcd(mut a: i64, mut b: i64) -> i64 {
    a = a.wrapping_abs();
    b = b.wrapping_abs();
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// `floor(a / b)` for `b > 0`.
pub(crate) fn floor_div(a: i64, b: i64) -> i64 {
    let q = a / b;
    if (a % b != 0) && (a < 0) {
        q - 1
    } else {
        q
    }
}

/// `ca · a + cb · b`, entry by entry.
pub(crate) fn combine(a: &[i64], ca: i64, b: &[i64], cb: i64) -> Result<Row, Error> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| add(mul(x, ca)?, mul(y, cb)?))
        .collect()
}

pub(crate) fn negate(a: &[i64]) -> Result<Row, Error> {
    a.iter().map(|&x| neg(x)).collect()
}

/// A fast hash of a coefficient vector (of its negation with `negated`), for grouping
/// parallel rows; equal hashes are confirmed by comparing the rows.
fn row_hash(r: &[i64], negated: bool) -> u64 {
    r.iter().fold(0x9e37_79b9_7f4a_7c15, |h: u64, &x| {
        let x = if negated { x.wrapping_neg() } else { x };
        (h.rotate_left(5) ^ x as u64).wrapping_mul(0x517c_c1b7_2722_0a95)
    })
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Conj {
    pub n: usize,
    pub eqs: Vec<Row>,
    pub ineqs: Vec<Row>,
}

impl Conj {
    pub fn universe(n: usize) -> Conj {
        Conj {
            n,
            eqs: Vec::new(),
            ineqs: Vec::new(),
        }
    }

    /// An obviously infeasible conjunction (`-1 ≥ 0`).
    pub fn empty(n: usize) -> Conj {
        let mut r = vec![0; n + 1];
        r[0] = -1;
        Conj {
            n,
            eqs: Vec::new(),
            ineqs: vec![r],
        }
    }

    pub fn uses(&self, v: usize) -> bool {
        self.eqs.iter().chain(&self.ineqs).any(|r| r[1 + v] != 0)
    }

    /// Moves variable `v` to position `map[v]` in a conjunction of `new_n` variables; variables
    /// not mapped onto are unconstrained.
    pub fn remap(&self, new_n: usize, map: &[usize]) -> Conj {
        let f = |r: &Row| {
            let mut o = vec![0; new_n + 1];
            o[0] = r[0];
            for (v, &t) in map.iter().enumerate() {
                o[1 + t] += r[1 + v];
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
            r.resize(r.len() + k, 0);
        }
    }

    /// Removes variables whose column is zero everywhere, given by a predicate on their index.
    pub fn drop_vars(&self, drop: &dyn Fn(usize) -> bool) -> Conj {
        let keep: Vec<usize> = (0..self.n).filter(|&v| !drop(v)).collect();
        let f = |r: &Row| {
            let mut o = Vec::with_capacity(keep.len() + 1);
            o.push(r[0]);
            o.extend(keep.iter().map(|&v| r[1 + v]));
            o
        };
        Conj {
            n: keep.len(),
            eqs: self.eqs.iter().map(f).collect(),
            ineqs: self.ineqs.iter().map(f).collect(),
        }
    }

    /// Sets variable `v` to `val` and removes it.
    pub fn fix(&self, v: usize, val: i64) -> Result<Conj, Error> {
        let f = |r: &Row| -> Result<Row, Error> {
            let mut o = Vec::with_capacity(r.len() - 1);
            o.push(add(r[0], mul(r[1 + v], val)?)?);
            o.extend(
                r[1..]
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != v)
                    .map(|(_, &x)| x),
            );
            Ok(o)
        };
        Ok(Conj {
            n: self.n - 1,
            eqs: self.eqs.iter().map(f).collect::<Result<_, _>>()?,
            ineqs: self.ineqs.iter().map(f).collect::<Result<_, _>>()?,
        })
    }

    pub fn and(&mut self, other: &Conj) {
        debug_assert_eq!(self.n, other.n);
        self.eqs.extend(other.eqs.iter().cloned());
        self.ineqs.extend(other.ineqs.iter().cloned());
    }

    /// Divides rows by the gcd of their coefficients, tightens inequality constants to the
    /// integers, drops trivially true rows, merges parallel inequalities and turns opposite
    /// pairs with matching constants into equalities. Returns `false` when a contradiction was
    /// found (the conjunction is then replaced by [`Conj::empty`]).
    pub fn normalize(&mut self) -> Result<bool, Error> {
        let n = self.n;
        let mut eqs: Vec<Row> = Vec::with_capacity(self.eqs.len());
        for mut r in std::mem::take(&mut self.eqs) {
            let g = r[1..].iter().fold(0, |g, &x| gcd(g, x));
            if g == 0 {
                if r[0] != 0 {
                    *self = Conj::empty(n);
                    return Ok(false);
                }
                continue;
            }
            if r[0] % g != 0 {
                *self = Conj::empty(n);
                return Ok(false);
            }
            // Sign convention: first non-zero coefficient positive, so duplicates compare equal.
            let first = r[1..].iter().find(|&&x| x != 0).copied().unwrap_or(1);
            let s = if first < 0 { -g } else { g };
            for x in r.iter_mut() {
                *x /= s;
            }
            if !eqs.contains(&r) {
                eqs.push(r);
            }
        }
        let mut rows = std::mem::take(&mut self.ineqs);
        let mut live: Vec<usize> = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter_mut().enumerate() {
            let g = r[1..].iter().fold(0, |g, &x| gcd(g, x));
            if g == 0 {
                if r[0] < 0 {
                    *self = Conj::empty(n);
                    return Ok(false);
                }
                continue;
            }
            if g > 1 {
                for x in r[1..].iter_mut() {
                    *x /= g;
                }
                r[0] = floor_div(r[0], g);
            }
            live.push(i);
        }
        // Parallel rows share their coefficients: sorting by (hash of the coefficients,
        // constant, position) puts the tightest row of each group first, and the group is
        // emitted where its first row stood, so the output order does not depend on the sort.
        let mut keyed: Vec<(u64, i64, usize)> = live
            .iter()
            .map(|&i| (row_hash(&rows[i][1..], false), rows[i][0], i))
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
        let find_opposite = |key: &[i64]| -> Option<usize> {
            let h = row_hash(key, true);
            let start = groups.partition_point(|g| g.0 < h);
            (start..groups.len())
                .take_while(|&g| groups[g].0 == h)
                .find(|&g| {
                    rows[groups[g].1][1..]
                        .iter()
                        .zip(key)
                        .all(|(&a, &b)| a == b.wrapping_neg())
                })
        };
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_unstable_by_key(|&g| groups[g].2);
        let mut done: Vec<bool> = vec![false; groups.len()];
        let mut ineqs = Vec::with_capacity(groups.len());
        for &gi in &order {
            if done[gi] {
                continue;
            }
            done[gi] = true;
            let rep = groups[gi].1;
            let c = rows[rep][0];
            if let Some(gj) = find_opposite(&rows[rep][1..]) {
                let c2 = rows[groups[gj].1][0];
                // key·x ≥ -c and key·x ≤ c2.
                if add(c, c2)? < 0 {
                    *self = Conj::empty(n);
                    return Ok(false);
                }
                if c + c2 == 0 {
                    done[gj] = true;
                    let key = &rows[rep][1..];
                    let first = key.iter().find(|&&x| x != 0).copied().unwrap_or(1);
                    let r = if first < 0 {
                        negate(&rows[rep])?
                    } else {
                        rows[rep].clone()
                    };
                    if !eqs.contains(&r) {
                        eqs.push(r);
                    }
                    continue;
                }
            }
            ineqs.push(rows[rep].clone());
        }
        self.eqs = eqs;
        self.ineqs = ineqs;
        Ok(true)
    }

    /// Whether one row of the conjunction already states `r ≥ 0` (`eq == false`) or `r = 0`:
    /// the same coefficients up to a positive factor and a constant at least as tight. A cheap
    /// syntactic test; `false` says nothing.
    pub fn states(&self, r: &[i64], eq: bool) -> bool {
        let g = r[1..].iter().fold(0, |g, &x| gcd(g, x));
        if g == 0 {
            return false;
        }
        let same = |s: &Row, sign: i128| {
            s[1..]
                .iter()
                .zip(&r[1..])
                .all(|(&a, &b)| a as i128 * g as i128 == sign * b as i128)
        };
        // r = g·(k·x) + r0; the tightened constant of `r/g ≥ 0` is floor(r0 / g).
        if eq {
            if r[0] % g != 0 {
                return false;
            }
            let c = r[0] / g;
            return self
                .eqs
                .iter()
                .any(|s| (same(s, 1) && s[0] == c) || (same(s, -1) && s[0] == -c));
        }
        let c = floor_div(r[0], g);
        self.ineqs.iter().any(|s| same(s, 1) && s[0] <= c)
            || self
                .eqs
                .iter()
                .any(|s| (same(s, 1) && c >= s[0]) || (same(s, -1) && c >= -s[0]))
    }

    /// Evaluates every row at an integer point of all `n` variables.
    pub fn contains_point(&self, x: &[i64]) -> Result<bool, Error> {
        let eval = |r: &Row| -> Result<i64, Error> {
            let mut s = r[0];
            for (c, v) in r[1..].iter().zip(x) {
                s = add(s, mul(*c, *v)?)?;
            }
            Ok(s)
        };
        for r in &self.eqs {
            if eval(r)? != 0 {
                return Ok(false);
            }
        }
        for r in &self.ineqs {
            if eval(r)? < 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
