//! AST generation from a schedule tree, after Grosser, Verdoolaege and Cohen, "Polyhedral AST
//! generation is more than scanning polyhedra" (isl's `isl_ast_build`).
//!
//! The generator walks the tree with, for each statement, the [`Instances`] reaching the
//! current node: a conjunction over the parameters, the band members above (`c_0 … c_{d-1}`),
//! the statement's iterators and division locals. A band member adds a dimension; its loop
//! scans the exact integer projection of every statement's instances onto the outer
//! dimensions (Omega-test projection, so the bounds are exact, including `floord`/`ceild`
//! bounds from tiled schedules). Bounds already implied by the enclosing loops are dropped
//! ("gist"); when all statements below agree on the bounds the loop runs exactly them,
//! otherwise it runs their hull (`min` of the lower bounds, `max` of the upper ones) and the
//! statements are guarded. A dimension fixed by an equality with a unit coefficient is a
//! substitution, not a loop.
//!
//! At a leaf, the statement's iterators become further dimensions (an implicit identity band),
//! so a schedule that is not injective still runs every instance, and an iterator that the
//! band members determine is recovered by substitution (`i = 32*c0 + c1` after tiling). The
//! statement is guarded by exactly those constraints of its instance set that the enclosing
//! loops do not imply (congruences become `mod` conditions).
//!
//! What holds on the way out: every instance the tree schedules runs exactly once, in the
//! tree's order (sequence children in order, band members lexicographically); a loop is
//! `parallel` when its band member is coincident, and `vectorizable` when it is also
//! innermost and every access of the statements below moves by at most one element of the
//! last subscript per iteration; marks become [`Ast::Mark`].

use crate::ast::{Ast, AstCond, AstExpr, LoopAnnotations};
use crate::program::{ConstraintKind, Program, Var};
use crate::schedule::instances::Instances;
use crate::schedule::{verify, Node, NodeKind, QuasiAffine, ScheduleError, ScheduleTree};
use crate::sets::conj::{Conj, Row};
use crate::sets::omega::{is_feasible, project};

/// The loop AST that runs the instances of `tree` in its order.
///
/// The tree is verified first ([`crate::schedule::verify`]); a tree that schedules some
/// instance other than once, or whose loops would be unbounded, is an error.
pub fn generate_ast(program: &Program, tree: &ScheduleTree) -> Result<Ast, ScheduleError> {
    verify(program, tree)?;
    let NodeKind::Domain(stmts) = &tree.root.kind else {
        return Err(ScheduleError::Invalid("the root is not a domain".into()));
    };
    let actives = stmts
        .iter()
        .map(|&s| Instances::domain(program, s))
        .collect::<Result<Vec<_>, _>>()?;
    let np = program.params.len();
    let mut g = Gen {
        program,
        np,
        dims: Vec::new(),
        ctx: Conj::universe(np),
    };
    Ok(Ast::Block(g.children(&tree.root, actives)?))
}

/// What comes after the last member of a band.
#[derive(Clone, Copy)]
enum Cont<'t> {
    /// The band node's child.
    Child(&'t Node),
    /// The statement itself (after the implicit identity band of a leaf).
    User,
}

/// The bounds one piece of one statement's instances puts on the current dimension, as rows
/// over the parameters and the dimensions up to the current one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Bounds {
    eqs: Vec<Row>,
    lower: Vec<Row>,
    upper: Vec<Row>,
}

struct Gen<'a> {
    program: &'a Program,
    np: usize,
    /// The value of each schedule dimension on the current path: a loop variable or an
    /// expression of outer ones.
    dims: Vec<AstExpr>,
    /// What the enclosing loops and context guarantee, over `[parameters | dimensions]`.
    ctx: Conj,
}

