//! The accelerator's Cube lowering against the interpreter: f32 contractions and chains of
//! them, sizes off the 16-element fractal grid, several row, column and reduction iterators,
//! batched products and convolutions through im2col. Every run is simulated with the race
//! detector, bounds and alignment checks on, and compared element by element.

use std::path::{Path, PathBuf};

use backends::npu::{self, NpuTarget, Options};
use polyhedral::Program;

/// Size overrides by name.
type Sizes = &'static [(&'static str, i64)];

fn kernel(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kernels")
        .join(file)
}

fn load(path: &Path, sizes: &[(&str, i64)]) -> Program {
    let options = frontend::Options {
        sizes: sizes.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        ..frontend::Options::default()
    };
    frontend::load(path, &options).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// A kernel written here, loaded at its default sizes.
fn inline(name: &str, text: &str) -> Program {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join(format!("{name}.pf"));
    std::fs::write(&path, text).expect("the kernel is written");
    load(&path, &[])
}

fn f32_options(double_buffer: bool) -> Options {
    Options {
        double_buffer,
        f64_as_f32: true,
        ..Options::default()
    }
}

/// Compiles, simulates and compares, double- and single-buffered; returns the double-buffered
/// program. Panics with the reason on any failure.
fn runs_like_the_interpreter(program: &Program, target: &NpuTarget, options: &Options) -> String {
    let mut asm = String::new();
    for double_buffer in [true, false] {
        let options = Options {
            double_buffer,
            ..options.clone()
        };
        let checked = npu::check(program, target, &options, 3, false)
            .unwrap_or_else(|e| panic!("{}: {e}", program.name));
        assert!(
            checked.comparison.passed(),
            "{} ({}) differs from the interpreter:\n{}\n{}",
            program.name,
            if double_buffer { "double" } else { "single" },
            checked.comparison.to_text(program),
            checked.asm
        );
        if double_buffer {
            asm = checked.asm;
        }
    }
    asm
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

#[test]
fn f32_contractions_compute_on_the_cube_in_f32() {
    let target = NpuTarget::default();
    let gemm = load(&kernel("gemm.pf"), &[]);
    let asm = runs_like_the_interpreter(&gemm, &target, &f32_options(true));
    assert!(asm.contains("src_f32"), "f32 operands on the Cube:\n{asm}");
    // C *= beta is the accumulator's start, copied into L0C; alpha scales A on its way in.
    assert!(asm.contains("copy_ub_to_cc"), "{asm}");
    assert!(asm.contains("vmuls.f32 ub_v"), "{asm}");
    // While the scaled A is on its way into L1, B streams into a ring of L1 slots (`s29`),
    // one per step of the block here, round the ring when the block has more steps.
    assert!(asm.contains("l1_b[s29*"), "{asm}");
    let longer = load(&kernel("gemm.pf"), &[("NI", 64), ("NJ", 128), ("NK", 400)]);
    let asm = runs_like_the_interpreter(&longer, &target, &f32_options(true));
    assert!(asm.contains("if s29 == 8"), "{asm}");
    // Without --npu-f32 the f64 kernel is refused.
    let e = npu::compile(&gemm, &target, &Options::default()).expect_err("f64");
    assert!(
        e.to_string().starts_with("not supported on npu: f64"),
        "{e}"
    );
}

#[test]
fn chained_products_keep_their_temporaries_on_chip_or_in_gm_between_kernels() {
    let target = NpuTarget::default();
    for (file, temps) in [("2mm.pf", &["tmp"][..]), ("3mm.pf", &["E", "F"][..])] {
        let program = load(&kernel(file), &[]);
        // On chip: every block computes the part of the intermediates it reads into L1.
        let options = Options {
            launches: Some(false),
            ..f32_options(true)
        };
        let asm = runs_like_the_interpreter(&program, &target, &options);
        for t in temps {
            assert!(
                !asm.contains(&format!("param {t} ")),
                "{file}: `{t}` has a GM tensor:\n{asm}"
            );
        }
        assert!(asm.contains("buffer l1_p0 : L1"), "{asm}");
        // One kernel per stage, the intermediates in GM between them.
        let options = Options {
            launches: Some(true),
            ..f32_options(true)
        };
        let asm = runs_like_the_interpreter(&program, &target, &options);
        assert_eq!(
            asm.matches("\nkernel ").count(),
            temps.len() + 1,
            "{file}: one kernel per stage:\n{asm}"
        );
        for t in temps {
            assert!(
                asm.contains(&format!("param {t} ")),
                "{file}: `{t}`:\n{asm}"
            );
        }
        // The default takes the one estimated faster.
        runs_like_the_interpreter(&program, &target, &f32_options(true));
    }
}

#[test]
fn polybench_c_files_run_with_their_live_out_intermediates() {
    // C files declare every array, so 2mm's `tmp` and 3mm's `E` and `F` are live-out: the
    // blocks of one column group (row panel) write them; gemm's loops run i, k, j.
    let target = NpuTarget::default();
    for (file, temps) in [
        ("gemm.c", &[][..]),
        ("2mm.c", &["tmp"][..]),
        ("3mm.c", &["E", "F"][..]),
    ] {
        for dataset in ["MINI_DATASET", "SMALL_DATASET"] {
            let options = frontend::Options {
                defines: vec![(dataset.to_string(), None)],
                ..frontend::Options::default()
            };
            let program = frontend::load(&kernel(file), &options)
                .unwrap_or_else(|e| panic!("{}", e.render(false)));
            let asm = runs_like_the_interpreter(&program, &target, &f32_options(true));
            for t in temps {
                assert!(
                    asm.contains(&format!("param {t} ")),
                    "{file}: `{t}`:\n{asm}"
                );
            }
        }
    }
}

#[test]
fn sizes_off_the_fractal_grid_are_padded_on_chip() {
    let target = NpuTarget::default();
    let cases: &[(&str, Sizes, bool)] = &[
        ("gemm_f16.pf", &[("M", 33), ("N", 47), ("K", 100)], false),
        ("gemm_f16.pf", &[("M", 5), ("N", 3), ("K", 7)], false),
        ("gemm_f16.pf", &[("M", 300), ("N", 270), ("K", 333)], false),
        (
            "gemm_bias_relu.pf",
            &[("M", 45), ("N", 70), ("K", 33)],
            false,
        ),
        ("gemm.pf", &[("NI", 37), ("NJ", 29), ("NK", 51)], true),
        ("gemm.pf", &[("NI", 150), ("NJ", 171), ("NK", 19)], true),
        (
            "2mm.pf",
            &[("NI", 37), ("NJ", 29), ("NK", 51), ("NL", 23)],
            true,
        ),
        (
            "3mm.pf",
            &[("NI", 37), ("NJ", 29), ("NK", 51), ("NL", 23), ("NM", 19)],
            true,
        ),
        (
            "3mm.pf",
            &[("NI", 70), ("NJ", 9), ("NK", 40), ("NL", 90), ("NM", 33)],
            true,
        ),
    ];
    for (file, sizes, f32) in cases {
        let program = load(&kernel(file), sizes);
        let options = if *f32 {
            f32_options(true)
        } else {
            Options::default()
        };
        let asm = runs_like_the_interpreter(&program, &target, &options);
        assert!(
            asm.contains("copy_pad"),
            "{file} {sizes:?}: rows off the block grid go through copy_pad"
        );
    }
}

#[test]
fn iterators_that_do_not_fold_are_loops_around_the_cube() {
    let target = NpuTarget::default();
    // C(i, j) += A(k, l, i) * B(l, k, j): l is the Cube's reduction, k a loop around it (the
    // two do not run contiguously through B in the interpreter's order); A is transposed.
    for sizes in [&[][..], &[("I", 37), ("J", 29), ("K", 3), ("L", 21)][..]] {
        let program = load(&kernel("contract3d.pf"), sizes);
        let asm = runs_like_the_interpreter(&program, &target, &Options::default());
        assert!(asm.contains("for ko0 in 0.."), "{asm}");
        assert!(asm.contains(", transpose, f32"), "{asm}");
    }
    // Batched products: the batch iterator is a loop spread over the blocks.
    let bmm = inline(
        "bmm",
        "kernel bmm<BA = 6, M = 40, N = 24, K = 36>(A: f32[BA, M, K], B: f32[BA, N, K], bias: f32[N])
    -> (C: f32[BA, M, N]) {
    T(b, i, j) +=! A(b, i, k) * B(b, j, k);
    C(b, i, j) = max(T(b, i, j) + bias(j), 0.0);
}
",
    );
    let asm = runs_like_the_interpreter(&bmm, &target, &Options::default());
    assert!(
        asm.contains("s9"),
        "the batch iterator in a register:\n{asm}"
    );
    // Two row iterators that fold into one Cube dimension, f16 operands, a transposed A.
    let fold = inline(
        "fold",
        "kernel fold<P = 3, Q = 11, N = 20, K = 33>(A: f16[K, P, Q], B: f16[K, N]) -> (C: f32[P, Q, N]) {
    C(p, q, j) +=! A(k, p, q) * B(k, j);
}
",
    );
    let asm = runs_like_the_interpreter(&fold, &target, &Options::default());
    assert!(!asm.contains("s9"), "p and q fold into 33 rows:\n{asm}");
    // A scaled operand read transposed.
    let scaled = inline(
        "scaled",
        "kernel scaled<M = 50, N = 45, K = 60>(A: f32[K, M], B: f32[N, K], s: f32) -> (C: f32[M, N]) {
    C(i, j) +=! A(k, i) * (s * B(j, k));
}
",
    );
    runs_like_the_interpreter(&scaled, &target, &Options::default());
}

