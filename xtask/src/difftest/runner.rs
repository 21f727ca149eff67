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
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(File::create(&out_path)?)
            .stderr(File::create(&err_path)?)
            // The kernel binaries the CPU target builds must not outlive a timeout either.
            .env("RUST_BACKTRACE", "0");
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
        Some(1) => Outcome::Error(first_line(err)),
        Some(code) => Outcome::Crash(format!("exit status {code}: {}", first_line(err))),
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

#[cfg(test)]
mod tests {
    use super::*;

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
