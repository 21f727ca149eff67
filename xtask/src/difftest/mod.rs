//! `cargo xtask difftest`: differential testing of random kernels on every target.
//!
//! ```text
//! cargo xtask difftest --seconds N [--seed S] [--target cpu|gpu|npu|all] [--keep] [--no-isl]
//!                       [--timeout SECONDS] [--binary PATH]
//! ```
//!
//! For N seconds, kernels come from the [`generator`] (kernel `n` from a seed derived from
//! `S` and `n`, so a run is reproduced by its seed), each is checked by the interpreter
//! (`polyfuse run K`), then run on each target under a few option sets that change what the
//! compiler does (fusion strategies, post-tiling fusion, no tiling, small tile sizes, no
//! packing or register tiles on the CPU, no promotion on the GPU, no double buffering on the
//! accelerator) by the [`runner`]: `polyfuse run K --target T` compares with the
//! interpreter itself. A mismatch, panic, crash, unexpected error or timeout is a failure: the
//! [`shrinker`] reduces the kernel while it fails the same way and writes the reproducer and the
//! failing command to `target/difftest/`. Where islpy is installed, the [`oracle`] also
//! recomputes each kernel's dependences with isl and checks the compiled schedule against
//! them. The last line sums up: kernels, runs per target (passed, refused, failed), mismatches,
//! panics, refusals ("not supported": neither a pass nor a failure), the seed.
//! `--keep` keeps every generated kernel in `target/difftest/kernels/`; `--timeout` bounds one
//! run of `polyfuse` (60 s by default); `--binary` tests a given `polyfuse` instead of building
//! the workspace's.

#[cfg(test)]
mod coverage;
mod cscop;
mod generator;
mod kernel;
mod oracle;
mod runner;
mod shrinker;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use kernel::{Kernel, Lang};
use runner::{configs, run_config, Config, Outcome, Polyfuse};

pub use prng::Rng;

/// The seed of kernel `n` of a run with seed `seed`.
fn kernel_seed(seed: u64, n: u64) -> u64 {
    Rng::new(seed ^ n.wrapping_mul(0xA24B_AED4_963E_E407)).next_u64()
}

struct Options {
    seconds: u64,
    seed: u64,
    targets: Vec<&'static str>,
    keep: bool,
    isl: bool,
    timeout: Duration,
    /// A `polyfuse` binary to test instead of building the workspace's.
    binary: Option<std::path::PathBuf>,
}

const USAGE: &str =
    "usage: cargo xtask difftest --seconds N [--seed S] [--target cpu|gpu|npu|all] \
                     [--keep] [--no-isl] [--timeout SECONDS] [--binary PATH]";

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        seconds: 60,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 ^ u64::from(std::process::id())),
        targets: vec!["cpu", "gpu", "npu"],
        keep: false,
        isl: true,
        timeout: Duration::from_secs(60),
        binary: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs {what}\n{USAGE}"))
        };
        match a.as_str() {
            "--seconds" => {
                o.seconds = value("a number of seconds")?
                    .parse()
                    .map_err(|_| format!("--seconds needs a number\n{USAGE}"))?
            }
            "--seed" => {
                o.seed = value("a number")?
                    .parse()
                    .map_err(|_| format!("--seed needs a number\n{USAGE}"))?
            }
            "--timeout" => {
                let s: u64 = value("a number of seconds")?
                    .parse()
                    .map_err(|_| format!("--timeout needs a number\n{USAGE}"))?;
                o.timeout = Duration::from_secs(s.max(1));
            }
            "--target" => {
                o.targets = match value("a target")?.as_str() {
                    "cpu" => vec!["cpu"],
                    "gpu" => vec!["gpu"],
                    "npu" => vec!["npu"],
                    "all" => vec!["cpu", "gpu", "npu"],
                    other => return Err(format!("unknown target `{other}`\n{USAGE}")),
                }
            }
            "--binary" => o.binary = Some(value("a path")?.into()),
            "--keep" => o.keep = true,
            "--no-isl" => o.isl = false,
            other => return Err(format!("unknown option `{other}`\n{USAGE}")),
        }
    }
    Ok(o)
}

/// Counts for the summary.
#[derive(Default)]
struct Tally {
    kernels: u64,
    /// Kernels also written as C SCoPs.
    c_kernels: u64,
    /// Kernels the front end refused (the generator's mistakes).
    invalid: u64,
    runs: BTreeMap<&'static str, u64>,
    /// Outcomes per target: a clean refusal ("not supported", a skip) is neither a pass nor
    /// a failure.
    by_target: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    outcomes: BTreeMap<&'static str, u64>,
    skips: BTreeMap<String, u64>,
    failures: Vec<String>,
    isl_checked: u64,
    isl_failures: u64,
}

