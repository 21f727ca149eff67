//! Array expansion for parallelism: an outermost loop whose iterations are kept apart only by
//! reuse of an array's storage gets one copy of that array per iteration, so that it becomes
//! parallel.
//!
//! In PolyBench's `doitgen`, every `(r, q)` iteration computes `sum[p]` from scratch and copies
//! it out; the `r` loop carries only anti and output dependences on `sum`, never a value.
//! Expanding `sum[p]` to `sum_x[r][p]` removes them, and Pluto then finds `r` parallel.
//!
//! An array `X` is expanded along the outermost loop `L` of the statements `G` inside it when
//! - every legality dependence that `L` carries between statements of `G` is on an array that
//!   is expanded along `L` (otherwise `L` stays sequential and expansion gains nothing);
//! - no value of `X` flows from one iteration of `L` to another, nor into `L` from before it
//!   (from an earlier statement or from before the kernel): each iteration reads only what it
//!   wrote itself;
//! - `L`'s bounds are the same single lower and upper bound, affine in the parameters, for
//!   every statement of `G`;
//! - when `X`'s values are needed after `L` (it is live-out, or a later statement reads it),
//!   one statement of `G` writes every element of `X` in every iteration of `L` (a rectangular
//!   domain whose write subscripts are distinct iterators ranging over `X`'s extents), so the
//!   last iteration's copy holds `X`'s final contents; a copy-out statement after `L` writes
//!   them back, guarded by the conditions under which that statement runs at all;
//! - the copies take at most the given number of bytes at the program's sizes.
//!
//! What holds on the way out: the expanded program computes, in every array of the original,
//! exactly what the original computes (the tests run both on the interpreter); original arrays
//! keep their [`ArrayId`]s, copies are temporaries appended after them, and copy-out
//! statements come right after their loop.

use std::collections::BTreeSet;

mod temporaries;

pub use temporaries::expand_temporaries;

use crate::deps::{compute_dependences, Dependences, Level};
use crate::pipeline::{Error, Options};
use crate::program::{
    Access, AffineExpr, Array, ArrayId, ArrayRole, Constraint, ConstraintKind, Expr, ExprArena,
    Program, Span, Statement, StmtId, Var,
};
use crate::target::TargetDescription;

/// One expanded array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    pub original: ArrayId,
    pub copy: ArrayId,
    /// The copy-out statement, when the original's final contents are needed.
    pub copy_out: Option<StmtId>,
}

/// What the expansion stage gives the rest of the pipeline.
pub struct Expanded {
    /// The expanded program; `None` when nothing was expanded.
    pub program: Option<Program>,
    /// The dependences of the program the pipeline goes on with.
    pub deps: Dependences,
    pub expansions: Vec<Expansion>,
}

/// The expansion stage of the pipeline, on targets with parallel units: arrays for
/// parallelism ([`expand_for_parallelism`]), then temporaries ([`expand_temporaries`]), within
/// the capacity of the target's outermost cache (or of its global memory, when it has no
/// cache); each expanded program is checked when verifying and its dependences recomputed.
pub fn run(
    program: &Program,
    deps: Dependences,
    target: &TargetDescription,
    options: &Options,
) -> Result<Expanded, Error> {
    let mut out = Expanded {
        program: None,
        deps,
        expansions: Vec::new(),
    };
    if !options.expand || !target.has_parallel_units() {
        return Ok(out);
    }
    let budget = target
        .memory
        .cache_chain()
        .last()
        .map_or(target.memory.node(target.memory.root()).bytes, |m| m.bytes);
    let take = |out: &mut Expanded, (p, e): (Program, Vec<Expansion>)| {
        if options.verify {
            p.verify().map_err(|e| Error::Deps(e.to_string()))?;
        }
        out.deps = compute_dependences(&p).map_err(|e| Error::Deps(e.to_string()))?;
        out.expansions.extend(e);
        out.program = Some(p);
        Ok::<(), Error>(())
    };
    if let Some(found) = expand_for_parallelism(program, &out.deps, budget) {
        take(&mut out, found)?;
    }
    let current = out.program.as_ref().unwrap_or(program);
    if let Some(found) = expand_temporaries(current, &out.deps, budget) {
        take(&mut out, found)?;
    }
    Ok(out)
}

