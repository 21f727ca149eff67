//! The packing decisions (one line per packed array: the array, its layout and the reason)
//! for the dense kernels: on the CPU target at the kernels' default sizes (PolyBench's LARGE
//! dataset for C), and on a small machine with a tiny TLB at the test sizes, where the same
//! analysis finds more to pack. The generated code of these decisions is checked against the
//! interpreter in `cpu.rs`.

use std::fmt::Write as _;

use backends::cpu;
use polyhedral::passes::pack;
use polyhedral::passes::tile_size::TileSizes;
use polyhedral::pipeline::{compile, Options};
use snapshots::{kernels, load, load_small, packing_target, snapshot_name};

const KERNELS: &[&str] = &[
    "gemm",
    "2mm",
    "3mm",
    "syrk",
    "trmm",
    "doitgen",
    "contract3d",
    "conv2d_relu",
    "conv2d_bn_relu",
];

#[test]
fn packing_decisions_of_the_dense_kernels() {
    for path in kernels() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if !KERNELS.contains(&stem.as_str()) {
            continue;
        }
        let mut report = String::new();
        for (label, program, target) in [
            ("cpu, default sizes", load(&path), cpu::description()),
            ("tiny TLB, test sizes", load_small(&path), packing_target()),
        ] {
            let c = compile(&program, &target, &Options::default())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let decisions = pack::describe(&c.tree);
            let _ = writeln!(report, "{label}:");
            if decisions.is_empty() {
                let _ = writeln!(report, "  nothing packed");
            }
            for line in decisions.lines() {
                let _ = writeln!(report, "  {line}");
            }
            let unpacked = compile(
                &program,
                &target,
                &Options {
                    pack: false,
                    ..Options::default()
                },
            )
            .unwrap();
            assert!(
                pack::describe(&unpacked.tree).is_empty(),
                "{}: packed with packing off",
                path.display()
            );
        }
        insta::assert_snapshot!(format!("pack_{}", snapshot_name(&path)), report);
    }
}

/// Post-tiling fusion pulls the initialisation of `C` into each tile of the contraction with an
/// extension node; the loops below it that run only the contraction are still analysed, and
/// pack what the same loops pack without fusion. The tiles are fixed to ones that tile the
/// `k` loop (the search leaves it whole at the default sizes), so that `B` is reused across
/// a loop below the extension.
#[test]
fn loops_below_an_extension_are_packed() {
    let path = kernels()
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "contract3d.pf"))
        .expect("contract3d.pf is a kernel");
    let program = load(&path);
    let tiles = TileSizes::Fixed(vec![32, 128, 2]);
    let fused = Options {
        post_tiling_fusion: true,
        tiling: tiles.clone(),
        ..Options::default()
    };
    let c = compile(&program, &cpu::description(), &fused).unwrap();
    let plain = Options {
        tiling: tiles,
        ..Options::default()
    };
    let plain = compile(&program, &cpu::description(), &plain).unwrap();
    let decisions = pack::describe(&c.tree);
    assert!(decisions.contains("pack B layout [1, 2, 0]"), "{decisions}");
    assert_eq!(decisions, pack::describe(&plain.tree));
}