pub fn difftest(args: &[String]) -> Result<(), String> {
    let options = parse_options(args)?;
    let root = crate::workspace_root();
    let binary = match &options.binary {
        Some(path) => path
            .canonicalize()
            .map_err(|e| format!("--binary {}: {e}", path.display()))?,
        None => crate::build_polyfuse()?,
    };
    let out_dir = root.join("target/difftest");
    let work = out_dir.join("work");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    if options.keep {
        let _ = std::fs::create_dir_all(out_dir.join("kernels"));
    }
    let pf = Polyfuse {
        binary,
        work: work.clone(),
        timeout: options.timeout,
    };
    println!(
        "difftest: seed {} for {} s on {}",
        options.seed,
        options.seconds,
        options.targets.join(", ")
    );
    let mut targets = Vec::new();
    let mut short_loops = false;
    for &t in &options.targets {
        match available(&pf, t) {
            Ok(device) => {
                // Mesa's software Vulkan driver ends every loop of a shader invocation after
                // 65535 iterations in all: kernels whose invocations loop longer (untiled
                // loops of large default tiles) would "mismatch" by the driver's doing.
                if device.contains("llvmpipe") {
                    short_loops = true;
                    println!(
                        "difftest: gpu on {device}: runs use small tiles or none (lavapipe \
                         ends a shader's loops after 65535 iterations)"
                    );
                }
                targets.push(t);
            }
            Err(why) => println!("difftest: {t} left out: {why}"),
        }
    }
    let isl = if options.isl {
        match oracle::Isl::start(&root) {
            Ok(isl) => Some(isl),
            Err(why) => {
                println!("difftest: no isl checks: {why}");
                None
            }
        }
    } else {
        None
    };
    let mut session = Session {
        pf,
        out_dir: out_dir.clone(),
        keep: options.keep,
        targets,
        short_loops,
        isl,
        tally: Tally::default(),
        shrunk: BTreeMap::new(),
        deadline: Instant::now() + Duration::from_secs(options.seconds),
    };
    let mut n = 0u64;
    while Instant::now() < session.deadline {
        let seed = kernel_seed(options.seed, n);
        n += 1;
        session.test(seed)?;
    }
    if let Some(isl) = session.isl.take() {
        isl.stop();
    }
    print_summary(&session.tally, &options, &session.targets);
    if session.tally.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "difftest: {} failure(s); reproducers in {}",
            session.tally.failures.len(),
            out_dir.display()
        ))
    }
}

/// Whether `target` can run here, and on what: a tiny kernel runs (the GPU needs an adapter;
/// its name comes back).
fn available(pf: &Polyfuse, target: &str) -> Result<String, String> {
    if target != "gpu" {
        return Ok(target.to_string());
    }
    let file = pf.work.join("probe.pf");
    std::fs::write(
        &file,
        "kernel probe<N = 4>(A: f32[N]) -> (B: f32[N]) {\n    B(i) = A(i) + 1.0;\n}\n",
    )
    .map_err(|e| e.to_string())?;
    let args = vec![
        "run".to_string(),
        file.display().to_string(),
        "--target".to_string(),
        target.to_string(),
    ];
    match pf.run(&args) {
        // "kernel probe on gpu (ADAPTER, seed 1, …)"
        (Outcome::Pass, printed) => Ok(printed
            .stdout
            .split_once(" on gpu (")
            .map_or("", |(_, rest)| rest.split(", seed").next().unwrap_or(""))
            .to_string()),
        (other, _) => Err(format!("{}: {}", other.kind(), other.detail())),
    }
}

/// A skip's reason without the kernel's name and the names it quotes, for counting.
fn skip_reason(message: &str) -> String {
    let text = message.trim_start_matches("error: ");
    let text = text.split_once(": ").map_or(text, |(_, r)| r);
    let mut out = String::new();
    for (k, part) in text.split('`').enumerate() {
        out.push_str(if k % 2 == 1 { "`…`" } else { part });
    }
    out.chars().take(100).collect()
}

/// The state of one difftest run.
struct Session {
    pf: Polyfuse,
    out_dir: std::path::PathBuf,
    keep: bool,
    targets: Vec<&'static str>,
    /// Keep the GPU's shader loops short (see `difftest`).
    short_loops: bool,
    isl: Option<oracle::Isl>,
    tally: Tally,
    /// How many failures of each kind were shrunk.
    shrunk: BTreeMap<String, u32>,
    deadline: Instant,
}

/// One failing run.
struct Failure<'a> {
    seed: u64,
    kernel: &'a Kernel,
    lang: Lang,
    config: &'a Config,
    args: &'a [String],
    outcome: &'a Outcome,
}

