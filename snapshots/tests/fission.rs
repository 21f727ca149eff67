//! Innermost-loop fission: statements that pass values through memory between iterations of
//! the innermost loop get one loop each, values used in the iteration that computes them keep
//! their statements together, and a split that would reverse a dependence is not made.

use frontend::{Language, Options as FrontendOptions, SourceFile};
use polyhedral::ast::run_ast;
use polyhedral::deps::compute_dependences;
use polyhedral::interp::{random_inputs, run};
use polyhedral::passes::fission::split_innermost_loops;
use polyhedral::pipeline::{compile, Compiled, Options};
use polyhedral::program::{StmtId, Var};
use polyhedral::schedule::pluto::{Band, BandKind, DimKind, PlutoSchedule, ScheduleDim};
use polyhedral::schedule::QuasiAffine;
use polyhedral::Program;
use snapshots::{bits, kernel, load_small, roomy_target};

fn parse(src: &str) -> Program {
    let file = SourceFile::new("test.pf", src);
    frontend::parse(&file, Language::Kernel, &FrontendOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// The constants per statement of the scalar dimension just before the innermost loop
/// dimension of `schedule`, if there is one.
fn split_before_innermost(schedule: &PlutoSchedule) -> Option<Vec<i64>> {
    let inner = schedule
        .dims
        .iter()
        .rposition(|d| d.kind == DimKind::Loop)?;
    let before = schedule.dims.get(inner.checked_sub(1)?)?;
    (before.kind == DimKind::Scalar)
        .then(|| before.exprs.iter().map(|e| e.eval(&[], &[])).collect())
}

fn compiled(program: &Program, fission: bool) -> Compiled {
    let options = Options {
        fission,
        ..Options::default()
    };
    compile(program, &roomy_target(), &options).unwrap()
}

/// The AST of `c` computes what the interpreter computes on `program`.
fn runs_like_the_interpreter(program: &Program, c: &Compiled) {
    let mut expected = random_inputs(program, 3);
    run(program, &mut expected).unwrap();
    let mut actual = random_inputs(&c.program, 3);
    run_ast(&c.program, &c.ast, &mut actual).unwrap();
    let n = program.arrays.len();
    assert!(bits(&actual)[..n] == bits(&expected)[..n]);
}

#[test]
fn a_fused_stencil_sweep_gets_one_innermost_loop_per_statement() {
    let program = load_small(&kernel("jacobi2d.pf"));
    let split = compiled(&program, true);
    // B(i, j) before A(i - 1, j - 1), which reads B(i - 1, j - 2) written one iteration earlier.
    assert_eq!(split_before_innermost(&split.tiled), Some(vec![0, 1]));
    let inner = split.tiled.dims.len() - 1;
    assert!(split.tiled.dims[inner].coincident);
    runs_like_the_interpreter(&program, &split);

    let fused = compiled(&program, false);
    assert_eq!(split_before_innermost(&fused.tiled), None);
    assert!(!fused.tiled.dims[fused.tiled.dims.len() - 1].coincident);
}

#[test]
fn a_value_used_in_the_iteration_that_computes_it_keeps_the_loop_fused() {
    let program = parse(
        "kernel chain<N = 9>(X: f32[N]) -> (Y: f32[N], Z: f32[N]) {
            Y(i) = X(i) * 2.0 where i in 0:N;
            Z(i) = Y(i) + 1.0 where i in 0:N;
        }",
    );
    let c = compiled(&program, true);
    let loops = c
        .tiled
        .dims
        .iter()
        .filter(|d| d.kind == DimKind::Loop)
        .count();
    assert_eq!(loops, 1, "the two statements share their loop");
    assert_eq!(split_before_innermost(&c.tiled), None);
    runs_like_the_interpreter(&program, &c);
}

#[test]
fn a_split_that_would_reverse_a_dependence_is_not_made() {
    // In one loop over i: S0 reads Y(i - 1), which S1 wrote in the previous iteration. With a
    // loop per statement S0 would run first and read values S1 has not written yet.
    let program = parse(
        "kernel back<N = 9>(X: f32[N]) -> (Y: f32[N], Z: f32[N]) {
            for i in 1:N {
                Z(i) = Y(i - 1) + X(i);
                Y(i) = X(i) * 2.0;
            }
        }",
    );
    let deps = compute_dependences(&program).unwrap();
    let i = QuasiAffine::var(Var::Iter(0));
    let schedule = PlutoSchedule {
        dims: vec![
            ScheduleDim {
                kind: DimKind::Loop,
                exprs: vec![i.clone(), i],
                coincident: false,
            },
            ScheduleDim {
                kind: DimKind::Scalar,
                exprs: vec![QuasiAffine::constant(0), QuasiAffine::constant(1)],
                coincident: true,
            },
        ],
        bands: vec![Band {
            start: 0,
            len: 1,
            permutable: true,
            kind: BandKind::Plain,
        }],
    };
    assert!(deps
        .memory
        .iter()
        .any(|d| d.source == StmtId(1) && d.sink == StmtId(0)));
    let out = split_innermost_loops(&program, &deps, &schedule).unwrap();
    assert_eq!(out, schedule);
}
