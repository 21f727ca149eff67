//! Contractions on the Cube from the schedule tree: the matrix pass retiles them and marks
//! them, and the general lowering runs each marked tile on L1, L0A, L0B and L0C. Every kernel
//! here is lowered that way (even those a dedicated lowering would take), simulated with the
//! race detector, bounds and alignment checks on, compared element by element with the
//! interpreter, and must have run its contraction on the Cube.

use std::path::{Path, PathBuf};

use backends::npu::{self, NpuTarget, Options};
use polyhedral::Program;

fn load(path: &Path) -> Program {
    frontend::load(path, &frontend::Options::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// A kernel written here, loaded at its default sizes.
fn inline(name: &str, text: &str) -> Program {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join(format!("{name}.pf"));
    std::fs::write(&path, text).expect("the kernel is written");
    load(&path)
}

fn repo(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file)
}

/// Lowers `program` from the tree, simulates it and compares; returns the program text.
fn on_the_cube(program: &Program) -> String {
    let options = Options {
        f64_as_f32: true,
        general: true,
        ..Options::default()
    };
    let target = NpuTarget::default();
    let checked = npu::check(program, &target, &options, 5, false)
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    assert!(
        checked.comparison.passed(),
        "{} differs from the interpreter:\n{}",
        program.name,
        checked.comparison.to_text(program)
    );
    assert!(
        checked.asm.contains("mmad"),
        "{}: no contraction ran on the Cube",
        program.name
    );
    checked.asm
}

#[test]
fn every_operand_layout_and_ragged_tiles() {
    // A's rows along k and B's along n (both transposed into L0), sizes off the fractal grid.
    on_the_cube(&inline(
        "transposed",
        "kernel transposed<M = 60, N = 70, K = 50>(A: f32[K, M], B: f32[N, K]) -> (C: f32[M, N]) {
             C(i, j) +=! A(k, i) * B(j, k);
         }",
    ));
    // f16 operands summed in f32; more k than one tile holds.
    on_the_cube(&inline(
        "halves",
        "kernel halves<M = 100, N = 37, K = 300>(A: f16[M, K], B: f16[K, N]) -> (C: f32[M, N]) {
             C(i, j) +=! f32(A(i, k)) * f32(B(k, j));
         }",
    ));
    // Many tiles of the result, spread over the cores, with tails in m, n and k.
    on_the_cube(&inline(
        "many",
        "kernel many<M = 300, N = 290, K = 200>(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
             C(i, j) +=! A(i, k) * B(k, j);
         }",
    ));
}

#[test]
fn batches_offsets_and_prior_values() {
    // A batch iterator walked outside the tiles; the sum starts from values another
    // statement wrote.
    on_the_cube(&inline(
        "batched",
        "kernel batched<H = 3, M = 20, N = 24, K = 40>(A: f32[H, M, K], B: f32[H, K, N],
             C0: f32[H, M, N]) -> (C: f32[H, M, N]) {
             C(h, i, j) = C0(h, i, j) * 0.5;
             C(h, i, j) += A(h, i, k) * B(h, k, j);
         }",
    ));
    // A domain that does not start on a tile: the first tile is cut short.
    on_the_cube(&inline(
        "shifted",
        "kernel shifted<M = 64, N = 64, K = 64>(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
             C(i, j) = 1.0;
             C(i + 1, j) += A(i, k) * B(k, j) where i in 0:M - 1;
         }",
    ));
}

#[test]
fn scaled_operands_are_scaled_before_the_cube() {
    // alpha scales A (PolyBench's gemm); a scalar factor on B scales B; the
    // factor of the second is an input array's element.
    for program in [
        load(&repo("kernels/gemm.pf")),
        inline(
            "scaled_b",
            "kernel scaled_b<M = 40, N = 50, K = 70>(s: f32, A: f32[M, K], B: f32[K, N])
                 -> (C: f32[M, N]) {
                 C(i, j) +=! A(i, k) * (s * B(k, j));
             }",
        ),
    ] {
        let asm = on_the_cube(&program);
        assert!(
            asm.contains("_scaled"),
            "{}: no operand was scaled beforehand",
            program.name
        );
    }
}

