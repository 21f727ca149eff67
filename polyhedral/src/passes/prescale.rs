//! Operand prescaling for the matrix unit: a contraction whose operand is multiplied by a
//! loop-invariant factor before the product (`C[i, j] += alpha * A[i, k] * B[k, j]` scales A)
//! reads instead a temporary that holds the scaled operand, computed by a statement of its
//! own just before the contraction's nest.
//!
//! The matrix unit multiplies two matrices as they are; the factor has to be applied to an
//! operand first, element by element, and the unit's products are then exactly the
//! interpreter's `(alpha · A[i, k]) · B[k, j]`, rounding for rounding. Applying it once per
//! element of the operand, on the vector unit, costs a pass over the operand and keeps the
//! contraction a plain one that [`crate::passes::matrix`] tiles and marks.
//!
//! An operand is prescaled when the contraction qualifies for the matrix unit but for its
//! factors ([`matrix::qualifies_scaled`]), and no statement of the contraction's top-level
//! nest writes the operand's array or the factor's: then the values the contraction reads are
//! the ones they hold when the nest starts, where the new statement reads them. The new
//! statement `T[s] = alpha * A[s]` runs over the contraction's domain projected on the
//! iterators the operand's subscripts use (a box, since the contraction's domain is one), so it
//! writes every element the contraction reads; `T` has the operand's shape and the type of
//! the scaled value, and the contraction reads `T` with the operand's subscripts.
//!
//! What holds on the way out: the program computes, in every array of the original, exactly
//! what the original computes; original arrays and statements keep their ids, the temporaries
//! and statements are appended, and the new statement is a top-level item of its own right
//! before the contraction's (later items move down).

use crate::contraction::Contraction;
use crate::passes::expand::fresh_name;
use crate::passes::matrix;
use crate::program::{
    Access, Array, ArrayId, ArrayRole, Expr, ExprArena, ExprId, Program, Statement, Var,
};
use crate::target::TargetDescription;

/// `program` with the scaled operands of its contractions prescaled (see the module docs);
/// `None` when the target has no matrix unit or nothing qualifies.
pub fn run(program: &Program, target: &TargetDescription) -> Option<Program> {
    if target.matrix_memories().is_none() || target.fractal().is_none() {
        return None;
    }
    let mut out = program.clone();
    let mut changed = false;
    for stmt in program.statement_ids() {
        let Some(c) = matrix::qualifies_scaled(&out, stmt) else {
            continue;
        };
        for (read, scale) in [(c.a, c.scale_a), (c.b, c.scale_b)] {
            if let Some(scale) = scale {
                changed |= prescale(&mut out, &c, read, scale);
            }
        }
    }
    changed.then_some(out)
}

/// Prescales the operand `read` of contraction `c`, multiplied by `scale`; whether it could.
fn prescale(program: &mut Program, c: &Contraction, read: usize, scale: ExprId) -> bool {
    let s = &program.statements[c.stmt.index()];
    let top = s.position[0];
    // The product's operand: `scale · X` or `X · scale`, X the read (possibly under a cast).
    let Some(scaled) = s.exprs.iter().find_map(|(id, e)| match e {
        Expr::Binary(_, x, y) if (*x == scale || *y == scale) && reaches(s, id, read) => Some(id),
        _ => None,
    }) else {
        return false;
    };
    let mut arrays = vec![s.reads[read].array];
    arrays.extend(reads_under(s, scale).into_iter().map(|r| s.reads[r].array));
    let written_in_nest = program.statements.iter().any(|t| {
        t.depth() >= 1 && s.depth() >= 1 && t.position[0] == top && arrays.contains(&t.write.array)
    });
    if written_in_nest {
        return false;
    }
    // The iterators the operand uses, renumbered in their order.
    let operand = &s.reads[read];
    let used: Vec<usize> = (0..s.depth())
        .filter(|&it| {
            operand
                .subscripts
                .iter()
                .any(|e| e.coeff(Var::Iter(it)) != 0)
        })
        .collect();
    let renumber = |it: usize| used.iter().position(|&u| u == it).unwrap_or(0);
    let domain = s
        .domain
        .iter()
        .filter(|k| {
            k.expr
                .terms()
                .iter()
                .all(|(v, _)| !matches!(v, Var::Iter(it) if !used.contains(it)))
        })
        .map(|k| crate::program::Constraint {
            expr: k.expr.map_iters(renumber),
            kind: k.kind,
        })
        .collect();
    let renumbered = |a: &Access| Access {
        array: a.array,
        subscripts: a.subscripts.iter().map(|e| e.map_iters(renumber)).collect(),
        span: a.span,
    };
    let source = &program.array(operand.array);
    let temp = ArrayId(program.arrays.len() as u32);
    let temp_array = Array {
        name: fresh_name(program, &format!("{}_scaled", source.name)),
        elem: program.expr_type(s, scaled),
        shape: source.shape.clone(),
        role: ArrayRole::Temporary,
        span: source.span,
    };
    let mut exprs = ExprArena::new();
    let mut reads = Vec::new();
    let body = copy_expr(s, scaled, &mut exprs, &mut |r| {
        reads.push(renumbered(&s.reads[r]));
        reads.len() - 1
    });
    let new = Statement {
        name: format!("S{}", program.statements.len()),
        iterators: used.iter().map(|&it| s.iterators[it].clone()).collect(),
        domain,
        write: Access {
            array: temp,
            subscripts: renumbered(operand).subscripts,
            span: operand.span,
        },
        reads,
        divs: Vec::new(),
        exprs,
        body,
        position: vec![0; used.len() + 1],
        reduction: None,
        span: s.span,
    };
    // The contraction reads the temporary where it read the scaled operand.
    let s = &mut program.statements[c.stmt.index()];
    s.reads[read].array = temp;
    s.exprs[scaled] = Expr::Read(read);
    drop_unread(s);
    program.arrays.push(temp_array);
    for t in program.statements.iter_mut() {
        if t.position[0] >= top {
            t.position[0] += 1;
        }
    }
    let mut new = new;
    new.position[0] = top;
    program.statements.push(new);
    true
}

