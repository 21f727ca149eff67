//! Running the `polyfuse` binary on a kernel with a time limit, and reading what happened.
//!
//! `polyfuse run K --target T` already compares the target's outputs with the interpreter's
//! and exits with status 1 on a mismatch; the runner tells apart a pass, a mismatch, a panic
//! (status 101 or "panicked" on stderr), a crash (killed by a signal), a clean refusal ("not
//! supported": a skip, not a failure), any other error, and a run that did not finish in time
//! (the whole process group is killed: the binary and what it started).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::kernel::{Kernel, Lang};
use super::Rng;

/// What one run of `polyfuse` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// The outputs differ from the interpreter's; the lines of the report that say how.
    Mismatch(String),
    /// The panic message (location and text).
    Panic(String),
    /// Killed by a signal or ended with an unexpected status.
    Crash(String),
    /// A clean "not supported" refusal.
    Skip(String),
    /// Any other error (exit status 1): the first line of the message.
    Error(String),
    Timeout,
}

impl Outcome {
    pub fn is_failure(&self) -> bool {
        !matches!(self, Outcome::Pass | Outcome::Skip(_))
    }

    /// The kind of outcome, as the summary counts it.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Mismatch(_) => "mismatch",
            Outcome::Panic(_) => "panic",
            Outcome::Crash(_) => "crash",
            Outcome::Skip(_) => "skip",
            Outcome::Error(_) => "error",
            Outcome::Timeout => "timeout",
        }
    }

    /// The detail line(s): what the report says.
    pub fn detail(&self) -> &str {
        match self {
            Outcome::Mismatch(s)
            | Outcome::Panic(s)
            | Outcome::Crash(s)
            | Outcome::Skip(s)
            | Outcome::Error(s) => s,
            Outcome::Pass | Outcome::Timeout => "",
        }
    }

    /// What must stay the same while a failing kernel is shrunk: the kind, and for panics and
    /// errors the message with names and numbers left out (shrinking renames nothing, but it
    /// changes sizes and the statements a message may name).
    pub fn signature(&self) -> String {
        let general = |s: &str| -> String {
            let mut out = String::new();
            let mut quoted = false;
            for c in s.chars() {
                if c == '`' {
                    quoted = !quoted;
                    out.push('`');
                } else if !quoted && !c.is_ascii_digit() {
                    out.push(c);
                }
            }
            out
        };
        match self {
            Outcome::Panic(s) => {
                // The location of the panic, without line and column.
                let at = s.split(" at ").nth(1).unwrap_or(s);
                let file = at.split(':').next().unwrap_or(at);
                format!("panic at {file}")
            }
            Outcome::Error(s) | Outcome::Crash(s) => {
                // Leave out the kernel's name, which the message starts with.
                let rest = s.split_once(": ").map_or(s.as_str(), |(_, r)| r);
                format!("{}: {}", self.kind(), general(rest))
            }
            other => other.kind().to_string(),
        }
    }
}

/// The address space one run of `polyfuse` may take (KiB): far more than a small kernel needs,
/// the GPU driver's mappings included.
const MEMORY_LIMIT_KIB: u64 = 8 << 20;

/// The `polyfuse` binary and where its runs keep their output.
pub struct Polyfuse {
    pub binary: PathBuf,
    pub work: PathBuf,
    pub timeout: Duration,
}

/// The text a run printed.
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}

impl Polyfuse {
    /// Runs `polyfuse ARGS` and classifies the result.
    pub fn run(&self, args: &[String]) -> (Outcome, Printed) {
        match self.spawn(args) {
            Ok((status, printed)) => (classify(status, &printed), printed),
            Err(e) => (
                Outcome::Crash(format!("cannot run {}: {e}", self.binary.display())),
                Printed {
                    stdout: String::new(),
                    stderr: String::new(),
                },
            ),
        }
    }

    /// The exit status (`None` after a timeout) and the output.
    fn spawn(
        &self,
        args: &[String],
    ) -> std::io::Result<(Option<std::process::ExitStatus>, Printed)> {
        let out_path = self.work.join("stdout.txt");
        let err_path = self.work.join("stderr.txt");
        // Under a memory limit where the shell can set one: a compiler whose memory runs away
        // fails to allocate (a crash) instead of waking the system's out-of-memory killer.
        let mut command = if cfg!(unix) {
            let mut c = Command::new("/bin/sh");
            c.arg("-c")
                .arg(format!(
                    "ulimit -v {} 2>/dev/null; exec \"$0\" \"$@\"",
                    MEMORY_LIMIT_KIB
                ))
                .arg(&self.binary);
            c
        } else {
            Command::new(&self.binary)
        };
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(File::create(&out_path)?)
            .stderr(File::create(&err_path)?)
            .env("RUST_BACKTRACE", "0");
        // Its own process group: the kernel binaries the CPU target builds must not outlive
        // a timeout either.
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        let mut child = command.spawn()?;
        let start = Instant::now();
        let mut pause = Duration::from_millis(1);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if start.elapsed() > self.timeout {
                kill_group(child.id());
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        };
        let read = |p: &Path| {
            std::fs::read(p)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        Ok((
            status,
            Printed {
                stdout: read(&out_path),
                stderr: read(&err_path),
            },
        ))
    }
}

/// Kills the process group `pid` leads (the run and everything it started).
fn kill_group(pid: u32) {
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stderr(Stdio::null())
            .status();
    }
    #[cfg(not(unix))]
    let _ = pid;
}

