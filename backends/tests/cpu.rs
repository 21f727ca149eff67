//! The CPU target against the reference interpreter: hand-built programs with their original
//! loop nests, annotated as a scheduler would annotate them, written as C, built, run and
//! compared; snapshots of the written C; sanitizer runs; error reporting.

mod common;

use backends::cpu::{self, Error, Options};
use polyhedral::ast::{original_ast, run_ast, Ast, AstExpr};
use polyhedral::interp::{random_inputs, run};
use polyhedral::Program;

/// Loops to annotate, by variable name: (parallel, vectorizable).
fn annotations(program: &Program) -> &'static [(&'static str, bool, bool)] {
    match program.name.as_str() {
        "gemm_bias_relu" => &[("i", true, false), ("j", false, true)],
        "triangular" => &[("i", true, false)],
        "jacobi_1d" => &[("i", true, true), ("j", true, true)],
        "mandelbrot" => &[("y", true, false), ("x", false, true)],
        _ => &[("i", true, true), ("k", true, true)],
    }
}

/// The original loop nest with the annotations a scheduler would find for it.
fn annotated_ast(program: &Program) -> Ast {
    fn annotate(ast: &mut Ast, marks: &[(&str, bool, bool)]) {
        match ast {
            Ast::Block(items) => items.iter_mut().for_each(|a| annotate(a, marks)),
            Ast::For {
                var,
                body,
                annotations,
                ..
            } => {
                let innermost = !body.contains_loop();
                if let Some(&(_, p, v)) = marks.iter().find(|(n, _, _)| n == var) {
                    annotations.parallel = p;
                    annotations.vectorizable = v && innermost;
                }
                annotate(body, marks);
            }
            Ast::If {
                then, otherwise, ..
            } => {
                annotate(then, marks);
                if let Some(o) = otherwise {
                    annotate(o, marks);
                }
            }
            Ast::Mark { body, .. } => annotate(body, marks),
            Ast::User { .. } => {}
        }
    }
    let mut ast = original_ast(program).unwrap();
    annotate(&mut ast, annotations(program));
    ast
}

/// Two threads, and every parallel loop parallel however little work it does, so that the
/// OpenMP code paths run at the small sizes of these tests.
fn options() -> Options {
    Options {
        threads: Some(2),
        min_parallel_work: 0,
        ..Options::default()
    }
}

#[test]
fn original_ast_runs_like_the_interpreter() {
    for p in common::all() {
        let ast = original_ast(&p).unwrap();
        let mut expected = random_inputs(&p, 5);
        let mut actual = expected.clone();
        run(&p, &mut expected).unwrap();
        run_ast(&p, &ast, &mut actual).unwrap();
        assert_eq!(actual, expected, "{}", p.name);
    }
}

fn check_all(programs: Vec<Program>) {
    for p in programs {
        let ast = annotated_ast(&p);
        let report = cpu::check(&p, &ast, &options(), 11).unwrap_or_else(|e| panic!("{e}"));
        assert!(report.comparison.passed(), "{}", report.to_text(&p));
        // The C reproduces the interpreter's rounding exactly.
        for a in &report.comparison.arrays {
            assert_eq!(a.max_abs, 0.0, "{}", report.to_text(&p));
        }
    }
}

#[test]
fn float_kernels_match_the_interpreter() {
    check_all(vec![
        common::gemm_bias_relu(),
        common::triangular(),
        common::jacobi_1d(),
    ]);
}

#[test]
fn functions_f16_and_i32_match_the_interpreter() {
    check_all(vec![
        common::mandelbrot(),
        common::f16_ops(),
        common::i32_ops(),
    ]);
}

#[test]
fn written_c_is_stable() {
    for p in common::all() {
        let ast = annotated_ast(&p);
        let text = cpu::Writer::new(&p, &options()).write(&ast).unwrap();
        insta::assert_snapshot!(format!("cpu_{}", p.name), text);
    }
}

/// Replaces the upper bound of the first loop over `var` by `upper - 1`.
fn shrink_loop(ast: &mut Ast, var: &str) -> bool {
    match ast {
        Ast::Block(items) => items.iter_mut().any(|a| shrink_loop(a, var)),
        Ast::For {
            var: v,
            upper,
            body,
            ..
        } => {
            if v == var {
                *upper = AstExpr::plus(upper.clone(), AstExpr::Int(-1));
                true
            } else {
                shrink_loop(body, var)
            }
        }
        Ast::If { then, .. } => shrink_loop(then, var),
        Ast::Mark { body, .. } => shrink_loop(body, var),
        Ast::User { .. } => false,
    }
}

#[test]
fn a_wrong_loop_bound_is_caught() {
    let p = common::gemm_bias_relu();
    let mut ast = annotated_ast(&p);
    assert!(shrink_loop(&mut ast, "k"));
    let report = cpu::check(&p, &ast, &options(), 3).unwrap();
    assert!(!report.comparison.passed());
    let text = report.to_text(&p);
    assert!(text.contains("MISMATCH"), "{text}");
}

