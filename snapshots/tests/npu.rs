//! The accelerator target end to end: every kernel in `kernels/` that it takes is compiled to
//! `.npuasm` (snapshotted), run on the simulator — which stops on any race, deadlock,
//! out-of-buffer or misaligned operand and capacity overflow — and compared with the
//! interpreter; the others are refused with a one-line reason. Then row tails, a machine whose
//! L0A is too small for the natural tile, two cores, and double buffering against single.

use std::path::Path;

use backends::npu::{self, NpuTarget, Options};
use polyhedral::Program;
use snapshots::{kernels, snapshot_name};

/// A kernel with every size cut to at most 64 (the Cube's dimensions stay multiples of 16).
fn load_medium(path: &Path) -> Program {
    let mut program = snapshots::load(path);
    for p in &mut program.params {
        p.value = p.value.min(64);
    }
    program
}

fn with_sizes(path: &str, sizes: &[(&str, i64)]) -> Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kernels")
        .join(path);
    let mut program = snapshots::load(&path);
    for (name, value) in sizes {
        let p = program
            .params
            .iter_mut()
            .find(|p| p.name == *name)
            .unwrap_or_else(|| panic!("no size {name}"));
        p.value = *value;
    }
    program
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

/// Compiles, simulates and compares; panics with the reason on any failure.
fn run(program: &Program, target: &NpuTarget, options: &Options) -> npu::NpuCheck {
    let checked = npu::check(program, target, options, 1, false)
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    assert!(
        checked.comparison.passed(),
        "{} differs from the interpreter:\n{}",
        program.name,
        checked.comparison.to_text(program)
    );
    checked
}

/// Every kernel of `kernels/` runs on the accelerator and matches the interpreter: f32 and
/// f16 kernels as they are, f64 kernels computed in f32; only f64 itself is refused.
#[test]
fn every_kernel_runs_like_the_interpreter() {
    for path in kernels() {
        let program = load_medium(&path);
        let options = Options::default();
        if let Err(e) = npu::supported(&program, &options) {
            let message = e.to_string();
            assert!(
                message.starts_with("not supported on npu: f64") && !message.contains('\n'),
                "{}: {message}",
                path.display()
            );
        }
        let options = Options {
            f64_as_f32: true,
            ..Options::default()
        };
        npu::supported(&program, &options).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let checked = run(&program, &NpuTarget::default(), &options);
        insta::assert_snapshot!(format!("npu_{}", snapshot_name(&path)), checked.asm);
    }
}

#[test]
fn f64_kernels_run_in_f32_on_the_vector_unit() {
    // gemver reads `A` transposed, gathered by columns into UB.
    let options = Options {
        f64_as_f32: true,
        ..Options::default()
    };
    for file in ["jacobi2d.pf", "jacobi-2d.c", "gemver.c"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../kernels")
            .join(file);
        let program = load_medium(&path);
        let checked = run(&program, &NpuTarget::default(), &options);
        insta::assert_snapshot!(format!("npu_f32_{}", snapshot_name(&path)), checked.asm);
    }
}

#[test]
fn f64_contractions_over_a_triangle_in_place_or_privatized_run_in_f32_on_the_cube() {
    let options = Options {
        f64_as_f32: true,
        ..Options::default()
    };
    for file in ["syrk.c", "trmm.pf", "doitgen.c"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../kernels")
            .join(file);
        let program = load_medium(&path);
        let checked = run(&program, &NpuTarget::default(), &options);
        insta::assert_snapshot!(format!("npu_f32_{}", snapshot_name(&path)), checked.asm);
    }
}

#[test]
fn row_tails_are_padded_on_chip_and_never_leave_the_arrays() {
    // One short panel, and several panels of which the last is short.
    for (m, n, k) in [(40, 48, 32), (200, 64, 48), (17, 16, 16)] {
        let program = with_sizes("gemm_f16.pf", &[("M", m), ("N", n), ("K", k)]);
        run(&program, &NpuTarget::default(), &Options::default());
    }
    let program = with_sizes("gemm_bias_relu.pf", &[("M", 72), ("N", 64), ("K", 48)]);
    run(&program, &NpuTarget::default(), &Options::default());
}

