//! `cargo xtask bench npu`: the accelerator target on the simulator.
//!
//! Each case is compiled with `polyfuse compile --target npu` (double- and single-buffered; the
//! single-buffered row is left out where the program is the same) and simulated with
//! `polyfuse sim --json` on the default machine. The table gives the simulated cycles, the
//! cores used, the Cube's and the Vector unit's utilisation (busy cycles over cycles times the
//! cores used, and times all the machine's cores), the GM bytes moved, and the **machine
//! bound**: the cycles no program for the kernel can beat on this machine,
//! `max(MACs / (fractal MACs per cycle × all cores), vector work / all cores, compulsory GM
//! bytes / GM bandwidth)`. The MACs are the instances of the kernel's multiply-accumulate
//! statements (reductions by `+` of a product; `polyfuse check` counts them), at one fractal
//! (16·16·16 MACs) per cycle with f16 operands and `cube.per_fractal_f32` cycles with f32
//! ones; the vector work is the Vector unit's busy cycles of the program; the compulsory bytes
//! read every input once and write every output once (in-out arrays both). The last columns
//! are cycles over that bound and which term it is. Correctness is not checked here (the
//! interpreter is slow at these sizes): `polyfuse run --target npu` and the tests do that.
//! Kernels the target refuses are listed with the reason.
//!
//! `--readme` rewrites the table between the `<!-- bench npu -->` markers of docs/benchmarks.md.

use std::path::Path;
use std::process::Command;

use crate::{build_polyfuse, check_listing, workspace_root};

/// (label, kernel file under the workspace root, sizes, further options of `polyfuse compile`)
const CASES: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "gemm f16 256³",
        "kernels/gemm_f16.pf",
        &["M=256", "N=256", "K=256"],
        &[],
    ),
    (
        "gemm f16 1024³",
        "kernels/gemm_f16.pf",
        &["M=1024", "N=1024", "K=1024"],
        &[],
    ),
    (
        "gemm f16 1000×1024×1024",
        "kernels/gemm_f16.pf",
        &["M=1000", "N=1024", "K=1024"],
        &[],
    ),
    (
        "gemm f16 1000×1000×999",
        "kernels/gemm_f16.pf",
        &["M=1000", "N=1000", "K=999"],
        &[],
    ),
    ("gemm_bias_relu 512³", "kernels/gemm_bias_relu.pf", &[], &[]),
    ("gemm f32", "kernels/gemm.pf", &[], &["--npu-f32"]),
    (
        "gemm f32 512³",
        "kernels/gemm.pf",
        &["NI=512", "NJ=512", "NK=512"],
        &["--npu-f32"],
    ),
    ("2mm f32", "kernels/2mm.pf", &[], &["--npu-f32"]),
    ("3mm f32", "kernels/3mm.pf", &[], &["--npu-f32"]),
    ("contract3d", "kernels/contract3d.pf", &[], &[]),
    ("conv2d_relu", "kernels/conv2d_relu.pf", &[], &[]),
    ("conv2d_bn_relu", "kernels/conv2d_bn_relu.pf", &[], &[]),
    ("softmax", "kernels/softmax.pf", &[], &[]),
    ("layernorm", "kernels/layernorm.pf", &[], &[]),
    ("blur_unsharp", "kernels/blur_unsharp.pf", &[], &[]),
    ("jacobi2d f32", "kernels/jacobi2d.pf", &[], &["--npu-f32"]),
    ("syrk.c f32", "kernels/syrk.c", &[], &["--npu-f32"]),
    ("trmm f32", "kernels/trmm.pf", &[], &["--npu-f32"]),
    ("lu f32", "kernels/lu.pf", &[], &["--npu-f32"]),
    (
        "covariance.c f32",
        "kernels/covariance.c",
        &[],
        &["--npu-f32"],
    ),
    ("doitgen.c f32", "kernels/doitgen.c", &[], &["--npu-f32"]),
    ("gemver.c f32", "kernels/gemver.c", &[], &["--npu-f32"]),
    ("attention", "tests/ml/attention.pf", &[], &[]),
    ("masked_scores", "tests/ml/masked_scores.pf", &[], &[]),
    ("depthwise_conv", "tests/ml/depthwise_conv.pf", &[], &[]),
    ("max_pool", "tests/ml/max_pool.pf", &[], &[]),
    ("swiglu", "tests/ml/swiglu.pf", &[], &[]),
    (
        "transformer_block",
        "tests/ml/transformer_block.pf",
        &[],
        &[],
    ),
];

/// The most instructions one simulation may run.
const MAX_INSTRUCTIONS: &str = "500000000";

struct Sim {
    cycles: u64,
    cores: u64,
    macs: u64,
    vector_busy: u64,
    gm_bytes: u64,
}

/// What the machine bound needs from the machine description.
struct Machine {
    cores: u64,
    gm_bandwidth: u64,
    per_fractal_f32: u64,
}

