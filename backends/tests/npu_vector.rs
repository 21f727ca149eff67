//! The accelerator's Vector unit alone: kernels without a contraction (row reductions,
//! element-wise statements, stencils over rows, sequential loops) compiled, run on the
//! simulator — which stops on any race, deadlock, misaligned or out-of-buffer operand — and
//! compared with the interpreter. Reductions keep the interpreter's order, so f32 kernels agree
//! exactly; f64 kernels computed in f32 agree within f32's tolerance.

mod common;

use backends::npu::{self, NpuCheck, NpuTarget, Options};
use polyhedral::Program;

/// A kernel from its text.
fn source(text: &str) -> Program {
    let file = frontend::SourceFile::new("test.pf", text);
    frontend::parse(
        &file,
        frontend::Language::Kernel,
        &frontend::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

fn machine_with(from: &str, to: &str) -> NpuTarget {
    let text = sim::DEFAULT_MACHINE.replace(from, to);
    assert_ne!(
        text,
        sim::DEFAULT_MACHINE,
        "`{from}` is in the machine file"
    );
    NpuTarget::new(sim::Machine::parse("test.machine", &text).expect("the machine parses"))
}

fn f32_options() -> Options {
    Options {
        f64_as_f32: true,
        ..Options::default()
    }
}

fn single(options: &Options) -> Options {
    Options {
        double_buffer: false,
        ..options.clone()
    }
}

/// Compiles, simulates and compares; panics with the reason on any failure.
fn run(program: &Program, target: &NpuTarget, options: &Options) -> NpuCheck {
    let checked = npu::check(program, target, options, 7, false)
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    assert!(
        checked.comparison.passed(),
        "{} differs from the interpreter:\n{}",
        program.name,
        checked.comparison.to_text(program)
    );
    checked
}

/// Every output equals the interpreter's bit for bit.
fn assert_exact(program: &Program, checked: &NpuCheck) {
    for a in &checked.comparison.arrays {
        assert_eq!(
            a.max_abs,
            0.0,
            "{}: `{}` is off by {}",
            program.name,
            program.array(a.array).name,
            a.max_abs
        );
    }
}

#[test]
fn softmax_layernorm_and_blur_agree_exactly_at_their_sizes() {
    for file in ["softmax.pf", "layernorm.pf", "blur_unsharp.pf"] {
        let program = common::kernel_file(file, &[]);
        let target = NpuTarget::default();
        let double = run(&program, &target, &Options::default());
        assert_exact(&program, &double);
        let once = run(&program, &target, &single(&Options::default()));
        assert_exact(&program, &once);
        assert!(double.report.cores_used > 1, "{}", program.name);
    }
}

#[test]
fn jacobi2d_runs_in_f32_with_a_barrier_between_its_stages() {
    let program = common::kernel_file("jacobi2d.pf", &[]);
    let checked = run(&program, &NpuTarget::default(), &f32_options());
    // Each time step is two stages separated (and followed) by sync_all.
    assert_eq!(checked.asm.matches("sync_all").count(), 2);
    assert!(checked.asm.contains("for t in 0..20"));
    run(&program, &NpuTarget::default(), &single(&f32_options()));
    // On one core the stages are ordered by a pipe barrier.
    let one = machine_with("cores = 32", "cores = 1");
    let checked = run(&program, &one, &f32_options());
    assert!(!checked.asm.contains("sync_all"));
    assert!(checked.asm.contains("pipe_barrier ALL"));
    // Without --npu-f32 the machine has no f64.
    let e = npu::compile(&program, &NpuTarget::default(), &Options::default()).unwrap_err();
    assert!(
        e.to_string().starts_with("not supported on npu: f64"),
        "{e}"
    );
}

#[test]
fn row_and_column_tails_stay_inside_the_arrays() {
    // Rows not a multiple of the tile, columns not a multiple of the 64-lane repeat nor of the
    // 8-element block, a single row and a single column.
    for (file, sizes) in [
        ("softmax.pf", vec![("N", 37), ("M", 100)]),
        ("softmax.pf", vec![("N", 1), ("M", 3)]),
        ("layernorm.pf", vec![("N", 300), ("D", 70)]),
        ("layernorm.pf", vec![("N", 5), ("D", 1)]),
        ("blur_unsharp.pf", vec![("H", 5), ("W", 7)]),
        ("blur_unsharp.pf", vec![("H", 300), ("W", 100)]),
    ] {
        let program = common::kernel_file(file, &sizes);
        for options in [Options::default(), single(&Options::default())] {
            let checked = run(&program, &NpuTarget::default(), &options);
            assert_exact(&program, &checked);
        }
    }
    for n in [3, 10, 45] {
        let program = common::kernel_file("jacobi2d.pf", &[("N", n), ("TSTEPS", 3)]);
        run(&program, &NpuTarget::default(), &f32_options());
    }
}

#[test]
fn temporaries_that_never_leave_a_tile_have_no_gm_tensor() {
    let softmax = npu::compile(
        &common::kernel_file("softmax.pf", &[]),
        &NpuTarget::default(),
        &Options::default(),
    )
    .expect("compiles");
    let params: Vec<&str> = softmax
        .lines()
        .filter(|l| l.starts_with("param "))
        .collect();
    assert_eq!(
        params,
        ["param X : f32[256, 512] in", "param Y : f32[256, 512] out"]
    );
    let blur = npu::compile(
        &common::kernel_file("blur_unsharp.pf", &[]),
        &NpuTarget::default(),
        &Options::default(),
    )
    .expect("compiles");
    assert!(
        !blur.contains("param Bx") && !blur.contains("param By"),
        "{blur}"
    );
    // The three statements are one stage: Bx's rows around each tile are computed with it.
    assert!(
        blur.contains("// stage 0: S0, S1, S2 over rows 0..256"),
        "{blur}"
    );
}

#[test]
fn a_temporary_read_at_a_column_shift_crosses_stages_through_gm() {
    let program = source(
        "kernel shift<H = 20, W = 30>(X: f32[H, W + 1]) -> (Y: f32[H, W]) {
    T(i, j) = X(i, j) * 2.0 where i in 0:H, j in 0:W + 1;
    Y(i, j) = T(i, j) + T(i, j + 1) where i in 0:H, j in 0:W;
}",
    );
    let checked = run(&program, &NpuTarget::default(), &Options::default());
    assert_exact(&program, &checked);
    assert!(checked.asm.contains("param T : f32[20, 31] out"));
    assert_eq!(checked.asm.matches("sync_all").count(), 1);
}

#[test]
fn per_row_inputs_and_outputs_scalars_and_their_arithmetic() {
    // A per-row input and output, a scalar on either side of - and /, min with a scalar,
    // negation and a scalar expression computed once.
    let program = source(
        "kernel rows<N = 45, M = 70>(X: f32[N, M], w: f32[N], s: f32) -> (Y: f32[N, M], m: f32[N]) {
    m(i) max=! X(i, j);
    Y(i, j) = s - X(i, j) * w(i) / s + min(m(i), s) - (-X(i, j)) / (s - 2.0);
}",
    );
    for options in [Options::default(), single(&Options::default())] {
        let checked = run(&program, &NpuTarget::default(), &options);
        assert_exact(&program, &checked);
    }
    // An in-place update of an in-out array, twice, with the Vector unit's functions.
    let program = source(
        "kernel inplace<N = 40, M = 33>() -> (A: f32[N, M]) {
    A(i, j) = A(i, j) * 3.0 + 1.0;
    A(i, j) = sqrt(abs(A(i, j))) + exp(A(i, j) * 0.001) - log(abs(A(i, j)) + 1.0);
}",
    );
    let checked = run(&program, &NpuTarget::default(), &Options::default());
    assert_exact(&program, &checked);
}

