//! Expansion of temporaries along the loops their values live in.
//!
//! A temporary whose every value is written and read within one iteration of the loops around
//! it — a scalar accumulator such as `temp2` in PolyBench's `symm` or `w` in `ludcmp` — still
//! orders each iteration after the one before: the next iteration overwrites it (anti and output
//! dependences), so none of those loops can be permuted, tiled or run in parallel. Giving every
//! iteration of those loops its own element removes the dependences, and the scheduler sees
//! only the values that really flow (in `symm` the `j` loop becomes parallel; `ludcmp`'s
//! factorisation becomes the permutable nest of `lu`).
//!
//! A scalar temporary `X` used by the statements `G` of one top-level loop nest is expanded along their
//! outermost `d` loops when
//! - no value of `X` flows into `G` (from another nest or from before the kernel) or out of it;
//! - every value a statement of `G` reads from `X` was written in the same iteration of the
//!   outermost `d` loops: the dataflow dependences on `X` share those loops, at distance zero;
//! - some anti, output or memory-based flow dependence on `X` is carried by one of those loops,
//!   and `d` is the least depth that takes in every such loop (deeper copies would only cost
//!   memory);
//! - the `d` iterators range over a box whose bounds are affine in the parameters, over every
//!   statement of `G` (bounds that depend on outer iterators are widened to the outer
//!   iterators' own bounds);
//! - all copies together take at most the given number of bytes at the program's sizes.
//!
//! Only scalars are expanded: an array's copies multiply its footprint by the iterations of the
//! expanded loops (`z` in `durbin`, a vector rewritten in every iteration of the outer loop,
//! would become a square matrix), where a scalar becomes an array the size of one statement's
//! outer loops.
//!
//! Each top-level nest gets its own copy, so a temporary used by several nests (`w` in
//! `ludcmp` serves three) becomes several arrays; nests whose use fails a condition keep the
//! original. No copy-out is needed: no value leaves its nest.
//!
//! What holds on the way out: the program computes, in every array of the original, exactly
//! what the original computes. Every read of an expanded access reads the element its value's
//! writer wrote (same iterators on the expanded loops), and no write between the two touches
//! that element, since the original had no write to `X` at all between them. Original arrays
//! keep their [`ArrayId`]s and copies are temporaries appended after them.

use std::collections::BTreeSet;

use super::{fresh_name, Expansion};
use crate::deps::{Dependences, Level};
use crate::program::{
    loop_bounds, AffineExpr, Array, ArrayId, ArrayRole, ConstraintKind, Program, StmtId, Var,
};

/// One temporary's use by one top-level nest, to be expanded.
struct Plan {
    array: ArrayId,
    group: Vec<StmtId>,
    /// The lower bound and last value of each expanded iterator, affine in the parameters.
    bounds: Vec<(AffineExpr, AffineExpr)>,
}

/// `program` with its temporaries expanded along the loops their values live in (see the
/// module docs), and what was expanded; `None` when nothing qualifies.
pub fn expand_temporaries(
    program: &Program,
    deps: &Dependences,
    max_bytes: u64,
) -> Option<(Program, Vec<Expansion>)> {
    let values = program.param_values();
    let mut plans = Vec::new();
    let mut bytes: u64 = 0;
    for (k, array) in program.arrays.iter().enumerate() {
        let x = ArrayId(k as u32);
        if array.role != ArrayRole::Temporary || !array.shape.is_empty() {
            continue;
        }
        let users: Vec<StmtId> = program
            .statement_ids()
            .filter(|&s| {
                let st = &program.statements[s.index()];
                st.depth() >= 1 && st.accesses().any(|(_, a)| a.array == x)
            })
            .collect();
        let tops: BTreeSet<usize> = users
            .iter()
            .map(|s| program.statements[s.index()].position[0])
            .collect();
        for top in tops {
            let group: Vec<StmtId> = users
                .iter()
                .copied()
                .filter(|s| program.statements[s.index()].position[0] == top)
                .collect();
            let Some(plan) = plan_use(program, deps, x, group) else {
                continue;
            };
            let elems: i64 = program.array_extents(x).iter().product();
            let copies: i64 = plan
                .bounds
                .iter()
                .map(|(lo, hi)| (hi.eval(&[], &values) - lo.eval(&[], &values) + 1).max(0))
                .product();
            let size = (copies.max(0) as u64)
                .saturating_mul(elems.max(0) as u64)
                .saturating_mul(array.elem.size_in_bytes() as u64);
            if bytes.saturating_add(size) > max_bytes {
                continue;
            }
            bytes += size;
            plans.push(plan);
        }
    }
    if plans.is_empty() {
        return None;
    }
    let mut out = program.clone();
    let mut done = Vec::new();
    for plan in &plans {
        let array = program.array(plan.array);
        let copy = ArrayId(out.arrays.len() as u32);
        let mut shape: Vec<AffineExpr> = plan
            .bounds
            .iter()
            .map(|(lo, hi)| hi.sub(lo).add(&AffineExpr::constant(1)))
            .collect();
        shape.extend(array.shape.iter().cloned());
        out.arrays.push(Array {
            name: fresh_name(&out, &format!("{}_x", array.name)),
            elem: array.elem,
            shape,
            role: ArrayRole::Temporary,
            span: array.span,
        });
        for &s in &plan.group {
            let st = &mut out.statements[s.index()];
            for access in std::iter::once(&mut st.write).chain(st.reads.iter_mut()) {
                if access.array != plan.array {
                    continue;
                }
                access.array = copy;
                for (d, (lo, _)) in plan.bounds.iter().enumerate().rev() {
                    access
                        .subscripts
                        .insert(0, AffineExpr::var(Var::Iter(d)).sub(lo));
                }
            }
        }
        done.push(Expansion {
            original: plan.array,
            copy,
            copy_out: None,
        });
    }
    Some((out, done))
}