/// `program` with the arrays that keep an outermost loop sequential expanded along it (see
/// the module docs), and what was expanded; `None` when nothing qualifies.
pub fn expand_for_parallelism(
    program: &Program,
    deps: &Dependences,
    max_bytes: u64,
) -> Option<(Program, Vec<Expansion>)> {
    let mut out = program.clone();
    let mut done = Vec::new();
    let tops: BTreeSet<usize> = program
        .statements
        .iter()
        .filter(|s| s.depth() >= 1)
        .map(|s| s.position[0])
        .collect();
    for top in tops {
        let group: Vec<StmtId> = program
            .statement_ids()
            .filter(|&s| {
                let st = &program.statements[s.index()];
                st.depth() >= 1 && st.position[0] == top
            })
            .collect();
        let Some(plan) = plan_loop(program, deps, &group, max_bytes) else {
            continue;
        };
        apply(&mut out, program, &group, &plan, &mut done);
    }
    if done.is_empty() {
        None
    } else {
        Some((out, done))
    }
}

/// What expanding one loop takes.
struct Plan {
    /// The loop's lower bound and last value, affine in the parameters.
    lower: AffineExpr,
    upper: AffineExpr,
    /// Each array to expand, with the statement that writes all of it in every iteration when
    /// a copy-out is needed.
    arrays: Vec<(ArrayId, Option<StmtId>)>,
}

fn plan_loop(
    program: &Program,
    deps: &Dependences,
    group: &[StmtId],
    max_bytes: u64,
) -> Option<Plan> {
    let inside = |s: StmtId| group.contains(&s);
    let carried: BTreeSet<ArrayId> = deps
        .legality()
        .filter(|d| d.level == Level::Loop(0) && inside(d.source) && inside(d.sink))
        .map(|d| d.array)
        .collect();
    if carried.is_empty() {
        return None;
    }
    let (lower, upper) = loop_bounds(program, group)?;
    let values = program.param_values();
    let trips = upper.eval(&[], &values) - lower.eval(&[], &values) + 1;
    if trips < 2 {
        return None;
    }
    let mut arrays = Vec::new();
    let mut bytes: u64 = 0;
    for &x in &carried {
        let array = program.array(x);
        if array.role == ArrayRole::Input {
            return None;
        }
        let flows_in = deps.dataflow.iter().any(|d| {
            d.array == x && inside(d.sink) && (!inside(d.source) || d.level == Level::Loop(0))
        });
        let live_in = deps.live_in.iter().any(|l| l.array == x && inside(l.stmt));
        if flows_in || live_in {
            return None;
        }
        let needed_after = array.role.is_live_out()
            || program.statements.iter().enumerate().any(|(k, s)| {
                !inside(StmtId(k as u32))
                    && s.position[0] > program.statements[group[0].index()].position[0]
                    && s.reads.iter().any(|r| r.array == x)
            });
        let writer = if needed_after {
            Some(full_writer(program, group, x)?)
        } else {
            None
        };
        let elems: i64 = program.array_extents(x).iter().product();
        bytes = bytes.saturating_add(
            (trips.max(0) as u64)
                .saturating_mul(elems.max(0) as u64)
                .saturating_mul(array.elem.size_in_bytes() as u64),
        );
        arrays.push((x, writer));
    }
    (bytes <= max_bytes).then_some(Plan {
        lower,
        upper,
        arrays,
    })
}

