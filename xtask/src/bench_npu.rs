//! `cargo xtask bench npu`: the accelerator target on the simulator.
//!
//! Each case is compiled with `polyfuse compile --target npu` (double- and single-buffered)
//! and simulated with `polyfuse sim --json` on the default machine; the table gives the
//! simulated cycles, the Cube's and the Vector unit's utilisation (busy cycles over cycles
//! times the cores used), the GM bytes moved, and the roofline bound
//! `max(compute, GM bytes / bandwidth)` with the ratio cycles / bound. Compute is the Cube's
//! fractal-MACs at their cost (one cycle each with f16 operands, `cube.per_fractal_f32` with
//! f32 ones) or the Vector unit's busy cycles, whichever is larger, spread over the cores used
//! (the cube column is that cost over cycles times cores); the bandwidth is the machine's total GM bandwidth or what the cores
//! used can draw through their GM→L1 paths, whichever is smaller. Correctness is not checked
//! here (the interpreter is slow at these sizes): `polyfuse run --target npu` and the tests do
//! that. Kernels the target refuses are listed with the reason.
//!
//! `--readme` rewrites the table between the `<!-- bench npu -->` markers of docs/benchmarks.md.

use std::process::Command;

use crate::{build_polyfuse, workspace_root};

/// (label, kernel file, sizes, further options of `polyfuse compile`)
const CASES: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "gemm f16 256³",
        "gemm_f16.pf",
        &["M=256", "N=256", "K=256"],
        &[],
    ),
    (
        "gemm f16 1024³",
        "gemm_f16.pf",
        &["M=1024", "N=1024", "K=1024"],
        &[],
    ),
    (
        "gemm f16 1000×1024×1024",
        "gemm_f16.pf",
        &["M=1000", "N=1024", "K=1024"],
        &[],
    ),
    (
        "gemm f16 1000×1000×999",
        "gemm_f16.pf",
        &["M=1000", "N=1000", "K=999"],
        &[],
    ),
    ("gemm_bias_relu 512³", "gemm_bias_relu.pf", &[], &[]),
    ("gemm f32", "gemm.pf", &[], &["--npu-f32"]),
    (
        "gemm f32 512³",
        "gemm.pf",
        &["NI=512", "NJ=512", "NK=512"],
        &["--npu-f32"],
    ),
    ("2mm f32", "2mm.pf", &[], &["--npu-f32"]),
    ("3mm f32", "3mm.pf", &[], &["--npu-f32"]),
    ("contract3d", "contract3d.pf", &[], &[]),
    ("conv2d_relu", "conv2d_relu.pf", &[], &[]),
    ("conv2d_bn_relu", "conv2d_bn_relu.pf", &[], &[]),
    ("softmax", "softmax.pf", &[], &[]),
    ("layernorm", "layernorm.pf", &[], &[]),
    ("blur_unsharp", "blur_unsharp.pf", &[], &[]),
    ("jacobi2d f32", "jacobi2d.pf", &[], &["--npu-f32"]),
    ("syrk.c f32", "syrk.c", &[], &["--npu-f32"]),
    ("trmm f32", "trmm.pf", &[], &["--npu-f32"]),
    ("lu f32", "lu.pf", &[], &["--npu-f32"]),
    ("covariance.c f32", "covariance.c", &[], &["--npu-f32"]),
    ("doitgen.c f32", "doitgen.c", &[], &["--npu-f32"]),
    ("gemver.c f32", "gemver.c", &[], &["--npu-f32"]),
];

struct Sim {
    cycles: u64,
    cores: u64,
    macs: u64,
    vector_busy: u64,
    gm_bytes: u64,
}

pub(crate) fn bench_npu(args: &[String]) -> Result<(), String> {
    let readme = match args {
        [] => false,
        [a] if a == "--readme" => true,
        _ => return Err("usage: cargo xtask bench npu [--readme]".into()),
    };
    let root = workspace_root();
    let polyfuse = build_polyfuse()?;
    let machine = std::fs::read_to_string(root.join("sim/machines/davinci910.machine"))
        .map_err(|e| format!("cannot read the machine file: {e}"))?;
    let key = |k: &str| -> Result<u64, String> {
        machine
            .lines()
            .filter_map(|l| l.split('#').next()?.split_once('='))
            .find(|(name, _)| name.trim() == k)
            .and_then(|(_, v)| v.trim().parse().ok())
            .ok_or(format!("the machine file has no `{k}`"))
    };
    let (gm_bw, path_bw) = (key("gm.bandwidth")?, key("path.GM_L1.bandwidth")?);
    let f32_mac = key("cube.per_fractal_f32")?;
    let work = root.join("target/bench-npu");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;

    let mut table = String::from(
        "Simulated on the default machine (`sim/machines/davinci910.machine`); utilisations are over \
         the cores a kernel uses; bound = max(compute, GM bytes / bandwidth).\n\n\
         | kernel | buffers | cores | cycles | cube | vector | GM bytes | bound | cycles / bound |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for (label, file, sizes, flags) in CASES {
        for double in [true, false] {
            let out = work.join(format!(
                "{}.npuasm",
                label.replace([' ', '³', '×', '(', ')', '.'], "_")
            ));
            let mut cmd = Command::new(&polyfuse);
            cmd.arg("compile")
                .arg(root.join("kernels").join(file))
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
                let why = String::from_utf8_lossy(&compiled.stderr);
                let stem = file.trim_end_matches(".pf").trim_end_matches(".c");
                let why = why
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ")
                    .trim_start_matches(&format!("{stem}: "));
                eprintln!("{label}: {why}");
                table += &format!(
                    "| {label} | — | | | | | | | {} |\n",
                    why.replace('|', "\\|")
                );
                break;
            }
            let simulated = Command::new(&polyfuse)
                .arg("sim")
                .arg(&out)
                .arg("--json")
                .output()
                .map_err(|e| format!("cannot run polyfuse sim: {e}"))?;
            if !simulated.status.success() {
                return Err(format!(
                    "{label}: the simulator stopped:\n{}",
                    String::from_utf8_lossy(&simulated.stderr)
                ));
            }
            let s = parse(&String::from_utf8_lossy(&simulated.stdout))?;
            let asm =
                std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let cube = if asm.contains("src_f32") {
                s.macs * f32_mac
            } else {
                s.macs
            };
            let cores = s.cores.max(1);
            let compute = cube.max(s.vector_busy).div_ceil(cores);
            let memory = s.gm_bytes.div_ceil(gm_bw.min(path_bw * cores));
            let bound = compute.max(memory).max(1);
            let util = |busy: u64| 100.0 * busy as f64 / (s.cycles.max(1) * cores) as f64;
            let row = format!(
                "| {label} | {} | {cores} | {} | {:.1}% | {:.1}% | {} | {bound} ({}) | {:.2}× |\n",
                if double { "double" } else { "single" },
                s.cycles,
                util(cube),
                util(s.vector_busy),
                s.gm_bytes,
                if compute >= memory { "compute" } else { "GM" },
                s.cycles as f64 / bound as f64
            );
            eprint!("{row}");
            table += &row;
        }
    }
    println!("{table}");
    if readme {
        crate::readme::write_section("npu", &table)?;
    }
    Ok(())
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
