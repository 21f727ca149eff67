//! What the bounded fuzz tests of polyfuse's readers share: the pseudo-random generator,
//! byte-level mutations of valid inputs, the corpus of valid inputs in a folder, and the time
//! budget and seed of a long run from the environment (`POLYFUSE_FUZZ_SECONDS`,
//! `POLYFUSE_FUZZ_SEED`, which `cargo xtask fuzz` sets).
//!
//! The fuzz tests themselves live beside the reader they test (`frontend/tests/fuzz.rs`,
//! `polyhedral/tests/sets_parse_fuzz.rs`, `sim/tests/asm_fuzz.rs`); a panic there is a failure
//! that prints the input.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use prng::Rng;

/// One to four edits of `input`: a flipped bit, a deleted run, one of `tokens` inserted, a
/// piece of `other` spliced in, a number replaced by a boundary value, or random bytes.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8], tokens: &[&str]) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(6) {
            0 if !input.is_empty() => {
                let at = at.min(input.len() - 1);
                input[at] ^= 1 << rng.below(8);
            }
            1 => {
                let end = (at + rng.below(16)).min(input.len());
                input.drain(at..end);
            }
            2 if !tokens.is_empty() => {
                let token = tokens[rng.below(tokens.len())].as_bytes();
                input.splice(at..at, token.iter().copied());
            }
            3 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + rng.below(64)).min(other.len());
                input.splice(at..at, other[from..end].iter().copied());
            }
            4 if at < input.len() && input[at].is_ascii_digit() => {
                // Sizes, counts and offsets are where a reader's arithmetic breaks.
                let mut end = at;
                while end < input.len() && input[end].is_ascii_digit() {
                    end += 1;
                }
                let numbers = [
                    "0",
                    "1",
                    "3",
                    "31",
                    "4096",
                    "2147483648",
                    "18446744073709551615",
                ];
                let n = numbers[rng.below(numbers.len())].as_bytes();
                input.splice(at..end, n.iter().copied());
            }
            _ => {
                let n = rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                input.splice(at..at, bytes);
            }
        }
    }
}

/// One input from `files` (a corpus): random bytes one time in ten, else a file of it with
/// [`mutate`]'s edits and a piece of another file. Returns the file the input came from and the
/// input as text (invalid UTF-8 replaced).
pub fn input<'a>(
    rng: &mut Rng,
    files: &'a [(PathBuf, Vec<u8>)],
    tokens: &[&str],
) -> (&'a Path, String) {
    let (path, base) = &files[rng.below(files.len())];
    let bytes: Vec<u8> = if rng.below(10) == 0 {
        (0..rng.below(256)).map(|_| rng.next_u64() as u8).collect()
    } else {
        let mut input = base.clone();
        let other = &files[rng.below(files.len())].1;
        mutate(rng, &mut input, other, tokens);
        input
    };
    (path, String::from_utf8_lossy(&bytes).into_owned())
}

/// The files of `dir` whose extension is `ext`, with their bytes, sorted by path.
pub fn corpus(dir: &Path, ext: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// How long a long run lasts: `POLYFUSE_FUZZ_SECONDS`, else a minute.
pub fn budget() -> Duration {
    let seconds = std::env::var("POLYFUSE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(seconds)
}

/// The seed of a long run: `POLYFUSE_FUZZ_SEED`, else one from the clock; printed, so that a
/// failing run can be repeated.
pub fn seed() -> u64 {
    let seed = std::env::var("POLYFUSE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    println!("seed {seed}");
    seed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_change_inputs_and_stay_deterministic() {
        let base = b"kernel k<N = 16>() -> (A: f32[N]) { A(i) = 1.0; }".to_vec();
        let run = |seed| {
            let mut rng = Rng::new(seed);
            let mut input = base.clone();
            mutate(&mut rng, &mut input, b"other", &["(", ")"]);
            input
        };
        assert_eq!(run(7), run(7));
        assert!((0..20).any(|s| run(s) != base));
    }
}
