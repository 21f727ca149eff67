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
//! another thread writes it); every access of the array in the loop names the same element,
//! whose subscripts do not use the loop's variable. The copies run only when the loop runs at
//! least one iteration, so a loop that runs none writes nothing.

use std::fmt::Write as _;

use polyhedral::ast::Ast;
use polyhedral::program::ScalarType;

use super::writer::{storage_type, Writer};

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
        let items = match body.as_ref() {
            Ast::Block(items) => items.as_slice(),
            one => std::slice::from_ref(one),
        };
        let users: Option<Vec<_>> = items
            .iter()
            .map(|item| match item {
                Ast::User { stmt, args } => Some((*stmt, args)),
                _ => None,
            })
            .collect();
        let Some(users) = users else {
            return Vec::new();
        };
        let program = self.program;
        // Every access of the loop's statements: (array, element text, written).
        let mut accesses = Vec::new();
        for (stmt, args) in &users {
            let s = &program.statements[stmt.index()];
            for access in &s.reads {
                accesses.push((access.array, self.element(access, args), false));
            }
            accesses.push((s.write.array, self.element(&s.write, args), true));
        }
        let mut found: Vec<Accumulator> = Vec::new();
        for (array, element, written) in &accesses {
            let a = program.array(*array);
            if !written
                || a.shape.is_empty()
                || a.elem == ScalarType::F16
                || mentions(element, c)
                || found.iter().any(|f| f.element == *element)
            {
                continue;
            }
            if accesses.iter().any(|(b, e, _)| b == array && e != element) {
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

/// Whether C text `text` uses the identifier `name`.
fn mentions(text: &str, name: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == name)
}
