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
//! A second table counts the data-cache misses of the kernel function alone (its OpenMP
//! outlined parts included) under each strategy with valgrind's cachegrind, one thread, the
//! built kernel run under it through `POLYFUSE_CPU_RUNNER`; valgrind is installed with apt-get
//! when it is missing, and the table says so when it cannot be. A third runs smartfuse and
//! post-tiling fusion on the GPU adapter `polyfuse run --target gpu` picks (f64 computed in
//! f32): dispatches and the dispatches' time, medians as above, and the bytes of the
//! intermediates that keep a global buffer (those in workgroup memory for a tile have none).
//!
//! The accelerator's table comes first ([`crate::bench_fusion_npu`]; `--npu`: only it).
//!
//! `--readme` rewrites the tables between the `<!-- bench fusion -->` markers of docs/benchmarks.md.

use std::path::Path;
use std::process::Command;

use crate::runs::{checked_kernel_seconds, json_field, median, output};
use crate::{build_polyfuse, check_listing, parse_runs, workspace_root};

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
    let mut npu_only = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = parse_runs(it.next())?,
            "--readme" => readme = true,
            "--npu" => npu_only = true,
            other => return Err(format!("unknown option `{other}` of bench fusion")),
        }
    }
    let root = workspace_root();
    let polyfuse = build_polyfuse()?;
    println!("fusion benchmark on the accelerator: unfused against fused");
    let npu = crate::bench_fusion_npu::npu_table(&polyfuse, &root, KERNELS)?;
    if readme {
        crate::readme::write_section("fusion-npu", &npu)?;
    }
    println!("conv2d_bn_relu on the accelerator over the cores it may use");
    let cores = crate::bench_fusion_npu::cores_table(&polyfuse, &root)?;
    if readme {
        crate::readme::write_section("fusion-npu-cores", &cores)?;
    }
    if npu_only {
        return Ok(());
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "fusion benchmark: {} kernel(s), default sizes, median of {runs} run(s), {threads} thread(s)",
        KERNELS.len()
    );
    let mut rows = Vec::new();
    let mut miss_rows = Vec::new();
    let mut gpu_rows = Vec::new();
    let cachegrind = ensure_valgrind();
    let adapter = gpu_adapter(&polyfuse, &root);
    for k in KERNELS {
        let path = root.join("kernels").join(k);
        let temporaries = temporaries(&polyfuse, &path)?;
        let mut global = Vec::new();
        for strategy in STRATEGIES {
            global.push(global_bytes(&polyfuse, &path, strategy, &temporaries)?);
        }
        let fused = skipped_marks(&polyfuse, &path)?;
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); STRATEGIES.len()];
        for _ in 0..runs {
            for (s, strategy) in STRATEGIES.iter().enumerate() {
                times[s].push(kernel_seconds(&polyfuse, &path, strategy)?);
            }
        }
        let medians: Vec<f64> = times.iter().map(|t| median(t)).collect();
        let row = format!(
            "| {} | {} | {} | {} | {:.2}× | {} | {} |",
            k.trim_end_matches(".pf"),
            ms(medians[0]),
            ms(medians[1]),
            ms(medians[2]),
            medians[0] / medians[2],
            fused,
            global
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" / ")
        );
        println!("{row}");
        rows.push(row);
        if cachegrind.is_ok() {
            let mut cells = Vec::new();
            for strategy in STRATEGIES {
                let (d1, ll) = cache_misses(&polyfuse, &path, strategy)?;
                cells.push(format!("{d1} | {ll}"));
            }
            let row = format!("| {} | {} |", k.trim_end_matches(".pf"), cells.join(" | "));
            println!("{row}");
            miss_rows.push(row);
        }
        if adapter.is_ok() {
            let mut samples: Vec<Vec<(f64, u64)>> = vec![Vec::new(); GPU_STRATEGIES.len()];
            for _ in 0..runs {
                for (s, strategy) in GPU_STRATEGIES.iter().enumerate() {
                    samples[s].push(gpu_run(&polyfuse, &path, strategy)?);
                }
            }
            let times: Vec<f64> = samples
                .iter()
                .map(|v| median(&v.iter().map(|(t, _)| *t).collect::<Vec<_>>()))
                .collect();
            let mut global = Vec::new();
            for strategy in GPU_STRATEGIES {
                global.push(gpu_global_bytes(&polyfuse, &path, strategy, &temporaries)?);
            }
            let row = format!(
                "| {} | {} | {} | {} | {} | {:.2}× | {} |",
                k.trim_end_matches(".pf"),
                samples[0][0].1,
                ms(times[0]),
                samples[1][0].1,
                ms(times[1]),
                times[0] / times[1],
                global
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" / ")
            );
            println!("{row}");
            gpu_rows.push(row);
        }
    }
    let mut table = format!(
        "| kernel | smartfuse | maxfuse | post-tiling | speedup over smartfuse | producers fused | intermediate bytes in global memory (smartfuse / maxfuse / post-tiling) |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n{}\n",
        rows.join("\n")
    );
    table += "\nData-cache misses of the kernel function, one thread, counted by cachegrind \
              (D1: first-level misses, LL: last-level misses, reads and writes):\n\n";
    match &cachegrind {
        Ok(version) => {
            table += &format!(
                "{version}.\n\n\
                 | kernel | smartfuse D1 | smartfuse LL | maxfuse D1 | maxfuse LL | post-tiling D1 | post-tiling LL |\n\
                 | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n{}\n",
                miss_rows.join("\n")
            )
        }
        Err(why) => table += &format!("Not measured: {why}.\n"),
    }
    table += "\nOn the GPU, smartfuse against post-tiling fusion (f64 computed in f32):\n\n";
    match &adapter {
        Ok(name) => {
            table += &format!(
                "Adapter: {name}.\n\n\
                 | kernel | smartfuse dispatches | smartfuse time | post-tiling dispatches | post-tiling time | speedup | intermediate bytes in global memory (smartfuse / post-tiling) |\n\
                 | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n{}\n",
                gpu_rows.join("\n")
            )
        }
        Err(why) => table += &format!("Not measured: {why}.\n"),
    }
    if readme {
        crate::readme::write_section("fusion", &table)?;
    }
    Ok(())
}

