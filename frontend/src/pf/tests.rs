//! Tests of the `.pf` front end: the kernels in `kernels/`, lowering details, one test per
//! error kind (message and position), runs on the reference interpreter, and robustness against
//! arbitrary input.

use std::path::{Path, PathBuf};

use polyhedral::interp;
use polyhedral::program::{ArrayRole, ScalarType};
use polyhedral::Program;
use proptest::prelude::*;

use super::parse_kernel;
use crate::{Options, SourceFile};

fn kernel_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the kernels folder exists")
        .map(|e| e.expect("a readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pf"))
        .collect();
    files.sort();
    files
}

fn kernel_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kernels")
        .join(name);
    std::fs::read_to_string(path).expect("the kernel exists")
}

fn lower_with(text: &str, options: &Options) -> Program {
    let file = SourceFile::new("t.pf", text);
    match parse_kernel(&file, options) {
        Ok(p) => {
            p.verify().expect("lowered programs verify");
            p
        }
        Err(e) => panic!("{}", e.render(false)),
    }
}

fn lower(text: &str) -> Program {
    lower_with(text, &Options::default())
}

fn sizes(pairs: &[(&str, i64)]) -> Options {
    Options {
        sizes: pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        ..Options::default()
    }
}

/// The error's message, line and column.
fn error_with(text: &str, options: &Options) -> (String, usize, usize) {
    let file = SourceFile::new("t.pf", text);
    match parse_kernel(&file, options) {
        Ok(p) => panic!("expected an error, got\n{p}"),
        Err(e) => {
            assert!(e.diagnostic.hint.is_some(), "every error has a hint: {e}");
            let (line, col) = e.line_col();
            (e.diagnostic.message, line, col)
        }
    }
}

fn error(text: &str) -> (String, usize, usize) {
    error_with(text, &Options::default())
}

fn assert_error(text: &str, fragment: &str, line: usize, col: usize) {
    let (msg, l, c) = error(text);
    assert!(msg.contains(fragment), "`{msg}` lacks `{fragment}`");
    assert_eq!((l, c), (line, col), "position of `{msg}`");
}

fn role(p: &Program, name: &str) -> ArrayRole {
    p.array(p.array_by_name(name).expect("the array exists"))
        .role
}

#[test]
fn every_kernel_lowers_and_verifies() {
    let files = kernel_files();
    assert!(files.len() >= 14, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        assert!(
            text.starts_with("//"),
            "{} has a header comment",
            path.display()
        );
        let file = SourceFile::new(&path, text);
        let p = parse_kernel(&file, &Options::default())
            .unwrap_or_else(|e| panic!("{}", e.render(false)));
        p.verify().expect("verifies");
        assert!(!p.statements.is_empty());
    }
}