#[test]
fn convolutions_build_their_im2col_rows_on_chip() {
    let target = NpuTarget::default();
    let cases: &[(&str, Sizes)] = &[
        ("conv2d_relu.pf", &[("H", 8)]),
        ("conv2d_bn_relu.pf", &[("H", 6), ("W", 56)]),
        (
            "conv2d_relu.pf",
            &[("CI", 3), ("CO", 5), ("H", 7), ("W", 13)],
        ),
        (
            "conv2d_bn_relu.pf",
            &[
                ("CI", 3),
                ("CO", 20),
                ("H", 5),
                ("W", 30),
                ("KH", 5),
                ("KW", 2),
            ],
        ),
    ];
    for (file, sizes) in cases {
        let program = load(&kernel(file), sizes);
        let asm = runs_like_the_interpreter(&program, &target, &Options::default());
        assert!(
            asm.contains("load3d l0b"),
            "{file}: im2col rows built by load3d:\n{asm}"
        );
    }
    // f16 operands: channel rows in L1 padded to whole blocks of 16 elements.
    let convh = inline(
        "convh",
        "kernel convh<CI = 5, CO = 24, H = 3, W = 37, KH = 3, KW = 2>(I: f16[CI, H + KH - 1, W + KW - 1],
    Wt: f16[CO, CI, KH, KW], b: f32[CO]) -> (O: f32[CO, H, W]) {
    Conv(co, y, x) +=! I(ci, y + ky, x + kx) * Wt(co, ci, ky, kx) where y in 0:H, x in 0:W;
    O(co, y, x) = max(Conv(co, y, x) + b(co), 0.0);
}
",
    );
    let asm = runs_like_the_interpreter(&convh, &target, &Options::default());
    assert!(
        asm.contains("load3d l0b") && !asm.contains("src_f32"),
        "{asm}"
    );
    // Windows load3d does not take are gathered by copies of 16 elements per row: the input
    // as A (a result whose rows are the positions), and a three-dimensional window.
    for (name, text) in [
        (
            "conv1d",
            "kernel conv1d<CI = 5, CO = 24, W = 37, KW = 3>(I: f32[CI, W + KW - 1], Wt: f32[CO, CI, KW])
    -> (O: f32[W, CO]) {
    O(x, co) +=! I(ci, x + kx) * Wt(co, ci, kx);
}
",
        ),
        (
            "conv3d",
            "kernel conv3d<CI = 3, CO = 8, D = 4, H = 5, W = 20, KD = 2, KH = 2, KW = 3>(
    I: f32[CI, D + KD - 1, H + KH - 1, W + KW - 1], Wt: f32[CO, CI, KD, KH, KW]) -> (O: f32[CO, D, H, W]) {
    O(co, z, y, x) +=! I(ci, z + kz, y + ky, x + kx) * Wt(co, ci, kz, ky, kx);
}
",
        ),
    ] {
        let asm = runs_like_the_interpreter(&inline(name, text), &target, &Options::default());
        assert!(!asm.contains("load3d"), "{asm}");
        assert!(
            asm.contains("for g in") && asm.contains("copy_pad l1_"),
            "im2col rows gathered by copies:\n{asm}"
        );
    }
    // A reduction of 32 channels × 3 × 3 in steps of whole channel groups.
    let program = load(
        &kernel("conv2d_relu.pf"),
        &[("CI", 32), ("CO", 16), ("H", 3), ("W", 16)],
    );
    let options = Options {
        max_tile: Some((16, 16, 144)),
        ..Options::default()
    };
    let asm = runs_like_the_interpreter(&program, &target, &options);
    assert!(asm.contains("for kt in 0..2"), "{asm}");
}

