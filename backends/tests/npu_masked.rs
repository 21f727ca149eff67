//! Statements that call the kernel's scalar functions, lowered from the schedule tree: their
//! masked form runs on the Vector unit (branches as selects and mask counts, data-dependent
//! loops as loops on the count of their active lanes). Every kernel here is lowered that way,
//! simulated with the race detector, bounds and alignment checks on, and compared element by
//! element with the interpreter.

use backends::npu::{self, NpuTarget, Options};
use polyhedral::Program;

/// A kernel written here, loaded at its default sizes.
fn inline(name: &str, text: &str) -> Program {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join(format!("{name}.pf"));
    std::fs::write(&path, text).expect("the kernel is written");
    frontend::load(&path, &frontend::Options::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// Lowers `program` from the tree, simulates it and compares; returns the program text.
fn on_the_vector_unit(program: &Program) -> String {
    let options = Options {
        general: true,
        ..Options::default()
    };
    let checked = npu::check(program, &NpuTarget::default(), &options, 3, false)
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    assert!(
        checked.comparison.passed(),
        "{} differs from the interpreter:\n{}",
        program.name,
        checked.comparison.to_text(program)
    );
    assert!(
        checked.asm.contains("vsel.") && checked.asm.contains("count "),
        "{}: the function's branches did not run on the Vector unit:\n{}",
        program.name,
        checked.asm
    );
    checked.asm
}

#[test]
fn a_data_dependent_loop_and_branches_run_on_the_lanes() {
    // Rows of 150 elements: two whole repeats and a partial one per row, whose lanes past the
    // row must not keep the loop running; a per-column limit broadcast along the rows.
    on_the_vector_unit(&inline(
        "halvings",
        "fn halvings(x: f32, limit: f32) -> f32 {
             var v = x;
             var n = 0.0;
             while v > 1.0 && n < limit {
                 v = v * 0.5;
                 n = n + 1.0;
             }
             if n > 3.0 {
                 return n + v;
             }
             return v - n;
         }

         kernel halvings<N = 37, M = 150>(X: f32[N, M], L: f32[M]) -> (Y: f32[N, M]) {
             Y(i, j) = halvings(X(i, j) * 8.0, L(j));
         }",
    ));
}

#[test]
fn integer_functions_run_on_the_lanes() {
    on_the_vector_unit(&inline(
        "parity",
        "fn parity(n: i32, k: i32) -> i32 {
             var m = n;
             var s = 0;
             while m > 0 && s < k {
                 if m % 2 == 1 {
                     s = s + 1;
                 }
                 m = m / 2;
             }
             return s;
         }

         kernel parity<N = 20, M = 70>(A: i32[N, M], k: i32) -> (B: i32[N, M]) {
             B(i, j) = parity(A(i, j), k);
         }",
    ));
}
