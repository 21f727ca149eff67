//! `cargo xtask difftest`: differential testing of random kernels on every target.
//!
//! ```text
//! cargo xtask difftest --seconds N [--seed S] [--target cpu|gpu|npu|all] [--keep] [--no-isl]
//! ```
//!
//! For N seconds, kernels come from the [`generator`] (kernel `n` from a seed derived from
//! `S` and `n`, so a run is reproduced by its seed), each is checked by the interpreter
//! (`polyfuse run K`), then run on each target under a few option sets that change what the
//! compiler does (fusion strategies, post-tiling fusion, no tiling, small tile sizes, no
//! promotion on the GPU) by the [`runner`]: `polyfuse run K --target T` compares with the
//! interpreter itself. A mismatch, panic, crash, unexpected error or timeout is a failure: the
//! [`shrinker`] reduces the kernel while it fails the same way and writes the reproducer and the
//! failing command to `target/difftest/`. Where islpy is installed, the [`oracle`] also
//! recomputes each kernel's dependences with isl and checks the compiled schedule against
//! them. The last line sums up: kernels, runs per target, mismatches, panics, skips, the seed.

mod generator;
mod kernel;
mod oracle;
mod runner;
mod shrinker;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use kernel::Kernel;
use runner::{Outcome, Polyfuse};

/// A deterministic pseudo-random generator (SplitMix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "below(0)");
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn weighted<'a, T>(&mut self, items: &'a [(T, u32)]) -> &'a T {
        let total: u32 = items.iter().map(|(_, w)| w).sum();
        let mut r = self.below(total as usize) as u32;
        for (item, w) in items {
            if r < *w {
                return item;
            }
            r -= w;
        }
        &items[items.len() - 1].0
    }
}

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
}

const USAGE: &str =
    "usage: cargo xtask difftest --seconds N [--seed S] [--target cpu|gpu|npu|all] \
                     [--keep] [--no-isl] [--timeout SECONDS]";

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
            "--keep" => o.keep = true,
            "--no-isl" => o.isl = false,
            other => return Err(format!("unknown option `{other}`\n{USAGE}")),
        }
    }
    Ok(o)
}

/// One way of running a kernel: a target and the options that matter for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub target: &'static str,
    pub options: Vec<String>,
    /// Tile sizes between 2 and 4, as many as the deepest band has members (found by asking).
    pub small_tiles: bool,
}

impl Config {
    fn label(&self) -> String {
        let mut parts = vec![self.target.to_string()];
        parts.extend(self.options.iter().cloned());
        if self.small_tiles {
            parts.push("--tile 2..4".into());
        }
        parts.join(" ")
    }
}

/// The option sets of one kernel on `target`: the defaults, and one or two others.
fn configs(rng: &mut Rng, target: &'static str, kernel: &Kernel) -> Vec<Config> {
    let uses_f64 = kernel.to_pf().contains("f64");
    let config = |options: &[&str], small_tiles: bool| Config {
        target,
        options: options.iter().map(|s| s.to_string()).collect(),
        small_tiles,
    };
    let mut out = vec![config(&[], false)];
    let extra: Vec<Config> = match target {
        "cpu" => vec![
            config(&["--fuse", "nofuse"], false),
            config(&["--fuse", "maxfuse"], false),
            config(&["--fuse", "post-tiling"], false),
            config(&["--fuse", "post-tiling"], true),
            config(&["--no-tile"], false),
            config(&[], true),
            config(&["--fuse", "maxfuse"], true),
        ],
        "gpu" => vec![
            config(&["--no-promote"], false),
            config(&["--fuse", "maxfuse"], false),
            config(&["--fuse", "nofuse"], false),
            config(&["--no-tile"], false),
            config(&[], true),
            config(&["--no-promote"], true),
            config(&["--fuse", "post-tiling"], false),
        ],
        _ => vec![config(&["--no-double-buffer"], false), config(&[], true)],
    };
    let n = if target == "npu" { 1 } else { 2 };
    for _ in 0..n {
        let c = extra[rng.below(extra.len())].clone();
        if !out.contains(&c) {
            out.push(c);
        }
    }
    for c in &mut out {
        if uses_f64 && target == "gpu" {
            c.options.push("--gpu-f32".into());
        }
        if uses_f64 && target == "npu" {
            c.options.push("--npu-f32".into());
        }
        if target == "cpu" {
            c.options.extend(["--threads".to_string(), "2".to_string()]);
        }
    }
    out
}

/// The arguments of `polyfuse run` for a kernel file on a config, with `tiles` (if any).
fn run_args(file: &Path, config: &Config, input_seed: u64, tiles: Option<&[i64]>) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        file.display().to_string(),
        "--target".to_string(),
        config.target.to_string(),
        "--seed".to_string(),
        input_seed.to_string(),
    ];
    args.extend(config.options.iter().cloned());
    if let Some(t) = tiles {
        let t: Vec<String> = t.iter().map(|x| x.to_string()).collect();
        args.push("--tile".into());
        args.push(t.join(","));
    }
    args
}