#[test]
fn chained_products_each_get_a_band_of_their_own() {
    // The scheduler would fuse the two products along i and j; for the matrix unit each keeps
    // its band, and both are marked.
    let program = inline(
        "chained",
        "kernel chained<M = 48, N = 40, K = 56, L = 36>(A: f32[M, K], B: f32[K, N],
             C: f32[N, L]) -> (D: f32[M, L]) {
             T(i, j) +=! A(i, k) * B(k, j);
             D(i, l) +=! T(i, j) * C(j, l);
         }",
    );
    let target = NpuTarget::default();
    let compiled =
        polyhedral::pipeline::compile(&program, &target.description(false), &Default::default())
            .expect("the kernel compiles");
    let mut marks = 0;
    compiled.ast.walk(&mut |a| {
        if let polyhedral::ast::Ast::Mark {
            mark: polyhedral::schedule::mark::Mark::Matrix(_),
            ..
        } = a
        {
            marks += 1;
        }
    });
    assert_eq!(marks, 2, "both products are marked for the matrix unit");
    on_the_cube(&program);
}

#[test]
fn the_ml_kernels_run_their_products_on_the_cube() {
    for file in [
        "tests/ml/attention.pf",
        "tests/ml/masked_scores.pf",
        "tests/ml/swiglu.pf",
        "tests/ml/transformer_block.pf",
    ] {
        on_the_cube(&load(&repo(file)));
    }
}

#[test]
fn the_contractions_of_kernels_run_on_the_cube() {
    for file in [
        "gemm.pf",
        "gemm_f16.pf",
        "gemm_bias_relu.pf",
        "2mm.pf",
        "3mm.pf",
    ] {
        on_the_cube(&load(&repo(&format!("kernels/{file}"))));
    }
}

#[test]
fn a_product_whose_loops_run_i_k_j_runs_on_the_cube() {
    // PolyBench/C's loop order: the column iterator is the third, not the second, so the
    // result's columns are found by the iterator that subscripts them, not by its position.
    let program = frontend::load(
        &repo("kernels/gemm.c"),
        &frontend::Options {
            defines: vec![("MINI_DATASET".into(), None)],
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.render(false)));
    on_the_cube(&program);
}

#[test]
fn convolutions_and_contractions_over_several_k_iterators_run_on_the_cube() {
    // The channels, rows and columns of a window are one k of `CI × KH × KW` values (the
    // weights hold them as one run per output channel; the input one burst per window row).
    for file in ["conv2d_relu.pf", "conv2d_bn_relu.pf", "contract3d.pf"] {
        on_the_cube(&load(&repo(&format!("kernels/{file}"))));
    }
    // Channels that fill no fractal, a batch of images (another n iterator, run outside the
    // tiles like a batch), output sizes off the fractal grid.
    on_the_cube(&inline(
        "batched_conv",
        "kernel batched_conv<NB = 2, CI = 5, CO = 20, H = 9, W = 23, KH = 2, KW = 3>(
             I: f32[NB, CI, H + KH - 1, W + KW - 1], Wt: f32[CO, CI, KH, KW])
             -> (O: f32[NB, CO, H, W]) {
             O(b, co, y, x) +=! I(b, ci, y + ky, x + kx) * Wt(co, ci, ky, kx)
                 where y in 0:H, x in 0:W;
         }",
    ));
    // Two k iterators in one order in A and the other in B: B's rows of k are copied as
    // one run of bursts per value of the second.
    on_the_cube(&inline(
        "scattered_k",
        "kernel scattered_k<I = 40, J = 24, K = 7, L = 6>(A: f16[L, K, I], B: f16[K, L, J])
             -> (C: f32[I, J]) {
             C(i, j) +=! f32(A(l, k, i)) * f32(B(k, l, j));
         }",
    ));
}

#[test]
fn the_tree_marks_a_convolution_for_the_cube_with_its_window() {
    let program = load(&repo("kernels/conv2d_relu.pf"));
    let target = NpuTarget::default();
    let compiled = polyhedral::pipeline::compile(
        &program,
        &target.description(false),
        &polyhedral::pipeline::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let tree = compiled.tree.display(&compiled.program).to_string();
    assert!(
        tree.contains("matrix 16x64x16*9 from zero"),
        "no matrix mark over the window's 9 values:\n{tree}"
    );
}
