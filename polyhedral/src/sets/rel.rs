//! The representation shared by sets and maps: unions of basic relations over named spaces.
//!
//! A [`Basic`] is one conjunction. Its variables are laid out as
//! `[parameters | domain dims | range dims | locals]`; a set has no domain tuple. Locals are
//! existentially quantified integers (they carry integer divisions such as `floor(i/32)` and
//! congruences such as `i mod 4 = 0` through their constraints). A [`Rel`] is a union of
//! basics that share one parameter list; its pieces may live in different spaces, as in isl's
//! union sets and maps, and operations pair up pieces of matching spaces.
//!
//! Operations here never approximate: results are exact over the integers. Cheap ones
//! (intersection, union, image, …) only concatenate constraints and keep new existentials as
//! locals; the ones that need quantifier-free subtrahends (subtraction, lexicographic
//! optimisation) first bring pieces to stride form with [`super::omega::project`].
//!
//! Everything is generic over the integer type of the rows (see [`super::int`]): sets and maps
//! hold `Rel<i64>`, and an operation that overflows is run again on a [`Rel::cast`] copy over a
//! wider type, its answer brought back with [`Rel::narrow`].

use std::any::Any;
use std::borrow::Cow;

use super::bounds::{enumerate, lex_extreme, range_of_first, Range};
use super::conj::{coef_gcd, combine, negate, Conj, Row};
use super::int::{Fail, Int, Overflow};
use super::omega::{feasible, project_in, without_unit_equalities};
use super::space::Tuple;
use super::Error;

/// A callback on one point of a basic relation.
pub(crate) type PointFn<'a, T> = dyn FnMut(&Basic<T>, &[T]) -> Result<(), Fail> + 'a;

/// `c` over `i64`, normalised: `None` when normalisation finds it empty,
/// [`Error::TooLarge`] when a coefficient does not fit.
pub(crate) fn narrow_conj<T: Int>(c: Conj<T>) -> Result<Option<Conj>, Fail> {
    let mut slot = Some(c);
    if let Some(same) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Conj>>() {
        // Already `i64`: nothing to narrow, and the caller's normal form is kept.
        return Ok(same.take());
    }
    let Some(mut c) = slot else {
        return Ok(None);
    };
    if !c.normalize()? {
        return Ok(None);
    }
    let row = |r: &Row<T>| -> Result<Row, Fail> {
        r.iter()
            .map(|x| {
                x.to_i64()
                    .ok_or(Fail::Error(Error::TooLarge("a constraint coefficient")))
            })
            .collect()
    };
    Ok(Some(Conj {
        n: c.n,
        eqs: c.eqs.iter().map(row).collect::<Result<_, _>>()?,
        ineqs: c.ineqs.iter().map(row).collect::<Result<_, _>>()?,
    }))
}

/// A value of an answer as `i64`.
pub(crate) fn narrow_int<T: Int>(x: &T, what: &'static str) -> Result<i64, Fail> {
    x.to_i64().ok_or(Fail::Error(Error::TooLarge(what)))
}

#[derive(Clone, Debug)]
pub(crate) struct Basic<T = i64> {
    pub dom: Option<Tuple>,
    pub ran: Tuple,
    pub np: usize,
    pub nd: usize,
    pub c: Conj<T>,
}

impl<T: Int> Basic<T> {
    pub fn universe(np: usize, dom: Option<Tuple>, ran: Tuple) -> Basic<T> {
        let n = np + dom.as_ref().map_or(0, Tuple::arity) + ran.arity();
        Basic {
            dom,
            ran,
            np,
            nd: 0,
            c: Conj::universe(n),
        }
    }

    pub fn ni(&self) -> usize {
        self.dom.as_ref().map_or(0, Tuple::arity)
    }

    pub fn no(&self) -> usize {
        self.ran.arity()
    }

    /// Parameters and tuple dimensions: the variables that are not locals.
    pub fn nfix(&self) -> usize {
        self.np + self.ni() + self.no()
    }

    pub fn same_space<U>(&self, o: &Basic<U>) -> bool {
        self.dom == o.dom && self.ran == o.ran
    }

    /// The same piece with conjunction `c`.
    fn with_conj<U>(&self, nd: usize, c: Conj<U>) -> Basic<U> {
        Basic {
            dom: self.dom.clone(),
            ran: self.ran.clone(),
            np: self.np,
            nd,
            c,
        }
    }

    pub fn is_empty(&self) -> Result<bool, Overflow> {
        Ok(!feasible(&self.c)?)
    }

    /// Pieces whose locals are all stride locals (see [`super::omega`]); their union equals
    /// this basic relation.
    pub fn stride_form(&self) -> Result<Vec<Basic<T>>, Overflow> {
        let nf = self.nfix();
        if self.nd == 0 {
            let mut c = self.c.clone();
            if !c.normalize()? || !feasible(&c)? {
                return Ok(Vec::new());
            }
            return Ok(vec![self.with_conj(0, c)]);
        }
        Ok(project_in(&self.c, nf)?
            .into_iter()
            .map(|c| self.with_conj(c.n - nf, c))
            .collect())
    }

    /// Adds `k` fresh locals at the end.
    pub fn add_locals(&mut self, k: usize) {
        self.c.add_vars(k);
        self.nd += k;
    }

    /// Extends a row over the non-local variables to this basic's variables.
    pub fn lift(&self, r: &[T]) -> Row<T> {
        let mut o = r.to_vec();
        o.resize(self.c.n + 1, T::zero());
        o
    }
}