/// The single lower bound and last value of iterator 0, the same for every statement of the
/// group: constraints of the domains that involve only iterator 0 and parameters.
fn loop_bounds(program: &Program, group: &[StmtId]) -> Option<(AffineExpr, AffineExpr)> {
    let mut found: Option<(AffineExpr, AffineExpr)> = None;
    for &s in group {
        let st = &program.statements[s.index()];
        let mut lower = Vec::new();
        let mut upper = Vec::new();
        for c in &st.domain {
            let only_i0 = c
                .expr
                .terms()
                .iter()
                .all(|&(v, _)| matches!(v, Var::Param(_) | Var::Iter(0)));
            let k = c.expr.coeff(Var::Iter(0));
            if !only_i0 || k == 0 {
                continue;
            }
            if c.kind == ConstraintKind::Zero || k.abs() != 1 {
                return None;
            }
            // k·i0 + rest ≥ 0: i0 ≥ -rest when k = 1, i0 ≤ rest when k = -1.
            let mut rest = c.expr.clone();
            rest.add_term(Var::Iter(0), -k);
            if k == 1 {
                lower.push(rest.scale(-1));
            } else {
                upper.push(rest);
            }
        }
        let ([lo], [hi]) = (lower.as_slice(), upper.as_slice()) else {
            return None;
        };
        match &found {
            None => found = Some((lo.clone(), hi.clone())),
            Some((a, b)) if a == lo && b == hi => {}
            Some(_) => return None,
        }
    }
    found
}

/// A statement of the group that writes every element of `x` in every iteration of the loop:
/// its domain is rectangular (every constraint bounds one iterator by parameters), and its
/// write subscripts are distinct iterators, each ranging exactly over `x`'s extent.
fn full_writer(program: &Program, group: &[StmtId], x: ArrayId) -> Option<StmtId> {
    let extents = &program.array(x).shape;
    group.iter().copied().find(|&s| {
        let st = &program.statements[s.index()];
        if st.write.array != x {
            return false;
        }
        let rectangular = st.domain.iter().all(|c| {
            c.kind == ConstraintKind::NonNegative
                && c.expr
                    .terms()
                    .iter()
                    .filter(|(v, _)| matches!(v, Var::Iter(_)))
                    .count()
                    == 1
        });
        if !rectangular {
            return false;
        }
        let mut used = BTreeSet::new();
        st.write
            .subscripts
            .iter()
            .zip(extents)
            .all(|(sub, extent)| {
                let [(Var::Iter(d), 1)] = sub.terms() else {
                    return false;
                };
                if sub.constant != 0 || *d == 0 || !used.insert(*d) {
                    return false;
                }
                let bounds: Vec<&Constraint> = st
                    .domain
                    .iter()
                    .filter(|c| c.expr.coeff(Var::Iter(*d)) != 0)
                    .collect();
                let zero = AffineExpr::var(Var::Iter(*d));
                let below = extent.sub(&AffineExpr::constant(1)).sub(&zero);
                bounds.len() == 2
                    && bounds.iter().any(|c| c.expr == zero)
                    && bounds.iter().any(|c| c.expr == below)
            })
    })
}

fn apply(
    out: &mut Program,
    original: &Program,
    group: &[StmtId],
    plan: &Plan,
    done: &mut Vec<Expansion>,
) {
    let top = original.statements[group[0].index()].position[0];
    let mut copy_outs = Vec::new();
    for &(x, writer) in &plan.arrays {
        let array = original.array(x);
        let copy = ArrayId(out.arrays.len() as u32);
        let mut shape = vec![plan.upper.sub(&plan.lower).add(&AffineExpr::constant(1))];
        shape.extend(array.shape.iter().cloned());
        out.arrays.push(Array {
            name: fresh_name(out, &format!("{}_x", array.name)),
            elem: array.elem,
            shape,
            role: ArrayRole::Temporary,
            span: array.span,
        });
        let row = AffineExpr::var(Var::Iter(0)).sub(&plan.lower);
        for &s in group {
            let st = &mut out.statements[s.index()];
            for access in std::iter::once(&mut st.write).chain(st.reads.iter_mut()) {
                if access.array == x {
                    access.array = copy;
                    access.subscripts.insert(0, row.clone());
                }
            }
        }
        let copy_out = writer.map(|w| {
            copy_outs.push(copy_out_statement(
                original,
                &original.statements[w.index()],
                x,
                copy,
                plan,
            ));
            StmtId((out.statements.len() + copy_outs.len() - 1) as u32)
        });
        done.push(Expansion {
            original: x,
            copy,
            copy_out,
        });
    }
    if copy_outs.is_empty() {
        return;
    }
    // Later top-level items move down to make room for the copy-outs right after the loop,
    // each a top-level item of its own.
    let n = copy_outs.len();
    for st in out.statements.iter_mut() {
        if st.position[0] > top {
            st.position[0] += n;
        }
    }
    for (k, mut s) in copy_outs.into_iter().enumerate() {
        s.position[0] = top + 1 + k;
        s.name = format!("S{}", out.statements.len());
        out.statements.push(s);
    }
}

