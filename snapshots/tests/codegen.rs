//! Generated loop ASTs are parametric: an AST generated for one set of sizes runs every
//! instance exactly once, bit for bit like the interpreter, at other sizes too, down to empty
//! domains. The simplifications AST generation makes under its parameter context, the
//! separated and versioned loops and the guards it leaves out must hold for every size.

use polyhedral::ast::{run_ast, Ast};
use polyhedral::interp::{random_inputs, run, Memory};
use polyhedral::pipeline::{compile, MemoryLevel, Options, TargetDescription, Tiling};
use polyhedral::schedule::pluto::Fusion;
use polyhedral::Program;
use snapshots::kernels;

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

/// Tiles 2 to 4 wide at these sizes, so that full and partial tiles both occur.
fn tiny_target() -> TargetDescription {
    TargetDescription {
        name: "tiny".into(),
        memory: vec![MemoryLevel {
            name: "L1".into(),
            bytes: 256,
            line_bytes: 64,
        }],
        vector_bytes: 16,
    }
}

fn bits(m: &Memory) -> Vec<Vec<u64>> {
    m.arrays
        .iter()
        .map(|a| a.iter().map(|x| x.to_bits()).collect())
        .collect()
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

fn check_at(program: &Program, ast: &Ast, sizes: &[i64], what: &str) {
    let mut p = program.clone();
    for (param, &v) in p.params.iter_mut().zip(sizes) {
        param.value = v;
    }
    let mut expected = random_inputs(&p, 7);
    let mut actual = expected.clone();
    let reference = run(&p, &mut expected).unwrap_or_else(|e| panic!("{what} {sizes:?}: {e}"));
    let stats = run_ast(&p, ast, &mut actual)
        .unwrap_or_else(|e| panic!("{what} {sizes:?}: {e}\n{}", ast.display(&p)));
    assert_eq!(
        stats.instances,
        reference.instances,
        "{what} {sizes:?}\n{}",
        ast.display(&p)
    );
    assert!(
        bits(&actual) == bits(&expected),
        "{what} {sizes:?}: results differ\n{}",
        ast.display(&p)
    );
}

#[test]
fn generated_asts_run_like_the_interpreter_at_other_sizes() {
    let target = tiny_target();
    for path in kernels() {
        let program = load(&path);
        for fuse in [Fusion::NoFuse, Fusion::SmartFuse, Fusion::MaxFuse] {
            for tiling in [Tiling::Off, Tiling::FromTarget] {
                let what = format!("{} {} {tiling:?}", path.display(), fuse.name());
                let options = Options {
                    fuse,
                    tiling,
                    ..Options::default()
                };
                let c =
                    compile(&program, &target, &options).unwrap_or_else(|e| panic!("{what}: {e}"));
                for sizes in variants(&program) {
                    check_at(&program, &c.ast, &sizes, &what);
                }
            }
        }
    }
}