impl Session {
    /// Generates kernel `seed` and runs it as `.pf` (and sometimes as C) everywhere.
    fn test(&mut self, seed: u64) -> Result<(), String> {
        let kernel = generator::generate(seed);
        self.tally.kernels += 1;
        let mut rng = Rng::new(seed ^ 0x5151);
        let input_seed = rng.below(1000) as u64;
        self.test_as(&kernel, Lang::Pf, seed, input_seed, &mut rng)?;
        if kernel.c_compatible() && rng.chance(0.35) {
            self.tally.c_kernels += 1;
            self.test_as(&kernel, Lang::C, seed, input_seed, &mut rng)?;
        }
        Ok(())
    }

    fn test_as(
        &mut self,
        kernel: &Kernel,
        lang: Lang,
        seed: u64,
        input_seed: u64,
        rng: &mut Rng,
    ) -> Result<(), String> {
        let text = kernel.render(lang);
        let file = self.pf.work.join(format!("kernel.{}", lang.ext()));
        std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
        if self.keep {
            let kept = self
                .out_dir
                .join(format!("kernels/{seed:016x}.{}", lang.ext()));
            let _ = std::fs::write(kept, &text);
        }
        // The interpreter first: a kernel the front end refuses is the generator's mistake.
        let interp = Config {
            target: "interp",
            options: Vec::new(),
            small_tiles: false,
        };
        let (outcome, args) = run_config(&self.pf, &file, &interp, input_seed, rng);
        let refused = matches!(&outcome, Outcome::Error(m) if m.starts_with("error:"))
            && std::fs::read_to_string(self.pf.work.join("stderr.txt"))
                .is_ok_and(|e| e.contains("┌─"));
        if refused {
            self.tally.invalid += 1;
            if self.tally.invalid <= 3 {
                println!(
                    "difftest: kernel {seed:016x} ({}) invalid: {}",
                    lang.ext(),
                    outcome.detail()
                );
            }
            return Ok(());
        }
        if outcome != Outcome::Pass {
            let failure = Failure {
                seed,
                kernel,
                lang,
                config: &interp,
                args: &args,
                outcome: &outcome,
            };
            self.report(&failure);
            return Ok(());
        }
        self.check_with_isl(&file, &text, lang, seed);
        let mut stuck = false;
        for target in self.targets.clone() {
            // The C version goes to fewer places: it tests the C front end.
            let mut list = configs(
                rng,
                target,
                kernel,
                lang,
                self.short_loops && target == "gpu",
            );
            if lang == Lang::C {
                list.truncate(1);
            }
            for config in list {
                if stuck {
                    break;
                }
                let (outcome, args) = run_config(&self.pf, &file, &config, input_seed, rng);
                // A kernel that hangs or exhausts the memory once will again: its other runs
                // would only spend the time.
                stuck = matches!(outcome, Outcome::Timeout | Outcome::Crash(_));
                *self.tally.runs.entry(target).or_default() += 1;
                *self.tally.outcomes.entry(outcome.kind()).or_default() += 1;
                *self
                    .tally
                    .by_target
                    .entry(target)
                    .or_default()
                    .entry(outcome.kind())
                    .or_default() += 1;
                if let Outcome::Skip(why) = &outcome {
                    *self.tally.skips.entry(skip_reason(why)).or_default() += 1;
                }
                if outcome.is_failure() {
                    let failure = Failure {
                        seed,
                        kernel,
                        lang,
                        config: &config,
                        args: &args,
                        outcome: &outcome,
                    };
                    self.report(&failure);
                }
            }
        }
        Ok(())
    }

    /// Dependences and schedules of the kernel in `file`, checked by isl.
    fn check_with_isl(&mut self, file: &Path, text: &str, lang: Lang, seed: u64) {
        let Some(isl) = self.isl.as_mut() else {
            return;
        };
        match isl.check(&self.pf, file, seed) {
            Ok(()) => self.tally.isl_checked += 1,
            Err(oracle::Problem::Unavailable(why)) => {
                println!("difftest: isl checks stopped: {why}");
                if let Some(stopped) = self.isl.take() {
                    stopped.stop();
                }
            }
            Err(oracle::Problem::Skipped) => {}
            Err(oracle::Problem::Wrong(why)) => {
                self.tally.isl_checked += 1;
                self.tally.isl_failures += 1;
                let path = self.out_dir.join(format!("isl-{seed:016x}.{}", lang.ext()));
                let _ = std::fs::write(&path, text);
                let line = format!(
                    "isl disagrees on kernel {seed:016x} ({}): {why}",
                    path.display()
                );
                println!("FAIL {line}");
                self.tally.failures.push(line);
            }
        }
    }