/// Runs `file` on `config`; for small tiles, first learns how many sizes the deepest band
/// takes (from the message that says so) and picks that many between 2 and 4.
fn run_config(
    pf: &Polyfuse,
    file: &Path,
    config: &Config,
    input_seed: u64,
    rng: &mut Rng,
) -> (Outcome, Vec<String>) {
    if !config.small_tiles {
        let args = run_args(file, config, input_seed, None);
        return (pf.run(&args).0, args);
    }
    let first: Vec<i64> = vec![2];
    let args = run_args(file, config, input_seed, Some(&first));
    let (outcome, _) = pf.run(&args);
    if let Outcome::Error(message) = &outcome {
        if let Some(members) = band_members(message) {
            let tiles: Vec<i64> = (0..members).map(|_| 2 + rng.below(3) as i64).collect();
            let args = run_args(file, config, input_seed, Some(&tiles));
            return (pf.run(&args).0, args);
        }
    }
    (outcome, args)
}

/// `D` from "… tile sizes given, but the deepest permutable band of `k` has D members".
fn band_members(message: &str) -> Option<usize> {
    let rest = message.split("deepest permutable band of").nth(1)?;
    let rest = rest.split(" has ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Counts for the summary.
#[derive(Default)]
struct Tally {
    kernels: u64,
    /// Kernels the front end or the interpreter refused (the generator's mistakes).
    invalid: u64,
    runs: BTreeMap<&'static str, u64>,
    outcomes: BTreeMap<&'static str, u64>,
    skips: BTreeMap<String, u64>,
    failures: Vec<String>,
    isl_checked: u64,
    isl_failures: u64,
}

pub fn difftest(args: &[String]) -> Result<(), String> {
    let options = parse_options(args)?;
    let root = crate::workspace_root();
    let binary = crate::build_polyfuse()?;
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
    for &t in &options.targets {
        match available(&pf, t) {
            Ok(()) => targets.push(t),
            Err(why) => println!("difftest: {t} left out: {why}"),
        }
    }
    let mut isl = if options.isl {
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

    let deadline = Instant::now() + Duration::from_secs(options.seconds);
    let mut tally = Tally::default();
    let mut shrunk: BTreeMap<String, u32> = BTreeMap::new();
    let file = work.join("kernel.pf");
    let mut n = 0u64;
    while Instant::now() < deadline {
        let seed = kernel_seed(options.seed, n);
        n += 1;
        let kernel = generator::generate(seed);
        let text = kernel.to_pf();
        std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
        if options.keep {
            let _ = std::fs::write(out_dir.join(format!("kernels/{seed:016x}.pf")), &text);
        }
        tally.kernels += 1;
        let mut rng = Rng::new(seed ^ 0x5151);
        let input_seed = rng.below(1000) as u64;
        // The interpreter first: a kernel it refuses is the generator's mistake, unless it
        // panics.
        let interp = Config {
            target: "interp",
            options: Vec::new(),
            small_tiles: false,
        };
        let (outcome, args) = run_config(&pf, &file, &interp, input_seed, &mut rng);
        // A located diagnostic of the front end: the generator's mistake.
        let refused = |o: &Outcome| {
            matches!(o, Outcome::Error(m) if m.starts_with("error:"))
                && std::fs::read_to_string(work.join("stderr.txt")).is_ok_and(|e| e.contains("┌─"))
        };
        match &outcome {
            Outcome::Pass => {}
            _ if refused(&outcome) => {
                tally.invalid += 1;
                if tally.invalid <= 3 {
                    println!("difftest: kernel {seed:016x} refused: {}", outcome.detail());
                }
                continue;
            }
            _ => {
                let failure = Failure {
                    seed,
                    kernel: &kernel,
                    config: &interp,
                    args: &args,
                    outcome: &outcome,
                };
                report_failure(&pf, &out_dir, &failure, &mut tally, &mut shrunk, deadline);
                continue;
            }
        }
        if let Some(oracle) = isl.as_mut() {
            match oracle.check(&pf, &file, seed) {
                Ok(()) => tally.isl_checked += 1,
                Err(oracle::Problem::Unavailable(why)) => {
                    println!("difftest: isl checks stopped: {why}");
                    if let Some(stopped) = isl.take() {
                        stopped.stop();
                    }
                }
                Err(oracle::Problem::Skipped) => {}
                Err(oracle::Problem::Wrong(why)) => {
                    tally.isl_checked += 1;
                    tally.isl_failures += 1;
                    let path = out_dir.join(format!("isl-{seed:016x}.pf"));
                    let _ = std::fs::write(&path, &text);
                    let line = format!(
                        "isl disagrees on kernel {seed:016x} ({}): {why}",
                        path.display()
                    );
                    println!("FAIL {line}");
                    tally.failures.push(line);
                }
            }
        }
        for &target in &targets {
            for config in configs(&mut rng, target, &kernel) {
                let (outcome, args) = run_config(&pf, &file, &config, input_seed, &mut rng);
                *tally.runs.entry(target).or_default() += 1;
                *tally.outcomes.entry(outcome.kind()).or_default() += 1;
                if let Outcome::Skip(why) = &outcome {
                    *tally.skips.entry(skip_reason(why)).or_default() += 1;
                }
                if outcome.is_failure() {
                    let failure = Failure {
                        seed,
                        kernel: &kernel,
                        config: &config,
                        args: &args,
                        outcome: &outcome,
                    };
                    report_failure(&pf, &out_dir, &failure, &mut tally, &mut shrunk, deadline);
                }
            }
        }
    }
    if let Some(isl) = isl {
        isl.stop();
    }
    print_summary(&tally, &options, &targets);
    if tally.failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "difftest: {} failure(s); reproducers in {}",
            tally.failures.len(),
            out_dir.display()
        ))
    }
}

