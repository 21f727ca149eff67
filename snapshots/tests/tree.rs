//! Schedule trees of every kernel: the original-order tree, generated back into a loop AST,
//! runs exactly like the reference interpreter (bit for bit); the printed trees and generated
//! ASTs of a few kernels are snapshots.

use polyhedral::ast::{run_ast, verify};
use polyhedral::interp::{random_inputs, run};
use polyhedral::{generate_ast, schedule_tree_of, Program};
use snapshots::{kernels, load_small, snapshot_name};

fn bits(m: &polyhedral::interp::Memory) -> Vec<Vec<u64>> {
    m.arrays
        .iter()
        .map(|a| a.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn original_trees_run_like_the_interpreter() {
    for path in kernels() {
        let program = load_small(&path);
        let tree = schedule_tree_of(&program).unwrap();
        polyhedral::schedule::verify(&program, &tree)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ast = generate_ast(&program, &tree)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), tree.display(&program)));
        verify(&program, &ast).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut expected = random_inputs(&program, 11);
        let mut actual = expected.clone();
        let a = run(&program, &mut expected).unwrap();
        let b = run_ast(&program, &ast, &mut actual)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), ast.display(&program)));
        assert_eq!(a.instances, b.instances, "{}", path.display());
        assert!(
            bits(&actual) == bits(&expected),
            "{}: results differ\n{}",
            path.display(),
            ast.display(&program)
        );
    }
}

#[test]
fn trees_and_asts_of_some_kernels() {
    for path in kernels() {
        let name = snapshot_name(&path);
        if ![
            "gemm_pf",
            "jacobi2d_pf",
            "lu_pf",
            "trmm_pf",
            "2mm_c",
            "softmax_pf",
        ]
        .contains(&name.as_str())
        {
            continue;
        }
        let program = load_small(&path);
        let tree = schedule_tree_of(&program).unwrap();
        insta::assert_snapshot!(format!("tree_{name}"), tree.display(&program));
        let ast = generate_ast(&program, &tree).unwrap();
        insta::assert_snapshot!(format!("ast_{name}"), ast.display(&program).to_string());
    }
}

// Hand-built trees: legal transformations of kernels must compute what the interpreter does.

use polyhedral::ast::Ast;
use polyhedral::program::{StmtId, Var};
use polyhedral::schedule::{
    Band, Extension, Filter, Mark, Node, NodeKind, QuasiAffine, QuasiConstraint, ScheduleTree,
};

fn kernel(file: &str) -> Program {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kernels")
        .join(file);
    load_small(&path)
}

fn v(j: usize) -> QuasiAffine {
    QuasiAffine::var(Var::Iter(j))
}

fn cst(c: i64) -> QuasiAffine {
    QuasiAffine::constant(c)
}

fn s(k: u32) -> StmtId {
    StmtId(k)
}

fn band(schedule: Vec<(StmtId, Vec<QuasiAffine>)>, coincident: Vec<bool>, child: Node) -> Node {
    Node::with_child(
        NodeKind::Band(Band {
            schedule,
            permutable: true,
            coincident,
        }),
        child,
    )
}

fn tree(stmts: &[u32], child: Node) -> ScheduleTree {
    ScheduleTree {
        root: Node::with_child(
            NodeKind::Domain(stmts.iter().map(|&k| s(k)).collect()),
            child,
        ),
    }
}

fn seq(parts: Vec<(&[u32], Node)>) -> Node {
    Node::sequence(
        parts
            .into_iter()
            .map(|(st, n)| {
                let ids: Vec<StmtId> = st.iter().map(|&k| s(k)).collect();
                (Filter::of_statements(&ids), n)
            })
            .collect(),
    )
}

/// Generates `tree`, runs it, and compares with the interpreter bit for bit.
fn check(program: &Program, tree: &ScheduleTree) -> Ast {
    polyhedral::schedule::verify(program, tree).unwrap_or_else(|e| panic!("{e}"));
    let ast =
        generate_ast(program, tree).unwrap_or_else(|e| panic!("{e}\n{}", tree.display(program)));
    verify(program, &ast).unwrap_or_else(|e| panic!("{e}\n{}", ast.display(program)));
    let mut expected = random_inputs(program, 5);
    let mut actual = expected.clone();
    let a = run(program, &mut expected).unwrap();
    let b = run_ast(program, &ast, &mut actual)
        .unwrap_or_else(|e| panic!("{e}\n{}", ast.display(program)));
    assert_eq!(a.instances, b.instances, "{}", ast.display(program));
    assert!(
        bits(&actual) == bits(&expected),
        "results differ\n{}\n{}",
        tree.display(program),
        ast.display(program)
    );
    ast
}

