//! `cargo xtask bench cache-model`: the cache model's predicted misses against valgrind's
//! cache simulator, on every kernel in `kernels/`.
//!
//! Each kernel is compiled for the CPU (`polyfuse compile --target cpu`, release build): C
//! kernels at PolyBench's MEDIUM sizes, `.pf` kernels at their default sizes except those in
//! [`PF_SIZES`] (a few seconds under valgrind each). `polyfuse compile --emit cache-model` gives
//! the predicted misses of the kernel per cache level and the cache description they are for;
//! cachegrind (`valgrind --tool=cachegrind --cache-sim=yes`) runs the kernel on one thread with
//! `--D1` set to the closest cache and `--LL` to the last-level cache, then once more with `--LL`
//! set to the middle level (L2), so that both simulate the caches the model describes. The
//! measured misses are those of the kernel's own functions (its OpenMP regions included) and of
//! `memset` (the zeroing of the temporaries it allocates); the harness flushes the caches
//! before the kernel starts, as the model assumes. The C is built for the x86-64 baseline
//! (`-O3`, no `-march=native`: valgrind does not run AVX-512).
//!
//! `--readme` rewrites the table between the `<!-- bench cache-model -->` markers of
//! docs/benchmarks.md; `--only TEXT` keeps the kernels whose file name contains TEXT.

use std::path::Path;
use std::process::Command;

use crate::{build_polyfuse, kernel_files, workspace_root};

/// Sizes of the `.pf` kernels whose defaults take too long under valgrind.
const PF_SIZES: &[(&str, &[&str])] = &[
    ("gemm_bias_relu.pf", &["M=128", "N=128", "K=128"]),
    ("gemm_f16.pf", &["M=128", "N=128", "K=128"]),
    ("mandelbrot.pf", &["H=64", "W=64"]),
];

/// The kernels whose errors the model is meant to keep within 25%.
const DENSE: &[&str] = &[
    "gemm",
    "2mm",
    "3mm",
    "syrk",
    "trmm",
    "doitgen",
    "contract3d",
];

/// One cache level as `--emit cache-model` describes it.
#[derive(Clone, Debug)]
struct Cache {
    name: String,
    bytes: u64,
    ways: u64,
    line: u64,
}

impl Cache {
    /// The `--D1` / `--LL` value of cachegrind.
    fn valgrind(&self) -> String {
        format!("{},{},{}", self.bytes, self.ways, self.line)
    }
}

/// What the model predicts for a kernel: the caches, and the misses per cache.
struct Predicted {
    caches: Vec<Cache>,
    misses: Vec<f64>,
}

struct Row {
    kernel: String,
    sizes: String,
    /// Per cache level: (measured, predicted), or why there is no prediction.
    levels: Result<Vec<(String, u64, f64)>, String>,
}

pub(crate) fn bench_cache_model(args: &[String]) -> Result<(), String> {
    let mut readme = false;
    let mut only = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--readme" => readme = true,
            "--only" => only = Some(it.next().ok_or("--only needs a text")?.clone()),
            other => return Err(format!("unknown option `{other}` of bench cache-model")),
        }
    }
    let valgrind = Command::new("valgrind").arg("--version").output();
    if !valgrind.is_ok_and(|o| o.status.success()) {
        return Err("valgrind is not installed (apt-get install valgrind)".into());
    }
    let root = workspace_root();
    let polyfuse = build_polyfuse()?;
    let work = root.join("target/bench-cache-model");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let kernels_dir = root.join("kernels");
    let kernels = kernel_files(&["c", "pf"], only.as_ref())?;
    println!(
        "cache-model benchmark: {} kernel(s) under cachegrind, one thread",
        kernels.len()
    );
    let mut rows = Vec::new();
    let mut caches: Option<Vec<Cache>> = None;
    for kernel in &kernels {
        let row = measure(&polyfuse, kernel, &work, &kernels_dir, &mut caches)?;
        println!("{}", line(&row));
        rows.push(row);
    }
    let table = table(&rows, caches.as_deref().unwrap_or_default());
    println!("\n{table}");
    if readme {
        crate::readme::write_section("cache-model", &table)?;
    }
    Ok(())
}