/// The expansion of `x`'s use by `group`, the statements of one top-level nest that access it.
fn plan_use(program: &Program, deps: &Dependences, x: ArrayId, group: Vec<StmtId>) -> Option<Plan> {
    let inside = |s: StmtId| group.contains(&s);
    if deps.live_in.iter().any(|l| l.array == x && inside(l.stmt)) {
        return None;
    }
    let mut live = group
        .iter()
        .map(|s| program.statements[s.index()].depth())
        .min()?;
    for d in deps.dataflow.iter().filter(|d| d.array == x) {
        match (inside(d.source), inside(d.sink)) {
            (false, false) => continue,
            (true, true) => {}
            _ => return None,
        }
        let same = d
            .distance
            .iter()
            .take_while(|r| r.min == Some(0) && r.max == Some(0))
            .count();
        live = live.min(same);
    }
    let carried = deps
        .legality()
        .filter(|d| d.array == x && inside(d.source) && inside(d.sink))
        .filter_map(|d| match d.level {
            Level::Loop(l) if l < live => Some(l),
            _ => None,
        })
        .max()?;
    let bounds = iterator_box(program, &group, carried + 1)?;
    Some(Plan {
        array: x,
        group,
        bounds,
    })
}

/// The smallest box, with bounds affine in the parameters, that holds iterators `0..depth` of
/// every statement of `group`, as far as the domains' constraints give it: a constraint on an
/// iterator that involves outer iterators is widened by their own bounds. `None` when an
/// iterator has no such bound, or when the statements' bounds differ by more than a constant
/// (no one of them holds for every parameter value).
fn iterator_box(
    program: &Program,
    group: &[StmtId],
    depth: usize,
) -> Option<Vec<(AffineExpr, AffineExpr)>> {
    let mut hull: Vec<(AffineExpr, AffineExpr)> = Vec::new();
    for (n, &s) in group.iter().enumerate() {
        let st = &program.statements[s.index()];
        let domain = loop_bounds(&st.domain, st.depth());
        let mut own: Vec<(AffineExpr, AffineExpr)> = Vec::with_capacity(depth);
        for k in 0..depth {
            let var = Var::Iter(k);
            let mut lower: Option<AffineExpr> = None;
            let mut upper: Option<AffineExpr> = None;
            for c in domain.iter().filter(|c| c.expr.innermost_iter() == Some(k)) {
                let a = c.expr.coeff(var);
                if a.abs() != 1 {
                    continue;
                }
                // a·i + rest ≥ 0 (or = 0): i ≥ -rest when a = 1, i ≤ rest when a = -1.
                let mut rest = c.expr.clone();
                rest.add_term(var, -a);
                let bound = rest.scale(-a);
                if a == 1 || c.kind == ConstraintKind::Zero {
                    let b = widen(&bound, &own, false);
                    lower = Some(match lower {
                        Some(l) => tighter(l, b, false),
                        None => b,
                    });
                }
                if a == -1 || c.kind == ConstraintKind::Zero {
                    let b = widen(&bound, &own, true);
                    upper = Some(match upper {
                        Some(u) => tighter(u, b, true),
                        None => b,
                    });
                }
            }
            own.push((lower?, upper?));
        }
        if n == 0 {
            hull = own;
            continue;
        }
        for ((lo, hi), (l, h)) in hull.iter_mut().zip(own) {
            *lo = looser(lo, &l, false)?;
            *hi = looser(hi, &h, true)?;
        }
    }
    Some(hull)
}

/// `bound` with every outer iterator replaced by the bound of it that makes `bound` largest
/// (`upper`) or smallest.
fn widen(bound: &AffineExpr, outer: &[(AffineExpr, AffineExpr)], upper: bool) -> AffineExpr {
    let mut out = AffineExpr::constant(bound.constant);
    for &(v, c) in bound.terms() {
        match v {
            Var::Iter(m) => {
                let (lo, hi) = &outer[m];
                let b = if (c > 0) == upper { hi } else { lo };
                out = out.add(&b.scale(c));
            }
            // Bounds come from domains, which have no division variables.
            Var::Param(_) | Var::Div(_) => out.add_term(v, c),
        }
    }
    out
}

/// The difference `a - b` when it is a constant.
fn constant_difference(a: &AffineExpr, b: &AffineExpr) -> Option<i64> {
    let d = a.sub(b);
    d.is_constant().then_some(d.constant)
}

/// Of two bounds on one side of an iterator that both hold, the tighter where they compare,
/// else the first.
fn tighter(a: AffineExpr, b: AffineExpr, upper: bool) -> AffineExpr {
    match constant_difference(&a, &b) {
        Some(d) if (d > 0) == upper && d != 0 => b,
        _ => a,
    }
}

/// Of two statements' bounds on one side, the one that holds for both; `None` when they do
/// not compare.
fn looser(a: &AffineExpr, b: &AffineExpr, upper: bool) -> Option<AffineExpr> {
    let d = constant_difference(a, b)?;
    Some(if (d < 0) == upper && d != 0 {
        b.clone()
    } else {
        a.clone()
    })
}