    /// Prints a failure, shrinks it (at most a few times per kind of failure and target) and
    /// writes the reproducer and its command.
    fn report(&mut self, f: &Failure) {
        let signature = format!("{} {}", f.config.target, f.outcome.signature());
        println!(
            "FAIL kernel {:016x} ({}) on {}: {} {}",
            f.seed,
            f.lang.ext(),
            f.config.label(),
            f.outcome.kind(),
            f.outcome.detail().lines().next().unwrap_or("")
        );
        let count = self.shrunk.entry(signature).or_default();
        *count += 1;
        let ext = f.lang.ext();
        let base = format!("{}-{:016x}", f.outcome.kind(), f.seed);
        let original = self.out_dir.join(format!("{base}.orig.{ext}"));
        let _ = std::fs::write(&original, f.kernel.render(f.lang));
        let (kernel, args) = if *count <= 3 {
            // Shrinking may take a while; not much past the deadline.
            let budget = self
                .deadline
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_secs(30), Duration::from_secs(120));
            // A hang shows within seconds; the shrinker's runs need not wait a whole minute.
            let quick = Polyfuse {
                binary: self.pf.binary.clone(),
                work: self.pf.work.clone(),
                timeout: self.pf.timeout.min(Duration::from_secs(15)),
            };
            let result = shrinker::shrink(&quick, f.kernel, f.lang, f.args, f.outcome, budget);
            (result.kernel, result.args)
        } else {
            (f.kernel.clone(), f.args.to_vec())
        };
        let path = self.out_dir.join(format!("{base}.{ext}"));
        let _ = std::fs::write(&path, kernel.render(f.lang));
        let mut args = args;
        if let Some(file) = args.get_mut(1) {
            *file = path.display().to_string();
        }
        let command = format!("polyfuse {}", args.join(" "));
        let _ = std::fs::write(
            self.out_dir.join(format!("{base}.cmd")),
            format!("{command}\n"),
        );
        println!("  reproducer: {}\n  command: {command}", path.display());
        self.tally.failures.push(format!(
            "{} on {}: {} ({command})",
            f.outcome.kind(),
            f.config.target,
            f.outcome.detail().lines().next().unwrap_or("")
        ));
    }
}

fn print_summary(tally: &Tally, options: &Options, targets: &[&str]) {
    if !tally.skips.is_empty() {
        println!("refusals by reason:");
        let mut skips: Vec<(&String, &u64)> = tally.skips.iter().collect();
        skips.sort_by(|a, b| b.1.cmp(a.1));
        for (why, count) in skips.iter().take(8) {
            println!("  {count:>6}  {why}");
        }
    }
    if !tally.failures.is_empty() {
        println!("failures:");
        for f in &tally.failures {
            println!("  {f}");
        }
    }
    let runs: Vec<String> = targets
        .iter()
        .map(|t| {
            let runs = tally.runs.get(t).copied().unwrap_or(0);
            let of = |k: &str| {
                tally
                    .by_target
                    .get(t)
                    .and_then(|m| m.get(k))
                    .copied()
                    .unwrap_or(0)
            };
            let (passed, refused) = (of("pass"), of("skip"));
            let failed = runs - passed - refused;
            format!("{t} {runs} ({passed} passed, {refused} refused, {failed} failed)")
        })
        .collect();
    let count = |k: &str| tally.outcomes.get(k).copied().unwrap_or(0);
    let isl = if tally.isl_checked > 0 {
        format!(
            ", isl checks {} ({} wrong)",
            tally.isl_checked, tally.isl_failures
        )
    } else {
        String::new()
    };
    println!(
        "difftest summary: {} kernels ({} also as C, {} invalid), runs: {}; mismatches {}, \
         panics {}, crashes {}, errors {}, timeouts {}, refusals {}{isl}; seed {}",
        tally.kernels,
        tally.c_kernels,
        tally.invalid,
        if runs.is_empty() {
            "none".to_string()
        } else {
            runs.join(", ")
        },
        count("mismatch"),
        count("panic"),
        count("crash"),
        count("error"),
        count("timeout"),
        count("skip"),
        options.seed
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_reasons_leave_out_names() {
        assert_eq!(
            skip_reason("error: k3f: not supported on npu yet: `k3f` has no contraction"),
            "not supported on npu yet: `…` has no contraction"
        );
    }

    #[test]
    fn kernel_seeds_differ() {
        assert_ne!(kernel_seed(1, 0), kernel_seed(1, 1));
        assert_ne!(kernel_seed(1, 0), kernel_seed(2, 0));
    }
}