#[test]
fn gemm_bias_relu_accumulates_f16_in_an_f32_temporary() {
    let p = lower(&kernel_text("gemm_bias_relu.pf"));
    let text = p.to_string();
    assert!(text.contains("  T: f32[M, N] temporary"), "{text}");
    assert!(text.contains("  C: f32[M, N] output"), "{text}");
    assert!(text.contains("  S0: T[i, j] = 0.0f32\n"), "{text}");
    assert!(
        text.contains("  S1: T[i, j] = T[i, j] + f32(A[i, k]) * f32(B[k, j])\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "domain: [M, N, K] -> { S1[i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }"
        ),
        "{text}"
    );
    assert!(text.contains("schedule: [1, i, 0, j, 0, k, 0]"), "{text}");
    assert!(text.contains("reduction: + over k"), "{text}");
    assert!(
        text.contains("read: [M, N, K] -> { S1[i, j, k] -> B[k, j] }"),
        "{text}"
    );
}

#[test]
fn roles_follow_what_the_kernel_reads_first() {
    let gemm = lower(&kernel_text("gemm.pf"));
    assert_eq!(role(&gemm, "C"), ArrayRole::InOut);
    assert_eq!(role(&gemm, "alpha"), ArrayRole::Input);
    let jacobi = lower(&kernel_text("jacobi2d.pf"));
    // B is written only on the interior, so its border is its initial contents.
    assert_eq!(role(&jacobi, "A"), ArrayRole::InOut);
    assert_eq!(role(&jacobi, "B"), ArrayRole::InOut);
    let softmax = lower(&kernel_text("softmax.pf"));
    assert_eq!(role(&softmax, "Y"), ArrayRole::Output);
    assert_eq!(role(&softmax, "mx"), ArrayRole::Temporary);
}

#[test]
fn for_blocks_share_loops_and_positions() {
    let p = lower(&kernel_text("lu.pf"));
    let text = p.to_string();
    assert!(
        text.contains("{ S0[i, j, k] : 0 <= i < N and 0 <= j < i and 0 <= k < j }"),
        "{text}"
    );
    assert!(text.contains("schedule: [0, i, 0, j, 0, k, 0]"), "{text}");
    assert!(text.contains("schedule: [0, i, 0, j, 1]"), "{text}");
    assert!(
        text.contains("{ S2[i, j, k] : 0 <= i < N and i <= j < N and 0 <= k < i }"),
        "{text}"
    );
    assert!(text.contains("schedule: [0, i, 1, j, 0, k, 0]"), "{text}");
    assert!(
        text.contains("S0: A[i, j] = A[i, j] - A[i, k] * A[k, j]"),
        "{text}"
    );
}

#[test]
fn where_ranges_and_conditions() {
    let p = lower(
        "kernel tri<N = 8>(A: f32[N, N]) -> (L: f32[N, N]) {
            L(i, j) = A(i, j) where j in 0:i + 1;
            L(i, j) = 0.0 where i < j;
        }",
    );
    let text = p.to_string();
    assert!(
        text.contains("{ S0[i, j] : 0 <= i < N and 0 <= j <= i }"),
        "{text}"
    );
    assert!(text.contains("and j >= i + 1"), "{text}");
    // The first write leaves the upper triangle unwritten.
    assert_eq!(role(&p, "L"), ArrayRole::InOut);
}

#[test]
fn temporaries_get_shapes_and_types_from_their_definition() {
    let p = lower(
        "kernel t<N = 8>(A: f64[N + 2], k: i32) -> (C: f64[N]) {
            P(i) = A(i) + A(i + 1) where i in 0:N + 1;
            Q(i) = k * 2 where i in 0:N;
            C(i) = P(i) + f64(Q(i)) + 1;
        }",
    );
    let text = p.to_string();
    assert!(text.contains("  P: f64[N + 1] temporary"), "{text}");
    assert!(text.contains("  Q: i32[N] temporary"), "{text}");
    assert!(
        text.contains("S2: C[i] = P[i] + f64(Q[i]) + 1.0\n"),
        "{text}"
    );
}

#[test]
fn literals_take_the_other_operands_type_and_promotion_casts() {
    let p = lower(
        "kernel t<N = 4>(A: f16[N], B: f32[N], n: i32) -> (C: f64[N]) {
            C(i) = A(i) * B(i) + 2 + f32(n) * 0.5;
        }",
    );
    let text = p.to_string();
    assert!(
        text.contains("S0: C[i] = f64(f32(A[i]) * B[i] + 2.0f32 + f32(n[]) * 0.5f32)"),
        "{text}"
    );
}

#[test]
fn sizes_are_overridden_by_size_and_define_options() {
    let text = kernel_text("gemm.pf");
    let p = lower_with(&text, &sizes(&[("NI", 7)]));
    assert_eq!(p.params[0].value, 7);
    let options = Options {
        defines: vec![("NJ".into(), Some("5".into())), ("OTHER".into(), None)],
        ..Options::default()
    };
    let p = lower_with(&text, &options);
    assert_eq!(p.params[1].value, 5);
    let (msg, l, c) = error_with(&text, &sizes(&[("Q", 3)]));
    assert!(
        msg.contains("`--size Q` names no size of kernel `gemm`"),
        "{msg}"
    );
    assert_eq!((l, c), (5, 8));
}

