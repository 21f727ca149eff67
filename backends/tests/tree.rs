//! The CPU target through schedule trees: each program's original-order tree, generated into
//! a loop AST, written as C, built, run and compared with the interpreter (exactly).

mod common;

use backends::cpu::{self, Options};
use polyhedral::{generate_ast, schedule_tree_of};

#[test]
fn original_trees_through_c_match_the_interpreter() {
    let options = Options {
        threads: Some(2),
        ..Options::default()
    };
    for p in [
        common::gemm_bias_relu(),
        common::triangular(),
        common::jacobi_1d(),
    ] {
        let tree = schedule_tree_of(&p).unwrap();
        let ast = generate_ast(&p, &tree).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let report = cpu::check(&p, &ast, &options, 7).unwrap_or_else(|e| panic!("{e}"));
        assert!(report.comparison.passed(), "{}", report.to_text(&p));
        for a in &report.comparison.arrays {
            assert_eq!(a.max_abs, 0.0, "{}", report.to_text(&p));
        }
    }
}
