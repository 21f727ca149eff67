//! Bounded fuzzing of the simulator's readers: random bytes and random edits of the programs in
//! `examples/` (byte flips, deletions, duplications, instruction tokens, splices from other
//! programs) go through `parse` → `assemble` → `simulate`, edits of the machine description
//! through `Machine::parse` and then a whole run, and edited input files through
//! `load_inputs`. Any panic is a failure and prints the input; an error must be located inside
//! the text it is about.
//!
//! The long tests are ignored by default; `cargo xtask fuzz npuasm --seconds N` runs them in
//! release mode for N seconds (environment variable `POLYFUSE_FUZZ_SECONDS`; the seed, printed,
//! is `POLYFUSE_FUZZ_SEED` or taken from the clock). The regular test suite runs a short version
//! of the same loops.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fuzzkit::{budget, mutate, seed, Rng};
use sim::{Machine, SimOptions};

fn corpus(folder: &str, ext: &str) -> Vec<(PathBuf, Vec<u8>)> {
    fuzzkit::corpus(&Path::new(env!("CARGO_MANIFEST_DIR")).join(folder), ext)
}

const TOKENS: &[&str] = &[
    "\n",
    " ",
    ",",
    "[",
    "]",
    ":",
    "=",
    "kernel k\n",
    "param p : f16[16] in\n",
    "param q : f32[4, 4] out\n",
    "buffer b : UB, 64\n",
    "buffer c : L0C, 1024\n",
    "copy ",
    "mmad ",
    "vadd.f16 ",
    "vmax.f32 ",
    "vconv.f16.f32 ",
    "set_flag MTE2, V, 0\n",
    "wait_flag V, MTE3, 0\n",
    "pipe_barrier ALL\n",
    "set_vector_mask 0x1, 0x0\n",
    "repeat=",
    "len=",
    "stride=",
    "for ",
    "loop ",
    "end\n",
    "core ",
    "0",
    "1",
    "-1",
    "255",
    "65536",
    "4294967296",
    "99999999999999999999",
    "0x",
    "ub_x",
    "x[",
    "//",
    "#",
    "=",
    "\u{e9}",
    "\0",
];

/// Simulation stops after this many instructions: a mutated repeat count may ask for billions.
const MAX_INSTRUCTIONS: u64 = 200_000;

/// Parses, assembles and simulates `text` on `machine`; an error must point into the text.
fn run_program(name: &str, text: &str, machine: &Machine) {
    let options = SimOptions {
        timeline: true,
        max_instructions: MAX_INSTRUCTIONS,
        ..SimOptions::default()
    };
    match sim::load(name, text, machine) {
        Ok(kernel) => {
            let inputs = sim::random_inputs(kernel.program(), 3);
            if let Err(e) = sim::simulate(&kernel, &inputs, &options) {
                let _ = e.render(false);
            }
        }
        Err(e) => {
            let (line, _) = e.line_col();
            assert!(
                line >= 1 && line <= text.lines().count().max(1) + 1,
                "error outside the input: {}",
                e.render(false)
            );
            let _ = e.render(false);
        }
    }
}

fn fuzz_programs(budget: Duration, iterations: u64, seed: u64) {
    let files = corpus("examples", "npuasm");
    assert!(!files.is_empty(), "no .npuasm examples to start from");
    let machine = Machine::default();
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let mut done = 0u64;
    while done < iterations && start.elapsed() < budget {
        let (path, text) = fuzzkit::input(&mut rng, &files, TOKENS);
        let name = path.display().to_string();
        let outcome = catch_unwind(AssertUnwindSafe(|| run_program(&name, &text, &machine)));
        if outcome.is_err() {
            panic!("the simulator panicked on this program:\n{text}");
        }
        done += 1;
    }
    println!("{done} programs in {:.1} s", start.elapsed().as_secs_f64());
}