#[test]
fn functions_lower_with_locals_and_control_flow() {
    let p = lower(&kernel_text("mandelbrot.pf"));
    let f = &p.functions[0];
    assert_eq!(f.name, "escape");
    assert_eq!(f.params, 3);
    assert_eq!(f.ret, ScalarType::I32);
    let text = p.to_string();
    assert!(
        text.contains("    while n < limit && zr * zr + zi * zi < 4.0f32 {"),
        "{text}"
    );
    assert!(
        text.contains("S0: count[y, x] = escape(re[x], im[y], 200)"),
        "{text}"
    );
    lower(
        "fn sign(x: f64) -> f64 {
            if x > 0.0 { return 1.0; } else if x < 0.0 { return -1.0; } else { return 0.0; }
        }
        fn twice(x: f64) -> f64 { var y: f64 = x; y *= 2; return sign(y) * y; }
        kernel k<N = 3>(A: f64[N]) -> (B: f64[N]) { B(i) = twice(A(i)); }",
    );
}

// Errors: one test per kind, each with its message and position.

#[test]
fn lexical_errors() {
    assert_error(
        "kernel k() -> (C: f32) {\n  C = 1.0 $ 2.0;\n}",
        "unexpected character `$`",
        2,
        11,
    );
    assert_error(
        "kernel k() -> (C: f32) { C = 1.0; }\n/* never closed",
        "unterminated block comment",
        2,
        1,
    );
    assert_error("kernel k() -> (C: f32) { C = 1.5x; }", "bad number", 1, 30);
}

#[test]
fn syntax_errors() {
    assert_error(
        "kernel k() -> (C: f32) {\n  C = 1.0\n}",
        "expected `;`, found `}`",
        3,
        1,
    );
    assert_error(
        "kernel k( -> (C: f32) {}",
        "expected a tensor name, found `->`",
        1,
        11,
    );
    assert_error("let x = 1;", "expected `fn` or `kernel`", 1, 1);
    assert_error(
        "kernel k() -> (C: f32) { C =! 1.0; }",
        "this operator has no reduction form",
        1,
        28,
    );
}

const HEAD: &str = "kernel k<N = 8, M = 4>(A: f32[N], B: f32[N, N], s: f32) -> (C: f32[N]) {\n";

#[test]
fn unknown_names() {
    assert_error(
        &format!("{HEAD}  C(i) = X(i);\n}}"),
        "unknown tensor or function `X`",
        2,
        10,
    );
    assert_error(
        &format!("{HEAD}  C(i) = foo(A(i));\n}}"),
        "unknown tensor or function `foo`",
        2,
        10,
    );
    assert_error(
        "kernel k<N = 2>(A: f32[Q]) -> (C: f32[N]) { C(i) = 1.0; }",
        "unknown size `Q`",
        1,
        24,
    );
    assert_error(
        &format!("{HEAD}  for t in 0:T {{ C(i) = A(i); }}\n}}"),
        "unknown size or loop index `T`",
        2,
        14,
    );
}

#[test]
fn duplicate_names() {
    assert_error(
        "kernel k<N = 2>(A: f32[N], A: f32[N]) -> (C: f32[N]) { C(i) = A(i); }",
        "duplicate name `A`",
        1,
        28,
    );
    assert_error(
        "fn f(x: f32) -> f32 { var y = x; var y = 2.0; return y; }\nkernel k() -> (C: f32) { C = f(1.0); }",
        "duplicate name `y`",
        1,
        38,
    );
}

#[test]
fn arity_errors() {
    assert_error(
        &format!("{HEAD}  C(i) = A(i, i);\n}}"),
        "`A` has 1 dimension(s) but is given 2",
        2,
        10,
    );
    assert_error(
        &format!("{HEAD}  C(i) = B(i) + s;\n}}"),
        "`B` has 2 dimension(s)",
        2,
        10,
    );
}

