//! Marks on every kernel: every mark the passes leave in the tree for the CPU (packs, register
//! and reduction tiles), the GPU (kernels, threads) and the accelerator (contractions on the
//! matrix unit), fused after tiling or not (skipped and unfused producers), reads back from
//! the text `--emit tree` prints as the same mark.

use backends::npu::NpuTarget;
use backends::{cpu, gpu};
use polyhedral::pipeline::{self, Options};
use polyhedral::schedule::{Mark, NodeKind, ScheduleTree};
use snapshots::{kernels, load};

fn marks(tree: &ScheduleTree) -> Vec<Mark> {
    let mut out = Vec::new();
    tree.root.walk(&mut |n| {
        if let NodeKind::Mark(m) = &n.kind {
            out.push(m.clone());
        }
    });
    out
}

#[test]
fn every_mark_of_every_kernel_reads_back_from_its_text() {
    let gpu_options = gpu::Options {
        f64_as_f32: true,
        ..gpu::Options::default()
    };
    let npu = NpuTarget::default().description(true);
    let mut kinds = std::collections::HashSet::new();
    for path in kernels() {
        let program = load(&path);
        for post_tiling_fusion in [false, true] {
            let options = Options {
                post_tiling_fusion,
                ..Options::default()
            };
            let mut trees = Vec::new();
            if let Ok(c) = pipeline::compile(&program, &cpu::description(), &options) {
                trees.push(c.tree);
            }
            if let Ok(c) = gpu::compile(&program, &options, &gpu_options) {
                trees.push(c.compiled.tree);
            }
            if let Ok(c) = pipeline::compile(&program, &npu, &options) {
                trees.push(c.tree);
            }
            for mark in trees.iter().flat_map(marks) {
                let text = mark.to_string();
                assert_eq!(
                    Mark::parse(&text).as_ref(),
                    Some(&mark),
                    "{}: {text}",
                    path.display()
                );
                kinds.insert(std::mem::discriminant(&mark));
            }
        }
    }
    // Packs, register and reduction tiles, kernels, threads, skipped and unfused producers,
    // contractions on the matrix unit.
    assert_eq!(kinds.len(), 8, "some kind of mark never appeared");
}
