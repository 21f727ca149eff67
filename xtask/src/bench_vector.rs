//! `cargo xtask bench vector`: function-level vectorization on the CPU. Every kernel that
//! calls a scalar function runs through `polyfuse run --target cpu --json` (checked against
//! the interpreter) with its functions vectorised (the default) and with
//! `--no-vectorize-functions`, at the same thread count (`--threads`, default 1, so that the
//! ratio is the vector speedup alone), the two interleaved, median of `--runs` runs
//! (default 3), and the ratio of the fastest runs (on a shared machine, the run least slowed
//! by others). The lanes are those of the CPU target description: 8 of 32 bits, or 4 of 64
//! bits for a function with `f64` values (`mandelbrot_f64`, whose accelerator run computes in
//! f32 with `--npu-f32`).
//!
//! The last columns come from `polyfuse check --emit vector`, which runs the masked form lane
//! by lane on random inputs: how many branches on superword condition skipped their block, and
//! the share of lanes active in the iterations of divergent loops.
//!
//! The accelerator columns come from `polyfuse run --target npu --json` (checked against the
//! interpreter) on the default machine: the simulated cycles, the Vector pipe's utilisation,
//! and how often a branch on superword condition skipped its block on the tiles the program
//! computes (every lane of a tile, not eight).
//!
//! `--readme` rewrites the table between the `<!-- bench vector -->` markers of docs/benchmarks.md.

use std::path::Path;
use std::process::Command;

use crate::runs::{checked_kernel_seconds, median, output};
use crate::{build_polyfuse, parse_runs, workspace_root};

const README_BEGIN: &str = "<!-- bench vector: begin -->";
const README_END: &str = "<!-- bench vector: end -->";
/// The kernels, the lanes of their vectors on the CPU (32 bytes of 32-bit or 64-bit values)
/// and the options of their accelerator run.
const KERNELS: &[(&str, usize, &[&str])] = &[
    ("mandelbrot.pf", 8, &[]),
    ("mandelbrot_f64.pf", 4, &["--npu-f32"]),
    ("gelu.pf", 8, &[]),
    ("threshold.pf", 8, &[]),
    ("newton_sqrt.pf", 8, &[]),
    ("collatz.pf", 8, &[]),
];

pub(crate) fn bench_vector(args: &[String]) -> Result<(), String> {
    let mut runs = 3usize;
    let mut threads = 1usize;
    let mut readme = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = parse_runs(it.next())?,
            "--threads" => threads = parse_runs(it.next())?,
            "--readme" => readme = true,
            other => return Err(format!("unknown option `{other}` of bench vector")),
        }
    }
    let root = workspace_root();
    let polyfuse = build_polyfuse()?;
    println!(
        "vector benchmark: {} kernel(s), default sizes, median of {runs} run(s), {threads} thread(s)",
        KERNELS.len()
    );
    let mut rows = Vec::new();
    for (k, lanes_per_vector, npu_args) in KERNELS {
        let path = root.join("kernels").join(k);
        let (mut scalar, mut vector) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            scalar.push(kernel_seconds(&polyfuse, &path, threads, false)?);
            vector.push(kernel_seconds(&polyfuse, &path, threads, true)?);
        }
        let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let (bs, bv) = (best(&scalar), best(&vector));
        let (s, v) = (median(&scalar), median(&vector));
        let lanes = lane_line(&polyfuse, &path)?;
        let npu = npu_columns(&polyfuse, &path, npu_args)?;
        let row = format!(
            "| {} | {} | {} | {:.2}× | {:.2}× | {:.0}% of {lanes_per_vector} | {lanes} | {npu} |",
            k.trim_end_matches(".pf"),
            ms(s),
            ms(v),
            s / v,
            bs / bv,
            100.0 * s / v / *lanes_per_vector as f64,
        );
        println!("{row}");
        rows.push(row);
    }
    let table = format!(
        "| kernel | scalar | vectorised | speedup | best / best | speedup / lanes | blocks skipped / skip tests; lanes active in divergent loops | npu cycles | npu vector pipe | npu blocks skipped / skip tests; lanes active |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |\n{}\n",
        rows.join("\n")
    );
    if readme {
        let file = root.join(crate::readme::BENCHMARKS);
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let (Some(b), Some(e)) = (text.find(README_BEGIN), text.find(README_END)) else {
            return Err(format!(
                "{} has no {README_BEGIN} … {README_END} markers",
                file.display()
            ));
        };
        let new = format!("{}{README_BEGIN}\n{table}{}", &text[..b], &text[e..]);
        std::fs::write(&file, new).map_err(|e| format!("{}: {e}", file.display()))?;
        println!("{} updated", file.display());
    }
    Ok(())
}

