//! The GPU target on every kernel in `kernels/`: the WGSL module of each (f64 kernels computed
//! in f32), validated with naga and recorded as a snapshot; and each run through wgpu on the
//! machine's adapter (Mesa's lavapipe where there is no GPU) against the interpreter running
//! the same program, with the default workgroup limits and with limits so small that tiles
//! are 2 to 4 wide, so that partial tiles, folded grids and skipped promotions occur.

use backends::gpu::{self, Limits};
use polyhedral::pipeline::Options;
use polyhedral::schedule::Mark;
use snapshots::{kernels, load, load_small, snapshot_name};

fn gpu_options() -> gpu::Options {
    gpu::Options {
        f64_as_f32: true,
        ..gpu::Options::default()
    }
}

fn tiny_limits() -> Limits {
    Limits {
        max_invocations_per_workgroup: 8,
        max_workgroups_per_dimension: 2,
        workgroup_memory_bytes: 256,
        ..Limits::default()
    }
}

#[test]
fn wgsl_of_every_kernel() {
    for path in kernels() {
        let program = load(&path);
        let options = gpu_options();
        let c = gpu::compile(&program, &Options::default(), &options)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let module = gpu::Writer::new(&c.compiled.program, &options)
            .write(&c.compiled.ast)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        gpu::validate(&module.wgsl).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        insta::assert_snapshot!(format!("{}_wgsl", snapshot_name(&path)), module.wgsl);
    }
}

#[test]
fn every_kernel_runs_on_the_gpu_like_the_interpreter() {
    for path in kernels() {
        let program = load_small(&path);
        let capped = Limits {
            loop_iterations: Some(65535),
            ..Limits::default()
        };
        for limits in [Limits::default(), tiny_limits(), capped] {
            for promote in [true, false] {
                let what = format!(
                    "{} with {} invocations per group, promotion {promote}",
                    path.display(),
                    limits.max_invocations_per_workgroup
                );
                eprintln!("{what}");
                let options = gpu::Options {
                    limits,
                    promote,
                    ..gpu_options()
                };
                let c = gpu::compile(&program, &Options::default(), &options)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let module = gpu::Writer::new(&c.compiled.program, &options)
                    .write(&c.compiled.ast)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let report = gpu::check(&c.reference, &c.compiled.program, &module, &options, 3)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(
                    report.comparison.passed(),
                    "{what}:\n{}\n{}",
                    report.to_text(&c.reference),
                    module.wgsl
                );
            }
        }
    }
}

fn load_sized(name: &str, sizes: &[(&str, i64)]) -> polyhedral::Program {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kernels")
        .join(name);
    let options = frontend::Options {
        sizes: sizes.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        defines: sizes
            .iter()
            .map(|(n, v)| (n.to_string(), Some(v.to_string())))
            .collect(),
        ..frontend::Options::default()
    };
    frontend::load(&path, &options).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// Compiles, writes and runs `program`, asserting that it matches the interpreter; the module
/// and the number of dispatches.
fn run_checked(
    program: &polyhedral::Program,
    pipeline: &Options,
    options: &gpu::Options,
) -> (gpu::Module, usize) {
    let c = gpu::compile(program, pipeline, options).unwrap_or_else(|e| panic!("{e}"));
    let module = gpu::Writer::new(&c.compiled.program, options)
        .write(&c.compiled.ast)
        .unwrap_or_else(|e| panic!("{e}"));
    let report = gpu::check(&c.reference, &c.compiled.program, &module, options, 7)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report.comparison.passed(),
        "{}\n{}",
        report.to_text(&c.reference),
        module.wgsl
    );
    (module, report.dispatches)
}

#[test]
fn promoted_gemm_uses_workgroup_tiles_and_a_register_accumulator() {
    let program = load_sized("gemm.pf", &[("NI", 64), ("NJ", 64), ("NK", 64)]);
    let (module, _) = run_checked(&program, &Options::default(), &gpu_options());
    assert!(module.wgsl.contains("var<workgroup>"), "{}", module.wgsl);
    assert!(
        module.wgsl.contains("workgroupBarrier()"),
        "{}",
        module.wgsl
    );
    let (shared, registers) = module
        .promoted
        .iter()
        .find(|(s, _)| !s.is_empty())
        .unwrap_or_else(|| panic!("no kernel promoted anything:\n{}", module.wgsl));
    assert!(shared.contains(&"A".to_string()) && shared.contains(&"B".to_string()));
    assert_eq!(registers, &vec!["C".to_string()]);
    assert!(module.wgsl.contains("var pf_r"), "{}", module.wgsl);

    let unpromoted = gpu::Options {
        promote: false,
        ..gpu_options()
    };
    let (module, _) = run_checked(&program, &Options::default(), &unpromoted);
    assert!(!module.wgsl.contains("var<workgroup>"), "{}", module.wgsl);
    assert!(!module.wgsl.contains("var pf_r"), "{}", module.wgsl);
}

