//! Post-tiling fusion end to end: every kernel in `kernels/` under `--fuse post-tiling` on the
//! CPU against the reference interpreter, the fused trees of the fusion kernels (extension
//! nodes and `skipped` marks), the multiple-live-out rule refusing to fuse an intermediate
//! that two outputs read in different tiles and fusing one they read in disjoint tiles, stencil halos recomputed per tile (and refused when too costly), and
//! fused intermediates living in their tiles instead of global buffers.

use std::path::Path;

use backends::cpu;
use polyhedral::passes::tile_size::TileSizes;
use polyhedral::pipeline::{compile, Compiled, Options};
use polyhedral::schedule::tree::NodeKind;
use polyhedral::schedule::Mark;
use polyhedral::Program;
use snapshots::{kernels, load_small, snapshot_name, tiny_target};

fn fused() -> Options {
    Options {
        post_tiling_fusion: true,
        ..Options::default()
    }
}

fn cpu_options() -> cpu::Options {
    cpu::Options {
        threads: Some(2),
        min_parallel_work: 0,
        ..cpu::Options::default()
    }
}

fn check_on_cpu(program: &Program, c: &Compiled, what: &str) {
    let report = cpu::check_transformed(program, &c.program, &c.ast, &cpu_options(), 3)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        report.comparison.passed(),
        "{what}:\n{}\n{}",
        report.to_text(program),
        c.tree.display(&c.program)
    );
}

fn marks(c: &Compiled) -> Vec<Mark> {
    let mut out = Vec::new();
    c.tree.root.walk(&mut |n| {
        if let NodeKind::Mark(m) = &n.kind {
            out.push(m.clone());
        }
    });
    out
}

fn extensions(c: &Compiled) -> usize {
    let mut n = 0;
    c.tree.root.walk(&mut |node| {
        if let NodeKind::Extension(_) = node.kind {
            n += 1;
        }
    });
    n
}

#[test]
fn every_kernel_runs_fused_on_the_cpu_like_the_interpreter() {
    for path in kernels() {
        let program = load_small(&path);
        for target in [cpu::description(), tiny_target()] {
            let what = format!("{} post-tiling on {}", path.display(), target.name);
            eprintln!("{what}");
            let c = compile(&program, &target, &fused()).unwrap_or_else(|e| panic!("{what}: {e}"));
            check_on_cpu(&program, &c, &what);
        }
    }
}

/// The kernels whose producers the fusion pulls into the consumers' tiles (`blur_unsharp`'s
/// first blur recomputed on the halo rows of every tile).
const FUSED: &[&str] = &[
    "conv2d_relu.pf",
    "conv2d_bn_relu.pf",
    "blur_unsharp.pf",
    "softmax.pf",
    "layernorm.pf",
    "gemm_bias_relu.pf",
    "2mm.pf",
];

#[test]
fn fused_trees_of_the_fusion_kernels() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    for file in FUSED {
        let path = dir.join(file);
        let program = load_small(&path);
        // Without the register-tile marks the later pass adds, the fused tree is the final one.
        let options = Options {
            register_tile: false,
            ..fused()
        };
        let c = compile(&program, &cpu::description(), &options)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(extensions(&c) >= 1, "{file}: no extension node");
        assert!(
            marks(&c).contains(&Mark::Skipped),
            "{file}: no skipped mark"
        );
        // The fused tree is the one the pass list records under its name.
        assert_eq!(c.tree_after("post-tiling-fusion"), Some(&c.tree));
        insta::assert_snapshot!(
            format!("post_tiling_{}", snapshot_name(&path)),
            c.tree.display(&c.program)
        );
    }
}

/// A kernel file in the test's scratch directory.
fn scratch_kernel(name: &str, text: &str) -> Program {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, text).expect("the scratch directory is writable");
    load_small(&path)
}

#[test]
fn an_intermediate_two_outputs_read_is_not_fused() {
    let program = scratch_kernel(
        "post_tiling_shared.pf",
        "kernel shared<N = 64, M = 64>(X: f32[N, M]) -> (Y: f32[N], Z: f32[M]) {\n\
         T(i, j) = X(i, j) * 2.0;\n\
         Y(i) +=! T(i, j);\n\
         Z(j) +=! T(i, j);\n\
         }\n",
    );
    for target in [cpu::description(), tiny_target()] {
        let c = compile(&program, &target, &fused()).unwrap();
        let why = marks(&c);
        assert!(
            why.iter()
                .any(|m| matches!(m, Mark::Unfused(why) if why.starts_with("T is also read by"))),
            "{why:?}\n{}",
            c.tree.display(&c.program)
        );
        check_on_cpu(&program, &c, "shared intermediate");
    }
}