const GPU_STRATEGIES: &[&str] = &["smartfuse", "post-tiling"];

/// The version of valgrind, installed with apt-get when it is missing; why not, when it
/// cannot be run.
fn ensure_valgrind() -> Result<String, String> {
    let version = || {
        Command::new("valgrind")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    if let Some(v) = version() {
        return Ok(v);
    }
    println!("valgrind is missing: installing it with apt-get");
    crate::apt_install(&["valgrind"]);
    version().ok_or_else(|| "valgrind is not installed and apt-get could not install it".into())
}

/// The adapter's name, from a run of a small kernel; why there is none otherwise.
fn gpu_adapter(polyfuse: &Path, root: &Path) -> Result<String, String> {
    let out = Command::new(polyfuse)
        .arg("run")
        .arg(root.join("kernels").join("layernorm.pf"))
        .args([
            "--target", "gpu", "--json", "--size", "N=8", "--size", "D=8",
        ])
        .output()
        .map_err(|e| format!("cannot run polyfuse: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let json = String::from_utf8_lossy(&out.stdout).into_owned();
    json_field(&json, "adapter")
        .map(|v| v.trim_matches('"').to_string())
        .ok_or_else(|| "no adapter name in the JSON".into())
}

/// One GPU run, checked against the interpreter: its time and its number of dispatches.
fn gpu_run(polyfuse: &Path, kernel: &Path, fuse: &str) -> Result<(f64, u64), String> {
    let json = checked_run(polyfuse, kernel, ("gpu", "--gpu-f32", "the GPU"), fuse, &[])?;
    let number = |name: &str| {
        json_field(&json, name)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("{}: no `{name}` in the JSON", kernel.display()))
    };
    Ok((number("kernel_seconds")?, number("dispatches")? as u64))
}

/// The D1 and last-level data-cache misses of the kernel function of `kernel` under `fuse`,
/// one thread, counted by cachegrind.
fn cache_misses(polyfuse: &Path, kernel: &Path, fuse: &str) -> Result<(u64, u64), String> {
    let dir = std::env::temp_dir().join(format!("polyfuse-cachegrind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join("cachegrind.out");
    let runner = format!(
        "valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file={}",
        file.display()
    );
    let json = output(
        Command::new(polyfuse)
            .arg("run")
            .arg(kernel)
            .args([
                "--target",
                "cpu",
                "--json",
                "--threads",
                "1",
                "--fuse",
                fuse,
            ])
            .env("POLYFUSE_CPU_RUNNER", runner)
            // valgrind does not decode AVX-512.
            .env("POLYFUSE_CPU_CFLAGS", "-mno-avx512f"),
    )?;
    if json_field(&json, "matches_interp").as_deref() != Some("true") {
        return Err(format!(
            "{} under {fuse} and cachegrind does not match the interpreter",
            kernel.display()
        ));
    }
    let name = json_field(&json, "kernel")
        .map(|v| v.trim_matches('"').to_string())
        .ok_or_else(|| format!("{}: no kernel name in the JSON", kernel.display()))?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    kernel_misses(&text, &name).ok_or_else(|| {
        format!(
            "{}: cachegrind's output has no function `{name}`",
            kernel.display()
        )
    })
}

/// Sums the D1 and LL data misses of the functions named `name` or `name._omp_fn.K` in a
/// cachegrind output file.
fn kernel_misses(text: &str, name: &str) -> Option<(u64, u64)> {
    let events: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("events: "))?
        .split_whitespace()
        .collect();
    let column = |e: &str| events.iter().position(|x| *x == e);
    let (d1r, d1w, llr, llw) = (
        column("D1mr")?,
        column("D1mw")?,
        column("DLmr")?,
        column("DLmw")?,
    );
    let (mut d1, mut ll, mut inside, mut seen) = (0u64, 0u64, false, false);
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("fn=") {
            inside = f == name || f.starts_with(&format!("{name}._omp_fn."));
            seen |= inside;
            continue;
        }
        if !inside || !line.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        // The line number, then one count per event (missing trailing counts are zero).
        let counts: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|n| n.parse().unwrap_or(0))
            .collect();
        let at = |k: usize| counts.get(k).copied().unwrap_or(0);
        d1 += at(d1r) + at(d1w);
        ll += at(llr) + at(llw);
    }
    seen.then_some((d1, ll))
}

fn ms(s: f64) -> String {
    format!("{:.2} ms", s * 1e3)
}

/// The kernel time `polyfuse run --json` reports, after checking the result.
fn kernel_seconds(polyfuse: &Path, kernel: &Path, fuse: &str) -> Result<f64, String> {
    let json = output(
        Command::new(polyfuse)
            .arg("run")
            .arg(kernel)
            .args(["--target", "cpu", "--json", "--fuse", fuse]),
    )?;
    checked_kernel_seconds(&json, &format!("{} under {fuse}", kernel.display()))
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

/// The bytes of the temporaries that keep a global buffer in the C of `kernel` under `fuse`:
/// all but those living in tiles (`NAME_tile[…]` arrays).
fn global_bytes(
    polyfuse: &Path,
    kernel: &Path,
    fuse: &str,
    temporaries: &[(String, u64)],
) -> Result<u64, String> {
    let c = output(
        Command::new(polyfuse)
            .arg("compile")
            .arg(kernel)
            .args(["--target", "cpu", "--fuse", fuse]),
    )?;
    Ok(temporaries
        .iter()
        .filter(|(name, _)| {
            // `NAME_tile[` not preceded by a character of a longer identifier.
            let local = format!("{name}_tile[");
            !c.match_indices(&local).any(|(at, _)| {
                !c[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|ch| ch.is_alphanumeric() || ch == '_')
            })
        })
        .map(|(_, bytes)| bytes)
        .sum())
}

/// The bytes of the temporaries that keep a global buffer in the WGSL of `kernel` under
/// `fuse`: all but those living in workgroup memory for a tile (`pf_tl_kN_NAME` arrays).
fn gpu_global_bytes(
    polyfuse: &Path,
    kernel: &Path,
    fuse: &str,
    temporaries: &[(String, u64)],
) -> Result<u64, String> {
    let wgsl = output(Command::new(polyfuse).arg("compile").arg(kernel).args([
        "--target",
        "gpu",
        "--gpu-f32",
        "--fuse",
        fuse,
    ]))?;
    Ok(temporaries
        .iter()
        .filter(|(name, _)| {
            let local = format!("_{name}: array<");
            !wgsl.lines().any(|l| {
                l.strip_prefix("var<workgroup> pf_tl_k")
                    .and_then(|rest| {
                        rest.trim_start_matches(|c: char| c.is_ascii_digit())
                            .strip_prefix(&local[..])
                    })
                    .is_some()
            })
        })
        .map(|(_, bytes)| bytes)
        .sum())
}

/// The kernel's temporaries and their bytes at its default sizes (`polyfuse check` lists them
/// as `NAME: TYPE[DIMS] temporary`).
fn temporaries(polyfuse: &Path, kernel: &Path) -> Result<Vec<(String, u64)>, String> {
    let text = output(Command::new(polyfuse).arg("check").arg(kernel))?;
    let arrays = check_listing::arrays(&text).map_err(|e| format!("{}: {e}", kernel.display()))?;
    Ok(arrays
        .into_iter()
        .filter(|a| a.role == "temporary")
        .map(|a| {
            let size = check_listing::elem_bytes(&a.elem).unwrap_or(8);
            (a.name, size * a.elements)
        })
        .collect())
}

/// `polyfuse run kernel --json` on `target` (its name, the flag computing f64 in f32, and how
/// messages name it) under `fuse`, with `extra` options: the JSON, once it says the outputs
/// match the interpreter.
pub(crate) fn checked_run(
    polyfuse: &Path,
    kernel: &Path,
    (target, f32_flag, named): (&str, &str, &str),
    fuse: &str,
    extra: &[String],
) -> Result<String, String> {
    let json = output(
        Command::new(polyfuse)
            .arg("run")
            .arg(kernel)
            .args(["--target", target, f32_flag, "--json", "--fuse", fuse])
            .args(extra),
    )?;
    if json_field(&json, "matches_interp").as_deref() != Some("true") {
        return Err(format!(
            "{} under {fuse} does not match the interpreter on {named}",
            kernel.display()
        ));
    }
    Ok(json)
}