#[test]
fn a_grid_larger_than_the_dimension_limit_is_folded() {
    let program = load_sized("gemm.pf", &[("NI", 70), ("NJ", 90), ("NK", 20)]);
    let options = gpu::Options {
        limits: Limits {
            max_workgroups_per_dimension: 2,
            ..Limits::default()
        },
        ..gpu_options()
    };
    let pipeline = Options {
        tiling: polyhedral::passes::tile_size::TileSizes::Fixed(vec![8, 8, 8]),
        ..Options::default()
    };
    // 9 × 12 tiles on a grid of at most 2 × 2 groups.
    run_checked(&program, &pipeline, &options);
    // Untiled, every loop on global ids: 70 rows on 2 groups of 16.
    let untiled = Options {
        tiling: polyhedral::passes::tile_size::TileSizes::Off,
        ..Options::default()
    };
    run_checked(&program, &untiled, &options);
}

#[test]
fn tiles_that_do_not_divide_the_sizes_leave_correct_tails() {
    let program = load_sized("gemm.pf", &[("NI", 37), ("NJ", 41), ("NK", 43)]);
    for promote in [true, false] {
        let options = gpu::Options {
            promote,
            ..gpu_options()
        };
        let pipeline = Options {
            tiling: polyhedral::passes::tile_size::TileSizes::Fixed(vec![16, 16, 16]),
            ..Options::default()
        };
        let (module, _) = run_checked(&program, &pipeline, &options);
        assert_eq!(module.wgsl.contains("var<workgroup>"), promote);
    }
}

#[test]
fn a_time_iterated_stencil_runs_as_several_dispatches() {
    let program = load_sized("jacobi2d.pf", &[("N", 40), ("TSTEPS", 6)]);
    // Small tiles: a wavefront of tiles, one dispatch per wavefront step.
    let tiled = Options {
        tiling: polyhedral::passes::tile_size::TileSizes::Fixed(vec![4, 4, 4]),
        ..Options::default()
    };
    let (module, dispatches) = run_checked(&program, &tiled, &gpu_options());
    assert!(dispatches > 1, "{dispatches} dispatches\n{}", module.wgsl);
}

#[test]
fn f64_kernels_need_the_f32_option() {
    let program = load_sized("gemm.pf", &[]);
    let e = gpu::compile(&program, &Options::default(), &gpu::Options::default())
        .expect_err("f64 is refused");
    assert!(e.to_string().contains("not supported on gpu: f64"), "{e}");
}

/// The adapter's limits, when it caps the loop iterations of one invocation (llvmpipe).
fn capped_adapter() -> Option<Limits> {
    let (name, limits) = gpu::adapter_limits(None).ok()?;
    if limits.loop_iterations.is_none() {
        eprintln!("{name} does not cap loops: nothing to check");
    }
    limits.loop_iterations.map(|_| limits)
}

#[test]
fn a_loop_the_driver_leaves_early_is_an_error() {
    let Some(limits) = capped_adapter() else {
        return;
    };
    // Untiled, lu's 64³/3 iterations run in one invocation: far past llvmpipe's cap.
    let program = load_sized("lu.pf", &[("N", 64)]);
    let options = gpu::Options {
        limits,
        ..gpu_options()
    };
    let pipeline = Options {
        tiling: polyhedral::passes::tile_size::TileSizes::Off,
        ..Options::default()
    };
    let c = gpu::compile(&program, &pipeline, &options).unwrap_or_else(|e| panic!("{e}"));
    let module = gpu::Writer::new(&c.compiled.program, &options)
        .write(&c.compiled.ast)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(module.loop_guard && module.wgsl.contains("pf_cut = true"));
    let e = gpu::check(&c.reference, &c.compiled.program, &module, &options, 1)
        .expect_err("the cut loop is reported");
    assert!(
        e.to_string().contains("stopped a loop before its end"),
        "{e}"
    );
}

