//! Shrinking a failing kernel: smaller kernels are tried, largest cuts first, and the first one
//! that still fails the same way (the same [`Outcome::signature`] under the same command)
//! replaces the kernel, until no candidate fails so or the time is up.
//!
//! Candidates drop a statement, unwrap a `for` loop, inline a scalar function's first argument,
//! replace a sub-expression by one of its operands or by a literal, drop `where` conditions
//! and explicit ranges, shrink sizes and constants, simplify scalar functions' bodies, and
//! finally drop options from the command. After each edit, tensors, functions and ranges
//! nothing uses any more are removed. A candidate the front end refuses fails differently, so
//! it is never taken.

use std::time::{Duration, Instant};

use super::generator::{cond_mentions, expr_mentions};
use super::kernel::{Aff, Cond, Expr, FnStmt, Item, Kernel, Lang, Lit, Stmt};
use super::runner::{Outcome, Polyfuse};

pub struct Shrunk {
    pub kernel: Kernel,
    pub args: Vec<String>,
}

/// Shrinks `kernel`, which fails with `outcome` under `polyfuse ARGS` (the kernel file, written
/// in `lang`, is `args[1]`), for at most `budget`.
pub fn shrink(
    pf: &Polyfuse,
    kernel: &Kernel,
    lang: Lang,
    args: &[String],
    outcome: &Outcome,
    budget: Duration,
) -> Shrunk {
    let start = Instant::now();
    let want = outcome.signature();
    let file = pf.work.join(format!("shrink.{}", lang.ext()));
    let mut args = args.to_vec();
    if args.len() > 1 {
        args[1] = file.display().to_string();
    }
    let mut best = kernel.clone();
    let mut tries = 0u32;
    let fails = |k: &Kernel, args: &[String]| -> bool {
        if std::fs::write(&file, k.render(lang)).is_err() {
            return false;
        }
        pf.run(args).0.signature() == want
    };
    // The kernel as given must fail the same way from the shrinker's file.
    if !fails(&best, &args) {
        return Shrunk { kernel: best, args };
    }
    'outer: loop {
        for candidate in candidates(&best) {
            if start.elapsed() > budget {
                break 'outer;
            }
            if candidate == best {
                continue;
            }
            tries += 1;
            if fails(&candidate, &args) {
                best = candidate;
                continue 'outer;
            }
        }
        break;
    }
    // Then the command: drop options that the failure does not need.
    let mut k = 6;
    while k < args.len() && start.elapsed() <= budget {
        let width =
            if args[k].starts_with("--") && k + 1 < args.len() && !args[k + 1].starts_with("--") {
                2
            } else {
                1
            };
        let mut fewer = args.clone();
        fewer.drain(k..k + width);
        if fails(&best, &fewer) {
            args = fewer;
        } else {
            k += width;
        }
    }
    let _ = tries;
    Shrunk { kernel: best, args }
}

