//! isl (through islpy) as an oracle for the middle end: `xtask/isl_oracle.py` runs as a server
//! beside the difftest and gets, per kernel, what `polyfuse check` and `polyfuse compile --emit
//! program|deps|tree` print; it recomputes the dependences with isl, compares them with
//! polyfuse's, and checks the optimized schedule trees against them (see the script).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use super::runner::{Outcome, Polyfuse};
use super::Rng;

/// Why a kernel was not checked, or what was wrong.
pub enum Problem {
    /// The oracle cannot run any more.
    Unavailable(String),
    /// polyfuse refused to print what the oracle needs (a clean error): nothing to check.
    Skipped,
    /// isl disagrees.
    Wrong(String),
}

pub struct Isl {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

/// How long isl may take for one kernel.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

impl Isl {
    /// Starts the oracle, if python3 and islpy are installed.
    pub fn start(root: &Path) -> Result<Isl, String> {
        let has_islpy = Command::new("python3")
            .args(["-c", "import islpy"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_islpy {
            return Err("islpy is not installed (pip install islpy)".into());
        }
        let mut child = Command::new("python3")
            .arg(root.join("xtask/isl_oracle.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start python3: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Isl {
            child,
            stdin,
            lines: rx,
        })
    }

    /// Checks the kernel in `file`: its dependences, and the schedules of two compilations
    /// (the CPU's defaults and one other option set, chosen by `seed`).
    pub fn check(&mut self, pf: &Polyfuse, file: &Path, seed: u64) -> Result<(), Problem> {
        let file = file.display().to_string();
        let print = |args: &[&str]| -> Result<String, Problem> {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let (outcome, printed) = pf.run(&args);
            match outcome {
                Outcome::Pass => Ok(printed.stdout),
                Outcome::Skip(_) | Outcome::Error(_) => Err(Problem::Skipped),
                other => Err(Problem::Wrong(format!(
                    "polyfuse {}: {} {}",
                    args.join(" "),
                    other.kind(),
                    other.detail()
                ))),
            }
        };
        let program = print(&["check", &file])?;
        let deps = print(&["check", &file, "--emit", "deps"])?;
        let f64_flag = if program.contains("f64") {
            "--gpu-f32"
        } else {
            "--no-promote"
        };
        let others: [&[&str]; 5] = [
            &["--target", "cpu", "--fuse", "maxfuse"],
            &["--target", "cpu", "--fuse", "nofuse"],
            &["--target", "cpu", "--fuse", "post-tiling"],
            &["--target", "cpu", "--no-tile"],
            &["--target", "gpu", f64_flag],
        ];
        let mut rng = Rng::new(seed ^ 0x0ac1e);
        let mut trees = Vec::new();
        for options in [&["--target", "cpu"][..], others[rng.below(others.len())]] {
            let label = options.join(" ");
            let emit = |what: &str| -> Result<String, Problem> {
                let mut args = vec!["compile", &file, "--emit", what];
                args.extend_from_slice(options);
                print(&args)
            };
            let (Ok(p), Ok(d), Ok(t)) = (emit("program"), emit("deps"), emit("tree")) else {
                continue;
            };
            trees.push(serde_json::json!([label, p, d, t]));
        }
        let request = serde_json::json!({
            "program": program,
            "deps": deps,
            "trees": trees,
        });
        writeln!(self.stdin, "{request}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| Problem::Unavailable(format!("the isl oracle stopped: {e}")))?;
        let reply = self
            .lines
            .recv_timeout(ANSWER_TIMEOUT)
            .map_err(|_| Problem::Unavailable("the isl oracle did not answer".into()))?;
        let reply: serde_json::Value = serde_json::from_str(&reply)
            .map_err(|e| Problem::Unavailable(format!("the isl oracle's answer: {e}")))?;
        if reply["ok"] == true {
            Ok(())
        } else {
            Err(Problem::Wrong(
                reply["why"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_string(),
            ))
        }
    }

    pub fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// `A[i] = A[i - 1] + A[i]` for `1 <= i < N`, as `polyfuse check` prints it.
    const PROGRAM: &str = "kernel st\nparams: N = 6\narrays:\n  A: f32[N] inout\nstatements:\n  \
        S0: A[i] = A[i - 1] + A[i]\n    domain: [N] -> { S0[i] : 1 <= i < N }\n    \
        schedule: [0, i, 0]\n    write: [N] -> { S0[i] -> A[i] }\n    \
        read: [N] -> { S0[i] -> A[i - 1] }\n    read: [N] -> { S0[i] -> A[i] }\n";

    /// Its dependences, as `polyfuse check --emit deps` prints them.
    const DEPS: &str = "memory-based dependences:\n  \
        flow   S0 -> S0 on A, carried by loop 0 (i), distance (1)\n    \
        [N] -> { S0[i] -> S0[o0] : i + 1 = o0 and i >= 1 and N >= o0 + 1 }\n  \
        input  S0 -> S0 on A, carried by loop 0 (i), distance (1)\n    \
        [N] -> { S0[i] -> S0[o0] : i + 1 = o0 and i >= 1 and N >= o0 + 1 }\n\
        value-based flow dependences:\n  \
        flow   S0 -> S0 on A, carried by loop 0 (i), distance (1)\n    \
        [N] -> { S0[i] -> S0[o0] : i + 1 = o0 and i >= 1 and N >= o0 + 1 }\n\
        live-in reads:\n  \
        S0 reads A[i - 1]: [N] -> { S0[i] : i = 1 and N >= i + 1 }\n  \
        S0 reads A[i]: [N] -> { S0[i] : i >= 1 and N >= i + 1 }\n\
        live-out writes:\n  \
        S0 writes A: [N] -> { S0[i] : i >= 1 and N >= i + 1 }\n";

    fn tree(coefficient: &str, coincident: u8) -> String {
        format!(
            "domain: \"[N] -> {{ S0[i] : 1 <= i < N }}\"\nchild:\n  \
             schedule: \"[N] -> [{{ S0[i] -> [({coefficient})] }}]\"\n  permutable: 1\n  \
             coincident: [ {coincident} ]\n"
        )
    }

    /// The oracle's verdict on one request, or `None` without python3 and islpy.
    fn ask(deps: &str, tree: &str) -> Option<serde_json::Value> {
        let has_islpy = Command::new("python3")
            .args(["-c", "import islpy"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_islpy {
            eprintln!("islpy is not installed: the oracle is not tested");
            return None;
        }
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("isl_oracle.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 starts");
        let request = serde_json::json!({
            "program": PROGRAM,
            "deps": deps,
            "trees": [["cpu", PROGRAM, deps, tree]],
        });
        let mut stdin = child.stdin.take().expect("a pipe");
        writeln!(stdin, "{request}").expect("the oracle reads");
        drop(stdin);
        let out = child.wait_with_output().expect("the oracle answers");
        let line = String::from_utf8_lossy(&out.stdout);
        Some(serde_json::from_str(line.trim()).expect("one JSON line"))
    }

    #[test]
    fn isl_accepts_the_right_answers_and_finds_wrong_ones() {
        let Some(ok) = ask(DEPS, &tree("i", 0)) else {
            return;
        };
        assert_eq!(ok["ok"], true, "{ok}");
        let backwards = ask(DEPS, &tree("-i", 0)).unwrap();
        assert!(
            backwards["why"].as_str().unwrap().contains("backwards"),
            "{backwards}"
        );
        let parallel = ask(DEPS, &tree("i", 1)).unwrap();
        assert!(
            parallel["why"].as_str().unwrap().contains("coincident"),
            "{parallel}"
        );
        // A dependence polyfuse would have missed.
        let missing: String = DEPS.replacen("  flow   S0 -> S0", "  input  S0 -> S0", 1);
        let wrong = ask(&missing, &tree("i", 0)).unwrap();
        assert!(wrong["why"].as_str().unwrap().contains("flow"), "{wrong}");
    }
}
