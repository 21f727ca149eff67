//! Generated loop ASTs are parametric: an AST generated for one set of sizes runs every
//! instance exactly once, bit for bit like the interpreter, at other sizes too, down to empty
//! domains. The simplifications AST generation makes under its parameter context, the
//! separated and versioned loops and the guards it leaves out must hold for every size. And
//! their `min`s and `max`es are flat and minimal.

use polyhedral::ast::{run_ast, Ast, AstCond, AstExpr};
use polyhedral::interp::{random_inputs, run};
use polyhedral::passes::tile_size::TileSizes;
use polyhedral::pipeline::{compile, Options};
use polyhedral::schedule::pluto::Fusion;
use polyhedral::Program;
use snapshots::{kernels, observable_bits, tiny_target};

fn load(path: &std::path::Path) -> Program {
    let options = frontend::Options {
        defines: vec![("MINI_DATASET".into(), None)],
        ..frontend::Options::default()
    };
    let mut program =
        frontend::load(path, &options).unwrap_or_else(|e| panic!("{}", e.render(false)));
    for (k, p) in program.params.iter_mut().enumerate() {
        p.value = p.value.min(5 + (k as i64 % 3));
    }
    program
}

/// Sizes to run at besides the compiled ones: every size 0, 1, 2 and 3, and mixes of small
/// and compiled sizes.
fn variants(program: &Program) -> Vec<Vec<i64>> {
    let base: Vec<i64> = program.params.iter().map(|p| p.value).collect();
    let n = base.len();
    let mut out: Vec<Vec<i64>> = (0..4).map(|v| vec![v; n]).collect();
    for k in 0..n {
        for v in [0, 1, 2] {
            let mut sizes = base.clone();
            sizes[k] = v;
            out.push(sizes);
        }
        let mut sizes = base.clone();
        sizes[k] += 3;
        out.push(sizes);
    }
    out.push((0..n).map(|k| 1 + (k as i64 % 3)).collect());
    out.push((0..n).map(|k| 3 - (k as i64 % 3)).collect());
    out.retain(|s| *s != base);
    out.dedup();
    out
}

/// Runs `ast`, generated for `transformed` (the program, or the program with arrays the
/// pipeline expanded), at `sizes`: it runs every instance of `transformed` once, and leaves
/// in the program's arrays (all but its temporaries) exactly what the interpreter leaves running `program`.
fn check_at(program: &Program, transformed: &Program, ast: &Ast, sizes: &[i64], what: &str) {
    let at = |p: &Program| {
        let mut p = p.clone();
        for (param, &v) in p.params.iter_mut().zip(sizes) {
            param.value = v;
        }
        p
    };
    let (p, t) = (at(program), at(transformed));
    let mut expected = random_inputs(&p, 7);
    let mut actual = random_inputs(&t, 7);
    actual.arrays[..expected.arrays.len()].clone_from_slice(&expected.arrays);
    let mut instances = actual.clone();
    run(&p, &mut expected).unwrap_or_else(|e| panic!("{what} {sizes:?}: {e}"));
    let reference = run(&t, &mut instances).unwrap_or_else(|e| panic!("{what} {sizes:?}: {e}"));
    let stats = run_ast(&t, ast, &mut actual)
        .unwrap_or_else(|e| panic!("{what} {sizes:?}: {e}\n{}", ast.display(&t)));
    assert_eq!(
        stats.instances,
        reference.instances,
        "{what} {sizes:?}\n{}",
        ast.display(&t)
    );
    assert!(
        observable_bits(&p, &actual) == observable_bits(&p, &expected),
        "{what} {sizes:?}: results differ\n{}",
        ast.display(&t)
    );
}

#[test]
fn generated_asts_run_like_the_interpreter_at_other_sizes() {
    let target = tiny_target();
    for path in kernels() {
        let program = load(&path);
        for fuse in [Fusion::NoFuse, Fusion::SmartFuse, Fusion::MaxFuse] {
            for tiling in [TileSizes::Off, TileSizes::FromTarget] {
                let what = format!("{} {} {tiling:?}", path.display(), fuse.name());
                let options = Options {
                    fuse,
                    tiling,
                    ..Options::default()
                };
                let c =
                    compile(&program, &target, &options).unwrap_or_else(|e| panic!("{what}: {e}"));
                for sizes in variants(&program) {
                    check_at(&program, &c.program, &c.ast, &sizes, &what);
                }
                check_min_max(&c.ast, &format!("{what}\n{}", c.ast.display(&c.program)));
            }
        }
    }
}