fn intersect_basic<T: Int>(a: &Basic<T>, b: &Basic<T>) -> Basic<T> {
    let nf = a.nfix();
    let n = nf + a.nd + b.nd;
    let mut c = a.c.remap(n, &(0..nf + a.nd).collect::<Vec<_>>());
    let bmap: Vec<usize> = (0..nf).chain((0..b.nd).map(|j| nf + a.nd + j)).collect();
    c.and(&b.c.remap(n, &bmap));
    a.with_conj(a.nd + b.nd, c)
}

/// One constraint of a subtrahend in stride form.
enum Piece<T> {
    Ineq(Row<T>),
    Eq(Row<T>),
    /// `e + m·σ = 0` for some integer σ, i.e. `m | e`.
    Stride(Row<T>, T),
}

fn pieces_of<T: Int>(b: &Basic<T>) -> Result<Vec<Piece<T>>, Overflow> {
    let nf = b.nfix();
    let mut out = Vec::new();
    for e in &b.c.eqs {
        match (nf..b.c.n).find(|&v| !e[1 + v].is_zero()) {
            None => out.push(Piece::Eq(e[..=nf].to_vec())),
            Some(s) => out.push(Piece::Stride(e[..=nf].to_vec(), e[1 + s].abs()?)),
        }
    }
    for r in &b.c.ineqs {
        out.push(Piece::Ineq(r[..=nf].to_vec()));
    }
    Ok(out)
}

/// `a − b` for `b` in stride form, as disjoint pieces; empty pieces are dropped.
fn subtract_basic<T: Int>(a: &Basic<T>, b: &Basic<T>) -> Result<Vec<Basic<T>>, Overflow> {
    let mut out = Vec::new();
    let mut acc = a.clone();
    for p in pieces_of(b)? {
        // A constraint `acc` states already removes nothing.
        let stated = match &p {
            Piece::Ineq(r) => acc.c.states(&acc.lift(r), false),
            Piece::Eq(r) => acc.c.states(&acc.lift(r), true),
            Piece::Stride(..) => false,
        };
        if stated {
            continue;
        }
        let mut negs: Vec<Basic<T>> = Vec::new();
        match &p {
            Piece::Ineq(r) => {
                let mut n = acc.clone();
                let mut row = negate(&acc.lift(r))?;
                row[0] = row[0].add_i(-1)?;
                n.c.ineqs.push(row);
                negs.push(n);
            }
            Piece::Eq(r) => {
                for s in [1, -1] {
                    let mut n = acc.clone();
                    let mut row = acc.lift(r);
                    if s < 0 {
                        row = negate(&row)?;
                    }
                    row[0] = row[0].add_i(-1)?;
                    n.c.ineqs.push(row);
                    negs.push(n);
                }
            }
            Piece::Stride(r, m) if *m <= T::from_i64(8) => {
                // e mod m ≠ 0 as the congruences e ≡ k (mod m), k = 1 … m − 1: strides stay
                // equalities, which later eliminations solve without splitting.
                let mut k = T::one();
                while k < *m {
                    let mut n = acc.clone();
                    n.add_locals(1);
                    let mut row = n.lift(r);
                    row[0] = row[0].sub(&k)?;
                    row[n.c.n] = m.clone();
                    n.c.eqs.push(row);
                    negs.push(n);
                    k = k.add_i(1)?;
                }
            }
            Piece::Stride(r, m) => {
                // e mod m ≠ 0  ⇔  ∃τ: 1 ≤ e + m·τ ≤ m − 1.
                let mut n = acc.clone();
                n.add_locals(1);
                let mut row = n.lift(r);
                row[n.c.n] = m.clone();
                let mut lo = row.clone();
                lo[0] = lo[0].add_i(-1)?;
                let mut hi = negate(&row)?;
                hi[0] = hi[0].add(&m.add_i(-1)?)?;
                n.c.ineqs.push(lo);
                n.c.ineqs.push(hi);
                negs.push(n);
            }
        }
        let mut implied = true;
        for mut n in negs {
            if n.c.normalize()? && feasible(&n.c)? {
                out.push(n);
                implied = false;
            }
        }
        // A constraint `acc` already implies adds nothing to the remaining pieces.
        if implied {
            continue;
        }
        match p {
            Piece::Ineq(r) => {
                let row = acc.lift(&r);
                acc.c.ineqs.push(row);
            }
            Piece::Eq(r) => {
                let row = acc.lift(&r);
                acc.c.eqs.push(row);
            }
            Piece::Stride(r, m) => {
                acc.add_locals(1);
                let mut row = acc.lift(&r);
                row[acc.c.n] = m;
                acc.c.eqs.push(row);
            }
        }
        if !acc.c.normalize()? {
            break;
        }
    }
    Ok(out)
}

/// Whether `a` and `b` (of the same space) have no point in common.
fn disjoint<T: Int>(a: &Basic<T>, b: &Basic<T>) -> Result<bool, Overflow> {
    let mut c = intersect_basic(a, b).c;
    Ok(!c.normalize()? || !feasible(&c)?)
}