#[test]
fn type_errors() {
    assert_error(
        &format!("{HEAD}  C(i) = A(i) + (s < 1.0);\n}}"),
        "needs numbers, found bool",
        2,
        17,
    );
    assert_error(
        "fn f(x: f32) -> i32 { var n = 0; n = 1.5; return n; }\nkernel k() -> (C: f32) { C = 1.0; }",
        "type mismatch: `n` has type i32, found a float literal",
        1,
        38,
    );
    assert_error(
        &format!("{HEAD}  C(i) = f32(i) + i * 0.5;\n}}"),
        "float literal used with i32",
        2,
        23,
    );
    assert_error(
        "fn f(x: f32) -> f32 { if x { return 1.0; } return 0.0; }\nkernel k() -> (C: f32) { C = f(1.0); }",
        "a condition has type bool, found f32",
        1,
        26,
    );
}

#[test]
fn shape_mismatch_with_a_declared_output() {
    assert_error(
        "kernel k<N = 8, M = 4>(A: f32[M]) -> (C: f32[N]) {\n  C(i) = A(i);\n}",
        "shape mismatch: dimension 0 of `C` has extent 8 but index `i` ranges over 4",
        2,
        5,
    );
    // Several tensors of different extents for one index on the right: the intersection.
    lower("kernel k<N = 8, M = 4>(A: f32[M], B: f32[N]) -> (C: f32[M]) { C(i) = A(i) + B(i); }");
}

#[test]
fn non_affine_subscripts() {
    assert_error(
        &format!("{HEAD}  C(i) +=! B(i * j, j);\n}}"),
        "non-affine subscript",
        2,
        14,
    );
    assert_error(
        "kernel k<N = 8>(A: f32[N], I: i32[N]) -> (C: f32[N]) {\n  C(i) = A(I(i));\n}",
        "non-affine subscript",
        2,
        12,
    );
}

#[test]
fn writing_an_input() {
    assert_error(
        &format!("{HEAD}  A(i) = 1.0;\n}}"),
        "cannot write input `A`",
        2,
        3,
    );
}

#[test]
fn reserved_words_as_names() {
    assert_error(
        "kernel k<N = 8>(var: f32[N]) -> (C: f32[N]) {\n  C(i) = var(i);\n}",
        "`var` is a reserved word and cannot be used as a tensor name",
        1,
        17,
    );
    assert_error(
        "kernel k<in = 8>(A: f32[8]) -> (C: f32[8]) {\n  C(i) = A(i);\n}",
        "`in` is a reserved word and cannot be used as a size name",
        1,
        10,
    );
    assert_error(
        "kernel k<N = 8>(A: f32[N]) -> (C: f32[N]) {\n  for while in 0:N {\n  C(i) = A(i);\n  }\n}",
        "`while` is a reserved word and cannot be used as a loop index",
        2,
        7,
    );
}

#[test]
fn uninferable_range() {
    assert_error(
        &format!("{HEAD}  C(i) = A(i + j);\n}}"),
        "index `j` appears only on the right-hand side",
        2,
        16,
    );
    // `y` and `j` appear only together: neither range follows from the other.
    let text =
        "kernel k<N = 8>(A: f32[N]) -> (C: f32[N]) {\n  T(y) +=! A(y + j);\n  C(i) = A(i);\n}";
    assert_error(text, "cannot infer the range of index `y`", 2, 5);
    let file = SourceFile::new("t.pf", text);
    let hint = parse_kernel(&file, &Options::default())
        .unwrap_err()
        .diagnostic
        .hint
        .unwrap_or_default();
    assert!(
        hint.contains("0 <= y + j < N (dimension 0 of `A`)") && hint.contains("where y in lo:hi"),
        "{hint}"
    );
    // An index in no subscript at all.
    assert_error(
        "kernel k<N = 8>(A: f32[N]) -> (C: f32[N]) {\n  T(y) = 1.0;\n  C(i) = A(i);\n}",
        "cannot infer the range of index `y`",
        2,
        5,
    );
}

/// The notes of a kernel that lowers.
fn notes(text: &str) -> Vec<String> {
    let file = SourceFile::new("t.pf", text);
    match super::parse_kernel_with_notes(&file, &Options::default()) {
        Ok((_, notes)) => notes,
        Err(e) => panic!("{}", e.render(false)),
    }
}

