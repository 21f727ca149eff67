//! Kernels that once made polyfuse fail, most of them found by `cargo xtask difftest`
//! (`tests/regressions/`), C SCoPs written the ways polyhedral tools other than PolyBench
//! write them (`tests/scops/`), and the kernels of machine learning models beside those of
//! `kernels/` (`tests/ml/`): each file says in its `// run:` lines how to run it, and every
//! run must succeed (for a compiled target: match the interpreter). Runs on the GPU are left
//! out where no adapter is available.

use std::path::Path;
use std::process::Command;

fn polyfuse(args: &[String]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_polyfuse"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the polyfuse binary runs")
}

/// Whether the GPU target can run here (an adapter, lavapipe at least).
fn gpu_available() -> bool {
    let probe = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/softmax.pf");
    let args: Vec<String> = [
        "run",
        probe.to_str().unwrap(),
        "--target",
        "gpu",
        "--size",
        "N=2",
        "--size",
        "M=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    polyfuse(&args).status.success()
}

#[test]
fn every_regression_kernel_runs_as_its_header_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = ["tests/regressions", "tests/scops", "tests/ml"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect("the folder exists"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pf" || e == "c"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let gpu = gpu_available();
    let mut runs = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("// run:"))
            .collect();
        assert!(!lines.is_empty(), "{}: no `// run:` line", file.display());
        for line in lines {
            let options: Vec<String> = line.split_whitespace().map(String::from).collect();
            if !gpu
                && options
                    .windows(2)
                    .any(|w| w[0] == "--target" && w[1] == "gpu")
            {
                continue;
            }
            let mut args = vec!["run".to_string(), file.display().to_string()];
            args.extend(options);
            let out = polyfuse(&args);
            assert!(
                out.status.success(),
                "polyfuse {}\n{}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            runs += 1;
        }
    }
    assert!(runs > 0);
}
