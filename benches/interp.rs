//! The reference interpreter's speed: statement instances per second of the tree walker (the
//! interpreter as first written, kept as the oracle) and of the compiled interpreter, on one
//! thread and on every core, on the same kernels at the same sizes in one run, with the
//! outputs of all three compared bit for bit. Run with `cargo xtask bench interp`; with
//! `--readme`, the table replaces the one between the `<!-- bench interp -->` markers of
//! docs/benchmarks.md.

use std::path::Path;
use std::time::Instant;

use frontend::Options;
use polyhedral::interp::{self, Memory, RunOptions, RunStats};
use polyhedral::Program;

const README_BEGIN: &str = "<!-- bench interp: begin -->";
const README_END: &str = "<!-- bench interp: end -->";

/// A kernel file, its size overrides and its `-D` macros.
type Case = (
    &'static str,
    &'static [(&'static str, i64)],
    &'static [&'static str],
);

/// The kernels and the sizes they run at: large enough that a run takes a while, small enough
/// that the tree walker finishes in seconds.
const CASES: &[Case] = &[
    ("gemm.pf", &[("NI", 256), ("NJ", 256), ("NK", 256)], &[]),
    ("gemm.c", &[], &["MEDIUM_DATASET"]),
    ("2mm.c", &[], &["MEDIUM_DATASET"]),
    ("covariance.c", &[], &["MEDIUM_DATASET"]),
    ("jacobi-2d.c", &[], &["MEDIUM_DATASET"]),
    ("conv2d_relu.pf", &[], &[]),
    ("softmax.pf", &[], &[]),
    ("mandelbrot.pf", &[("H", 128), ("W", 128)], &[]),
];

fn load(name: &str, sizes: &[(&str, i64)], defines: &[&str]) -> Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("kernels")
        .join(name);
    let options = Options {
        sizes: sizes.iter().map(|&(n, v)| (n.to_string(), v)).collect(),
        defines: defines.iter().map(|d| (d.to_string(), None)).collect(),
        ..Options::default()
    };
    frontend::load(&path, &options).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Seconds of the fastest of `runs` runs, with the memory and counts of the last.
fn time(
    program: &Program,
    runs: usize,
    f: &dyn Fn(&Program, &mut Memory) -> RunStats,
) -> (f64, Memory, RunStats) {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..runs {
        let mut memory = interp::random_inputs(program, 1);
        let start = Instant::now();
        let stats = f(program, &mut memory);
        best = best.min(start.elapsed().as_secs_f64());
        last = Some((memory, stats));
    }
    let (memory, stats) = last.expect("at least one run");
    (best, memory, stats)
}

fn same_bits(a: &Memory, b: &Memory) -> bool {
    a.arrays.len() == b.arrays.len()
        && a.arrays.iter().zip(&b.arrays).all(|(x, y)| {
            x.len() == y.len() && x.iter().zip(y).all(|(u, v)| u.to_bits() == v.to_bits())
        })
}

fn main() {
    let readme = std::env::args().any(|a| a == "--readme");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rows = Vec::new();
    for &(name, sizes, defines) in CASES {
        let program = load(name, sizes, defines);
        let (walk_s, walked, stats) = time(&program, 1, &|p, m| {
            interp::run_tree_walker(p, m).expect("the kernel runs")
        });
        let (seq_s, seq, seq_stats) = time(&program, 3, &|p, m| {
            interp::run(p, m).expect("the kernel runs")
        });
        let options = RunOptions {
            threads,
            ..RunOptions::default()
        };
        let (par_s, par, par_stats) = time(&program, 3, &|p, m| {
            interp::run_with(p, m, &options).expect("the kernel runs")
        });
        assert_eq!(stats, seq_stats, "{name}: instance counts differ");
        assert_eq!(stats, par_stats, "{name}: instance counts differ");
        assert!(same_bits(&walked, &seq), "{name}: compiled results differ");
        assert!(same_bits(&walked, &par), "{name}: parallel results differ");
        let n = stats.instances as f64;
        let size = if defines.is_empty() {
            program
                .params
                .iter()
                .map(|p| format!("{}={}", p.name, p.value))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            defines.join(" ")
        };
        let row = format!(
            "| {name} | {size} | {:.1} M | {:.2} M/s | {:.2} M/s | {:.1}× | {:.2} M/s | {:.1}× |",
            n / 1e6,
            n / walk_s / 1e6,
            n / seq_s / 1e6,
            walk_s / seq_s,
            n / par_s / 1e6,
            walk_s / par_s,
        );
        println!("{row}");
        rows.push(row);
    }
    let table = format!(
        "Statement instances per second, tree walker against the compiled interpreter in the \
         same run (fastest of 3 runs; the tree walker once); {threads} threads for the parallel \
         column; every output compared bit for bit.\n\n\
         | kernel | size | instances | tree walker | compiled, 1 thread | speedup | compiled, \
         {threads} threads | speedup |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n{}\n",
        rows.join("\n")
    );
    println!("\n{table}");
    if readme {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.md");
        let text = std::fs::read_to_string(&path).expect("docs/benchmarks.md is readable");
        let (Some(a), Some(b)) = (text.find(README_BEGIN), text.find(README_END)) else {
            panic!("docs/benchmarks.md has no `{README_BEGIN}` … `{README_END}` markers");
        };
        let new = format!("{}{README_BEGIN}\n{table}{}", &text[..a], &text[b..]);
        std::fs::write(&path, new).expect("docs/benchmarks.md is writable");
        println!("docs/benchmarks.md updated");
    }
}
