//! Range inference for indices that subscript tensors only through affine expressions, as
//! Tensor Comprehensions does it.
//!
//! An index used bare (`X(i, k)`) ranges over the extent it subscripts. An index used only
//! inside affine subscripts (`X(ci, h + kh)`, `Y(2*i + 1)`) gets the largest range for which
//! every such access stays inside its tensor whatever values the other indices of the subscript
//! take in their own ranges: for a subscript `a·x + r` of a dimension of extent `E`, with `r`
//! between `rmin` and `rmax` over the other indices, `0 <= a·x + rmin` and `a·x + rmax <= E - 1`.
//! Those constraints are affine in `x` and the sizes, so they go into the domain as they are.
//! Indices are resolved in rounds, each using the ranges found before; an index whose subscripts
//! all involve another index without a range is ambiguous and reported with the constraints
//! that were found.
//!
//! On the way in, `bounds[k]` is `Some((lo, hi))` (inclusive, affine in the sizes) for every
//! index with a range; on the way out every entry is `Some`, or an error was returned.

use polyhedral::program::{AffineExpr, ArrayId, Constraint, ParamId, Program, Span, Var};

use super::ast;
use crate::diagnostic::Diagnostic;

/// One inferred range, for the domain and for `check` to print.
pub(crate) struct InferredRange {
    pub index: String,
    /// `lo:hi` (half-open) as the user would write it in a `where`.
    pub range: String,
    /// The accesses it was inferred from, as written.
    pub from: Vec<String>,
    pub constraints: Vec<Constraint>,
}