#[test]
fn tiles_shrink_to_the_machine_they_are_for() {
    // L0B of 8 KiB: two 64 × 32 f32 operand tiles at most.
    let program = load(&kernel("gemm.pf"), &[("NI", 64), ("NJ", 64), ("NK", 128)]);
    let target = machine_with("mem.L0B.capacity = 65536", "mem.L0B.capacity = 8192");
    let checked = npu::check(&program, &target, &f32_options(true), 1, false).expect("runs");
    assert!(checked.comparison.passed());
    let l0b = checked
        .report
        .memories
        .iter()
        .find(|m| m.memory == "L0B")
        .expect("L0B is reported");
    assert!(l0b.peak <= 8192, "{l0b:?}");
    // A small L1: the scaled operand and the chain's panels still fit, with smaller tiles.
    let program = load(
        &kernel("2mm.pf"),
        &[("NI", 64), ("NJ", 48), ("NK", 80), ("NL", 32)],
    );
    let target = machine_with("mem.L1.capacity = 1048576", "mem.L1.capacity = 65536");
    runs_like_the_interpreter(&program, &target, &f32_options(true));
}

#[test]
fn an_in_place_product_reads_a_copy_taken_before_it() {
    // trmm: B[i][j] += A[k][i] * B[k][j] for k > i reads rows of B no instance has updated
    // yet: a first kernel copies B and A with its upper triangle zeroed, the Cube reads them.
    let target = NpuTarget::default();
    for sizes in [
        &[("M", 120), ("N", 140)][..],
        &[("M", 30), ("N", 20)],
        &[("M", 40), ("N", 47)],
    ] {
        let program = load(&kernel("trmm.pf"), sizes);
        let asm = runs_like_the_interpreter(&program, &target, &f32_options(true));
        assert_eq!(asm.matches("\nkernel ").count(), 2, "{asm}");
        assert!(
            asm.contains("param B_in : f32") && asm.contains("param A_cut : f32"),
            "{asm}"
        );
    }
}