#[test]
fn tiles_and_kernels_fit_a_loop_cap() {
    let Some(limits) = capped_adapter() else {
        return;
    };
    let options = gpu::Options {
        limits,
        ..gpu_options()
    };
    // lu's tile band is a wavefront run by one invocation per tile; doitgen's kernel band
    // has a sequential member after its parallel one, which moves to the host.
    for (name, sizes) in [
        ("lu.pf", vec![("N", 120)]),
        ("doitgen.c", vec![("NQ", 40), ("NR", 16), ("NP", 160)]),
    ] {
        let program = load_sized(name, &sizes);
        run_checked(&program, &Options::default(), &options);
    }
}

#[test]
fn f16_arrays_are_stored_as_f16_where_the_adapter_has_shader_f16() {
    let Ok((name, limits)) = gpu::adapter_limits(None) else {
        eprintln!("no adapter: nothing to check");
        return;
    };
    if !limits.f16_storage {
        eprintln!("{name} has no shader-f16: nothing to check");
        return;
    }
    // f16 inputs and outputs, a register accumulator, promoted tiles and a tail (N = 100).
    let src = "kernel h<N = 100>(A: f16[N, N], x: f16[N]) -> (y: f16[N], z: f16[N]) {\n\
               y(i) +=! A(i, j) * x(j);\n\
               z(i) = max(y(i), 0.5) * x(i);\n\
               }\n";
    let file = frontend::SourceFile::new("h.pf", src);
    let program = frontend::parse(
        &file,
        frontend::Language::Kernel,
        &frontend::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let options = gpu::Options {
        limits,
        ..gpu_options()
    };
    let (module, _) = run_checked(&program, &Options::default(), &options);
    assert!(module.f16_storage);
    assert!(module.wgsl.starts_with("// kernel h") && module.wgsl.contains("enable f16;"));
    assert!(module.wgsl.contains("array<f16>"), "{}", module.wgsl);
}

#[test]
fn a_written_box_goes_back_to_global_memory_element_by_element() {
    // Each group updates the even columns of its rows T times from the odd ones next to them:
    // the box of A is read and written with reuse across t, and half of it is never written.
    // Sizes leave partial tiles in both dimensions.
    let src = "kernel evens<T = 6, N = 45, M = 19>() -> (A: f32[N, 2 * M + 1]) {\n\
               for t in 0:T {\n\
               A(i, 2 * j) = 0.5 * (A(i, 2 * j) + A(i, 2 * j + 1)) where j in 0:M;\n\
               }\n\
               }\n";
    let file = frontend::SourceFile::new("evens.pf", src);
    let program = frontend::parse(
        &file,
        frontend::Language::Kernel,
        &frontend::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.render(false)));
    for promote in [true, false] {
        let options = gpu::Options {
            promote,
            ..gpu_options()
        };
        let (module, _) = run_checked(&program, &Options::default(), &options);
        assert_eq!(
            module.wgsl.contains("_w: array<atomic<u32>"),
            promote,
            "{}",
            module.wgsl
        );
        assert_eq!(module.promoted[0].0.contains(&"A".to_string()), promote);
    }
}

#[test]
fn post_tiling_fusion_runs_on_the_gpu_like_the_interpreter() {
    let fused = Options {
        post_tiling_fusion: true,
        ..Options::default()
    };
    for (name, fuses) in [
        ("conv2d_relu.pf", true),
        ("conv2d_bn_relu.pf", true),
        ("blur_unsharp.pf", true),
        ("softmax.pf", true),
        ("layernorm.pf", true),
        ("gemm_bias_relu.pf", true),
        ("2mm.pf", true),
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../kernels")
            .join(name);
        let program = load_small(&path);
        let c = gpu::compile(&program, &fused, &gpu_options()).unwrap_or_else(|e| panic!("{e}"));
        let mut skipped = 0;
        c.compiled.tree.root.walk(&mut |n| {
            skipped += usize::from(matches!(
                &n.kind,
                polyhedral::schedule::NodeKind::Mark(Mark::Skipped)
            ))
        });
        assert_eq!(skipped > 0, fuses, "{name}: {skipped} producers fused");
        run_checked(&program, &fused, &gpu_options());
    }
}