/// Fills the missing entries of `bounds`; see the module docs. `to_affine` converts a
/// subscript; `names` and `first` are the indices' names and first occurrences, `lhs_bare`
/// whether each subscripts the written tensor bare (so it cannot be negative).
#[allow(clippy::too_many_arguments)]
pub(crate) fn infer_ranges(
    program: &Program,
    names: &[&str],
    first: &[Span],
    lhs_bare: &[bool],
    n_for: usize,
    bounds: &mut [Option<(AffineExpr, AffineExpr)>],
    uses: &[(ArrayId, usize, ast::Expr, Span)],
    to_affine: &mut dyn FnMut(&ast::Expr) -> Result<AffineExpr, Diagnostic>,
) -> Result<Vec<InferredRange>, Diagnostic> {
    let subs: Vec<AffineExpr> = uses
        .iter()
        .map(|(_, _, e, _)| to_affine(e))
        .collect::<Result<_, _>>()?;
    let params = program.param_values();
    let param_name = |p: ParamId| program.params[p.index()].name.clone();
    let iter_name = |i: usize| {
        if i >= n_for {
            names[i - n_for].to_string()
        } else {
            format!("i{i}")
        }
    };
    let show = |e: &AffineExpr| e.display_with(&iter_name, &param_name).to_string();
    let access_text = |k: usize| {
        let (a, d, _, _) = &uses[k];
        format!(
            "0 <= {} < {} (dimension {d} of `{}`)",
            show(&subs[k]),
            show(&program.arrays[a.index()].shape[*d]),
            program.arrays[a.index()].name
        )
    };
    let mut out = Vec::new();
    loop {
        let mut progress = false;
        for x in 0..bounds.len() {
            if bounds[x].is_some() {
                continue;
            }
            let me = Var::Iter(n_for + x);
            let mut constraints = Vec::new();
            let mut from = Vec::new();
            let mut blocked = false;
            for (k, sub) in subs.iter().enumerate() {
                let a = sub.coeff(me);
                if a == 0 {
                    continue;
                }
                // The subscript without x, at its smallest and largest over the other indices.
                let mut low = AffineExpr::constant(sub.constant);
                let mut high = AffineExpr::constant(sub.constant);
                for &(v, c) in sub.terms() {
                    match v {
                        Var::Param(_) => {
                            low.add_term(v, c);
                            high.add_term(v, c);
                        }
                        Var::Iter(i) if i == n_for + x => {}
                        // Kernels have no division variables; were there one, no interval.
                        Var::Div(_) => blocked = true,
                        Var::Iter(i) if i < n_for => blocked = true,
                        Var::Iter(i) => match &bounds[i - n_for] {
                            // A range given by other indices (`where j in i:N`) is no fixed
                            // interval to take extremes over.
                            Some((lo, hi))
                                if lo.innermost_iter().is_some()
                                    || hi.innermost_iter().is_some() =>
                            {
                                blocked = true
                            }
                            None => blocked = true,
                            Some((lo, hi)) => {
                                let (at_low, at_high) = if c > 0 { (lo, hi) } else { (hi, lo) };
                                low = low.add(&at_low.scale(c));
                                high = high.add(&at_high.scale(c));
                            }
                        },
                    }
                }
                if blocked {
                    break;
                }
                let (array, d, _, span) = &uses[k];
                let extent = &program.arrays[array.index()].shape[*d];
                let ax = AffineExpr::term(me, a);
                constraints.push(Constraint::non_negative(ax.add(&low)));
                constraints.push(Constraint::non_negative(
                    extent.add(&AffineExpr::constant(-1)).sub(&high).sub(&ax),
                ));
                from.push((k, *span));
            }
            if blocked {
                continue;
            }
            if lhs_bare[x] && !from.is_empty() {
                // It also subscripts the written tensor, whose dimensions start at 0.
                constraints.push(Constraint::non_negative(AffineExpr::var(me)));
            }
            if from.is_empty() {
                return Err(Diagnostic::new(
                    first[x],
                    format!("cannot infer the range of index `{}`", names[x]),
                )
                .with_hint(format!(
                    "use it in a subscript of a tensor, or add `where {} in lo:hi`",
                    names[x]
                )));
            }
            // Bounds for sizing temporaries: symbolic where one constraint is the tightest
            // and has a unit coefficient, its value otherwise.
            let (lo, hi) = tightest(&constraints, me, &params);
            if lo.1 > hi.1 {
                return Err(Diagnostic::new(
                    first[x],
                    format!(
                        "the range of index `{}` inferred from its subscripts is empty",
                        names[x]
                    ),
                )
                .with_hint(format!(
                    "its accesses need {}; give its range with `where {} in lo:hi`",
                    from.iter()
                        .map(|&(k, _)| access_text(k))
                        .collect::<Vec<_>>()
                        .join(" and "),
                    names[x]
                )));
            }
            let hi_exclusive = hi.0.add(&AffineExpr::constant(1));
            out.push(InferredRange {
                index: names[x].to_string(),
                range: format!("{}:{}", show(&lo.0), show(&hi_exclusive)),
                from: from.iter().map(|&(k, _)| access_text(k)).collect(),
                constraints,
            });
            bounds[x] = Some((lo.0, hi.0));
            progress = true;
        }
        if !progress {
            break;
        }
    }
    if let Some(x) = bounds.iter().position(|b| b.is_none()) {
        let me = Var::Iter(n_for + x);
        let found: Vec<String> = (0..subs.len())
            .filter(|&k| subs[k].coeff(me) != 0)
            .map(access_text)
            .collect();
        let mut d = Diagnostic::new(
            first[x],
            format!("cannot infer the range of index `{}`", names[x]),
        );
        d = if found.is_empty() {
            d.with_hint(format!(
                "use it in a subscript of a tensor, or add `where {} in lo:hi`",
                names[x]
            ))
        } else {
            d.with_hint(format!(
                "the constraints found, {}, involve indices without a range of their own; \
                 add `where {} in lo:hi`",
                found.join(" and "),
                names[x]
            ))
        };
        return Err(d);
    }
    Ok(out)
}

/// The tightest lower and upper bounds on `x` among `constraints` (each `a·x + rest >= 0`),
/// as an affine expression and its value: the constraint's own form when `a` is ±1, the value
/// otherwise.
fn tightest(
    constraints: &[Constraint],
    x: Var,
    params: &[i64],
) -> ((AffineExpr, i64), (AffineExpr, i64)) {
    let mut lo: Option<(AffineExpr, i64)> = None;
    let mut hi: Option<(AffineExpr, i64)> = None;
    for c in constraints {
        let a = c.expr.coeff(x);
        let mut rest = c.expr.clone();
        rest.add_term(x, -a);
        let r = rest.eval(&[], params);
        if a > 0 {
            // x >= ceil(-r / a)
            let v = -((r).div_euclid(a));
            let e = if a == 1 {
                rest.scale(-1)
            } else {
                AffineExpr::constant(v)
            };
            if lo.as_ref().is_none_or(|(_, l)| v > *l) {
                lo = Some((e, v));
            }
        } else {
            // x <= floor(r / -a)
            let v = r.div_euclid(-a);
            let e = if a == -1 {
                rest
            } else {
                AffineExpr::constant(v)
            };
            if hi.as_ref().is_none_or(|(_, h)| v < *h) {
                hi = Some((e, v));
            }
        }
    }
    // Every use gives one constraint of each direction.
    (
        lo.expect("a lower bound per use"),
        hi.expect("an upper bound per use"),
    )
}
