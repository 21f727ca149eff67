//! `cargo xtask outputs --save DIR | --against DIR [--polybench DIR] [--only TEXT]`: what
//! `polyfuse compile` writes for every kernel in `kernels/` and every PolyBench/C kernel, on
//! every target, saved into a folder or compared with one saved earlier.
//!
//! A change that should not change the generated code (a refactoring) is checked by saving the
//! outputs before it and comparing after. Each kernel is compiled for each target three ways:
//! its code, its schedule tree (`--emit tree`) and its code under post-tiling fusion; a
//! compilation that fails is recorded by its exit status and diagnostic, so a refusal that
//! changes wording counts as a change too. PolyBench kernels compile at their default dataset,
//! in float for the GPU and the accelerator.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::bench_cpu::polybench;
use crate::bench_cpu::process::{run_limited, Outcome};
use crate::{build_polyfuse, kernel_files, workspace_root};

/// How long one compilation may take before it is recorded as timed out.
const LIMIT: Duration = Duration::from_secs(300);

const TARGETS: [&str; 3] = ["cpu", "gpu", "npu"];

/// The ways each kernel is compiled for each target: a name and the extra arguments.
const VARIANTS: [(&str, &[&str]); 3] = [
    ("code", &[]),
    ("tree", &["--emit", "tree"]),
    ("post-tiling", &["--fuse", "post-tiling"]),
];

/// One compilation: where its record goes and the command's arguments.
struct Job {
    name: String,
    args: Vec<String>,
}

enum Mode {
    Save(PathBuf),
    Against(PathBuf),
}

pub(crate) fn outputs(args: &[String]) -> Result<(), String> {
    let mut mode = None;
    let mut polybench_dir = None;
    let mut only = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--save" => mode = Some(Mode::Save(PathBuf::from(value()?))),
            "--against" => mode = Some(Mode::Against(PathBuf::from(value()?))),
            "--polybench" => polybench_dir = Some(PathBuf::from(value()?)),
            "--only" => only = Some(value()?),
            other => return Err(format!("outputs: unknown argument `{other}`")),
        }
    }
    let mode = mode.ok_or("outputs needs --save DIR or --against DIR")?;
    let jobs = jobs(polybench_dir.as_deref(), only.as_ref())?;
    let polyfuse = build_polyfuse()?;
    let records = run_all(&polyfuse, &jobs);
    match mode {
        Mode::Save(dir) => save(&dir, &records),
        Mode::Against(dir) => compare(&dir, &records),
    }
}

/// Every compilation, kernels of `kernels/` first.
fn jobs(polybench_dir: Option<&Path>, only: Option<&String>) -> Result<Vec<Job>, String> {
    let mut sources: Vec<(String, Vec<String>)> = kernel_files(&["pf", "c"], only)?
        .into_iter()
        .map(|path| {
            let file = path.file_name().unwrap_or_default().to_string_lossy();
            (file.replace('.', "_"), vec![path.display().to_string()])
        })
        .collect();
    let suite = polybench::locate(polybench_dir, &workspace_root())?;
    for kernel in suite.kernels()? {
        if only.is_some_and(|o| !kernel.name.contains(o.as_str())) {
            continue;
        }
        sources.push((
            format!("polybench_{}", kernel.name),
            vec![
                kernel.source.display().to_string(),
                "-I".into(),
                suite.utilities().display().to_string(),
            ],
        ));
    }
    let mut jobs = Vec::new();
    for (stem, source) in &sources {
        for target in TARGETS {
            for (variant, extra) in VARIANTS {
                let mut args = vec!["compile".to_string()];
                args.extend(source.iter().cloned());
                args.extend(["--target".to_string(), target.to_string()]);
                // PolyBench's kernels are in double unless told otherwise, which neither
                // the GPU nor the accelerator computes.
                if target != "cpu" && source[0].ends_with(".c") {
                    args.extend(["-D".to_string(), "DATA_TYPE_IS_FLOAT".to_string()]);
                }
                args.extend(extra.iter().map(|s| s.to_string()));
                jobs.push(Job {
                    name: format!("{stem}.{target}.{variant}"),
                    args,
                });
            }
        }
    }
    Ok(jobs)
}

/// Runs every job on as many threads as the machine has cores; the records in job order.
fn run_all(polyfuse: &Path, jobs: &[Job]) -> Vec<(String, String)> {
    let next = AtomicUsize::new(0);
    let records = Mutex::new(vec![String::new(); jobs.len()]);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let record = record(polyfuse, job);
                records.lock().expect("no thread panics holding it")[i] = record;
            });
        }
    });
    let records = records.into_inner().expect("no thread panicked");
    println!("{} compilations", jobs.len());
    jobs.iter().map(|j| j.name.clone()).zip(records).collect()
}

/// What one compilation wrote: its output, or its exit status and diagnostic. Paths are
/// written relative to the workspace so that records from two clones compare.
fn record(polyfuse: &Path, job: &Job) -> String {
    let root = workspace_root();
    let mut cmd = Command::new(polyfuse);
    cmd.args(&job.args).current_dir(&root);
    let text = match run_limited(&mut cmd, LIMIT) {
        Err(why) => format!("--- not run: {why}\n"),
        Ok(Outcome::TimedOut) => format!("--- timed out after {} s\n", LIMIT.as_secs()),
        Ok(Outcome::Finished {
            status,
            stdout,
            stderr,
            ..
        }) if status.success() && stderr.is_empty() => stdout,
        Ok(Outcome::Finished {
            status,
            stdout,
            stderr,
            ..
        }) if status.success() => format!("{stdout}--- stderr\n{stderr}"),
        Ok(Outcome::Finished { status, stderr, .. }) => {
            format!("--- exit {}\n{stderr}", status.code().unwrap_or(-1))
        }
    };
    text.replace(&format!("{}/", root.display()), "")
}

fn save(dir: &Path, records: &[(String, String)]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for (name, text) in records {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    println!("outputs saved in {}", dir.display());
    Ok(())
}

fn compare(dir: &Path, records: &[(String, String)]) -> Result<(), String> {
    let mut changed = Vec::new();
    for (name, text) in records {
        let path = dir.join(name);
        let why = match std::fs::read_to_string(&path) {
            Ok(saved) if saved == *text => continue,
            Ok(_) => "differs",
            Err(_) => "is not saved",
        };
        let new = std::env::temp_dir().join(format!("polyfuse-outputs-{name}"));
        let _ = std::fs::write(&new, text);
        changed.push(format!(
            "{name} {why}: diff {} {}",
            path.display(),
            new.display()
        ));
    }
    if changed.is_empty() {
        println!("all {} outputs are identical", records.len());
        return Ok(());
    }
    for line in &changed {
        println!("{line}");
    }
    Err(format!(
        "{} of {} outputs changed (the new ones are in {}/polyfuse-outputs-*)",
        changed.len(),
        records.len(),
        std::env::temp_dir().display()
    ))
}