fn run_bits(p: &Program) -> Vec<Vec<u64>> {
    let mut mem = interp::random_inputs(p, 3);
    interp::run(p, &mut mem).expect("the kernel runs");
    mem.arrays
        .iter()
        .map(|a| a.iter().map(|v| v.to_bits()).collect())
        .collect()
}

#[test]
fn convolution_ranges_are_inferred_as_tensor_comprehensions_does() {
    let with_where = kernel_text("conv2d_relu.pf");
    let without = with_where.replace(" where y in 0:H, x in 0:W", "");
    assert_ne!(with_where, without);
    let a = lower(&with_where);
    let b = lower(&without);
    let instances = |p: &Program| {
        let mut mem = interp::random_inputs(p, 3);
        interp::run(p, &mut mem).unwrap().instances
    };
    assert_eq!(instances(&a), instances(&b));
    assert_eq!(run_bits(&a), run_bits(&b));
    assert_eq!(
        notes(&without),
        [
            "Conv: index `y` in 0:H (inferred from 0 <= y + ky < H + KH - 1 (dimension 1 of `I`))",
            "Conv: index `x` in 0:W (inferred from 0 <= x + kx < W + KW - 1 (dimension 2 of `I`))",
        ]
    );
    // The form of the task that motivated it: `h` only in `h + kh`, `Z` a temporary.
    let tc = "kernel conv<CI = 2, CO = 3, H = 5, W = 6, KH = 3, KW = 2>(\n\
        X: f32[CI, H + KH - 1, W + KW - 1], Wt: f32[CO, CI, KH, KW]) -> (O: f32[CO, H, W]) {\n\
        Z(co, h, w) +=! X(ci, h + kh, w + kw) * Wt(co, ci, kh, kw);\n\
        O(co, h, w) = Z(co, h, w);\n}";
    let p = lower(tc);
    let z = p.array_by_name("Z").unwrap();
    assert_eq!(p.array_extents(z), vec![3, 5, 6]);
    assert_eq!(p.statements[1].depth(), 6);
}

#[test]
fn strided_and_offset_ranges() {
    // 2i + 1 <= 8: i in 0:4.
    let text =
        "kernel k<N = 9>(A: f32[N]) -> (C: f32[4]) {\n  T(i) = A(2 * i + 1);\n  C(i) = T(i);\n}";
    assert_eq!(
        notes(text),
        ["T: index `i` in 0:4 (inferred from 0 <= 2i + 1 < N (dimension 0 of `A`))"]
    );
    let p = lower(text);
    let mut mem = interp::random_inputs(&p, 1);
    interp::run(&p, &mut mem).unwrap();
    let a = mem.array(p.array_by_name("A").unwrap()).to_vec();
    let c = mem.array(p.array_by_name("C").unwrap()).to_vec();
    assert_eq!(c, vec![a[1], a[3], a[5], a[7]]);
    // i - 1 >= 0 and i + 1 < N: i in 1:N - 1, from two accesses.
    let text = "kernel k<N = 9>(A: f32[N]) -> (C: f32[N]) {\n  T(i) = A(i - 1) + A(i + 1);\n  C(i) = A(i);\n}";
    let n = notes(text);
    assert_eq!(n.len(), 1);
    assert!(
        n[0].starts_with("T: index `i` in 1:N - 1 (inferred from"),
        "{n:?}"
    );
    // Nothing fits: the range is empty.
    assert_error(
        "kernel k<N = 8>(A: f32[N]) -> (C: f32[N]) {\n  T(y) = A(y + 10);\n  C(i) = A(i);\n}",
        "the range of index `y` inferred from its subscripts is empty",
        2,
        5,
    );
}