/// gemm with the product's loops in the order (k, j, i): each C element still sums over k in
/// order.
#[test]
fn permuted_gemm() {
    let p = kernel("gemm.pf");
    let t = tree(
        &[0, 1],
        seq(vec![
            (
                &[0],
                band(
                    vec![(s(0), vec![v(1), v(0)])],
                    vec![true, true],
                    Node::leaf(),
                ),
            ),
            (
                &[1],
                band(
                    vec![(s(1), vec![v(2), v(1), v(0)])],
                    vec![false, true, true],
                    Node::leaf(),
                ),
            ),
        ]),
    );
    let ast = check(&p, &t);
    insta::assert_snapshot!("hand_permuted_gemm", ast.display(&p).to_string());
}

/// gemm's two statements fused in (i, j): the scaling runs right before the sum of its
/// element.
#[test]
fn fused_gemm_with_tiles() {
    let p = kernel("gemm.pf");
    // Tile (i, j) by 4 with point loops `i mod 4`, `j mod 4`; k strip-mined by 3.
    let tile = |e: QuasiAffine, k: i64| e.floor_div(k).unwrap();
    let point = |e: QuasiAffine, k: i64| e.modulo(k).unwrap();
    let inner = seq(vec![
        (&[0], Node::leaf()),
        (
            &[1],
            band(
                vec![(s(1), vec![tile(v(2), 3), v(2)])],
                vec![false, false],
                Node::leaf(),
            ),
        ),
    ]);
    let points = band(
        vec![
            (s(0), vec![point(v(0), 4), point(v(1), 4)]),
            (s(1), vec![point(v(0), 4), point(v(1), 4)]),
        ],
        vec![true, true],
        inner,
    );
    let tiles = band(
        vec![
            (s(0), vec![tile(v(0), 4), tile(v(1), 4)]),
            (s(1), vec![tile(v(0), 4), tile(v(1), 4)]),
        ],
        vec![true, true],
        points,
    );
    let t = tree(&[0, 1], tiles);
    let ast = check(&p, &t);
    insta::assert_snapshot!("hand_tiled_gemm", ast.display(&p).to_string());
}

/// Jacobi-2d skewed in time (Pluto's schedule): `[t, 2t + i, 2t + j]`, the second sweep
/// shifted by one.
#[test]
fn time_skewed_jacobi() {
    let p = kernel("jacobi2d.pf");
    let t2 = v(0).scale(2);
    let sched = |shift: i64| {
        vec![
            v(0),
            t2.add(&v(1)).add(&cst(shift)),
            t2.add(&v(2)).add(&cst(shift)),
        ]
    };
    let t = tree(
        &[0, 1],
        band(
            vec![(s(0), sched(0)), (s(1), sched(1))],
            vec![false, false, false],
            seq(vec![(&[0], Node::leaf()), (&[1], Node::leaf())]),
        ),
    );
    let ast = check(&p, &t);
    insta::assert_snapshot!("hand_skewed_jacobi", ast.display(&p).to_string());
    // Also tiled: 2×4×4 tiles of the skewed band, point loops as the skewed functions.
    let tiles = |shift: i64| {
        sched(shift)
            .into_iter()
            .zip([2, 4, 4])
            .map(|(f, k)| f.floor_div(k).unwrap())
            .collect::<Vec<_>>()
    };
    let t = tree(
        &[0, 1],
        band(
            vec![(s(0), tiles(0)), (s(1), tiles(1))],
            vec![false, false, false],
            band(
                vec![(s(0), sched(0)), (s(1), sched(1))],
                vec![false, false, false],
                seq(vec![(&[0], Node::leaf()), (&[1], Node::leaf())]),
            ),
        ),
    );
    check(&p, &t);
}

/// blur_unsharp's three stages fused into one (y, x) nest, the later stages shifted by two
/// rows so that what they read is already computed.
#[test]
fn fused_blur_with_shift() {
    let p = kernel("blur_unsharp.pf");
    let shifted = vec![v(0).add(&cst(2)), v(1)];
    let t = tree(
        &[0, 1, 2],
        band(
            vec![
                (s(0), vec![v(0), v(1)]),
                (s(1), shifted.clone()),
                (s(2), shifted),
            ],
            vec![false, true],
            seq(vec![
                (&[0], Node::leaf()),
                (&[1], Node::leaf()),
                (&[2], Node::leaf()),
            ]),
        ),
    );
    let ast = check(&p, &t);
    insta::assert_snapshot!("hand_fused_blur", ast.display(&p).to_string());
}

/// 2mm's first nest distributed: all of `tmp = 0` before any product.
#[test]
fn distributed_2mm() {
    let p = kernel("2mm.c");
    let t = schedule_tree_of(&p).unwrap();
    let NodeKind::Sequence = &t.root.children[0].kind else {
        panic!("2mm's original tree starts with a sequence")
    };
    let second = t.root.children[0].children[1].clone();
    let t = tree(
        &[0, 1, 2, 3],
        Node::sequence(vec![
            (
                Filter::of_statements(&[s(0)]),
                band(
                    vec![(s(0), vec![v(0), v(1)])],
                    vec![true, true],
                    Node::leaf(),
                ),
            ),
            (
                Filter::of_statements(&[s(1)]),
                band(
                    vec![(s(1), vec![v(0), v(1), v(2)])],
                    vec![true, true, false],
                    Node::leaf(),
                ),
            ),
            (
                Filter::of_statements(&[s(2), s(3)]),
                second.children[0].clone(),
            ),
        ]),
    );
    check(&p, &t);
}

