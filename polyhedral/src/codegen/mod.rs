//! AST generation from a schedule tree, after Grosser, Verdoolaege and Cohen, "Polyhedral AST
//! generation is more than scanning polyhedra" (isl's `isl_ast_build`).
//!
//! The generator walks the tree with, for each statement, the [`Instances`] reaching the
//! current node: a conjunction over the parameters, the band members above (`c_0 … c_{d-1}`),
//! the statement's iterators and division locals. It also carries a **context**: what the
//! enclosing loops and guards guarantee, over the parameters and the dimensions.
//!
//! **One dimension.** A band member adds a dimension. For each statement the generator
//! computes its [`range::Range`] on it: lower and upper bounds over the parameters and outer
//! dimensions, from the rational shadow of the statement's instances, with constants tightened
//! against the exact relation and every row that the context and the other rows imply dropped
//! (so bounds that differ by a constant keep only the tightest, and bounds the enclosing loops
//! already enforce disappear), plus a guard of conditions on the outer dimensions alone. Then:
//!
//! - conditions every statement's guard has are hoisted: one `if` around the dimension's code,
//!   left out when the loops inside enforce it anyway (they run nothing where it fails);
//! - when every statement fixes the dimension to the same affine function with a unit
//!   coefficient, the dimension is a substitution, not a loop;
//! - when all statements have the same bounds, one loop runs exactly them;
//! - otherwise one loop runs the hull of their ranges: the rows that hold for every statement,
//!   and, at the two innermost loop levels, where those are looser than the union, the
//!   smallest lower and the largest upper bound of the statements (further out a few empty
//!   iterations cost less than the longer bounds); the statements are guarded;
//! - when that loop would test its own variable inside, at the two innermost loop levels of a
//!   subtree and for at most [`MAX_SEPARATED`] statements, the dimension is **separated**
//!   ([`separate`]) instead: when the statements' lower bounds can be ordered and so can their
//!   upper bounds, a sequence of loops runs the pieces where different subsets of them are
//!   active, each without tests of this dimension; a piece with at most one iteration becomes
//!   a guarded substitution;
//! - at the innermost loop level, when statements have different guards on the outer
//!   dimensions (at most [`MAX_VERSIONED`] distinct ones), the loop is versioned: an `if`
//!   chain on the guards, each branch a loop over the statements whose guards hold, so the
//!   loop body tests nothing that does not change in the loop.
//!
//! Code growth is bounded by those limits: separation multiplies a loop by at most
//! `MAX_SEPARATED²` pieces and happens only at two levels; versioning makes at most
//! `2^MAX_VERSIONED` copies of an innermost loop.
//!
//! **Statements.** At a leaf, the statement's iterators become further dimensions (an implicit
//! identity band), so a schedule that is not injective still runs every instance, and an
//! iterator that the band members determine is recovered by substitution (`i = 32*c0 + c1`
//! after tiling). The statement is guarded by exactly those constraints of its exact instance
//! set that the context does not imply (congruences become `mod` conditions); this is what
//! makes every approximation above safe.
//!
//! **The parameter context.** The code is parametric and must be right for every parameter
//! value. The generator assumes the rows on the parameters that hold wherever some statement of
//! the program has an instance (the simple hull of the union of the statements' parameter
//! domains, [`range::parameter_context`]); outside it nothing runs. The generated code is
//! wrapped in a guard on those rows, except rows that the outer loops' own bounds already
//! enforce (a loop `0 ≤ c0 ≤ N − 1` runs nothing unless `N ≥ 1`).
//!
//! What holds on the way out: every instance the tree schedules runs exactly once, in the
//! tree's order (sequence children in order, band members lexicographically, separated pieces
//! in increasing order of their dimension); a loop is `parallel` when its band member is
//! coincident, and `vectorizable` when it is also innermost and every access of the statements
//! below moves by at most one element of the last subscript per iteration; every piece of a
//! separated or versioned loop keeps those flags; marks become [`Ast::Mark`], except that a
//! subtree below a `skipped` mark generates nothing (extensions run its instances).

mod expr;
mod range;
mod separate;
#[cfg(test)]
mod tests;

