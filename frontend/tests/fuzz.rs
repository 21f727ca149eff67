//! Bounded fuzzing of both parsers: random bytes, and random edits of the kernels in `kernels/`
//! (byte flips, deletions, duplications, splices of tokens from other kernels). Any panic is a
//! failure and prints the input that caused it.
//!
//! The long tests are ignored by default; `cargo xtask fuzz --seconds N` runs them in release
//! mode for N seconds each (environment variable `POLYFUSE_FUZZ_SECONDS`; the seed, printed, is
//! `POLYFUSE_FUZZ_SEED` or taken from the clock). The regular test suite runs a short version of
//! the same loop.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use frontend::{Language, Options, SourceFile};
use fuzzkit::{budget, seed, Rng};

fn corpus(ext: &str) -> Vec<(PathBuf, Vec<u8>)> {
    fuzzkit::corpus(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels"),
        ext,
    )
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

/// Feeds `iterations` inputs (or as many as fit in `budget`) to the parser of `language`.
fn fuzz(language: Language, ext: &str, budget: Duration, iterations: u64, seed: u64) {
    let files = corpus(ext);
    assert!(!files.is_empty(), "no .{ext} kernels to start from");
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let options = Options::default();
    let mut done = 0u64;
    while done < iterations && start.elapsed() < budget {
        let (path, text) = fuzzkit::input(&mut rng, &files, TOKENS);
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
