//! What the generator produces over many seeds: every feature the random tests rely on shows
//! up, so that none silently drops out of them.

use std::collections::BTreeSet;

use super::generator::{expr_mentions, generate};
use super::kernel::{Cond, Expr, FnStmt, Item, Op};

/// A few hundred kernels use everything the generator is meant to produce, so that no
/// feature silently drops out of the random tests.
#[test]
fn kernels_cover_every_feature() {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for seed in 0..600 {
        let k = generate(seed);
        let text = k.to_pf();
        for (elem, name) in [
            ("f16", "f16"),
            ("f32", "f32"),
            ("f64", "f64"),
            ("i32", "i32"),
        ] {
            if text.contains(&format!(": {elem}[")) {
                seen.insert(name);
            }
        }
        for f in &k.functions {
            if has_branch(&f.body, false) {
                seen.insert("function with if");
            }
            if has_branch(&f.body, true) {
                seen.insert("function with while");
            }
            if text.contains(&format!("{}(", f.name)) && text.matches(&f.name).count() > 1 {
                seen.insert("function called");
            }
        }
        let stmts = k.statements();
        let indices = ["i", "j", "k", "l", "m", "n"];
        let sizes: Vec<&str> = k.sizes.iter().map(|(n, _)| n.as_str()).collect();
        for s in &stmts {
            for r in &s.ranges {
                if indices.iter().any(|x| r.lo.mentions(x) || r.hi.mentions(x)) {
                    seen.insert("triangular range");
                }
                if sizes.iter().any(|x| r.lo.mentions(x) || r.hi.mentions(x)) {
                    seen.insert("parametric range");
                }
            }
            if !s.conds.is_empty() {
                seen.insert("affine condition");
            }
            if s.op.reduces() {
                seen.insert("reduction or update");
            }
            if matches!(s.op, Op::AddInit | Op::MulInit | Op::MaxInit | Op::MinInit) {
                seen.insert("initialising reduction");
            }
            if k.temporaries.iter().any(|t| t.name == s.lhs)
                && stmts.iter().any(|r| expr_mentions(&r.rhs, &s.lhs))
            {
                seen.insert("temporary read later");
            }
            if reads_with_offset(&s.rhs) {
                seen.insert("stencil offset");
            }
        }
        if k.outputs.len() >= 2 {
            seen.insert("several outputs");
        }
        if stmts.len() >= 3 {
            seen.insert("three or more statements");
        }
        if k.body.iter().any(|i| matches!(i, Item::For { .. })) {
            seen.insert("for loop");
        }
        if stmts.iter().any(|s| s.subs.len() + s.ranges.len() >= 3) {
            seen.insert("depth 3 or more");
        }
        if k.c_compatible() {
            seen.insert("C SCoP");
        }
        if text.contains("select(") {
            seen.insert("select");
        }
    }
    let wanted = [
        "f16",
        "f32",
        "f64",
        "i32",
        "function with if",
        "function with while",
        "function called",
        "triangular range",
        "parametric range",
        "affine condition",
        "reduction or update",
        "initialising reduction",
        "temporary read later",
        "stencil offset",
        "several outputs",
        "three or more statements",
        "for loop",
        "depth 3 or more",
        "C SCoP",
        "select",
    ];
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| !seen.contains(w))
        .collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
}

/// Whether `e` reads a tensor at `x + c` (`c != 0`) in some dimension.
fn reads_with_offset(e: &Expr) -> bool {
    match e {
        Expr::Read(_, subs) => subs
            .iter()
            .any(|s| s.terms.len() == 1 && s.terms[0].0 == 1 && s.constant != 0),
        Expr::Name(_) | Expr::Lit(_) => false,
        Expr::Neg(a) => reads_with_offset(a),
        Expr::Bin(_, a, b) => reads_with_offset(a) || reads_with_offset(b),
        Expr::Call(_, args) => args.iter().any(reads_with_offset),
        Expr::Select(c, a, b) => {
            cond_reads_with_offset(c) || reads_with_offset(a) || reads_with_offset(b)
        }
    }
}

fn cond_reads_with_offset(c: &Cond) -> bool {
    match c {
        Cond::Cmp(_, a, b) => reads_with_offset(a) || reads_with_offset(b),
        Cond::And(a, b) | Cond::Or(a, b) => cond_reads_with_offset(a) || cond_reads_with_offset(b),
        Cond::Not(a) => cond_reads_with_offset(a),
    }
}

/// Whether a function's statements hold an `if` (`whiles == false`) or a `while`.
fn has_branch(body: &[FnStmt], whiles: bool) -> bool {
    body.iter().any(|s| match s {
        FnStmt::If(_, a, b) => !whiles || has_branch(a, whiles) || has_branch(b, whiles),
        FnStmt::While(_, b) => whiles || has_branch(b, whiles),
        _ => false,
    })
}