#[test]
fn a_tile_that_would_overflow_l0a_shrinks_instead_of_failing() {
    let target = machine_with("mem.L0A.capacity = 65536", "mem.L0A.capacity = 4096");
    let program = with_sizes("gemm_f16.pf", &[("M", 128), ("N", 128), ("K", 128)]);
    let checked = run(&program, &target, &Options::default());
    let l0a = checked
        .report
        .memories
        .iter()
        .find(|m| m.memory == "L0A")
        .expect("L0A is reported");
    assert!(l0a.peak <= 4096, "{l0a:?}");
}

#[test]
fn two_cores_share_the_blocks() {
    let target = machine_with("cores = 32", "cores = 2");
    let program = with_sizes("gemm_f16.pf", &[("M", 128), ("N", 128), ("K", 64)]);
    let checked = run(&program, &target, &Options::default());
    assert_eq!(checked.report.cores_used, 2);
    assert!(checked.report.blocks >= 2);
}

#[test]
fn double_buffering_lowers_the_cycles_of_a_matrix_product() {
    let program = with_sizes("gemm_f16.pf", &[("M", 128), ("N", 128), ("K", 256)]);
    let target = NpuTarget::default();
    let double = run(&program, &target, &Options::default());
    let single = run(
        &program,
        &target,
        &Options {
            double_buffer: false,
            ..Options::default()
        },
    );
    assert!(
        double.report.cycles < single.report.cycles,
        "double {} vs single {}",
        double.report.cycles,
        single.report.cycles
    );
}

#[test]
fn arithmetic_the_machine_lacks_is_refused() {
    let gemm = with_sizes("gemm.pf", &[]);
    let e = npu::compile(&gemm, &NpuTarget::default(), &Options::default()).expect_err("f64");
    assert!(
        e.to_string().starts_with("not supported on npu: f64"),
        "{e}"
    );
    // i32 arithmetic outside a vectorised scalar function runs on the scalar unit.
    let file = frontend::SourceFile::new(
        "inc.pf",
        "kernel inc<N = 64>(a: i32[N]) -> (b: i32[N]) {\n    b(i) = a(i) + 1;\n}\n",
    );
    let inc = frontend::parse(
        &file,
        frontend::Language::Kernel,
        &frontend::Options::default(),
    )
    .expect("it parses");
    let checked = run(&inc, &NpuTarget::default(), &Options::default());
    assert!(checked.asm.contains("ld.i32"), "{}", checked.asm);
}

#[test]
fn element_wise_statements_after_the_product_run_on_the_vector_unit() {
    // Subtraction and division by scalars, min, exp, a per-column vector minus the tile,
    // negation, and a second live-out array computed from the first.
    let text = "kernel epi<M = 48, N = 32, K = 32>(A: f16[M, K], B: f16[K, N], v: f32[N], s: f32)
    -> (C: f32[M, N], D: f32[M, N]) {
    T(i, j) +=! A(i, k) * B(k, j);
    C(i, j) = exp(min(T(i, j) - s, 1.0)) / s + (v(j) - T(i, j));
    D(i, j) = -C(i, j) * 2.0 - s / C(i, j);
}
";
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("epi.pf");
    std::fs::write(&path, text).expect("the kernel is written");
    let program = snapshots::load(&path);
    run(&program, &NpuTarget::default(), &Options::default());
    run(
        &program,
        &NpuTarget::default(),
        &Options {
            double_buffer: false,
            ..Options::default()
        },
    );
}

/// The tree the accelerator's general lowering works from: each contraction that the Cube
/// can run is retiled in fractal multiples under a matrix mark, its k tiles below it.
#[test]
fn the_tree_marks_contractions_for_the_cube() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/ml/attention.pf");
    let program = snapshots::load(&path);
    let description = NpuTarget::default().description(false);
    let c = polyhedral::pipeline::compile(&program, &description, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let tree = c.tree.display(&c.program).to_string();
    assert!(tree.contains("mark: \"matrix 16x16x16"), "{tree}");
    insta::assert_snapshot!("npu_tree_attention", tree);
}

/// Every kernel of `kernels/` lowered from the middle end's tree (the general lowering, even
/// where a dedicated one would take it) runs on the accelerator and matches the interpreter.
#[test]
fn every_kernel_runs_from_the_tree_like_the_interpreter() {
    let options = Options {
        f64_as_f32: true,
        general: true,
        ..Options::default()
    };
    for path in kernels() {
        let program = load_medium(&path);
        run(&program, &NpuTarget::default(), &options);
    }
}
