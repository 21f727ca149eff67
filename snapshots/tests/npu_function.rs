//! Vectorised scalar functions on the accelerator: every kernel that calls a function, at sizes
//! whose rows are not whole vector repeats nor whole 32-byte blocks and whose last tile is
//! short, on the default machine and on one with two cores (several tiles per block), against
//! the interpreter (f64 kernels computed in f32); then gelu with a tile where no lane reaches the polynomial, so the branch
//! on superword condition skips it.

use std::collections::BTreeMap;

use backends::npu::{self, NpuTarget, Options};
use polyhedral::interp;
use polyhedral::program::ArrayId;
use sim::{SimOptions, Tensor};
use snapshots::{kernel, kernels_with_vector_functions, load_at};

fn two_cores() -> NpuTarget {
    let text = sim::DEFAULT_MACHINE.replace("cores = 32", "cores = 2");
    assert_ne!(text, sim::DEFAULT_MACHINE);
    NpuTarget::new(sim::Machine::parse("two.machine", &text).expect("the machine parses"))
}

#[test]
fn vectorised_functions_match_the_interpreter_with_tails() {
    let mut tested = 0;
    for path in kernels_with_vector_functions() {
        tested += 1;
        for sizes in [[13, 37], [16, 64], [3, 9], [9, 130]] {
            let program = load_at(&path, &sizes);
            for (machine, target) in [("default", NpuTarget::default()), ("2 cores", two_cores())] {
                let what = format!("{} at {sizes:?} on {machine}", path.display());
                // f64 kernels computed in f32, as the machine has no f64.
                let options = Options {
                    f64_as_f32: true,
                    ..Options::default()
                };
                let checked = npu::check(&program, &target, &options, 3, false)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(
                    checked.comparison.passed(),
                    "{what}:\n{}",
                    checked.comparison.to_text(&program)
                );
                assert!(checked.asm.contains("while s") || !what.contains("mandelbrot"));
            }
        }
    }
    assert!(tested >= 5);
}

#[test]
fn a_tile_no_lane_needs_skips_the_block_and_still_matches() {
    let path = kernel("gelu.pf");
    let program = load_at(&path, &[6, 45]);
    let target = two_cores();
    let asm = npu::compile(&program, &target, &Options::default()).unwrap();
    assert!(
        asm.contains("if s8 != 0 {"),
        "no branch on superword condition:\n{asm}"
    );
    // Runs the program on inputs where the rows `hot` (all of the first core's tile when
    // `0..3`) are above 5 in every lane, compares with the interpreter, and returns how many
    // instructions ran.
    let run = |hot: std::ops::Range<usize>| {
        let mut inputs = interp::random_inputs(&program, 11);
        let x = program.arrays.iter().position(|a| a.name == "X").unwrap();
        let scale = program
            .arrays
            .iter()
            .position(|a| a.name == "scale")
            .unwrap();
        inputs.arrays[scale].fill(1.0);
        for v in inputs.arrays[x][hot.start * 45..hot.end * 45].iter_mut() {
            *v += 20.0;
        }
        let mut expected = inputs.clone();
        interp::run(&program, &mut expected).unwrap();
        let kernels = sim::load_all("gelu.npuasm", &asm, &target.machine).unwrap();
        let mut tensors = BTreeMap::new();
        for (name, id) in [("X", x), ("scale", scale)] {
            let ext = program.array_extents(ArrayId(id as u32));
            tensors.insert(
                name.to_string(),
                Tensor::new(
                    sim::DType::F32,
                    ext.iter().map(|e| *e as u64).collect(),
                    inputs.arrays[id].iter().copied(),
                ),
            );
        }
        let outcome = sim::simulate_all(&kernels, &tensors, &SimOptions::default()).unwrap();
        let y = program.arrays.iter().position(|a| a.name == "Y").unwrap();
        let outputs = vec![(ArrayId(y as u32), outcome.outputs["Y"].data.clone())];
        let comparison = backends::compare::compare(&program, &expected, &outputs);
        assert!(comparison.passed(), "{}", comparison.to_text(&program));
        outcome.report.instructions
    };
    let skipping = run(0..3);
    // One hot row only: the tile still has lanes that need the polynomial.
    let running = run(0..1);
    assert!(skipping < running, "{skipping} vs {running} instructions");
}