/// Every smaller kernel to try, the biggest cuts first.
fn candidates(k: &Kernel) -> Vec<Kernel> {
    let mut out = Vec::new();
    let n = k.statements().len();
    // Drop a statement.
    if n > 1 {
        for s in 0..n {
            let mut c = k.clone();
            let mut counter = 0;
            remove_statement(&mut c.body, s, &mut counter);
            out.push(cleaned(c));
        }
    }
    // Unwrap a `for` loop, or run it once.
    for path in for_loops(&k.body, &mut Vec::new()) {
        let mut c = k.clone();
        unwrap_for(&mut c.body, &path);
        out.push(cleaned(c));
        let mut c = k.clone();
        set_for_hi(&mut c.body, &path, Aff::constant(1));
        out.push(cleaned(c));
    }
    // Replace calls of a function by its first argument.
    for f in &k.functions {
        let mut c = k.clone();
        map_exprs(&mut c, &mut |e| inline_call(e, &f.name));
        out.push(cleaned(c));
    }
    // Drop an output that another output keeps company: it becomes a temporary.
    if k.outputs.len() > 1 {
        for o in 0..k.outputs.len() {
            let mut c = k.clone();
            c.outputs.remove(o);
            out.push(cleaned(c));
        }
    }
    // Simplify the right-hand side of a statement.
    for s in 0..n {
        let rhs = k.statements()[s].rhs.clone();
        for variant in expr_variants(&rhs) {
            let mut c = k.clone();
            with_statement(&mut c.body, s, &mut |st| st.rhs = variant.clone());
            out.push(cleaned(c));
        }
    }
    // Drop conditions and explicit ranges, or make ranges start at 0 and end at the size.
    for s in 0..n {
        let st = k.statements()[s].clone();
        for i in 0..st.conds.len() {
            let mut c = k.clone();
            with_statement(&mut c.body, s, &mut |st| {
                st.conds.remove(i);
            });
            out.push(cleaned(c));
        }
        for i in 0..st.ranges.len() {
            let mut c = k.clone();
            with_statement(&mut c.body, s, &mut |st| {
                st.ranges.remove(i);
            });
            out.push(cleaned(c));
            if st.ranges[i].lo != Aff::constant(0) {
                let mut c = k.clone();
                with_statement(&mut c.body, s, &mut |st| st.ranges[i].lo = Aff::constant(0));
                out.push(cleaned(c));
            }
        }
    }
    // Smaller sizes.
    for (i, &(_, v)) in k.sizes.iter().enumerate() {
        for smaller in [1, 2, v / 2, v - 1] {
            if smaller >= 1 && smaller < v {
                let mut c = k.clone();
                c.sizes[i].1 = smaller;
                out.push(c);
            }
        }
    }
    // Simpler scalar functions.
    for (f, func) in k.functions.iter().enumerate() {
        for body in fn_body_variants(&func.body) {
            let mut c = k.clone();
            c.functions[f].body = body;
            out.push(cleaned(c));
        }
    }
    // Smaller subscript offsets and literals.
    for s in 0..n {
        let mut c = k.clone();
        with_statement(&mut c.body, s, &mut |st| {
            map_expr(&mut st.rhs, &mut |e| {
                if let Expr::Read(_, subs) = e {
                    for a in subs.iter_mut() {
                        a.constant = 0;
                    }
                }
            })
        });
        out.push(cleaned(c));
        let mut c = k.clone();
        with_statement(&mut c.body, s, &mut |st| {
            map_expr(&mut st.rhs, &mut |e| {
                if let Expr::Lit(l) = e {
                    *l = match *l {
                        Lit::Int(_) => Lit::Int(1),
                        Lit::Float(_) => Lit::Float(1.0),
                    }
                }
            })
        });
        out.push(cleaned(c));
    }
    out
}

/// Removes what nothing uses any more: ranges and conditions of indices a statement no longer
/// has, inputs nothing reads, outputs nothing writes, functions nothing calls.
fn cleaned(mut k: Kernel) -> Kernel {
    fn clean_items(items: &mut [Item]) {
        for item in items {
            match item {
                Item::Stmt(s) => {
                    let used = |name: &str| {
                        s.subs.iter().any(|a| a.mentions(name)) || expr_mentions(&s.rhs, name)
                    };
                    let keep: Vec<bool> = s.ranges.iter().map(|r| used(&r.index)).collect();
                    let mut it = keep.iter();
                    s.ranges.retain(|_| *it.next().unwrap_or(&true));
                    let names: Vec<String> = s.ranges.iter().map(|r| r.index.clone()).collect();
                    // A condition over an index the statement lost.
                    let lost = |a: &Aff| {
                        a.terms.iter().any(|(_, n)| {
                            n.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                                && !names.contains(n)
                                && !s.subs.iter().any(|x| x.mentions(n))
                                && !expr_mentions(&s.rhs, n)
                        })
                    };
                    s.conds.retain(|c| !lost(&c.lhs) && !lost(&c.rhs));
                }
                Item::For { body, .. } => clean_items(body),
            }
        }
    }
    clean_items(&mut k.body);
    let stmts: Vec<Stmt> = k.statements().into_iter().cloned().collect();
    let read = |name: &str, k: &Kernel| {
        stmts.iter().any(|s| expr_mentions(&s.rhs, name))
            || k.functions
                .iter()
                .any(|f| f.name != name && fn_mentions(&f.body, name))
    };
    let inputs: Vec<bool> = k.inputs.iter().map(|t| read(&t.name, &k)).collect();
    let mut it = inputs.iter();
    k.inputs.retain(|_| *it.next().unwrap_or(&true));
    k.outputs.retain(|t| stmts.iter().any(|s| s.lhs == t.name));
    // Functions: drop the ones nothing calls, last first (a function may call earlier ones).
    loop {
        let unused = k.functions.iter().position(|f| {
            !stmts.iter().any(|s| expr_mentions(&s.rhs, &f.name)) && {
                let others = k.functions.iter().filter(|g| g.name != f.name);
                !others.into_iter().any(|g| fn_mentions(&g.body, &f.name))
            }
        });
        match unused {
            Some(i) => {
                k.functions.remove(i);
            }
            None => break,
        }
    }
    k
}

