//! AST generation on hand-built schedule trees: the bounds it prints are the minimal ones, a
//! full tile's innermost loop tests nothing, versioned loops keep their annotations, and every
//! AST runs like the reference interpreter at many sizes.

use frontend::{Language, Options, SourceFile};
use polyhedral::ast::{run_ast, Ast};
use polyhedral::interp::{random_inputs, run};
use polyhedral::program::{StmtId, Var};
use polyhedral::schedule::{Band, Filter, Node, NodeKind, QuasiAffine, ScheduleTree};
use polyhedral::{generate_ast, Program};

fn kernel(src: &str) -> Program {
    let file = SourceFile::new("test.pf", src);
    frontend::parse(&file, Language::Kernel, &Options::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

fn v(j: usize) -> QuasiAffine {
    QuasiAffine::var(Var::Iter(j))
}

fn cst(c: i64) -> QuasiAffine {
    QuasiAffine::constant(c)
}

/// `floor(e / k)`.
fn tile(e: QuasiAffine, k: i64) -> QuasiAffine {
    e.floor_div(k).expect("positive tile size")
}

fn band(schedule: Vec<(u32, Vec<QuasiAffine>)>, coincident: Vec<bool>, child: Node) -> Node {
    Node::with_child(
        NodeKind::Band(Band {
            schedule: schedule.into_iter().map(|(s, f)| (StmtId(s), f)).collect(),
            permutable: true,
            coincident,
        }),
        child,
    )
}

fn tree(stmts: &[u32], child: Node) -> ScheduleTree {
    ScheduleTree {
        root: Node::with_child(
            NodeKind::Domain(stmts.iter().map(|&k| StmtId(k)).collect()),
            child,
        ),
    }
}

/// Generates the AST of `tree` and runs it against the interpreter at every size in `sizes`
/// (one value per parameter).
fn check(program: &Program, tree: &ScheduleTree, sizes: &[&[i64]]) -> Ast {
    let ast = generate_ast(program, tree).unwrap_or_else(|e| panic!("{e}"));
    for s in sizes {
        let mut p = program.clone();
        for (param, &value) in p.params.iter_mut().zip(s.iter()) {
            param.value = value;
        }
        let mut expected = random_inputs(&p, 3);
        let mut actual = expected.clone();
        let a = run(&p, &mut expected).unwrap();
        let b = run_ast(&p, &ast, &mut actual)
            .unwrap_or_else(|e| panic!("{s:?}: {e}\n{}", ast.display(&p)));
        assert_eq!(a.instances, b.instances, "{s:?}\n{}", ast.display(&p));
        assert_eq!(actual, expected, "{s:?}\n{}", ast.display(&p));
    }
    ast
}

/// Innermost loops (no loop below them), with their bodies.
fn innermost_loops(ast: &Ast) -> Vec<&Ast> {
    let mut out = Vec::new();
    fn walk<'a>(a: &'a Ast, out: &mut Vec<&'a Ast>) {
        match a {
            Ast::For { body, .. } => {
                if body.contains_loop() {
                    walk(body, out);
                } else {
                    out.push(a);
                }
            }
            Ast::Block(items) => items.iter().for_each(|x| walk(x, out)),
            Ast::If {
                then, otherwise, ..
            } => {
                walk(then, out);
                if let Some(o) = otherwise {
                    walk(o, out);
                }
            }
            Ast::Mark { body, .. } => walk(body, out),
            Ast::User { .. } => {}
        }
    }
    walk(ast, &mut out);
    out
}

fn statements_in(ast: &Ast) -> Vec<u32> {
    let mut out = Vec::new();
    ast.walk(&mut |a| {
        if let Ast::User { stmt, .. } = a {
            if !out.contains(&stmt.0) {
                out.push(stmt.0);
            }
        }
    });
    out.sort();
    out
}

fn has_guard(ast: &Ast) -> bool {
    let mut found = false;
    ast.walk(&mut |a| found |= matches!(a, Ast::If { .. }));
    found
}

/// A lower triangle in 4×4 tiles: every bound that the tile loops or the triangle imply is
/// left out (`j ≤ i` makes the tile-row bound of `c1` and the triangle's bound of `c2`
/// redundant).
#[test]
fn tiled_triangle_has_no_redundant_bound() {
    let p = kernel(
        "kernel tri<N = 9>(A: f64[N, N]) -> (B: f64[N, N]) {
            B(i, j) = 2.0 * A(i, j) where i in 0:N, j in 0:i + 1;
        }",
    );
    let t = tree(
        &[0],
        band(
            vec![(0, vec![tile(v(0), 4), tile(v(1), 4)])],
            vec![true, true],
            band(vec![(0, vec![v(0), v(1)])], vec![true, true], Node::leaf()),
        ),
    );
    let sizes: Vec<&[i64]> = vec![&[0], &[1], &[2], &[4], &[5], &[8], &[9], &[13]];
    let ast = check(&p, &t, &sizes);
    assert_eq!(
        ast.display(&p).to_string(),
        "\
// parallel
for (c0 = 0; c0 <= floord(N - 1, 4); c0 += 1) {
  // parallel
  for (c1 = 0; c1 <= c0; c1 += 1) {
    // parallel
    for (c2 = 4 * c0; c2 <= min(N - 1, 4 * c0 + 3); c2 += 1) {
      // parallel, vectorizable
      for (c3 = 4 * c1; c3 <= min(c2, 4 * c1 + 3); c3 += 1) {
        S0(c2, c3);
      }
    }
  }
}
"
    );
}