/// A regression kernel of `tests/regressions/`.
fn regression(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/regressions")
        .join(name)
}

/// f16 functions run in f16 lanes: every element equals the interpreter's bit for bit (the
/// comparison's f16 tolerance would hide a wrong rounding), with lanes leaving the loop at
/// different iterations, tails, and tiles where the block under the branch is skipped.
#[test]
fn f16_functions_match_the_interpreter_bit_for_bit() {
    for path in [
        regression("f16_orbit_lanes.pf"),
        regression("f16_mixed_function_lanes.pf"),
        regression("f16_function_lanes.pf"),
    ] {
        for sizes in [[5, 37], [4, 3], [9, 130], [40, 77]] {
            let program = load_at(&path, &sizes);
            for (machine, target) in [("default", NpuTarget::default()), ("2 cores", two_cores())] {
                for seed in [1, 7] {
                    let what = format!("{} at {sizes:?} on {machine}, seed {seed}", path.display());
                    let checked = npu::check(&program, &target, &Options::default(), seed, false)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let mut expected = interp::random_inputs(&program, seed);
                    interp::run(&program, &mut expected).unwrap();
                    for (id, got) in &checked.outputs {
                        let want = expected.array(*id);
                        assert_eq!(got.len(), want.len(), "{what}");
                        for (k, (g, w)) in got.iter().zip(want).enumerate() {
                            assert!(
                                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                                "{what}: element {k} is {g}, the interpreter's {w}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The value of the f16 with bit pattern `bits`.
fn f16_value(bits: u16) -> f64 {
    let sign = if bits >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = (bits >> 10 & 0x1f) as i32;
    let frac = (bits & 0x3ff) as f64;
    sign * match exp {
        0 => frac * f64::powi(2.0, -24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1024.0 + frac) * f64::powi(2.0, e - 25),
    }
}

/// `tanh` of f16 lanes (a polynomial near 0, the `exp` formula elsewhere, in f32) on every
/// one of the 65536 f16 values, on the simulator: the interpreter's f16 `tanh` bit for bit.
#[test]
fn tanh_of_every_f16_matches_the_interpreter_bit_for_bit() {
    let path = std::env::temp_dir().join(format!("f16_tanh_{}.pf", std::process::id()));
    std::fs::write(
        &path,
        "fn th(a: f16) -> f16 { return tanh(a); }\n\
         kernel f16_tanh<N = 256, M = 256>(A: f16[N, M]) -> (R: f16[N, M]) {\n\
         R(i, j) = th(A(i, j));\n}\n",
    )
    .unwrap();
    let program = load_at(&path, &[256, 256]);
    std::fs::remove_file(&path).unwrap();
    let target = NpuTarget::default();
    let asm = npu::compile(&program, &target, &Options::default()).unwrap();
    let mut inputs = interp::random_inputs(&program, 1);
    let a = program.array_by_name("A").unwrap();
    let r = program.array_by_name("R").unwrap();
    let all: Vec<f64> = (0..=u16::MAX).map(f16_value).collect();
    inputs.arrays[a.0 as usize].copy_from_slice(&all);
    let mut expected = inputs.clone();
    interp::run(&program, &mut expected).unwrap();
    let kernels = sim::load_all("f16_tanh.npuasm", &asm, &target.machine).unwrap();
    let mut tensors = BTreeMap::new();
    tensors.insert(
        "A".to_string(),
        Tensor::new(sim::DType::F16, vec![256, 256], all.iter().copied()),
    );
    let outcome = sim::simulate_all(&kernels, &tensors, &SimOptions::default()).unwrap();
    let got = &outcome.outputs["R"].data;
    let want = expected.array(r);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "tanh of {}: {g}, the interpreter's {w}",
            all[k]
        );
    }
    assert_eq!(got.len(), 65536);
}
