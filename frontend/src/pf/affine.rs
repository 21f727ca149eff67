//! Conversion of syntax to affine expressions (subscripts, shapes, ranges, `where`
//! conditions), with names resolved by the caller.
//!
//! Coefficients and constants are kept within the `i32` range, so that the concrete reasoning
//! in [`super::ranges`] cannot overflow; anything larger is reported, never wrapped.

use polyhedral::program::{AffineExpr, Constraint, Span, Var};

use super::ast::{BinOp, Expr, ExprKind, Ident, UnOp};
use crate::diagnostic::Diagnostic;

const LIMIT: i64 = i32::MAX as i64;

pub(crate) fn non_affine(span: Span, what: &str) -> Diagnostic {
    Diagnostic::new(span, format!("non-affine {what}"))
        .with_hint("use sums of indices and sizes times integer constants, e.g. `2 * i + N - 1`")
}

fn check_size(e: AffineExpr, span: Span) -> Result<AffineExpr, Diagnostic> {
    if e.constant.abs() > LIMIT || e.terms().iter().any(|&(_, c)| c.abs() > LIMIT) {
        return Err(Diagnostic::new(span, "affine expression too large")
            .with_hint("coefficients and constants must fit in i32"));
    }
    Ok(e)
}

/// `e` as an affine expression; `what` names the context in errors ("subscript", "bound").
pub(crate) fn to_affine(
    e: &Expr,
    what: &str,
    lookup: &mut dyn FnMut(&Ident) -> Result<Var, Diagnostic>,
) -> Result<AffineExpr, Diagnostic> {
    let r = match &e.kind {
        ExprKind::Int(v) => AffineExpr::constant(*v),
        ExprKind::Name(id) => AffineExpr::var(lookup(id)?),
        ExprKind::Unary(UnOp::Neg, a) => to_affine(a, what, lookup)?.scale(-1),
        ExprKind::Binary(BinOp::Add, a, b) => {
            to_affine(a, what, lookup)?.add(&to_affine(b, what, lookup)?)
        }
        ExprKind::Binary(BinOp::Sub, a, b) => {
            to_affine(a, what, lookup)?.sub(&to_affine(b, what, lookup)?)
        }
        ExprKind::Binary(BinOp::Mul, a, b) => {
            let x = to_affine(a, what, lookup)?;
            let y = to_affine(b, what, lookup)?;
            if x.is_constant() {
                y.scale(x.constant)
            } else if y.is_constant() {
                x.scale(y.constant)
            } else {
                return Err(non_affine(e.span, what));
            }
        }
        ExprKind::Call(..) => {
            return Err(non_affine(e.span, what)
                .with_hint("subscripts and bounds cannot read tensors or call functions"))
        }
        _ => return Err(non_affine(e.span, what)),
    };
    check_size(r, e.span)
}

/// The constraints a `where` condition stands for: affine comparisons joined by `&&`.
pub(crate) fn to_constraints(
    e: &Expr,
    lookup: &mut dyn FnMut(&Ident) -> Result<Var, Diagnostic>,
    out: &mut Vec<Constraint>,
) -> Result<(), Diagnostic> {
    let ExprKind::Binary(op, a, b) = &e.kind else {
        return Err(bad_condition(e.span));
    };
    if *op == BinOp::And {
        to_constraints(a, lookup, out)?;
        return to_constraints(b, lookup, out);
    }
    let x = to_affine(a, "condition", lookup)?;
    let y = to_affine(b, "condition", lookup)?;
    out.push(match op {
        BinOp::Lt => Constraint::lt(&x, &y),
        BinOp::Le => Constraint::le(&x, &y),
        BinOp::Gt => Constraint::lt(&y, &x),
        BinOp::Ge => Constraint::le(&y, &x),
        BinOp::Eq => Constraint::eq(&x, &y),
        _ => return Err(bad_condition(e.span)),
    });
    Ok(())
}

fn bad_condition(span: Span) -> Diagnostic {
    Diagnostic::new(span, "a `where` condition must be an affine comparison")
        .with_hint("write `i in lo:hi`, or compare affine expressions with `<`, `<=`, `>`, `>=`, `==`, joined by `&&`")
}