fn measure(
    polyfuse: &Path,
    kernel: &Path,
    work: &Path,
    include: &Path,
    caches: &mut Option<Vec<Cache>>,
) -> Result<Row, String> {
    let file = kernel
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file.replace(['.', '-'], "_");
    let c_input = kernel.extension().is_some_and(|e| e == "c");
    let mut size_args: Vec<String> = Vec::new();
    let sizes = if c_input {
        size_args.extend(["-D".to_string(), "MEDIUM_DATASET".to_string()]);
        "MEDIUM".to_string()
    } else {
        match PF_SIZES.iter().find(|(k, _)| *k == file) {
            Some((_, s)) => {
                for v in s.iter() {
                    size_args.extend(["--size".to_string(), v.to_string()]);
                }
                s.join(", ")
            }
            None => "default".to_string(),
        }
    };
    let name = file.clone();
    let code = work.join(format!("{stem}.c"));
    let compiled = Command::new(polyfuse)
        .arg("compile")
        .arg(kernel)
        .args(["--target", "cpu", "-o"])
        .arg(&code)
        .args(&size_args)
        .output()
        .map_err(|e| format!("cannot run polyfuse: {e}"))?;
    if !compiled.status.success() {
        return Err(format!(
            "polyfuse cannot compile {}: {}",
            kernel.display(),
            String::from_utf8_lossy(&compiled.stderr)
        ));
    }
    let model = Command::new(polyfuse)
        .arg("compile")
        .arg(kernel)
        .args(["--target", "cpu", "--emit", "cache-model"])
        .args(&size_args)
        .output()
        .map_err(|e| format!("cannot run polyfuse: {e}"))?;
    let predicted = if model.status.success() {
        parse_model(&String::from_utf8_lossy(&model.stdout))?
    } else {
        let why = String::from_utf8_lossy(&model.stderr);
        let why = why
            .split("not supported yet by the cache model: ")
            .nth(1)
            .unwrap_or(why.trim())
            .trim()
            .to_string();
        return Ok(Row {
            kernel: name,
            sizes,
            levels: Err(why),
        });
    };
    *caches = Some(predicted.caches.clone());
    let binary = work.join(&stem);
    let prefixes = if c_input {
        build_c(&code, &binary, include, &predicted.caches)?;
        vec!["kernel_".to_string()]
    } else {
        let function = build_pf(&code, &binary, work, &stem, &predicted.caches)?;
        vec![format!("{function}._omp_fn"), function]
    };
    let first = &predicted.caches[0];
    let last = &predicted.caches[predicted.caches.len() - 1];
    let (l1, llc) = cachegrind(&binary, work, &stem, first, last, &prefixes)?;
    let mut levels = vec![(first.name.clone(), l1, predicted.misses[0])];
    if predicted.caches.len() >= 3 {
        let middle = &predicted.caches[1];
        let (_, l2) = cachegrind(&binary, work, &stem, first, middle, &prefixes)?;
        levels.push((middle.name.clone(), l2, predicted.misses[1]));
    }
    levels.push((
        last.name.clone(),
        llc,
        predicted.misses[predicted.caches.len() - 1],
    ));
    Ok(Row {
        kernel: name,
        sizes,
        levels: Ok(levels),
    })
}

/// The caches and the kernel's predicted misses from `--emit cache-model`.
fn parse_model(text: &str) -> Result<Predicted, String> {
    let mut caches = Vec::new();
    let description = text
        .lines()
        .find_map(|l| l.strip_prefix("caches: "))
        .ok_or("--emit cache-model printed no caches")?;
    for part in description.split(", ") {
        // `L1d 32 KiB 8-way 64-byte lines`
        let words: Vec<&str> = part.split_whitespace().collect();
        let [name, amount, unit, ways, line, ..] = words.as_slice() else {
            return Err(format!("cannot read the cache `{part}`"));
        };
        let scale = match *unit {
            "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => return Err(format!("cannot read the cache `{part}`")),
        };
        let number = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("cannot read `{part}`"))
        };
        caches.push(Cache {
            name: name.to_string(),
            bytes: number(amount)? * scale,
            ways: number(ways.trim_end_matches("-way"))?,
            line: number(line.trim_end_matches("-byte"))?,
        });
    }
    let mut misses = Vec::new();
    let mut table = text
        .lines()
        .skip_while(|l| !l.starts_with("predicted misses of the kernel"))
        .skip(2);
    for c in &caches {
        let row = table
            .next()
            .ok_or("--emit cache-model printed too few levels")?;
        let words: Vec<&str> = row.split_whitespace().collect();
        match words.as_slice() {
            [name, total, ..] if *name == c.name => misses.push(
                total
                    .parse::<f64>()
                    .map_err(|_| format!("cannot read `{row}`"))?,
            ),
            _ => return Err(format!("unexpected line `{row}` of --emit cache-model")),
        }
    }
    Ok(Predicted { caches, misses })
}

/// The kernel function stays a function of its own (its misses are counted by name); the
/// helpers declared `inline` are still inlined.
const CFLAGS: [&str; 6] = [
    "-O3",
    "-fopenmp",
    "-ffp-contract=off",
    "-fno-inline-functions",
    "-fno-inline-small-functions",
    "-fno-inline-functions-called-once",
];

