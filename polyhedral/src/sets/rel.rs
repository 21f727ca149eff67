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

use super::bounds::{enumerate, lex_extreme, range_of_first, Range};
use super::conj::{negate, Conj, Row};
use super::omega::{is_feasible, project, without_unit_equalities};
use super::space::Tuple;
use super::Error;

/// A callback on one point of a basic relation.
pub(crate) type PointFn<'a> = dyn FnMut(&Basic, &[i64]) -> Result<(), Error> + 'a;

#[derive(Clone, Debug)]
pub(crate) struct Basic {
    pub dom: Option<Tuple>,
    pub ran: Tuple,
    pub np: usize,
    pub nd: usize,
    pub c: Conj,
}

impl Basic {
    pub fn universe(np: usize, dom: Option<Tuple>, ran: Tuple) -> Basic {
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

    pub fn same_space(&self, o: &Basic) -> bool {
        self.dom == o.dom && self.ran == o.ran
    }

    pub fn is_empty(&self) -> Result<bool, Error> {
        Ok(!is_feasible(&self.c)?)
    }

    /// Pieces whose locals are all stride locals (see [`super::omega`]); their union equals
    /// this basic relation.
    pub fn stride_form(&self) -> Result<Vec<Basic>, Error> {
        let nf = self.nfix();
        if self.nd == 0 {
            let mut c = self.c.clone();
            if !c.normalize()? || !is_feasible(&c)? {
                return Ok(Vec::new());
            }
            return Ok(vec![Basic { c, ..self.clone() }]);
        }
        Ok(project(&self.c, nf)?
            .into_iter()
            .map(|c| Basic {
                dom: self.dom.clone(),
                ran: self.ran.clone(),
                np: self.np,
                nd: c.n - nf,
                c,
            })
            .collect())
    }

    /// Adds `k` fresh locals at the end.
    pub fn add_locals(&mut self, k: usize) {
        self.c.add_vars(k);
        self.nd += k;
    }

    /// Extends a row over the non-local variables to this basic's variables.
    pub fn lift(&self, r: &[i64]) -> Row {
        let mut o = r.to_vec();
        o.resize(self.c.n + 1, 0);
        o
    }
}

fn intersect_basic(a: &Basic, b: &Basic) -> Basic {
    let nf = a.nfix();
    let n = nf + a.nd + b.nd;
    let mut c = a.c.remap(n, &(0..nf + a.nd).collect::<Vec<_>>());
    let bmap: Vec<usize> = (0..nf).chain((0..b.nd).map(|j| nf + a.nd + j)).collect();
    c.and(&b.c.remap(n, &bmap));
    Basic {
        dom: a.dom.clone(),
        ran: a.ran.clone(),
        np: a.np,
        nd: a.nd + b.nd,
        c,
    }
}

/// One constraint of a subtrahend in stride form.
enum Piece {
    Ineq(Row),
    Eq(Row),
    /// `e + m·σ = 0` for some integer σ, i.e. `m | e`.
    Stride(Row, i64),
}

fn pieces_of(b: &Basic) -> Vec<Piece> {
    let nf = b.nfix();
    let mut out = Vec::new();
    for e in &b.c.eqs {
        match (nf..b.c.n).find(|&v| e[1 + v] != 0) {
            None => out.push(Piece::Eq(e[..=nf].to_vec())),
            Some(s) => out.push(Piece::Stride(e[..=nf].to_vec(), e[1 + s].abs())),
        }
    }
    for r in &b.c.ineqs {
        out.push(Piece::Ineq(r[..=nf].to_vec()));
    }
    out
}

/// `a − b` for `b` in stride form, as disjoint pieces; empty pieces are dropped.
fn subtract_basic(a: &Basic, b: &Basic) -> Result<Vec<Basic>, Error> {
    let mut out = Vec::new();
    let mut acc = a.clone();
    for p in pieces_of(b) {
        // A constraint `acc` states already removes nothing.
        let stated = match &p {
            Piece::Ineq(r) => acc.c.states(&acc.lift(r), false),
            Piece::Eq(r) => acc.c.states(&acc.lift(r), true),
            Piece::Stride(..) => false,
        };
        if stated {
            continue;
        }
        let mut negs: Vec<Basic> = Vec::new();
        match &p {
            Piece::Ineq(r) => {
                let mut n = acc.clone();
                let mut row = negate(&acc.lift(r))?;
                row[0] -= 1;
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
                    row[0] -= 1;
                    n.c.ineqs.push(row);
                    negs.push(n);
                }
            }
            Piece::Stride(r, m) if *m <= 8 => {
                // e mod m ≠ 0 as the congruences e ≡ k (mod m), k = 1 … m − 1: strides stay
                // equalities, which later eliminations solve without splitting.
                for k in 1..*m {
                    let mut n = acc.clone();
                    n.add_locals(1);
                    let mut row = n.lift(r);
                    row[0] -= k;
                    row[n.c.n] = *m;
                    n.c.eqs.push(row);
                    negs.push(n);
                }
            }
            Piece::Stride(r, m) => {
                // e mod m ≠ 0  ⇔  ∃τ: 1 ≤ e + m·τ ≤ m − 1.
                let mut n = acc.clone();
                n.add_locals(1);
                let mut row = n.lift(r);
                row[n.c.n] = *m;
                let mut lo = row.clone();
                lo[0] -= 1;
                let mut hi = negate(&row)?;
                hi[0] += m - 1;
                n.c.ineqs.push(lo);
                n.c.ineqs.push(hi);
                negs.push(n);
            }
        }
        let mut implied = true;
        for mut n in negs {
            if n.c.normalize()? && is_feasible(&n.c)? {
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

/// Removes redundant constraints and turns implicit equalities into equalities. `b` must be
/// in stride form.
fn simplify_stride_basic(b: &Basic) -> Result<Basic, Error> {
    let mut b = b.clone();
    if !b.c.normalize()? {
        return Ok(b);
    }
    // The questions below are asked of `base`, the same system with the unit equalities
    // substituted away, whose inequality `i` is `b`'s inequality `i` rewritten.
    let mut base = without_unit_equalities(&b.c)?;
    // Implicit equalities: r ≥ 0 where r ≥ 1 is impossible.
    let mut i = 0;
    while i < b.c.ineqs.len() {
        let mut t = base.clone();
        t.ineqs[i][0] -= 1;
        if !is_feasible(&t)? {
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
        let mut t = base.clone();
        let r = t.ineqs.remove(i);
        let mut nr = negate(&r)?;
        nr[0] -= 1;
        t.ineqs.push(nr);
        if !is_feasible(&t)? {
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
        let mut t = b.c.clone();
        let r = t.eqs.remove(i);
        let local = (nf..b.c.n).find(|&v| r[1 + v] != 0);
        let implied = match local {
            None => {
                let mut up = r.clone();
                up[0] -= 1;
                let mut down = negate(&r)?;
                down[0] -= 1;
                let mut t1 = t.clone();
                t1.ineqs.push(up);
                let mut t2 = t;
                t2.ineqs.push(down);
                !is_feasible(&t1)? && !is_feasible(&t2)?
            }
            Some(s) => {
                let m = r[1 + s].abs();
                let mut row = r.clone();
                row[1 + s] = 0;
                t.add_vars(1);
                row.push(m);
                let mut lo = row.clone();
                lo[0] -= 1;
                let mut hi = negate(&row)?;
                hi[0] += m - 1;
                t.ineqs.push(lo);
                t.ineqs.push(hi);
                !is_feasible(&t)?
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
fn lexopt_basic(p: &Basic, max: bool) -> Result<Option<Vec<Vec<Basic>>>, Error> {
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
                let mut ps = project(&c, keep)?;
                let d = match ps.len() {
                    0 => continue,
                    1 if ps[0].n == keep => ps.pop().expect("one piece"),
                    _ => return Ok(None),
                };
                if d.eqs.iter().any(|r| r[1 + v] != 0) {
                    next.push(c);
                    continue;
                }
                // The bounds that limit the optimum, as `y_k = B_i` rows over `d`'s variables.
                let mut bs: Vec<Row> = Vec::new();
                for r in &d.ineqs {
                    let a = r[1 + v];
                    if (max && a < 0) || (!max && a > 0) {
                        if a.abs() != 1 {
                            return Ok(None);
                        }
                        // max: r = B − y_k ≥ 0; min: r = y_k − B ≥ 0.
                        let mut b = if max { r.clone() } else { negate(r)? };
                        b[1 + v] = 0;
                        bs.push(b);
                    }
                }
                if bs.is_empty() {
                    return Ok(None);
                }
                let lift = |r: &Row| -> Row {
                    let mut o = r.clone();
                    o.resize(c.n + 1, 0);
                    o
                };
                for j in 0..bs.len() {
                    let mut cj = c.clone();
                    let mut e = lift(&bs[j]);
                    e[1 + v] = -1;
                    cj.eqs.push(e);
                    for (i, bi) in bs.iter().enumerate() {
                        if i == j {
                            continue;
                        }
                        // max: B_i − B_j ≥ 0 (− 1 when i < j); min: B_j − B_i ≥ 0 (− 1 …).
                        let mut r = if max {
                            super::conj::combine(bi, 1, &bs[j], -1)?
                        } else {
                            super::conj::combine(&bs[j], 1, bi, -1)?
                        };
                        if i < j {
                            r[0] = super::conj::add(r[0], -1)?;
                        }
                        cj.ineqs.push(lift(&r));
                    }
                    if cj.normalize()? && is_feasible(&cj)? {
                        next.push(cj);
                    }
                }
            }
            work = next;
        }
        if !work.is_empty() {
            done.push(
                work.into_iter()
                    .map(|c| Basic {
                        dom: p.dom.clone(),
                        ran: p.ran.clone(),
                        np: p.np,
                        nd: 0,
                        c,
                    })
                    .collect(),
            );
        }
    }
    Ok(Some(done))
}

/// The image of a piece without locals as explicit affine functions of the parameters and
/// domain dimensions, one row `[constant, params…, domain…]` per range dimension; `None` when
/// some range dimension is not fixed by a unit-coefficient equality over earlier ones.
fn explicit_image(b: &Basic) -> Result<Option<Vec<Row>>, Error> {
    let nin = b.np + b.ni();
    let no = b.no();
    if b.nd != 0 {
        return Ok(None);
    }
    let mut fs: Vec<Row> = Vec::with_capacity(no);
    for k in 0..no {
        let y = nin + k;
        let Some(e) =
            b.c.eqs
                .iter()
                .find(|r| r[1 + y].abs() == 1 && (k + 1..no).all(|j| r[1 + nin + j] == 0))
        else {
            return Ok(None);
        };
        // y_k = −(e without y_k) · sign(e_y).
        let sign = -e[1 + y];
        let mut f: Row = e[..=nin]
            .iter()
            .map(|&x| super::conj::mul(x, sign))
            .collect::<Result<_, _>>()?;
        for (j, fj) in fs.iter().enumerate() {
            let c = super::conj::mul(e[1 + nin + j], sign)?;
            if c != 0 {
                f = super::conj::combine(&f, 1, fj, c)?;
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
fn combine_optima(r: &Rel, max: bool) -> Result<Option<Vec<Basic>>, Error> {
    let mut fs = Vec::with_capacity(r.parts.len());
    for p in &r.parts {
        match explicit_image(p)? {
            Some(f) => fs.push(f),
            None => return Ok(None),
        }
    }
    // Each piece's domain as rows over all of its variables, the image substituted.
    let mut doms: Vec<Conj> = Vec::with_capacity(r.parts.len());
    for (p, f) in r.parts.iter().zip(&fs) {
        let nin = p.np + p.ni();
        let sub = |row: &Row| -> Result<Row, Error> {
            let mut o = row[..=nin].to_vec();
            for (k, fk) in f.iter().enumerate() {
                let c = row[1 + nin + k];
                if c != 0 {
                    o = super::conj::combine(&o, 1, fk, c)?;
                }
            }
            o.resize(row.len(), 0);
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
        let mut beaten: Vec<Basic> = Vec::new();
        for (j, q) in r.parts.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut prefix: Vec<Row> = Vec::new();
            for (fp, fq) in fs[i].iter().zip(&fs[j]) {
                // δ ≥ 1 where q's image is better at this dimension.
                let mut d = if max {
                    super::conj::combine(fq, 1, fp, -1)?
                } else {
                    super::conj::combine(fp, 1, fq, -1)?
                };
                d.resize(n + 1, 0);
                let constant = d[1..].iter().all(|&x| x == 0);
                if constant && d[0] == 0 {
                    continue;
                }
                if constant && d[0] < 0 {
                    break;
                }
                let mut c = doms[j].clone();
                c.eqs.extend(prefix.iter().cloned());
                if !constant {
                    let mut strict = d.clone();
                    strict[0] = super::conj::add(strict[0], -1)?;
                    c.ineqs.push(strict);
                }
                beaten.push(Basic {
                    c,
                    nd: 0,
                    ..q.clone()
                });
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
pub(crate) struct Rel {
    pub params: Vec<String>,
    pub parts: Vec<Basic>,
}

fn extend_params(b: &Basic, old: &[String], new: &[String]) -> Basic {
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
    pub fn empty(params: Vec<String>) -> Rel {
        Rel {
            params,
            parts: Vec::new(),
        }
    }

    pub fn with_params(&self, new: &[String]) -> Rel {
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
    pub fn align(a: &Rel, b: &Rel) -> (Rel, Rel) {
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

    pub fn union(&self, o: &Rel) -> Rel {
        let (mut a, b) = Rel::align(self, o);
        a.parts.extend(b.parts);
        a
    }

    pub fn intersect(&self, o: &Rel) -> Rel {
        let (a, b) = Rel::align(self, o);
        let mut parts = Vec::new();
        for x in &a.parts {
            for y in &b.parts {
                if x.same_space(y) {
                    let mut r = intersect_basic(x, y);
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

    pub fn subtract(&self, o: &Rel) -> Result<Rel, Error> {
        let (a, b) = Rel::align(self, o);
        let mut subs: Vec<Basic> = Vec::new();
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
                for c in &cur {
                    next.extend(subtract_basic(c, y)?);
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

    pub fn is_empty(&self) -> Result<bool, Error> {
        for b in &self.parts {
            if !b.is_empty()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub fn is_subset(&self, o: &Rel) -> Result<bool, Error> {
        self.subtract(o)?.is_empty()
    }

    /// Drops empty pieces, removes locals where that is exact, redundant constraints and
    /// pieces contained in others.
    pub fn simplify(&self) -> Result<Rel, Error> {
        let mut parts: Vec<Basic> = Vec::new();
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
                let covered = (0..parts.len()).any(|j| {
                    j != i
                        && parts[j].same_space(&parts[i])
                        && subtract_basic(&parts[i], &parts[j])
                            .map(|d| d.is_empty())
                            .unwrap_or(false)
                });
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
    fn map_parts(&self, f: &dyn Fn(&Basic) -> Option<Basic>) -> Rel {
        Rel {
            params: self.params.clone(),
            parts: self.parts.iter().filter_map(f).collect(),
        }
    }

    pub fn reverse(&self) -> Rel {
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
    pub fn project_side(&self, domain: bool) -> Rel {
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
    pub fn project_out(&self, first: usize, n: usize) -> Rel {
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
    pub fn apply_range(&self, o: &Rel) -> Rel {
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
    pub fn intersect_side(&self, s: &Rel, domain: bool) -> Rel {
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
    pub fn deltas(&self) -> Rel {
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
                let mut r = vec![0; n + 1];
                r[1 + np + j] = 1;
                r[1 + np + no + j] = 1;
                r[1 + np + no + ni + j] = -1;
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
    pub fn lexopt(&self, max: bool) -> Result<Rel, Error> {
        // Per piece, the optimum by sequential parametric optimisation; where every piece
        // allows it, the optimum of the union is the optimum of the pieces' optima, which are
        // single-valued and cheap to compare. Otherwise the general method on the whole union.
        let mut cands: Vec<(usize, Vec<Vec<Basic>>)> = Vec::with_capacity(self.parts.len());
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
            let mut group: Vec<Basic> = Vec::new();
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

    /// The optimum as "every point no other image point beats": exact for any union, but
    /// its subtraction grows quickly with the number of pieces and constraints.
    fn lexopt_general(&self, max: bool) -> Result<Rel, Error> {
        let mut worse: Vec<Basic> = Vec::new();
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
                    let mut r = vec![0; n + 1];
                    r[1 + np + ni + j] = 1;
                    r[1 + nf + j] = -1;
                    if j < k {
                        c.eqs.push(r);
                    } else {
                        // min: y_k − y'_k − 1 ≥ 0; max: y'_k − y_k − 1 ≥ 0.
                        if max {
                            r = negate(&r)?;
                        }
                        r[0] = -1;
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
    pub fn range_of(b: &Basic, row: &[i64]) -> Result<Option<Range>, Error> {
        let n = b.c.n + 1;
        let map: Vec<usize> = (0..b.c.n).map(|v| v + 1).collect();
        let mut c = b.c.remap(n, &map);
        let mut r = vec![0; n + 1];
        r[1] = -1;
        for (i, x) in row.iter().enumerate() {
            if i == 0 {
                r[0] = *x;
            } else {
                r[1 + i] = *x;
            }
        }
        c.eqs.push(r);
        range_of_first(&c)
    }

    /// All non-local assignments (parameters, domain, range) of every piece, per piece.
    pub fn for_each_point(&self, f: &mut PointFn<'_>) -> Result<(), Error> {
        for b in &self.parts {
            let nf = b.nfix();
            enumerate(&b.c, nf, &mut |x| f(b, x))?;
        }
        Ok(())
    }

    pub fn lex_point(b: &Basic, max: bool) -> Result<Option<Vec<i64>>, Error> {
        lex_extreme(&b.c, b.nfix(), max)
    }
}
