//! Bounded random-input robustness test of the isl-notation reader: arbitrary token soups
//! and mutations of valid inputs must give a value (a set, a map or a positioned error),
//! never a panic, and an error's position must lie inside the input.
//!
//! The proptest cases run with the test suite; `fuzz_sets`, ignored by default, runs the same
//! kinds of inputs for as long as `cargo xtask fuzz sets --seconds N` asks (environment
//! variable `POLYFUSE_FUZZ_SECONDS`; the seed, printed, is `POLYFUSE_FUZZ_SEED` or taken from
//! the clock) and prints the input of any panic.

use fuzzkit::Rng;
use polyhedral::sets::{Map, Set};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

const TOKENS: [&str; 38] = [
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "->",
    ":",
    ";",
    ",",
    "and",
    "or",
    "exists",
    "floor",
    "ceil",
    "mod",
    "%",
    "/",
    "*",
    "+",
    "-",
    "<",
    "<=",
    ">",
    ">=",
    "=",
    "!=",
    "i",
    "j",
    "N",
    "S",
    "A",
    "0",
    "1",
    "3",
    "32",
    "99999999999999999999",
    "true",
];

const VALID: [&str; 4] = [
    "[N] -> { S[i, j] : 0 <= i < N and j >= i }",
    "{ S[i] -> A[i + 1] ; T[j] -> A[floor(j / 32)] }",
    "{ [i] : exists (e : i = 4e) or i mod 3 = 1 }",
    "[N] -> { : N > 0 }",
];

fn check(s: &str) {
    if let Err(e) = s.parse::<Set>() {
        assert!(e.pos <= s.len(), "{s:?}: {e}");
        if let Err(e) = s.parse::<Map>() {
            assert!(e.pos <= s.len(), "{s:?}: {e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5_000, failure_persistence: None, rng_seed: RngSeed::Fixed(7), ..ProptestConfig::default() })]

    /// 5,000 random token sequences.
    #[test]
    fn token_soup_never_panics(toks in proptest::collection::vec(0..TOKENS.len(), 0..40)) {
        let s: Vec<&str> = toks.iter().map(|&t| TOKENS[t]).collect();
        check(&s.join(" "));
    }

    /// 5,000 byte-level mutations (deletions and insertions) of valid inputs.
    #[test]
    fn mutations_never_panic(
        which in 0..VALID.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<bool>(), 0..TOKENS.len()), 1..4),
    ) {
        let mut s = VALID[which].to_owned();
        for (at, delete, tok) in edits {
            let mut at = at % (s.len() + 1);
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            if delete && at < s.len() {
                let mut end = at + 1;
                while !s.is_char_boundary(end) {
                    end += 1;
                }
                s.replace_range(at..end, "");
            } else {
                s.insert_str(at, TOKENS[tok]);
            }
        }
        check(&s);
    }

    /// 5,000 arbitrary strings.
    #[test]
    fn arbitrary_text_never_panics(s in ".{0,60}") {
        check(&s);
    }
}

#[test]
fn truncated_tuples_are_errors() {
    for s in ["{ [", "{ S[", "{ [i", "[N] -> { [", "{ [i] -> ["] {
        check(s);
        assert!(
            s.parse::<Set>().is_err() && s.parse::<Map>().is_err(),
            "{s}"
        );
    }
}

#[test]
fn deep_nesting_is_an_error() {
    let s = format!("{{ [i] : {}i >= 0{} }}", "(".repeat(500), ")".repeat(500));
    assert!(s.parse::<Set>().is_err());
}

/// One random input: a token soup, token edits of a valid input, or byte edits of one.
fn random_input(rng: &mut Rng) -> String {
    match rng.below(3) {
        0 => (0..rng.below(40))
            .map(|_| TOKENS[rng.below(TOKENS.len())])
            .collect::<Vec<_>>()
            .join(" "),
        1 => {
            let mut s = VALID[rng.below(VALID.len())].to_owned();
            for _ in 0..1 + rng.below(4) {
                let mut at = rng.below(s.len() + 1);
                while !s.is_char_boundary(at) {
                    at -= 1;
                }
                if rng.below(2) == 0 && at < s.len() {
                    let mut end = at + 1;
                    while !s.is_char_boundary(end) {
                        end += 1;
                    }
                    s.replace_range(at..end, "");
                } else {
                    s.insert_str(at, TOKENS[rng.below(TOKENS.len())]);
                }
            }
            s
        }
        _ => {
            let mut bytes = VALID[rng.below(VALID.len())].as_bytes().to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                match rng.below(3) {
                    0 if !bytes.is_empty() => {
                        bytes.remove(at);
                    }
                    1 if !bytes.is_empty() => bytes[at] = rng.next_u64() as u8,
                    _ => bytes.insert(
                        at.min(bytes.len()),
                        b" {}[]():;,<=>+-*/%0123456789ijNe"[rng.below(31)],
                    ),
                }
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }
}

#[test]
#[ignore = "long-running; use `cargo xtask fuzz sets`"]
fn fuzz_sets() {
    let budget = fuzzkit::budget();
    let mut rng = Rng::new(fuzzkit::seed());
    let start = std::time::Instant::now();
    let mut done = 0u64;
    while start.elapsed() < budget {
        let s = random_input(&mut rng);
        if std::panic::catch_unwind(|| check(&s)).is_err() {
            panic!("the isl-notation reader failed on this input:\n{s}");
        }
        done += 1;
    }
    println!("{done} inputs in {:.1} s", start.elapsed().as_secs_f64());
}