/// gemm's scaling grafted into the product's `i` loop with an extension node, a mark on the
/// product, and its `(j, k)` band split.
#[test]
fn extension_mark_and_split() {
    let p = kernel("gemm.pf");
    let mut t = tree(
        &[1],
        band(
            vec![(s(1), vec![v(0)])],
            vec![true],
            band(
                vec![(s(1), vec![v(1), v(2)])],
                vec![true, false],
                Node::leaf(),
            ),
        ),
    );
    // S0[i, j] for c0 = i.
    let ext = Extension {
        outer: 1,
        stmts: vec![(s(0), vec![QuasiConstraint::eq(&v(1), &v(0))])],
    };
    let scaling = band(vec![(s(0), vec![v(1)])], vec![true], Node::leaf());
    t.split_band(&[0, 0], 1).unwrap();
    t.insert_mark(&[0, 0], Mark::Unfused("product".into()))
        .unwrap();
    t.insert_extension(&[0, 0], ext, scaling, true).unwrap();
    assert_eq!(t.statements_at(&[0, 0, 0]).unwrap(), vec![s(0), s(1)]);
    let printed = t.display(&p);
    insta::assert_snapshot!("hand_extension_tree", printed);
    let ast = check(&p, &t);
    let mut marks = Vec::new();
    ast.walk(&mut |a| {
        if let Ast::Mark { mark, .. } = a {
            marks.push(mark.clone());
        }
    });
    assert_eq!(marks, vec![Mark::Unfused("product".into())]);
    insta::assert_snapshot!("hand_extension_ast", ast.display(&p).to_string());
}

/// Coincident members become parallel loops; an innermost one with unit-stride accesses is
/// vectorizable, one that walks a column is not.
#[test]
fn annotations_follow_the_band() {
    let p = kernel("gemm.pf");
    let make = |order: Vec<QuasiAffine>| {
        tree(
            &[0, 1],
            seq(vec![
                (
                    &[0],
                    band(
                        vec![(s(0), vec![v(0), v(1)])],
                        vec![true, true],
                        Node::leaf(),
                    ),
                ),
                (
                    &[1],
                    band(vec![(s(1), order)], vec![true, false, true], Node::leaf()),
                ),
            ]),
        )
    };
    let flags = |ast: &Ast| {
        let mut out = Vec::new();
        ast.walk(&mut |a| {
            if let Ast::For { annotations, .. } = a {
                out.push((annotations.parallel, annotations.vectorizable));
            }
        });
        out
    };
    let ast = check(&p, &make(vec![v(0), v(2), v(1)]));
    assert_eq!(
        flags(&ast),
        vec![
            (true, false),
            (true, true),
            (true, false),
            (false, false),
            (true, true)
        ]
    );
    let ast = check(&p, &make(vec![v(1), v(2), v(0)]));
    assert_eq!(flags(&ast)[4], (true, false));
}

/// Trees that schedule an instance twice or never, or leave a statement out of a band, are
/// rejected.
#[test]
fn verifier_rejects_bad_trees() {
    let p = kernel("gemm.pf");
    let bad = |t: ScheduleTree| {
        assert!(polyhedral::schedule::verify(&p, &t).is_err());
        assert!(generate_ast(&p, &t).is_err());
    };
    // Overlapping filters.
    bad(tree(
        &[0, 1],
        seq(vec![(&[0, 1], Node::leaf()), (&[1], Node::leaf())]),
    ));
    // A statement in no filter.
    bad(tree(&[0, 1], seq(vec![(&[0], Node::leaf())])));
    // Half of S0's rows in no filter.
    let half = Filter {
        stmts: vec![
            (s(0), vec![QuasiConstraint::le(&v(0), &cst(1))]),
            (s(1), vec![]),
        ],
    };
    bad(tree(&[0, 1], Node::sequence(vec![(half, Node::leaf())])));
    // A band that does not schedule S1.
    bad(tree(
        &[0, 1],
        band(vec![(s(0), vec![v(0)])], vec![false], Node::leaf()),
    ));
    // A division by zero.
    bad(tree(
        &[0, 1],
        band(
            vec![
                (s(0), vec![v(0)]),
                (
                    s(1),
                    vec![QuasiAffine {
                        affine: Default::default(),
                        floors: vec![polyhedral::schedule::FloorTerm {
                            coeff: 1,
                            num: v(0),
                            den: 0,
                        }],
                    }],
                ),
            ],
            vec![false],
            Node::leaf(),
        ),
    ));
}