/// Whether `target` can run here: a tiny kernel runs (the GPU needs an adapter).
fn available(pf: &Polyfuse, target: &str) -> Result<(), String> {
    if target != "gpu" {
        return Ok(());
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
    match pf.run(&args).0 {
        Outcome::Pass => Ok(()),
        other => Err(format!("{}: {}", other.kind(), other.detail())),
    }
}

/// A skip's reason without the kernel's name and numbers, for counting.
fn skip_reason(message: &str) -> String {
    let text = message.trim_start_matches("error: ");
    let text = text.split_once(": ").map_or(text, |(_, r)| r);
    let short: String = text
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(90)
        .collect();
    short
}

struct Failure<'a> {
    seed: u64,
    kernel: &'a Kernel,
    config: &'a Config,
    args: &'a [String],
    outcome: &'a Outcome,
}

/// Prints a failure, shrinks it (at most a few times per kind of failure and target) and
/// writes the reproducer.
fn report_failure(
    pf: &Polyfuse,
    out_dir: &Path,
    f: &Failure,
    tally: &mut Tally,
    shrunk: &mut BTreeMap<String, u32>,
    deadline: Instant,
) {
    let signature = format!("{} {}", f.config.target, f.outcome.signature());
    println!(
        "FAIL kernel {:016x} on {}: {} {}",
        f.seed,
        f.config.label(),
        f.outcome.kind(),
        f.outcome.detail().lines().next().unwrap_or("")
    );
    let count = shrunk.entry(signature).or_default();
    *count += 1;
    let base = format!("{}-{:016x}", f.outcome.kind(), f.seed);
    let original = out_dir.join(format!("{base}.orig.pf"));
    let _ = std::fs::write(&original, f.kernel.to_pf());
    let (kernel, args) = if *count <= 3 {
        // Shrinking may take a while; not much past the deadline.
        let budget = deadline
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_secs(30), Duration::from_secs(120));
        let result = shrinker::shrink(pf, f.kernel, f.args, f.outcome, budget);
        (result.kernel, result.args)
    } else {
        (f.kernel.clone(), f.args.to_vec())
    };
    let path = out_dir.join(format!("{base}.pf"));
    let _ = std::fs::write(&path, kernel.to_pf());
    let mut args = args;
    if let Some(file) = args.get_mut(1) {
        *file = path.display().to_string();
    }
    let command = format!("polyfuse {}", args.join(" "));
    let _ = std::fs::write(out_dir.join(format!("{base}.cmd")), format!("{command}\n"));
    println!("  reproducer: {}\n  command: {command}", path.display());
    tally.failures.push(format!(
        "{} on {}: {} ({command})",
        f.outcome.kind(),
        f.config.target,
        f.outcome.detail().lines().next().unwrap_or("")
    ));
}

fn print_summary(tally: &Tally, options: &Options, targets: &[&str]) {
    if !tally.skips.is_empty() {
        println!("skips by reason:");
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
        .map(|t| format!("{t} {}", tally.runs.get(t).copied().unwrap_or(0)))
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
        "difftest summary: {} kernels ({} refused), runs: {}; mismatches {}, panics {}, crashes {}, \
         errors {}, timeouts {}, skips {}{isl}; seed {}",
        tally.kernels,
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
    fn band_members_are_read_from_the_message() {
        let m =
            "error: k: 1 tile sizes given, but the deepest permutable band of `k` has 3 members";
        assert_eq!(band_members(m), Some(3));
        assert_eq!(band_members("error: something else"), None);
    }

    #[test]
    fn kernel_seeds_differ() {
        assert_ne!(kernel_seed(1, 0), kernel_seed(1, 1));
        assert_ne!(kernel_seed(1, 0), kernel_seed(2, 0));
    }
}
