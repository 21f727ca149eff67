//! The Vector unit lowered from the schedule tree (the general lowering, even where a
//! dedicated one would take the kernel): statements that call the kernel's scalar functions
//! in their masked form (branches as selects and mask counts, data-dependent loops on the
//! count of their active lanes), and the rows of vector loops as the repeats of one
//! instruction (boxes walked by the row stepping by their row pitch, boxes the rows share by
//! nothing). Every kernel here is simulated with the race detector, bounds and alignment
//! checks on, and compared element by element with the interpreter.

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
fn checked(program: &Program) -> String {
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
    checked.asm
}

/// [`checked`], the function's branches run on the Vector unit.
fn on_the_vector_unit(program: &Program) -> String {
    let asm = checked(program);
    assert!(
        asm.contains("vsel.") && asm.contains("count "),
        "{}: the function's branches did not run on the Vector unit:\n{asm}",
        program.name
    );
    asm
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

/// Whether some vector instruction of `asm` reads an operand that every repeat shares.
fn shares_a_row(asm: &str) -> bool {
    asm.lines()
        .any(|l| l.contains("repeat=") && l.contains("rep=(") && l.contains(", 0)"))
}

#[test]
fn rows_of_an_element_wise_statement_are_repeats() {
    // 100 rows: a tile of 64 and one of 36, which run with different row counts; 150 columns:
    // two whole repeats and a partial one per row; the per-column gain shared by every row.
    let asm = checked(&inline(
        "scaled",
        "kernel scaled<N = 100, M = 150>(X: f32[N, M], g: f32[M]) -> (Y: f32[N, M]) {
             Y(i, j) = X(i, j) * g(j) + 1.0;
         }",
    ));
    assert!(
        shares_a_row(&asm),
        "the gain is not shared by the repeats:\n{asm}"
    );
}

#[test]
fn rows_of_a_function_call_are_repeats() {
    let asm = checked(&inline(
        "clamped",
        "fn clamp(v: f32, hi: f32) -> f32 {
             var r = v;
             if v > hi {
                 r = hi;
             }
             while r < 0.0 {
                 r = r + 1.0;
             }
             return r;
         }

         kernel clamped<N = 100, M = 150>(X: f32[N, M], h: f32[M]) -> (Y: f32[N, M]) {
             Y(i, j) = clamp(X(i, j) * 3.0, h(j));
         }",
    ));
    assert!(
        shares_a_row(&asm),
        "the bound is not shared by the repeats:\n{asm}"
    );
    assert!(
        asm.contains("vsel."),
        "the branch did not run on the Vector unit"
    );
}

#[test]
fn a_value_per_row_keeps_the_rows_apart() {
    // `m(i)` is computed once per row on the scalar unit: those rows run one by one.
    checked(&inline(
        "centred",
        "kernel centred<N = 70, M = 90>(X: f32[N, M], m: f32[N]) -> (Y: f32[N, M]) {
             Y(i, j) = X(i, j) - m(i);
         }",
    ));
}

#[test]
fn row_reductions_fold_every_row_at_once() {
    // Each repeat folds one row's columns onto that row's element: the destination steps by
    // one element per repeat (the default stride, which the text leaves out; a reduction
    // within one row chains its repeats with stride 0).
    let asm = checked(&inline(
        "weighted",
        "kernel weighted<N = 100, M = 150>(X: f32[N, M], w: f32[M]) -> (s: f32[N]) {
             s(i) +=! X(i, j) * w(j);
         }",
    ));
    assert!(
        asm.lines()
            .any(|l| l.contains("vcadd") && l.contains("repeat=") && !l.contains("rep=(0,")),
        "the rows are not folded as repeats:\n{asm}"
    );
}

#[test]
fn the_tiles_of_nested_parallel_loops_spread_over_the_cores_together() {
    // One tile of channels and a few of rows and of columns: the three tile loops together
    // give each of the 32 cores a tile (the first alone would use one core).
    let asm = checked(&inline(
        "bias_relu",
        "kernel bias_relu<CO = 16, H = 64, W = 64>(C: f32[CO, H, W], b: f32[CO])
             -> (O: f32[CO, H, W]) {
             O(co, y, x) = max(C(co, y, x) + b(co), 0.0);
         }",
    ));
    assert!(
        asm.starts_with("kernel bias_relu blockdim=32\n"),
        "not one tile per core:\n{}",
        asm.lines().next().unwrap_or("")
    );
}

#[test]
fn a_stencils_neighbours_run_on_the_lanes_from_a_box_per_phase() {
    // `I(y, x)`, `I(y, x + 1)` and `I(y, x + 2)` lie a fraction of a block apart: each gets
    // its own copy of the rows, starting on a block, so the sums run as vector additions
    // instead of one element at a time.
    for (name, text) in [
        (
            "blur",
            "kernel blur<H = 37, W = 70>(I: f32[H, W + 2]) -> (O: f32[H, W]) {
                 O(y, x) = (I(y, x) + I(y, x + 1) + I(y, x + 2)) / 3.0 where x in 0:W;
             }",
        ),
        (
            "five_point",
            "kernel five_point<N = 45>(A: f16[N + 2, N + 2]) -> (B: f16[N, N]) {
                 B(i, j) = A(i + 1, j + 1) - 0.25 * (A(i, j + 1) + A(i + 2, j + 1)
                     + A(i + 1, j) + A(i + 1, j + 2)) where i in 0:N, j in 0:N;
             }",
        ),
    ] {
        let asm = checked(&inline(name, text));
        let adds = asm
            .lines()
            .filter(|l| l.trim_start().starts_with("vadd."))
            .count();
        assert!(adds > 0, "{name}: no vector additions:\n{asm}");
        assert!(
            !asm.lines().any(|l| l.trim_start().starts_with("add f")),
            "{name}: an addition ran on the scalar unit:\n{asm}"
        );
    }
}