#[test]
fn zero_rows_past_a_one_step_reduction_are_written_once_per_block() {
    // trmm's reduction (120) is one step of 128 (40: one of 48), so every L1 slot of A and B
    // holds the same zero rows after it: MTE3 writes them once, at the block's start, from UB
    // zeros, and MTE2 copies only data (a whole chunk past the data: its data rows only).
    let target = NpuTarget::default();
    for (sizes, tails) in [
        (&[("M", 120), ("N", 140)][..], false),
        (&[("M", 40), ("N", 47)], true),
        (&[("M", 16), ("N", 33)], true),
    ] {
        let program = load(&kernel("trmm.pf"), sizes);
        let asm = runs_like_the_interpreter(&program, &target, &f32_options(true));
        let main = &asm[asm
            .find("\nkernel trmm ")
            .expect("the contraction's kernel")..];
        // The step of the reduction from the header's "tiles M×N×K".
        let tiles = main.split("tiles ").nth(1).expect("the tiles");
        let tk: u64 = tiles
            .split(['×', ',', '\n'])
            .nth(2)
            .expect("the step")
            .parse()
            .unwrap();
        let m = sizes[0].1 as u64;
        let once = tk >= m.div_ceil(16) * 16 && !m.is_multiple_of(16);
        assert_eq!(
            main.contains("// Zero rows past the reduction, once"),
            once,
            "{main}"
        );
        let zeroed_l1 = main
            .lines()
            .filter(|l| l.trim_start().starts_with("copy_pad l1_") && l.contains("bytes=0"))
            .count();
        assert!(tails || !once || zeroed_l1 == 0, "{main}");
    }
}