#[test]
fn build_failures_are_errors_with_the_compiler_message() {
    let p = common::jacobi_1d();
    let ast = original_ast(&p).unwrap();
    let inputs = random_inputs(&p, 1);
    let bad_flag = Options {
        cflags: vec!["-fno-such-flag-for-polyfuse".into()],
        ..Options::default()
    };
    match cpu::run(&p, &ast, &inputs, &bad_flag) {
        Err(Error::Build { log, .. }) => assert!(log.contains("no-such-flag"), "{log}"),
        other => panic!("expected a build error, got {other:?}"),
    }
    let no_cc = Options {
        cc: "polyfuse-no-such-compiler".into(),
        ..Options::default()
    };
    assert!(matches!(
        cpu::run(&p, &ast, &inputs, &no_cc),
        Err(Error::CompilerMissing { .. })
    ));
}

const SANITIZE: &[&str] = &[
    "-O1",
    "-g",
    "-fopenmp",
    "-ffp-contract=off",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
];

/// Whether the C compiler can build and run a sanitized program here.
fn sanitizers_available() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let src = dir.path().join("probe.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").map_err(|e| e.to_string())?;
    let bin = dir.path().join("probe");
    let built = std::process::Command::new("cc")
        .args(SANITIZE)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .map_err(|e| e.to_string())?;
    if !built.status.success() {
        return Err(String::from_utf8_lossy(&built.stderr).into_owned());
    }
    let ran = std::process::Command::new(&bin)
        .output()
        .map_err(|e| e.to_string())?;
    if ran.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&ran.stderr).into_owned())
    }
}

#[test]
fn generated_c_passes_address_and_undefined_behaviour_sanitizers() {
    if let Err(reason) = sanitizers_available() {
        println!("skipped: the sanitizer runtime is not usable here: {reason}");
        return;
    }
    let options = Options {
        cflags: SANITIZE.iter().map(|s| s.to_string()).collect(),
        ..options()
    };
    for p in [
        common::gemm_bias_relu(),
        common::mandelbrot(),
        common::f16_ops(),
        common::i32_ops(),
    ] {
        let ast = annotated_ast(&p);
        let report = cpu::check(&p, &ast, &options, 2).unwrap_or_else(|e| panic!("{e}"));
        assert!(report.comparison.passed(), "{}", report.to_text(&p));
    }
}

/// Wraps the body of the first loop over `var` in pack marks for `arrays` (identity layouts).
fn pack_inside_loop(ast: &mut Ast, var: &str, arrays: &[&str]) -> bool {
    match ast {
        Ast::Block(items) => items.iter_mut().any(|a| pack_inside_loop(a, var, arrays)),
        Ast::For { var: v, body, .. } if v == var => {
            for a in arrays {
                let mark = polyhedral::schedule::mark::PackMark {
                    array: a.to_string(),
                    layout: vec![0, 1],
                    owned: false,
                    reason: "test".into(),
                };
                let inner = std::mem::replace(&mut **body, Ast::Block(Vec::new()));
                **body = Ast::Mark {
                    mark: polyhedral::schedule::Mark::Pack(mark),
                    body: Box::new(inner),
                };
            }
            true
        }
        Ast::For { body, .. } | Ast::Mark { body, .. } => pack_inside_loop(body, var, arrays),
        Ast::If { then, .. } => pack_inside_loop(then, var, arrays),
        Ast::User { .. } => false,
    }
}

#[test]
fn packed_boxes_cover_triangles_inside_the_region() {
    // Below `i`, `j` runs to `i` and `k` to `j`: the ranges of `j` and `k` have no constant
    // width, so the boxes of `X` and of the written `L` take those dimensions whole.
    let p = common::triangular();
    let mut ast = original_ast(&p).unwrap();
    assert!(pack_inside_loop(&mut ast, "i", &["L", "X"]));
    let sequential = Options {
        openmp: false,
        ..options()
    };
    let text = cpu::Writer::new(&p, &sequential).write(&ast).unwrap();
    assert!(text.contains("L_packed[1][6]"), "{text}");
    assert!(text.contains("X_packed[1][6]"), "{text}");
    assert!(!text.contains("not packed"), "{text}");
    let report = cpu::check(&p, &ast, &sequential, 5).unwrap_or_else(|e| panic!("{e}"));
    assert!(report.comparison.passed(), "{}", report.to_text(&p));
    for a in &report.comparison.arrays {
        assert_eq!(a.max_abs, 0.0, "{}", report.to_text(&p));
    }
}