/// The multiply-accumulates and the compulsory GM bytes of a kernel.
struct Work {
    macs: u64,
    compulsory: u64,
    /// Whether the inputs are f16 (the Cube's fastest operands).
    f16: bool,
}

pub(crate) fn bench_npu(args: &[String]) -> Result<(), String> {
    let readme = match args {
        [] => false,
        [a] if a == "--readme" => true,
        _ => return Err("usage: cargo xtask bench npu [--readme]".into()),
    };
    let root = workspace_root();
    let polyfuse = build_polyfuse()?;
    let text = std::fs::read_to_string(root.join("sim/machines/davinci910.machine"))
        .map_err(|e| format!("cannot read the machine file: {e}"))?;
    let key = |k: &str| -> Result<u64, String> {
        text.lines()
            .filter_map(|l| l.split('#').next()?.split_once('='))
            .find(|(name, _)| name.trim() == k)
            .and_then(|(_, v)| v.trim().parse().ok())
            .ok_or(format!("the machine file has no `{k}`"))
    };
    let machine = Machine {
        cores: key("cores")?,
        gm_bandwidth: key("gm.bandwidth")?,
        per_fractal_f32: key("cube.per_fractal_f32")?,
    };
    let work = root.join("target/bench-npu");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;

    let mut table = format!(
        "Simulated on the default machine (`sim/machines/davinci910.machine`, {} cores). \
         Utilisation: busy cycles over cycles × the cores used / × all {} cores. Machine \
         bound = max(MACs / (fractal MACs per cycle × all cores), vector work / all cores, \
         compulsory GM bytes / GM bandwidth).\n\n\
         | kernel | buffers | cores | cycles | cube used / all | vector used / all | GM bytes | machine bound | cycles / bound |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        machine.cores, machine.cores
    );
    for (label, file, sizes, flags) in CASES {
        let kernel = root.join(file);
        let kernel_work = match kernel_work(&polyfuse, &kernel, sizes, flags) {
            Ok(w) => w,
            Err(why) => {
                eprintln!("{label}: {why}");
                table += &format!(
                    "| {label} | — | | | | | | | {} |\n",
                    why.replace('|', "\\|")
                );
                continue;
            }
        };
        let mut previous: Option<String> = None;
        for double in [true, false] {
            let out = work.join(format!(
                "{}{}.npuasm",
                label.replace([' ', '³', '×', '(', ')', '.'], "_"),
                if double { "" } else { "_single" }
            ));
            let mut cmd = Command::new(&polyfuse);
            cmd.arg("compile")
                .arg(&kernel)
                .args(["--target", "npu", "-o"])
                .arg(&out);
            for s in *sizes {
                cmd.args(["--size", s]);
            }
            cmd.args(*flags);
            if !double {
                cmd.arg("--no-double-buffer");
            }
            let compiled = cmd
                .output()
                .map_err(|e| format!("cannot run polyfuse: {e}"))?;
            if !compiled.status.success() {
                let why = first_line(&String::from_utf8_lossy(&compiled.stderr), file);
                eprintln!("{label}: {why}");
                table += &format!(
                    "| {label} | — | | | | | | | {} |\n",
                    why.replace('|', "\\|")
                );
                break;
            }
            let asm =
                std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            if previous.as_deref() == Some(asm.as_str()) {
                break;
            }
            let simulated = Command::new(&polyfuse)
                .arg("sim")
                .arg(&out)
                .args(["--json", "--max-instructions", MAX_INSTRUCTIONS])
                .output()
                .map_err(|e| format!("cannot run polyfuse sim: {e}"))?;
            if !simulated.status.success() {
                let why = first_line(&String::from_utf8_lossy(&simulated.stderr), file);
                eprintln!("{label}: the simulator stopped: {why}");
                table += &format!(
                    "| {label} | — | | | | | | | the simulator stopped: {} |\n",
                    why.replace('|', "\\|")
                );
                break;
            }
            let s = parse(&String::from_utf8_lossy(&simulated.stdout))?;
            let row = row(
                label,
                double,
                &s,
                &kernel_work,
                &machine,
                asm.contains("src_f32"),
            );
            eprint!("{row}");
            table += &row;
            previous = Some(asm);
        }
    }
    println!("{table}");
    if readme {
        crate::readme::write_section("npu", &table)?;
    }
    Ok(())
}

