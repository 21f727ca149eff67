//! Constraint rows as AST expressions: affine expressions, loop bounds (`ceild`/`floord` of a
//! row's other terms by the loop variable's coefficient), and flat, minimal `min`/`max`.
//!
//! Rows are over `[parameters | dimensions]`; a dimension's value is an expression of loop
//! variables (itself, or what a substitution fixed it to). Rows come normalised (the gcd of
//! their coefficients is 1), so a bound's division never has a divisor that divides every term.

use crate::ast::AstExpr;
use crate::program::ParamId;

/// `Σ r[1+v]·v + r[0]` with parameters first, then dimensions, then the constant. Columns past
/// the known dimensions must be zero. Dimension values that are affine in loop variables and
/// parameters are expanded, so the result is one flat sum with each variable once.
pub(super) fn affine(r: &[i64], np: usize, dims: &[AstExpr]) -> AstExpr {
    debug_assert!(r[1 + np + dims.len()..].iter().all(|&x| x == 0));
    let mut terms: Vec<(AstExpr, i64)> = Vec::new();
    let mut constant = r[0];
    for (p, &c) in r[1..=np].iter().enumerate() {
        if c != 0 {
            add_term(&mut terms, AstExpr::Param(ParamId(p as u32)), c);
        }
    }
    for (d, value) in dims.iter().enumerate() {
        let c = r[1 + np + d];
        if c != 0 && !expand(value, c, &mut terms, &mut constant) {
            add_term(&mut terms, value.clone(), c);
        }
    }
    let mut e = AstExpr::Int(0);
    for (atom, c) in terms {
        if c != 0 {
            e = AstExpr::plus(e, AstExpr::mul(c, atom));
        }
    }
    AstExpr::plus(e, AstExpr::Int(constant))
}

fn add_term(terms: &mut Vec<(AstExpr, i64)>, atom: AstExpr, c: i64) {
    match terms.iter_mut().find(|(a, _)| *a == atom) {
        Some((_, k)) => *k += c,
        None => terms.push((atom, c)),
    }
}

/// Adds `k·e` to `terms` and `constant` when `e` is a sum of multiples of variables,
/// parameters and integers (checked arithmetic); `false`, with nothing added, otherwise.
fn expand(e: &AstExpr, k: i64, terms: &mut Vec<(AstExpr, i64)>, constant: &mut i64) -> bool {
    fn walk(e: &AstExpr, k: i64, out: &mut Vec<(AstExpr, i64)>, c: &mut i64) -> Option<()> {
        match e {
            AstExpr::Int(v) => *c = c.checked_add(k.checked_mul(*v)?)?,
            AstExpr::Var(_) | AstExpr::Param(_) => add_term(out, e.clone(), k),
            AstExpr::Add(a, b) => {
                walk(a, k, out, c)?;
                walk(b, k, out, c)?;
            }
            AstExpr::Mul(m, x) => walk(x, k.checked_mul(*m)?, out, c)?,
            _ => return None,
        }
        Some(())
    }
    let mut t = terms.clone();
    let mut c = *constant;
    if walk(e, k, &mut t, &mut c).is_none() {
        return false;
    }
    *terms = t;
    *constant = c;
    true
}

/// Row `r` without the coefficient of `cur`, and that coefficient.
fn split(r: &[i64], cur: usize) -> (i64, Vec<i64>) {
    let mut rest = r.to_vec();
    rest[1 + cur] = 0;
    (r[1 + cur], rest)
}

/// The value a lower-bound row `a·c + e ≥ 0` (`a > 0`) gives `c`: `ceild(−e, a)`.
pub(super) fn lower_bound(r: &[i64], cur: usize, np: usize, dims: &[AstExpr]) -> AstExpr {
    let (a, rest) = split(r, cur);
    debug_assert!(a > 0);
    let num: Vec<i64> = rest.iter().map(|&x| -x).collect();
    AstExpr::ceil_div(affine(&num, np, dims), a)
}

/// The value an upper-bound row `−a·c + e ≥ 0` (`a > 0`) gives `c`: `floord(e, a)`.
pub(super) fn upper_bound(r: &[i64], cur: usize, np: usize, dims: &[AstExpr]) -> AstExpr {
    let (a, rest) = split(r, cur);
    debug_assert!(a < 0);
    AstExpr::floor_div(affine(&rest, np, dims), -a)
}

/// The value an equality row `c + e = 0` fixes `c` to: `−e`.
pub(super) fn value_of(r: &[i64], cur: usize, np: usize, dims: &[AstExpr]) -> AstExpr {
    let (a, rest) = split(r, cur);
    debug_assert_eq!(a, 1);
    let num: Vec<i64> = rest.iter().map(|&x| -x).collect();
    affine(&num, np, dims)
}

/// `max` of `items`: nested `max`es flattened, repeats dropped, integer constants folded into
/// one. At least one item.
pub(super) fn max_of(items: Vec<AstExpr>) -> AstExpr {
    flat(items, true)
}

/// `min` of `items`, simplified like [`max_of`].
pub(super) fn min_of(items: Vec<AstExpr>) -> AstExpr {
    flat(items, false)
}

fn flat(items: Vec<AstExpr>, is_max: bool) -> AstExpr {
    let mut out: Vec<AstExpr> = Vec::with_capacity(items.len());
    let mut constant: Option<i64> = None;
    let mut push = |e: AstExpr, out: &mut Vec<AstExpr>| match e {
        AstExpr::Int(v) => {
            constant = Some(match constant {
                Some(c) if is_max => c.max(v),
                Some(c) => c.min(v),
                None => v,
            });
        }
        e => {
            if !out.contains(&e) {
                out.push(e);
            }
        }
    };
    for e in items {
        match e {
            AstExpr::Max(inner) if is_max => inner.into_iter().for_each(|x| push(x, &mut out)),
            AstExpr::Min(inner) if !is_max => inner.into_iter().for_each(|x| push(x, &mut out)),
            e => push(e, &mut out),
        }
    }
    if let Some(c) = constant {
        out.push(AstExpr::Int(c));
    }
    if is_max {
        AstExpr::max(out)
    } else {
        AstExpr::min(out)
    }
}