/// `x[e] = copy[last][e]` over `x`'s elements, run when `writer` runs at least once.
fn copy_out_statement(
    program: &Program,
    writer: &Statement,
    x: ArrayId,
    copy: ArrayId,
    plan: &Plan,
) -> Statement {
    let array = program.array(x);
    let rank = array.shape.len();
    let mut domain = Vec::new();
    for (d, extent) in array.shape.iter().enumerate() {
        let it = AffineExpr::var(Var::Iter(d));
        domain.push(Constraint::non_negative(it.clone()));
        domain.push(Constraint::lt(&it, extent));
    }
    // The writer's other loops run at least once, and so does the expanded loop.
    for c in &writer.domain {
        let Some(d) = c.expr.terms().iter().find_map(|&(v, _)| match v {
            Var::Iter(d) => Some(d),
            Var::Param(_) | Var::Div(_) => None,
        }) else {
            domain.push(c.clone());
            continue;
        };
        let written = writer
            .write
            .subscripts
            .iter()
            .any(|s| s.coeff(Var::Iter(d)) != 0);
        if written {
            continue;
        }
        // Pair this bound with the opposite bound of the same iterator: lo ≤ hi.
        let k = c.expr.coeff(Var::Iter(d));
        for other in &writer.domain {
            let k2 = other.expr.coeff(Var::Iter(d));
            if k > 0 && k2 < 0 {
                let mut sum = c.expr.scale(-k2).add(&other.expr.scale(k));
                sum.add_term(Var::Iter(d), -sum.coeff(Var::Iter(d)));
                domain.push(Constraint::non_negative(sum));
            }
        }
    }
    let last = plan.upper.sub(&plan.lower);
    let mut subscripts = vec![last];
    subscripts.extend((0..rank).map(|d| AffineExpr::var(Var::Iter(d))));
    let mut exprs = ExprArena::new();
    let body = exprs.push(Expr::Read(0));
    Statement {
        name: String::new(),
        iterators: (0..rank).map(|d| format!("e{d}")).collect(),
        domain,
        write: Access {
            array: x,
            subscripts: (0..rank).map(|d| AffineExpr::var(Var::Iter(d))).collect(),
            span: Span::default(),
        },
        reads: vec![Access {
            array: copy,
            subscripts,
            span: Span::default(),
        }],
        divs: Vec::new(),
        exprs,
        body,
        position: vec![0; rank + 1],
        reduction: None,
        span: writer.span,
    }
}

/// `wanted`, or `wanted_2`, `wanted_3`, … when the program already names an array so.
pub(crate) fn fresh_name(program: &Program, wanted: &str) -> String {
    let taken = |n: &str| program.arrays.iter().any(|a| a.name == n);
    if !taken(wanted) {
        return wanted.to_string();
    }
    (2..)
        .map(|k| format!("{wanted}_{k}"))
        .find(|n| !taken(n))
        .unwrap_or_else(|| wanted.to_string())
}
