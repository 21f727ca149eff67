//! Running the benchmark's commands: every compiler and every binary runs under a time limit,
//! so a kernel whose compilation or run does not finish becomes a line of the table instead of
//! a hang, and C builds are written in one place.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a command ended.
pub(crate) enum Outcome {
    Finished {
        status: ExitStatus,
        stdout: String,
        stderr: String,
        seconds: f64,
    },
    /// Still running at the limit; it was killed.
    TimedOut,
}

/// Runs `cmd` to its end or until `limit` has passed, whichever comes first, and collects
/// its output (read on threads, so that a large output cannot block the child).
pub(crate) fn run_limited(cmd: &mut Command, limit: Duration) -> Result<Outcome, String> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("{cmd:?}: {e}"))? {
            let seconds = start.elapsed().as_secs_f64();
            return Ok(Outcome::Finished {
                status,
                // A reader thread only ends by returning its text.
                stdout: out.join().unwrap_or_default(),
                stderr: err.join().unwrap_or_default(),
                seconds,
            });
        }
        if start.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            let _ = (out.join(), err.join());
            return Ok(Outcome::TimedOut);
        }
        // Fine enough for a compile time of a few milliseconds.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The first line of a diagnostic that says something (for a table cell).
pub(crate) fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message");
    let line = line.replace('|', "/");
    if line.chars().count() > 140 {
        format!("{}…", line.chars().take(140).collect::<String>())
    } else {
        line
    }
}

/// One way of building a PolyBench file: a C compiler and its flags.
#[derive(Clone)]
pub(crate) struct Toolchain {
    pub(crate) cc: String,
    pub(crate) flags: Vec<String>,
    pub(crate) libs: Vec<String>,
}

impl Toolchain {
    pub(crate) fn new(cc: &str, flags: &[&str]) -> Toolchain {
        Toolchain {
            cc: cc.to_string(),
            flags: flags.iter().map(|s| s.to_string()).collect(),
            libs: Vec::new(),
        }
    }
}

/// What a C build needs beside the toolchain: the sources, the include folders and the
/// defines (dataset, timing or dumping).
pub(crate) struct CBuild {
    pub(crate) sources: Vec<PathBuf>,
    pub(crate) includes: Vec<PathBuf>,
    pub(crate) defines: Vec<String>,
}

/// Builds `binary` with `-O3 -march=native`; the compiler's first error line when it fails.
pub(crate) fn compile_c(
    tools: &Toolchain,
    build: &CBuild,
    extra: &[&str],
    binary: &Path,
    limit: Duration,
) -> Result<(), String> {
    let mut cmd = Command::new(&tools.cc);
    cmd.args(["-O3", "-march=native"])
        .args(&tools.flags)
        .args(extra);
    for d in &build.defines {
        cmd.arg(format!("-D{d}"));
    }
    for i in &build.includes {
        cmd.arg("-I").arg(i);
    }
    cmd.args(&build.sources)
        .arg("-o")
        .arg(binary)
        .args(&tools.libs)
        .arg("-lm");
    match run_limited(&mut cmd, limit)? {
        Outcome::Finished { status, .. } if status.success() => Ok(()),
        Outcome::Finished { stderr, .. } => Err(format!(
            "{} cannot build it: {}",
            tools.cc,
            first_line(
                stderr
                    .lines()
                    .find(|l| l.contains("error"))
                    .unwrap_or(&stderr)
            )
        )),
        Outcome::TimedOut => Err(format!(
            "{} did not finish building it in {} s",
            tools.cc,
            limit.as_secs()
        )),
    }
}

/// How the binaries run: their OpenMP (and BLAS) threads, and whether a thread waiting at a
/// barrier spins or sleeps.
#[derive(Clone, Copy)]
pub(crate) struct RunEnv {
    pub(crate) threads: usize,
    /// OpenMP's `passive` wait policy: on a machine shared with other work, a spinning thread
    /// can hold the core its partner needs, and a barrier then costs a scheduler time slice.
    pub(crate) passive: bool,
}

/// Runs a built binary; its stdout and stderr, or why it did not succeed.
pub(crate) fn run_binary(
    binary: &Path,
    env: RunEnv,
    limit: Duration,
) -> Result<(String, String), String> {
    run_within(binary, env, limit)?.ok_or_else(|| format!("it ran past {} s", limit.as_secs()))
}

/// [`run_binary`], with `None` when the binary ran past `limit`.
fn run_within(
    binary: &Path,
    env: RunEnv,
    limit: Duration,
) -> Result<Option<(String, String)>, String> {
    let mut cmd = Command::new(binary);
    cmd.env("OMP_NUM_THREADS", env.threads.to_string())
        .env("OPENBLAS_NUM_THREADS", env.threads.to_string())
        .env(
            "OMP_WAIT_POLICY",
            if env.passive { "PASSIVE" } else { "ACTIVE" },
        );
    match run_limited(&mut cmd, limit)? {
        Outcome::Finished {
            status,
            stdout,
            stderr,
            ..
        } if status.success() => Ok(Some((stdout, stderr))),
        Outcome::Finished { status, .. } => Err(format!("it failed when run ({status})")),
        Outcome::TimedOut => Ok(None),
    }
}

/// The seconds a `-DPOLYBENCH_TIME` binary prints as its last line.
pub(crate) fn run_timed(binary: &Path, env: RunEnv, limit: Duration) -> Result<f64, String> {
    run_timed_within(binary, env, limit)?
        .ok_or_else(|| format!("it ran past {} s", limit.as_secs()))
}

/// [`run_timed`], with `None` when the binary ran past `limit`.
pub(crate) fn run_timed_within(
    binary: &Path,
    env: RunEnv,
    limit: Duration,
) -> Result<Option<f64>, String> {
    let Some((stdout, _)) = run_within(binary, env, limit)? else {
        return Ok(None);
    };
    stdout
        .trim()
        .lines()
        .last()
        .and_then(|l| l.trim().parse::<f64>().ok())
        .map(Some)
        .ok_or_else(|| format!("{} printed no time", binary.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_past_its_limit_is_killed_and_reported() {
        let t = Instant::now();
        let outcome =
            run_limited(Command::new("sleep").arg("30"), Duration::from_millis(200)).unwrap();
        assert!(matches!(outcome, Outcome::TimedOut));
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_finished_command_gives_its_output_and_status() {
        let outcome = run_limited(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(30),
        )
        .unwrap();
        let Outcome::Finished {
            status,
            stdout,
            stderr,
            ..
        } = outcome
        else {
            panic!("sh did not finish");
        };
        assert_eq!(status.code(), Some(3));
        assert_eq!(stdout, "out\n");
        assert_eq!(stderr, "err\n");
    }

    #[test]
    fn first_line_skips_blank_lines_and_escapes_table_bars() {
        assert_eq!(first_line("\n\n  a | b\nc"), "a / b");
        assert_eq!(first_line(""), "no message");
    }
}