#[test]
fn out_of_bounds_accesses() {
    assert_error(
        &format!("{HEAD}  C(i) = A(i + 1);\n}}"),
        "out-of-bounds access: `A` reads index 8 of dimension 0 (past the extent 8) at i = 7",
        2,
        10,
    );
    assert_error(
        "kernel k<N = 8>(A: f32[N, N]) -> (C: f32[N, N]) {\n  C(i, j) = A(i, j - 1) where j in 0:i;\n}",
        "reads index -1 of dimension 1 (below 0)",
        2,
        13,
    );
    // Triangular domains are checked exactly: `k < j <= i` keeps `A(j, k)` in bounds.
    lower("kernel k<N = 8>(A: f32[N, N]) -> (C: f32[N, N]) { C(i, j) +=! A(j, k) where j in 0:i+1, k in 0:j; }");
}

#[test]
fn missing_return() {
    assert_error(
        "fn f(x: f32) -> f32 {\n  if x > 0.0 { return x; }\n}\nkernel k() -> (C: f32) { C = f(1.0); }",
        "`f` may reach its end without returning a value",
        3,
        1,
    );
}

#[test]
fn recursion_and_calls_before_definition() {
    assert_error(
        "fn f(x: f32) -> f32 { return f(x); }\nkernel k() -> (C: f32) { C = f(1.0); }",
        "recursive call of `f`",
        1,
        30,
    );
    assert_error(
        "fn f(x: f32) -> f32 { return g(x); }\nfn g(x: f32) -> f32 { return x; }\nkernel k() -> (C: f32) { C = f(1.0); }",
        "`g` is called before its definition",
        1,
        30,
    );
    assert_error(
        "kernel k() -> (C: f32) { C = g(1.0); }\nfn g(x: f32) -> f32 { return x; }",
        "`g` is called before its definition",
        1,
        30,
    );
}

// Runs on the reference interpreter, compared with values computed by hand.

fn run(p: &Program, mem: &mut interp::Memory) {
    interp::run(p, mem).expect("the kernel runs");
}

#[test]
fn gemm_runs_like_polybench() {
    let p = lower_with(
        &kernel_text("gemm.pf"),
        &sizes(&[("NI", 3), ("NJ", 4), ("NK", 5)]),
    );
    let mut mem = interp::random_inputs(&p, 7);
    let id = |n: &str| p.array_by_name(n).expect("exists").index();
    let (alpha, beta) = (mem.arrays[id("alpha")][0], mem.arrays[id("beta")][0]);
    let (a, b, mut c) = (
        mem.arrays[id("A")].clone(),
        mem.arrays[id("B")].clone(),
        mem.arrays[id("C")].clone(),
    );
    for i in 0..3 {
        for j in 0..4 {
            c[i * 4 + j] *= beta;
            for k in 0..5 {
                c[i * 4 + j] += alpha * a[i * 5 + k] * b[k * 4 + j];
            }
        }
    }
    run(&p, &mut mem);
    assert_eq!(mem.arrays[id("C")], c);
}

#[test]
fn small_kernels_compute_hand_values() {
    let p = lower(
        "kernel k<N = 3, M = 2>(A: f32[N, M]) -> (S: f32[N], X: f32[N], R: f32[N, M]) {
            S(i) +=! A(i, j);
            X(i) max=! A(i, j);
            R(i, j) = A(i, j) > 1.0 ? A(i, j) : -1.0;
        }",
    );
    let mut mem = interp::random_inputs(&p, 1);
    mem.arrays[0] = vec![1.0, 2.0, -3.0, 0.5, 4.0, 4.0];
    run(&p, &mut mem);
    assert_eq!(mem.arrays[1], vec![3.0, -2.5, 8.0]);
    assert_eq!(mem.arrays[2], vec![2.0, 0.5, 4.0]);
    assert_eq!(mem.arrays[3], vec![-1.0, 2.0, -1.0, -1.0, 4.0, 4.0]);
}

#[test]
fn mandelbrot_counts_escape_iterations() {
    let p = lower_with(&kernel_text("mandelbrot.pf"), &sizes(&[("H", 1), ("W", 3)]));
    let mut mem = interp::random_inputs(&p, 1);
    let re = p.array_by_name("re").expect("exists").index();
    let im = p.array_by_name("im").expect("exists").index();
    let count = p.array_by_name("count").expect("exists").index();
    // c = 0 never escapes; c = 2 escapes after one step; c = 1 after two.
    mem.arrays[re] = vec![0.0, 2.0, 1.0];
    mem.arrays[im] = vec![0.0];
    run(&p, &mut mem);
    assert_eq!(mem.arrays[count], vec![200.0, 1.0, 2.0]);
}