/// Whether inequality `i` of `rows` follows from a single other row with the same
/// coefficients up to a positive factor and a constant at least as tight. A cheap test that
/// spares the exact one for the rows that unit equalities made duplicates of each other; it
/// drops exactly the rows the exact test would drop (of two equal rows, the first).
fn implied_by_parallel<T: Int>(rows: &[Row<T>], i: usize) -> Result<bool, Overflow> {
    let reduced = |r: &Row<T>| -> Result<Option<Row<T>>, Overflow> {
        let g = coef_gcd(r)?;
        if g.is_zero() {
            return Ok(None);
        }
        let mut o: Row<T> = r.iter().map(|x| x.div_exact(&g)).collect();
        o[0] = r[0].div_floor(&g);
        Ok(Some(o))
    };
    let Some(ri) = reduced(&rows[i])? else {
        return Ok(false);
    };
    for (j, r) in rows.iter().enumerate() {
        if j == i {
            continue;
        }
        if let Some(rj) = reduced(r)? {
            if rj[1..] == ri[1..] && rj[0] <= ri[0] {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Removes redundant constraints and turns implicit equalities into equalities. `b` must be
/// in stride form.
fn simplify_stride_basic<T: Int>(b: &Basic<T>) -> Result<Basic<T>, Overflow> {
    let mut b = b.clone();
    if !b.c.normalize()? {
        return Ok(b);
    }
    // The questions below are asked of `base`, the same system with the unit equalities
    // substituted away, whose inequality `i` is `b`'s inequality `i` rewritten.
    let mut base = without_unit_equalities(&b.c)?;
    // Implicit equalities: r ≥ 0 where r ≥ 1 is impossible. One point with every r ≥ 1 at
    // once rules them all out, which is the common case.
    let mut strict = base.clone();
    for r in strict.ineqs.iter_mut() {
        r[0] = r[0].add_i(-1)?;
    }
    let mut i = if feasible(&strict)? {
        b.c.ineqs.len()
    } else {
        0
    };
    while i < b.c.ineqs.len() {
        let mut t = base.clone();
        t.ineqs[i][0] = t.ineqs[i][0].add_i(-1)?;
        if !feasible(&t)? {
            let r = b.c.ineqs.remove(i);
            b.c.eqs.push(r);
            if !b.c.normalize()? {
                return Ok(b);
            }
            base = without_unit_equalities(&b.c)?;
            i = 0;
            continue;
        }
        i += 1;
    }
    // Redundant inequalities: dropping r and asking for r ≤ -1 is impossible.
    let mut i = 0;
    while i < b.c.ineqs.len() {
        if implied_by_parallel(&base.ineqs, i)? {
            b.c.ineqs.remove(i);
            base.ineqs.remove(i);
            continue;
        }
        let mut t = base.clone();
        let r = t.ineqs.remove(i);
        let mut nr = negate(&r)?;
        nr[0] = nr[0].add_i(-1)?;
        t.ineqs.push(nr);
        if !feasible(&t)? {
            b.c.ineqs.remove(i);
            base.ineqs.remove(i);
        } else {
            i += 1;
        }
    }
    // Redundant equalities and strides.
    let nf = b.nfix();
    let mut i = 0;
    while i < b.c.eqs.len() {
        // A dimension or parameter that only this equality (not a stride) mentions is free
        // without it: not implied.
        let stride = (nf..b.c.n).any(|v| !b.c.eqs[i][1 + v].is_zero());
        let own = !stride
            && (0..nf).any(|v| {
                !b.c.eqs[i][1 + v].is_zero()
                    && b.c
                        .eqs
                        .iter()
                        .enumerate()
                        .all(|(j, r)| j == i || r[1 + v].is_zero())
                    && b.c.ineqs.iter().all(|r| r[1 + v].is_zero())
            });
        if own {
            i += 1;
            continue;
        }
        let mut t = b.c.clone();
        let r = t.eqs.remove(i);
        let local = (nf..b.c.n).find(|&v| !r[1 + v].is_zero());
        let implied = match local {
            None => {
                let mut up = r.clone();
                up[0] = up[0].add_i(-1)?;
                let mut down = negate(&r)?;
                down[0] = down[0].add_i(-1)?;
                let mut t1 = t.clone();
                t1.ineqs.push(up);
                let mut t2 = t;
                t2.ineqs.push(down);
                !feasible(&t1)? && !feasible(&t2)?
            }
            Some(s) => {
                let m = r[1 + s].abs()?;
                let mut row = r.clone();
                row[1 + s] = T::zero();
                t.add_vars(1);
                row.push(m.clone());
                let mut lo = row.clone();
                lo[0] = lo[0].add_i(-1)?;
                let mut hi = negate(&row)?;
                hi[0] = hi[0].add(&m.add_i(-1)?)?;
                t.ineqs.push(lo);
                t.ineqs.push(hi);
                !feasible(&t)?
            }
        };
        if implied {
            b.c.eqs.remove(i);
        } else {
            i += 1;
        }
    }
    let used: Vec<bool> = (0..b.c.n).map(|v| v < nf || b.c.uses(v)).collect();
    b.c = b.c.drop_vars(&|v| !used[v]);
    b.nd = b.c.n - nf;
    Ok(b)
}

/// The lexicographic optimum of one basic relation by sequential parametric optimisation, as
/// pieces with pairwise disjoint domains on which the image is given by equalities; `None`
/// where this method does not apply (a congruence or a non-unit bound on the optimised
/// dimension, or an unbounded one), and the caller falls back to the general method.
///
/// For range dimension `k`, the piece (its earlier range dimensions already fixed to their
/// optimum) is projected onto the domain and dimensions `0..=k`. If that projection has an
/// equality on `y_k`, `y_k` is already a function of the rest. Otherwise, for the maximum,
/// every upper bound has the form `y_k ≤ U_i` and the optimum is `min_i U_i` wherever the
/// fibre is not empty (any lower bound `a·y_k ≥ L` admits `min_i U_i` once it admits some
/// `y_k ≤ min_i U_i`); the domain splits by which `U_j` is smallest (ties to the first).
///
/// One list per stride-form piece of `p`: the lists' domains may overlap.
#[allow(clippy::type_complexity)]
fn lexopt_basic<T: Int>(p: &Basic<T>, max: bool) -> Result<Option<Vec<Vec<Basic<T>>>>, Overflow> {
    let nin = p.np + p.ni();
    let no = p.no();
    let mut done = Vec::new();
    for sf in p.stride_form()? {
        if sf.nd > 0 {
            return Ok(None);
        }
        let mut work = vec![sf.c];
        for k in 0..no {
            let keep = nin + k + 1;
            let v = keep - 1;
            let mut next = Vec::with_capacity(work.len());
            for c in work {
                let mut ps = project_in(&c, keep)?;
                let d = match ps.len() {
                    0 => continue,
                    1 if ps[0].n == keep => ps.pop().expect("one piece"),
                    _ => return Ok(None),
                };
                if d.eqs.iter().any(|r| !r[1 + v].is_zero()) {
                    next.push(c);
                    continue;
                }
                // The bounds that limit the optimum, as `y_k = B_i` rows over `d`'s variables.
                let mut bs: Vec<Row<T>> = Vec::new();
                for r in &d.ineqs {
                    let a = &r[1 + v];
                    if (max && a.is_neg()) || (!max && a.is_pos()) {
                        if !a.is_unit() {
                            return Ok(None);
                        }
                        // max: r = B − y_k ≥ 0; min: r = y_k − B ≥ 0.
                        let mut b = if max { r.clone() } else { negate(r)? };
                        b[1 + v] = T::zero();
                        bs.push(b);
                    }
                }
                if bs.is_empty() {
                    return Ok(None);
                }
                let lift = |r: &Row<T>| -> Row<T> {
                    let mut o = r.clone();
                    o.resize(c.n + 1, T::zero());
                    o
                };
                let (one, minus) = (T::one(), T::from_i64(-1));
                for j in 0..bs.len() {
                    let mut cj = c.clone();
                    let mut e = lift(&bs[j]);
                    e[1 + v] = minus.clone();
                    cj.eqs.push(e);
                    for (i, bi) in bs.iter().enumerate() {
                        if i == j {
                            continue;
                        }
                        // max: B_i − B_j ≥ 0 (− 1 when i < j); min: B_j − B_i ≥ 0 (− 1 …).
                        let mut r = if max {
                            combine(bi, &one, &bs[j], &minus)?
                        } else {
                            combine(&bs[j], &one, bi, &minus)?
                        };
                        if i < j {
                            r[0] = r[0].add_i(-1)?;
                        }
                        cj.ineqs.push(lift(&r));
                    }
                    if cj.normalize()? && feasible(&cj)? {
                        next.push(cj);
                    }
                }
            }
            work = next;
        }
        if !work.is_empty() {
            done.push(work.into_iter().map(|c| p.with_conj(0, c)).collect());
        }
    }
    Ok(Some(done))
}

/// The image of a piece without locals as explicit affine functions of the parameters and
/// domain dimensions, one row `[constant, params…, domain…]` per range dimension; `None` when
/// some range dimension is not fixed by a unit-coefficient equality over earlier ones.
fn explicit_image<T: Int>(b: &Basic<T>) -> Result<Option<Vec<Row<T>>>, Overflow> {
    let nin = b.np + b.ni();
    let no = b.no();
    if b.nd != 0 {
        return Ok(None);
    }
    let mut fs: Vec<Row<T>> = Vec::with_capacity(no);
    for k in 0..no {
        let y = nin + k;
        let Some(e) =
            b.c.eqs
                .iter()
                .find(|r| r[1 + y].is_unit() && (k + 1..no).all(|j| r[1 + nin + j].is_zero()))
        else {
            return Ok(None);
        };
        // y_k = −(e without y_k) · sign(e_y).
        let sign = e[1 + y].neg()?;
        let mut f: Row<T> = e[..=nin]
            .iter()
            .map(|x| x.mul(&sign))
            .collect::<Result<_, _>>()?;
        for (j, fj) in fs.iter().enumerate() {
            let c = e[1 + nin + j].mul(&sign)?;
            if !c.is_zero() {
                f = combine(&f, &T::one(), fj, &c)?;
            }
        }
        fs.push(f);
    }
    Ok(Some(fs))
}

/// The lexicographic optimum of a union of single-valued pieces without locals whose images
/// are explicit (see [`explicit_image`]): each piece keeps the domain points where no other
/// piece's image is better. Comparing two affine images dimension by dimension decides most
/// dimensions at once (a constant difference), so few regions are subtracted. `None` when an
/// image is not explicit.
fn combine_optima<T: Int>(r: &Rel<T>, max: bool) -> Result<Option<Vec<Basic<T>>>, Overflow> {
    let mut fs = Vec::with_capacity(r.parts.len());
    for p in &r.parts {
        match explicit_image(p)? {
            Some(f) => fs.push(f),
            None => return Ok(None),
        }
    }
    let (one, minus) = (T::one(), T::from_i64(-1));
    // Each piece's domain as rows over all of its variables, the image substituted.
    let mut doms: Vec<Conj<T>> = Vec::with_capacity(r.parts.len());
    for (p, f) in r.parts.iter().zip(&fs) {
        let nin = p.np + p.ni();
        let sub = |row: &Row<T>| -> Result<Row<T>, Overflow> {
            let mut o = row[..=nin].to_vec();
            for (k, fk) in f.iter().enumerate() {
                let c = &row[1 + nin + k];
                if !c.is_zero() {
                    o = combine(&o, &one, fk, c)?;
                }
            }
            o.resize(row.len(), T::zero());
            Ok(o)
        };
        doms.push(Conj {
            n: p.c.n,
            eqs: p.c.eqs.iter().map(sub).collect::<Result<_, _>>()?,
            ineqs: p.c.ineqs.iter().map(sub).collect::<Result<_, _>>()?,
        });
    }
    let mut out = Vec::new();
    for (i, p) in r.parts.iter().enumerate() {
        let n = p.c.n;
        let mut beaten: Vec<Basic<T>> = Vec::new();
        for (j, q) in r.parts.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut prefix: Vec<Row<T>> = Vec::new();
            for (fp, fq) in fs[i].iter().zip(&fs[j]) {
                // δ ≥ 1 where q's image is better at this dimension.
                let mut d = if max {
                    combine(fq, &one, fp, &minus)?
                } else {
                    combine(fp, &one, fq, &minus)?
                };
                d.resize(n + 1, T::zero());
                let constant = d[1..].iter().all(Int::is_zero);
                if constant && d[0].is_zero() {
                    continue;
                }
                if constant && d[0].is_neg() {
                    break;
                }
                let mut c = doms[j].clone();
                c.eqs.extend(prefix.iter().cloned());
                if !constant {
                    let mut strict = d.clone();
                    strict[0] = strict[0].add_i(-1)?;
                    c.ineqs.push(strict);
                }
                beaten.push(q.with_conj(0, c));
                if constant {
                    break;
                }
                prefix.push(d);
            }
        }
        let mine = Rel {
            params: r.params.clone(),
            parts: vec![p.clone()],
        };
        let left = mine.subtract(&Rel {
            params: r.params.clone(),
            parts: beaten,
        })?;
        out.extend(left.parts);
    }
    Ok(Some(out))
}

#[derive(Clone, Debug)]
pub(crate) struct Rel<T = i64> {
    pub params: Vec<String>,
    pub parts: Vec<Basic<T>>,
}

fn extend_params<T: Int>(b: &Basic<T>, old: &[String], new: &[String]) -> Basic<T> {
    let shift = new.len() - old.len();
    let map: Vec<usize> = (0..b.c.n)
        .map(|v| {
            if v < old.len() {
                // Invariant: `new` is a superset of `old`.
                new.iter()
                    .position(|p| *p == old[v])
                    .expect("param in merged list")
            } else {
                v + shift
            }
        })
        .collect();
    Basic {
        dom: b.dom.clone(),
        ran: b.ran.clone(),
        np: new.len(),
        nd: b.nd,
        c: b.c.remap(b.c.n + shift, &map),
    }
}

impl Rel {
    /// This relation over integer type `T`: borrowed when `T` is `i64`.
    pub fn cast<T: Int>(&self) -> Cow<'_, Rel<T>> {
        if let Some(same) = (self as &dyn Any).downcast_ref::<Rel<T>>() {
            return Cow::Borrowed(same);
        }
        Cow::Owned(Rel {
            params: self.params.clone(),
            parts: self
                .parts
                .iter()
                .map(|b| b.with_conj(b.nd, b.c.cast::<T>()))
                .collect(),
        })
    }
}

impl<T: Int> Rel<T> {
    /// The relation over `i64` (see [`narrow_conj`]); pieces found empty are dropped.
    pub fn narrow(self) -> Result<Rel, Fail> {
        let mut parts = Vec::with_capacity(self.parts.len());
        for b in self.parts {
            let (dom, ran, np, nd) = (b.dom, b.ran, b.np, b.nd);
            if let Some(c) = narrow_conj(b.c)? {
                parts.push(Basic {
                    dom,
                    ran,
                    np,
                    nd,
                    c,
                });
            }
        }
        Ok(Rel {
            params: self.params,
            parts,
        })
    }

    pub fn empty(params: Vec<String>) -> Rel<T> {
        Rel {
            params,
            parts: Vec::new(),
        }
    }

    pub fn with_params(&self, new: &[String]) -> Rel<T> {
        if new == self.params.as_slice() {
            return self.clone();
        }
        Rel {
            params: new.to_vec(),
            parts: self
                .parts
                .iter()
                .map(|b| extend_params(b, &self.params, new))
                .collect(),
        }
    }

    /// Both operands over the union of their parameter lists.
    pub fn align(a: &Rel<T>, b: &Rel<T>) -> (Rel<T>, Rel<T>) {
        if a.params == b.params {
            return (a.clone(), b.clone());
        }
        let mut merged = a.params.clone();
        for p in &b.params {
            if !merged.contains(p) {
                merged.push(p.clone());
            }
        }
        (a.with_params(&merged), b.with_params(&merged))
    }

    pub fn union(&self, o: &Rel<T>) -> Rel<T> {
        let (mut a, b) = Rel::align(self, o);
        a.parts.extend(b.parts);
        a
    }

    pub fn intersect(&self, o: &Rel<T>) -> Rel<T> {
        let (a, b) = Rel::align(self, o);
        let mut parts = Vec::new();
        for x in &a.parts {
            for y in &b.parts {
                if x.same_space(y) {
                    let mut r = intersect_basic(x, y);
                    // Normalising is only a shortcut; on overflow the rows stay as they are.
                    if r.c.normalize().unwrap_or(true) {
                        parts.push(r);
                    }
                }
            }
        }
        Rel {
            params: a.params,
            parts,
        }
    }

    pub fn subtract(&self, o: &Rel<T>) -> Result<Rel<T>, Overflow> {
        let (a, b) = Rel::align(self, o);
        let mut subs: Vec<Basic<T>> = Vec::new();
        for y in &b.parts {
            if a.parts.iter().any(|x| x.same_space(y)) {
                subs.extend(y.stride_form()?);
            }
        }
        let mut parts = Vec::new();
        for x in &a.parts {
            let mut cur = vec![x.clone()];
            for y in subs.iter().filter(|y| y.same_space(x)) {
                let mut next = Vec::new();
                for c in cur {
                    // A piece the subtrahend misses stays whole: splitting it along the
                    // subtrahend's constraints would only add pieces and rows.
                    if disjoint(&c, y)? {
                        next.push(c);
                    } else {
                        next.extend(subtract_basic(&c, y)?);
                    }
                }
                cur = next;
                if cur.is_empty() {
                    break;
                }
            }
            parts.extend(cur);
        }
        Ok(Rel {
            params: a.params,
            parts,
        })
    }

    pub fn is_empty(&self) -> Result<bool, Overflow> {
        for b in &self.parts {
            if !b.is_empty()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub fn is_subset(&self, o: &Rel<T>) -> Result<bool, Overflow> {
        self.subtract(o)?.is_empty()
    }

    /// Drops empty pieces, removes locals where that is exact, redundant constraints and
    /// pieces contained in others.
    pub fn simplify(&self) -> Result<Rel<T>, Overflow> {
        let mut parts: Vec<Basic<T>> = Vec::new();
        for b in &self.parts {
            for p in b.stride_form()? {
                let s = simplify_stride_basic(&p)?;
                if !s.is_empty()? {
                    parts.push(s);
                }
            }
        }
        // Drop pieces covered by another remaining piece.
        if parts.len() <= 16 {
            let mut i = 0;
            while i < parts.len() {
                let mut covered = false;
                for j in 0..parts.len() {
                    if j != i
                        && parts[j].same_space(&parts[i])
                        && subtract_basic(&parts[i], &parts[j])?.is_empty()
                    {
                        covered = true;
                        break;
                    }
                }
                if covered {
                    parts.remove(i);
                } else {
                    i += 1;
                }
            }
        }
        Ok(Rel {
            params: self.params.clone(),
            parts,
        })
    }
    /// Moves every piece's variables by `f(piece) -> (new tuples, map of old vars)`.
    fn map_parts(&self, f: &dyn Fn(&Basic<T>) -> Option<Basic<T>>) -> Rel<T> {
        Rel {
            params: self.params.clone(),
            parts: self.parts.iter().filter_map(f).collect(),
        }
    }

    pub fn reverse(&self) -> Rel<T> {
        self.map_parts(&|b| {
            let (np, ni, no) = (b.np, b.ni(), b.no());
            let map: Vec<usize> = (0..b.c.n)
                .map(|v| {
                    if v < np || v >= np + ni + no {
                        v
                    } else if v < np + ni {
                        v + no
                    } else {
                        v - ni
                    }
                })
                .collect();
            Some(Basic {
                dom: Some(b.ran.clone()),
                ran: b
                    .dom
                    .clone()
                    .unwrap_or_else(|| Tuple::anonymous_dims(None, 0)),
                np,
                nd: b.nd,
                c: b.c.remap(b.c.n, &map),
            })
        })
    }

    /// The range (or, with `domain`, the domain) of a map, as a set.
    pub fn project_side(&self, domain: bool) -> Rel<T> {
        self.map_parts(&|b| {
            let (np, ni, no) = (b.np, b.ni(), b.no());
            let (keep_start, keep_len, drop_start, drop_len) = if domain {
                (np, ni, np + ni, no)
            } else {
                (np + ni, no, np, ni)
            };
            let map: Vec<usize> = (0..b.c.n)
                .map(|v| {
                    if v < np {
                        v
                    } else if v >= keep_start && v < keep_start + keep_len {
                        np + v - keep_start
                    } else if v >= drop_start && v < drop_start + drop_len {
                        np + keep_len + v - drop_start
                    } else {
                        v
                    }
                })
                .collect();
            let tuple = if domain {
                b.dom
                    .clone()
                    .unwrap_or_else(|| Tuple::anonymous_dims(None, 0))
            } else {
                b.ran.clone()
            };
            Some(Basic {
                dom: None,
                ran: tuple,
                np,
                nd: b.nd + drop_len,
                c: b.c.remap(b.c.n, &map),
            })
        })
    }

    /// Existentially quantifies `n` range dimensions starting at `first` (pieces whose range
    /// has fewer dimensions are left out).
    pub fn project_out(&self, first: usize, n: usize) -> Rel<T> {
        self.map_parts(&|b| {
            if first + n > b.no() {
                return None;
            }
            let base = b.np + b.ni();
            let nf = b.nfix();
            let map: Vec<usize> = (0..b.c.n)
                .map(|v| {
                    if v < base + first {
                        v
                    } else if v < base + first + n {
                        nf - n + (v - base - first)
                    } else if v < nf {
                        v - n
                    } else {
                        v
                    }
                })
                .collect();
            let mut dims: Vec<String> = b.ran.dims().to_vec();
            dims.drain(first..first + n);
            Some(Basic {
                dom: b.dom.clone(),
                ran: b.ran.with_dims(dims),
                np: b.np,
                nd: b.nd + n,
                c: b.c.remap(b.c.n, &map),
            })
        })
    }

    /// `{ x -> z : ∃y: (x, y) ∈ self ∧ (y, z) ∈ o }`; a set `self` (no domain) gives a set.
    pub fn apply_range(&self, o: &Rel<T>) -> Rel<T> {
        let (a, b) = Rel::align(self, o);
        let mut parts = Vec::new();
        for x in &a.parts {
            for y in &b.parts {
                if y.dom.as_ref() != Some(&x.ran) {
                    continue;
                }
                let (np, ni, mid, no) = (x.np, x.ni(), x.no(), y.no());
                let n = np + ni + no + mid + x.nd + y.nd;
                let xmap: Vec<usize> = (0..x.c.n)
                    .map(|v| {
                        if v < np + ni {
                            v
                        } else if v < np + ni + mid {
                            np + ni + no + (v - np - ni)
                        } else {
                            np + ni + no + mid + (v - np - ni - mid)
                        }
                    })
                    .collect();
                let ymap: Vec<usize> = (0..y.c.n)
                    .map(|v| {
                        if v < np {
                            v
                        } else if v < np + mid {
                            np + ni + no + (v - np)
                        } else if v < np + mid + no {
                            np + ni + (v - np - mid)
                        } else {
                            np + ni + no + mid + x.nd + (v - np - mid - no)
                        }
                    })
                    .collect();
                let mut c = x.c.remap(n, &xmap);
                c.and(&y.c.remap(n, &ymap));
                if !c.normalize().unwrap_or(true) {
                    continue;
                }
                parts.push(Basic {
                    dom: x.dom.clone(),
                    ran: y.ran.clone(),
                    np,
                    nd: mid + x.nd + y.nd,
                    c,
                });
            }
        }
        Rel {
            params: a.params,
            parts,
        }
    }

    /// Restricts the domain (`domain`) or range of a map to the set `s`.
    pub fn intersect_side(&self, s: &Rel<T>, domain: bool) -> Rel<T> {
        let (a, b) = Rel::align(self, s);
        let mut parts = Vec::new();
        for x in &a.parts {
            for y in &b.parts {
                let tuple = if domain { x.dom.as_ref() } else { Some(&x.ran) };
                if tuple != Some(&y.ran) {
                    continue;
                }
                let np = x.np;
                let off = if domain { np } else { np + x.ni() };
                let k = y.no();
                let n = x.c.n + y.nd;
                let mut c = x.c.remap(n, &(0..x.c.n).collect::<Vec<_>>());
                let ymap: Vec<usize> = (0..y.c.n)
                    .map(|v| {
                        if v < np {
                            v
                        } else if v < np + k {
                            off + v - np
                        } else {
                            x.c.n + v - np - k
                        }
                    })
                    .collect();
                c.and(&y.c.remap(n, &ymap));
                if !c.normalize().unwrap_or(true) {
                    continue;
                }
                parts.push(Basic {
                    dom: x.dom.clone(),
                    ran: x.ran.clone(),
                    np,
                    nd: x.nd + y.nd,
                    c,
                });
            }
        }
        Rel {
            params: a.params,
            parts,
        }
    }

    /// `{ y − x : (x, y) ∈ self }` for pieces whose tuples have equal arity.
    pub fn deltas(&self) -> Rel<T> {
        self.map_parts(&|b| {
            let (np, ni, no) = (b.np, b.ni(), b.no());
            if ni != no || b.dom.is_none() {
                return None;
            }
            let n = b.c.n + no;
            let map: Vec<usize> = (0..b.c.n)
                .map(|v| if v < np { v } else { v + no })
                .collect();
            let mut c = b.c.remap(n, &map);
            for j in 0..no {
                // d_j − y_j + x_j = 0
                let mut r = vec![T::zero(); n + 1];
                r[1 + np + j] = T::one();
                r[1 + np + no + j] = T::one();
                r[1 + np + no + ni + j] = T::from_i64(-1);
                c.eqs.push(r);
            }
            Some(Basic {
                dom: None,
                ran: Tuple::anonymous_dims(None, no),
                np,
                nd: b.nd + ni + no,
                c,
            })
        })
    }

    /// For every point of the domain (parameters and domain dimensions), the lexicographically
    /// smallest (largest with `max`) element of its image. Domain points whose image has no
    /// such element (unbounded) are left out.
    pub fn lexopt(&self, max: bool) -> Result<Rel<T>, Overflow> {
        if self.has_wide_coefficients() {
            if let Some(r) = self.lexopt_by_points(max)? {
                return Ok(r);
            }
        }
        // Per piece, the optimum by sequential parametric optimisation; where every piece
        // allows it, the optimum of the union is the optimum of the pieces' optima, which are
        // single-valued and cheap to compare. Otherwise the general method on the whole union.
        let mut cands: Vec<(usize, Vec<Vec<Basic<T>>>)> = Vec::with_capacity(self.parts.len());
        for (i, p) in self.parts.iter().enumerate() {
            match lexopt_basic(p, max)? {
                Some(v) => cands.push((i, v)),
                None => return self.lexopt_general(max),
            }
        }
        let mut parts = Vec::new();
        let mut seen = vec![false; self.parts.len()];
        for (i, _) in cands.iter().enumerate() {
            if seen[i] {
                continue;
            }
            // Candidates of every piece in the space of piece `i`.
            let space = &self.parts[cands[i].0];
            let mut group: Vec<Basic<T>> = Vec::new();
            let mut sources = 0;
            for (j, (k, v)) in cands.iter().enumerate() {
                if !seen[j] && self.parts[*k].same_space(space) {
                    seen[j] = true;
                    sources += v.len();
                    group.extend(v.iter().flatten().cloned());
                }
            }
            if sources <= 1 {
                parts.extend(group);
            } else {
                let r = Rel {
                    params: self.params.clone(),
                    parts: group,
                };
                match combine_optima(&r, max)? {
                    Some(v) => parts.extend(v),
                    None => parts.extend(r.lexopt_general(max)?.parts),
                }
            }
        }
        Ok(Rel {
            params: self.params.clone(),
            parts,
        })
    }

    /// Whether some variable has a coefficient beyond `2^24` in absolute value: then the
    /// eliminations of the parametric methods may need very many splinters.
    fn has_wide_coefficients(&self) -> bool {
        let limit = T::from_i64(1 << 24);
        self.parts.iter().any(|b| {
            b.c.eqs
                .iter()
                .chain(&b.c.ineqs)
                .any(|r| r[1..].iter().any(|x| x.abs().is_ok_and(|a| a > limit)))
        })
    }

    /// The optimum domain point by domain point, each one a lexicographic optimum of a set
    /// (which the ILP solver answers whatever the coefficients); `None` when the domain (with
    /// the parameters) is not bounded. The answer has one piece per domain point.
    fn lexopt_by_points(&self, max: bool) -> Result<Option<Rel<T>>, Overflow> {
        let mut parts = Vec::new();
        let mut done = vec![false; self.parts.len()];
        for i in 0..self.parts.len() {
            if done[i] {
                continue;
            }
            let group: Vec<&Basic<T>> = (i..self.parts.len())
                .filter(|&j| self.parts[j].same_space(&self.parts[i]))
                .inspect(|&j| done[j] = true)
                .map(|j| &self.parts[j])
                .collect();
            let first = group[0];
            let nin = first.np + first.ni();
            let mut points: std::collections::BTreeSet<Vec<T>> = Default::default();
            for b in &group {
                for v in 0..nin {
                    let mut row = vec![T::zero(); b.nfix() + 1];
                    row[1 + v] = T::one();
                    if let Some(r) = Rel::range_of(b, &row)? {
                        if r.lo.is_none() || r.hi.is_none() {
                            return Ok(None);
                        }
                    }
                }
                match enumerate(&b.c, nin, &mut |x| {
                    points.insert(x.to_vec());
                    Ok(())
                }) {
                    Ok(()) => {}
                    Err(Fail::Overflow) => return Err(Overflow),
                    Err(Fail::Error(_)) => return Ok(None),
                }
            }
            for x in points {
                let mut best: Option<Vec<T>> = None;
                let mut unbounded = false;
                for b in &group {
                    let mut c = b.c.clone();
                    for v in &x {
                        c = c.fix(0, v)?;
                    }
                    match lex_extreme(&c, b.no(), max) {
                        Ok(Some(y)) => {
                            if best
                                .as_ref()
                                .is_none_or(|z| (max && y > *z) || (!max && y < *z))
                            {
                                best = Some(y);
                            }
                        }
                        Ok(None) => {}
                        Err(Fail::Overflow) => return Err(Overflow),
                        Err(Fail::Error(_)) => unbounded = true,
                    }
                }
                let (Some(y), false) = (best, unbounded) else {
                    continue;
                };
                let mut p = Basic::universe(first.np, first.dom.clone(), first.ran.clone());
                for (v, value) in x.iter().chain(&y).enumerate() {
                    let mut row = vec![T::zero(); p.c.n + 1];
                    row[0] = value.neg()?;
                    row[1 + v] = T::one();
                    p.c.eqs.push(row);
                }
                parts.push(p);
            }
        }
        Ok(Some(Rel {
            params: self.params.clone(),
            parts,
        }))
    }

    /// The optimum as "every point no other image point beats": exact for any union, but
    /// its subtraction grows quickly with the number of pieces and constraints.
    fn lexopt_general(&self, max: bool) -> Result<Rel<T>, Overflow> {
        let mut worse: Vec<Basic<T>> = Vec::new();
        for p in &self.parts {
            let (np, ni, no) = (p.np, p.ni(), p.no());
            let nf = np + ni + no;
            for k in 0..no {
                // Variables: [params, in, y, y', p's locals]; y' ∈ p(x) beats y at depth k.
                let n = nf + no + p.nd;
                let map: Vec<usize> = (0..p.c.n)
                    .map(|v| if v < np + ni { v } else { v + no })
                    .collect();
                let mut c = p.c.remap(n, &map);
                for j in 0..=k {
                    let mut r = vec![T::zero(); n + 1];
                    r[1 + np + ni + j] = T::one();
                    r[1 + nf + j] = T::from_i64(-1);
                    if j < k {
                        c.eqs.push(r);
                    } else {
                        // min: y_k − y'_k − 1 ≥ 0; max: y'_k − y_k − 1 ≥ 0.
                        if max {
                            r = negate(&r)?;
                        }
                        r[0] = T::from_i64(-1);
                        c.ineqs.push(r);
                    }
                }
                worse.push(Basic {
                    dom: p.dom.clone(),
                    ran: p.ran.clone(),
                    np,
                    nd: no + p.nd,
                    c,
                });
            }
        }
        self.subtract(&Rel {
            params: self.params.clone(),
            parts: worse,
        })
    }

    /// Exact range of the affine function `row` (over non-local variables) on piece `b`.
    pub fn range_of(b: &Basic<T>, row: &[T]) -> Result<Option<Range<T>>, Overflow> {
        let n = b.c.n + 1;
        let map: Vec<usize> = (0..b.c.n).map(|v| v + 1).collect();
        let mut c = b.c.remap(n, &map);
        let mut r = vec![T::zero(); n + 1];
        r[1] = T::from_i64(-1);
        for (i, x) in row.iter().enumerate() {
            if i == 0 {
                r[0] = x.clone();
            } else {
                r[1 + i] = x.clone();
            }
        }
        c.eqs.push(r);
        range_of_first(&c)
    }

    /// All non-local assignments (parameters, domain, range) of every piece, per piece.
    pub fn for_each_point(&self, f: &mut PointFn<'_, T>) -> Result<(), Fail> {
        for b in &self.parts {
            let nf = b.nfix();
            enumerate(&b.c, nf, &mut |x| f(b, x))?;
        }
        Ok(())
    }

    pub fn lex_point(b: &Basic<T>, max: bool) -> Result<Option<Vec<T>>, Fail> {
        lex_extreme(&b.c, b.nfix(), max)
    }
}
