//! Accumulators in registers: an innermost sequential loop whose statements update an array
//! element that stays the same in every iteration (a reduction, `C[i][j] += A[i][k] * B[k][j]`
//! with `k` innermost) keeps that element in a local variable, read before the loop and
//! written back after it.
//!
//! The C compiler cannot do this by itself: the element lives in an array that, as far as it
//! knows, may overlap the arrays the loop reads, so it loads and stores the element in every
//! iteration and each addition waits for the previous store. The program's arrays never
//! overlap, so the local copy is exact.
//!
//! What holds: the loop runs no loop inside it and is written without OpenMP pragmas; its body
//! is statements only (no guards, which could leave the element unwritten by this loop while
//! another thread writes it); every access of the array in the loop names an element the loop
//! writes at subscripts that do not use the loop's variable, and the elements it names are
//! provably different (their subscripts differ by a non-zero constant in some dimension, as
//! the rows a reduction tile jams do), so each has a local of its own. A read whose element
//! moves with the loop's variable is allowed too where the loop's bounds keep it apart from
//! every element held: in some dimension its subscript minus the held one's is a non-zero
//! multiple of the variable plus terms that one of the bounds turns into a constant of the
//! sign that keeps the difference from zero over the whole loop (trisolv's
//! `x[i] -= L[i][j] * x[j]` for `j` up to `min(i - 1, …)`). The copies run only when the loop runs at
//! least one iteration, so a loop that runs none writes nothing.

use std::fmt::Write as _;

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::program::{ScalarType, StmtId};

use super::writer::{storage_type, Writer};
use crate::loops::Linear;

/// One element kept in a local variable: its text in C, the local's name and its type.
#[derive(Clone, Debug)]
pub(super) struct Accumulator {
    pub element: String,
    pub local: String,
    pub ty: &'static str,
}