#[test]
fn jacobi_keeps_borders_and_updates_the_interior() {
    let p = lower_with(
        &kernel_text("jacobi2d.pf"),
        &sizes(&[("TSTEPS", 1), ("N", 3)]),
    );
    let mut mem = interp::random_inputs(&p, 1);
    mem.arrays[0] = (0..9).map(|v| v as f64).collect();
    mem.arrays[1] = vec![0.0; 9];
    run(&p, &mut mem);
    // B's centre is 0.2 * (4 + 3 + 5 + 7 + 1); A's centre then averages B's zero border.
    let b_centre = 0.2 * (4.0 + 3.0 + 5.0 + 7.0 + 1.0);
    assert_eq!(mem.arrays[1][4], b_centre);
    assert_eq!(mem.arrays[0][4], 0.2 * b_centre);
    assert_eq!(mem.arrays[0][0], 0.0);
    assert_eq!(mem.arrays[1][0], 0.0);
}

// Robustness: no input makes the front end panic.

const SEEDS: &[&str] = &[
    include_str!("../../../kernels/gemm_bias_relu.pf"),
    include_str!("../../../kernels/mandelbrot.pf"),
    include_str!("../../../kernels/lu.pf"),
    include_str!("../../../kernels/blur_unsharp.pf"),
];

const PIECES: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "=",
    "+=!",
    "max=!",
    ";",
    ",",
    ":",
    "?",
    "!",
    "-",
    "*",
    "/",
    "%",
    "i",
    "j",
    "k",
    "N",
    "0",
    "1",
    "2.5",
    "1e9",
    "99999999999",
    "where",
    "for",
    "in",
    "fn",
    "kernel",
    "return",
    "if",
    "else",
    "while",
    "var",
    "let",
    "f16",
    "f32(",
    "select(",
    "A(",
    "T(",
    "->",
    " ",
    "\n",
    "/*",
    "//",
    "0:N",
    "i+1",
    "true",
];

fn mutate(seed: &str, edits: &[(usize, usize, usize)]) -> String {
    let mut text = seed.to_string();
    for &(pos, len, piece) in edits {
        let start = pos % (text.len() + 1);
        let mut end = (start + len % 8).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let start = start.min(end);
        text.replace_range(start..end, PIECES[piece % PIECES.len()]);
    }
    text
}

fn no_panic(text: &str) {
    let file = SourceFile::new("fuzz.pf", text);
    if let Ok(p) = parse_kernel(&file, &Options::default()) {
        p.verify().expect("a kernel the front end accepts verifies");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        no_panic(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_kernels_never_panic(
        seed in 0..SEEDS.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<usize>()), 1..6),
    ) {
        no_panic(&mutate(SEEDS[seed], &edits));
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!(
        "kernel k() -> (C: f32) {{ C = {}1.0{}; }}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    assert!(error(&deep).0.contains("nested too deeply"));
    let long = format!(
        "kernel k() -> (C: f32) {{ C = 1.0{}; }}",
        " + 1.0".repeat(5000)
    );
    assert!(error(&long).0.contains("nested too deeply"));
    let negs = format!("kernel k() -> (C: f32) {{ C = {}1.0; }}", "-".repeat(5000));
    assert!(error(&negs).0.contains("nested too deeply"));
}

#[test]
fn huge_sizes_and_coefficients_are_errors() {
    assert_error(
        "kernel k<N = 2147483647, M = 2147483647>(A: f32[2147483647 * N + 2147483647 * M]) -> (C: f32) { C = 1.0; }",
        "extent of `A`",
        1,
        49,
    );
    assert_error(
        "kernel k<N = 4>(A: f32[N]) -> (C: f32[N]) { C(i) = A(99999999999 * i); }",
        "affine expression too large",
        1,
        54,
    );
}