impl Gen<'_> {
    fn children(
        &mut self,
        node: &Node,
        actives: Vec<Instances>,
    ) -> Result<Vec<Ast>, ScheduleError> {
        match node.children.first() {
            Some(c) => self.node(c, actives),
            None => Ok(Vec::new()),
        }
    }

    fn prune(&self, actives: Vec<Instances>) -> Result<Vec<Instances>, ScheduleError> {
        let mut out = Vec::with_capacity(actives.len());
        for a in actives {
            if is_feasible(&a.with_context(&self.ctx))? {
                out.push(a);
            }
        }
        Ok(out)
    }

    fn node(&mut self, node: &Node, actives: Vec<Instances>) -> Result<Vec<Ast>, ScheduleError> {
        let actives = self.prune(actives)?;
        match &node.kind {
            NodeKind::Domain(_) => Err(ScheduleError::Invalid("a domain below the root".into())),
            NodeKind::Context(cs) => {
                let saved = self.ctx.clone();
                for c in cs {
                    let mut row = vec![0; self.ctx.n + 1];
                    row[0] = c.expr.constant;
                    for &(v, k) in c.expr.terms() {
                        match v {
                            Var::Param(p) if p.index() < self.np => row[1 + p.index()] = k,
                            _ => {
                                return Err(ScheduleError::Invalid(
                                    "a context constraint uses a non-parameter".into(),
                                ))
                            }
                        }
                    }
                    match c.kind {
                        ConstraintKind::NonNegative => self.ctx.ineqs.push(row),
                        ConstraintKind::Zero => self.ctx.eqs.push(row),
                    }
                }
                let out = self.children(node, actives);
                self.ctx = saved;
                out
            }
            NodeKind::Band(band) => {
                let mut with_fns = Vec::with_capacity(actives.len());
                for a in actives {
                    let f = band.functions(a.stmt).ok_or_else(|| {
                        ScheduleError::Invalid(format!(
                            "the band does not schedule {}",
                            self.program.statements[a.stmt.index()].name
                        ))
                    })?;
                    with_fns.push((a, f.to_vec()));
                }
                self.members(&band.coincident, 0, with_fns, Cont::Child(node))
            }
            NodeKind::Sequence | NodeKind::Set => {
                let mut out = Vec::new();
                for c in &node.children {
                    out.extend(self.node(c, actives.clone())?);
                }
                Ok(merge_guards(out))
            }
            NodeKind::Filter(f) => {
                let mut kept = Vec::with_capacity(actives.len());
                for mut a in actives {
                    if let Some(cs) = f.constraints(a.stmt) {
                        for c in cs {
                            a.add_iter_constraint(c)?;
                        }
                        kept.push(a);
                    }
                }
                self.children(node, kept)
            }
            NodeKind::Extension(e) => {
                if e.outer != self.dims.len() {
                    return Err(ScheduleError::Invalid(format!(
                        "an extension over {} outer dimensions below {} band members",
                        e.outer,
                        self.dims.len()
                    )));
                }
                let mut all = actives;
                for (s, cs) in &e.stmts {
                    all.push(Instances::extension(self.program, *s, e.outer, cs)?);
                }
                let all = self.prune(all)?;
                self.children(node, all)
            }
            NodeKind::Mark(name) => {
                let body = self.children(node, actives)?;
                Ok(vec![Ast::Mark {
                    name: name.clone(),
                    body: Box::new(Ast::Block(body)),
                }])
            }
            NodeKind::Leaf => {
                let mut actives = actives;
                actives.sort_by_key(|a| a.stmt);
                let mut out = Vec::new();
                for a in actives {
                    let n = a.n_iter;
                    let identity: Vec<QuasiAffine> =
                        (0..n).map(|j| QuasiAffine::var(Var::Iter(j))).collect();
                    out.extend(self.members(
                        &vec![false; n],
                        0,
                        vec![(a, identity)],
                        Cont::User,
                    )?);
                }
                Ok(merge_guards(out))
            }
        }
    }

    /// Generates the loops of members `idx..` of a band (each active statement with its
    /// functions), then what follows the band.
    fn members(
        &mut self,
        coincident: &[bool],
        idx: usize,
        mut actives: Vec<(Instances, Vec<QuasiAffine>)>,
        cont: Cont<'_>,
    ) -> Result<Vec<Ast>, ScheduleError> {
        if actives.is_empty() {
            return Ok(Vec::new());
        }
        if idx == coincident.len() {
            let plain: Vec<Instances> = actives.into_iter().map(|(a, _)| a).collect();
            return match cont {
                Cont::Child(n) => self.children(n, plain),
                Cont::User => self.user(plain),
            };
        }
        for (a, f) in actives.iter_mut() {
            a.add_dim(&f[idx])?;
        }
        let saved = self.ctx.clone();
        self.ctx.add_vars(1);
        let result = self.dimension(coincident, idx, actives, cont);
        self.ctx = saved;
        result
    }

    /// The loop (or substitution) of the dimension just added, with `ctx` already extended.
    fn dimension(
        &mut self,
        coincident: &[bool],
        idx: usize,
        actives: Vec<(Instances, Vec<QuasiAffine>)>,
        cont: Cont<'_>,
    ) -> Result<Vec<Ast>, ScheduleError> {
        let d = self.dims.len();
        let cur = self.np + d;
        let k = cur + 1;
        let mut sets: Vec<Bounds> = Vec::new();
        for (a, _) in &actives {
            for piece in project(&a.rel, k)? {
                if let Some(b) = self.bounds_of(&piece, cur, k)? {
                    if b.eqs.is_empty() && (b.lower.is_empty() || b.upper.is_empty()) {
                        return Err(ScheduleError::Unbounded(format!(
                            "dimension {d} of {}",
                            self.program.statements[a.stmt.index()].name
                        )));
                    }
                    if !sets.contains(&b) {
                        sets.push(b);
                    }
                }
            }
        }
        if sets.is_empty() {
            return Ok(Vec::new());
        }
        let exact = sets.len() == 1;
        if exact {
            let b = &sets[0];
            for r in &b.eqs {
                self.ctx.eqs.push(r.clone());
            }
            for r in b.lower.iter().chain(&b.upper) {
                self.ctx.ineqs.push(r.clone());
            }
            if let Some(r) = b.eqs.iter().find(|r| r[1 + cur].abs() == 1) {
                // a·c + rest = 0 with a = ±1: c = -a·rest.
                let a = r[1 + cur];
                let mut rest = r.clone();
                rest[1 + cur] = 0;
                let rest: Row = rest.iter().map(|&x| -a * x).collect();
                let value = self.expr_of(&rest);
                self.dims.push(value);
                let body = self.members(coincident, idx + 1, actives, cont);
                self.dims.pop();
                return body;
            }
        }
        let (lowers, uppers) = if exact {
            let (lo, hi) = self.bound_exprs(&sets[0], cur);
            (vec![AstExpr::max(lo)], vec![AstExpr::min(hi)])
        } else {
            self.hull(&sets, cur)?
        };
        let var = self.fresh_name(d);
        self.dims.push(AstExpr::Var(var.clone()));
        let body = self.members(coincident, idx + 1, actives, cont);
        self.dims.pop();
        let body = body?;
        if body.is_empty() {
            return Ok(Vec::new());
        }
        let parallel = coincident[idx];
        let innermost = !body.iter().any(Ast::contains_loop);
        let vectorizable = parallel && innermost && self.unit_stride(&body, &var);
        Ok(vec![Ast::For {
            var,
            lower: fold(AstExpr::min(lowers)),
            upper: fold(AstExpr::max(uppers)),
            step: 1,
            body: Box::new(Ast::Block(body)),
            annotations: LoopAnnotations {
                parallel,
                vectorizable,
            },
        }])
    }

    /// Bounds of a loop that scans the union of several pieces' ranges. Rows that every
    /// piece implies are valid on the whole union: when there are such lower (upper) rows,
    /// their maximum (minimum) is the bound and they join the context; otherwise the bound
    /// is the smallest of the pieces' lower bounds (the largest of their upper bounds).
    fn hull(
        &mut self,
        sets: &[Bounds],
        cur: usize,
    ) -> Result<(Vec<AstExpr>, Vec<AstExpr>), ScheduleError> {
        let mut cands: Vec<Row> = Vec::new();
        for b in sets {
            for r in b.lower.iter().chain(&b.upper) {
                if !cands.contains(r) {
                    cands.push(r.clone());
                }
            }
            for r in &b.eqs {
                let neg: Row = r.iter().map(|&x| -x).collect();
                for x in [r.clone(), neg] {
                    if !cands.contains(&x) {
                        cands.push(x);
                    }
                }
            }
        }
        let mut valid: Vec<Row> = Vec::new();
        for r in cands {
            let mut all = true;
            for b in sets {
                let mut c = self.ctx.clone();
                c.eqs.extend(b.eqs.iter().cloned());
                c.ineqs.extend(b.lower.iter().cloned());
                c.ineqs.extend(b.upper.iter().cloned());
                if !implied(&c, &r)? {
                    all = false;
                    break;
                }
            }
            if all {
                valid.push(r);
            }
        }
        // Keep the tightest: drop a valid row the others imply.
        let mut keep = vec![true; valid.len()];
        for i in 0..valid.len() {
            let mut c = self.ctx.clone();
            for (j, r) in valid.iter().enumerate() {
                if j != i && keep[j] {
                    c.ineqs.push(r.clone());
                }
            }
            if implied(&c, &valid[i])? {
                keep[i] = false;
            }
        }
        let valid: Vec<Row> = valid
            .into_iter()
            .zip(keep)
            .filter_map(|(r, k)| k.then_some(r))
            .collect();
        let hull = Bounds {
            eqs: Vec::new(),
            lower: valid.iter().filter(|r| r[1 + cur] > 0).cloned().collect(),
            upper: valid.iter().filter(|r| r[1 + cur] < 0).cloned().collect(),
        };
        self.ctx.ineqs.extend(valid.iter().cloned());
        let (hull_lo, hull_hi) = self.bound_exprs(&hull, cur);
        let mut lowers = Vec::new();
        let mut uppers = Vec::new();
        for b in sets {
            let (lo, hi) = self.bound_exprs(b, cur);
            push_unique(&mut lowers, AstExpr::max(lo));
            push_unique(&mut uppers, AstExpr::min(hi));
        }
        let lowers = if hull_lo.is_empty() {
            lowers
        } else {
            vec![AstExpr::max(hull_lo)]
        };
        let uppers = if hull_hi.is_empty() {
            uppers
        } else {
            vec![AstExpr::min(hull_hi)]
        };
        Ok((lowers, uppers))
    }

    /// The bounds a piece of a projection (over `k` kept variables plus stride locals) puts
    /// on variable `cur`, without those the context and the piece's other bounds imply;
    /// `None` when the piece contradicts the context.
    fn bounds_of(
        &self,
        piece: &Conj,
        cur: usize,
        k: usize,
    ) -> Result<Option<Bounds>, ScheduleError> {
        let plain = |r: &Row| r[1 + k..].iter().all(|&x| x == 0);
        let mut b = Bounds::default();
        let mut check = self.ctx.clone();
        for r in piece.eqs.iter().filter(|r| plain(r)) {
            let r = r[..=k].to_vec();
            check.eqs.push(r.clone());
            if r[1 + cur] != 0 {
                b.eqs.push(r);
            }
        }
        let mut ineqs: Vec<Row> = Vec::new();
        for r in &piece.ineqs {
            let r = r[..=k].to_vec();
            if r[1 + cur] != 0 {
                ineqs.push(r);
            } else {
                check.ineqs.push(r);
            }
        }
        let mut all = check.clone();
        all.ineqs.extend(ineqs.iter().cloned());
        if !is_feasible(&all)? {
            return Ok(None);
        }
        // Drop bounds implied by the context, the piece's equalities and the bounds kept.
        let mut keep = vec![true; ineqs.len()];
        for i in 0..ineqs.len() {
            let mut c = check.clone();
            for (j, r) in ineqs.iter().enumerate() {
                if j != i && keep[j] {
                    c.ineqs.push(r.clone());
                }
            }
            if implied(&c, &ineqs[i])? {
                keep[i] = false;
            }
        }
        for (r, kept) in ineqs.into_iter().zip(keep) {
            if !kept {
                continue;
            }
            if r[1 + cur] > 0 {
                b.lower.push(r);
            } else {
                b.upper.push(r);
            }
        }
        b.eqs.sort();
        b.lower.sort();
        b.upper.sort();
        Ok(Some(b))
    }

    /// The lower and upper bound expressions of variable `cur` in `b`.
    fn bound_exprs(&self, b: &Bounds, cur: usize) -> (Vec<AstExpr>, Vec<AstExpr>) {
        let mut lo = Vec::new();
        let mut hi = Vec::new();
        let split = |r: &Row| {
            let a = r[1 + cur];
            let mut rest = r.clone();
            rest[1 + cur] = 0;
            (a, rest)
        };
        for r in &b.eqs {
            let (a, rest) = split(r);
            // a·c + rest = 0: c = -rest/a.
            let (a, num): (i64, Row) = if a > 0 {
                (a, rest.iter().map(|&x| -x).collect())
            } else {
                (-a, rest)
            };
            let e = self.expr_of(&num);
            push_unique(&mut lo, AstExpr::ceil_div(e.clone(), a));
            push_unique(&mut hi, AstExpr::floor_div(e, a));
        }
        for r in &b.lower {
            let (a, rest) = split(r);
            let num: Row = rest.iter().map(|&x| -x).collect();
            push_unique(&mut lo, AstExpr::ceil_div(self.expr_of(&num), a));
        }
        for r in &b.upper {
            let (a, rest) = split(r);
            push_unique(&mut hi, AstExpr::floor_div(self.expr_of(&rest), -a));
        }
        (lo, hi)
    }

    /// A row over `[parameters | dimensions]` as an expression.
    fn expr_of(&self, r: &[i64]) -> AstExpr {
        let mut e = AstExpr::Int(0);
        for (p, &c) in r[1..=self.np].iter().enumerate() {
            e = AstExpr::plus(
                e,
                AstExpr::mul(c, AstExpr::Param(crate::program::ParamId(p as u32))),
            );
        }
        for (k, &c) in r[1 + self.np..].iter().enumerate() {
            if c != 0 {
                e = AstExpr::plus(e, AstExpr::mul(c, self.dims[k].clone()));
            }
        }
        AstExpr::plus(e, AstExpr::Int(r[0]))
    }

    /// The statement instance at the current dimensions, guarded by what the loops do not
    /// imply. Each active's iterators are its last dimensions.
    fn user(&mut self, actives: Vec<Instances>) -> Result<Vec<Ast>, ScheduleError> {
        let mut out = Vec::new();
        let k = self.ctx.n;
        for a in actives {
            let d = self.dims.len();
            let args = self.dims[d - a.n_iter..].to_vec();
            let user = Ast::User { stmt: a.stmt, args };
            let mut alternatives: Vec<Vec<AstCond>> = Vec::new();
            let mut always = false;
            for piece in project(&a.rel, k)? {
                let mut local = self.ctx.clone();
                let mut conds = Vec::new();
                for r in &piece.eqs {
                    if let Some(l) = (k..piece.n).find(|&v| r[1 + v] != 0) {
                        // e + m·σ = 0: m divides e.
                        let m = r[1 + l].abs();
                        let e = r[..=k].to_vec();
                        if !divisibility_implied(&local, &e, m)? {
                            conds.push(AstCond::Divisible(self.expr_of(&e), m));
                        }
                    } else {
                        let e = r[..=k].to_vec();
                        let neg: Row = e.iter().map(|&x| -x).collect();
                        if !(implied(&local, &e)? && implied(&local, &neg)?) {
                            conds.push(AstCond::Zero(self.expr_of(&e)));
                            local.eqs.push(e);
                        }
                    }
                }
                for r in &piece.ineqs {
                    let e = r[..=k].to_vec();
                    if !implied(&local, &e)? {
                        conds.push(AstCond::NonNegative(self.expr_of(&e)));
                        local.ineqs.push(e);
                    }
                }
                if !is_feasible(&local)? {
                    continue;
                }
                if conds.is_empty() {
                    always = true;
                    break;
                }
                alternatives.push(conds);
            }
            if always {
                out.push(user);
                continue;
            }
            let mut chain: Option<Box<Ast>> = None;
            for conds in alternatives.into_iter().rev() {
                chain = Some(Box::new(Ast::If {
                    conds,
                    then: Box::new(user.clone()),
                    otherwise: chain,
                }));
            }
            if let Some(c) = chain {
                out.push(*c);
            }
        }
        Ok(out)
    }

    /// `c<d>`, or a variant that no parameter is named.
    fn fresh_name(&self, d: usize) -> String {
        let taken = |n: &str| self.program.params.iter().any(|p| p.name == n);
        let mut name = format!("c{d}");
        while taken(&name) {
            name.push('_');
        }
        name
    }

    /// Whether every access of every statement below moves by 0 or +1 elements of its last
    /// subscript, and not at all in the others, per iteration of `var`.
    fn unit_stride(&self, body: &[Ast], var: &str) -> bool {
        let mut ok = true;
        for a in body {
            a.walk(&mut |n| {
                let Ast::User { stmt, args } = n else { return };
                let derivs: Option<Vec<i64>> = args.iter().map(|e| derivative(e, var)).collect();
                let Some(derivs) = derivs else {
                    ok = false;
                    return;
                };
                let s = &self.program.statements[stmt.index()];
                for (_, acc) in s.accesses() {
                    let n = acc.subscripts.len();
                    for (t, sub) in acc.subscripts.iter().enumerate() {
                        let step: i64 = derivs
                            .iter()
                            .enumerate()
                            .map(|(j, dj)| sub.coeff(Var::Iter(j)) * dj)
                            .sum();
                        let fine = if t + 1 == n {
                            step == 0 || step == 1
                        } else {
                            step == 0
                        };
                        ok &= fine;
                    }
                }
            });
        }
        ok
    }
}

