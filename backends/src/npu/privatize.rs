//! Temporaries reused by every iteration of the loops around them (doitgen's `sum[p]`,
//! computed from scratch for each `(r, q)`), given a copy per iteration so that a
//! contraction over those loops writes them as one result.
//!
//! An array `X` is privatized along the loops `L` that every statement touching it shares
//! (outermost first) when no subscript of `X` uses `L`'s iterators, `L` has the same extents
//! for each of those statements, no value of `X` flows from one iteration of `L` to another
//! nor from before the kernel, and — when `X` is live-out — one statement writes every element
//! of `X` in each iteration. `X` becomes `X_x[L…][X's shape]` (a GM tensor only when `X` is
//! live-out: its last iteration's slice is copied into `X` by a kernel after the others).
//! Then an operand of a contraction that a later statement overwrites, read before any
//! statement writes it (no flow dependence into the read), is read from a copy taken first,
//! as [`super::in_place`] does for an in-place product.
//!
//! What holds on the way out: the rewritten program computes in every array of the original
//! what the original computes; statement ids and access positions are unchanged.

use polyhedral::contraction::contraction;
use polyhedral::deps::{compute_dependences, DepKind, Dependences, Level};
use polyhedral::program::{AffineExpr, ArrayId, ArrayRole, Reduction, StmtId, Var};
use polyhedral::Program;

use super::in_place::{add_temp, Prep, Rewrite};
use super::plan;
use super::Error;

/// The rewrite of `program` that privatizes its reused temporaries and copies the operands
/// later statements overwrite, or `None` when there is nothing to privatize.
pub(crate) fn privatize(program: &Program) -> Result<Option<Rewrite>, Error> {
    let Ok(deps) = compute_dependences(program) else {
        return Ok(None);
    };
    let mut out = program.clone();
    let mut posts = Vec::new();
    for (k, arr) in program.arrays.iter().enumerate() {
        let x = ArrayId(k as u32);
        if arr.role == ArrayRole::Input {
            continue;
        }
        if let Some(p) = privatize_array(program, &deps, x, &mut out) {
            posts.extend(p);
        }
    }
    if out.arrays.len() == program.arrays.len() {
        return Ok(None);
    }
    let preps = copy_operands(program, &deps, &mut out);
    Ok(Some(Rewrite {
        program: out,
        preps,
        posts,
    }))
}

