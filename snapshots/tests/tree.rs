//! Schedule trees of every kernel: the original-order tree, generated back into a loop AST,
//! runs exactly like the reference interpreter (bit for bit); the printed trees and generated
//! ASTs of a few kernels are snapshots.

use polyhedral::ast::{run_ast, verify};
use polyhedral::interp::{random_inputs, run};
use polyhedral::{generate_ast, schedule_tree_of, Program};
use snapshots::{kernels, snapshot_name};

/// A kernel at small sizes: PolyBench's mini dataset for C, every size cut to at most 7 for
/// `.pf` kernels (different values per size, so mixed-up sizes show).
fn load_small(path: &std::path::Path) -> Program {
    let options = frontend::Options {
        defines: vec![("MINI_DATASET".into(), None)],
        ..frontend::Options::default()
    };
    let mut program =
        frontend::load(path, &options).unwrap_or_else(|e| panic!("{}", e.render(false)));
    if path.extension().is_some_and(|e| e == "pf") {
        for (k, p) in program.params.iter_mut().enumerate() {
            p.value = p.value.min(5 + (k as i64 % 3));
        }
    } else {
        for p in program.params.iter_mut() {
            p.value = p.value.min(12);
        }
    }
    program
}

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
        if !["gemm_pf", "jacobi2d_pf", "lu_pf", "trmm_pf", "2mm_c", "softmax_pf"]
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