fn gcc(args: &mut Command, what: &Path) -> Result<(), String> {
    let out = args.output().map_err(|e| format!("cannot run gcc: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "gcc cannot build {}:\n{}",
            what.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// A C kernel: its own harness, with the caches flushed before the kernel.
fn build_c(code: &Path, binary: &Path, include: &Path, caches: &[Cache]) -> Result<(), String> {
    let last = &caches[caches.len() - 1];
    gcc(
        Command::new("gcc")
            .args(CFLAGS)
            .arg("-DMEDIUM_DATASET")
            .arg(format!("-DPOLYBENCH_CACHE_SIZE_KB={}", last.bytes / 1024))
            .arg("-I")
            .arg(include)
            .arg(code)
            .arg("-o")
            .arg(binary)
            .arg("-lm"),
        code,
    )
}

/// A `.pf` kernel: a harness that allocates and fills its arrays, flushes the caches and calls
/// it; returns the kernel function's name.
fn build_pf(
    code: &Path,
    binary: &Path,
    work: &Path,
    stem: &str,
    caches: &[Cache],
) -> Result<String, String> {
    let text = std::fs::read_to_string(code).map_err(|e| format!("{}: {e}", code.display()))?;
    let signature = text
        .lines()
        .find(|l| l.starts_with("int ") && l.contains('('))
        .ok_or_else(|| format!("{}: no kernel function", code.display()))?;
    let (head, params) = signature
        .split_once('(')
        .ok_or("a kernel signature without parameters")?;
    let function = head.trim_start_matches("int ").trim().to_string();
    let params = params.trim_end().trim_end_matches(')');
    let last = &caches[caches.len() - 1];
    let mut harness = format!(
        "#include <stdio.h>\n#include <stdlib.h>\n#include \"{}\"\n\n\
         static void pf_flush(void)\n{{\n    size_t n = (size_t){} / sizeof(double);\n    \
         double *f = malloc(n * sizeof *f), s = 0.0;\n    if (!f)\n        exit(3);\n    \
         for (size_t i = 0; i < n; i++)\n        f[i] = (double)i;\n    \
         for (size_t i = 0; i < n; i++)\n        s += f[i];\n    if (s < 0.0)\n        \
         printf(\"%f\\n\", s);\n    free(f);\n}}\n\nint main(void)\n{{\n",
        code.display(),
        2 * last.bytes
    );
    let mut args = Vec::new();
    for (k, param) in params.split(", ").enumerate() {
        let param = param.trim().trim_start_matches("const ");
        let (ty, rest) = param
            .split_once(' ')
            .ok_or_else(|| format!("cannot read the parameter `{param}`"))?;
        let dims: Vec<&str> = rest
            .split('[')
            .skip(1)
            .map(|d| {
                d.trim_end_matches(']')
                    .trim_start_matches("restrict ")
                    .trim()
            })
            .collect();
        // Values that keep every element type finite (f16 as the bits of 1.0).
        let value = if ty == "uint16_t" {
            "(uint16_t)0x3c00".to_string()
        } else {
            format!("({ty})((i % 7) + 1) / ({ty})8")
        };
        if dims.is_empty() {
            harness += &format!("    {ty} pf_a{k} = ({ty})1;\n");
        } else {
            let count = dims
                .iter()
                .map(|d| format!("({d})"))
                .collect::<Vec<_>>()
                .join(" * ");
            harness += &format!(
                "    {ty} *pf_a{k} = malloc(sizeof({ty}) * {count});\n    if (!pf_a{k})\n        \
                 return 3;\n    for (size_t i = 0; i < (size_t)({count}); i++)\n        \
                 pf_a{k}[i] = {value};\n"
            );
        }
        args.push(format!("(void *)pf_a{k}"));
        if dims.is_empty() {
            *args.last_mut().expect("just pushed") = format!("pf_a{k}");
        }
    }
    harness += &format!(
        "    pf_flush();\n    int pf_status = {function}({});\n    printf(\"%d\\n\", pf_status);\n    \
         return 0;\n}}\n",
        args.join(", ")
    );
    let main = work.join(format!("{stem}.main.c"));
    std::fs::write(&main, harness).map_err(|e| format!("{}: {e}", main.display()))?;
    gcc(
        Command::new("gcc")
            .args(CFLAGS)
            .arg(&main)
            .arg("-o")
            .arg(binary)
            .arg("-lm"),
        &main,
    )?;
    Ok(function)
}

/// The D1 and LL misses of the functions named with `prefixes` (and `memset`) when `binary`
/// runs under cachegrind with D1 = `d1` and LL = `ll`.
fn cachegrind(
    binary: &Path,
    work: &Path,
    stem: &str,
    d1: &Cache,
    ll: &Cache,
    prefixes: &[String],
) -> Result<(u64, u64), String> {
    let out_file = work.join(format!("{stem}.{}.cachegrind", ll.name));
    let run = Command::new("valgrind")
        .args(["--tool=cachegrind", "--cache-sim=yes"])
        .arg(format!("--I1={}", d1.valgrind()))
        .arg(format!("--D1={}", d1.valgrind()))
        .arg(format!("--LL={}", ll.valgrind()))
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg(binary)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    if !run.status.success() {
        return Err(format!(
            "{} failed under cachegrind:\n{}",
            binary.display(),
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    let text =
        std::fs::read_to_string(&out_file).map_err(|e| format!("{}: {e}", out_file.display()))?;
    let mut events: Vec<String> = Vec::new();
    let mut counted = false;
    let (mut d1_misses, mut ll_misses) = (0u64, 0u64);
    for l in text.lines() {
        if let Some(e) = l.strip_prefix("events:") {
            events = e.split_whitespace().map(String::from).collect();
        } else if let Some(f) = l.strip_prefix("fn=") {
            counted = prefixes.iter().any(|p| f.starts_with(p.as_str())) || f.contains("memset");
        } else if counted && l.starts_with(|c: char| c.is_ascii_digit()) {
            for (name, value) in events.iter().zip(l.split_whitespace().skip(1)) {
                let v: u64 = value.parse().unwrap_or(0);
                match name.as_str() {
                    "D1mr" | "D1mw" => d1_misses += v,
                    "DLmr" | "DLmw" => ll_misses += v,
                    _ => {}
                }
            }
        }
    }
    Ok((d1_misses, ll_misses))
}

fn error(measured: u64, predicted: f64) -> f64 {
    if measured == 0 {
        return 0.0;
    }
    100.0 * (predicted - measured as f64) / measured as f64
}

fn line(row: &Row) -> String {
    match &row.levels {
        Err(why) => format!("{:<16} not supported by the model: {why}", row.kernel),
        Ok(levels) => {
            let parts: Vec<String> = levels
                .iter()
                .map(|(name, m, p)| {
                    format!(
                        "{name} {m} measured, {p:.0} predicted ({:+.1}%)",
                        error(*m, *p)
                    )
                })
                .collect();
            format!("{:<16} {}", row.kernel, parts.join("; "))
        }
    }
}

fn table(rows: &[Row], caches: &[Cache]) -> String {
    let names: Vec<String> = match caches {
        [] => Vec::new(),
        [only] => vec![only.name.clone()],
        [first, .., last] if caches.len() >= 3 => {
            vec![
                first.name.clone(),
                caches[1].name.clone(),
                last.name.clone(),
            ]
        }
        [first, .., last] => vec![first.name.clone(), last.name.clone()],
    };
    let described: Vec<String> = caches
        .iter()
        .map(|c| format!("{} {} KiB {}-way", c.name, c.bytes / 1024, c.ways))
        .collect();
    let mut out = format!(
        "Cold caches, one thread; caches as the CPU target describes them ({}, {}-byte lines). \
         Misses are cachegrind's (D1, and LL set to each level in turn) against the model's; \
         the error is (predicted − measured) / measured. Kernels marked * are the dense \
         linear algebra the model is meant to keep within 25%.\n\n",
        described.join(", "),
        caches.first().map_or(64, |c| c.line)
    );
    out += "| kernel | sizes |";
    let mut rule = String::from("| --- | --- |");
    for n in &names {
        out += &format!(" {n} measured | {n} predicted | {n} error |");
        rule += " ---: | ---: | ---: |";
    }
    out += &format!("\n{rule}\n");
    let mut notes = Vec::new();
    for r in rows {
        let stem = r.kernel.split('.').next().unwrap_or_default();
        let star = if DENSE.contains(&stem) { "*" } else { "" };
        out += &format!("| {}{star} | {} |", r.kernel, r.sizes);
        match &r.levels {
            Ok(levels) => {
                for (_, m, p) in levels {
                    out += &format!(" {m} | {p:.0} | {:+.1}% |", error(*m, *p));
                }
            }
            Err(why) => {
                notes.push(format!("{}: {why}", r.kernel));
                for _ in &names {
                    out += " — | — | — |";
                }
            }
        }
        out.push('\n');
    }
    if !notes.is_empty() {
        out += "\nNot modelled: ";
        out += &notes.join("; ");
        out += ".\n";
    }
    out
}