fn classify(status: Option<std::process::ExitStatus>, printed: &Printed) -> Outcome {
    let Some(status) = status else {
        return Outcome::Timeout;
    };
    let err = &printed.stderr;
    if let Some(k) = err.find("panicked at") {
        let rest = &err[k..];
        let message: Vec<&str> = rest.lines().take(2).collect();
        return Outcome::Panic(message.join(" "));
    }
    match status.code() {
        Some(0) => Outcome::Pass,
        Some(101) => Outcome::Panic(first_line(err)),
        Some(1) if err.contains("differ from the interpreter") => {
            let lines: Vec<&str> = printed
                .stdout
                .lines()
                .filter(|l| l.contains("MISMATCH") || l.contains("differ;"))
                .collect();
            Outcome::Mismatch(lines.join("\n"))
        }
        Some(1) if err.contains("not supported") && err.trim_end().lines().count() == 1 => {
            Outcome::Skip(first_line(err))
        }
        // 3: a budget ended the run (the interpreter's loop limit, the simulator's budget).
        Some(1 | 3) => Outcome::Error(first_line(err)),
        Some(code) => Outcome::Crash(format!("exit status {code}: {}", first_line(err))),
        None if err.contains("memory allocation of") => {
            Outcome::Crash(format!("out of memory: {}", first_line(err)))
        }
        None => {
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                Outcome::Crash(format!(
                    "killed by signal {}: {}",
                    status.signal().unwrap_or(0),
                    first_line(err)
                ))
            }
            #[cfg(not(unix))]
            Outcome::Crash(first_line(err))
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
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
    pub fn label(&self) -> String {
        let mut parts = vec![self.target.to_string()];
        parts.extend(self.options.iter().cloned());
        if self.small_tiles {
            parts.push("--tile 2..4".into());
        }
        parts.join(" ")
    }
}

/// The option sets of one kernel on `target`: the defaults, and one or two others. With
/// `short_loops` (the GPU on lavapipe), every set tiles small or not at all.
pub fn configs(
    rng: &mut Rng,
    target: &'static str,
    kernel: &Kernel,
    lang: Lang,
    short_loops: bool,
) -> Vec<Config> {
    // C computes `float` operands with `double` constants in `double`: a C kernel may use f64
    // where its `.pf` twin does not.
    let uses_f64 = lang == Lang::C || kernel.to_pf().contains("f64");
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
            config(&["--no-pack"], false),
            config(&["--no-pack"], true),
            config(&["--no-register-tile"], false),
            config(&["--no-register-tile", "--fuse", "maxfuse"], true),
            config(&["--no-fission"], true),
            config(&["--no-distribute"], true),
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
        // The accelerator tiles by its own rules (it takes no `--tile`): what changes its code
        // is double buffering, and `nofuse`, which gives every statement group its own kernel.
        _ => vec![
            config(&["--no-double-buffer"], false),
            config(&["--fuse", "nofuse"], false),
        ],
    };
    let n = if target == "npu" { 1 } else { 2 };
    for _ in 0..n {
        let c = extra[rng.below(extra.len())].clone();
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if short_loops {
        for c in &mut out {
            if !c.options.iter().any(|o| o == "--no-tile") {
                c.small_tiles = true;
            }
        }
        out.dedup();
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
pub fn run_config(
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
    fn signatures_ignore_numbers_and_names() {
        let a = Outcome::Error("k1: schedule: dependence S1 -> S2 violated at 3".into());
        let b = Outcome::Error("k2: schedule: dependence S0 -> S4 violated at 12".into());
        assert_eq!(a.signature(), b.signature());
        let p = Outcome::Panic("panicked at polyhedral/src/x.rs:10:5: boom".into());
        assert_eq!(p.signature(), "panic at polyhedral/src/x.rs");
        assert_eq!(Outcome::Mismatch("a".into()).signature(), "mismatch");
        assert!(!Outcome::Skip("not supported".into()).is_failure());
    }
}
