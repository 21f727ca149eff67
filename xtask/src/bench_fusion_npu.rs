//! The accelerator's part of `cargo xtask bench fusion`: each fusion kernel on the simulator
//! fused (`--fuse post-tiling`: statements fused into tiles, intermediates in L1 or UB) and
//! unfused (`--fuse nofuse`: every statement group its own kernel, intermediates through GM),
//! f64 computed in f32. Both runs are checked against the interpreter; the simulator is
//! deterministic, so one run each gives its cycles and the bytes it read from and wrote to GM.
//!
//! `cargo xtask bench fusion --npu` runs this part alone; with `--readme` it rewrites the
//! tables between the `<!-- bench fusion-npu -->` markers of README.md.

use std::path::Path;

use crate::bench_fusion::checked_run;
use crate::runs::json_field;

/// What one simulated run reports.
struct Sim {
    cycles: u64,
    gm_bytes: u64,
    kernels: usize,
}

/// One run of `kernel` on the accelerator under `fuse`, checked against the interpreter.
fn npu_run(polyfuse: &Path, kernel: &Path, fuse: &str) -> Result<Sim, String> {
    let json = checked_run(
        polyfuse,
        kernel,
        ("npu", "--npu-f32", "the accelerator"),
        fuse,
    )?;
    let number = |name: &str| {
        json_field(&json, name)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("{}: no `{name}` in the JSON", kernel.display()))
    };
    // The simulator's report names its kernels `A + B + …` (the second `kernel` field).
    let kernels = json
        .split("\"kernel\": \"")
        .nth(2)
        .and_then(|rest| rest.split('"').next())
        .map_or(1, |names| names.split(" + ").count());
    Ok(Sim {
        cycles: number("cycles")?,
        gm_bytes: number("gm_read_bytes")? + number("gm_written_bytes")?,
        kernels,
    })
}

/// The table of the accelerator's runs of `kernels` (file names under `root/kernels`).
pub(crate) fn npu_table(polyfuse: &Path, root: &Path, kernels: &[&str]) -> Result<String, String> {
    let mut rows = Vec::new();
    for k in kernels {
        let path = root.join("kernels").join(k);
        let unfused = npu_run(polyfuse, &path, "nofuse")?;
        let fused = npu_run(polyfuse, &path, "post-tiling")?;
        let row = format!(
            "| {} | {} / {} | {} | {} | {:.2}× | {} | {} | {:.0}% |",
            k.trim_end_matches(".pf"),
            unfused.kernels,
            fused.kernels,
            unfused.cycles,
            fused.cycles,
            unfused.cycles as f64 / fused.cycles.max(1) as f64,
            unfused.gm_bytes,
            fused.gm_bytes,
            100.0 * fused.gm_bytes as f64 / unfused.gm_bytes.max(1) as f64,
        );
        println!("{row}");
        rows.push(row);
    }
    Ok(format!(
        "| kernel | kernels (unfused / fused) | unfused cycles | fused cycles | speedup | unfused GM bytes | fused GM bytes | fused / unfused GM bytes |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n{}\n",
        rows.join("\n")
    ))
}