fn fuzz_machines(budget: Duration, iterations: u64, seed: u64) {
    let machines = corpus("machines", "machine");
    let programs = corpus("examples", "npuasm");
    assert!(!machines.is_empty());
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let mut done = 0u64;
    while done < iterations && start.elapsed() < budget {
        let (_, base) = &machines[rng.below(machines.len())];
        let mut input = base.clone();
        let other = &machines[rng.below(machines.len())].1;
        mutate(&mut rng, &mut input, other, TOKENS);
        let text = String::from_utf8_lossy(&input).into_owned();
        let (path, program) = &programs[rng.below(programs.len())];
        let program = String::from_utf8_lossy(program).into_owned();
        let name = path.display().to_string();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            match Machine::parse("fuzz.machine", &text) {
                Ok(machine) => run_program(&name, &program, &machine),
                Err(e) => {
                    let _ = e.render(false);
                }
            }
        }));
        if outcome.is_err() {
            panic!("the simulator panicked on this machine description:\n{text}");
        }
        done += 1;
    }
    println!(
        "{done} machine descriptions in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// Edited input files for the parameters of the examples: missing, short, long, or full of
/// words that are not numbers.
fn fuzz_inputs(iterations: u64, seed: u64) {
    let programs = corpus("examples", "npuasm");
    let machine = Machine::default();
    let dir = std::env::temp_dir().join(format!("polyfuse-sim-fuzz-{}", std::process::id()));
    let mut rng = Rng::new(seed);
    for _ in 0..iterations {
        let (path, text) = &programs[rng.below(programs.len())];
        let text = String::from_utf8_lossy(text).into_owned();
        let Ok(kernel) = sim::load(&path.display().to_string(), &text, &machine) else {
            continue;
        };
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for p in &kernel.program().params {
            match rng.below(4) {
                0 => {}
                1 => {
                    let n = rng.below(64);
                    let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                    std::fs::write(dir.join(format!("{}.bin", p.name)), bytes).unwrap();
                }
                _ => {
                    let words = ["1", "-2.5", "1e400", "nan", "x", ",", "", "0x10", "\u{e9}"];
                    let n = rng.below(2000);
                    let body: Vec<&str> = (0..n).map(|_| words[rng.below(words.len())]).collect();
                    std::fs::write(dir.join(format!("{}.txt", p.name)), body.join(" ")).unwrap();
                }
            }
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            sim::load_inputs(kernel.program(), &dir)
        }));
        if outcome.is_err() {
            panic!("reading inputs for {} panicked", path.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "long-running; use `cargo xtask fuzz npuasm`"]
fn fuzz_npuasm() {
    let seed = seed();
    let budget = budget();
    fuzz_programs(budget * 3 / 4, u64::MAX, seed);
    fuzz_machines(budget / 4, u64::MAX, seed);
    fuzz_inputs(200, seed);
}

#[test]
fn short_fuzz_npuasm() {
    fuzz_programs(Duration::from_secs(4), 5_000, 0x5eed);
    fuzz_machines(Duration::from_secs(2), 500, 0x5eed);
    fuzz_inputs(50, 0x5eed);
}

/// Numbers a machine description may not hold: the simulator would allocate or add beyond what
/// it can. Each is refused with an error on its line.
#[test]
fn oversized_machines_are_refused() {
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("machines/davinci910.machine"),
    )
    .unwrap();
    for (key, value, expect) in [
        ("mem.UB.capacity", "26265536144", "can hold"),
        ("cores", "4294967296", "more than the simulator takes"),
        (
            "vector.per_repeat",
            "18446744073709551615",
            "more than the simulator takes",
        ),
        (
            "mem.L1.align",
            "9223372036854775808",
            "more than the simulator takes",
        ),
    ] {
        let text: String = base
            .lines()
            .map(|l| {
                if l.split('=').next().map(str::trim) == Some(key) {
                    format!("{key} = {value}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let e = Machine::parse("big.machine", &text).expect_err(key);
        let message = e.render(false);
        assert!(message.contains(expect), "{key}: {message}");
        assert!(message.contains("big.machine:"), "{key}: {message}");
    }
}