#[test]
fn the_report_counts_the_statement_instances_on_the_scalar_unit() {
    let options = Options {
        general: true,
        ..Options::default()
    };
    let count = |program: &Program| {
        let checked = npu::check(program, &NpuTarget::default(), &options, 3, false)
            .unwrap_or_else(|e| panic!("{}: {e}", program.name));
        assert!(checked.comparison.passed(), "{}", program.name);
        checked.report.scalar_instances
    };
    // A recurrence along each row's stride-one dimension: every one of its 6 × 19 instances
    // runs on the scalar unit.
    let scan = inline(
        "rowscan",
        "kernel rowscan<N = 6, M = 20>(a: f32[N, M]) -> (s: f32[N, M]) {
             for j in 1:M {
                 s(i, k) = s(i, k - 1) + a(i, k) where k in j:j + 1;
             }
         }",
    );
    assert_eq!(count(&scan), 114);
    // Element-wise work runs on the Vector unit: none.
    let bias_relu = inline(
        "bias_relu",
        "kernel bias_relu<CO = 16, H = 20, W = 70>(C: f32[CO, H, W], b: f32[CO])
             -> (O: f32[CO, H, W]) {
             O(co, y, x) = max(C(co, y, x) + b(co), 0.0);
         }",
    );
    assert_eq!(count(&bias_relu), 0);
}

#[test]
fn long_vector_loops_spread_over_the_cores_in_runs() {
    // The loops that start the row maxima and sums (300 iterations, vectorizable) give each
    // block a run of 128 of them on the Vector unit, not 10 instances on its scalar unit.
    let program = inline(
        "softmax_rows",
        "kernel softmax_rows<N = 300, M = 70>(X: f32[N, M]) -> (Y: f32[N, M]) {
             mx(i) max=! X(i, j);
             e(i, j) = exp(X(i, j) - mx(i));
             s(i) +=! e(i, j);
             Y(i, j) = e(i, j) / s(i);
         }",
    );
    let options = Options {
        general: true,
        ..Options::default()
    };
    let checked = npu::check(&program, &NpuTarget::default(), &options, 3, false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(checked.comparison.passed());
    assert_eq!(checked.report.scalar_instances, 0, "{}", checked.asm);
    assert!(
        checked.asm.contains("if block_idx < 3 {"),
        "{}",
        checked.asm
    );
}

#[test]
fn a_row_reduction_is_tiled_for_every_core_with_whole_rows() {
    // 256 rows of 512: tiles of 64 × 64 would give 4 tiles of rows for 32 cores; tiles of 8
    // rows give 32, and the rows are then taken whole (512 columns fit the scratchpads).
    let program = frontend::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/layernorm.pf"),
        &frontend::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let compiled = polyhedral::pipeline::compile(
        &program,
        &NpuTarget::default().description(false),
        &polyhedral::pipeline::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ast = compiled.ast.display(&compiled.program).to_string();
    assert!(ast.contains("c0 <= floord(N - 1, 8)"), "{ast}");
    assert!(ast.contains("c1 <= floord(D - 1, 512)"), "{ast}");
}

#[test]
fn a_sum_whose_terms_read_the_accumulator_stays_a_recurrence() {
    // Each term reads the sum so far, so the row's terms are not known before the fold: the
    // statement is a recurrence along j, not a sum of lanes.
    let asm = checked(&inline(
        "recurrence",
        "kernel recurrence<N = 40, M = 70>(C: i32[N, M]) -> (s: i32[N]) {
             s(i) +=! (1 - s(i)) * C(i, j);
         }",
    ));
    assert!(
        !asm.contains("vcadd"),
        "the recurrence was folded as a sum:\n{asm}"
    );
}

#[test]
fn post_tiling_fused_tiles_spread_over_the_cores_on_the_vector_unit() {
    // The producers fused into each tile of rows come with the extension's condition that the
    // row length is positive; at the kernel's sizes it holds, and the tile loop under it still
    // spreads over the cores, its statements on the Vector unit.
    let program = inline(
        "layernorm",
        "kernel layernorm<N = 256, D = 512>(X: f32[N, D], gamma: f32[D], beta: f32[D], eps: f32)
             -> (Y: f32[N, D]) {
             sum(i) +=! X(i, j);
             mu(i) = sum(i) / f32(D);
             sq(i) +=! (X(i, j) - mu(i)) * (X(i, j) - mu(i));
             rstd(i) = rsqrt(sq(i) / f32(D) + eps);
             Y(i, j) = (X(i, j) - mu(i)) * rstd(i) * gamma(j) + beta(j);
         }",
    );
    let mut options = Options {
        general: true,
        ..Options::default()
    };
    options.pipeline.post_tiling_fusion = true;
    let checked = npu::check(&program, &NpuTarget::default(), &options, 3, false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        checked.comparison.passed(),
        "{}",
        checked.comparison.to_text(&program)
    );
    assert!(
        checked.asm.starts_with("kernel layernorm blockdim=32\n"),
        "the fused tiles did not spread over the cores:\n{}",
        checked.asm.lines().next().unwrap_or("")
    );
    assert!(
        !checked.asm.contains("tally"),
        "statements ran on the scalar unit"
    );
}
