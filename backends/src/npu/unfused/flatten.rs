//! An element-wise group over more than two dimensions as one over rows and columns: the
//! Vector unit's form ([`crate::npu::vector`]), for the groups the unfused lowering cuts out
//! of a Cube kernel's epilogue (conv → BN → ReLU over `[channel, y, x]`).
//!
//! A group is flattened when its statements are element-wise (no reduction, no inner
//! iterator used as a value) over the same
//! depth `d ≥ 3`, every inner iterator `1..d` runs over a whole box `0..n_k`, and every array
//! is read or written either at exactly `[i0, i1, …]` with extents `[E, n_1, …]` (row-major, so
//! `[i0, i1 · n_2 ·… + …]` is the same element of the array seen as `[E, n_1 · n_2 ·…]`) or
//! with subscripts that use no inner iterator (per-channel vectors, scalars). The columns are
//! then `c = Σ i_k · stride_k`, and the flattened program computes the same elements; the
//! arrays keep their bytes, so the GM tensors other kernels declare with the original shape
//! are the same tensors.

use polyhedral::program::{Access, AffineExpr, Constraint, ConstraintKind, Expr, ExprId, Var};
use polyhedral::Program;

/// `program` over `[i0, c]`, or `None` when it is not of the form above.
pub(super) fn flatten(program: &Program) -> Option<Program> {
    let first = program.statements.first()?;
    let d = first.depth();
    if d < 3 {
        return None;
    }
    let params = program.param_values();
    let mut inner: Option<Vec<i64>> = None;
    // Per array: whether it is accessed whole (`Some(true)`) or only without inner iterators.
    let mut whole: Vec<Option<bool>> = vec![None; program.arrays.len()];
    for s in &program.statements {
        if s.depth() != d || s.reduction.is_some() {
            return None;
        }
        // The value of an inner iterator is not a function of the flattened column alone
        // without a division: such bodies are not flattened.
        let inner_value =
            (0..s.exprs.len()).any(|e| matches!(s.exprs[ExprId(e as u32)], Expr::Iter(k) if k > 0));
        if inner_value {
            return None;
        }
        let extents = box_extents(&s.domain, d, &params)?;
        match &inner {
            Some(e) if *e != extents => return None,
            _ => inner = Some(extents.clone()),
        }
        for a in s.accesses().map(|(_, a)| a) {
            let is_whole = a.subscripts.len() == d
                && a.subscripts
                    .iter()
                    .enumerate()
                    .all(|(k, e)| e.bind_params(&params) == AffineExpr::var(Var::Iter(k)))
                && program.array_extents(a.array)[1..] == extents[..];
            let no_inner = a.subscripts.iter().all(|e| {
                e.terms()
                    .iter()
                    .all(|&(v, _)| !matches!(v, Var::Iter(k) if k > 0))
            });
            if !is_whole && !no_inner {
                return None;
            }
            let slot = &mut whole[a.array.index()];
            match slot {
                Some(w) if *w != is_whole => return None,
                _ => *slot = Some(is_whole),
            }
        }
    }
    let inner = inner?;
    let cols: i64 = inner.iter().product();
    let mut flat = program.clone();
    for (k, arr) in flat.arrays.iter_mut().enumerate() {
        if whole[k] == Some(true) {
            arr.shape = vec![arr.shape[0].clone(), AffineExpr::constant(cols)];
        }
    }
    for s in &mut flat.statements {
        let mut domain: Vec<Constraint> = s
            .domain
            .iter()
            .filter(|c| c.expr.innermost_iter() == Some(0))
            .cloned()
            .collect();
        let c = AffineExpr::var(Var::Iter(1));
        domain.push(Constraint::non_negative(c.clone()));
        domain.push(Constraint::non_negative(
            AffineExpr::constant(cols - 1).sub(&c),
        ));
        s.domain = domain;
        // The other accesses use no inner iterator: they stay as they are.
        let flatten_access = |a: &mut Access| {
            if whole[a.array.index()] == Some(true) {
                a.subscripts = vec![AffineExpr::var(Var::Iter(0)), c.clone()];
            }
        };
        flatten_access(&mut s.write);
        s.reads.iter_mut().for_each(flatten_access);
        s.iterators = vec![s.iterators[0].clone(), s.iterators[1..].join("_")];
        s.position = vec![s.position[0], s.position[1], s.position[d]];
    }
    Some(flat)
}

/// The extents `n_1..n_d` of the inner iterators when `domain` is a box whose inner
/// iterators run over `0..n_k` and whose constraints each bound one iterator.
fn box_extents(domain: &[Constraint], d: usize, params: &[i64]) -> Option<Vec<i64>> {
    let mut lo: Vec<Option<i64>> = vec![None; d];
    let mut hi: Vec<Option<i64>> = vec![None; d];
    for c in domain {
        let e = c.expr.bind_params(params);
        let [(Var::Iter(k), coeff)] = e.terms() else {
            return None;
        };
        let (k, coeff) = (*k, *coeff);
        match (c.kind, coeff) {
            (ConstraintKind::NonNegative, 1) => {
                lo[k] = Some(lo[k].map_or(-e.constant, |l| l.max(-e.constant)))
            }
            (ConstraintKind::NonNegative, -1) => {
                hi[k] = Some(hi[k].map_or(e.constant, |h| h.min(e.constant)))
            }
            _ => return None,
        }
    }
    (1..d)
        .map(|k| match (lo[k], hi[k]) {
            (Some(0), Some(h)) if h >= 0 => Some(h + 1),
            _ => None,
        })
        .collect()
}
