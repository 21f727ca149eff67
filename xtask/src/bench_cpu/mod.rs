//! `cargo xtask bench cpu`: every kernel of PolyBench/C 4.2.1 (see [`polybench`] for where
//! it comes from), built four ways and timed in one run:
//!
//! - the original with `gcc -O3 -march=native` (the baseline every speedup is against);
//! - polyfuse's source-to-source output (`polyfuse compile K.c --target cpu --cpu M`, M the
//!   CPU model of this machine: [`tools::host_cpu`]) with `gcc -O3 -march=native -fopenmp`;
//! - the original with Polly, sequential (`clang -O3 -march=native -mllvm -polly`) and
//!   parallel (`-mllvm -polly-parallel -fopenmp`), a clang with Polly installed if missing.
//!
//! Every OpenMP build runs on the same number of threads (`--threads`, default: every core).
//! A kernel runs at LARGE_DATASET, or at EXTRALARGE_DATASET when the baseline takes under
//! 50 ms at LARGE; `--dataset` fixes one dataset for all. polyfuse compiles each kernel under
//! a time limit (`--compile-limit`, 60 s): a kernel it refuses, fails on or does not finish is
//! a row of the table saying so. Before timing, polyfuse's output and the original are built
//! with `-DPOLYBENCH_DUMP_ARRAYS -ffp-contract=off` and must print the same arrays; one that
//! does not is reported and not timed. Polly's builds are compared to the printed precision
//! and only marked. Times are medians of `--runs` runs (default 3) interleaved across the
//! builds, so that the shared machine's noise falls on all of them alike; a kernel whose
//! first round takes under [`ROUND_BUDGET`] gets as many rounds as take that long (at most
//! [`MAX_ROUNDS`]). gemm is also run
//! through OpenBLAS (installed if missing) and from polyfuse's output for `--cpu native`
//! (this machine's caches, checked like the other output), and reported in GFLOP/s.
//!
//! Threads waiting at a barrier sleep (`OMP_WAIT_POLICY=passive`), which suits a machine
//! shared with other work; `--active-wait` lets them spin, as on a machine of one's own.
//!
//! `--kernels a,b` restricts the set, `--readme` rewrites docs/benchmarks.md's `bench cpu` section:
//! with `--kernels`, only those kernels' rows, the others kept as an earlier run left them
//! ([`earlier`]) and the heading naming the rows measured later.
//!
//! `--compile-times` only compiles: each kernel `--runs` times at the dataset of its row in
//! the README, the median printed; with `--readme` it rewrites the compile cells of those
//! rows and the summary's compile line, keeping every other figure ([`compile_times`]).

mod compile_times;
mod earlier;
pub(crate) mod polybench;
pub(crate) mod process;
mod table;
mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use polybench::{Kernel, PolyBench};
use process::{compile_c, first_line, run_binary, run_limited, run_timed, run_timed_within};
use process::{CBuild, Outcome, RunEnv, Toolchain};
use table::{Checked, Compiled, Row, Setup};

use crate::runs::median;
use crate::{build_polyfuse, parse_runs, workspace_root};

/// A baseline faster than this at LARGE is measured at EXTRALARGE.
const SHORT_KERNEL: f64 = 0.05;
/// A kernel whose first round of runs (every build once) takes less than this gets more
/// rounds than `--runs`: as many as this takes, at most [`MAX_ROUNDS`], since the shared
/// machine's noise decides the median of a few runs of a few milliseconds.
pub(crate) const ROUND_BUDGET: f64 = 2.0;
/// The most rounds a short kernel gets ([`ROUND_BUDGET`]).
pub(crate) const MAX_ROUNDS: usize = 25;
/// The limit of one C build or one run of a binary: a safety net, not a measurement.
const RUN_LIMIT: Duration = Duration::from_secs(1800);

struct Settings {
    kernels: Option<Vec<String>>,
    dataset: Option<&'static str>,
    runs: usize,
    threads: usize,
    compile_limit: u64,
    polybench: Option<PathBuf>,
    readme: bool,
    active_wait: bool,
    compile_times: bool,
}

