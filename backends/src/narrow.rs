//! Narrowing a program's `f64` to `f32`, for GPUs, which have no 64-bit floats.
//!
//! Every `f64` array element, literal, cast, scalar-function local and return type becomes
//! `f32`; nothing else changes (the same arrays in the same order, the same statements and
//! accesses), so the narrowed program is well typed whenever the original is, and the
//! interpreter runs it with `f32` rounding after every operation.

use polyhedral::program::{Expr, ExprArena, Literal, Program, ScalarType};

fn narrow(ty: ScalarType) -> ScalarType {
    match ty {
        ScalarType::F64 => ScalarType::F32,
        t => t,
    }
}

fn narrow_arena(arena: &ExprArena) -> ExprArena {
    let mut out = ExprArena::new();
    for (_, e) in arena.iter() {
        let e = match e {
            Expr::Literal(l) => Expr::Literal(Literal {
                value: polyhedral::interp::round(narrow(l.ty), l.value),
                ty: narrow(l.ty),
            }),
            Expr::Cast(ty, a) => Expr::Cast(narrow(*ty), *a),
            other => other.clone(),
        };
        out.push(e);
    }
    out
}

/// `program` with every `f64` replaced by `f32` (see the module docs).
pub fn narrow_f64(program: &Program) -> Program {
    let mut p = program.clone();
    for a in &mut p.arrays {
        a.elem = narrow(a.elem);
    }
    for f in &mut p.functions {
        f.ret = narrow(f.ret);
        for l in &mut f.locals {
            l.ty = narrow(l.ty);
        }
        f.exprs = narrow_arena(&f.exprs);
    }
    for s in &mut p.statements {
        s.exprs = narrow_arena(&s.exprs);
    }
    p
}
