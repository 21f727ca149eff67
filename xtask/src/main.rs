//! `cargo xtask …`: development tasks that are not tests.
//!
//! - `cargo xtask snapshot [--accept]`: run the snapshot tests; without `--accept`, list every
//!   changed snapshot with its diff and fail; with it, bless the new outputs.
//! - `cargo xtask fuzz [--seconds N] [TARGET…]`: feed random and mutated inputs to the parsers
//!   (the kernel language, C SCoPs, the integer sets' isl notation, and the simulator's
//!   `.npuasm` programs, machine descriptions and input files) for a bounded time (the
//!   stable toolchain cannot run cargo-fuzz, so each harness is an ignored test driven by an
//!   environment variable); a panic fails the run and prints the input.
//! - `cargo xtask difftest --seconds N [--seed S] [--target cpu|gpu|npu|all] [--keep]`: run
//!   random kernels on every target against the interpreter (see [`difftest`]).
//! - `cargo xtask outputs --save DIR | --against DIR`: the generated code of every kernel on
//!   every target, saved or compared (see [`outputs`]).

mod bench_cache_model;
mod bench_cpu;
mod bench_fusion;
mod bench_fusion_npu;
mod bench_gpu;
mod bench_npu;
mod bench_vector;
mod check_listing;
mod difftest;
mod outputs;
mod readme;
mod runs;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("snapshot") => snapshot(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("difftest") => difftest::difftest(&args[1..]),
        Some("outputs") => outputs::outputs(&args[1..]),
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask <task>
tasks:
  snapshot [--accept]          run the snapshot tests; --accept blesses changed outputs
  fuzz [--seconds N] [--seed S] [TARGET]
                               fuzz the parsers for N seconds each (default 60);
                               targets: pf, c, sets (isl notation), npuasm (the
                               simulator's programs, machines and inputs; default: all)
  difftest --seconds N [--seed S] [--target cpu|gpu|npu|all] [--keep] [--no-isl]
                               random kernels on every target, compared with the
                               interpreter; failures shrunk into target/difftest/;
                               with islpy, dependences and schedules checked by isl
  outputs --save DIR | --against DIR [--polybench DIR] [--only TEXT]
                               what `polyfuse compile` writes for every kernel of
                               kernels/ and PolyBench on every target (code, tree,
                               post-tiling fusion), saved or compared with a save
  bench deps                   time dependence analysis of every kernel; with islpy
                               installed, recompute the answers with isl and compare
  bench interp [--readme]      statement instances per second of the reference
                               interpreter against its tree walker; --readme writes
                               the table
  bench sim                    simulated instructions per second of the accelerator
                               simulator (release build)
  bench cpu [--kernels A,B] [--dataset D] [--runs N] [--threads N] [--active-wait]
            [--compile-limit S] [--compile-times] [--polybench DIR] [--readme]
                               every PolyBench/C 4.2.1 kernel at LARGE (EXTRALARGE when
                               short): gcc -O3 against polyfuse, Polly sequential and
                               parallel, gemm against OpenBLAS; polyfuse's compile time
                               (limit S, default 60 s); --readme writes the table
                               (with --kernels: only their rows, keeping the others);
                               --compile-times: only polyfuse's compile times
  bench cache-model [--only TEXT] [--readme]
                               every kernel under valgrind's cache simulator (one
                               thread, caches as the CPU target describes them): the
                               cache model's predicted L1, L2 and last-level misses
                               against cachegrind's; --readme writes the table
  bench fusion [--runs N] [--npu] [--readme]
                               the fusion kernels on the CPU: smartfuse, maxfuse and
                               post-tiling fusion timed; on the accelerator: cycles and
                               GM bytes, unfused against fused (--npu: only these);
                               --readme writes the tables
  bench gpu [--runs N] [--adapter NAME] [--readme]
                               gemm, 2mm, conv2d_relu, jacobi2d, softmax, layernorm on
                               the GPU adapter: promoted against unpromoted code
  bench npu [--readme]         the accelerator target on the simulator: cycles, cube and
                               vector utilisation, GM bytes, roofline bound, single against
                               double buffering; --readme writes the table
  bench vector [--runs N] [--threads N] [--readme]
                               kernels with scalar functions on the CPU: vectorised
                               against scalar functions at the same thread count,
                               blocks skipped, lanes active; --readme writes the table";

fn workspace_root() -> PathBuf {
    // xtask lives one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent folder")
        .to_path_buf()
}

/// Where cargo puts what it builds: `CARGO_TARGET_DIR` (relative to the workspace root when
/// relative), or the workspace's `target`.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target"),
    }
}

