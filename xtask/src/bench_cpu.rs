//! `cargo xtask bench cpu`: every PolyBench-style C kernel in `kernels/` at PolyBench's
//! LARGE sizes, built three ways and timed in one run:
//!
//! - the original file with `gcc -O3 -march=native` (the baseline every speedup is against);
//! - polyfuse's source-to-source output (`polyfuse compile K.c --target cpu`) with
//!   `gcc -O3 -march=native -fopenmp`, on every core;
//! - the original with Polly, `clang -O3 -march=native -mllvm -polly -mllvm -polly-parallel
//!   -fopenmp`, on every core, when a clang with Polly is installed (Debian's `clang-16` is).
//!
//! Every binary prints the kernel's time itself (`-DPOLYBENCH_TIME`); a kernel's time is the
//! median of `--runs` runs (default 3), and the three builds' runs are interleaved so that
//! noise from the shared machine falls on all of them alike. Before timing, every build's
//! output arrays (`-DPOLYBENCH_DUMP_ARRAYS`) are compared with the baseline's to the printed
//! precision, so a wrong result is never reported as a speedup.
//!
//! `--readme` rewrites the table between the `<!-- bench cpu -->` markers of README.md.
//! `--only TEXT` keeps the kernels whose file name contains TEXT.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{build_polyfuse, kernel_files, parse_runs, status, workspace_root, write_readme_table};

const README_BEGIN: &str = "<!-- bench cpu: begin -->";
const README_END: &str = "<!-- bench cpu: end -->";
const POLLY_FLAGS: [&str; 5] = ["-mllvm", "-polly", "-mllvm", "-polly-parallel", "-fopenmp"];

pub(crate) fn bench_cpu(args: &[String]) -> Result<(), String> {
    let mut runs = 3usize;
    let mut readme = false;
    let mut only = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = parse_runs(it.next())?,
            "--readme" => readme = true,
            "--only" => only = Some(it.next().ok_or("--only needs a text")?.clone()),
            other => return Err(format!("unknown option `{other}` of bench cpu")),
        }
    }
    let root = workspace_root();
    let polyfuse = build_polyfuse()?;
    let work = root.join("target/bench-cpu");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let kernels_dir = root.join("kernels");
    let kernels = kernel_files(&["c"], only.as_ref())?;

    let polly = polly_compiler(&work);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "cpu benchmark: {} kernel(s), LARGE_DATASET, median of {runs} run(s), {threads} thread(s)",
        kernels.len()
    );
    match &polly {
        Some(cc) => println!("Polly: {cc}"),
        None => println!("Polly: no clang with Polly found (apt install clang-16): not compared"),
    }

    let mut rows = Vec::new();
    for kernel in &kernels {
        let stem = kernel
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let optimized = work.join(format!("{stem}.polyfuse.c"));
        let mut compile = Command::new(&polyfuse);
        compile
            .arg("compile")
            .arg(kernel)
            .args(["--target", "cpu", "-o"])
            .arg(&optimized);
        let t = std::time::Instant::now();
        if !status(&mut compile)? {
            return Err(format!("polyfuse cannot compile {}", kernel.display()));
        }
        let compile_seconds = t.elapsed().as_secs_f64();

        let mut builds = vec![
            build(&work, &stem, "gcc", "gcc", &[], kernel, &kernels_dir)?,
            build(
                &work,
                &stem,
                "polyfuse",
                "gcc",
                &["-fopenmp"],
                &optimized,
                &kernels_dir,
            )?,
        ];
        if let Some(cc) = &polly {
            builds.push(build(
                &work,
                &stem,
                "polly",
                cc,
                &POLLY_FLAGS,
                kernel,
                &kernels_dir,
            )?);
        }
        let polly_agrees = check_outputs(
            &work,
            &stem,
            kernel,
            &optimized,
            polly.as_deref(),
            &kernels_dir,
        )?;

        let mut times: Vec<Vec<f64>> = vec![Vec::new(); builds.len()];
        for _ in 0..runs {
            for (k, b) in builds.iter().enumerate() {
                times[k].push(run_timed(b)?);
            }
        }
        let medians: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
        let row = Row {
            kernel: stem,
            compile_seconds,
            gcc: medians[0],
            polyfuse: medians[1],
            polly: medians.get(2).copied(),
            polly_agrees,
        };
        println!("{}", row.line());
        rows.push(row);
    }
    let table = table(&rows, runs, threads, polly.is_some());
    println!("\n{table}");
    if readme {
        write_readme_table(README_BEGIN, README_END, &table)?;
        println!("README.md updated");
    }
    Ok(())
}

/// The first clang on the PATH that builds a small loop nest with Polly.
fn polly_compiler(work: &Path) -> Option<String> {
    let probe = work.join("polly-probe.c");
    std::fs::write(
        &probe,
        "double a[64][64];\nint main(void){for(int i=0;i<64;i++)for(int j=0;j<64;j++)a[i][j]+=i*j;return (int)a[3][5];}\n",
    )
    .ok()?;
    [
        "clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14",
    ]
    .into_iter()
    .find(|cc| {
        Command::new(cc)
            .args([
                "-O3",
                "-mllvm",
                "-polly",
                "-mllvm",
                "-polly-parallel",
                "-fopenmp",
            ])
            .arg(&probe)
            .arg("-o")
            .arg(work.join("polly-probe"))
            .output()
            .is_ok_and(|o| o.status.success())
    })
    .map(String::from)
}