#[test]
fn fused_intermediates_live_in_workgroup_memory() {
    // Sizes that leave partial tiles; blur_unsharp's tiles recompute the halo rows of the
    // horizontal blur.
    let fused = Options {
        post_tiling_fusion: true,
        ..Options::default()
    };
    for (name, sizes, locals) in [
        (
            "blur_unsharp.pf",
            &[("H", 37), ("W", 45)][..],
            &["Bx", "By"][..],
        ),
        (
            "layernorm.pf",
            &[("N", 37), ("D", 45)],
            &["sum", "mu", "sq", "rstd"],
        ),
        ("softmax.pf", &[("N", 37), ("M", 45)], &["mx", "e", "s"]),
    ] {
        let program = load_sized(name, sizes);
        let (module, dispatches) = run_checked(&program, &fused, &gpu_options());
        assert_eq!(dispatches, 1, "{name}");
        for local in locals {
            let k = program
                .arrays
                .iter()
                .position(|a| a.name == *local)
                .unwrap_or_else(|| panic!("{name}: no array {local}"));
            assert!(module.tile_local[k], "{name}: {local}\n{}", module.wgsl);
            assert!(
                module
                    .wgsl
                    .contains(&format!("var<workgroup> pf_tl_k0_{local}:")),
                "{name}: {local}\n{}",
                module.wgsl
            );
        }
    }
}

/// The marks of `tree`, outermost first.
fn marks(tree: &polyhedral::schedule::ScheduleTree) -> Vec<Mark> {
    let mut marks = Vec::new();
    tree.root.walk(&mut |n| {
        if let polyhedral::schedule::NodeKind::Mark(m) = &n.kind {
            marks.push(m.clone());
        }
    });
    marks
}

#[test]
fn post_tiling_fusion_keeps_to_a_loop_cap() {
    let fused = Options {
        post_tiling_fusion: true,
        ..Options::default()
    };
    let capped = gpu::Options {
        limits: Limits {
            loop_iterations: Some(65535),
            ..Limits::default()
        },
        ..gpu_options()
    };
    // A producer left unfused still runs as kernels: one kernel mark per group that is not
    // skipped (F's two statements and the fused tile of G).
    let program = load_sized("3mm.pf", &[]);
    let c = gpu::compile(&program, &fused, &capped).unwrap_or_else(|e| panic!("{e}"));
    let m = marks(&c.compiled.tree);
    assert_eq!(
        m.iter().filter(|m| matches!(m, Mark::Unfused(_))).count(),
        2,
        "{m:?}"
    );
    assert_eq!(m.iter().filter(|m| **m == Mark::Kernel).count(), 3, "{m:?}");
    // Fusing tmp into D's row tiles would give one invocation about NJ·NK/16 iterations: it
    // is fused without a cap and left unfused under one.
    let src = "kernel t<NI = 16, NJ = 1100, NK = 1100, NL = 16>(A: f32[NI, NK], B: f32[NK, NJ],\n\
               C: f32[NJ, NL]) -> (D: f32[NI, NL]) {\n\
               T(i, j) +=! A(i, k) * B(k, j);\n\
               D(i, l) +=! T(i, j) * C(j, l);\n\
               }\n";
    let file = frontend::SourceFile::new("t.pf", src);
    let program = frontend::parse(
        &file,
        frontend::Language::Kernel,
        &frontend::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let free = gpu::compile(&program, &fused, &gpu_options()).unwrap_or_else(|e| panic!("{e}"));
    let skipped = |m: &[Mark]| m.iter().filter(|m| **m == Mark::Skipped).count();
    // T's two statements (initialisation and update) and D's initialisation.
    let m = marks(&free.compiled.tree);
    assert_eq!(skipped(&m), 3, "{m:?}");
    let c = gpu::compile(&program, &fused, &capped).unwrap_or_else(|e| panic!("{e}"));
    let m = marks(&c.compiled.tree);
    assert!(skipped(&m) < 3, "{m:?}");
    assert!(
        m.iter()
            .any(|m| matches!(m, Mark::Unfused(why) if why.starts_with("T "))),
        "{m:?}"
    );
    run_checked(&program, &fused, &capped);
    // On an adapter with the cap, the kernels that once left loops early run to their ends.
    if let Some(limits) = capped_adapter() {
        let options = gpu::Options {
            limits,
            ..gpu_options()
        };
        for (name, sizes) in [("3mm.pf", vec![]), ("trmm.pf", vec![])] {
            run_checked(&load_sized(name, &sizes), &fused, &options);
        }
    }
}
