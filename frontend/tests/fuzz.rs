//! Bounded fuzzing of both parsers: random bytes, and random edits of the kernels in `kernels/`
//! (byte flips, deletions, duplications, splices of tokens from other kernels). Any panic is a
//! failure and prints the input that caused it.
//!
//! The long tests are ignored by default; `cargo xtask fuzz --seconds N` runs them in release
//! mode for N seconds each (environment variable `POLYFUSE_FUZZ_SECONDS`). The regular test
//! suite runs a short version of the same loop.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use frontend::{Language, Options, SourceFile};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn corpus(ext: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("kernels/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .map(|p| {
            let bytes = std::fs::read(&p).expect("kernel is readable");
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

const TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ";",
    ",",
    "=",
    "+=!",
    "+=",
    "*",
    "/",
    "-",
    "<",
    "<=",
    "&&",
    "for",
    "where",
    "in",
    ":",
    "kernel",
    "fn",
    "return",
    "while",
    "if",
    "else",
    "#pragma scop",
    "#pragma endscop",
    "#define N",
    "#if",
    "#endif",
    "i",
    "j",
    "0",
    "1.0",
    "-1",
    "99999999999",
    "\n",
    " ",
    "\"",
    "/*",
    "*/",
    "//",
    "f16",
    "i32",
    "A",
    "max(",
    "sqrt(",
    "\u{e9}",
    "\0",
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(5) {
            0 if !input.is_empty() => {
                let at = at.min(input.len() - 1);
                input[at] ^= 1 << rng.below(8);
            }
            1 => {
                let end = (at + rng.below(16)).min(input.len());
                input.drain(at..end);
            }
            2 => {
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                input.splice(at..at, token.iter().copied());
            }
            3 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + rng.below(64)).min(other.len());
                input.splice(at..at, other[from..end].iter().copied());
            }
            _ => {
                let n = rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
        }
    }
}

/// Feeds `iterations` inputs (or as many as fit in `budget`) to the parser of `language`.
fn fuzz(language: Language, ext: &str, budget: Duration, iterations: u64, seed: u64) {
    let files = corpus(ext);
    assert!(!files.is_empty(), "no .{ext} kernels to start from");
    let mut rng = Rng(seed | 1);
    let start = Instant::now();
    let options = Options::default();
    let mut done = 0u64;
    while done < iterations && start.elapsed() < budget {
        let (path, base) = &files[rng.below(files.len())];
        let input = if rng.below(10) == 0 {
            (0..rng.below(256)).map(|_| rng.next() as u8).collect()
        } else {
            let mut input = base.clone();
            let other = &files[rng.below(files.len())].1;
            mutate(&mut rng, &mut input, other);
            input
        };
        let text = String::from_utf8_lossy(&input).into_owned();
        let file = SourceFile::new(path, text.clone());
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            frontend::parse(&file, language, &options).map(|p| p.verify())
        }));
        match outcome {
            Err(_) => panic!("the parser panicked on this input:\n{text}"),
            Ok(Ok(Err(e))) => panic!("an accepted input gave an invalid program ({e}):\n{text}"),
            Ok(_) => {}
        }
        done += 1;
    }
    println!("{done} inputs in {:.1} s", start.elapsed().as_secs_f64());
}

fn budget() -> Duration {
    let seconds = std::env::var("POLYFUSE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(seconds)
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

#[test]
#[ignore = "long-running; use `cargo xtask fuzz`"]
fn fuzz_pf() {
    fuzz(Language::Kernel, "pf", budget(), u64::MAX, seed());
}

#[test]
#[ignore = "long-running; use `cargo xtask fuzz`"]
fn fuzz_c() {
    fuzz(Language::CScop, "c", budget(), u64::MAX, seed());
}

#[test]
fn short_fuzz_pf() {
    fuzz(
        Language::Kernel,
        "pf",
        Duration::from_secs(4),
        20_000,
        0x5eed,
    );
}

#[test]
fn short_fuzz_c() {
    fuzz(Language::CScop, "c", Duration::from_secs(4), 20_000, 0x5eed);
}
