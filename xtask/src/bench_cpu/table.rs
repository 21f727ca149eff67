//! The CPU benchmark's results: one row per PolyBench kernel, whatever became of it, and
//! the markdown docs/benchmarks.md shows.

/// What `polyfuse compile` did with a kernel.
pub(crate) enum Compiled {
    Yes {
        seconds: f64,
        /// Whether the schedule tree has a tile band, and the C a parallel loop.
        tiled: bool,
        parallel: bool,
    },
    /// Exit status 1 with a diagnostic: the kernel is outside what polyfuse supports.
    Refused(String),
    /// Any other failure (a crash, a signal).
    Failed(String),
    /// Still compiling at the limit (in seconds).
    TimedOut(u64),
    /// Not tried: the original itself could not be measured.
    NotRun,
}

/// Whether polyfuse's output prints the original's arrays.
pub(crate) enum Checked {
    Same,
    Differs,
    /// The output does not build or does not run.
    Broken(String),
}

/// The builds timed for every kernel, in the table's order.
pub(crate) const BUILDS: [&str; 4] = ["gcc", "polyfuse", "polly", "polly-parallel"];

pub(crate) struct Row {
    pub(crate) kernel: String,
    pub(crate) dataset: &'static str,
    pub(crate) compiled: Compiled,
    pub(crate) checked: Option<Checked>,
    /// Median seconds per build of [`BUILDS`]; `None` where it was not timed.
    pub(crate) times: [Option<f64>; 4],
    /// Whether Polly's printed arrays (sequential, parallel) agree with the original's to
    /// the printed precision.
    pub(crate) polly_agrees: [Option<bool>; 2],
    /// A failure of the baseline or of Polly's builds, which leaves their cells empty.
    pub(crate) trouble: Vec<String>,
    /// The row's line in docs/benchmarks.md, for a row kept from an earlier run.
    pub(crate) kept: Option<String>,
}

impl Row {
    pub(crate) fn new(kernel: &str, dataset: &'static str, compiled: Compiled) -> Row {
        Row {
            kernel: kernel.to_string(),
            dataset,
            compiled,
            checked: None,
            times: [None; 4],
            polly_agrees: [None; 2],
            trouble: Vec::new(),
            kept: None,
        }
    }

    fn speedup(&self, build: usize) -> Option<f64> {
        Some(self.times[0]? / self.times[build]?)
    }

