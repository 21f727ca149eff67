//! Intra-tile permutation: a tile's sequential innermost loop that writes a new element at each
//! step (a recurrence) gives way to a parallel member, whatever its strides; a reduction keeps
//! its stride-one innermost loop.

use frontend::{Language, Options as FrontendOptions, SourceFile};
use polyhedral::ast::run_ast;
use polyhedral::interp::{random_inputs, run};
use polyhedral::pipeline::{compile, Compiled, Options};
use polyhedral::program::Var;
use polyhedral::schedule::pluto::DimKind;
use polyhedral::Program;
use snapshots::{bits, roomy_target};

fn parse(src: &str) -> Program {
    let file = SourceFile::new("test.pf", src);
    frontend::parse(&file, Language::Kernel, &FrontendOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

fn compiled(program: &Program) -> Compiled {
    compile(program, &roomy_target(), &Options::default()).unwrap()
}

/// The iterator the innermost loop of statement 0 steps (its coefficient one), and whether
/// that loop is parallel.
fn innermost(c: &Compiled) -> (usize, bool) {
    let dims = &c.tiled.dims;
    let inner = dims
        .iter()
        .rposition(|d| d.kind == DimKind::Loop)
        .expect("a loop");
    let e = dims[inner].exprs[0].as_affine().expect("affine");
    let depth = c.program.statements[0].depth();
    let it = (0..depth)
        .find(|&k| e.coeff(Var::Iter(k)) != 0)
        .expect("an iterator");
    (it, dims[inner].coincident)
}

fn runs_like_the_interpreter(program: &Program, c: &Compiled) {
    let mut expected = random_inputs(program, 5);
    run(program, &mut expected).unwrap();
    let mut actual = random_inputs(&c.program, 5);
    run_ast(&c.program, &c.ast, &mut actual).unwrap();
    let n = program.arrays.len();
    assert!(bits(&actual)[..n] == bits(&expected)[..n]);
}

#[test]
fn a_row_recurrence_runs_its_independent_rows_innermost() {
    let program = parse(
        "kernel sweep<N = 40, M = 40>(X: f64[N, M]) -> (P: f64[N, M]) {
            P(i, j) = X(i, j) / (P(i, j - 1) + 2.0) where i in 0:N, j in 1:M;
        }",
    );
    let c = compiled(&program);
    // `i` (iterator 0) is the innermost loop of the tile, and parallel.
    assert_eq!(innermost(&c), (0, true));
    runs_like_the_interpreter(&program, &c);
}

#[test]
fn a_row_reduction_keeps_its_stride_one_loop_innermost() {
    let program = parse(
        "kernel rows<N = 40, M = 40>(A: f64[N, M], x: f64[M]) -> (y: f64[N]) {
            y(i) +=! A(i, j) * x(j);
        }",
    );
    let c = compiled(&program);
    let s = c
        .program
        .statements
        .iter()
        .position(|s| s.depth() == 2)
        .expect("the update");
    assert_eq!(s, 1);
    let dims = &c.tiled.dims;
    let inner = dims.iter().rposition(|d| d.kind == DimKind::Loop).unwrap();
    let e = dims[inner].exprs[s].as_affine().unwrap();
    // `j` (iterator 1) stays innermost, carrying the sum.
    assert!(e.coeff(Var::Iter(1)) != 0 && e.coeff(Var::Iter(0)) == 0);
    assert!(!dims[inner].coincident);
    runs_like_the_interpreter(&program, &c);
}