fn fn_mentions(body: &[FnStmt], name: &str) -> bool {
    body.iter().any(|s| match s {
        FnStmt::Local { value, .. } | FnStmt::Assign(_, value) | FnStmt::Return(value) => {
            expr_mentions(value, name)
        }
        FnStmt::If(c, a, b) => {
            cond_mentions(c, name) || fn_mentions(a, name) || fn_mentions(b, name)
        }
        FnStmt::While(c, a) => cond_mentions(c, name) || fn_mentions(a, name),
    })
}

fn remove_statement(items: &mut Vec<Item>, target: usize, counter: &mut usize) -> bool {
    let mut k = 0;
    while k < items.len() {
        match &mut items[k] {
            Item::Stmt(_) => {
                if *counter == target {
                    items.remove(k);
                    return true;
                }
                *counter += 1;
            }
            Item::For { body, .. } => {
                if remove_statement(body, target, counter) {
                    if body.is_empty() {
                        items.remove(k);
                    }
                    return true;
                }
            }
        }
        k += 1;
    }
    false
}

fn with_statement(items: &mut [Item], target: usize, f: &mut dyn FnMut(&mut Stmt)) {
    fn go(items: &mut [Item], target: usize, counter: &mut usize, f: &mut dyn FnMut(&mut Stmt)) {
        for item in items {
            match item {
                Item::Stmt(s) => {
                    if *counter == target {
                        f(s);
                    }
                    *counter += 1;
                }
                Item::For { body, .. } => go(body, target, counter, f),
            }
        }
    }
    go(items, target, &mut 0, f);
}

/// Paths (positions at each level) to every `for` item.
fn for_loops(items: &[Item], prefix: &mut Vec<usize>) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for (k, item) in items.iter().enumerate() {
        if let Item::For { body, .. } = item {
            prefix.push(k);
            out.push(prefix.clone());
            out.extend(for_loops(body, prefix));
            prefix.pop();
        }
    }
    out
}

