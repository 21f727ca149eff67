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
use std::collections::HashMap;

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

/// `ceil(a / b)` for `b > 0`.
pub(crate) fn ceil_div(a: i64, b: i64) -> i64 {
    let q = a / b;
    if (a % b != 0) && (a > 0) {
        q + 1
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
        let mut best: HashMap<Vec<i64>, i64> = HashMap::with_capacity(self.ineqs.len());
        let mut order: Vec<Vec<i64>> = Vec::with_capacity(self.ineqs.len());
        for mut r in std::mem::take(&mut self.ineqs) {
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
            let c = r[0];
            let key = r[1..].to_vec();
            match best.get_mut(&key) {
                Some(b) => *b = (*b).min(c),
                None => {
                    best.insert(key.clone(), c);
                    order.push(key);
                }
            }
        }
        let mut ineqs = Vec::with_capacity(order.len());
        let mut done: Vec<bool> = vec![false; order.len()];
        let index: HashMap<&Vec<i64>, usize> =
            order.iter().enumerate().map(|(i, k)| (k, i)).collect();
        for (i, key) in order.iter().enumerate() {
            if done[i] {
                continue;
            }
            done[i] = true;
            let c = best[key];
            let opp: Vec<i64> = key.iter().map(|&x| -x).collect();
            if let Some(&j) = index.get(&opp) {
                let c2 = best[&opp];
                // key·x ≥ -c and key·x ≤ c2.
                if add(c, c2)? < 0 {
                    *self = Conj::empty(n);
                    return Ok(false);
                }
                if c + c2 == 0 {
                    done[j] = true;
                    let mut r = Vec::with_capacity(n + 1);
                    r.push(c);
                    r.extend_from_slice(key);
                    let first = key.iter().find(|&&x| x != 0).copied().unwrap_or(1);
                    if first < 0 {
                        r = negate(&r)?;
                    }
                    if !eqs.contains(&r) {
                        eqs.push(r);
                    }
                    continue;
                }
            }
            let mut r = Vec::with_capacity(n + 1);
            r.push(c);
            r.extend_from_slice(key);
            ineqs.push(r);
        }
        self.eqs = eqs;
        self.ineqs = ineqs;
        Ok(true)
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
