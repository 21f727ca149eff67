//! Vectorised scalar functions on the CPU: every kernel that calls a function, at sizes that
//! leave a scalar tail after the vectors (and at the tiny target's partial tiles), vectorised
//! and scalar, bit for bit against the interpreter; and gelu with rows where every lane
//! returns early, so the branch on superword condition skips the polynomial.

use backends::cpu;
use polyhedral::interp;
use polyhedral::pipeline::{compile, Options};
use polyhedral::vectorize::VectorProgram;
use snapshots::{kernel, kernels_with_vector_functions, load, load_at, tiny_target};

fn options(vectorize: bool) -> cpu::Options {
    cpu::Options {
        threads: Some(2),
        min_parallel_work: 0,
        vectorize_functions: vectorize,
        // The bodies the C compiler vectorises itself too, so that every masked form runs.
        vectorize_plain_functions: true,
        ..cpu::Options::default()
    }
}

#[test]
fn vectorised_functions_match_the_interpreter_with_tails() {
    let mut tested = 0;
    for path in kernels_with_vector_functions() {
        tested += 1;
        for sizes in [[13, 37], [16, 64], [7, 29], [3, 9]] {
            let program = load_at(&path, &sizes);
            for target in [cpu::description(), tiny_target()] {
                let c = compile(&program, &target, &Options::default()).unwrap();
                for vectorize in [true, false] {
                    let what = format!(
                        "{} at {sizes:?} on {}, vectorised {vectorize}",
                        path.display(),
                        target.name
                    );
                    let text = cpu::Writer::new(&c.program, &options(vectorize))
                        .write(&c.ast)
                        .unwrap();
                    if !vectorize || target.name == "cpu" {
                        assert_eq!(
                            text.contains("pf_any_v8"),
                            vectorize,
                            "{what}: vector code present or missing"
                        );
                    }
                    let report = cpu::check_transformed(
                        &program,
                        &c.program,
                        &c.ast,
                        &options(vectorize),
                        5,
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(
                        report.comparison.passed(),
                        "{what}:\n{}",
                        report.to_text(&program)
                    );
                }
            }
        }
    }
    assert!(tested >= 5);
}

#[test]
fn blocks_no_lane_needs_are_skipped_and_the_results_still_match() {
    let path = kernel("gelu.pf");
    let program = load_at(&path, &[6, 45]);
    let mut inputs = interp::random_inputs(&program, 11);
    let x = program.arrays.iter().position(|a| a.name == "X").unwrap();
    let scale = program
        .arrays
        .iter()
        .position(|a| a.name == "scale")
        .unwrap();
    inputs.arrays[scale].fill(1.0);
    for (k, v) in inputs.arrays[x].iter_mut().enumerate() {
        // Rows alternate: every lane above 5, every lane below -5, lanes of both signs.
        match (k / 45) % 3 {
            0 => *v += 20.0,
            1 => *v -= 20.0,
            _ => {}
        }
    }
    let mut expected = inputs.clone();
    interp::run(&program, &mut expected).unwrap();
    let c = compile(&program, &cpu::description(), &Options::default()).unwrap();
    let text = cpu::Writer::new(&c.program, &options(true))
        .write(&c.ast)
        .unwrap();
    assert!(
        text.contains("if (pf_any_v8("),
        "no branch on superword condition:\n{text}"
    );
    let run = cpu::run(&c.program, &c.ast, &inputs, &options(true)).unwrap();
    let comparison = backends::compare::compare(&program, &expected, &run.outputs);
    assert!(comparison.passed(), "{}", comparison.to_text(&program));
}

#[test]
fn bodies_the_compiler_vectorises_itself_stay_scalar_by_default() {
    for (file, scalar) in [
        ("threshold.pf", true),
        ("gelu.pf", false),
        ("mandelbrot.pf", false),
        ("collatz.pf", false),
    ] {
        let path = kernel(file);
        let program = load(&path);
        let c = compile(&program, &cpu::description(), &Options::default()).unwrap();
        let text = cpu::Writer::new(&c.program, &cpu::Options::default())
            .write(&c.ast)
            .unwrap();
        assert_eq!(!text.contains("pf_any_v8"), scalar, "{file}");
        let vp = VectorProgram::for_program(&program);
        assert_eq!(
            vp.display(&program, &|v| Some(backends::cpu::profit::note(&vp, v)))
                .contains("the CPU keeps it scalar"),
            scalar,
            "{file}"
        );
    }
}

#[test]
fn functions_with_f64_values_run_on_64_bit_lanes() {
    let program = load_at(&kernel("mandelbrot_f64.pf"), &[13, 37]);
    let c = compile(&program, &cpu::description(), &Options::default()).unwrap();
    let text = cpu::Writer::new(&c.program, &options(true))
        .write(&c.ast)
        .unwrap();
    // Four f64 lanes per 32-byte vector, 64-bit masks, the i32 count's comparisons widened
    // to them and its selects narrowing them.
    assert!(text.contains("pf_v4d vpf_cr"), "{text}");
    assert!(text.contains("pf_any_v4l("), "{text}");
    assert!(
        text.contains("__builtin_convertvector((pf_v"),
        "no widened comparison:\n{text}"
    );
    assert!(
        text.contains("pf_sel_v4i(__builtin_convertvector(pf_m"),
        "no narrowed mask:\n{text}"
    );
}