/// Privatizes `x` in `out` when the rules of the module docs allow; `Some` with the copy-out
/// of its last slice when it is live-out (none otherwise).
fn privatize_array(
    program: &Program,
    deps: &Dependences,
    x: ArrayId,
    out: &mut Program,
) -> Option<Option<Prep>> {
    let users: Vec<StmtId> = program
        .statement_ids()
        .filter(|&id| {
            program.statements[id.index()]
                .accesses()
                .any(|(_, a)| a.array == x)
        })
        .collect();
    let first = &program.statements[users.first()?.index()];
    // The loops every user shares.
    let mut d = 0;
    while users.iter().all(|&u| {
        let s = &program.statements[u.index()];
        s.depth() > d && s.position[..=d] == first.position[..=d]
    }) {
        d += 1;
    }
    if d == 0 {
        return None;
    }
    let params = program.param_values();
    let mut outer: Option<Vec<u64>> = None;
    for &u in &users {
        let s = &program.statements[u.index()];
        if s.accesses().any(|(_, a)| {
            a.array == x
                && a.subscripts
                    .iter()
                    .any(|e| (0..d).any(|it| e.coeff(Var::Iter(it)) != 0))
        }) {
            return None;
        }
        let dom = plan::domain(program, s).ok()?;
        if dom.cuts.iter().any(|&(a, b, _)| a < d || b < d) {
            return None;
        }
        let ext = dom.extents[..d].to_vec();
        if outer.as_ref().is_some_and(|o| *o != ext) {
            return None;
        }
        outer = Some(ext);
    }
    let outer = outer?;
    // No value crosses iterations of the shared loops, none comes from before the kernel.
    let carried = deps.dataflow.iter().any(|dep| {
        dep.kind == DepKind::Flow && dep.array == x && matches!(dep.level, Level::Loop(l) if l < d)
    });
    if carried || deps.live_in.iter().any(|l| l.array == x) {
        return None;
    }
    let arr = program.array(x);
    let live_out = arr.role.is_live_out();
    if live_out {
        // One user writes every element of x in each iteration.
        let extents = program.array_extents(x);
        let whole = users.iter().any(|&u| {
            let s = &program.statements[u.index()];
            let its: Vec<Option<usize>> = s
                .write
                .subscripts
                .iter()
                .map(|e| match e.bind_params(&params).terms() {
                    [(Var::Iter(i), 1)] if e.bind_params(&params).constant == 0 => Some(*i),
                    _ => None,
                })
                .collect();
            let dom = plan::domain(program, s).ok();
            s.write.array == x
                && its.iter().all(Option::is_some)
                && dom.is_some_and(|dom| {
                    dom.cuts.is_empty()
                        && its
                            .iter()
                            .zip(&extents)
                            .all(|(i, &e)| dom.extents[i.unwrap_or(0)] as i64 == e)
                })
        });
        if !whole {
            return None;
        }
    }
    let copy = add_temp(out, x, "x");
    {
        let a = &mut out.arrays[copy.index()];
        let mut shape: Vec<AffineExpr> = outer
            .iter()
            .map(|&e| AffineExpr::constant(e as i64))
            .collect();
        shape.extend(a.shape.iter().cloned());
        a.shape = shape;
        if live_out {
            a.role = ArrayRole::Output;
        }
    }
    // The kernel after the others writes x; no statement of the rewritten program does.
    out.arrays[x.index()].role = ArrayRole::Temporary;
    for &u in &users {
        let s = &mut out.statements[u.index()];
        let widen = |acc: &mut polyhedral::program::Access| {
            if acc.array == x {
                acc.array = copy;
                let mut subs: Vec<AffineExpr> =
                    (0..d).map(|it| AffineExpr::var(Var::Iter(it))).collect();
                subs.append(&mut acc.subscripts);
                acc.subscripts = subs;
            }
        };
        widen(&mut s.write);
        s.reads.iter_mut().for_each(widen);
        if let Some(red) = &s.reduction {
            let iters: Vec<usize> = (0..s.depth())
                .filter(|&k| {
                    s.write
                        .subscripts
                        .iter()
                        .all(|e| e.coeff(Var::Iter(k)) == 0)
                })
                .collect();
            s.reduction = (!iters.is_empty()).then_some(Reduction { op: red.op, iters });
        }
    }
    // The last iteration's slice is x's final contents.
    let size: u64 = program.array_extents(x).iter().map(|&e| e as u64).product();
    let last = outer.iter().fold(0u64, |acc, &e| acc * e + (e - 1));
    Some(live_out.then_some(Prep {
        from: copy,
        to: x,
        offset: last * size,
        keep: None,
    }))
}

/// Operands of contractions that a statement overwrites after they are read, with no value
/// flowing into the read: read from copies taken before the kernel.
fn copy_operands(program: &Program, deps: &Dependences, out: &mut Program) -> Vec<Prep> {
    let mut preps: Vec<Prep> = Vec::new();
    for id in out.statement_ids().collect::<Vec<_>>() {
        let Some(c) = contraction(out, id) else {
            continue;
        };
        for r in [c.a, c.b] {
            let y = out.statements[id.index()].reads[r].array;
            if y.index() >= program.arrays.len() {
                continue;
            }
            let written = program.statements.iter().any(|s| s.write.array == y);
            let flows = deps
                .memory
                .iter()
                .any(|d| d.kind == DepKind::Flow && d.sink == id && d.sink_access == r + 1);
            if !written || flows {
                continue;
            }
            let to = match preps.iter().find(|p| p.from == y) {
                Some(p) => p.to,
                None => {
                    let to = add_temp(out, y, "in");
                    preps.push(Prep {
                        from: y,
                        to,
                        offset: 0,
                        keep: None,
                    });
                    to
                }
            };
            out.statements[id.index()].reads[r].array = to;
        }
    }
    preps
}
