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
//! the rows a reduction tile jams do), so each has a local of its own. The copies run only when the loop runs at
//! least one iteration, so a loop that runs none writes nothing.

use std::fmt::Write as _;

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::program::{ScalarType, StmtId};

use super::writer::{storage_type, Writer};
use crate::promote::Linear;

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
        let Ast::For { body, .. } = for_loop else {
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
                    .map(|e| Linear::of(&AstExpr::from_affine(e, &|d| args[d].clone())))
                    .collect()
            };
            for access in &s.reads {
                let element = self.element(access, args);
                accesses.push((access.array, element, false, forms(access)));
            }
            let element = self.element(&s.write, args);
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
            // The elements of the array the loop accesses: each must be one the loop writes
            // at subscripts free of its variable, and no two may be the same element.
            let mut elements: Vec<(&String, &Option<Vec<Linear>>)> = Vec::new();
            for (_, e, _, forms) in accesses.iter().filter(|x| x.0 == *array) {
                if !elements.iter().any(|(x, _)| *x == e) {
                    elements.push((e, forms));
                }
            }
            let all_written = elements.iter().all(|(e, _)| {
                !mentions(e, c)
                    && accesses
                        .iter()
                        .any(|(b, x, w, _)| b == array && *w && x == *e)
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

/// Whether C text `text` uses the identifier `name`.
fn mentions(text: &str, name: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == name)
}
