//! The accelerator's part of `cargo xtask bench fusion`: each fusion kernel on the simulator
//! fused (`--fuse post-tiling`: statements fused into tiles, intermediates in L1 or UB) and
//! unfused (`--fuse nofuse`: every statement group its own kernel, intermediates through GM),
//! f64 computed in f32. Both runs are checked against the interpreter; the simulator is
//! deterministic, so one run each gives its cycles and the bytes it read from and wrote to GM.
//!
//! A second table sweeps the cores conv2d_bn_relu may use (`--npu-cores N`, fused and unfused
//! alike): every block of a convolution reads all the weights and the halo rows of its output
//! rows, so fewer blocks read less GM, at some cost in cycles.
//!
//! `cargo xtask bench fusion --npu` runs this part alone; with `--readme` it rewrites the
//! tables between the `<!-- bench fusion-npu -->` and `<!-- bench fusion-npu-cores -->`
//! markers of docs/benchmarks.md.

use std::path::Path;

use crate::bench_fusion::checked_run;
use crate::runs::json_field;

/// What one simulated run reports.
struct Sim {
    cycles: u64,
    gm_bytes: u64,
    kernels: usize,
    /// Blocks of all its kernels together, and the most cores one of them used.
    blocks: u64,
    cores: u64,
}

/// The core counts of the sweep (`None`: every core, the default).
const CORES: &[Option<u64>] = &[
    None,
    Some(16),
    Some(14),
    Some(12),
    Some(10),
    Some(8),
    Some(7),
    Some(4),
    Some(2),
    Some(1),
];

/// The kernel the core sweep runs.
const SWEPT: &str = "conv2d_bn_relu.pf";

/// One run of `kernel` on the accelerator under `fuse` (on at most `cores` cores), checked
/// against the interpreter.
fn npu_run(polyfuse: &Path, kernel: &Path, fuse: &str, cores: Option<u64>) -> Result<Sim, String> {
    let cores_arg: Vec<String> = cores
        .map(|n| format!("--npu-cores={n}"))
        .into_iter()
        .collect();
    let json = checked_run(
        polyfuse,
        kernel,
        ("npu", "--npu-f32", "the accelerator"),
        fuse,
        &cores_arg,
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
        blocks: number("blocks")?,
        cores: number("cores_used")?,
    })
}

/// The table of the accelerator's runs of `kernels` (file names under `root/kernels`).
pub(crate) fn npu_table(polyfuse: &Path, root: &Path, kernels: &[&str]) -> Result<String, String> {
    let mut rows = Vec::new();
    for k in kernels {
        let path = root.join("kernels").join(k);
        let unfused = npu_run(polyfuse, &path, "nofuse", None)?;
        let fused = npu_run(polyfuse, &path, "post-tiling", None)?;
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

/// The sweep of [`SWEPT`] over [`CORES`]: fused and unfused on the same cores, and the fused
/// traffic against the unfused schedule's on every core (the default).
pub(crate) fn cores_table(polyfuse: &Path, root: &Path) -> Result<String, String> {
    let path = root.join("kernels").join(SWEPT);
    let mut rows = Vec::new();
    // The unfused schedule on every core: (cycles, GM bytes).
    let mut default_unfused: Option<(u64, u64)> = None;
    for &cores in CORES {
        let unfused = npu_run(polyfuse, &path, "nofuse", cores)?;
        let fused = npu_run(polyfuse, &path, "post-tiling", cores)?;
        let (base_cycles, base_bytes) =
            *default_unfused.get_or_insert((unfused.cycles, unfused.gm_bytes));
        let share = fused.gm_bytes as f64 / unfused.gm_bytes.max(1) as f64;
        let share_default = fused.gm_bytes as f64 / base_bytes.max(1) as f64;
        let met = |share: f64, cycles: u64| share <= 0.5 && fused.cycles < cycles;
        let row = format!(
            "| {} | {} / {} | {} / {} | {} | {} | {} | {} | {:.0}% | {:.0}% | {} |",
            cores.map_or("all".to_string(), |n| n.to_string()),
            unfused.blocks,
            fused.blocks,
            unfused.cores,
            fused.cores,
            unfused.cycles,
            fused.cycles,
            unfused.gm_bytes,
            fused.gm_bytes,
            100.0 * share,
            100.0 * share_default,
            match (met(share, unfused.cycles), met(share_default, base_cycles)) {
                (true, true) => "yes (both)",
                (true, false) => "against the same cores",
                (false, true) => "against all cores",
                (false, false) => "no",
            },
        );
        println!("{row}");
        rows.push(row);
    }
    Ok(format!(
        "| `--npu-cores` | blocks (unfused / fused) | cores used (unfused / fused) | unfused cycles | fused cycles | unfused GM bytes | fused GM bytes | fused / unfused GM bytes | fused / unfused GM bytes on all cores | fused GM ≤ 50% with fewer cycles |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n{}\n",
        rows.join("\n")
    ))
}