/// Named terms with their coefficients, sorted by name.
type Terms = Vec<(String, i64)>;

/// `e` as `(terms, constant)` when it is a sum of multiples of variables and parameters.
fn linear(e: &AstExpr) -> Option<(Terms, i64)> {
    fn walk(e: &AstExpr, k: i64, terms: &mut Terms, c: &mut i64) -> Option<()> {
        match e {
            AstExpr::Int(v) => *c += k * v,
            AstExpr::Var(v) => terms.push((v.clone(), k)),
            AstExpr::Param(p) => terms.push((format!("param{}", p.0), k)),
            AstExpr::Add(a, b) => {
                walk(a, k, terms, c)?;
                walk(b, k, terms, c)?;
            }
            AstExpr::Mul(m, x) => walk(x, k * m, terms, c)?,
            _ => return None,
        }
        Some(())
    }
    let mut terms = Vec::new();
    let mut c = 0;
    walk(e, 1, &mut terms, &mut c)?;
    let mut merged: Terms = Vec::new();
    for (v, k) in terms {
        match merged.iter_mut().find(|(w, _)| *w == v) {
            Some((_, x)) => *x += k,
            None => merged.push((v, k)),
        }
    }
    merged.retain(|(_, k)| *k != 0);
    merged.sort();
    Some((merged, c))
}

/// The part of a bound that does not depend on its constant: the linear terms and the divisor
/// of `floord`/`ceild` (1 for none).
fn shape(e: &AstExpr) -> Option<(Terms, i64, &'static str)> {
    match e {
        AstExpr::FloorDiv(x, k) => linear(x).map(|(t, _)| (t, *k, "floord")),
        AstExpr::CeilDiv(x, k) => linear(x).map(|(t, _)| (t, *k, "ceild")),
        e => linear(e).map(|(t, _)| (t, 1, "")),
    }
}

fn check_expr(e: &AstExpr, what: &str) {
    match e {
        AstExpr::Min(items) | AstExpr::Max(items) => {
            let is_min = matches!(e, AstExpr::Min(_));
            assert!(items.len() >= 2, "{what}: {e:?} has one item");
            for (i, a) in items.iter().enumerate() {
                let nested = matches!(
                    (a, is_min),
                    (AstExpr::Min(_), true) | (AstExpr::Max(_), false)
                );
                assert!(!nested, "{what}: {e:?} is nested");
                for b in &items[i + 1..] {
                    assert_ne!(a, b, "{what}: {e:?} repeats an item");
                    let (sa, sb) = (shape(a), shape(b));
                    assert!(
                        sa.is_none() || sa != sb,
                        "{what}: {a:?} and {b:?} differ by a constant in {e:?}"
                    );
                }
            }
            items.iter().for_each(|x| check_expr(x, what));
        }
        AstExpr::Add(a, b) => {
            check_expr(a, what);
            check_expr(b, what);
        }
        AstExpr::Mul(_, x)
        | AstExpr::FloorDiv(x, _)
        | AstExpr::CeilDiv(x, _)
        | AstExpr::Mod(x, _) => check_expr(x, what),
        AstExpr::Int(_) | AstExpr::Var(_) | AstExpr::Param(_) => {}
    }
}

/// Every `min`/`max` in `ast` is flat (no `min` directly in a `min`), has no repeated item and
/// no two items that differ only by a constant (only the tightest of those is needed).
fn check_min_max(ast: &Ast, what: &str) {
    ast.walk(&mut |a| match a {
        Ast::For { lower, upper, .. } => {
            check_expr(lower, what);
            check_expr(upper, what);
        }
        Ast::If { conds, .. } => {
            for c in conds {
                let (AstCond::NonNegative(e) | AstCond::Zero(e) | AstCond::Divisible(e, _)) = c;
                check_expr(e, what);
            }
        }
        Ast::User { args, .. } => args.iter().for_each(|e| check_expr(e, what)),
        Ast::Block(_) | Ast::Mark { .. } => {}
    });
}
