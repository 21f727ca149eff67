//! Register tiles from register-tile marks ([`RegisterTileMark`]): the band below the mark
//! becomes an outer product of `rows × cols` accumulators held across the loops between its
//! outermost and innermost members.
//!
//! The loops below the mark must be a chain `L { M1 { … Mk { V { statements } } } }` of as
//! many loops as the band has members: `L` steps by one (the rows), `V` is vectorizable and
//! steps by one (the columns), at least one loop `Mi` lies between them, the bounds of the
//! `Mi` do not use `L`, and those of `V` use neither `L` nor any `Mi`. The statements call no
//! scalar function, and every array they write (not a scalar) is accessed at one subscript
//! list only, which uses no `Mi`, uses `L` in exactly one dimension and `V` in exactly one
//! other, each with coefficient ±1: the elements one tile writes are exactly a `rows × cols`
//! box, and they stay the same while the `Mi` run.
//!
//! Written as: `L` by steps of `rows`; inside, `V` by blocks of `cols` (a new loop outside the
//! `Mi`: the band is permutable, so blocking `V` and moving the block loop outwards keeps every
//! dependence), each block copying its box of every written array into an aligned local
//! buffer (copies without bounds checks: the box is exactly the elements the block writes),
//! running the `Mi` around a loop over the block's `cols` columns with the `rows` rows jammed
//! into it, fully unrolled (`#pragma GCC unroll`) so that the C compiler holds the buffer in
//! vector registers across the `Mi` (it does not for an `omp simd` loop), and copying the
//! buffer back. Where the CPU model has vectors of the written element type and the
//! statements are arithmetic on contiguous and column-invariant operands, the block is
//! written in vector form instead ([`super::micro_vector`]): vector variables for the
//! buffer, so that the registers hold them whatever the C compiler's vectorizer decides.
//! The columns left over run
//! the `Mi` around the jammed rows once more, and the rows left over one at a time as before.
//! `L` carries no dependence (it is coincident), so jamming its iterations interleaves
//! instances that touch different elements; every element still sees its updates in the same
//! order of the `Mi`, so the results are bit-identical. The box is exactly the elements the
//! tile writes and the loop nest runs them in one thread, so no other thread touches them
//! between the copies.

use std::collections::BTreeSet;
use std::fmt::Write;

use polyhedral::ast::{Ast, AstExpr, LoopAnnotations};
use polyhedral::program::ArrayId;
use polyhedral::schedule::mark::PackMark;
use polyhedral::schedule::mark::RegisterTileMark;

use super::micro_vector::VectorTile;
use super::writer::{jam, Writer};
use crate::loops::{accesses, expr_vars, Linear};

/// The loops a register tile rewrites.
pub(super) struct Micro<'t> {
    /// The rows' loop; `None` for a tile of one row.
    rows: Option<&'t Ast>,
    /// The loops between the rows and the columns, outermost first.
    middle: Vec<&'t Ast>,
    cols: &'t Ast,
    written: ArrayId,
}

/// `ast` without the blocks of one item around it.
pub(super) fn single(ast: &Ast) -> &Ast {
    match ast {
        Ast::Block(items) if items.len() == 1 => single(&items[0]),
        other => other,
    }
}

pub(super) fn bound_vars(lower: &AstExpr, upper: &AstExpr) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    expr_vars(lower, &mut used);
    expr_vars(upper, &mut used);
    used
}

/// `chain` (the middle loops) around `inner`, with the middle loops sequential.
fn rebuild(chain: &[&Ast], inner: Ast) -> Ast {
    chain.iter().rev().fold(inner, |body, m| match m {
        Ast::For {
            var,
            lower,
            upper,
            step,
            annotations,
            ..
        } => Ast::For {
            var: var.clone(),
            lower: lower.clone(),
            upper: upper.clone(),
            step: *step,
            body: Box::new(body),
            annotations: LoopAnnotations {
                parallel: false,
                vectorizable: annotations.vectorizable,
            },
        },
        _ => body,
    })
}

