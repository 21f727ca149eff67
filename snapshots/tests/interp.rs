//! The compiled interpreter against the tree walker, bit for bit: every kernel in `kernels/` at
//! small sizes and randomly generated kernels; and the parallel run against the sequential one.

use std::path::{Path, PathBuf};

use frontend::Options;
use polyhedral::interp::{self, Memory, RunOptions};
use polyhedral::Program;

fn kernels() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("kernels/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("pf" | "c")))
        .collect();
    files.sort();
    files
}

/// The kernel at sizes small enough for the tree walker: C kernels at PolyBench's MINI size,
/// `.pf` kernels with every size capped at `cap`.
fn load_small(path: &Path, cap: i64) -> Program {
    let defaults = frontend::load(path, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let options = if path.extension().and_then(|e| e.to_str()) == Some("c") {
        Options {
            defines: vec![("MINI_DATASET".into(), None)],
            ..Options::default()
        }
    } else {
        Options {
            sizes: defaults
                .params
                .iter()
                .map(|p| (p.name.clone(), p.value.min(cap)))
                .collect(),
            ..Options::default()
        }
    };
    frontend::load(path, &options).unwrap_or_else(|e| panic!("{e}"))
}

fn bits(m: &Memory) -> Vec<Vec<u64>> {
    m.arrays
        .iter()
        .map(|a| a.iter().map(|v| v.to_bits()).collect())
        .collect()
}

/// Runs `program` three ways and asserts the same outcome: the tree walker, the compiled
/// interpreter, and the compiled interpreter on three threads.
fn assert_same_runs(program: &Program, seed: u64, what: &str) {
    let mut walked = interp::random_inputs(program, seed);
    let expected = interp::run_tree_walker(program, &mut walked);
    let mut compiled = interp::random_inputs(program, seed);
    let got = interp::run(program, &mut compiled);
    match (&expected, &got) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "{what}: instance counts differ");
            assert!(bits(&walked) == bits(&compiled), "{what}: results differ");
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
        _ => panic!("{what}: the tree walker gives {expected:?}, the compiled run {got:?}"),
    }
    let mut parallel = interp::random_inputs(program, seed);
    let options = RunOptions {
        threads: 3,
        ..RunOptions::default()
    };
    let par = interp::run_with(program, &mut parallel, &options);
    match (&got, &par) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "{what}: parallel instance count differs");
            assert!(
                bits(&compiled) == bits(&parallel),
                "{what}: parallel results differ"
            );
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}: parallel"),
        _ => panic!("{what}: sequential {got:?}, parallel {par:?}"),
    }
}

#[test]
fn every_kernel_matches_the_tree_walker() {
    let files = kernels();
    assert!(files.len() >= 20, "the kernels are found");
    for path in files {
        let program = load_small(&path, 12);
        assert_same_runs(&program, 5, &path.display().to_string());
    }
}

use prng::Rng;

/// A random expression of type `ty` over `leaves`, at most `depth` operators deep.
fn expr(rng: &mut Rng, ty: &str, leaves: &[String], depth: usize) -> String {
    let int = ty == "i32";
    if depth == 0 || rng.below(3) == 0 {
        return match rng.below(5) {
            0 => (if int {
                ["2", "3", "-1"]
            } else {
                ["0.5", "1.5", "-2.0"]
            })[rng.below(3)]
            .to_string(),
            _ => leaves[rng.below(leaves.len())].clone(),
        };
    }
    let a = expr(rng, ty, leaves, depth - 1);
    let b = expr(rng, ty, leaves, depth - 1);
    match rng.below(9) {
        0 => format!("max({a}, {b})"),
        1 => format!("min({a}, {b})"),
        2 => format!("select({a} < {b}, {a}, {b} * {a})"),
        3 => format!("step({a}, {b})"),
        4 if int => format!("({a} / {b})"),
        4 => format!("({a} / ({b} + 3.0))"),
        5 if !int => format!("sqrt(abs({a}))"),
        _ => format!("({a} {} {b})", rng.pick(&["+", "-", "*"])),
    }
}

/// A random kernel: element type, sizes, statements (elementwise, reductions, a stencil in a
/// time loop, a triangular update) and a scalar function with a loop.
fn random_kernel(rng: &mut Rng) -> String {
    let ty = *rng.pick(&["f16", "f32", "f64", "i32"]);
    let (n, m) = (3 + rng.below(6), 3 + rng.below(6));
    let one = if ty == "i32" { "1" } else { "1.0" };
    let mut src = format!(
        "fn step(a: {ty}, b: {ty}) -> {ty} {{\n    var r = a; var k = 0;\n    \
         while k < 3 && r < b {{ r = r + {one}; k = k + 1; }}\n    \
         if r > b {{ return r - b; }} else {{ return r; }}\n}}\n"
    );
    src += &format!(
        "kernel random<N = {n}, M = {m}, T = 2>(A: {ty}[N, M], B: {ty}[M, N], x: {ty}[N + 2]) \
         -> (O: {ty}[N, M], R: {ty}[N], S: {ty}[N, N]) {{\n"
    );
    let mut leaves = vec![
        "A(i, j)".to_string(),
        "B(j, i)".to_string(),
        "x(i + 2)".to_string(),
        "x(i)".to_string(),
    ];
    src += &format!("    P(i, j) = A(i, j) + {};\n", expr(rng, ty, &leaves, 3));
    leaves.push("P(i, j)".into());
    src += &format!("    O(i, j) = B(j, i) - {};\n", expr(rng, ty, &leaves, 3));
    let op = *rng.pick(&["+=!", "max=!", "min=!"]);
    src += &format!("    R(i) {op} A(i, j) * {};\n", expr(rng, ty, &leaves, 2));
    src += &format!(
        "    S(i, k) +=! A(i, j) * B(j, k) - {};\n",
        expr(rng, ty, &leaves[..2], 1)
    );
    src += &format!(
        "    for t in 0:T {{\n        O(i, j) = O(i, j) + O(i - 1, j) * {} where i in 1:N, j in 0:M;\n    }}\n",
        expr(rng, ty, &leaves[..2], 1)
    );
    src += "    S(i, k) = S(i, k) + S(k, k) where i in 0:N, k in 0:i;\n";
    src += "}\n";
    src
}

#[test]
fn random_kernels_match_the_tree_walker() {
    let dir = std::env::temp_dir().join(format!("polyfuse-interp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let mut rng = Rng::new(0x5eed);
    for case in 0..60 {
        let src = random_kernel(&mut rng);
        let path = dir.join(format!("random{case}.pf"));
        std::fs::write(&path, &src).expect("kernel written");
        let program =
            frontend::load(&path, &Options::default()).unwrap_or_else(|e| panic!("{e}\n{src}"));
        assert_same_runs(&program, case, &src);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn parallel_runs_are_bit_identical_at_larger_sizes() {
    for name in [
        "gemm.pf",
        "conv2d_relu.pf",
        "jacobi2d.pf",
        "mandelbrot.pf",
        "softmax.pf",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../kernels")
            .join(name);
        let program = load_small(&path, 48);
        let mut seq = interp::random_inputs(&program, 9);
        let a = interp::run(&program, &mut seq).unwrap();
        let mut par = interp::random_inputs(&program, 9);
        let options = RunOptions {
            threads: 4,
            ..RunOptions::default()
        };
        let b = interp::run_with(&program, &mut par, &options).unwrap();
        assert_eq!(a, b, "{name}");
        assert!(bits(&seq) == bits(&par), "{name}: parallel results differ");
    }
}