#[test]
fn selects_on_comparisons_take_a_mask() {
    // Tiles, per-row and per-column values and scalars on either side of the comparison and
    // in the branches; a select of per-row values alone.
    let program = source(
        "kernel sel<N = 37, M = 100>(X: f32[N, M], b: f32[M], s: f32) -> (Y: f32[N, M], Z: f32[N, M]) {
    m(i) max=! X(i, j);
    Y(i, j) = X(i, j) > 0.0 ? X(i, j) : 0.1 * X(i, j);
    Z(i, j) = select(X(i, j) >= m(i) * 0.5, b(j), s - X(i, j)) + (b(j) < s ? 1.0 : 2.0);
}",
    );
    for options in [Options::default(), single(&Options::default())] {
        let checked = run(&program, &NpuTarget::default(), &options);
        assert_exact(&program, &checked);
        assert!(checked.asm.contains("vcmp.gt.f32") && checked.asm.contains("vsel.f32"));
    }
    let program = source(
        "kernel selrow<N = 300>(x: f32[N], s: f32) -> (y: f32[N]) {
    y(i) = x(i) != s ? x(i) * 2.0 : s;
}",
    );
    let checked = run(&program, &NpuTarget::default(), &Options::default());
    assert_exact(&program, &checked);
}

#[test]
fn tiles_shrink_to_fit_a_smaller_unified_buffer() {
    let target = machine_with("mem.UB.capacity = 262144", "mem.UB.capacity = 32768");
    let program = common::kernel_file("softmax.pf", &[("N", 64), ("M", 512)]);
    let checked = run(&program, &target, &Options::default());
    let ub = checked
        .report
        .memories
        .iter()
        .find(|m| m.memory == "UB")
        .expect("UB is reported");
    assert!(ub.peak <= 32768, "{ub:?}");
    // Rows longer than the smaller buffer holds go to the general lowering, whose regions are
    // the middle end's tiles.
    let program = common::kernel_file("softmax.pf", &[("N", 4), ("M", 8192)]);
    let checked = run(&program, &target, &Options::default());
    assert!(!checked.asm.contains("vbrcb"), "{}", checked.asm);
}