impl Writer<'_> {
    /// The loops below a register-tile mark, when they have the shape the module docs
    /// describe and the rows would not be the kernel's parallel loop.
    pub(super) fn micro_kernel<'t>(
        &self,
        mark: &RegisterTileMark,
        body: &'t Ast,
        in_parallel: bool,
    ) -> Option<Micro<'t>> {
        let would_fork = |a: &Ast, ann: &LoopAnnotations| {
            self.options.openmp && ann.parallel && !in_parallel && self.worth_parallel(a)
        };
        let (rows, row_var, mut at) = if mark.rows == 1 {
            (None, None, single(body))
        } else {
            let rows = single(body);
            let Ast::For {
                var: row_var,
                step: 1,
                body: row_body,
                lower,
                upper,
                annotations,
            } = rows
            else {
                return None;
            };
            let (lo, hi) = self.bounds_at_midpoints(lower, upper);
            if hi - lo + 1 < mark.rows
                || self.tile_locals.contains_key(&(rows as *const Ast))
                || would_fork(rows, annotations)
            {
                return None;
            }
            (Some(rows), Some(row_var), single(row_body))
        };
        let rows_loops = usize::from(rows.is_some());
        let mut middle = Vec::new();
        let cols = loop {
            let Ast::For {
                lower,
                upper,
                body,
                annotations,
                step,
                ..
            } = at
            else {
                return None;
            };
            if self.tile_locals.contains_key(&(at as *const Ast)) || would_fork(at, annotations) {
                return None;
            }
            let used = bound_vars(lower, upper);
            if row_var.is_some_and(|r| used.contains(r)) {
                return None;
            }
            if !body.contains_loop() {
                let inner: BTreeSet<String> = middle
                    .iter()
                    .filter_map(|m: &&Ast| match m {
                        Ast::For { var, .. } => Some(var.clone()),
                        _ => None,
                    })
                    .collect();
                if *step != 1 || !annotations.vectorizable || used.iter().any(|u| inner.contains(u))
                {
                    return None;
                }
                break at;
            }
            middle.push(at);
            at = single(body);
        };
        if middle.is_empty() || middle.len() + 1 + rows_loops != mark.loops {
            return None;
        }
        let Ast::For {
            var: col_var,
            body: stmts,
            ..
        } = cols
        else {
            return None;
        };
        let plain = |i: &Ast| match i {
            Ast::User { stmt, .. } => !polyhedral::vectorize::calls_function(self.program, *stmt),
            _ => false,
        };
        let users = match &**stmts {
            Ast::Block(items) => items.iter().all(plain),
            other => plain(other),
        };
        if !users {
            return None;
        }
        let middle_vars: BTreeSet<String> = middle
            .iter()
            .filter_map(|m| match m {
                Ast::For { var, .. } => Some(var.clone()),
                _ => None,
            })
            .collect();
        let all = accesses(self.program, stmts);
        let mut written: Vec<ArrayId> = all.iter().filter(|a| a.2).map(|a| a.0).collect();
        written.sort();
        written.dedup();
        let [w] = written.as_slice() else {
            return None;
        };
        {
            let w = *w;
            if self.program.array(w).shape.is_empty() {
                return None;
            }
            let mut subs = all.iter().filter(|a| a.0 == w).map(|a| &a.1);
            let first = subs.next()?;
            if subs.any(|s| s != first) {
                return None;
            }
            let forms: Vec<Linear> = first.iter().map(Linear::of).collect::<Option<_>>()?;
            let uses = |v: &str| -> Vec<usize> {
                (0..forms.len())
                    .filter(|&d| forms[d].vars.contains_key(v))
                    .collect()
            };
            let c = uses(col_var);
            let unit = |d: usize, v: &str| forms[d].vars.get(v).is_some_and(|k| k.abs() == 1);
            let ok = match row_var {
                Some(row_var) => {
                    matches!((uses(row_var).as_slice(), c.as_slice()), ([r], [c]) if r != c
                        && unit(*r, row_var) && unit(*c, col_var))
                }
                None => matches!(c.as_slice(), [c] if unit(*c, col_var)),
            };
            if !ok
                || forms
                    .iter()
                    .any(|f| f.vars.keys().any(|v| middle_vars.contains(v)))
            {
                return None;
            }
        }
        Some(Micro {
            rows,
            middle,
            cols,
            written: written[0],
        })
    }

    /// Writes a register tile (see the module docs).
    pub(super) fn write_micro(
        &mut self,
        out: &mut String,
        mark: &RegisterTileMark,
        micro: Micro,
        indent: usize,
        in_parallel: bool,
    ) {
        let Micro {
            rows,
            middle,
            cols,
            written,
        } = micro;
        let Ast::For {
            var: col_var,
            lower: col_lo,
            upper: col_hi,
            body: stmts,
            annotations: col_ann,
            ..
        } = cols
        else {
            return;
        };
        let pad = "    ".repeat(indent);
        let (r, c) = (mark.rows, mark.cols);
        let row = match rows {
            Some(Ast::For {
                var,
                lower,
                upper,
                body,
                ..
            }) => Some((var, lower, upper, body)),
            Some(_) => return,
            None => None,
        };
        let row_var = row.map_or("", |(var, ..)| var.as_str());
        let block_var = format!("{col_var}_block");
        let jl = self.ast_expr(col_lo);
        let jb = self.loop_var(&block_var);
        let jh = self.ast_expr(col_hi);
        let col_loop = |lower: AstExpr, upper: AstExpr| Ast::For {
            var: col_var.clone(),
            lower,
            upper,
            step: 1,
            body: stmts.clone(),
            annotations: LoopAnnotations {
                parallel: false,
                vectorizable: col_ann.vectorizable,
            },
        };
        let block = AstExpr::var(&block_var);
        let jammed = |ast: Ast| {
            if row.is_some() {
                jam(&ast, row_var, r)
            } else {
                ast
            }
        };
        let tile = jammed(rebuild(
            &middle,
            col_loop(
                block.clone(),
                AstExpr::plus(block.clone(), AstExpr::Int(c - 1)),
            ),
        ));
        let rest = jammed(rebuild(&middle, col_loop(block, col_hi.clone())));
        let _ = writeln!(out, "{pad}{{");
        // The rows by steps of `r` around the column blocks (one row: the blocks alone).
        let mut inner = indent + 1;
        if let Some((var, lo, hi, _)) = row {
            let (l, u) = self.bounds_at_midpoints(lo, hi);
            self.midpoints.push((var.clone(), l + (u - l).max(0) / 2));
            let (i, lo, hi) = (self.loop_var(var), self.ast_expr(lo), self.ast_expr(hi));
            let _ = writeln!(out, "{pad}    int64_t {i} = {lo};");
            let _ = writeln!(
                out,
                "{pad}    for (; {i} <= {hi} - {}; {i} += {r}) {{",
                r - 1
            );
            inner += 1;
        }
        let (cl, cu) = self.bounds_at_midpoints(col_lo, col_hi);
        self.midpoints
            .push((block_var.clone(), cl + (cu - cl).max(0) / 2));
        let ipad = "    ".repeat(inner);
        let vector = VectorTile {
            rows: r,
            cols: c,
            row_var,
            col_var,
            first_col: jb.clone(),
            middle: &middle,
            stmts,
            written,
        };
        let plan = self.vector_plan(&vector);
        let hoisted = plan
            .as_ref()
            .and_then(|p| self.write_hoisted(out, &vector, p, inner));
        let _ = writeln!(out, "{ipad}int64_t {jb} = {jl};");
        let _ = writeln!(
            out,
            "{ipad}for (; {jb} <= {jh} - {}; {jb} += {c}) {{",
            c - 1
        );
        match &plan {
            Some(p) => self.write_vector_tile(out, &vector, p, hoisted.as_ref(), inner + 1),
            None => self.write_accumulated(out, written, &tile, inner + 1, in_parallel),
        }
        let _ = writeln!(out, "{ipad}}}");
        self.write_node(out, &rest, inner, in_parallel);
        self.midpoints.pop();
        if let Some((var, _, hi, body)) = row {
            let (i, hi) = (self.loop_var(var), self.ast_expr(hi));
            let _ = writeln!(out, "{pad}    }}");
            let _ = writeln!(out, "{pad}    for (; {i} <= {hi}; {i} += 1) {{");
            self.write_node(out, body, indent + 2, in_parallel);
            let _ = writeln!(out, "{pad}    }}");
            self.midpoints.pop();
        }
        let _ = writeln!(out, "{pad}}}");
    }

    /// `tile` with the array it writes held in a local buffer of its box around it.
    fn write_accumulated(
        &mut self,
        out: &mut String,
        array: ArrayId,
        tile: &Ast,
        indent: usize,
        in_parallel: bool,
    ) {
        let array = self.program.array(array);
        let mark = PackMark {
            array: array.name.clone(),
            layout: (0..array.shape.len()).collect(),
            owned: true,
            reason: String::new(),
        };
        match self.pack_box(&mark, tile, in_parallel, true) {
            Ok(mut packed) => {
                // The tile runs whole blocks of rows and columns of the written element
                // (see [`Writer::micro_kernel`]): its box is exactly the elements it writes.
                packed.inside = true;
                let outer = std::mem::replace(&mut self.in_register_tile, true);
                self.write_packed(out, packed, tile, indent, in_parallel);
                self.in_register_tile = outer;
            }
            Err(why) => {
                let pad = "    ".repeat(indent);
                let _ = writeln!(
                    out,
                    "{pad}/* {} not held in registers: {why} */",
                    mark.array
                );
                self.write_node(out, tile, indent, in_parallel);
            }
        }
    }
}