/// Consecutive guards with the same conditions (and no `else`) as one guard.
fn merge_guards(items: Vec<Ast>) -> Vec<Ast> {
    let mut out: Vec<Ast> = Vec::with_capacity(items.len());
    for item in items {
        if let (
            Some(Ast::If {
                conds: prev,
                then,
                otherwise: None,
            }),
            Ast::If {
                conds,
                then: next,
                otherwise: None,
            },
        ) = (out.last_mut(), &item)
        {
            if prev == conds {
                let mut body = match std::mem::replace(then.as_mut(), Ast::Block(Vec::new())) {
                    Ast::Block(b) => b,
                    other => vec![other],
                };
                body.push((**next).clone());
                **then = Ast::Block(body);
                continue;
            }
        }
        out.push(item);
    }
    out
}

/// `min`/`max` of integer constants folded to one constant.
fn fold(e: AstExpr) -> AstExpr {
    match e {
        AstExpr::Min(items) if items.iter().all(|x| matches!(x, AstExpr::Int(_))) => {
            AstExpr::Int(items.iter().map(int_of).min().unwrap_or(0))
        }
        AstExpr::Max(items) if items.iter().all(|x| matches!(x, AstExpr::Int(_))) => {
            AstExpr::Int(items.iter().map(int_of).max().unwrap_or(0))
        }
        e => e,
    }
}