fn unwrap_for(items: &mut Vec<Item>, path: &[usize]) {
    let Some((&k, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        if let Item::For { body, .. } = items[k].clone() {
            items.splice(k..=k, body);
        }
    } else if let Item::For { body, .. } = &mut items[k] {
        unwrap_for(body, rest);
    }
}

fn set_for_hi(items: &mut [Item], path: &[usize], value: Aff) {
    let Some((&k, rest)) = path.split_first() else {
        return;
    };
    if let Item::For { hi, body, .. } = &mut items[k] {
        if rest.is_empty() {
            *hi = value;
        } else {
            set_for_hi(body, rest, value);
        }
    }
}

/// Applies `f` to every expression node of every statement and function, bottom-up.
fn map_exprs(k: &mut Kernel, f: &mut dyn FnMut(&mut Expr)) {
    fn items(list: &mut [Item], f: &mut dyn FnMut(&mut Expr)) {
        for item in list {
            match item {
                Item::Stmt(s) => map_expr(&mut s.rhs, f),
                Item::For { body, .. } => items(body, f),
            }
        }
    }
    items(&mut k.body, f);
}

fn map_expr(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    match e {
        Expr::Read(..) | Expr::Name(_) | Expr::Lit(_) => {}
        Expr::Neg(a) => map_expr(a, f),
        Expr::Bin(_, a, b) => {
            map_expr(a, f);
            map_expr(b, f);
        }
        Expr::Call(_, args) => args.iter_mut().for_each(|a| map_expr(a, f)),
        Expr::Select(c, a, b) => {
            map_cond(c, f);
            map_expr(a, f);
            map_expr(b, f);
        }
    }
    f(e);
}

fn map_cond(c: &mut Cond, f: &mut dyn FnMut(&mut Expr)) {
    match c {
        Cond::Cmp(_, a, b) => {
            map_expr(a, f);
            map_expr(b, f);
        }
        Cond::And(a, b) | Cond::Or(a, b) => {
            map_cond(a, f);
            map_cond(b, f);
        }
        Cond::Not(a) => map_cond(a, f),
    }
}

fn inline_call(e: &mut Expr, name: &str) {
    if let Expr::Call(f, args) = e {
        if f == name && !args.is_empty() {
            *e = args[0].clone();
        }
    }
}

/// Every expression one step simpler than `e`: an operand in its place, a literal, or one of
/// its operands simplified.
fn expr_variants(e: &Expr) -> Vec<Expr> {
    let mut out = Vec::new();
    let children: Vec<&Expr> = match e {
        Expr::Read(..) | Expr::Name(_) | Expr::Lit(_) => Vec::new(),
        Expr::Neg(a) => vec![a],
        Expr::Bin(_, a, b) => vec![a, b],
        Expr::Call(_, args) => args.iter().collect(),
        Expr::Select(_, a, b) => vec![a, b],
    };
    out.extend(children.iter().map(|c| (*c).clone()));
    if !matches!(e, Expr::Lit(_)) {
        out.push(Expr::Lit(Lit::Float(1.0)));
        out.push(Expr::Lit(Lit::Int(1)));
    }
    match e {
        Expr::Read(..) | Expr::Name(_) | Expr::Lit(_) => {}
        Expr::Neg(a) => {
            for v in expr_variants(a) {
                out.push(Expr::Neg(Box::new(v)));
            }
        }
        Expr::Bin(op, a, b) => {
            for v in expr_variants(a) {
                out.push(Expr::Bin(*op, Box::new(v), b.clone()));
            }
            for v in expr_variants(b) {
                out.push(Expr::Bin(*op, a.clone(), Box::new(v)));
            }
        }
        Expr::Call(f, args) => {
            for (k, a) in args.iter().enumerate() {
                for v in expr_variants(a) {
                    let mut args = args.clone();
                    args[k] = v;
                    out.push(Expr::Call(f.clone(), args));
                }
            }
        }
        Expr::Select(c, a, b) => {
            for v in expr_variants(a) {
                out.push(Expr::Select(c.clone(), Box::new(v), b.clone()));
            }
            for v in expr_variants(b) {
                out.push(Expr::Select(c.clone(), a.clone(), Box::new(v)));
            }
        }
    }
    out
}

/// Function bodies with one statement dropped or one `if` replaced by a branch.
fn fn_body_variants(body: &[FnStmt]) -> Vec<Vec<FnStmt>> {
    let mut out = Vec::new();
    for k in 0..body.len() {
        if matches!(body[k], FnStmt::Return(_)) && k + 1 == body.len() {
            continue;
        }
        let mut b = body.to_vec();
        b.remove(k);
        out.push(b);
        if let FnStmt::If(_, then, other) = &body[k] {
            for branch in [then, other] {
                let mut b = body.to_vec();
                b.splice(k..=k, branch.iter().cloned());
                out.push(b);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::generator::generate;
    use super::*;

    #[test]
    fn candidates_are_smaller_or_simpler() {
        for seed in 0..40 {
            let k = generate(seed);
            for c in candidates(&k) {
                assert!(c.statements().len() <= k.statements().len());
                assert!(c.to_pf().len() <= k.to_pf().len() + 64, "{}", c.to_pf());
            }
        }
    }

    #[test]
    fn unused_inputs_leave_with_their_reads() {
        for seed in 0..40 {
            let k = generate(seed);
            let c = cleaned(k.clone());
            for t in &c.inputs {
                assert!(
                    c.statements()
                        .iter()
                        .any(|s| expr_mentions(&s.rhs, &t.name)),
                    "{}",
                    c.to_pf()
                );
            }
        }
    }
}
