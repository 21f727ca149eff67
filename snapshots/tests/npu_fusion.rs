//! The accelerator fused and unfused: every kernel in `kernels/` the target takes runs, on
//! the simulator (which stops on any race, deadlock or out-of-buffer operand), like the
//! interpreter both with statements fused into tiles (the default, `--fuse post-tiling`) and
//! with every statement group its own kernel (`--fuse nofuse`); the fused intermediates have
//! no GM tensor, the unfused ones have, and the fused program moves fewer bytes to and from GM.

use std::path::Path;

use backends::npu::{self, NpuCheck, NpuTarget, Options};
use polyhedral::Program;
use snapshots::kernels;

/// A kernel with every size cut to at most 48 (sizes that leave partial tiles and partial
/// fractals).
fn load_cut(path: &Path) -> Program {
    let mut program = snapshots::load(path);
    for p in &mut program.params {
        p.value = p.value.min(48);
    }
    program
}

fn options(fuse: bool) -> Options {
    Options {
        f64_as_f32: true,
        fuse,
        ..Options::default()
    }
}

fn run(program: &Program, fuse: bool) -> NpuCheck {
    let checked = npu::check(program, &NpuTarget::default(), &options(fuse), 5, false)
        .unwrap_or_else(|e| panic!("{} (fuse: {fuse}): {e}", program.name));
    assert!(
        checked.comparison.passed(),
        "{} (fuse: {fuse}) differs from the interpreter:\n{}",
        program.name,
        checked.comparison.to_text(program)
    );
    checked
}

fn gm_bytes(c: &NpuCheck) -> u64 {
    c.report.gm_read_bytes + c.report.gm_written_bytes
}

fn kernel_count(c: &NpuCheck) -> usize {
    c.asm.lines().filter(|l| l.starts_with("kernel ")).count()
}

#[test]
fn every_kernel_runs_fused_and_unfused_like_the_interpreter() {
    let mut taken = 0;
    for path in kernels() {
        let program = load_cut(&path);
        if npu::supported(&program, &options(true)).is_err() {
            continue;
        }
        eprintln!("{}", path.display());
        npu::supported(&program, &options(false))
            .unwrap_or_else(|e| panic!("{}: fused but not unfused: {e}", path.display()));
        let fused = run(&program, true);
        let unfused = run(&program, false);
        assert!(
            gm_bytes(&fused) <= gm_bytes(&unfused),
            "{}: fused {} GM bytes, unfused {}",
            path.display(),
            gm_bytes(&fused),
            gm_bytes(&unfused)
        );
        taken += 1;
    }
    assert!(taken >= 20, "only {taken} kernels taken");
}

#[test]
fn fused_intermediates_have_no_gm_tensor_and_unfused_ones_have() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    for (file, temporaries) in [
        ("conv2d_relu.pf", &["Conv"][..]),
        ("conv2d_bn_relu.pf", &["Conv", "Norm"]),
        ("blur_unsharp.pf", &["Bx", "By"]),
        ("softmax.pf", &["mx", "e", "s"]),
        ("layernorm.pf", &["sum", "mu", "sq", "rstd"]),
        ("gemm_bias_relu.pf", &["T"]),
    ] {
        let program = load_cut(&dir.join(file));
        let fused = run(&program, true);
        let unfused = run(&program, false);
        for t in temporaries {
            let param = format!("param {t} : ");
            assert!(!fused.asm.contains(&param), "{file}: {t}\n{}", fused.asm);
            // Written by one kernel, read by a later one.
            assert!(
                unfused.asm.matches(&param).count() >= 2,
                "{file}: {t}\n{}",
                unfused.asm
            );
        }
        assert!(
            kernel_count(&fused) < kernel_count(&unfused),
            "{file}: as many kernels fused as unfused"
        );
        assert!(
            gm_bytes(&fused) < gm_bytes(&unfused),
            "{file}: fused {} GM bytes, unfused {}",
            gm_bytes(&fused),
            gm_bytes(&unfused)
        );
    }
}

#[test]
fn an_unfused_epilogue_over_channels_rows_and_columns_runs_on_the_vector_unit() {
    // conv2d_bn_relu's batch normalisation reads the convolution from GM as rows of channels
    // (`[co, y · W + x]`), per-channel vectors and a scalar; the tensor keeps its shape.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/conv2d_bn_relu.pf");
    let mut program = snapshots::load(&path);
    for (name, value) in [("CO", 20), ("H", 7), ("W", 9)] {
        let p = program
            .params
            .iter_mut()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no size {name}"));
        p.value = value;
    }
    let unfused = run(&program, false);
    assert!(
        unfused.asm.contains("param Conv : f32[20, 7, 9] out")
            && unfused.asm.contains("param Conv : f32[20, 7, 9] in"),
        "{}",
        unfused.asm
    );
}

/// conv2d_bn_relu at its default size: fused, it takes fewer cycles than the unfused schedule
/// and moves at most half its GM bytes (the unfused convolution, normalisation and ReLU each
/// write their result and the next reads it back), and what it moves is its output once and, per block, the weights
/// and the batch-normalisation vectors once and its output rows' input rows plus the halo
/// (`KH − 1` rows) — nothing is read again for another tile of the block.
#[test]
fn a_fused_convolution_reads_its_weights_once_per_block_and_beats_the_unfused_schedule() {
    let path = kernels()
        .into_iter()
        .find(|p| p.ends_with("conv2d_bn_relu.pf"))
        .expect("kernels/conv2d_bn_relu.pf");
    let program = snapshots::load(&path);
    let fused = run(&program, true);
    let unfused = run(&program, false);
    assert!(
        fused.report.cycles < unfused.report.cycles,
        "fused {} cycles, unfused {}",
        fused.report.cycles,
        unfused.report.cycles
    );
    assert!(
        2 * gm_bytes(&fused) <= gm_bytes(&unfused),
        "fused {} GM bytes, unfused {}",
        gm_bytes(&fused),
        gm_bytes(&unfused)
    );
    // CI = 16, CO = 32, H = W = 56, 3×3, f32: input rows of 58 elements.
    let blocks = u64::from(fused.report.blocks);
    let (ci, co, h, w, kh, es) = (16, 32, 56, 56, 3, 4);
    assert_eq!(h % blocks, 0, "{blocks} blocks");
    let output = co * h * w * es;
    let rows = blocks * (h / blocks + kh - 1) * ci * (w + 2) * es;
    let weights = blocks * co * ci * kh * kh * es;
    // mean, variance, gamma and beta, and eps in a 32-byte block.
    let vectors = blocks * (4 * co * es + 32);
    assert_eq!(gm_bytes(&fused), output + rows + weights + vectors);
}