impl Writer<'_> {
    /// The elements the innermost loop `for_loop` (C variable `c`) may keep in locals (see the
    /// module docs), in the order the body first writes them.
    pub(super) fn loop_accumulators(&mut self, for_loop: &Ast, c: &str) -> Vec<Accumulator> {
        let Ast::For {
            var,
            lower,
            upper,
            body,
            ..
        } = for_loop
        else {
            return Vec::new();
        };
        // The statements of the body, through nested blocks (a jammed body's).
        fn collect<'t>(ast: &'t Ast, out: &mut Vec<(StmtId, &'t Vec<AstExpr>)>) -> bool {
            match ast {
                Ast::Block(items) => items.iter().all(|i| collect(i, out)),
                Ast::User { stmt, args } => {
                    out.push((*stmt, args));
                    true
                }
                _ => false,
            }
        }
        let mut users = Vec::new();
        if !collect(body, &mut users) {
            return Vec::new();
        }
        let program = self.program;
        // Every access of the loop's statements: (array, element text, written, subscripts
        // as affine forms where they are).
        let mut accesses = Vec::new();
        for (stmt, args) in &users {
            let s = &program.statements[stmt.index()];
            let forms = |access: &polyhedral::program::Access| -> Option<Vec<Linear>> {
                access
                    .subscripts
                    .iter()
                    .map(|e| Linear::of(&AstExpr::from_subscript(&s.divs, e, &|d| args[d].clone())))
                    .collect()
            };
            for access in &s.reads {
                let element = self.element(&s.divs, access, args);
                accesses.push((access.array, element, false, forms(access)));
            }
            let element = self.element(&s.divs, &s.write, args);
            accesses.push((s.write.array, element, true, forms(&s.write)));
        }
        let mut found: Vec<Accumulator> = Vec::new();
        for (array, element, written, _) in &accesses {
            let a = program.array(*array);
            if !written
                || a.shape.is_empty()
                || a.elem == ScalarType::F16
                || mentions(element, c)
                || found.iter().any(|f| f.element == *element)
            {
                continue;
            }
            // The elements of the array the loop accesses at subscripts free of its variable:
            // each must be one the loop writes, and no two may be the same element. The
            // others must be reads the loop's bounds keep apart from all of them.
            let mut elements: Vec<(&String, &Option<Vec<Linear>>)> = Vec::new();
            let mut moving = Vec::new();
            for (_, e, w, forms) in accesses.iter().filter(|x| x.0 == *array) {
                if mentions(e, c) {
                    moving.push((*w, forms));
                } else if !elements.iter().any(|(x, _)| *x == e) {
                    elements.push((e, forms));
                }
            }
            let all_written = elements.iter().all(|(e, _)| {
                accesses
                    .iter()
                    .any(|(b, x, w, _)| b == array && *w && x == *e)
            }) && moving.iter().all(|(w, f)| {
                !w && elements.iter().all(|(_, g)| match (f, g) {
                    (Some(f), Some(g)) => apart_over(f, g, var, (lower, upper)),
                    _ => false,
                })
            });
            let apart = elements.iter().enumerate().all(|(i, (_, f))| {
                elements[i + 1..]
                    .iter()
                    .all(|(_, g)| matches!((f, g), (Some(f), Some(g)) if distinct(f, g)))
            });
            if !all_written || !apart {
                continue;
            }
            let local = self.scope.fresh(&format!("{}_acc", a.name));
            found.push(Accumulator {
                element: element.clone(),
                local,
                ty: storage_type(a.elem),
            });
        }
        found
    }

    /// Writes `for_loop` with `accumulators` held in locals: `lo` and `hi` are the C texts of
    /// its bounds. The loop itself is written by [`Writer::write_node`], which finds
    /// [`Writer::holding`] set and leaves the accumulators to this function.
    pub(super) fn write_with_accumulators(
        &mut self,
        out: &mut String,
        for_loop: &Ast,
        accumulators: Vec<Accumulator>,
        bounds: (&str, &str),
        indent: usize,
        in_parallel: bool,
    ) {
        let pad = "    ".repeat(indent);
        let (lo, hi) = bounds;
        let _ = writeln!(out, "{pad}if ({lo} <= {hi}) {{");
        for a in &accumulators {
            let _ = writeln!(out, "{pad}    {} {} = {};", a.ty, a.local, a.element);
        }
        let n = accumulators.len();
        self.accumulators.extend(accumulators);
        self.holding = true;
        self.write_node(out, for_loop, indent + 1, in_parallel);
        let held = self.accumulators.split_off(self.accumulators.len() - n);
        for a in &held {
            let _ = writeln!(out, "{pad}    {} = {};", a.element, a.local);
        }
        let _ = writeln!(out, "{pad}}}");
    }

    /// `text`, or the local that holds the element it names.
    pub(super) fn accumulated(&self, text: String) -> String {
        match self.accumulators.iter().rev().find(|a| a.element == text) {
            Some(a) => a.local.clone(),
            None => text,
        }
    }
}

/// Whether two subscript lists name different elements whatever the variables' values: in some
/// dimension they differ by a non-zero constant.
fn distinct(a: &[Linear], b: &[Linear]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .any(|(x, y)| x.vars == y.vars && x.params == y.params && x.constant != y.constant)
}

