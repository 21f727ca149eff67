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
//! Written as: where the rows loop runs in tiles whose size `T` the rows divide (the mark says
//! `T`), a full tile (`T` iterations) runs `T / rows` iterations, each with the statements of
//! the innermost loop repeated for the rows `r, r + T / rows, r + 2 T / rows, …`; a partial tile
//! (the domain's edge) runs its rows one at a time as before. Without such tiles: `Lr` by steps
//! of `rows`, the rows `r, r + 1, …`, then the rows left over one at a time. The innermost loop
//! of the jammed body holds the element each row accumulates into in a local of its own
//! ([`super::accumulate`]): read before the loop, written back after it, so the rows' chains
//! are independent for the C compiler. The rows loop carries no dependence once the loops
//! outside it are equal (the mark says it is coincident), so jamming interleaves instances of
//! different rows only; the instances of one row keep their order, and every element sees its
//! updates in the source order: the results are bit-identical.
//!
//! The code is scalar, one multiply-add per row and reduction in each iteration. The jammed
//! innermost loop is written `#pragma omp simd if(simd: 0)`, one iteration at a time: without
//! it GCC vectorises the loop along the reduction keeping the order of the additions (one
//! vector product, then its lanes added one by one into each accumulator), a shuffle per
//! element. Rows apart rather than adjacent keep GCC from packing the accumulators of
//! adjacent elements into vectors instead (one lane per row, the rows' operands gathered
//! lane by lane, and only a vector's worth of chains left). Both were measured slower than the
//! scalar chains (syrk, LARGE, one thread, medians of 7 interleaved runs: 355 and 247 ms; the
//! loop before jamming 321 and 278 ms in the same runs).

use std::fmt::Write as _;

use polyhedral::ast::Ast;
use polyhedral::schedule::mark::ReductionTileMark;

use super::micro::{bound_vars, single};
use super::writer::{jam_strided, Writer};

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
            Ast::For { lower, upper, .. } => !bound_vars(lower, upper).contains(var),
            _ => false,
        });
        row_free.then_some(rows)
    }

    /// The reduction tile of loop `for_loop`, when a mark chose it and the loop runs at least
    /// its rows at the middle of the enclosing loops' ranges (the writer asks only for a loop
    /// it does not fork threads on).
    pub(super) fn take_reduction_rows(&mut self, for_loop: &Ast) -> Option<ReductionTileMark> {
        let mark = self.reduction_rows.remove(&(for_loop as *const Ast))?;
        let Ast::For { lower, upper, .. } = for_loop else {
            return None;
        };
        let (lo, hi) = self.bounds_at_midpoints(lower, upper);
        (hi - lo + 1 >= mark.rows).then_some(mark)
    }

    /// Marks the innermost loops of `jammed` to run one iteration at a time.
    pub(super) fn run_in_order(&mut self, jammed: &Ast) {
        jammed.walk(&mut |a| {
            if matches!(a, Ast::For { body, .. } if !body.contains_loop()) {
                self.in_order.insert(a as *const Ast);
            }
        });
    }

    /// Writes the rows loop `for_loop` of a reduction tile (see the module docs).
    pub(super) fn write_reduction_tile(
        &mut self,
        out: &mut String,
        for_loop: &Ast,
        mark: &ReductionTileMark,
        indent: usize,
        in_parallel: bool,
    ) {
        let Ast::For {
            var,
            lower,
            upper,
            body,
            ..
        } = for_loop
        else {
            return;
        };
        let (rows, tile) = (mark.rows, mark.tile);
        if tile <= rows || tile % rows != 0 {
            self.write_unrolled(out, for_loop, rows, true, indent, in_parallel);
            return;
        }
        let stride = tile / rows;
        let pad = "    ".repeat(indent);
        let lo = self.ast_expr(lower);
        let c = self.loop_var(var);
        let hi = self.ast_expr(upper);
        let (l, u) = self.bounds_at_midpoints(lower, upper);
        self.midpoints.push((var.clone(), l + (u - l).max(0) / 2));
        let jammed = jam_strided(body, var, rows, stride);
        self.run_in_order(&jammed);
        let _ = writeln!(out, "{pad}if (({hi}) - ({lo}) + 1 == {tile}) {{");
        let _ = writeln!(
            out,
            "{pad}    for (int64_t {c} = {lo}; {c} < {lo} + {stride}; {c} += 1) {{"
        );
        self.write_node(out, &jammed, indent + 2, in_parallel);
        let _ = writeln!(out, "{pad}    }}");
        let _ = writeln!(out, "{pad}}} else {{");
        let _ = writeln!(
            out,
            "{pad}    for (int64_t {c} = {lo}; {c} <= {hi}; {c} += 1) {{"
        );
        self.write_node(out, body, indent + 2, in_parallel);
        let _ = writeln!(out, "{pad}    }}");
        let _ = writeln!(out, "{pad}}}");
        self.midpoints.pop();
    }
}