fn parse(args: &[String]) -> Result<Settings, String> {
    let mut s = Settings {
        kernels: None,
        dataset: None,
        runs: 3,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        compile_limit: 60,
        polybench: None,
        readme: false,
        active_wait: false,
        compile_times: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs {what}"))
        };
        match a.as_str() {
            "--runs" => s.runs = parse_runs(Some(&value("a number")?))?,
            "--readme" => s.readme = true,
            "--active-wait" => s.active_wait = true,
            "--compile-times" => s.compile_times = true,
            "--kernels" => {
                s.kernels = Some(
                    value("a list of kernels")?
                        .split(',')
                        .map(|k| k.trim().to_string())
                        .filter(|k| !k.is_empty())
                        .collect(),
                )
            }
            "--dataset" => s.dataset = Some(polybench::parse_dataset(&value("a dataset")?)?),
            "--threads" => {
                s.threads = value("a number")?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--threads needs a positive number")?
            }
            "--compile-limit" => {
                s.compile_limit = value("seconds")?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--compile-limit needs a positive number of seconds")?
            }
            "--polybench" => s.polybench = Some(PathBuf::from(value("a folder")?)),
            other => return Err(format!("unknown option `{other}` of bench cpu")),
        }
    }
    Ok(s)
}

/// Everything a kernel's measurement needs.
struct Bench {
    settings: Settings,
    polyfuse: PathBuf,
    polybench: PolyBench,
    work: PathBuf,
    gcc: Toolchain,
    gcc_openmp: Toolchain,
    polly: Option<tools::Polly>,
    /// The CPU model polyfuse optimizes for (this machine's).
    cpu: tools::HostCpu,
}

