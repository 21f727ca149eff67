//! `cargo xtask bench gpu`: the GPU target with and without memory promotion, in one run, on
//! the adapter `polyfuse run --target gpu` picks (`--adapter NAME` or `POLYFUSE_GPU_ADAPTER`
//! to choose).
//!
//! For gemm, 2mm, conv2d_relu, jacobi2d, softmax and layernorm (f64 kernels computed in f32),
//! every run goes through `polyfuse run --target gpu --json`, which checks the outputs against
//! the interpreter, so a wrong result is never timed; a kernel's time is the median of `--runs`
//! runs (default 3) of the dispatches alone (GPU timestamps around their compute pass where the
//! adapter has timestamp queries, else submission to completion; after a first run that lets
//! the driver compile lazily), promoted and unpromoted runs interleaved so that noise
//! from the shared machine falls on both alike. GFLOP/s count the floating-point operations of
//! the kernel's statements (a multiply-add is two).
//!
//! `--readme` rewrites the table between the `<!-- bench gpu -->` markers of docs/benchmarks.md.

use std::process::Command;

use crate::runs::median;
use crate::{build_polyfuse, parse_runs, workspace_root};

/// A kernel's sizes, by name.
type Sizes<'a> = &'a dyn Fn(&str) -> f64;

/// A kernel: file, sizes, and its floating-point operations at those sizes.
struct Case {
    file: &'static str,
    sizes: &'static [(&'static str, i64)],
    flops: fn(Sizes) -> f64,
}

const CASES: &[Case] = &[
    Case {
        file: "gemm.pf",
        sizes: &[("NI", 256), ("NJ", 256), ("NK", 256)],
        // C = beta·C, then C += alpha·A·B: 3 operations per (i, j, k).
        flops: |s| s("NI") * s("NJ") * (1.0 + 3.0 * s("NK")),
    },
    Case {
        file: "2mm.pf",
        sizes: &[("NI", 192), ("NJ", 192), ("NK", 192), ("NL", 192)],
        flops: |s| s("NI") * s("NJ") * (3.0 * s("NK")) + s("NI") * s("NL") * (1.0 + 2.0 * s("NJ")),
    },
    Case {
        file: "conv2d_relu.pf",
        sizes: &[],
        flops: |s| s("CO") * s("H") * s("W") * (2.0 * s("CI") * s("KH") * s("KW") + 2.0),
    },
    Case {
        file: "jacobi2d.pf",
        sizes: &[("TSTEPS", 10), ("N", 258)],
        flops: |s| s("TSTEPS") * 2.0 * (s("N") - 2.0) * (s("N") - 2.0) * 5.0,
    },
    Case {
        file: "softmax.pf",
        sizes: &[],
        flops: |s| s("N") * s("M") * 4.0,
    },
    Case {
        file: "layernorm.pf",
        sizes: &[],
        flops: |s| s("N") * s("D") * 9.0,
    },
];

/// The size defaults of a `.pf` kernel's header (`NAME = VALUE` between `<` and `>`).
fn defaults(text: &str) -> Vec<(String, f64)> {
    let Some(start) = text.find("kernel ") else {
        return Vec::new();
    };
    let rest = &text[start..];
    let (Some(open), Some(close)) = (rest.find('<'), rest.find('>')) else {
        return Vec::new();
    };
    rest[open + 1..close]
        .split(',')
        .filter_map(|p| {
            let (n, v) = p.split_once('=')?;
            Some((n.trim().to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

struct Run {
    seconds: f64,
    adapter: String,
}

fn run_once(
    polyfuse: &std::path::Path,
    case: &Case,
    promote: bool,
    adapter: Option<&str>,
) -> Result<Run, String> {
    let root = workspace_root();
    let mut cmd = Command::new(polyfuse);
    cmd.arg("run")
        .arg(root.join("kernels").join(case.file))
        .args(["--target", "gpu", "--gpu-f32", "--json"]);
    for (n, v) in case.sizes {
        cmd.arg("--size").arg(format!("{n}={v}"));
    }
    if !promote {
        cmd.arg("--no-promote");
    }
    if let Some(a) = adapter {
        cmd.args(["--adapter", a]);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{} ({}): {}",
            case.file,
            if promote { "promoted" } else { "unpromoted" },
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let number = |key: &str| -> Option<String> {
        let at = text.find(&format!("\"{key}\""))?;
        let rest = &text[at + key.len() + 2..];
        let rest = rest.trim_start().strip_prefix(':')?.trim_start();
        if let Some(quoted) = rest.strip_prefix('"') {
            return Some(quoted[..quoted.find('"')?].to_string());
        }
        let end = rest.find([',', '\n', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim().to_string())
    };
    if number("matches_interp").as_deref() != Some("true") {
        return Err(format!(
            "{}: the GPU's outputs differ from the interpreter's",
            case.file
        ));
    }
    Ok(Run {
        seconds: number("kernel_seconds")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{}: no kernel time in {text}", case.file))?,
        adapter: number("adapter").unwrap_or_default(),
    })
}

pub(crate) fn bench_gpu(args: &[String]) -> Result<(), String> {
    let mut runs = 3usize;
    let mut readme = false;
    let mut adapter = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = parse_runs(it.next())?,
            "--readme" => readme = true,
            "--adapter" => adapter = Some(it.next().ok_or("--adapter needs a name")?.clone()),
            other => return Err(format!("unknown option `{other}` of bench gpu")),
        }
    }
    let root = workspace_root();
    let polyfuse = build_polyfuse()?;
    let mut rows = Vec::new();
    let mut adapter_name = String::new();
    for case in CASES {
        let text = std::fs::read_to_string(root.join("kernels").join(case.file))
            .map_err(|e| format!("{}: {e}", case.file))?;
        let mut sizes = defaults(&text);
        for (n, v) in case.sizes {
            match sizes.iter_mut().find(|(m, _)| m == n) {
                Some(s) => s.1 = *v as f64,
                None => sizes.push((n.to_string(), *v as f64)),
            }
        }
        let size = |n: &str| sizes.iter().find(|(m, _)| m == n).map_or(0.0, |s| s.1);
        let flops = (case.flops)(&size);
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let r = run_once(&polyfuse, case, true, adapter.as_deref())?;
            adapter_name = r.adapter;
            on.push(r.seconds);
            off.push(run_once(&polyfuse, case, false, adapter.as_deref())?.seconds);
        }
        let (on, off) = (median(&on), median(&off));
        let shown: Vec<String> = sizes.iter().map(|(n, v)| format!("{n}={v}")).collect();
        eprintln!("{}: promoted {on:.4} s, unpromoted {off:.4} s", case.file);
        rows.push(format!(
            "| {} | {} | {:.4} s | {:.4} | {:.4} s | {:.4} | {:.2}× |",
            case.file.trim_end_matches(".pf"),
            shown.join(" "),
            on,
            flops / on / 1e9,
            off,
            flops / off / 1e9,
            off / on
        ));
    }
    let table = format!(
        "Adapter: {adapter_name}; median of {runs} runs of the dispatches; f64 kernels computed \
         in f32.\n\n| kernel | sizes | promoted | GFLOP/s | unpromoted | GFLOP/s | promotion speedup |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: |\n{}\n",
        rows.join("\n")
    );
    print!("{table}");
    if readme {
        crate::readme::write_section("gpu", &table)?;
    }
    Ok(())
}