#[test]
fn an_intermediate_two_outputs_read_in_disjoint_tiles_is_fused() {
    // `Y` and `Z` read `T` at the same element, in one tile band: the instances of `T` each
    // tile needs are disjoint from every other tile's, so `T` is fused and computed once.
    let program = scratch_kernel(
        "post_tiling_disjoint.pf",
        "kernel disjoint<N = 48, M = 40, K = 24>(A: f32[N, K], B: f32[K, M])\n\
         -> (Y: f32[N, M], Z: f32[N, M]) {\n\
         T(i, j) +=! A(i, k) * B(k, j);\n\
         Y(i, j) = T(i, j) + 1.0;\n\
         Z(i, j) = max(T(i, j), 0.0);\n\
         }\n",
    );
    for target in [cpu::description(), tiny_target()] {
        let c = compile(&program, &target, &fused()).unwrap();
        let tree = c.tree.display(&c.program);
        assert!(extensions(&c) >= 1, "{tree}");
        assert!(marks(&c).contains(&Mark::Skipped), "{tree}");
        assert!(
            !marks(&c).iter().any(|m| matches!(m, Mark::Unfused(_))),
            "{tree}"
        );
        check_on_cpu(&program, &c, "intermediate of two outputs, disjoint tiles");
    }
}

#[test]
fn fused_intermediates_of_softmax_live_in_its_tiles_on_the_cpu() {
    // Rows of sizes that leave a partial tile: every intermediate (the row maximum, the
    // exponentials, the row sum) is produced and consumed in the tile of its row.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/softmax.pf");
    let options = frontend::Options {
        sizes: vec![("N".into(), 37), ("M".into(), 45)],
        ..frontend::Options::default()
    };
    let program = frontend::load(&path, &options).unwrap_or_else(|e| panic!("{e}"));
    let c = compile(&program, &cpu::description(), &fused()).unwrap_or_else(|e| panic!("{e}"));
    check_on_cpu(&program, &c, "softmax, fused");
    let text = cpu::Writer::new(&c.program, &cpu_options())
        .write(&c.ast)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!text.contains("calloc"), "{text}");
    for local in ["mx_tile[", "e_tile[", "s_tile["] {
        assert!(text.contains(local), "{local}\n{text}");
    }
}

/// `blur_unsharp` at sizes that leave partial tiles, with tiles of `tile` points per member.
fn blur(tile: i64) -> (Program, Compiled) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/blur_unsharp.pf");
    let options = frontend::Options {
        sizes: vec![("H".into(), 37), ("W".into(), 45)],
        ..frontend::Options::default()
    };
    let program = frontend::load(&path, &options).unwrap_or_else(|e| panic!("{e}"));
    let options = Options {
        tiling: TileSizes::Fixed(vec![tile, tile]),
        ..fused()
    };
    let c = compile(&program, &cpu::description(), &options).unwrap_or_else(|e| panic!("{e}"));
    (program, c)
}

#[test]
fn stencil_halos_are_recomputed_at_tile_borders_and_domain_edges() {
    // Tiles of 8 rows of the output need 10 rows of the horizontal blur: the two rows below
    // a tile are computed again by the next tile (2 of 10 shared, within the cost bound).
    let (program, c) = blur(8);
    assert_eq!(
        marks(&c).iter().filter(|m| **m == Mark::Skipped).count(),
        2,
        "{}",
        c.tree.display(&c.program)
    );
    insta::assert_snapshot!("post_tiling_blur_halo", c.tree.display(&c.program));
    check_on_cpu(&program, &c, "blur_unsharp, halos recomputed");
    let text = cpu::Writer::new(&c.program, &cpu_options())
        .write(&c.ast)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!text.contains("calloc"), "{text}");
    assert!(text.contains("float Bx_tile[10][8] = {0};"), "{text}");
    assert!(text.contains("float By_tile[8][8] = {0};"), "{text}");
}

#[test]
fn halos_too_costly_to_recompute_stay_unfused() {
    // Tiles of 4 rows would need 6 rows of the horizontal blur, 2 of them shared with the
    // next tile: a third of the tile's producer work, over the bound.
    let tile_rows = 4;
    let shared = 2 * tile_rows;
    let total = (tile_rows + 2) * tile_rows;
    assert!(!polyhedral::passes::post_tiling_fusion::recompute::worth_recomputing(shared, total));
    let (program, c) = blur(tile_rows);
    assert!(
        !marks(&c).contains(&Mark::Skipped),
        "{}",
        c.tree.display(&c.program)
    );
    check_on_cpu(&program, &c, "blur_unsharp, small tiles");
}

#[test]
fn fused_intermediates_have_no_global_buffer_on_the_cpu() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    for (file, locals) in [
        ("conv2d_relu.pf", &["Conv_tile["][..]),
        ("conv2d_bn_relu.pf", &["Conv_tile[", "Norm_tile["]),
        ("blur_unsharp.pf", &["Bx_tile[", "By_tile["]),
        (
            "layernorm.pf",
            &["sum_tile[", "mu_tile[", "sq_tile[", "rstd_tile["],
        ),
        ("gemm_bias_relu.pf", &["T_tile["]),
    ] {
        let program = snapshots::load(&dir.join(file));
        let c = compile(&program, &cpu::description(), &fused())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let text = cpu::Writer::new(&c.program, &cpu_options())
            .write(&c.ast)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("calloc"), "{file}:\n{text}");
        for local in locals {
            assert!(text.contains(local), "{file}: {local}\n{text}");
        }
    }
}