/// Whether the subscripts `moving`, which use the loop variable `var`, name an element other
/// than `held` (free of it) for every value of `var` from `bounds.0` to `bounds.1`: in some
/// dimension they differ by a non-zero constant, or by `a·var + r` where an argument of the
/// upper bound's `min` (the lower bound's `max`) turns the difference into a constant whose
/// sign keeps it from zero up to (down to) that bound.
fn apart_over(moving: &[Linear], held: &[Linear], var: &str, bounds: (&AstExpr, &AstExpr)) -> bool {
    if moving.len() != held.len() {
        return false;
    }
    let args = |e: &AstExpr, nested: fn(&AstExpr) -> Option<&Vec<AstExpr>>| -> Vec<Linear> {
        match nested(e) {
            Some(v) => v.iter().filter_map(Linear::of).collect(),
            None => Linear::of(e).into_iter().collect(),
        }
    };
    let lowers = args(bounds.0, |e| match e {
        AstExpr::Max(v) => Some(v),
        _ => None,
    });
    let uppers = args(bounds.1, |e| match e {
        AstExpr::Min(v) => Some(v),
        _ => None,
    });
    moving.iter().zip(held).any(|(m, h)| {
        let mut d = m.minus(h);
        let a = d.vars.remove(var).unwrap_or(0);
        if a == 0 {
            return d.vars.is_empty() && d.params.is_empty() && d.constant != 0;
        }
        // The difference with `var` at `value`, when that is a constant.
        let at = |value: &Linear| -> Option<i64> {
            let mut e = d.clone();
            for (v, k) in &value.vars {
                *e.vars.entry(v.clone()).or_default() += a * k;
            }
            for (p, k) in &value.params {
                *e.params.entry(*p).or_default() += a * k;
            }
            e.constant += a * value.constant;
            (e.vars.values().all(|&k| k == 0) && e.params.values().all(|&k| k == 0))
                .then_some(e.constant)
        };
        // Increasing in `var` (a > 0): below zero up to an upper bound, above it from a lower
        // bound; decreasing: the other way round.
        uppers.iter().filter_map(&at).any(|x| x * a.signum() < 0)
            || lowers.iter().filter_map(&at).any(|x| x * a.signum() > 0)
    })
}

/// Whether C text `text` uses the identifier `name`.
fn mentions(text: &str, name: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str) -> AstExpr {
        AstExpr::var(name)
    }

    fn lin(e: AstExpr) -> Linear {
        Linear::of(&e).unwrap()
    }

    #[test]
    fn a_read_the_bounds_keep_apart_from_the_held_element() {
        // x[c3] for c3 from 32 * c1 to min(c2 - 1, 32 * c1 + 31) never is x[c2].
        let lower = AstExpr::mul(32, v("c1"));
        let upper = AstExpr::Min(vec![
            AstExpr::plus(v("c2"), AstExpr::Int(-1)),
            AstExpr::plus(AstExpr::mul(32, v("c1")), AstExpr::Int(31)),
        ]);
        let held = [lin(v("c2"))];
        assert!(apart_over(&[lin(v("c3"))], &held, "c3", (&lower, &upper)));
        // Up to c2 itself it may be.
        let upper = AstExpr::plus(AstExpr::mul(32, v("c1")), AstExpr::Int(31));
        assert!(!apart_over(&[lin(v("c3"))], &held, "c3", (&lower, &upper)));
        // table[c4 + 1][c3] for c4 from n - c2 (a max's argument) is never table[n - c2 - 1][c3]:
        // the first subscripts differ by at least 2.
        let n = AstExpr::Param(polyhedral::program::ParamId(0));
        let lower = AstExpr::Max(vec![
            AstExpr::plus(n.clone(), AstExpr::mul(-1, v("c2"))),
            AstExpr::Int(0),
        ]);
        let upper = AstExpr::plus(v("c3"), AstExpr::Int(-1));
        let moving = [lin(AstExpr::plus(v("c4"), AstExpr::Int(1))), lin(v("c3"))];
        let held = [
            lin(AstExpr::plus(
                AstExpr::plus(n, AstExpr::mul(-1, v("c2"))),
                AstExpr::Int(-1),
            )),
            lin(v("c3")),
        ];
        assert!(apart_over(&moving, &held, "c4", (&lower, &upper)));
        // Decreasing in the variable: x[c2 - c3] for c3 from 1 is below x[c2].
        let moving = [lin(AstExpr::plus(v("c2"), AstExpr::mul(-1, v("c3"))))];
        let held = [lin(v("c2"))];
        let one = AstExpr::Int(1);
        assert!(apart_over(&moving, &held, "c3", (&one, &v("c2"))));
        let zero = AstExpr::Int(0);
        assert!(!apart_over(&moving, &held, "c3", (&zero, &v("c2"))));
    }
}
