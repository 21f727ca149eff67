//! Intra-tile distribution: statements of one point band that walk memory with stride one
//! along different loops get loop nests of their own inside the tile, each with its stride-one
//! loop innermost; a distribution that would reverse a dependence is not made.

use frontend::{Language, Options as FrontendOptions, SourceFile};
use polyhedral::ast::run_ast;
use polyhedral::interp::{random_inputs, run};
use polyhedral::pipeline::{compile, Compiled, Options};
use polyhedral::program::{StmtId, Var};
use polyhedral::schedule::pluto::{coincident_dims_among, BandKind, DimKind, PlutoSchedule};
use polyhedral::Program;
use snapshots::{bits, roomy_target};

fn parse(src: &str) -> Program {
    let file = SourceFile::new("test.c", src);
    frontend::parse(&file, Language::CScop, &FrontendOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

fn compiled(program: &Program, distribute: bool) -> Compiled {
    let options = Options {
        distribute,
        ..Options::default()
    };
    compile(program, &roomy_target(), &options).unwrap()
}

/// The AST of `c` computes what the interpreter computes on `program`.
fn runs_like_the_interpreter(program: &Program, c: &Compiled) {
    let mut expected = random_inputs(program, 5);
    run(program, &mut expected).unwrap();
    let mut actual = random_inputs(&c.program, 5);
    run_ast(&c.program, &c.ast, &mut actual).unwrap();
    let n = program.arrays.len();
    assert!(bits(&actual)[..n] == bits(&expected)[..n]);
}

/// The constants per statement of the scalar dimension between a tile band and its point
/// band, if there is one.
fn split_inside_tile(schedule: &PlutoSchedule) -> Option<Vec<i64>> {
    schedule
        .bands
        .iter()
        .filter(|b| b.kind == BandKind::Point)
        .find_map(|b| {
            let before = &schedule.dims[b.start.checked_sub(1)?];
            (before.kind == DimKind::Scalar)
                .then(|| before.exprs.iter().map(|e| e.eval(&[], &[])).collect())
        })
}

/// The innermost loop dimension of `schedule`.
fn innermost(schedule: &PlutoSchedule) -> usize {
    let loops = schedule.dims.iter().rposition(|d| d.kind == DimKind::Loop);
    loops.expect("a loop dimension")
}

/// The coefficient of iterator `k` in statement `s`'s innermost loop dimension.
fn innermost_coeff(schedule: &PlutoSchedule, s: usize, k: usize) -> i64 {
    schedule.dims[innermost(schedule)].exprs[s]
        .as_affine()
        .expect("point members are affine")
        .coeff(Var::Iter(k))
}

/// PolyBench's bicg: `s` accumulates along the rows of `A`, `q` along its columns, and the
/// scheduler fuses both into one tiled band.
const BICG: &str = "#define N 40
#define M 36
void bicg(double A[N][M], double s[M], double q[N], double p[M], double r[N]) {
  int i, j;
#pragma scop
  for (i = 0; i < M; i++)
    s[i] = 0;
  for (i = 0; i < N; i++) {
    q[i] = 0.0;
    for (j = 0; j < M; j++) {
      s[j] = s[j] + r[i] * A[i][j];
      q[i] = q[i] + A[i][j] * p[j];
    }
  }
#pragma endscop
}";

#[test]
fn row_and_column_walks_of_one_matrix_get_a_loop_nest_each() {
    let program = parse(BICG);
    let fused = compiled(&program, false);
    assert_eq!(split_inside_tile(&fused.tiled), None);
    // Without distribution the shared innermost loop walks a column of A for q.
    assert_eq!(innermost_coeff(&fused.tiled, 3, 0), 1);

    let split = compiled(&program, true);
    let groups = split_inside_tile(&split.tiled).expect("a scalar dimension inside the tile");
    assert_ne!(groups[2], groups[3], "s and q get loop nests of their own");
    // s walks A's rows along j, q walks them along j too: each innermost loop is stride one.
    assert_eq!(innermost_coeff(&split.tiled, 2, 1), 1);
    assert_eq!(innermost_coeff(&split.tiled, 3, 1), 1);
    // s's innermost loop stays parallel; q's is its reduction, in a nest of its own.
    let last = innermost(&split.tiled);
    let parallel = |s: u32| {
        coincident_dims_among(&split.program, &split.deps, &split.tiled, &[StmtId(s)]).unwrap()
            [last]
    };
    assert!(parallel(2));
    assert!(!parallel(3));
    runs_like_the_interpreter(&program, &split);
    runs_like_the_interpreter(&program, &fused);
}

/// Two statements of one loop nest, the first walking rows and the second columns, where the
/// second writes `X[j][i]`; `READ` is the array the first reads at `[j][i - 1]`.
fn rows_and_columns(read: &str) -> String {
    format!(
        "#define N 40
void rc(double A[N][N], double B[N][N], double C[N][N], double D[N][N], double E[N][N]) {{
  int i, j;
#pragma scop
  for (i = 1; i < N; i++)
    for (j = 0; j < N; j++) {{
      B[i][j] = {read}[j][i - 1] + D[i][j];
      C[j][i] = B[i][j] * A[j][i];
    }}
#pragma endscop
}}"
    )
}

#[test]
fn a_distribution_that_would_reverse_a_dependence_is_not_made() {
    // Reading E, the first statement needs nothing from the second: the two walk A, B, C and
    // D along different loops and are distributed.
    let independent = parse(&rows_and_columns("E"));
    let split = compiled(&independent, true);
    let groups = split_inside_tile(&split.tiled).expect("a scalar dimension inside the tile");
    assert_eq!(groups[..2], [0, 1]);
    runs_like_the_interpreter(&independent, &split);

    // Reading C, the first statement at (i, j) needs what the second wrote at (i - 1, j), in
    // the same tile: running every first statement of a tile before the second ones would
    // read C before it is written, so the loop nest stays as it was.
    let dependent = parse(&rows_and_columns("C"));
    let kept = compiled(&dependent, true);
    assert_eq!(split_inside_tile(&kept.tiled), None);
    assert_eq!(kept.tiled, compiled(&dependent, false).tiled);
    runs_like_the_interpreter(&dependent, &kept);
}

#[test]
fn a_recurrence_is_not_distributed_into_a_sequential_innermost_loop() {
    // P walks its rows along j, Q its own along i; but each P[i][j] needs P[i][j - 1], so j
    // innermost would chain every iteration to the one before (a division each): P keeps the
    // parallel loop i innermost, as Q does, and the loop nest is not split.
    let program = parse(
        "#define N 40
void rec(double P[N][N], double Q[N][N], double U[N][N]) {
  int i, j;
#pragma scop
  for (i = 1; i < N; i++)
    for (j = 1; j < N; j++) {
      P[i][j] = 1.0 / (P[i][j - 1] + 2.0);
      Q[j][i] = P[i][j] * U[j][i];
    }
#pragma endscop
}",
    );
    let kept = compiled(&program, true);
    assert_eq!(split_inside_tile(&kept.tiled), None);
    assert_eq!(innermost_coeff(&kept.tiled, 0, 0), 1);
    assert_eq!(kept.tiled, compiled(&program, false).tiled);
    runs_like_the_interpreter(&program, &kept);
}
