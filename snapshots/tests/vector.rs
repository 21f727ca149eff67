//! Function-level vectorization: the classification and masked form of every kernel that calls
//! a scalar function (`polyfuse check --emit vector`), and the masked form run lane by lane
//! against the interpreter, with lanes past the end of a row masked off as a tail is.

use polyhedral::interp::{self, Memory};
use polyhedral::program::{ArrayRole, Program, StmtId};
use polyhedral::vectorize::exec::{run_statement, LaneStats};
use polyhedral::vectorize::{calls_function, VectorProgram};
use snapshots::{kernel, kernels, load, load_small, snapshot_name};

#[test]
fn classification_and_masked_form_of_every_kernel_with_functions() {
    let mut seen = 0;
    for path in kernels() {
        let program = load(&path);
        let vp = VectorProgram::for_program(&program);
        if vp.variants.is_empty() {
            continue;
        }
        seen += 1;
        insta::assert_snapshot!(
            format!("vector_{}", snapshot_name(&path)),
            vp.display(&program, &|v| Some(backends::cpu::profit::note(&vp, v)))
        );
    }
    assert!(seen >= 5, "only {seen} kernels call scalar functions");
}

/// Runs every statement that calls a function and reads only inputs in groups of `width`
/// consecutive points of its innermost loop (the last group of a row masked), and compares
/// with the interpreter.
fn check_lanes(program: &Program, width: usize, stats: &mut LaneStats) {
    check_lanes_on(program, interp::random_inputs(program, 7), width, stats);
}

fn check_lanes_on(program: &Program, inputs: Memory, width: usize, stats: &mut LaneStats) {
    let mut memory = inputs.clone();
    interp::run(program, &mut memory).unwrap();
    let params = program.param_values();
    for k in 0..program.statements.len() {
        let id = StmtId(k as u32);
        let s = &program.statements[k];
        if !calls_function(program, id)
            || s.reads
                .iter()
                .any(|r| program.array(r.array).role != ArrayRole::Input)
        {
            continue;
        }
        let results = run_statement(program, &inputs, id, width, stats)
            .unwrap_or_else(|e| panic!("{}: {e}", program.name));
        assert!(!results.is_empty());
        let extents = program.array_extents(s.write.array);
        for (p, got) in results {
            let mut off = 0i64;
            for (sub, e) in s.write.subscripts.iter().zip(&extents) {
                off = off * e + sub.eval(&p, &params);
            }
            let want = memory.array(s.write.array)[off as usize];
            assert!(
                want == got || (want.is_nan() && got.is_nan()),
                "{} at {p:?}: lanes give {got}, the interpreter {want}",
                program.name
            );
        }
    }
}

#[test]
fn masked_form_matches_the_interpreter_lane_by_lane() {
    let mut tested = 0;
    for path in kernels() {
        let small = load_small(&path);
        if VectorProgram::for_program(&small).variants.is_empty() {
            continue;
        }
        tested += 1;
        let mut stats = LaneStats::default();
        for width in [1, 4, 8] {
            check_lanes(&small, width, &mut stats);
        }
        let mut full = load(&path);
        for p in &mut full.params {
            p.value = p.value.min(61);
        }
        check_lanes(&full, 8, &mut stats);
        // Lanes leave divergent loops at different iterations: more vector iterations than
        // an average lane's trip count.
        if stats.masked_loop_iterations > 0 {
            assert!(stats.active_lane_iterations > 0);
        }
    }
    assert!(tested >= 5);
}

#[test]
fn skipped_blocks_are_counted_where_no_lane_takes_a_branch() {
    // gelu: in rows of inputs above 5 every lane returns early, and the polynomial's region
    // is skipped; in the other rows (in [-1, 1)) no lane does, and it runs.
    let path = kernel("gelu.pf");
    let mut program = load(&path);
    for p in &mut program.params {
        p.value = p.value.min(40);
    }
    let mut inputs = interp::random_inputs(&program, 3);
    let x = program.arrays.iter().position(|a| a.name == "X").unwrap();
    let scale = program
        .arrays
        .iter()
        .position(|a| a.name == "scale")
        .unwrap();
    let row = program.array_extents(polyhedral::program::ArrayId(x as u32))[1] as usize;
    for (k, v) in inputs.arrays[x].iter_mut().enumerate() {
        if (k / row).is_multiple_of(2) {
            *v += 10.0;
        }
    }
    inputs.arrays[scale].fill(1.0);
    let mut stats = LaneStats::default();
    check_lanes_on(&program, inputs, 8, &mut stats);
    assert!(stats.boscc_tests > 0);
    assert!(stats.boscc_skips > 0 && stats.boscc_skips < stats.boscc_tests);
}