pub(crate) fn bench_cpu(args: &[String]) -> Result<(), String> {
    let settings = parse(args)?;
    let root = workspace_root();
    let polybench = polybench::locate(settings.polybench.as_deref(), &root)?;
    let mut kernels = polybench.kernels()?;
    let order: Vec<String> = kernels.iter().map(|k| k.name.clone()).collect();
    if let Some(wanted) = &settings.kernels {
        if let Some(unknown) = wanted
            .iter()
            .find(|w| !kernels.iter().any(|k| &k.name == *w))
        {
            return Err(format!(
                "PolyBench has no kernel `{unknown}` (it has {})",
                kernels
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        kernels.retain(|k| wanted.contains(&k.name));
    }
    let work = root.join("target/bench-cpu");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    // Compile times alone need no other compiler.
    let polly = match settings.compile_times {
        true => None,
        false => tools::polly(&work)
            .map_err(|why| println!("Polly is not compared: {why}"))
            .ok(),
    };
    let cpu = tools::host_cpu();
    let openmp = ["-fopenmp"];
    let bench = Bench {
        polyfuse: build_polyfuse()?,
        polybench,
        work,
        gcc: Toolchain::new("gcc", &[]),
        gcc_openmp: Toolchain::new("gcc", &openmp),
        polly,
        cpu,
        settings,
    };
    let s = &bench.settings;
    println!(
        "PolyBench/C in {}: {} kernel(s), median of {} run(s), {} thread(s)",
        bench.polybench.root.display(),
        kernels.len(),
        s.runs,
        s.threads
    );
    if s.compile_times {
        return bench.compile_times(&kernels);
    }
    let mut rows = Vec::new();
    let mut gemm = None;
    let mut compile_later = None;
    for kernel in &kernels {
        let (row, gemm_table) = bench.measure(kernel)?;
        println!("{}", row.line());
        rows.push(row);
        gemm = gemm.or(gemm_table);
    }
    let mut later = Vec::new();
    if s.readme && s.kernels.is_some() {
        let section = crate::readme::section("cpu")?;
        let measured: Vec<String> = rows.iter().map(|r| r.kernel.clone()).collect();
        let kept = earlier::read(&section, &measured)?;
        later = kept.later;
        compile_later = kept.compile_later;
        for k in measured {
            if !later.contains(&k) {
                later.push(k);
            }
        }
        later.sort_by_key(|k| order.iter().position(|o| o == k));
        rows.extend(kept.rows);
        rows.sort_by_key(|r| order.iter().position(|o| *o == r.kernel));
        gemm = gemm.or(kept.gemm);
    }
    let setup = Setup {
        runs: s.runs,
        threads: s.threads,
        dataset: s.dataset,
        polly: bench.polly.as_ref().map(|p| p.sequential.cc.clone()),
        compile_limit: s.compile_limit,
        passive: !s.active_wait,
        cpu: {
            let c = &bench.cpu;
            format!("`--cpu {}` ({})", c.name, c.about)
        },
        later,
        compile_later,
    };
    let mut text = table::table(&rows, &setup);
    if let Some(g) = gemm {
        text += &g;
    }
    println!("\n{text}");
    if s.readme {
        crate::readme::write_section("cpu", &text)?;
    }
    Ok(())
}

impl Bench {
    fn env(&self) -> RunEnv {
        RunEnv {
            threads: self.settings.threads,
            passive: !self.settings.active_wait,
        }
    }

    fn build(&self, kernel: &Kernel, source: &Path, defines: &[String]) -> CBuild {
        CBuild {
            sources: vec![source.to_path_buf(), self.polybench.harness()],
            includes: vec![self.polybench.utilities(), kernel.dir.clone()],
            defines: defines.to_vec(),
        }
    }

    /// Builds `source` as `NAME` into the work folder.
    fn binary(
        &self,
        tools: &Toolchain,
        build: &CBuild,
        extra: &[&str],
        name: &str,
    ) -> Result<PathBuf, String> {
        let binary = self.work.join(name);
        compile_c(tools, build, extra, &binary, RUN_LIMIT)?;
        Ok(binary)
    }

    /// LARGE, or EXTRALARGE when the baseline is short at LARGE, unless a dataset was given.
    fn dataset(&self, kernel: &Kernel) -> Result<&'static str, String> {
        if let Some(d) = self.settings.dataset {
            return Ok(d);
        }
        let build = self.build(kernel, &kernel.source, &time_defines("LARGE"));
        let binary = self.binary(&self.gcc, &build, &[], &format!("{}.probe", kernel.name))?;
        // A binary still running after a second is past the threshold in any case.
        let t = run_timed_within(&binary, self.env(), Duration::from_secs(1))?;
        Ok(match t {
            Some(t) if t < SHORT_KERNEL => "EXTRALARGE",
            _ => "LARGE",
        })
    }

    /// `polyfuse compile` under the time limit, and what the result looks like.
    fn compile(&self, kernel: &Kernel, dataset: &str, output: &Path) -> Result<Compiled, String> {
        self.compile_for(self.cpu.name, kernel, dataset, output)
    }

    /// [`Bench::compile`] for the CPU model `cpu`.
    fn compile_for(
        &self,
        cpu: &str,
        kernel: &Kernel,
        dataset: &str,
        output: &Path,
    ) -> Result<Compiled, String> {
        let limit = Duration::from_secs(self.settings.compile_limit);
        let polyfuse = |extra: &[&str]| {
            let mut cmd = Command::new(&self.polyfuse);
            cmd.arg("compile")
                .arg(&kernel.source)
                .args(["--target", "cpu", "--cpu", cpu, "--threads"])
                .arg(self.settings.threads.to_string())
                .arg("-I")
                .arg(self.polybench.utilities())
                .arg("-D")
                .arg(format!("{dataset}_DATASET"))
                .args(extra);
            cmd
        };
        let out = output.to_string_lossy().into_owned();
        let mut times = Vec::new();
        for _ in 0..self.settings.runs {
            match run_limited(&mut polyfuse(&["-o", &out]), limit)? {
                Outcome::TimedOut => return Ok(Compiled::TimedOut(self.settings.compile_limit)),
                Outcome::Finished {
                    status, seconds, ..
                } if status.success() => times.push(seconds),
                Outcome::Finished { status, stderr, .. } => {
                    let why = first_line(&stderr);
                    return Ok(if status.code() == Some(1) {
                        Compiled::Refused(why)
                    } else {
                        Compiled::Failed(format!("{status}: {why}"))
                    });
                }
            }
        }
        let seconds = median(&times);
        // The schedule tree says whether a band was tiled (its tile loops divide by the
        // tile size); the C whether a loop runs in parallel.
        let tiled = match run_limited(&mut polyfuse(&["--emit", "tree"]), limit)? {
            Outcome::Finished { stdout, .. } => stdout.contains("floor(("),
            Outcome::TimedOut => false,
        };
        let c = std::fs::read_to_string(output).map_err(|e| format!("{out}: {e}"))?;
        Ok(Compiled::Yes {
            seconds,
            tiled,
            parallel: c.contains("#pragma omp parallel"),
        })
    }

    /// `--compile-times`: polyfuse's compile time alone, of each of `kernels` at the dataset
    /// docs/benchmarks.md's row has (found as a full run finds it for a kernel without a row); with
    /// `--readme`, those rows' compile cells and the summary's compile line are rewritten and
    /// the heading says so, every other figure kept.
    fn compile_times(&self, kernels: &[Kernel]) -> Result<(), String> {
        let section = crate::readme::section("cpu").ok();
        let earlier = match &section {
            Some(text) => earlier::read(text, &[])?.rows,
            None => Vec::new(),
        };
        let mut measured = Vec::new();
        for kernel in kernels {
            let known = earlier
                .iter()
                .find(|r| r.kernel == kernel.name && r.dataset != "—");
            let dataset = match known {
                Some(row) => row.dataset,
                None => self.dataset(kernel)?,
            };
            let output = self.work.join(format!("{}.polyfuse.c", kernel.name));
            let row = Row::new(
                &kernel.name,
                dataset,
                self.compile(kernel, dataset, &output)?,
            );
            println!(
                "{:<15} {:<10} compile {:<9} {}",
                row.kernel,
                row.dataset,
                row.compile_cell(),
                row.schedule_cell()
            );
            measured.push(row);
        }
        if self.settings.readme {
            let section =
                section.ok_or("docs/benchmarks.md has no `bench cpu` section to update")?;
            let s = &self.settings;
            let text =
                compile_times::refresh(&section, earlier, measured, s.runs, s.compile_limit)?;
            crate::readme::write_section("cpu", &text)?;
        }
        Ok(())
    }

    /// One kernel: its row, and for gemm the GFLOP/s table.
    fn measure(&self, kernel: &Kernel) -> Result<(Row, Option<String>), String> {
        let name = &kernel.name;
        let dataset = match self.dataset(kernel) {
            Ok(d) => d,
            Err(why) => {
                let mut row = Row::new(name, "—", Compiled::NotRun);
                row.trouble.push(format!("the original: {why}"));
                return Ok((row, None));
            }
        };
        let optimized = self.work.join(format!("{name}.polyfuse.c"));
        let _ = std::fs::remove_file(&optimized);
        let compiled = self.compile(kernel, dataset, &optimized)?;
        let mut row = Row::new(name, dataset, compiled);
        let threads = self.settings.threads;

        // The builds to time, by their index in `table::BUILDS`; `None` where one is missing.
        let timed = time_defines(dataset);
        let original = self.build(kernel, &kernel.source, &timed);
        let mut binaries: Vec<Option<PathBuf>> = vec![None; table::BUILDS.len()];
        match self.binary(&self.gcc, &original, &[], &format!("{name}.gcc")) {
            Ok(b) => binaries[0] = Some(b),
            Err(why) => row.trouble.push(format!("the original: {why}")),
        }
        if matches!(row.compiled, Compiled::Yes { .. }) {
            let checked = self.check(kernel, dataset, &optimized, &mut row);
            if matches!(checked, Checked::Same) {
                let build = self.build(kernel, &optimized, &timed);
                match self.binary(&self.gcc_openmp, &build, &[], &format!("{name}.polyfuse")) {
                    Ok(b) => binaries[1] = Some(b),
                    Err(why) => row.trouble.push(format!("polyfuse's output: {why}")),
                }
            }
            row.checked = Some(checked);
        }
        if let Some(polly) = &self.polly {
            for (k, tools) in [(2, &polly.sequential), (3, &polly.parallel)] {
                let label = table::BUILDS[k];
                match self.binary(tools, &original, &[], &format!("{name}.{label}")) {
                    Ok(b) => binaries[k] = Some(b),
                    Err(why) => row.trouble.push(format!("{label}: {why}")),
                }
            }
        }
        let blas = if name == "gemm" {
            self.openblas(kernel, dataset, &mut row)
        } else {
            None
        };
        if let Some((b, _)) = &blas {
            binaries.push(Some(b.clone()));
            binaries.push(self.native(kernel, dataset, &mut row));
        }

        let mut times: Vec<Vec<f64>> = vec![Vec::new(); binaries.len()];
        let mut rounds = self.settings.runs;
        let mut round = 0;
        while round < rounds {
            for (k, binary) in binaries.iter_mut().enumerate() {
                let Some(b) = binary else { continue };
                match run_timed(b, self.env(), RUN_LIMIT) {
                    Ok(t) => times[k].push(t),
                    Err(why) => {
                        row.trouble.push(format!("{}: {why}", b.display()));
                        *binary = None;
                        times[k].clear();
                    }
                }
            }
            if round == 0 {
                let first: f64 = times.iter().filter_map(|t| t.first()).sum();
                rounds = rounds_for(self.settings.runs, first);
            }
            round += 1;
        }
        let medians: Vec<Option<f64>> = times
            .iter_mut()
            .map(|t| (!t.is_empty()).then(|| median(t)))
            .collect();
        row.times.copy_from_slice(&medians[..table::BUILDS.len()]);
        let gemm = blas.map(|(_, flops)| {
            let builds = [
                ("gcc -O3", medians[0]),
                ("polyfuse", medians[1]),
                ("Polly", medians[2]),
                ("Polly parallel", medians[3]),
                ("OpenBLAS", medians[4]),
                (table::NATIVE_BUILD, medians[5]),
            ];
            table::gemm_table(dataset, flops, &builds, threads)
        });
        Ok((row, gemm))
    }

    /// polyfuse's output for `--cpu native` (this machine's caches), built once its dump
    /// matches the original's; `None`, with the reason in `row`, otherwise.
    fn native(&self, kernel: &Kernel, dataset: &str, row: &mut Row) -> Option<PathBuf> {
        let name = &kernel.name;
        let optimized = self.work.join(format!("{name}.native.c"));
        let _ = std::fs::remove_file(&optimized);
        let built = match self.compile_for("native", kernel, dataset, &optimized) {
            Ok(Compiled::Yes { .. }) => {
                match self.dumps_match(kernel, dataset, &optimized, "native").0 {
                    Checked::Same => {
                        let build = self.build(kernel, &optimized, &time_defines(dataset));
                        self.binary(&self.gcc_openmp, &build, &[], &format!("{name}.native"))
                    }
                    Checked::Differs => Err("its arrays differ from the original's".into()),
                    Checked::Broken(why) => Err(why),
                }
            }
            Ok(Compiled::Refused(why) | Compiled::Failed(why)) => Err(why),
            Ok(Compiled::TimedOut(limit)) => Err(format!("still compiling after {limit} s")),
            Ok(Compiled::NotRun) => Err("not compiled".into()),
            Err(why) => Err(why),
        };
        built
            .map_err(|why| row.trouble.push(format!("polyfuse --cpu native: {why}")))
            .ok()
    }

    /// Builds and runs the dumps of the original and of polyfuse's output and compares them;
    /// records in `row` whether Polly's builds agree to the printed precision.
    fn check(&self, kernel: &Kernel, dataset: &str, optimized: &Path, row: &mut Row) -> Checked {
        let (checked, reference) = self.dumps_match(kernel, dataset, optimized, "polyfuse");
        if let (Some(polly), Some(reference)) = (&self.polly, reference) {
            for (k, tools) in [(0, &polly.sequential), (1, &polly.parallel)] {
                let label = table::BUILDS[k + 2];
                row.polly_agrees[k] = self
                    .dump(kernel, dataset, tools, &kernel.source, label)
                    .ok()
                    .map(|theirs| same_to_printed_precision(&theirs, &reference));
            }
        }
        checked
    }

    /// Whether the dump of polyfuse's output `optimized` (the build `label`) is the
    /// original's, and the original's dump when it has one.
    fn dumps_match(
        &self,
        kernel: &Kernel,
        dataset: &str,
        optimized: &Path,
        label: &str,
    ) -> (Checked, Option<String>) {
        let reference = match self.dump(kernel, dataset, &self.gcc, &kernel.source, "gcc") {
            Ok(r) if r.contains("begin dump") => r,
            Ok(_) => {
                return (
                    Checked::Broken("the original printed no arrays".into()),
                    None,
                )
            }
            Err(why) => return (Checked::Broken(format!("the original's dump: {why}")), None),
        };
        let checked = match self.dump(kernel, dataset, &self.gcc_openmp, optimized, label) {
            Ok(ours) if ours == reference => Checked::Same,
            Ok(_) => Checked::Differs,
            Err(why) => Checked::Broken(why),
        };
        (checked, Some(reference))
    }

    /// What `source`, built by `tools` with the arrays dumped, prints.
    fn dump(
        &self,
        kernel: &Kernel,
        dataset: &str,
        tools: &Toolchain,
        source: &Path,
        label: &str,
    ) -> Result<String, String> {
        let defines = vec![
            format!("{dataset}_DATASET"),
            "POLYBENCH_DUMP_ARRAYS".to_string(),
        ];
        let build = self.build(kernel, source, &defines);
        let binary = self.binary(
            tools,
            &build,
            &["-ffp-contract=off"],
            &format!("{}.{label}.dump", kernel.name),
        )?;
        Ok(run_binary(&binary, self.env(), RUN_LIMIT)?.1)
    }

    /// OpenBLAS's gemm binary and the product's operation count; `None` (with the reason in
    /// `row`) when OpenBLAS cannot be had.
    fn openblas(&self, kernel: &Kernel, dataset: &str, row: &mut Row) -> Option<(PathBuf, f64)> {
        let attempt = || -> Result<(PathBuf, f64), String> {
            let tools = tools::openblas(&self.work)?;
            let source = self.work.join("gemm_openblas.c");
            std::fs::write(&source, tools::OPENBLAS_GEMM)
                .map_err(|e| format!("{}: {e}", source.display()))?;
            let build = CBuild {
                sources: vec![source],
                includes: vec![self.polybench.utilities(), kernel.dir.clone()],
                defines: vec![format!("{dataset}_DATASET")],
            };
            let binary = self.binary(&tools, &build, &[], "gemm.openblas")?;
            let out = Command::new(&binary)
                .arg("flops")
                .output()
                .map_err(|e| format!("{}: {e}", binary.display()))?;
            let flops = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<f64>()
                .map_err(|_| "the OpenBLAS program printed no operation count".to_string())?;
            Ok((binary, flops))
        };
        attempt()
            .map_err(|why| row.trouble.push(format!("OpenBLAS: {why}")))
            .ok()
    }
}

/// The defines of a timed build.
fn time_defines(dataset: &str) -> Vec<String> {
    vec![format!("{dataset}_DATASET"), "POLYBENCH_TIME".to_string()]
}

/// Whether two dumps print the same numbers to their printed precision (two decimals):
/// for builds that may contract or reassociate.
fn same_to_printed_precision(a: &str, b: &str) -> bool {
    let numbers = |s: &str| -> Vec<f64> {
        s.split_whitespace()
            .filter_map(|w| w.parse::<f64>().ok())
            .collect()
    };
    let (a, b) = (numbers(a), numbers(b));
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| (x - y).abs() <= 0.010_000_1 + 1e-9 * y.abs())
}

/// How many rounds of runs a kernel gets: `runs`, or where its first round took `first`
/// seconds, under [`ROUND_BUDGET`], as many as fill it (at most [`MAX_ROUNDS`]).
fn rounds_for(runs: usize, first: f64) -> usize {
    let wanted = (ROUND_BUDGET / first.max(1e-6)).ceil() as usize;
    wanted.clamp(runs, MAX_ROUNDS.max(runs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn a_quick_check_restricts_kernels_dataset_and_runs() {
        let s = parse(&args(
            "--kernels gemm,2mm --dataset medium --runs 1 --compile-limit 5",
        ))
        .unwrap();
        assert_eq!(s.kernels, Some(vec!["gemm".to_string(), "2mm".to_string()]));
        assert_eq!(s.dataset, Some("MEDIUM"));
        assert_eq!((s.runs, s.compile_limit), (1, 5));
    }

    #[test]
    fn bad_options_are_refused() {
        assert!(parse(&args("--runs 0")).is_err());
        assert!(parse(&args("--dataset HUGE")).is_err());
        assert!(parse(&args("--kernels")).is_err());
        assert!(parse(&args("--fast")).is_err());
    }

    #[test]
    fn dumps_agree_to_the_printed_precision_only() {
        assert!(same_to_printed_precision("A 1.00 2.00", "A 1.01 2.00"));
        assert!(!same_to_printed_precision("A 1.00 2.00", "A 1.03 2.00"));
        assert!(!same_to_printed_precision("A 1.00", "A 1.00 2.00"));
    }

    #[test]
    fn short_kernels_get_rounds_that_fill_the_budget() {
        assert_eq!(rounds_for(3, 10.0), 3);
        assert_eq!(rounds_for(3, 1.0), 3);
        assert_eq!(rounds_for(3, 0.5), 4);
        assert_eq!(rounds_for(3, 0.125), 16);
        assert_eq!(rounds_for(3, 0.001), MAX_ROUNDS);
        assert_eq!(rounds_for(40, 0.001), 40);
    }
}