fn ms(s: f64) -> String {
    format!("{:.2} ms", s * 1e3)
}

fn kernel_seconds(
    polyfuse: &Path,
    kernel: &Path,
    threads: usize,
    vectorise: bool,
) -> Result<f64, String> {
    let mut cmd = Command::new(polyfuse);
    cmd.arg("run").arg(kernel).args([
        "--target",
        "cpu",
        "--json",
        "--threads",
        &threads.to_string(),
    ]);
    if !vectorise {
        cmd.arg("--no-vectorize-functions");
    }
    let json = output(&mut cmd)?;
    checked_kernel_seconds(&json, &kernel.display().to_string())
}

/// "skips / tests; active share" from the lane statistics `check --emit vector` prints.
fn lane_line(polyfuse: &Path, kernel: &Path) -> Result<String, String> {
    let text = output(
        Command::new(polyfuse)
            .arg("check")
            .arg(kernel)
            .args(["--emit", "vector"]),
    )?;
    let line = text
        .lines()
        .find(|l| l.starts_with("lanes on random inputs"))
        .ok_or_else(|| format!("{}: no lane statistics", kernel.display()))?;
    let rest = line.split("): ").nth(1).unwrap_or(line);
    let mut parts = rest.split("; ");
    let skips = parts
        .next()
        .unwrap_or("")
        .replace(" skip tests skipped their block", "")
        .replace(" of ", " / ");
    let active = parts
        .next()
        .unwrap_or("")
        .replace(" of lanes active in divergent loop iterations", "");
    Ok(format!("{skips}; {active}"))
}

/// "cycles | vector utilisation | skips / tests; active share" of the kernel on the accelerator.
fn npu_columns(polyfuse: &Path, kernel: &Path, args: &[&str]) -> Result<String, String> {
    let text = output(
        Command::new(polyfuse)
            .arg("run")
            .arg(kernel)
            .args(["--target", "npu", "--json"])
            .args(args),
    )?;
    let what = kernel.display();
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{what}: the JSON of run: {e}"))?;
    if json["matches_interp"] != serde_json::Value::Bool(true) {
        return Err(format!("{what} does not match the interpreter on npu"));
    }
    let sim = &json["simulator"];
    let cycles = sim["cycles"]
        .as_u64()
        .ok_or_else(|| format!("{what}: no cycles"))?;
    let vector = sim["pipes"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["pipe"] == "V"))
        .and_then(|p| p["utilization"].as_f64())
        .ok_or_else(|| format!("{what}: no vector pipe"))?;
    let lanes = &json["vector_lanes"];
    let n = |k: &str| lanes[k].as_u64().unwrap_or(0);
    let active = if n("masked_loop_iterations") == 0 {
        "no divergent loop".to_string()
    } else {
        format!(
            "{:.1}%",
            100.0 * n("active_lane_iterations") as f64
                / (n("masked_loop_iterations") * n("tile_lanes")).max(1) as f64
        )
    };
    Ok(format!(
        "{cycles} | {:.1}% | {} / {}; {active}",
        100.0 * vector,
        n("boscc_skips"),
        n("boscc_tests")
    ))
}