/// Whether `Read(read)` is among the subexpressions of `e`.
fn reaches(s: &Statement, e: ExprId, read: usize) -> bool {
    matches!(s.exprs[e], Expr::Read(r) if r == read)
        || s.exprs[e].operands().iter().any(|&o| reaches(s, o, read))
}

/// The reads among the subexpressions of `e`.
fn reads_under(s: &Statement, e: ExprId) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let Expr::Read(r) = s.exprs[e] {
            out.push(r);
        }
        stack.extend(s.exprs[e].operands());
    }
    out
}

/// Copies the expression `e` of `s` into `into`, each read renumbered by `read`.
fn copy_expr(
    s: &Statement,
    e: ExprId,
    into: &mut ExprArena,
    read: &mut dyn FnMut(usize) -> usize,
) -> ExprId {
    let mut copy = |x: ExprId, read: &mut dyn FnMut(usize) -> usize| copy_expr(s, x, into, read);
    let node = match &s.exprs[e] {
        Expr::Read(r) => Expr::Read(read(*r)),
        Expr::Unary(op, a) => Expr::Unary(*op, copy(*a, read)),
        Expr::Cast(ty, a) => Expr::Cast(*ty, copy(*a, read)),
        Expr::Binary(op, a, b) => {
            let a = copy(*a, read);
            Expr::Binary(*op, a, copy(*b, read))
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            let cond = copy(*cond, read);
            let then = copy(*then, read);
            Expr::Select {
                cond,
                then,
                otherwise: copy(*otherwise, read),
            }
        }
        Expr::Math(f, args) => Expr::Math(*f, args.iter().map(|&a| copy(a, read)).collect()),
        Expr::Call(f, args) => Expr::Call(*f, args.iter().map(|&a| copy(a, read)).collect()),
        leaf @ (Expr::Literal(_) | Expr::Iter(_) | Expr::Param(_) | Expr::Local(_)) => leaf.clone(),
    };
    into.push(node)
}

/// Removes the reads of `s` its body no longer refers to, renumbering the rest.
fn drop_unread(s: &mut Statement) {
    let used = reads_under(s, s.body);
    let kept: Vec<usize> = (0..s.reads.len()).filter(|r| used.contains(r)).collect();
    if kept.len() == s.reads.len() {
        return;
    }
    let ids: Vec<ExprId> = s.exprs.iter().map(|(id, _)| id).collect();
    for id in ids {
        if let Expr::Read(r) = s.exprs[id] {
            if let Some(n) = kept.iter().position(|&k| k == r) {
                s.exprs[id] = Expr::Read(n);
            }
        }
    }
    s.reads = kept.iter().map(|&r| s.reads[r].clone()).collect();
}