#[allow(clippy::too_many_arguments)]
fn compile_c(
    cc: &str,
    flags: &[&str],
    defines: &[&str],
    source: &Path,
    binary: &Path,
    include: &Path,
) -> Result<(), String> {
    let mut cmd = Command::new(cc);
    cmd.args(["-O3", "-march=native"])
        .args(flags)
        .args(defines)
        .arg("-I")
        .arg(include)
        .arg(source)
        .arg("-o")
        .arg(binary)
        .arg("-lm");
    let out = cmd.output().map_err(|e| format!("cannot run {cc}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cc} cannot build {}:\n{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

fn build(
    work: &Path,
    stem: &str,
    name: &str,
    cc: &str,
    flags: &[&str],
    source: &Path,
    include: &Path,
) -> Result<PathBuf, String> {
    let binary = work.join(format!("{stem}.{name}"));
    compile_c(cc, flags, &["-DPOLYBENCH_TIME"], source, &binary, include)?;
    Ok(binary)
}

/// Builds the baseline and polyfuse's output with `-DPOLYBENCH_DUMP_ARRAYS` and
/// `-ffp-contract=off` and requires the same printed arrays: polyfuse keeps the order of every
/// element's operations, so without contraction the results are bitwise equal. Polly's build
/// (which contracts) is compared to the printed precision and only reported.
fn check_outputs(
    work: &Path,
    stem: &str,
    original: &Path,
    optimized: &Path,
    polly: Option<&str>,
    include: &Path,
) -> Result<Option<bool>, String> {
    let dump = |name: &str, cc: &str, flags: &[&str], source: &Path| -> Result<String, String> {
        let binary = work.join(format!("{stem}.{name}.dump"));
        let mut defines = vec!["-DPOLYBENCH_DUMP_ARRAYS"];
        defines.extend_from_slice(flags);
        compile_c(cc, &defines, &[], source, &binary, include)?;
        let out = Command::new(&binary)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        if !out.status.success() {
            return Err(format!("{} failed: {}", binary.display(), out.status));
        }
        Ok(String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let reference = dump("gcc", "gcc", &["-ffp-contract=off"], original)?;
    if !reference.contains("begin dump") {
        return Err(format!("{stem}: the baseline printed no arrays"));
    }
    let ours = dump(
        "polyfuse",
        "gcc",
        &["-ffp-contract=off", "-fopenmp"],
        optimized,
    )?;
    if ours != reference {
        return Err(format!(
            "{stem}: polyfuse's output prints other arrays than the original (compare the \
             binaries {stem}.gcc.dump and {stem}.polyfuse.dump in {})",
            work.display()
        ));
    }
    let Some(cc) = polly else {
        return Ok(None);
    };
    let theirs = dump("polly", cc, &POLLY_FLAGS, original)?;
    let numbers = |s: &str| -> Vec<f64> {
        s.split_whitespace()
            .filter_map(|w| w.parse::<f64>().ok())
            .collect()
    };
    let (a, b) = (numbers(&theirs), numbers(&reference));
    Ok(Some(
        a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| (x - y).abs() <= 0.010_000_1 + 1e-9 * y.abs()),
    ))
}

fn run_timed(binary: &Path) -> Result<f64, String> {
    let out = Command::new(binary)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", binary.display(), out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .lines()
        .last()
        .and_then(|l| l.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("{} printed no time: {text}", binary.display()))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

struct Row {
    kernel: String,
    compile_seconds: f64,
    gcc: f64,
    polyfuse: f64,
    polly: Option<f64>,
    /// Whether Polly's printed arrays agree with the baseline's to the printed precision.
    polly_agrees: Option<bool>,
}

impl Row {
    fn line(&self) -> String {
        let polly = match self.polly {
            Some(p) => format!("  polly {p:.3} s ({:.2}x)", self.gcc / p),
            None => String::new(),
        };
        format!(
            "{:<12} gcc {:.3} s  polyfuse {:.3} s ({:.2}x){polly}  [compile {:.2} s]",
            self.kernel,
            self.gcc,
            self.polyfuse,
            self.gcc / self.polyfuse,
            self.compile_seconds
        )
    }
}

fn table(rows: &[Row], runs: usize, threads: usize, polly: bool) -> String {
    let mut out = format!(
        "PolyBench LARGE_DATASET, median of {runs} runs, {threads} threads; speedups are over \
         `gcc -O3 -march=native` measured in the same run.\n\n"
    );
    if polly {
        out += "| kernel | gcc -O3 | polyfuse | speedup | Polly | Polly speedup |\n";
        out += "| --- | ---: | ---: | ---: | ---: | ---: |\n";
    } else {
        out += "| kernel | gcc -O3 | polyfuse | speedup |\n| --- | ---: | ---: | ---: |\n";
    }
    let mut any_differs = false;
    for r in rows {
        any_differs |= r.polly_agrees == Some(false);
        out += &format!(
            "| {} | {:.3} s | {:.3} s | {:.2}× |",
            r.kernel,
            r.gcc,
            r.polyfuse,
            r.gcc / r.polyfuse
        );
        if let Some(p) = r.polly {
            let note = if r.polly_agrees == Some(false) {
                " (†)"
            } else {
                ""
            };
            out += &format!(" {p:.3} s | {:.2}×{note} |", r.gcc / p);
        }
        out.push('\n');
    }
    if any_differs {
        out += "\n(†) Polly's output differs from the baseline's beyond the printed precision \
                (floating-point contraction on a numerically sensitive kernel).\n";
    }
    out
}