use crate::ast::{Ast, AstCond, AstExpr, LoopAnnotations};
use crate::program::{ConstraintKind, Program, StmtId, Var};
use crate::schedule::instances::Instances;
use crate::schedule::Mark;
use crate::schedule::{verify, Node, NodeKind, QuasiAffine, ScheduleError, ScheduleTree};
use crate::sets::conj::{negate, Conj, Row};
use crate::sets::omega::{is_feasible, project};
use crate::sets::Error;
use range::{feasible_with, implied, statement_range, Guard, Range};
use separate::{hull, separate, Region};

/// Most statements one dimension is separated for.
const MAX_SEPARATED: usize = 4;
/// Most distinct guards an innermost loop is versioned for.
const MAX_VERSIONED: usize = 2;
/// Most AST nodes looked at to decide whether the loops enforce a context row.
const CONTEXT_WALK: usize = 256;

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
    // Every statement, extensions included, so that nothing can run outside the context.
    let every = (0..program.statements.len())
        .map(|s| Instances::domain(program, StmtId(s as u32)))
        .collect::<Result<Vec<_>, _>>()?;
    let context = range::parameter_context(&every, np)?;
    let mut g = Gen {
        program,
        np,
        dims: Vec::new(),
        ctx: context.clone(),
    };
    let body = g.children(&tree.root, actives)?;
    let conds = g.context_guard(&context, &body)?;
    Ok(Ast::Block(guarded(conds, body)))
}

/// What comes after the last member of a band.
#[derive(Clone, Copy)]
enum Cont<'t> {
    /// The band node's child.
    Child(&'t Node),
    /// The statement itself (after the implicit identity band of a leaf).
    User,
}

/// The members of the band being generated, and how many loop levels the tree has below its
/// last member.
#[derive(Clone, Copy)]
struct Level<'t> {
    coincident: &'t [bool],
    below: usize,
}

impl Level<'_> {
    /// Loop levels below member `idx`.
    fn below(&self, idx: usize) -> usize {
        self.coincident.len() - idx - 1 + self.below
    }
}

/// A statement's instances with the functions of the band being generated.
type Active = (Instances, Vec<QuasiAffine>);

/// The most band members on a path from `node` down (statements' own iterators not counted).
fn loops_below(node: &Node) -> usize {
    let here = match &node.kind {
        NodeKind::Band(b) => b.n_members(),
        _ => 0,
    };
    here + node.children.iter().map(loops_below).max().unwrap_or(0)
}

/// `body` under `conds`, or `body` itself when there are none.
fn guarded(conds: Vec<AstCond>, body: Vec<Ast>) -> Vec<Ast> {
    if conds.is_empty() || body.is_empty() {
        return body;
    }
    vec![Ast::If {
        conds,
        then: Box::new(Ast::Block(body)),
        otherwise: None,
    }]
}