    /// Polly's better speedup, sequential or parallel.
    fn polly_best(&self) -> Option<f64> {
        match (self.speedup(2), self.speedup(3)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    pub(crate) fn compile_cell(&self) -> String {
        match &self.compiled {
            Compiled::Yes { seconds, .. } => format_seconds(*seconds),
            Compiled::Refused(_) => "refused".into(),
            Compiled::Failed(_) => "failed".into(),
            Compiled::TimedOut(limit) => format!("> {limit} s"),
            Compiled::NotRun => "—".into(),
        }
    }

    fn polyfuse_cell(&self) -> String {
        match (&self.compiled, &self.checked) {
            (Compiled::Yes { .. }, Some(Checked::Same)) => self.time_cell(1),
            (Compiled::Yes { .. }, Some(Checked::Differs)) => "wrong output".into(),
            (Compiled::Yes { .. }, Some(Checked::Broken(_))) => "broken output".into(),
            (Compiled::Yes { .. }, None) => "—".into(),
            (Compiled::TimedOut(_), _) => "compile timed out".into(),
            _ => "not compiled".into(),
        }
    }

    fn time_cell(&self, build: usize) -> String {
        match (self.times[build], self.speedup(build)) {
            (Some(t), Some(s)) if build > 0 => format!("{} · {s:.2}×", format_seconds(t)),
            (Some(t), _) => format_seconds(t),
            (None, _) => "—".into(),
        }
    }

    pub(crate) fn schedule_cell(&self) -> &'static str {
        match self.compiled {
            Compiled::Yes {
                tiled: true,
                parallel: true,
                ..
            } => "tiled, parallel",
            Compiled::Yes {
                tiled: true,
                parallel: false,
                ..
            } => "tiled, sequential",
            Compiled::Yes {
                tiled: false,
                parallel: true,
                ..
            } => "untiled, parallel",
            Compiled::Yes { .. } => "untiled, sequential",
            _ => "",
        }
    }

    /// The row as one line of progress output.
    pub(crate) fn line(&self) -> String {
        let mut line = format!(
            "{:<15} {:<10} compile {:<9} gcc {:<10} polyfuse {:<18} polly {:<18} polly-par {}",
            self.kernel,
            self.dataset,
            self.compile_cell(),
            self.time_cell(0),
            self.polyfuse_cell(),
            self.time_cell(2),
            self.time_cell(3),
        );
        if let Some(why) = self.why_not_timed() {
            line += &format!("\n    {why}");
        }
        for t in &self.trouble {
            line += &format!("\n    {t}");
        }
        line
    }

    fn why_not_timed(&self) -> Option<String> {
        match (&self.compiled, &self.checked) {
            (Compiled::Refused(why), _) => Some(format!("refused: {why}")),
            (Compiled::Failed(why), _) => Some(format!("failed: {why}")),
            (Compiled::TimedOut(limit), _) => {
                Some(format!("did not finish compiling in {limit} s"))
            }
            (_, Some(Checked::Differs)) => {
                Some("its output prints other arrays than the original (not timed)".to_string())
            }
            (_, Some(Checked::Broken(why))) => Some(format!("its output: {why}")),
            _ => None,
        }
    }
}

fn format_seconds(s: f64) -> String {
    if s < 0.001 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// How the run was made, for the table's heading.
pub(crate) struct Setup {
    pub(crate) runs: usize,
    pub(crate) threads: usize,
    /// The dataset asked for, or `None` for LARGE with EXTRALARGE for the short kernels.
    pub(crate) dataset: Option<&'static str>,
    pub(crate) polly: Option<String>,
    pub(crate) compile_limit: u64,
    /// Whether OpenMP threads waited passively.
    pub(crate) passive: bool,
    /// The CPU model polyfuse optimized for, with its vector unit.
    pub(crate) cpu: String,
    /// The kernels measured again, in later runs than the table's other rows.
    pub(crate) later: Vec<String>,
    /// The sentence saying the compile column was measured again alone ([`compile_later`]).
    pub(crate) compile_later: Option<String>,
}

use super::earlier;
use super::{MAX_ROUNDS, ROUND_BUDGET};

pub(crate) fn table(rows: &[Row], setup: &Setup) -> String {
    let dataset = match setup.dataset {
        Some(d) => format!("{d}_DATASET"),
        None => "LARGE_DATASET (EXTRALARGE_DATASET where gcc -O3 takes under 50 ms at LARGE)"
            .to_string(),
    };
    let mut out = format!(
        "PolyBench/C 4.2.1 at {dataset}; median of {} interleaved runs (of more where one round \
         of every build takes under {ROUND_BUDGET} s: as many as take that long, at most \
         {MAX_ROUNDS}); polyfuse's output \
         and Polly parallel on {} thread(s). Times with the speedup over `gcc -O3 \
         -march=native` of the same run; compile is the median of polyfuse's wall times over \
         as many compiles, source to source; polyfuse's CPU description: {}.\n\n",
        setup.runs, setup.threads, setup.cpu
    );
    if !setup.later.is_empty() {
        out += &format!("{} {}.\n\n", earlier::LATER, setup.later.join(", "));
    }

    if let Some(polly) = &setup.polly {
        out += &format!("Polly: {polly}. ");
    }
    out += if setup.passive {
        "OpenMP threads wait passively (`OMP_WAIT_POLICY=passive`).\n\n"
    } else {
        "OpenMP threads wait actively (`OMP_WAIT_POLICY=active`).\n\n"
    };
    // Where `--compile-times` puts it: right above the table.
    if let Some(sentence) = &setup.compile_later {
        out += &format!("{sentence}\n\n");
    }
    out += "| kernel | dataset | compile | gcc -O3 | polyfuse | Polly | Polly parallel | polyfuse's schedule |\n";
    out += "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
    for r in rows {
        if let Some(line) = &r.kept {
            out += line;
            out += "\n";
            continue;
        }
        let mark = |k: usize| {
            if r.polly_agrees[k] == Some(false) {
                " (†)"
            } else {
                ""
            }
        };
        out += &format!(
            "| {} | {} | {} | {} | {} | {}{} | {}{} | {} |\n",
            r.kernel,
            r.dataset,
            r.compile_cell(),
            r.time_cell(0),
            r.polyfuse_cell(),
            r.time_cell(2),
            mark(0),
            r.time_cell(3),
            mark(1),
            r.schedule_cell()
        );
    }
    if rows.iter().any(|r| r.polly_agrees.contains(&Some(false))) {
        out += "\n(†) Polly's output differs from the original's beyond the printed precision.\n";
    }
    out += &summary(rows, setup);
    out
}

/// How the summary's line on compile times starts.
pub(crate) const COMPILE_SUMMARY: &str = "\nCompile time: ";

/// How the heading's sentence starts that says the compile column was measured again alone.
pub(crate) const COMPILE_LATER: &str =
    "The compile column was measured again in a later run of `bench cpu --compile-times`";

/// The heading's sentence on a compile column measured again alone, with `runs` compiles of
/// each kernel.
pub(crate) fn compile_later(runs: usize) -> String {
    format!("{COMPILE_LATER}, with the polyfuse of that run (the median of {runs} compiles of each kernel).")
}

/// The summary's line on compile times (`limit`: the compile limit in seconds), starting with
/// [`COMPILE_SUMMARY`].
pub(crate) fn compile_summary(rows: &[Row], limit: u64) -> String {
    let compile = |pred: &dyn Fn(f64) -> bool| -> Vec<String> {
        rows.iter()
            .filter_map(|r| match r.compiled {
                Compiled::Yes { seconds, .. } if pred(seconds) => {
                    Some(format!("{} ({})", r.kernel, format_seconds(seconds)))
                }
                _ => None,
            })
            .collect()
    };
    let slow = compile(&|s| s >= 1.0);
    let medium = compile(&|s| (0.1..1.0).contains(&s));
    let timed_out: Vec<&str> = rows
        .iter()
        .filter(|r| matches!(r.compiled, Compiled::TimedOut(_)))
        .map(|r| r.kernel.as_str())
        .collect();
    let mut parts = Vec::new();
    if !timed_out.is_empty() {
        parts.push(format!(
            "not finished in {} s: {}",
            limit,
            timed_out.join(", ")
        ));
    }
    if !slow.is_empty() {
        parts.push(format!("1 s or more: {}", slow.join(", ")));
    }
    if !medium.is_empty() {
        parts.push(format!("100 ms to 1 s: {}", medium.join(", ")));
    }
    if parts.is_empty() {
        parts.push("every kernel under 100 ms".into());
    } else {
        parts.push("the others under 100 ms".into());
    }
    format!("{COMPILE_SUMMARY}{}.\n", parts.join("; "))
}

/// The kernels not measured and why, the compile-time outliers, and where polyfuse is behind.
fn summary(rows: &[Row], setup: &Setup) -> String {
    let mut out = String::new();
    let not_timed: Vec<String> = rows
        .iter()
        .filter_map(|r| Some(format!("{}: {}", r.kernel, r.why_not_timed()?)))
        .collect();
    if !not_timed.is_empty() {
        out += "\nNot timed:\n\n";
        for line in not_timed {
            out += &format!("- {line}\n");
        }
    }
    let trouble: Vec<String> = rows
        .iter()
        .flat_map(|r| r.trouble.iter().map(move |t| format!("{}: {t}", r.kernel)))
        .collect();
    if !trouble.is_empty() {
        out += "\nOther builds that could not be timed:\n\n";
        for line in trouble {
            out += &format!("- {line}\n");
        }
    }
    out += &compile_summary(rows, setup.compile_limit);
    let slower_than = |reference: &dyn Fn(&Row) -> Option<f64>| -> Vec<String> {
        rows.iter()
            .filter_map(|r| {
                let ours = r.speedup(1)?;
                let theirs = reference(r)?;
                (ours < theirs).then(|| format!("{} ({ours:.2}× against {theirs:.2}×)", r.kernel))
            })
            .collect()
    };
    let behind_gcc = slower_than(&|_| Some(1.0));
    let behind_polly = slower_than(&Row::polly_best);
    if !behind_gcc.is_empty() {
        out += &format!("\nSlower than gcc -O3: {}.\n", behind_gcc.join(", "));
    }
    if !behind_polly.is_empty() {
        out += &format!(
            "\nBehind Polly's better build: {}.\n",
            behind_polly.join(", ")
        );
    }
    out
}

/// The gemm table's name of polyfuse's output for `--cpu native`.
pub(crate) const NATIVE_BUILD: &str = "polyfuse `--cpu native`";

/// gemm in GFLOP/s, every build and OpenBLAS.
pub(crate) fn gemm_table(
    dataset: &str,
    flops: f64,
    builds: &[(&str, Option<f64>)],
    threads: usize,
) -> String {
    let mut out = format!(
        "\ngemm at {dataset}_DATASET in GFLOP/s (2·NI·NJ·NK per run; OpenBLAS's `cblas_dgemm` \
         on {threads} thread(s), on the same sizes and values):\n\n\
         | build | time | GFLOP/s |\n| --- | ---: | ---: |\n"
    );
    for (name, seconds) in builds {
        match seconds {
            Some(t) => {
                out += &format!(
                    "| {name} | {} | {:.2} |\n",
                    format_seconds(*t),
                    flops / t / 1e9
                )
            }
            None => out += &format!("| {name} | — | — |\n"),
        }
    }
    let time = |name: &str| builds.iter().find(|b| b.0 == name).and_then(|b| b.1);
    if let (Some(ours), Some(blas)) = (time("polyfuse"), time("OpenBLAS")) {
        out += &format!(
            "\npolyfuse reaches {:.0}% of OpenBLAS's throughput",
            100.0 * blas / ours
        );
        match time(NATIVE_BUILD) {
            Some(native) => {
                out += &format!(
                    "; with `--cpu native` (this machine's caches), {:.0}%.\n",
                    100.0 * blas / native
                )
            }
            None => out += ".\n",
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn setup() -> Setup {
        Setup {
            runs: 3,
            threads: 2,
            dataset: None,
            polly: None,
            compile_limit: 60,
            passive: true,
            cpu: "`--cpu x86-64-v3` (AVX2)".into(),
            later: Vec::new(),
            compile_later: None,
        }
    }

    #[test]
    fn refused_and_timed_out_kernels_are_listed_with_their_reason() {
        let rows = vec![
            Row::new("adi", "LARGE", Compiled::TimedOut(60)),
            Row::new(
                "durbin",
                "LARGE",
                Compiled::Refused("durbin.c:80: not supported yet".into()),
            ),
        ];
        let text = table(&rows, &setup());
        assert!(text.contains("| adi | LARGE | > 60 s | — | compile timed out |"));
        assert!(text.contains("- durbin: refused: durbin.c:80: not supported yet"));
        assert!(text.contains("not finished in 60 s: adi"));
    }

    #[test]
    fn a_kernel_slower_than_polly_is_named_with_both_speedups() {
        let mut row = Row::new(
            "fdtd-2d",
            "LARGE",
            Compiled::Yes {
                seconds: 0.05,
                tiled: true,
                parallel: true,
            },
        );
        row.checked = Some(Checked::Same);
        row.times = [Some(1.0), Some(4.0), Some(0.8), Some(0.5)];
        let text = table(&[row], &setup());
        assert!(text.contains("4.00 s · 0.25×"), "{text}");
        assert!(text.contains("Slower than gcc -O3: fdtd-2d (0.25× against 1.00×)"));
        assert!(text.contains("Behind Polly's better build: fdtd-2d (0.25× against 2.00×)"));
    }

    #[test]
    fn a_wrong_output_is_reported_and_not_timed() {
        let mut row = Row::new(
            "lu",
            "LARGE",
            Compiled::Yes {
                seconds: 0.05,
                tiled: true,
                parallel: true,
            },
        );
        row.checked = Some(Checked::Differs);
        row.times = [Some(1.0), None, Some(0.8), Some(0.5)];
        let text = table(&[row], &setup());
        assert!(text.contains("| wrong output |"), "{text}");
        assert!(text.contains("- lu: its output prints other arrays"));
    }

    #[test]
    fn gemm_throughput_is_compared_with_openblas() {
        let text = gemm_table(
            "LARGE",
            2e9,
            &[("polyfuse", Some(1.0)), ("OpenBLAS", Some(0.5))],
            2,
        );
        assert!(text.contains("| polyfuse | 1.00 s | 2.00 |"));
        assert!(text.contains("polyfuse reaches 50% of OpenBLAS's throughput."));
        let text = gemm_table(
            "LARGE",
            2e9,
            &[
                ("polyfuse", Some(1.0)),
                ("OpenBLAS", Some(0.5)),
                (NATIVE_BUILD, Some(0.625)),
            ],
            2,
        );
        assert!(
            text.contains("| polyfuse `--cpu native` | 625.0 ms | 3.20 |"),
            "{text}"
        );
        assert!(
            text.contains(
                "50% of OpenBLAS's throughput; with `--cpu native` (this machine's caches), 80%."
            ),
            "{text}"
        );
    }
}