#[test]
fn the_accumulator_start_follows_a_one_step_reductions_operands() {
    // gemm's C *= beta starts each tile's accumulator. When the reduction is one step, MTE2
    // copies the step's B first and the accumulator's tile (a shorter way to the Cube than
    // `load2d`) after it; with more steps, before them (a step's copy may wait for its slot).
    let mut seen = Vec::new();
    for sizes in [&[][..], &[("NI", 64), ("NJ", 80), ("NK", 1000)]] {
        let program = load(&kernel("gemm.pf"), sizes);
        let asm = runs_like_the_interpreter(&program, &NpuTarget::default(), &f32_options(true));
        let tiles = asm.split("tiles ").nth(1).expect("the tiles");
        let mut dims = tiles.split(['×', ',', '\n']);
        let k: i64 = asm
            .split(" on the Cube")
            .next()
            .and_then(|h| h.rsplit('×').next())
            .expect("the reduction")
            .parse()
            .unwrap();
        let tk: i64 = dims.nth(2).expect("the step").parse().unwrap();
        let one_step = tk >= (k + 15) / 16 * 16;
        let first = |what: &str| {
            asm.lines()
                .position(|l| l.trim_start().starts_with("copy") && l.contains(what))
                .unwrap_or_else(|| panic!("no copy into {what}:\n{asm}"))
        };
        assert_eq!(first("l1_b[") < first("ub_i0["), one_step, "{asm}");
        seen.push(one_step);
    }
    assert!(seen.contains(&true) && seen.contains(&false), "{seen:?}");
}

/// lu updates `A` in place from elements it has updated: no contraction lowering takes it, and
/// the general lowering of the middle end's AST runs it exactly.
#[test]
fn an_in_place_recurrence_runs_through_the_general_lowering() {
    let program = load(&kernel("lu.pf"), &[("N", 40)]);
    let asm = runs_like_the_interpreter(&program, &NpuTarget::default(), &f32_options(true));
    assert!(!asm.contains("mmad"), "{asm}");
    assert!(asm.contains("while"), "{asm}");
}

#[test]
fn a_triangular_domain_writes_only_its_triangle() {
    // syrk updates C[i][j] for j <= i: the Cube computes square tiles of the bounding box and
    // only the lower triangle leaves UB, so the upper one keeps its input values.
    let target = NpuTarget::default();
    for (n, m) in [(30, 20), (40, 24), (100, 17)] {
        let options = frontend::Options {
            defines: vec![
                ("N".to_string(), Some(n.to_string())),
                ("M".to_string(), Some(m.to_string())),
            ],
            ..frontend::Options::default()
        };
        let program = frontend::load(&kernel("syrk.c"), &options)
            .unwrap_or_else(|e| panic!("{}", e.render(false)));
        let asm = runs_like_the_interpreter(&program, &target, &f32_options(true));
        assert!(asm.contains("if s30 == 0"), "a diagonal tile:\n{asm}");
    }
    // Rows from the diagonal on (an upper triangle) and a band with both edges: cut rows
    // start anywhere in a chunk, so their first elements are moved onto UB's 32-byte grid
    // by the scalar unit before they leave.
    for text in [
        "kernel upper<N = 40, M = 24>(A: f32[N, M]) -> (C: f32[N, N]) {
    C(i, j) += A(i, k) * A(j, k) where j in i:N;
}",
        "kernel band<N = 40, M = 24>(A: f32[N, M]) -> (C: f32[N, N]) {
    C(i, j) += A(i, k) * A(j, k) where j >= i - 10 && j <= i + 21;
}",
    ] {
        for n in [40, 100, 211] {
            let mut program = inline("triangle", text);
            for p in &mut program.params {
                if p.name == "N" {
                    p.value = n;
                }
            }
            let asm = runs_like_the_interpreter(&program, &target, &f32_options(true));
            assert!(asm.contains("ld.f32 f31"), "a shifted row:\n{asm}");
            let nofuse = Options {
                fuse: false,
                ..f32_options(true)
            };
            runs_like_the_interpreter(&program, &target, &nofuse);
        }
    }
}

#[test]
fn a_temporary_reused_by_every_iteration_is_privatized() {
    // doitgen: sum[p] is computed from scratch for each (r, q) and copied into A[r][q][p]:
    // one copy of sum per (r, q) makes it a contraction over (r, q) × p, A is read from a copy
    // taken first, and the last (r, q)'s sum is copied into the live-out `sum` at the end.
    let target = NpuTarget::default();
    for dataset in ["MINI_DATASET", "SMALL_DATASET"] {
        let options = frontend::Options {
            defines: vec![(dataset.to_string(), None)],
            ..frontend::Options::default()
        };
        let program = frontend::load(&kernel("doitgen.c"), &options)
            .unwrap_or_else(|e| panic!("{}", e.render(false)));
        let asm = runs_like_the_interpreter(&program, &target, &f32_options(true));
        for k in [
            "kernel doitgen_prep",
            "kernel doitgen ",
            "kernel doitgen_post",
        ] {
            assert!(asm.contains(k), "{k}:\n{asm}");
        }
        assert!(asm.contains("param sum_x : f32"), "{asm}");
    }
}