/// One row of the table; `f32_cube`: the program's Cube instructions take f32 operands.
fn row(
    label: &str,
    double: bool,
    s: &Sim,
    work: &Work,
    machine: &Machine,
    f32_cube: bool,
) -> String {
    let all = machine.cores;
    let used = s.cores.max(1);
    let fractal_cost = if work.f16 { 1 } else { machine.per_fractal_f32 };
    let terms = [
        (work.macs.div_ceil(16 * 16 * 16) * fractal_cost).div_ceil(all),
        s.vector_busy.div_ceil(all),
        work.compulsory.div_ceil(machine.gm_bandwidth),
    ];
    let (which, bound) = ["Cube", "Vector", "GM"]
        .into_iter()
        .zip(terms)
        .max_by_key(|&(_, t)| t)
        .expect("three terms");
    let bound = bound.max(1);
    let cube_busy = if f32_cube {
        s.macs * machine.per_fractal_f32
    } else {
        s.macs
    };
    let util = |busy: u64, cores: u64| 100.0 * busy as f64 / (s.cycles.max(1) * cores) as f64;
    format!(
        "| {label} | {} | {used} | {} | {:.1}% / {:.1}% | {:.1}% / {:.1}% | {} | {bound} ({which}) | {:.2}× |\n",
        if double { "double" } else { "single" },
        s.cycles,
        util(cube_busy, used),
        util(cube_busy, all),
        util(s.vector_busy, used),
        util(s.vector_busy, all),
        s.gm_bytes,
        s.cycles as f64 / bound as f64
    )
}

/// The first line of a refusal, without the kernel's name.
fn first_line(stderr: &str, file: &str) -> String {
    let stem = Path::new(file)
        .file_stem()
        .map_or(String::new(), |s| s.to_string_lossy().into_owned());
    stderr
        .lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .trim_start_matches(&format!("{stem}: "))
        .to_string()
}

/// The kernel's multiply-accumulates and compulsory GM bytes, from `polyfuse check`: the
/// instances of statements that add a product to what they write, and the bytes of its
/// inputs, outputs and in-out arrays (in the machine's types: f64 as f32 with `--npu-f32`).
fn kernel_work(
    polyfuse: &Path,
    kernel: &Path,
    sizes: &[&str],
    flags: &[&str],
) -> Result<Work, String> {
    let mut cmd = Command::new(polyfuse);
    cmd.arg("check").arg(kernel);
    for s in sizes {
        cmd.args(["--size", s]);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run polyfuse: {e}"))?;
    if !out.status.success() {
        return Err(first_line(
            &String::from_utf8_lossy(&out.stderr),
            &kernel.to_string_lossy(),
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let narrow = flags.contains(&"--npu-f32");
    let mut compulsory = 0;
    let mut f16 = false;
    for a in check_listing::arrays(&text)? {
        let times = match a.role.as_str() {
            "input" | "output" => 1,
            "inout" => 2,
            _ => 0,
        };
        let size = match check_listing::elem_bytes(&a.elem) {
            Some(8) if narrow => 4,
            Some(size) => size,
            None => return Err(format!("the element type of `{}`", a.name)),
        };
        compulsory += times * size * a.elements;
        f16 |= a.elem == "f16" && a.role == "input";
    }
    let mut section = "";
    let mut statement: Option<(String, bool)> = None;
    let mut accumulates: Vec<String> = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') {
            section = line.trim_end_matches(':');
            continue;
        }
        match section {
            "statements" if line.starts_with("  S") => {
                // `  S1: C[i, j] = C[i, j] + f32(A[i, k]) * f32(B[k, j])`
                let (name, body) = line.trim().split_once(": ").unwrap_or(("", ""));
                statement = Some((name.to_string(), body.contains(" * ")));
            }
            "statements" if line.trim().starts_with("reduction: + over") => {
                if let Some((name, true)) = &statement {
                    accumulates.push(name.clone());
                }
            }
            _ => {}
        }
    }
    let counts = text
        .lines()
        .find_map(|l| l.strip_prefix("instances: "))
        .ok_or("`polyfuse check` printed no instance counts")?;
    let mut macs = 0;
    for c in counts.split(", ") {
        let (name, n) = c.split_once(' ').unwrap_or((c, ""));
        if accumulates.iter().any(|a| a == name) {
            macs += n
                .parse::<u64>()
                .map_err(|_| format!("statement {name} has {n} instances"))?;
        }
    }
    Ok(Work {
        macs,
        compulsory,
        f16,
    })
}

/// The numbers the table needs from `polyfuse sim --json`.
fn parse(json: &str) -> Result<Sim, String> {
    let number = |key: &str, from: &str| -> Result<u64, String> {
        let at = from
            .find(&format!("\"{key}\":"))
            .ok_or(format!("no `{key}` in the simulator's report"))?;
        let rest = from[at + key.len() + 3..].trim_start();
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest[..end]
            .parse()
            .map_err(|_| format!("`{key}` is not a number"))
    };
    let v_at = json
        .find("\"pipe\": \"V\"")
        .ok_or("no V pipe in the simulator's report")?;
    Ok(Sim {
        cycles: number("cycles", json)?,
        cores: number("cores_used", json)?,
        macs: number("cube_fractal_macs", json)?,
        vector_busy: number("busy_cycles", &json[v_at..])?,
        gm_bytes: number("gm_read_bytes", json)? + number("gm_written_bytes", json)?,
    })
}