/// An innermost loop that reduces into one element holds it in a local, also when it reads
/// other elements of that array that its bounds keep apart from it (trmm's `B[k][j]` for `k`
/// from `i + 1`, beside `B[i][j]`); one whose read may be that element does not (`k` from 0).
/// All compute what the interpreter computes, bit for bit, in the original order.
#[test]
fn reductions_hold_their_element_only_when_no_other_access_can_name_it() {
    let sequential = Options {
        threads: Some(1),
        ..Options::default()
    };
    let overlapping = frontend::parse(
        &frontend::SourceFile::new(
            "overlap.pf",
            "kernel overlap<M = 9, N = 7>(A: f64[M, M]) -> (B: f64[M, N]) {\n\
             B(i, j) += A(k, i) * B(k, j) where k in 0:M;\n}\n",
        ),
        frontend::Language::Kernel,
        &frontend::Options::default(),
    )
    .unwrap_or_else(|e| panic!("{}", e.render(false)));
    for (name, p, held) in [
        (
            "gemm.pf",
            common::kernel_file("gemm.pf", &[("NI", 9), ("NJ", 7), ("NK", 5)]),
            true,
        ),
        (
            "trmm.pf",
            common::kernel_file("trmm.pf", &[("M", 9), ("N", 7)]),
            true,
        ),
        ("overlap.pf", overlapping, false),
    ] {
        let ast = original_ast(&p).unwrap();
        let text = cpu::Writer::new(&p, &sequential).write(&ast).unwrap();
        assert_eq!(text.contains("_acc"), held, "{name}:\n{text}");
        let report = cpu::check(&p, &ast, &sequential, 3).unwrap_or_else(|e| panic!("{e}"));
        assert!(report.comparison.passed(), "{}", report.to_text(&p));
        for a in &report.comparison.arrays {
            assert_eq!(a.max_abs, 0.0, "{}", report.to_text(&p));
        }
    }
}

/// A register tile's full tiles are vector code where every value that changes with the
/// column is a contiguous load (gemm: `pf_acc` vectors), and keep their scalar buffer where
/// the body uses the column index itself as a value; both compute what the interpreter
/// computes, bit for bit, with either CPU model.
#[test]
fn register_tiles_are_vectors_only_where_columns_are_loaded() {
    let sources = [
        ("C(i, j) +=! A(i, k) * B(k, j);", true),
        ("C(i, j) +=! A(i, k) * B(k, j) + j;", false),
    ];
    for (body, vectors) in sources {
        let text = format!(
            "kernel k<M = 20, N = 70, K = 9>(A: f64[M, K], B: f64[K, N]) -> (C: f64[M, N]) {{\n    {body}\n}}\n"
        );
        let file = frontend::SourceFile::new("k.pf", text.as_str());
        let program = frontend::parse(&file, frontend::Language::Kernel, &Default::default())
            .unwrap_or_else(|e| panic!("{body}: {e:?}"));
        for model in cpu::models::MODELS {
            let options = Options::for_model(model).with(|o| o.threads = Some(2));
            let pipeline = polyhedral::pipeline::Options {
                tiling: polyhedral::passes::tile_size::TileSizes::Fixed(vec![8, 64, 4]),
                ..Default::default()
            };
            let c =
                polyhedral::pipeline::compile(&program, &cpu::description_for(&model), &pipeline)
                    .unwrap_or_else(|e| panic!("{body}: {e}"));
            let code = cpu::Writer::new(&c.program, &options)
                .write(&c.ast)
                .unwrap();
            assert!(
                code.contains("register tile"),
                "{body} ({}):\n{code}",
                model.name
            );
            assert_eq!(
                code.contains("pf_acc"),
                vectors,
                "{body} ({}):\n{code}",
                model.name
            );
            let report = cpu::check_transformed(&program, &c.program, &c.ast, &options, 5)
                .unwrap_or_else(|e| panic!("{e}"));
            for a in &report.comparison.arrays {
                assert_eq!(a.max_abs, 0.0, "{}", report.to_text(&program));
            }
        }
    }
}

/// A band whose only parallel member is the innermost one, with a sum over the others (a row
/// times a matrix, as in doitgen), gets a register tile of one row: the row's columns are
/// held in vector accumulators across the sum, and the columns and sums left over at the
/// edges run as before; bit for bit the interpreter's results, with either CPU model.
#[test]
fn a_sum_over_rows_holds_one_row_of_columns_in_registers() {
    let text = "kernel k<M = 37, N = 75>(A: f64[M, N], x: f64[M]) -> (y: f64[N]) {\n    \
                y(j) +=! x(i) * A(i, j);\n}\n";
    let file = frontend::SourceFile::new("k.pf", text);
    let program = frontend::parse(&file, frontend::Language::Kernel, &Default::default())
        .unwrap_or_else(|e| panic!("{e:?}"));
    for model in cpu::models::MODELS {
        let options = Options::for_model(model).with(|o| o.threads = Some(2));
        let pipeline = polyhedral::pipeline::Options {
            tiling: polyhedral::passes::tile_size::TileSizes::Fixed(vec![16, 32]),
            ..Default::default()
        };
        let c = polyhedral::pipeline::compile(&program, &cpu::description_for(&model), &pipeline)
            .unwrap_or_else(|e| panic!("{e}"));
        let code = cpu::Writer::new(&c.program, &options)
            .write(&c.ast)
            .unwrap();
        assert!(
            code.contains("register tile 1x") && code.contains("pf_acc_0_"),
            "{}:\n{code}",
            model.name
        );
        let report = cpu::check_transformed(&program, &c.program, &c.ast, &options, 5)
            .unwrap_or_else(|e| panic!("{e}"));
        for a in &report.comparison.arrays {
            assert_eq!(a.max_abs, 0.0, "{}", report.to_text(&program));
        }
    }
}