/// A wavefront over a rectangle: the diagonal loop and the loop along it have exactly the
/// bounds of the skewed rectangle, each once.
#[test]
fn wavefront_bounds_are_minimal() {
    let p = kernel(
        "kernel wave<N = 6, M = 4>(A: f64[N, M]) -> (B: f64[N, M]) {
            B(i, j) = A(i, j) + 1.0;
        }",
    );
    let t = tree(
        &[0],
        band(
            vec![(0, vec![v(0).add(&v(1)), v(0)])],
            vec![false, true],
            Node::leaf(),
        ),
    );
    let sizes: Vec<&[i64]> = vec![&[0, 3], &[3, 0], &[1, 1], &[6, 4], &[4, 6], &[7, 7]];
    let ast = check(&p, &t, &sizes);
    assert_eq!(
        ast.display(&p).to_string(),
        "\
for (c0 = 0; c0 <= N + M - 2; c0 += 1) {
  // parallel
  for (c1 = max(-M + c0 + 1, 0); c1 <= min(N - 1, c0); c1 += 1) {
    S0(c1, c0 - c1);
  }
}
"
    );
}

/// A time-skewed, time-tiled 1-D Jacobi stencil with its two statements fused (the second
/// shifted by one): the innermost loop that runs both statements in a full tile tests nothing,
/// and the boundary iterations where only one of them runs are separate pieces that test
/// nothing in their innermost loops either.
#[test]
fn the_innermost_loop_of_a_full_tile_has_no_guard() {
    let p = kernel(
        "kernel jacobi1d<T = 5, N = 14>() -> (A: f64[N], B: f64[N]) {
            for t in 0:T {
                B(i) = 0.25 * (A(i - 1) + 2.0 * A(i) + A(i + 1)) where i in 1:N - 1;
                A(i) = 0.25 * (B(i - 1) + 2.0 * B(i) + B(i + 1)) where i in 1:N - 1;
            }
        }",
    );
    // S0(t, i) at (t, 2t + i), S1(t, i) at (t, 2t + i + 1), in 2 × 4 tiles.
    let skew0 = v(0).scale(2).add(&v(1));
    let skew1 = skew0.add(&cst(1));
    let t = tree(
        &[0, 1],
        band(
            vec![
                (0, vec![tile(v(0), 2), tile(skew0.clone(), 4)]),
                (1, vec![tile(v(0), 2), tile(skew1.clone(), 4)]),
            ],
            vec![false, false],
            band(
                vec![(0, vec![v(0), skew0]), (1, vec![v(0), skew1])],
                vec![false, false],
                Node::leaf(),
            ),
        ),
    );
    let sizes: Vec<&[i64]> = vec![&[0, 5], &[3, 0], &[2, 2], &[2, 3], &[5, 14], &[7, 9]];
    let ast = check(&p, &t, &sizes);
    let inner = innermost_loops(&ast);
    let full: Vec<&&Ast> = inner
        .iter()
        .filter(|l| statements_in(l) == vec![0, 1])
        .collect();
    assert_eq!(full.len(), 1, "{}", ast.display(&p));
    assert!(!has_guard(full[0]), "{}", ast.display(&p));
    // Where one statement runs alone, its loop tests nothing either.
    assert!(inner.iter().all(|l| !has_guard(l)), "{}", ast.display(&p));
}

/// An initialisation fused with a reduction at its first step: the innermost loop is versioned
/// on the conditions that do not depend on it, and every version keeps the loop's flags.
#[test]
fn versioned_innermost_loops_keep_their_annotations() {
    let p = kernel(
        "kernel g<NI = 3, NJ = 5, NK = 4>(A: f64[NI, NK], B: f64[NK, NJ]) -> (C: f64[NI, NJ]) {
            C(i, j) = 0.5;
            C(i, j) += A(i, k) * B(k, j);
        }",
    );
    let t = tree(
        &[0, 1],
        band(
            vec![(0, vec![v(0), cst(0), v(1)]), (1, vec![v(0), v(2), v(1)])],
            vec![true, false, true],
            Node::leaf(),
        ),
    );
    let sizes: Vec<&[i64]> = vec![&[3, 5, 4], &[3, 5, 0], &[0, 5, 4], &[2, 1, 1], &[4, 8, 9]];
    let ast = check(&p, &t, &sizes);
    let inner = innermost_loops(&ast);
    assert_eq!(inner.len(), 3, "{}", ast.display(&p));
    for l in &inner {
        let Ast::For {
            annotations, body, ..
        } = l
        else {
            unreachable!("innermost_loops returns loops");
        };
        assert!(annotations.parallel && annotations.vectorizable);
        assert!(!has_guard(body), "{}", ast.display(&p));
    }
}

/// Two statements in sequence whose ranges are disjoint and one that never runs for small
/// sizes: the code is right for every size, including where the context's rows fail.
#[test]
fn sequences_and_empty_statements_at_every_size() {
    let p = kernel(
        "kernel s<N = 6, M = 3>(A: f64[N]) -> (B: f64[N], C: f64[M]) {
            B(i) = A(i) * 2.0;
            C(j) = A(j + 2) where j in 0:M, j + 2 <= N - 1;
        }",
    );
    let t = tree(
        &[0, 1],
        Node::sequence(vec![
            (
                Filter::of_statements(&[StmtId(0)]),
                band(vec![(0, vec![v(0)])], vec![true], Node::leaf()),
            ),
            (
                Filter::of_statements(&[StmtId(1)]),
                band(vec![(1, vec![v(0)])], vec![true], Node::leaf()),
            ),
        ]),
    );
    let sizes: Vec<&[i64]> = vec![&[0, 0], &[1, 3], &[2, 3], &[3, 3], &[6, 2], &[6, 9]];
    check(&p, &t, &sizes);
}