#[test]
fn double_buffering_overlaps_copies_with_the_vector_unit() {
    // Several tiles per core: the next tile's rows arrive while the Vector unit works.
    let target = machine_with("cores = 32", "cores = 2");
    let program = common::kernel_file("layernorm.pf", &[("N", 64)]);
    let double = run(&program, &target, &Options::default());
    let once = run(&program, &target, &single(&Options::default()));
    assert!(
        double.report.cycles < once.report.cycles,
        "double {} vs single {}",
        double.report.cycles,
        once.report.cycles
    );
}

#[test]
fn transposed_tiles_are_gathered_by_columns_and_agree_exactly() {
    // A transpose, a sum along the columns of a matrix (a row reduction of its transposed
    // tile) and a transposed read next to a direct one, at sizes that leave partial groups of
    // 8 rows, column tails and several column chunks of a repeat.
    let text = "kernel tr<N = 8, M = 9>(X: f32[N, M], Z: f32[M, N]) -> (Y: f32[M, N], s: f32[M]) {
    Y(i, j) = X(j, i) * 2.0 + Z(i, j);
    s(j) +=! X(i, j);
}";
    for (n, m) in [(8, 9), (1, 5), (37, 300), (300, 21)] {
        let mut program = source(text);
        for p in &mut program.params {
            p.value = if p.name == "N" { n } else { m };
        }
        for options in [Options::default(), single(&Options::default())] {
            let checked = run(&program, &NpuTarget::default(), &options);
            assert_exact(&program, &checked);
            assert!(checked.asm.contains("dst_stride=32"), "{}", checked.asm);
        }
    }
    // gemver: `x(i) += beta * A(j, i) * y(j)` reads A transposed after A's update.
    for n in [13, 70] {
        let program = common::kernel_file("gemver.c", &[("N", n)]);
        for options in [
            f32_options(),
            single(&f32_options()),
            Options {
                fuse: false,
                ..f32_options()
            },
        ] {
            run(&program, &NpuTarget::default(), &options);
        }
    }
}

/// Kernels the Vector unit's own lowering does not take (a diagonal, a recurrence, a triangle,
/// f16 arrays, a select on two comparisons) run through the general lowering and match.
#[test]
fn kernels_outside_the_vector_lowering_run_through_the_general_one() {
    for (text, why) in [
        (
            "kernel t<N = 8>(X: f32[N, N]) -> (Y: f32[N]) { Y(i) = X(i, i); }",
            "it reads X[i, i]",
        ),
        (
            "kernel r<N = 8>(X: f32[N]) -> (Y: f32[N]) {
    Y(i) = X(i) where i in 0:N;
    Y(i) = Y(i - 1) + X(i) where i in 1:N;
}",
            "a recurrence along its own loops",
        ),
        (
            "kernel c<N = 8>(X: f32[N, N]) -> (s: f32[N]) { s(i) +=! X(i + j, j) where j in 0:N - i; }",
            "is not a box",
        ),
        (
            "kernel h<N = 8>(X: f16[N, N]) -> (Y: f16[N, N]) { Y(i, j) = X(i, j); }",
            "f16 arrays on the Vector unit alone",
        ),
        (
            "kernel l<N = 8>(X: f32[N, N]) -> (Y: f32[N, N]) {
    Y(i, j) = X(i, j) > 0.0 && X(i, j) < 1.0 ? X(i, j) : 0.0;
}",
            "a select on a condition other than one comparison",
        ),
    ] {
        let program = source(text);
        let e = npu::compile(&program, &NpuTarget::default(), &single(&Options::default()));
        assert!(e.is_ok(), "{why}: {e:?}");
        run(&program, &NpuTarget::default(), &Options::default());
    }
}
