//! Reduction tiles from reduction-tile marks ([`ReductionTileMark`]): the rows loop of the band
//! below the mark is unrolled by the mark's rows and its copies jammed into the innermost loop,
//! which then runs one independent reduction chain per row and per reduction.
//!
//! The loops below the mark must be a chain `L0 { L1 { … Ln-1 { statements } } }` of as many
//! loops as the band has members, the innermost one neither parallel nor vectorizable (it
//! carries the reductions). The rows loop `Lr` (the mark's member) steps by one, starts no
//! tile-local buffer, and the bounds of the loops inside it do not use its variable (every row
//! runs the same iterations of them). When the loops are not so, or the rows loop is the one
//! the kernel forks threads on, the band is written as it is.
//!
//! Written as: `Lr` by steps of `rows`, its body with the statements of the innermost loop
//! repeated for the rows `r, r + 1, …` in the order of the rows, then the rows left over (tile
//! and domain edges) one at a time as before. The innermost loop of the jammed body holds the
//! element each row accumulates into in a local of its own ([`super::accumulate`]): read before
//! the loop, written back after it, so the rows' chains are independent for the C compiler.
//! The rows loop carries no dependence once the loops outside it are equal (the mark says it
//! is coincident), so jamming interleaves instances of different rows only; the instances of
//! one row keep their order, and every element sees its updates in the source order: the
//! results are bit-identical. The code is scalar: no `omp simd`, whose reassociation the
//! results would not survive.

use std::collections::BTreeSet;

use polyhedral::ast::Ast;
use polyhedral::reduction_tile::ReductionTileMark;

use super::writer::Writer;
use crate::promote::expr_vars;

fn single(ast: &Ast) -> &Ast {
    match ast {
        Ast::Block(items) if items.len() == 1 => single(&items[0]),
        other => other,
    }
}

impl Writer<'_> {
    /// The rows loop below a reduction-tile mark, when the loops have the shape the module
    /// docs describe.
    pub(super) fn reduction_rows_loop<'t>(
        &self,
        mark: &ReductionTileMark,
        body: &'t Ast,
    ) -> Option<&'t Ast> {
        let mut chain = Vec::new();
        let mut at = single(body);
        loop {
            let Ast::For {
                body, annotations, ..
            } = at
            else {
                return None;
            };
            if self.tile_locals.contains_key(&(at as *const Ast)) {
                return None;
            }
            chain.push(at);
            if !body.contains_loop() {
                if annotations.parallel || annotations.vectorizable {
                    return None;
                }
                let users = match &**body {
                    Ast::Block(items) => items.iter().all(|i| matches!(i, Ast::User { .. })),
                    other => matches!(other, Ast::User { .. }),
                };
                if !users {
                    return None;
                }
                break;
            }
            at = single(body);
        }
        if chain.len() != mark.loops || mark.member + 1 >= chain.len() {
            return None;
        }
        let rows = chain[mark.member];
        let Ast::For { var, step: 1, .. } = rows else {
            return None;
        };
        let row_free = chain[mark.member + 1..].iter().all(|l| match l {
            Ast::For { lower, upper, .. } => {
                let mut used = BTreeSet::new();
                expr_vars(lower, &mut used);
                expr_vars(upper, &mut used);
                !used.contains(var)
            }
            _ => false,
        });
        row_free.then_some(rows)
    }

    /// The rows a reduction tile jams for loop `for_loop`, when a mark chose it and the loop
    /// runs at least that many iterations at the middle of the enclosing loops' ranges (the
    /// writer asks only for a loop it does not fork threads on).
    pub(super) fn take_reduction_rows(&mut self, for_loop: &Ast) -> Option<i64> {
        let rows = self.reduction_rows.remove(&(for_loop as *const Ast))?;
        let Ast::For { lower, upper, .. } = for_loop else {
            return None;
        };
        let (lo, hi) = self.bounds_at_midpoints(lower, upper);
        (hi - lo + 1 >= rows).then_some(rows)
    }
}