fn int_of(e: &AstExpr) -> i64 {
    match e {
        AstExpr::Int(v) => *v,
        _ => 0,
    }
}

fn push_unique(list: &mut Vec<AstExpr>, e: AstExpr) {
    if !list.contains(&e) {
        list.push(e);
    }
}

/// Whether `ctx` implies `row ≥ 0` (that is, `ctx ∧ row ≤ -1` has no integer point).
fn implied(ctx: &Conj, row: &[i64]) -> Result<bool, ScheduleError> {
    let mut c = ctx.clone();
    let mut neg: Row = row.iter().map(|&x| -x).collect();
    neg[0] -= 1;
    c.ineqs.push(neg);
    Ok(!is_feasible(&c)?)
}

/// Whether `ctx` implies that `m` divides `e`: no point has `e = m·q + r` with `0 < r < m`.
fn divisibility_implied(ctx: &Conj, e: &[i64], m: i64) -> Result<bool, ScheduleError> {
    let mut c = ctx.clone();
    c.add_vars(2);
    let (q, r) = (c.n - 2, c.n - 1);
    let mut eq = e.to_vec();
    eq.resize(c.n + 1, 0);
    eq[1 + q] = -m;
    eq[1 + r] = -1;
    c.eqs.push(eq);
    let mut lo = vec![0; c.n + 1];
    lo[0] = -1;
    lo[1 + r] = 1;
    let mut hi = vec![0; c.n + 1];
    hi[0] = m - 1;
    hi[1 + r] = -1;
    c.ineqs.push(lo);
    c.ineqs.push(hi);
    Ok(!is_feasible(&c)?)
}

/// How much `e` grows when loop variable `var` grows by one, when that is a constant.
fn derivative(e: &AstExpr, var: &str) -> Option<i64> {
    match e {
        AstExpr::Int(_) | AstExpr::Param(_) => Some(0),
        AstExpr::Var(v) => Some(i64::from(v == var)),
        AstExpr::Add(a, b) => Some(derivative(a, var)? + derivative(b, var)?),
        AstExpr::Mul(k, a) => Some(k * derivative(a, var)?),
        AstExpr::FloorDiv(a, _) | AstExpr::CeilDiv(a, _) | AstExpr::Mod(a, _) => {
            (derivative(a, var)? == 0).then_some(0)
        }
        AstExpr::Min(items) | AstExpr::Max(items) => items
            .iter()
            .all(|x| derivative(x, var) == Some(0))
            .then_some(0),
    }
}
