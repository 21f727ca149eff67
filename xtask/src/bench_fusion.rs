//! `cargo xtask bench fusion`: the fusion kernels at their default sizes on the CPU under
//! three strategies, smartfuse, maxfuse and post-tiling fusion.
//!
//! Every kernel runs through `polyfuse run --target cpu --json` (release build), which checks
//! the result against the reference interpreter before a time is reported; a kernel's time is
//! the median of `--runs` runs (default 3), the strategies interleaved so that noise from the
//! shared machine falls on all of them alike. For each strategy the table also gives the bytes
//! of the intermediate arrays that live in global memory (every temporary of the kernel whose
//! global buffer the generated C allocates) and how many producers post-tiling fusion pulled
//! into the consumers' tiles (`skipped` marks in `--emit tree`).
//!
//! `--readme` rewrites the table between the `<!-- bench fusion -->` markers of README.md.

use std::path::Path;
use std::process::Command;

use crate::{build_polyfuse, parse_runs, workspace_root};

const README_BEGIN: &str = "<!-- bench fusion: begin -->";
const README_END: &str = "<!-- bench fusion: end -->";
const KERNELS: &[&str] = &[
    "conv2d_relu.pf",
    "conv2d_bn_relu.pf",
    "blur_unsharp.pf",
    "softmax.pf",
    "layernorm.pf",
    "gemm_bias_relu.pf",
    "2mm.pf",
];
const STRATEGIES: &[&str] = &["smartfuse", "maxfuse", "post-tiling"];

pub(crate) fn bench_fusion(args: &[String]) -> Result<(), String> {
    let mut runs = 3usize;
    let mut readme = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = parse_runs(it.next())?,
            "--readme" => readme = true,
            other => return Err(format!("unknown option `{other}` of bench fusion")),
        }
    }
    let root = workspace_root();
    let polyfuse = build_polyfuse()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "fusion benchmark: {} kernel(s), default sizes, median of {runs} run(s), {threads} thread(s)",
        KERNELS.len()
    );
    let mut rows = Vec::new();
    for k in KERNELS {
        let path = root.join("kernels").join(k);
        let bytes = temporary_bytes(&polyfuse, &path)?;
        let fused = skipped_marks(&polyfuse, &path)?;
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); STRATEGIES.len()];
        for _ in 0..runs {
            for (s, strategy) in STRATEGIES.iter().enumerate() {
                times[s].push(kernel_seconds(&polyfuse, &path, strategy)?);
            }
        }
        let medians: Vec<f64> = times.into_iter().map(median).collect();
        let row = format!(
            "| {} | {} | {} | {} | {:.2}× | {} | {} |",
            k.trim_end_matches(".pf"),
            ms(medians[0]),
            ms(medians[1]),
            ms(medians[2]),
            medians[0] / medians[2],
            fused,
            bytes
        );
        println!("{row}");
        rows.push(row);
    }
    let table = format!(
        "| kernel | smartfuse | maxfuse | post-tiling | speedup over smartfuse | producers fused | intermediate bytes (global, every strategy) |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n{}\n",
        rows.join("\n")
    );
    if readme {
        let file = root.join("README.md");
        let text = std::fs::read_to_string(&file).map_err(|e| format!("README.md: {e}"))?;
        let (Some(b), Some(e)) = (text.find(README_BEGIN), text.find(README_END)) else {
            return Err(format!(
                "README.md has no {README_BEGIN} … {README_END} markers"
            ));
        };
        let new = format!("{}{README_BEGIN}\n{table}{}", &text[..b], &text[e..]);
        std::fs::write(&file, new).map_err(|e| format!("README.md: {e}"))?;
        println!("README.md updated");
    }
    Ok(())
}

fn ms(s: f64) -> String {
    format!("{:.2} ms", s * 1e3)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn output(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run polyfuse: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "polyfuse failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The kernel time `polyfuse run --json` reports, after checking the result.
fn kernel_seconds(polyfuse: &Path, kernel: &Path, fuse: &str) -> Result<f64, String> {
    let json = output(
        Command::new(polyfuse)
            .arg("run")
            .arg(kernel)
            .args(["--target", "cpu", "--json", "--fuse", fuse]),
    )?;
    let field = |name: &str| {
        json.split(&format!("\"{name}\":"))
            .nth(1)
            .map(|rest| rest.trim_start())
    };
    if !field("matches_interp").is_some_and(|v| v.starts_with("true")) {
        return Err(format!(
            "{} under {fuse} does not match the interpreter",
            kernel.display()
        ));
    }
    field("kernel_seconds")
        .and_then(|v| {
            v.split(|c: char| c == ',' || c.is_whitespace())
                .next()
                .and_then(|n| n.parse().ok())
        })
        .ok_or_else(|| format!("{}: no kernel time in the JSON", kernel.display()))
}

/// How many producer subtrees post-tiling fusion marked `skipped`.
fn skipped_marks(polyfuse: &Path, kernel: &Path) -> Result<usize, String> {
    let tree = output(Command::new(polyfuse).arg("compile").arg(kernel).args([
        "--emit",
        "tree",
        "--fuse",
        "post-tiling",
    ]))?;
    Ok(tree.matches("mark: \"skipped\"").count())
}

/// The bytes of the kernel's temporaries at its default sizes (`polyfuse check` lists them as
/// `NAME: TYPE[DIMS] temporary`).
fn temporary_bytes(polyfuse: &Path, kernel: &Path) -> Result<u64, String> {
    let text = output(Command::new(polyfuse).arg("check").arg(kernel))?;
    let params: Vec<(String, i64)> = text
        .lines()
        .find_map(|l| l.strip_prefix("params: "))
        .map(|l| {
            l.split(", ")
                .filter_map(|p| {
                    let (n, v) = p.split_once(" = ")?;
                    Some((n.to_string(), v.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut total = 0u64;
    for line in text
        .lines()
        .filter(|l| l.trim_end().ends_with(" temporary"))
    {
        let Some((_, ty)) = line.split_once(": ") else {
            continue;
        };
        let (elem, dims) = match ty.split_once('[') {
            Some((e, rest)) => (e, rest.split(']').next().unwrap_or("")),
            None => (ty.split_whitespace().next().unwrap_or(""), ""),
        };
        let size: u64 = match elem.trim() {
            "f16" => 2,
            "f32" | "i32" => 4,
            _ => 8,
        };
        let mut count = 1u64;
        for d in dims.split(", ").filter(|d| !d.is_empty()) {
            count *= eval(d, &params)
                .ok_or_else(|| format!("{}: cannot evaluate the extent `{d}`", kernel.display()))?
                .max(0) as u64;
        }
        total += size * count;
    }
    Ok(total)
}

/// An extent `A + B - 1`, `2 * A`: sums of products of sizes and integers.
fn eval(expr: &str, params: &[(String, i64)]) -> Option<i64> {
    let spaced = expr
        .replace('*', " * ")
        .replace('+', " + ")
        .replace('-', " - ");
    let (mut total, mut sign, mut product) = (0i64, 1i64, 1i64);
    for token in spaced.split_whitespace() {
        match token {
            "+" | "-" => {
                total += sign * product;
                sign = if token == "+" { 1 } else { -1 };
                product = 1;
            }
            "*" => {}
            t => {
                product *= match t.parse::<i64>() {
                    Ok(n) => n,
                    Err(_) => params.iter().find(|(n, _)| n == t)?.1,
                };
            }
        }
    }
    Some(total + sign * product)
}
