//! Bounded random-input robustness test of the isl-notation reader: arbitrary token soups
//! and mutations of valid inputs must give a value (a set, a map or a positioned error),
//! never a panic, and an error's position must lie inside the input.

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
fn deep_nesting_is_an_error() {
    let s = format!("{{ [i] : {}i >= 0{} }}", "(".repeat(500), ")".repeat(500));
    assert!(s.parse::<Set>().is_err());
}