/// Builds the release `polyfuse` binary that benchmarks run, and returns its path.
fn build_polyfuse() -> Result<PathBuf, String> {
    if !status(cargo().args(["build", "--quiet", "--release", "--package", "polyfuse"]))? {
        return Err("cannot build polyfuse".into());
    }
    Ok(target_dir().join("release/polyfuse"))
}

/// The kernels in `kernels/` with one of `extensions`, sorted, keeping those whose file name
/// contains `only` when given.
fn kernel_files(extensions: &[&str], only: Option<&String>) -> Result<Vec<PathBuf>, String> {
    let dir = workspace_root().join("kernels");
    let mut kernels: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| extensions.iter().any(|x| e == *x))
        })
        .filter(|p| {
            only.is_none_or(|o| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(o.as_str()))
            })
        })
        .collect();
    kernels.sort();
    Ok(kernels)
}

/// The value of a benchmark's `--runs` option.
fn parse_runs(value: Option<&String>) -> Result<usize, String> {
    value
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| "--runs needs a positive number".to_string())
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

fn status(cmd: &mut Command) -> Result<bool, String> {
    cmd.status()
        .map(|s| s.success())
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))
}

/// Installs Debian packages a benchmark needs (`apt-get install -y`); whether apt-get
/// succeeded. The caller checks again for what it needs, since a package may be installed and
/// still not provide it.
fn apt_install(packages: &[&str]) -> bool {
    Command::new("apt-get")
        .args(["install", "-y", "-qq"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .is_ok_and(|s| s.success())
}

/// Pending snapshot files (`*.snap.new`) under the workspace, sorted.
fn pending_snapshots() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![workspace_root()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && name != ".git" {
                    stack.push(path);
                }
            } else if name.to_string_lossy().ends_with(".snap.new") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn snapshot(args: &[String]) -> Result<(), String> {
    let accept = match args {
        [] => false,
        [flag] if flag == "--accept" => true,
        _ => return Err(USAGE.to_string()),
    };
    for stale in pending_snapshots() {
        std::fs::remove_file(&stale).map_err(|e| format!("{}: {e}", stale.display()))?;
    }
    let mode = if accept { "always" } else { "new" };
    let passed = status(
        cargo()
            .args(["test", "--package", "snapshots", "--", "--test-threads=2"])
            .env("INSTA_UPDATE", mode)
            .env("INSTA_FORCE_PASS", "1")
            .env_remove("CI"),
    )?;
    if !passed {
        return Err("the snapshot tests failed to run".into());
    }
    let pending = pending_snapshots();
    if accept {
        println!("snapshots accepted");
        return Ok(());
    }
    if pending.is_empty() {
        println!("all snapshots match");
        return Ok(());
    }
    for new in &pending {
        let old = new.with_extension("");
        println!("=== {}", old.display());
        let _ = Command::new("diff")
            .args(["-u"])
            .arg(&old)
            .arg(new)
            .status();
    }
    Err(format!(
        "{} snapshot(s) changed; review the diffs above, then run `cargo xtask snapshot --accept`",
        pending.len()
    ))
}

fn bench(args: &[String]) -> Result<(), String> {
    match args {
        [what] if what == "deps" => bench_deps(),
        [what] if what == "sim" => bench_sim(),
        [what, rest @ ..] if what == "interp" => bench_interp(rest),
        [what, rest @ ..] if what == "cpu" => bench_cpu::bench_cpu(rest),
        [what, rest @ ..] if what == "cache-model" => bench_cache_model::bench_cache_model(rest),
        [what, rest @ ..] if what == "fusion" => bench_fusion::bench_fusion(rest),
        [what, rest @ ..] if what == "gpu" => bench_gpu::bench_gpu(rest),
        [what, rest @ ..] if what == "npu" => bench_npu::bench_npu(rest),
        [what, rest @ ..] if what == "vector" => bench_vector::bench_vector(rest),
        _ => Err(USAGE.to_string()),
    }
}

fn bench_interp(args: &[String]) -> Result<(), String> {
    let readme = match args {
        [] => false,
        [flag] if flag == "--readme" => true,
        _ => return Err(USAGE.to_string()),
    };
    let mut cmd = cargo();
    cmd.args(["bench", "--quiet", "--bench", "interp"]);
    if readme {
        cmd.args(["--", "--readme"]);
    }
    if status(&mut cmd)? {
        Ok(())
    } else {
        Err("the interpreter benchmark failed".into())
    }
}

fn bench_sim() -> Result<(), String> {
    let ok = status(cargo().args([
        "run",
        "--quiet",
        "--release",
        "--package",
        "sim",
        "--example",
        "simrun",
        "--",
        "sim/examples/stream.npuasm",
        "--throughput",
        "20",
    ]))?;
    if ok {
        Ok(())
    } else {
        Err("the simulator benchmark failed".into())
    }
}

fn bench_deps() -> Result<(), String> {
    let export = workspace_root().join("target/deps-export");
    let ok = status(
        cargo()
            .args(["bench", "--quiet", "--bench", "deps"])
            .env("POLYFUSE_DEPS_EXPORT", &export),
    )?;
    if !ok {
        return Err("the dependence benchmark failed".into());
    }
    let has_islpy = Command::new("python3")
        .args(["-c", "import islpy"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_islpy {
        println!(
            "
islpy is not installed (pip install islpy): no comparison with isl"
        );
        return Ok(());
    }
    println!(
        "
the same analyses with isl (islpy), answers compared with polyfuse's:\n"
    );
    let script = workspace_root().join("xtask/isl_compare.py");
    if !status(Command::new("python3").arg(script).arg(&export))? {
        return Err("isl's answers differ from polyfuse's (see the table)".into());
    }
    Ok(())
}

fn fuzz(args: &[String]) -> Result<(), String> {
    let mut seconds = 60u64;
    let mut seed = None;
    let mut targets = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--seconds needs a number")?;
            }
            "--seed" => {
                seed = Some(
                    it.next()
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or("--seed needs a number")?,
                );
            }
            "pf" | "c" | "sets" | "npuasm" => targets.push(a.clone()),
            other => return Err(format!("unknown fuzz target `{other}`\n{USAGE}")),
        }
    }
    if targets.is_empty() {
        targets = vec!["pf".into(), "c".into(), "sets".into(), "npuasm".into()];
    }
    for target in targets {
        println!("fuzzing the {target} parser for {seconds} s");
        let (package, test) = match target.as_str() {
            "sets" => ("polyhedral", "sets_parse_fuzz"),
            "npuasm" => ("sim", "asm_fuzz"),
            _ => ("frontend", "fuzz"),
        };
        let mut command = cargo();
        command
            .args([
                "test",
                "--release",
                "--package",
                package,
                "--test",
                test,
                "--",
                "--ignored",
                "--nocapture",
                "--exact",
                &format!("fuzz_{target}"),
            ])
            .env("POLYFUSE_FUZZ_SECONDS", seconds.to_string());
        if let Some(seed) = seed {
            command.env("POLYFUSE_FUZZ_SEED", seed.to_string());
        }
        let ok = status(&mut command)?;
        if !ok {
            return Err(format!(
                "the {target} parser panicked on an input (see above)"
            ));
        }
    }
    Ok(())
}