struct Gen<'a> {
    program: &'a Program,
    np: usize,
    /// The value of each schedule dimension on the current path: a loop variable or an
    /// expression of outer ones.
    dims: Vec<AstExpr>,
    /// What the enclosing loops, guards and the parameter context guarantee, over
    /// `[parameters | dimensions]`.
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
                let level = Level {
                    coincident: &band.coincident,
                    below: node.children.iter().map(loops_below).max().unwrap_or(0),
                };
                self.members(level, 0, with_fns, Cont::Child(node))
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
            NodeKind::Mark(Mark::Skipped) => Ok(Vec::new()),
            NodeKind::Mark(mark) => {
                let body = self.children(node, actives)?;
                Ok(vec![Ast::Mark {
                    mark: mark.clone(),
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
                    let flags = vec![false; n];
                    let level = Level {
                        coincident: &flags,
                        below: 0,
                    };
                    out.extend(self.members(level, 0, vec![(a, identity)], Cont::User)?);
                }
                Ok(merge_guards(out))
            }
        }
    }

    /// Generates the loops of members `idx..` of a band (each active statement with its
    /// functions), then what follows the band.
    fn members(
        &mut self,
        level: Level<'_>,
        idx: usize,
        mut actives: Vec<Active>,
        cont: Cont<'_>,
    ) -> Result<Vec<Ast>, ScheduleError> {
        if actives.is_empty() {
            return Ok(Vec::new());
        }
        if idx == level.coincident.len() {
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
        let result = self.dimension(level, idx, actives, cont, true);
        self.ctx = saved;
        result
    }

    /// The code of the dimension just added (`ctx` already extended by it): the statements'
    /// ranges, the guard they share hoisted around everything, then versions or loops.
    fn dimension(
        &mut self,
        level: Level<'_>,
        idx: usize,
        actives: Vec<Active>,
        cont: Cont<'_>,
        versioning: bool,
    ) -> Result<Vec<Ast>, ScheduleError> {
        let cur = self.ctx.n - 1;
        let mut kept = Vec::with_capacity(actives.len());
        let mut ranges = Vec::with_capacity(actives.len());
        for a in actives {
            let Some(r) = statement_range(&a.0, &self.ctx, cur)? else {
                continue;
            };
            if r.lower.is_empty() || r.upper.is_empty() {
                return Err(ScheduleError::Unbounded(format!(
                    "dimension {} of {}",
                    self.dims.len(),
                    self.program.statements[a.0.stmt.index()].name
                )));
            }
            kept.push(a);
            ranges.push(r);
        }
        let Some(first) = ranges.first() else {
            return Ok(Vec::new());
        };
        let common = ranges
            .iter()
            .skip(1)
            .fold(first.guard.clone(), |g, r| g.common(&r.guard));
        for r in ranges.iter_mut() {
            r.guard = r.guard.without(&common);
        }
        let saved = self.ctx.clone();
        common.add_to(&mut self.ctx);
        let body = if versioning && level.below(idx) == 0 {
            self.versions(level, idx, kept, ranges, cont)
        } else {
            self.loops(level, idx, kept, ranges, cont)
        };
        self.ctx = saved;
        let body = body?;
        let common = self.not_enforced(&common, &body)?;
        Ok(guarded(self.conds(&common), body))
    }

    /// An innermost loop whose statements have different guards on the outer dimensions, as
    /// an `if` chain of loops: the first branch for the most guards holding, the last for none.
    fn versions(
        &mut self,
        level: Level<'_>,
        idx: usize,
        kept: Vec<Active>,
        ranges: Vec<Range>,
        cont: Cont<'_>,
    ) -> Result<Vec<Ast>, ScheduleError> {
        let mut sets: Vec<Guard> = Vec::new();
        for r in &ranges {
            if !r.guard.is_empty() && !sets.contains(&r.guard) {
                sets.push(r.guard.clone());
            }
        }
        if sets.is_empty() || sets.len() > MAX_VERSIONED {
            return self.loops(level, idx, kept, ranges, cont);
        }
        // Subsets of the guards, larger ones first; a branch runs when its guards hold and
        // those of every earlier branch do not all hold.
        let subsets: Vec<Vec<usize>> = match sets.len() {
            1 => vec![vec![0], vec![]],
            _ => vec![vec![0, 1], vec![0], vec![1], vec![]],
        };
        let mut branches: Vec<(Vec<AstCond>, Vec<Ast>)> = Vec::new();
        for sub in subsets {
            let members: Vec<Active> = kept
                .iter()
                .zip(&ranges)
                .filter(|(_, r)| r.guard.is_empty() || sub.iter().any(|&s| sets[s] == r.guard))
                .map(|(a, _)| a.clone())
                .collect();
            if members.is_empty() {
                continue;
            }
            let cond = sub.iter().fold(Guard::default(), |g, &s| g.and(&sets[s]));
            if !feasible_with(&self.ctx, &cond.eqs, &cond.ineqs)? {
                continue;
            }
            let saved = self.ctx.clone();
            cond.add_to(&mut self.ctx);
            let body = self.dimension(level, idx, members, cont, false);
            self.ctx = saved;
            let body = body?;
            if !body.is_empty() {
                branches.push((self.conds(&cond), body));
            }
        }
        let mut chain: Option<Ast> = None;
        for (conds, body) in branches.into_iter().rev() {
            chain = Some(if conds.is_empty() {
                Ast::Block(body)
            } else {
                Ast::If {
                    conds,
                    then: Box::new(Ast::Block(body)),
                    otherwise: chain.map(Box::new),
                }
            });
        }
        Ok(chain.into_iter().collect())
    }

    /// The loops of the dimension for statements with the given ranges: a substitution, one
    /// loop, separated loops or the hull (see the module docs).
    fn loops(
        &mut self,
        level: Level<'_>,
        idx: usize,
        kept: Vec<Active>,
        ranges: Vec<Range>,
        cont: Cont<'_>,
    ) -> Result<Vec<Ast>, ScheduleError> {
        if let Some(e) = &ranges[0].eq {
            if ranges.iter().all(|r| r.eq.as_ref() == Some(e)) {
                let e = e.clone();
                let saved = self.ctx.clone();
                let body = self.fixed(level, idx, kept, cont, e);
                self.ctx = saved;
                return body;
            }
        }
        if ranges.iter().all(|r| r.same_bounds(&ranges[0])) {
            let all: Vec<usize> = (0..ranges.len()).collect();
            return self.regions(level, idx, &kept, &[Region::plain(all, &ranges[0])], cont);
        }
        // Near the innermost level a loop runs exactly the union of the ranges; further out,
        // a few empty iterations cost less than the longer bounds.
        let exact = level.below(idx) <= 1;
        let hulled: Vec<Region> = hull(&self.ctx, &ranges, exact)?.into_iter().collect();
        let code = self.regions(level, idx, &kept, &hulled, cont)?;
        // Separation pays only where the single loop leaves a test of its own variable in
        // its body.
        let var = self.fresh_name(self.dims.len());
        if ranges.len() > MAX_SEPARATED || level.below(idx) > 1 || !tests_var(&code, &var) {
            return Ok(code);
        }
        match separate(&self.ctx, &ranges)? {
            Some(pieces) => self.regions(level, idx, &kept, &pieces, cont),
            None => Ok(code),
        }
    }

    /// The code of each region in turn.
    fn regions(
        &mut self,
        level: Level<'_>,
        idx: usize,
        kept: &[Active],
        regions: &[Region],
        cont: Cont<'_>,
    ) -> Result<Vec<Ast>, ScheduleError> {
        let mut out = Vec::new();
        for region in regions {
            let subset: Vec<Active> = region.active.iter().map(|&i| kept[i].clone()).collect();
            let saved = self.ctx.clone();
            self.ctx.ineqs.extend(region.lower.iter().cloned());
            self.ctx.ineqs.extend(region.upper.iter().cloned());
            let code = self.region(level, idx, subset, region, cont, &saved);
            self.ctx = saved;
            out.extend(code?);
        }
        Ok(out)
    }

    /// The dimension fixed by `eq` (`c − e = 0`, coefficient 1): `c` is `e` in the code below.
    fn fixed(
        &mut self,
        level: Level<'_>,
        idx: usize,
        actives: Vec<Active>,
        cont: Cont<'_>,
        eq: Row,
    ) -> Result<Vec<Ast>, ScheduleError> {
        let cur = self.ctx.n - 1;
        let value = expr::value_of(&eq, cur, self.np, &self.dims);
        self.ctx.eqs.push(eq);
        self.dims.push(value);
        let body = self.members(level, idx + 1, actives, cont);
        self.dims.pop();
        body
    }

    /// One loop of [`Gen::loops`], with the region's conjunctive rows already in `ctx`
    /// (`outer` is the context without them).
    fn region(
        &mut self,
        level: Level<'_>,
        idx: usize,
        actives: Vec<Active>,
        region: &Region,
        cont: Cont<'_>,
        outer: &Conj,
    ) -> Result<Vec<Ast>, ScheduleError> {
        let cur = self.ctx.n - 1;
        let d = self.dims.len();
        if region.lower_any.is_empty() && region.upper_any.is_empty() {
            if let Some(eq) = self.single_value(region)? {
                // At most one iteration: the conditions for it, then the substitution.
                let mut cond = Guard::default();
                let mut local = outer.clone();
                for r in region.lower.iter().chain(&region.upper) {
                    let b = r[1 + cur];
                    let x = range::normalized(
                        crate::sets::conj::combine(r, &1, &eq, &-b).map_err(Error::from)?,
                    );
                    if !implied(&local, &x)? {
                        local.ineqs.push(x.clone());
                        cond.ineqs.push(x);
                    }
                }
                self.ctx = local;
                let body = self.fixed(level, idx, actives, cont, eq)?;
                let cond = self.not_enforced(&cond, &body)?;
                return Ok(guarded(self.conds(&cond), body));
            }
        }
        let np = self.np;
        let lo = |r: &Row| expr::lower_bound(r, cur, np, &self.dims);
        let hi = |r: &Row| expr::upper_bound(r, cur, np, &self.dims);
        let mut lowers: Vec<AstExpr> = region.lower.iter().map(lo).collect();
        if !region.lower_any.is_empty() {
            lowers.push(expr::min_of(
                region
                    .lower_any
                    .iter()
                    .map(|alt| expr::max_of(alt.iter().map(lo).collect()))
                    .collect(),
            ));
        }
        let mut uppers: Vec<AstExpr> = region.upper.iter().map(hi).collect();
        if !region.upper_any.is_empty() {
            uppers.push(expr::max_of(
                region
                    .upper_any
                    .iter()
                    .map(|alt| expr::min_of(alt.iter().map(hi).collect()))
                    .collect(),
            ));
        }
        let (lower, upper) = (expr::max_of(lowers), expr::min_of(uppers));
        let var = self.fresh_name(d);
        self.dims.push(AstExpr::Var(var.clone()));
        let body = self.members(level, idx + 1, actives, cont);
        self.dims.pop();
        let body = body?;
        if body.is_empty() {
            return Ok(Vec::new());
        }
        let parallel = level.coincident[idx];
        let innermost = !body.iter().any(Ast::contains_loop);
        let vectorizable = parallel && innermost && self.unit_stride(&body, &var);
        Ok(vec![Ast::For {
            var,
            lower,
            upper,
            step: 1,
            body: Box::new(Ast::Block(body)),
            annotations: LoopAnnotations {
                parallel,
                vectorizable,
            },
        }])
    }

    /// `c − e` (coefficient 1) when the region's bounds leave `c` at most one value, `e`.
    fn single_value(&self, region: &Region) -> Result<Option<Row>, ScheduleError> {
        let cur = self.ctx.n - 1;
        for u in &region.upper {
            if u[1 + cur] == -1 {
                let eq = negate(u).map_err(Error::from)?;
                if implied(&self.ctx, &eq)? {
                    return Ok(Some(eq));
                }
            }
        }
        for l in &region.lower {
            if l[1 + cur] == 1 && implied(&self.ctx, &negate(l).map_err(Error::from)?)? {
                return Ok(Some(l.clone()));
            }
        }
        Ok(None)
    }

    /// A guard's rows as conditions. An equality that fixes a dimension with a unit
    /// coefficient is substituted into the other rows (`c4 == 0 && NK >= 1`, not
    /// `NK >= c4 + 1`), which is the same condition.
    fn conds(&self, g: &Guard) -> Vec<AstCond> {
        let mut g = g.clone();
        for e in g.eqs.clone() {
            let Some(v) = (self.np..e.len() - 1).rev().find(|&v| e[1 + v].abs() == 1) else {
                continue;
            };
            for r in g.ineqs.iter_mut() {
                let b = r[1 + v] * e[1 + v];
                if b != 0 {
                    let subst: Option<Row> = r
                        .iter()
                        .zip(&e)
                        .map(|(&x, &y)| x.checked_sub(b.checked_mul(y)?))
                        .collect();
                    if let Some(x) = subst {
                        *r = range::normalized(x);
                    }
                }
            }
        }
        g.ineqs
            .retain(|r| r[0] < 0 || r[1..].iter().any(|&x| x != 0));
        g.ineqs.dedup();
        g.eqs
            .iter()
            .map(|r| AstCond::Zero(self.expr_of(r)))
            .chain(
                g.ineqs
                    .iter()
                    .map(|r| AstCond::NonNegative(self.expr_of(r))),
            )
            .collect()
    }

    /// A row over `[parameters | dimensions]` as an expression.
    fn expr_of(&self, r: &[i64]) -> AstExpr {
        expr::affine(r, self.np, &self.dims)
    }

    /// The rows of the parameter context that the generated code does not enforce by itself,
    /// as conditions.
    fn context_guard(&self, context: &Conj, body: &[Ast]) -> Result<Vec<AstCond>, ScheduleError> {
        let g = Guard {
            eqs: context.eqs.clone(),
            ineqs: context.ineqs.clone(),
        };
        Ok(self.conds(&self.not_enforced(&g, body)?))
    }

    /// The rows of `g` (over `[parameters | dimensions]`) that `body` does not enforce by
    /// itself: where a row fails, some statement of `body` could still run. A guard whose
    /// rows the body's own loops enforce can be left out.
    fn not_enforced(&self, g: &Guard, body: &[Ast]) -> Result<Guard, ScheduleError> {
        if g.is_empty() {
            return Ok(Guard::default());
        }
        let mut names: Vec<&str> = Vec::new();
        for d in &self.dims {
            loop_vars(d, &mut names);
        }
        let acc = Conj::universe(self.np + names.len());
        let enforced = |r: &[i64]| -> Result<bool, ScheduleError> {
            let Some(row) = affine_row(&self.expr_of(r), self.np, &names) else {
                return Ok(false);
            };
            let mut budget = CONTEXT_WALK;
            self.enforced(body, &acc, &names, &row, &mut budget)
        };
        let mut out = Guard::default();
        for r in &g.eqs {
            if !(enforced(r)? && enforced(&negate(r).map_err(Error::from)?)?) {
                out.eqs.push(r.clone());
            }
        }
        for r in &g.ineqs {
            if !enforced(r)? {
                out.ineqs.push(r.clone());
            }
        }
        Ok(out)
    }

    /// Whether running any statement of `items` implies `row ≥ 0` (a row on the parameters),
    /// given `acc` over the parameters and the loop variables `names`: every statement lies
    /// inside loops or guards whose bounds imply it. Looks at `budget` nodes at most.
    fn enforced(
        &self,
        items: &[Ast],
        acc: &Conj,
        names: &[&str],
        row: &[i64],
        budget: &mut usize,
    ) -> Result<bool, ScheduleError> {
        for item in items {
            if *budget == 0 {
                return Ok(false);
            }
            *budget -= 1;
            let ok = match item {
                Ast::Block(inner) => self.enforced(inner, acc, names, row, budget)?,
                Ast::Mark { body, .. } => {
                    self.enforced(std::slice::from_ref(&**body), acc, names, row, budget)?
                }
                Ast::User { .. } => implied(acc, row)?,
                Ast::For {
                    var,
                    lower,
                    upper,
                    body,
                    ..
                } => {
                    let mut inner = acc.clone();
                    inner.add_vars(1);
                    let mut names = names.to_vec();
                    names.push(var);
                    let v = inner.n - 1;
                    for (e, is_lower) in [(lower, true), (upper, false)] {
                        for r in bound_rows(e, is_lower, self.np, &names, v) {
                            inner.ineqs.push(r);
                        }
                    }
                    implied(&inner, row)?
                        || self.enforced(
                            std::slice::from_ref(&**body),
                            &inner,
                            &names,
                            row,
                            budget,
                        )?
                }
                Ast::If {
                    conds,
                    then,
                    otherwise,
                } => {
                    let mut inner = acc.clone();
                    for c in conds {
                        match c {
                            AstCond::NonNegative(e) => {
                                if let Some(r) = affine_row(e, self.np, names) {
                                    inner.ineqs.push(r);
                                }
                            }
                            AstCond::Zero(e) => {
                                if let Some(r) = affine_row(e, self.np, names) {
                                    inner.eqs.push(r);
                                }
                            }
                            AstCond::Divisible(..) => {}
                        }
                    }
                    let then_ok = implied(&inner, row)?
                        || self.enforced(
                            std::slice::from_ref(&**then),
                            &inner,
                            names,
                            row,
                            budget,
                        )?;
                    then_ok
                        && match otherwise {
                            Some(o) => {
                                self.enforced(std::slice::from_ref(&**o), acc, names, row, budget)?
                            }
                            None => true,
                        }
                }
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The statement instance at the current dimensions, guarded by what the context does not
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
                        if !range::implied_eq(&local, &e)? {
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
                        // A division variable of an iterator that moves moves unevenly.
                        let moving = |k: usize| derivs.get(k).is_some_and(|&d| d != 0);
                        let divided = sub.terms().iter().any(|&(v, _)| match v {
                            Var::Div(q) => {
                                (0..s.depth()).any(|k| moving(k) && s.uses_iter(&s.divs[q].num, k))
                            }
                            Var::Iter(_) | Var::Param(_) => false,
                        });
                        if divided {
                            ok = false;
                            continue;
                        }
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

/// Whether `ctx` implies that `m` divides `e`: no point has `e = m·q + r` with `0 < r < m`.
fn divisibility_implied(ctx: &Conj, e: &[i64], m: i64) -> Result<bool, crate::sets::Error> {
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

/// An affine expression of parameters and the loop variables `names` as a row over
/// `[parameters | names]`; `None` for anything else.
fn affine_row(e: &AstExpr, np: usize, names: &[&str]) -> Option<Row> {
    let mut r = vec![0; 1 + np + names.len()];
    fn walk(e: &AstExpr, k: i64, np: usize, names: &[&str], r: &mut Row) -> Option<()> {
        match e {
            AstExpr::Int(v) => r[0] = r[0].checked_add(k.checked_mul(*v)?)?,
            AstExpr::Param(p) => {
                let i = 1 + p.index();
                r[i] = r[i].checked_add(k)?;
            }
            AstExpr::Var(v) => {
                let i = 1 + np + names.iter().position(|n| n == v)?;
                r[i] = r[i].checked_add(k)?;
            }
            AstExpr::Add(a, b) => {
                walk(a, k, np, names, r)?;
                walk(b, k, np, names, r)?;
            }
            AstExpr::Mul(m, x) => walk(x, k.checked_mul(*m)?, np, names, r)?,
            _ => return None,
        }
        Some(())
    }
    walk(e, 1, np, names, &mut r)?;
    Some(r)
}

/// The rows a loop bound puts on loop variable `v` (the last of `names`): each term of a
/// lower bound's `max` (an upper bound's `min`) that is affine or a `ceild` (`floord`) of an
/// affine expression. Other terms are left out, which only weakens what is known.
fn bound_rows(e: &AstExpr, is_lower: bool, np: usize, names: &[&str], v: usize) -> Vec<Row> {
    let terms: Vec<&AstExpr> = match (e, is_lower) {
        (AstExpr::Max(items), true) | (AstExpr::Min(items), false) => items.iter().collect(),
        _ => vec![e],
    };
    let mut out = Vec::new();
    for t in terms {
        let (x, k) = match (t, is_lower) {
            (AstExpr::CeilDiv(x, k), true) | (AstExpr::FloorDiv(x, k), false) => (&**x, *k),
            (x, _) => (x, 1),
        };
        let Some(mut r) = affine_row(x, np, names) else {
            continue;
        };
        // lower: k·v − x ≥ 0; upper: x − k·v ≥ 0.
        if is_lower {
            r.iter_mut().for_each(|c| *c = -*c);
            r[1 + v] += k;
        } else {
            r[1 + v] -= k;
        }
        out.push(r);
    }
    out
}

/// The loop variables `e` uses, added to `names` in the order met.
fn loop_vars<'e>(e: &'e AstExpr, names: &mut Vec<&'e str>) {
    e.for_each_var(&mut |v| {
        if !names.contains(&v) {
            names.push(v);
        }
    });
}

/// Whether some condition in `code` uses loop variable `var`.
fn tests_var(code: &[Ast], var: &str) -> bool {
    let mut found = false;
    for a in code {
        a.walk(&mut |n| {
            if let Ast::If { conds, .. } = n {
                for c in conds {
                    let (AstCond::NonNegative(e) | AstCond::Zero(e) | AstCond::Divisible(e, _)) = c;
                    let mut names = Vec::new();
                    loop_vars(e, &mut names);
                    found |= names.contains(&var);
                }
            }
        });
    }
    found
}
