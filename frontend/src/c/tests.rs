//! Tests of the C SCoP front end: the kernels in `kernels/`, lowering of each construct,
//! one test per error kind, and random inputs that must never panic.

use std::path::{Path, PathBuf};

use polyhedral::program::{ArrayRole, ScalarType, SourceKind};
use polyhedral::Program;
use proptest::prelude::*;

use super::parse_scop;
use crate::{Error, Options, SourceFile};

fn kernels_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../kernels")
}

fn with_defines(defines: &[&str]) -> Options {
    Options {
        defines: defines.iter().map(|d| (d.to_string(), None)).collect(),
        ..Options::default()
    }
}

fn kernel(name: &str, options: &Options) -> Program {
    let path = kernels_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let p = parse_scop(&SourceFile::new(&path, text), options)
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    p
}

/// A kernel with sizes N = 10 and M = 8, arrays A, B (N x N), x (N), a scalar alpha, int
/// iterators i, j, k and a local scalar t, around the given SCoP body.
fn wrap(body: &str) -> String {
    format!(
        "#define N 10\n#define M 8\n\
         void kernel_k(double A[N][N], double B[N][N], double x[N], double alpha) {{\n\
         int i, j, k;\ndouble t;\n#pragma scop\n{body}\n#pragma endscop\n}}\n"
    )
}

/// Line of the first line of `wrap`'s body.
const BODY_LINE: usize = 7;

fn parse(src: &str) -> Result<Program, Error> {
    parse_scop(&SourceFile::new("test.c", src), &Options::default())
}

fn lower(body: &str) -> String {
    let p = parse(&wrap(body)).unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    p.to_string()
}

/// The message and 1-based line and column of the error `src` gives.
fn error(src: &str) -> (String, usize, usize) {
    let e = parse(src).expect_err("an error");
    assert!(e.diagnostic.hint.is_some(), "no hint: {e}");
    let (line, col) = e.line_col();
    (e.diagnostic.message, line, col)
}

fn body_error(body: &str) -> (String, usize, usize) {
    let (m, line, col) = error(&wrap(body));
    (m, line - BODY_LINE + 1, col)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("polyfuse-cscop-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---------------------------------------------------------------- kernels

#[test]
fn gemm_lowers_as_polybench_writes_it() {
    let p = kernel("gemm.c", &with_defines(&["SMALL_DATASET"]));
    let text = p.to_string();
    assert_eq!(p.name, "gemm");
    assert!(text.contains("params: NI = 60, NJ = 70, NK = 80"), "{text}");
    assert!(text.contains("C: f64[NI, NJ] inout"), "{text}");
    assert!(text.contains("alpha: f64 input"), "{text}");
    assert!(text.contains("S0: C[i, j] = C[i, j] * beta[]"), "{text}");
    assert!(
        text.contains("S1: C[i, j] = C[i, j] + alpha[] * A[i, k] * B[k, j]"),
        "{text}"
    );
    assert!(
        text.contains("{ S1[i, k, j] : 0 <= i < NI and 0 <= k < NK and 0 <= j < NJ }"),
        "{text}"
    );
    assert!(text.contains("schedule: [0, i, 0, j, 0]"), "{text}");
    assert!(text.contains("schedule: [0, i, 1, k, 0, j, 0]"), "{text}");
    assert!(text.contains("reduction: + over k"), "{text}");
    let SourceKind::CScop { scop, .. } = p.source else {
        panic!("not a C SCoP")
    };
    let src = std::fs::read_to_string(kernels_dir().join("gemm.c")).unwrap();
    let region = &src[scop.start as usize..scop.end as usize];
    assert!(region.starts_with("#pragma scop"), "{region}");
    assert!(region.ends_with("#pragma endscop"), "{region}");
}

#[test]
fn every_kernel_lowers_and_verifies() {
    let expected = [
        ("gemm.c", 2),
        ("2mm.c", 4),
        ("syrk.c", 2),
        ("doitgen.c", 3),
        ("gramschmidt.c", 7),
        ("covariance.c", 8),
        ("gemver.c", 4),
        ("jacobi-2d.c", 2),
    ];
    for (name, statements) in expected {
        let p = kernel(name, &with_defines(&["MINI_DATASET"]));
        assert_eq!(p.statements.len(), statements, "{name}:\n{p}");
        let mut memory = polyhedral::interp::random_inputs(&p, 3);
        polyhedral::interp::run(&p, &mut memory).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn dataset_macros_select_sizes_as_polybench_does() {
    let size = |opts: &Options| kernel("gemm.c", opts).params[0].value;
    assert_eq!(
        size(&Options::default()),
        1000,
        "PolyBench defaults to LARGE"
    );
    assert_eq!(size(&with_defines(&["MINI_DATASET"])), 20);
    assert_eq!(size(&with_defines(&["EXTRALARGE_DATASET"])), 2000);
    let mut opts = with_defines(&["MINI_DATASET"]);
    opts.sizes.push(("NJ".into(), 7));
    let p = kernel("gemm.c", &opts);
    assert_eq!(p.params[1].name, "NJ");
    assert_eq!(p.params[1].value, 7);
    let opts = Options {
        defines: vec![
            ("NI".into(), Some("3".into())),
            ("NJ".into(), Some("4".into())),
            ("NK".into(), Some("5".into())),
        ],
        ..Options::default()
    };
    assert_eq!(kernel("gemm.c", &opts).param_values(), [3, 4, 5]);
}

#[test]
fn a_real_polybench_header_on_the_include_path_changes_nothing() {
    for name in ["gemm.c", "gramschmidt.c", "covariance.c", "jacobi-2d.c"] {
        let builtin = kernel(name, &with_defines(&["SMALL_DATASET"]));
        let mut opts = with_defines(&["SMALL_DATASET"]);
        opts.include_dirs.push(kernels_dir());
        let mut real = kernel(name, &opts);
        // The real header bounds loops by the kernel's `int` parameters (`ni`), the built-in
        // one by the size macros (`NI`): the same sizes, spelled as each SCoP spells them.
        let (SourceKind::CScop { size_names: a, .. }, SourceKind::CScop { size_names: b, .. }) =
            (&builtin.source, &mut real.source)
        else {
            panic!("{name}: not a C SCoP");
        };
        for (x, y) in a.iter().zip(b.iter()) {
            assert!(x == y || x.to_lowercase() == *y, "{name}: {x} and {y}");
        }
        *b = a.clone();
        assert_eq!(builtin, real, "{name}");
    }
}

#[test]
fn float_data_type_gives_f32_and_float_math() {
    let p = kernel(
        "gramschmidt.c",
        &with_defines(&["MINI_DATASET", "DATA_TYPE_IS_FLOAT"]),
    );
    let text = p.to_string();
    assert!(text.contains("A: f32[M, N] inout"), "{text}");
    assert!(text.contains("nrm: f32 temporary"), "{text}");
    assert!(text.contains("= sqrt(nrm[])"), "{text}");
    assert!(text.contains("nrm[] = 0.0f32"), "{text}");
}

#[test]
fn roles_follow_reads_and_writes() {
    let p = kernel("2mm.c", &with_defines(&["MINI_DATASET"]));
    let role = |n: &str| p.array(p.array_by_name(n).unwrap()).role;
    assert_eq!(role("tmp"), ArrayRole::InOut);
    assert_eq!(role("D"), ArrayRole::InOut);
    assert_eq!(role("A"), ArrayRole::Input);
    let text = lower("for (i = 0; i < N; i++) { t = x[i]; B[0][i] = t * 2.0; }");
    assert!(text.contains("B: f64[N, N] output"), "{text}");
    assert!(text.contains("t: f64 temporary"), "{text}");
    assert!(text.contains("x: f64[N] input"), "{text}");
    assert!(!text.contains("  A:"), "unused arrays are left out: {text}");
}

// ---------------------------------------------------------------- lowering

#[test]
fn triangular_bounds() {
    let text = lower("for (i = 0; i < N; i++) for (j = i + 1; j <= N - 1; j++) A[i][j] = A[j][i];");
    assert!(
        text.contains("{ S0[i, j] : 0 <= i < N and i + 1 <= j < N }"),
        "{text}"
    );
}

#[test]
fn min_and_max_bounds_become_several_constraints() {
    let text = lower(
        "#define MIN(a, b) ((a) < (b) ? (a) : (b))\n\
         for (i = 0; i < N; i++) for (j = max(0, i - 2); j < MIN(N, i + 3); j++) x[j] += A[i][j];",
    );
    assert!(
        text.contains("{ S0[i, j] : 0 <= i < N and 0 <= j < N and i - 2 <= j <= i + 2 }"),
        "{text}"
    );
}

#[test]
fn affine_ifs_and_else() {
    let text = lower(
        "for (i = 0; i < N; i++) for (j = 0; j < N; j++) {\
         if (i > j && !(j < 1)) A[i][j] = 0.0; if (i > j) B[i][j] = 0.0; else if (i == j) B[i][j] = 1.0; }",
    );
    assert!(
        text.contains("0 <= i < N and 0 <= j < N and j < i and j >= 1 }"),
        "{text}"
    );
    assert!(
        text.contains("0 <= i < N and 0 <= j < N and j < i }"),
        "{text}"
    );
    assert!(text.contains("and j >= i and j = i }"), "{text}");
    assert!(text.contains("schedule: [0, i, 0, j, 2]"), "{text}");
}

#[test]
fn count_down_loops_are_normalised() {
    let text = lower("for (i = N - 1; i >= 0; i--) for (j = i; j < N; j++) x[i] = x[i] + A[i][j];");
    // C's i is N - 1 - i', with i' counting up from 0.
    assert!(
        text.contains("S0: x[-i + N - 1] = x[-i + N - 1] + A[-i + N - 1, j]"),
        "{text}"
    );
    assert!(
        text.contains("0 <= i < N and -i + N - 1 <= j < N"),
        "{text}"
    );
    let text = lower("for (i = min(N, M) - 1; i > 0; --i) x[i] = 1.0;");
    assert!(text.contains("S0: x[-i] = 1.0"), "{text}");
    // C's i is -i' here, i' counting up from -(min(N, M) - 1).
    assert!(text.contains("-N + 1 <= i < 0 and i >= -M + 1"), "{text}");
}

#[test]
fn loop_forms_and_scalar_temporaries() {
    let text = lower(
        "for (i = 0; i < N; i += 1) { t = 0.0; for (int q = 0; q <= M; q = q + 1) t += x[q]; x[i] = t; }",
    );
    assert!(text.contains("S0: t[] = 0.0"), "{text}");
    assert!(text.contains("S1: t[] = t[] + x[q]"), "{text}");
    assert!(
        text.contains("{ S1[i, q] : 0 <= i < N and 0 <= q <= M }"),
        "{text}"
    );
    // The written scalar does not depend on i either.
    assert!(text.contains("reduction: + over i, q"), "{text}");
    assert!(text.contains("schedule: [0, i, 2]"), "{text}");
}

#[test]
fn conversions_follow_c() {
    let text = lower(
        "for (i = 0; i < N; i++) { x[i] = i * alpha + 0.5f; B[i][i] = (double) (i / 2) + 2; \
         A[i][0] = i > 2 ? fabs(-x[i]) : sqrt(SCALAR_VAL(2.0)); A[0][i] = pow(x[i], 2) + min(i, 3); }",
    );
    assert!(
        text.contains("S0: x[i] = f64(i) * alpha[] + f64(0.5f32)"),
        "{text}"
    );
    assert!(text.contains("S1: B[i, i] = f64(i / 2) + f64(2)"), "{text}");
    assert!(
        text.contains("S2: A[i, 0] = select(i > 2, abs(-x[i]), sqrt(2.0))"),
        "{text}"
    );
    assert!(
        text.contains("S3: A[0, i] = pow(x[i], f64(2)) + f64(min(i, 3))"),
        "{text}"
    );
}

#[test]
fn iterator_values_in_expressions() {
    let text = lower("for (i = N - 1; i >= 1; i--) x[i] = i * 1.0 + N;");
    assert!(
        text.contains("x[-i + N - 1] = f64(-i + N - 1) * 1.0 + f64(N)"),
        "{text}"
    );
    assert!(text.contains("{ S0[i] : 0 <= i < N - 1 }"), "{text}");
}

#[test]
fn int_parameters_stand_for_their_sizes() {
    let src = "#define N 12\nvoid kernel_v(int n, float v[N]) {\n int i;\n#pragma scop\n\
               for (i = 1; i < n; i++) v[i] = v[i - 1] * 2;\n#pragma endscop\n}\n";
    let p = parse(src).unwrap();
    p.verify().unwrap();
    let text = p.to_string();
    assert!(text.contains("params: N = 12"), "{text}");
    assert!(text.contains("1 <= i < N"), "{text}");
    assert!(text.contains("v[i] = v[i - 1] * f32(2)"), "{text}");
}

// ---------------------------------------------------------------- errors

#[test]
fn error_no_scop() {
    let (m, line, col) = error("int main(void) { return 0; }\n");
    assert_eq!(m, "no `#pragma scop` in the file");
    assert_eq!((line, col), (1, 1));
}

#[test]
fn error_unterminated_scop() {
    let (m, line, col) = error("void f(double x[4]) {\n int i;\n#pragma scop\n x[0] = 1.0;\n}\n");
    assert!(m.starts_with("unterminated SCoP"), "{m}");
    assert_eq!((line, col), (3, 1));
}

#[test]
fn error_non_affine_subscript() {
    let (m, line, col) =
        body_error("for (i = 0; i < N; i++)\n for (j = 0; j < N; j++)\n  A[i * j][0] = 1.0;");
    assert_eq!(m, "non-affine subscript");
    assert_eq!((line, col), (3, 5));
    let (m, line, col) = body_error("for (i = 0; i < N; i++) x[(int) x[i]] = 1.0;");
    assert_eq!(m, "non-affine subscript");
    assert_eq!((line, col), (1, 33));
    let (m, _, _) = body_error("for (i = 0; i < N; i++) x[alpha] = 1.0;");
    assert_eq!(
        m,
        "non-affine subscript: `alpha` is data, not an iterator or size"
    );
}

#[test]
fn error_non_affine_bound() {
    let (m, line, col) = body_error("for (i = 0; i < N * N; i++) x[0] = 1.0;");
    assert_eq!(m, "non-affine condition");
    assert_eq!((line, col), (1, 17));
    let (m, _, _) = body_error("for (i = 0; i < alpha; i++) x[0] = 1.0;");
    assert_eq!(
        m,
        "non-affine condition: `alpha` is data, not an iterator or size"
    );
}

#[test]
fn error_step_not_a_constant() {
    let (m, line, col) = body_error("for (i = 0; i < N; i += i) x[i] = 1.0;");
    assert_eq!(m, "a loop step that is not a constant is not supported");
    assert_eq!((line, col), (1, 20));
}

#[test]
fn error_unsupported_control_flow() {
    let (m, line, col) = body_error("for (i = 0; i < N; i++)\n  while (1) x[i] = 1.0;");
    assert_eq!(m, "`while` is not supported in a SCoP");
    assert_eq!((line, col), (2, 3));
    let (m, _, _) = body_error("goto out;");
    assert_eq!(m, "`goto` is not supported in a SCoP");
}

#[test]
fn error_function_call() {
    let (m, line, col) = body_error("x[0] = foo(x[1]);");
    assert_eq!(m, "call to `foo` is not supported in a SCoP");
    assert_eq!((line, col), (1, 8));
    let (m, _, _) = body_error("print(x[1]);");
    assert_eq!(m, "call to `print` is not supported in a SCoP");
}

#[test]
fn error_iterator_is_not_an_array() {
    let (m, line, col) = body_error("for (i = 0; i < N; i++)\n x[i] = i[0];");
    assert_eq!(m, "`i` is not an array");
    assert_eq!((line, col), (2, 9));
}

#[test]
fn error_undefined_size() {
    let (m, line, col) = body_error("for (i = 0; i < _PB_Q; i++) x[i] = 1.0;");
    assert_eq!(m, "undefined size `_PB_Q`");
    assert_eq!((line, col), (1, 17));
}

#[test]
fn error_assignment_to_iterator() {
    let (m, line, col) = body_error("for (i = 0; i < N; i++) {\n i = 3;\n}");
    assert_eq!(m, "assignment to loop iterator `i`");
    assert_eq!((line, col), (2, 2));
}

#[test]
fn error_missing_include() {
    let (m, line, col) = error("int a;\n#include \"no_such_header.h\"\n");
    assert_eq!(m, "cannot find included file `no_such_header.h`");
    assert_eq!((line, col), (2, 1));
}

#[test]
fn error_bad_directive() {
    let (m, line, col) = error("#define A 1\n#frobnicate x\n");
    assert_eq!(m, "unknown preprocessor directive `#frobnicate`");
    assert_eq!((line, col), (2, 2));
    let (m, line, _) = error("#if 1\nint x;\n");
    assert_eq!(m, "unterminated conditional group");
    assert_eq!(line, 1);
    let (m, _, _) = error("#if 1 +\n#endif\n");
    assert_eq!(m, "expected a value in a preprocessor condition");
}

#[test]
fn error_syntax() {
    let (m, line, col) = body_error("for (i = 0; i < N; i++)\n  x[i] = (1.0 + ;");
    assert_eq!(m, "expected an expression, found `;`");
    assert_eq!((line, col), (2, 17));
}

#[test]
fn error_disjunctions_not_supported_yet() {
    let (m, _, _) = body_error("for (i = 0; i < N; i++) if (i < 2 || i > 5) x[i] = 1.0;");
    assert_eq!(m, "`||` in a SCoP condition is not supported yet");
    let (m, _, _) = body_error("for (i = 0; i < N; i++) if (i != 2) x[i] = 1.0;");
    assert_eq!(m, "`!=` in a SCoP condition is not supported yet");
}

#[test]
fn errors_in_a_header_point_into_the_header() {
    let dir = temp_dir("header");
    std::fs::write(dir.join("bad.h"), "#define OK 1\n#if\n#endif\n").unwrap();
    let main = dir.join("main.c");
    let src = "#include \"bad.h\"\nint x;\n";
    let e = parse_scop(&SourceFile::new(&main, src), &Options::default()).unwrap_err();
    assert_eq!(e.file.path, dir.join("bad.h"));
    assert_eq!(e.line_col().0, 2);
    // Found through -I as well, after the including file's folder.
    let other = temp_dir("main");
    let opts = Options {
        include_dirs: vec![dir.clone()],
        ..Options::default()
    };
    let e = parse_scop(&SourceFile::new(other.join("m.c"), src), &opts).unwrap_err();
    assert_eq!(e.file.path, dir.join("bad.h"));
}

// ---------------------------------------------------------------- robustness

fn must_not_panic(text: &str) {
    let file = SourceFile::new(Path::new("fuzz.c"), text);
    if let Ok(p) = parse_scop(&file, &Options::default()) {
        p.verify().unwrap();
    } else if let Err(e) = parse_scop(&file, &Options::default()) {
        let _ = e.render(false);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in "[ -~\n\t\u{e9}#]{0,200}") {
        must_not_panic(&text);
    }

    #[test]
    fn mutated_kernels_never_panic(
        which in 0usize..3,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..6, "[-+*/()\\[\\];{}#a-z0-9 \n<>=!?:,.]{0,4}"), 1..4),
    ) {
        let sources = [
            include_str!("../../../kernels/gemm.c"),
            include_str!("../../../kernels/gramschmidt.c"),
            include_str!("../../../kernels/jacobi-2d.c"),
        ];
        let mut text = sources[which].to_string();
        // Mutate inside the kernel mostly: that is where the interesting code is.
        let base = text.find("static\nvoid kernel").unwrap_or(0);
        for (at, remove, insert) in edits {
            let span = text.len() - base;
            let start = base + at.index(span.max(1));
            let mut start = start.min(text.len());
            while !text.is_char_boundary(start) { start -= 1; }
            let mut end = (start + remove).min(text.len());
            while !text.is_char_boundary(end) { end -= 1; }
            text.replace_range(start..end, &insert);
        }
        let path = kernels_dir().join("fuzz.c");
        let file = SourceFile::new(&path, text);
        let opts = with_defines(&["MINI_DATASET"]);
        match parse_scop(&file, &opts) {
            Ok(p) => p.verify().unwrap(),
            Err(e) => { let _ = e.render(false); }
        }
    }
}

#[test]
fn pathological_macros_are_bounded() {
    let mut src = String::from("#define a0 x x\n");
    for k in 1..40 {
        src.push_str(&format!("#define a{k} a{} a{}\n", k - 1, k - 1));
    }
    src.push_str("a39\n");
    let (m, _, _) = error(&src);
    assert_eq!(m, "macro expansion too large");
    let dir = temp_dir("recursive");
    std::fs::write(dir.join("self.h"), "#include \"self.h\"\n").unwrap();
    let e = parse_scop(
        &SourceFile::new(dir.join("m.c"), "#include \"self.h\"\n"),
        &Options::default(),
    )
    .unwrap_err();
    assert_eq!(e.diagnostic.message, "#include nested too deeply");
    must_not_panic("#define f(x) f(x) x\nf(f(f(1)))\n");
    let (m, _, _) = body_error("x[2000000000 * 2000000000 * 2000000000] = 1.0;");
    assert_eq!(m, "subscript too large to handle");
    let (m, _, _) = body_error(&format!(
        "for (i = 0; i < {}; i++) x[0] = 1.0;",
        ["min(N, M)"; 8].join(" + ")
    ));
    assert_eq!(m, "condition too large to handle");
    must_not_panic("void f(){\n#pragma scop\n((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((1\n#pragma endscop\n}");
}

// ---------------------------------------------------------------- interpreter

#[test]
fn interpreter_runs_a_count_down_triangular_kernel() {
    use polyhedral::interp;
    let src = "#define N 3\n\
               void kernel_t(double A[N][N], double x[N], double y[N], double alpha) {\n\
               int i, j;\n#pragma scop\n\
               for (i = N - 1; i >= 0; i--) {\n  y[i] = 0.0;\n\
                 for (j = 0; j <= i; j++)\n    y[i] += alpha * A[i][j] * x[j];\n}\n\
               #pragma endscop\n}\n";
    let p = parse(src).unwrap();
    p.verify().unwrap();
    let mut memory = interp::random_inputs(&p, 1);
    let id = |n: &str| p.array_by_name(n).unwrap().index();
    memory.arrays[id("A")] = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    memory.arrays[id("x")] = vec![1.0, 2.0, 3.0];
    memory.arrays[id("alpha")] = vec![2.0];
    interp::run(&p, &mut memory).unwrap();
    // y[0] = 2·1·1, y[1] = 2·(4·1 + 5·2), y[2] = 2·(7·1 + 8·2 + 9·3)
    assert_eq!(memory.arrays[id("y")], [2.0, 28.0, 100.0]);
}

#[test]
fn interpreter_runs_gemm_as_c_computes_it() {
    use polyhedral::interp;
    let p = kernel("gemm.c", &with_defines(&["MINI_DATASET"]));
    let mut memory = interp::random_inputs(&p, 7);
    let start = memory.clone();
    interp::run(&p, &mut memory).unwrap();
    let get = |m: &interp::Memory, n: &str| m.array(p.array_by_name(n).unwrap()).to_vec();
    let (ni, nj, nk) = (20, 25, 30);
    let (a, b) = (get(&start, "A"), get(&start, "B"));
    let (alpha, beta) = (get(&start, "alpha")[0], get(&start, "beta")[0]);
    let mut c = get(&start, "C");
    for i in 0..ni {
        for j in 0..nj {
            c[i * nj + j] *= beta;
        }
        for k in 0..nk {
            for j in 0..nj {
                c[i * nj + j] += alpha * a[i * nk + k] * b[k * nj + j];
            }
        }
    }
    assert_eq!(get(&memory, "C"), c);
}

// ---------------------------------------------------------------- PolyBench corners

#[test]
fn chained_assignment_stores_innermost_first() {
    let text = lower("for (i = 0; i < N; i++)\n  t = x[i] = alpha * 2.0;");
    assert!(text.contains("S0: x[i] = alpha[] * 2.0"), "{text}");
    assert!(text.contains("S1: t[] = x[i]"), "{text}");
    assert!(text.contains("schedule: [0, i, 0]"), "{text}");
    assert!(text.contains("schedule: [0, i, 1]"), "{text}");
    // A compound inner assignment: the outer target gets the updated value.
    let text = lower("t = x[0] += alpha;");
    assert!(text.contains("S0: x[0] = x[0] + alpha[]"), "{text}");
    assert!(text.contains("S1: t[] = x[0]"), "{text}");
}

#[test]
fn chained_assignment_runs_as_c_computes_it() {
    use polyhedral::interp;
    // An int target in the middle truncates, as C's conversions do.
    let src = "#define N 4\n\
               void kernel_c(double a[N], double b[N], double s) {\n\
               int i; int k;\n#pragma scop\n\
               for (i = 0; i < N; i++)\n  b[i] = k = a[i] * s;\n\
               #pragma endscop\n}\n";
    let p = parse(src).unwrap();
    p.verify().unwrap();
    let mut memory = interp::random_inputs(&p, 1);
    let id = |n: &str| p.array_by_name(n).unwrap().index();
    memory.arrays[id("a")] = vec![1.5, -2.5, 3.25, 0.75];
    memory.arrays[id("s")] = vec![2.0];
    interp::run(&p, &mut memory).unwrap();
    assert_eq!(memory.arrays[id("b")], [3.0, -5.0, 6.0, 1.0]);
}

#[test]
fn file_scope_typedefs_name_kernel_types() {
    let src = "#define N 8\n\
               typedef char nucleotide;\ntypedef nucleotide base;\n\
               typedef struct { int x; } ignored;\n\
               void kernel_t(int n, base seq[N], int score[N][N]) {\n\
               int i, j;\n#pragma scop\n\
               for (i = 0; i < N; i++)\n  for (j = 0; j < N; j++)\n\
                   score[i][j] = seq[i] + seq[j] == 3 ? 1 : 0;\n\
               #pragma endscop\n}\n";
    let p = parse(src).unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    let text = p.to_string();
    assert!(text.contains("seq: i32[N] input"), "{text}");
    assert!(text.contains("score: i32[N, N] output"), "{text}");
    assert!(
        text.contains("select(seq[i] + seq[j] == 3, 1, 0)"),
        "{text}"
    );
}

#[test]
fn error_store_to_char_data() {
    let src = "#define N 8\ntypedef char base;\n\
               void kernel_t(base seq[N]) {\n\
               int i;\n#pragma scop\n\
               for (i = 0; i < N; i++)\n  seq[i] = 300;\n\
               #pragma endscop\n}\n";
    let (m, line, col) = error(src);
    assert_eq!(m, "store to `char` data `seq` is not supported");
    assert_eq!((line, col), (7, 3));
    let (m, _, _) = error("void kernel_t(short h) {\n#pragma scop\nh = 1;\n#pragma endscop\n}\n");
    assert_eq!(m, "store to `short` data `h` is not supported");
}

#[test]
fn initializers_of_used_locals_run_before_the_scop() {
    let src = "#define N 6\n\
               void kernel_t(double x[N], double y[N]) {\n\
               int i;\n  double eps = 0.5, unused = 1.0 / 0.0;\n  double fn = (double)N;\n\
               #pragma scop\n\
               for (i = 0; i < N; i++)\n  y[i] = x[i] <= eps ? fn : x[i];\n\
               #pragma endscop\n}\n";
    let p = parse(src).unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    let text = p.to_string();
    assert!(text.contains("S0: eps[] = 0.5"), "{text}");
    assert!(text.contains("S1: fn[] = f64(N)"), "{text}");
    assert!(text.contains("schedule: [0]"), "{text}");
    assert!(text.contains("schedule: [1]"), "{text}");
    assert!(text.contains("S2: y[i] = "), "{text}");
    assert!(!text.contains("unused"), "{text}");
    let mut memory = polyhedral::interp::random_inputs(&p, 1);
    let id = |n: &str| p.array_by_name(n).unwrap().index();
    memory.arrays[id("x")] = vec![0.25, 0.75, -1.0, 0.5, 2.0, 0.51];
    polyhedral::interp::run(&p, &mut memory).unwrap();
    assert_eq!(memory.arrays[id("y")], [6.0, 0.75, 6.0, 6.0, 2.0, 0.51]);
}

#[test]
fn error_unsupported_initializer_of_a_used_local() {
    let src = "#define N 4\n\
               void kernel_t(double x[N]) {\n\
               int i;\n  double w[N] = {0};\n\
               #pragma scop\n\
               for (i = 0; i < N; i++)\n  x[i] = w[i];\n\
               #pragma endscop\n}\n";
    let (m, line, col) = error(src);
    assert_eq!(m, "initializer of `w` is not supported");
    assert_eq!((line, col), (4, 17));
    // The same initializer is harmless when the SCoP does not use the local.
    let src = src.replace("x[i] = w[i]", "x[i] = 1.0");
    parse(&src).unwrap_or_else(|e| panic!("{}", e.render(false)));
}

// ---------------------------------------------------------------- int sizes

/// `int` scalars that bound the SCoP's loops and that it never writes are sizes: a local
/// takes its initializer's value, `--size` overrides it, and a parameter needs `--size`.
#[test]
fn int_locals_and_parameters_that_bound_loops_are_sizes() {
    let local = "void k(double A[1000], double B[1000]) {\n\
                 int n = 1000, steps = 2 * 5;\nint i, t;\n#pragma scop\n\
                 for (t = 0; t < steps; t++)\n\
                 for (i = 1; i < n - 1; i++) B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0;\n\
                 #pragma endscop\n}\n";
    let p = parse(local).unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    let sizes: Vec<(&str, i64)> = p
        .params
        .iter()
        .map(|q| (q.name.as_str(), q.value))
        .collect();
    assert_eq!(sizes, vec![("steps", 10), ("n", 1000)]);
    assert_eq!(p.arrays.len(), 2, "{p}");
    let options = Options {
        sizes: vec![("n".into(), 500)],
        ..Options::default()
    };
    let p = parse_scop(&SourceFile::new("test.c", local), &options).unwrap();
    assert_eq!(p.params[1].value, 500);
    // A parameter has no value of its own.
    let param = "void k(int n, double A[100]) {\nint i;\n#pragma scop\n\
                 for (i = 0; i < n; i++) A[i] = A[i] * 2.0;\n#pragma endscop\n}\n";
    let (message, line, col) = error(param);
    assert_eq!(
        (message.as_str(), line, col),
        ("the size `n` has no value", 1, 12)
    );
    let options = Options {
        sizes: vec![("n".into(), 100)],
        ..Options::default()
    };
    let p = parse_scop(&SourceFile::new("test.c", param), &options).unwrap();
    assert_eq!(p.params[0].value, 100);
    // An int the SCoP writes, or reads only as data, stays data.
    let data = "void k(double A[10], int c) {\nint i;\n#pragma scop\n\
                for (i = 0; i < 10; i++) A[i] = A[i] * c;\n#pragma endscop\n}\n";
    let p = parse(data).unwrap();
    assert!(p.params.is_empty());
    assert_eq!(p.arrays.len(), 2);
    let written = "void k(double A[10]) {\nint i, m = 3;\n#pragma scop\n\
                   for (i = 0; i < 10; i++) { m = i; A[m] = 1.0; }\n#pragma endscop\n}\n";
    assert!(parse(written).is_err());
}

// ---------------------------------------------------------------- file scope

/// Variables at file scope are the kernel's data, as parameters are; a SCoP outside any
/// function is a fragment named after its file; what file scope holds besides declarations
/// polyfuse reads (prototypes, function bodies, structs) is skipped.
#[test]
fn file_scope_variables_and_fragments() {
    let src = "struct point { int x, y; };\nextern void log_it(const char *what);\n\
               static int helper(int a) { return a + 1; }\n\
               double A[20][20], s;\nint n = 20;\n\
               void k(double s) {\nint i, j;\n#pragma scop\n\
               for (i = 0; i < n; i++) for (j = 0; j < n; j++) A[i][j] = A[i][j] * s;\n\
               #pragma endscop\n}\n";
    let p = parse(src).unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    assert_eq!(p.name, "k");
    let arrays: Vec<(&str, ArrayRole)> =
        p.arrays.iter().map(|a| (a.name.as_str(), a.role)).collect();
    // The parameter `s` shadows the global one.
    assert_eq!(
        arrays,
        vec![("A", ArrayRole::InOut), ("s", ArrayRole::Input)]
    );
    assert_eq!(p.params[0].name, "n");
    let fragment = "double a[8], b[8];\nint i;\n#pragma scop\nfor (i = 0; i < 8; i++) b[i] = a[i] + 1.0;\n#pragma endscop\n";
    let p = parse_scop(
        &SourceFile::new("dir/my-loop.c", fragment),
        &Options::default(),
    )
    .unwrap();
    p.verify().unwrap();
    assert_eq!(p.name, "my_loop");
    assert_eq!(p.arrays.len(), 2);
    let undeclared = "int i;\n#pragma scop\nfor (i = 0; i < 8; i++) b[i] = 1.0;\n#pragma endscop\n";
    let p = parse(undeclared).unwrap();
    assert_eq!(p.arrays[0].name, "b");
    assert_eq!(p.arrays[0].role, ArrayRole::Output);
}

/// Fixed-width and size types: signed ones are int data, unsigned ones sizes and iterators
/// only (their arithmetic wraps as int's does not).
#[test]
fn fixed_width_and_unsigned_types() {
    let ok = "#include <stdint.h>\n#include <stddef.h>\n\
              void k(size_t n, int32_t X[16], int32_t Y[16]) {\nuint32_t i;\n#pragma scop\n\
              for (i = 0; i < n; i++) Y[i] = X[i] * 2;\n#pragma endscop\n}\n";
    let options = Options {
        sizes: vec![("n".into(), 16)],
        ..Options::default()
    };
    let p = parse_scop(&SourceFile::new("test.c", ok), &options)
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    assert_eq!(p.params[0].name, "n");
    assert_eq!(p.arrays.len(), 2);
    let data = "void k(unsigned int U[16], double A[16]) {\nint i;\n#pragma scop\n\
                for (i = 0; i < 16; i++) A[i] = U[i];\n#pragma endscop\n}\n";
    let (message, line, col) = error(data);
    assert_eq!(
        (message.as_str(), line, col),
        ("`unsigned` data `U` is not supported yet", 1, 21)
    );
}

/// A variable declared inside the SCoP is a temporary of the kernel; its initializer runs
/// where the declaration is, and blocks may declare one name again with the same type.
#[test]
fn declarations_inside_the_scop() {
    let text = lower(
        "for (i = 0; i < N; i++) {\n\
         double s = 0.0;\n\
         for (j = 0; j < N; j++) s += A[i][j];\n\
         x[i] = s;\n\
         }\n\
         for (i = 0; i < N; i++) { double s = x[i] * 2.0; int c; B[i][0] = s; }",
    );
    assert!(text.contains("s: f64 temporary"), "{text}");
    assert!(text.contains("s[] = 0.0"), "{text}");
    assert!(text.contains("s[] = x[i] * 2.0"), "{text}");
    let (message, line, col) = body_error(
        "for (i = 0; i < N; i++) { double s = 0.0; x[i] = s; }\n\
         for (i = 0; i < N; i++) { float s = 1.0f; x[i] = s; }",
    );
    assert_eq!(
        (message.as_str(), line, col),
        ("`s` is declared again inside the SCoP", 2, 33)
    );
    let (message, ..) = body_error("for (i = 0; i < N; i++) { double t = 0.0; x[i] = t; }");
    assert_eq!(message, "`t` is declared again inside the SCoP");
    let (message, ..) = body_error("for (i = 0; i < N; i++) { double v[2] = {0}; x[i] = 1.0; }");
    assert!(message.starts_with("initializer of"), "{message}");
}

/// A loop with a constant stride runs a fresh iterator from 0, C's iterator being the start
/// plus the stride times it, counting up or down; a strided loop starting at a max, or a step
/// that is not a constant, is refused.
#[test]
fn strided_loops() {
    let text = lower("for (i = 1; i < N; i += 3) x[i] = 1.0;\nfor (i = N - 1; i >= 0; i -= 2) x[i] = x[i] * 2.0;");
    assert!(text.contains("x[3i + 1] = 1.0"), "{text}");
    assert!(text.contains("{ S0[i] : i >= 0 and 3i < N - 1 }"), "{text}");
    assert!(text.contains("x[-2i + N - 1]"), "{text}");
    assert!(text.contains("{ S1[i] : i >= 0 and 2i < N }"), "{text}");
    let (message, ..) = body_error("for (i = max(0, 1); i < N; i += 2) x[i] = 1.0;");
    assert_eq!(
        message,
        "a loop with a stride other than 1 must start at an affine value"
    );
    let (message, ..) = body_error("for (i = 0; i < N; i += M - 6) x[i] = 1.0;");
    assert_eq!(
        message,
        "a loop step that is not a constant is not supported"
    );
}

/// An access that leaves its array at the given sizes is a located error, with the point of
/// the domain where it does, as for the kernel language.
#[test]
fn accesses_past_the_extents_are_located() {
    let (message, line, col) = body_error("for (i = 0; i < N; i++) x[i] = x[i + 1];");
    assert_eq!(
        (message.as_str(), line, col),
        (
            "out-of-bounds access: `x` reads index 10 of dimension 0 (past the extent 10) at i = 9",
            1,
            32
        )
    );
    let (message, ..) = body_error("for (i = 0; i < N; i++) A[i][i - 1] = 0.0;");
    assert!(message.contains("(below 0) at i = 0"), "{message}");
}

// ---------------------------------------------------------------- quasi-affine SCoPs

fn parse_with(src: &str, options: &Options) -> Result<(Program, Vec<String>), Error> {
    super::parse_scop_with_notes(&SourceFile::new("test.c", src), options)
}

/// `%` and `/` by constants in subscripts are division variables of the statement, and the
/// dependences they give are exact: in a ping-pong stencil a value flows to the next
/// iteration only, and a row is overwritten two iterations later.
#[test]
fn quasi_affine_subscripts_are_division_variables() {
    let src = "#define N 20\n#define T 6\ndouble A[2][N];\nvoid k() {\nint t, i;\n#pragma scop\n\
               for (t = 0; t < T; t++)\n  for (i = 1; i < N - 1; i++)\n\
               A[(t + 1) % 2][i] = 0.33 * (A[t % 2][i - 1] + A[t % 2][i] + A[t % 2][i + 1]);\n\
               #pragma endscop\n}\n";
    let p = parse(src).unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    let text = p.to_string();
    assert!(
        text.contains("write: [N, T] -> { S0[t, i] -> A[(t + 1) mod 2, i] }"),
        "{text}"
    );
    assert!(text.contains("A[(t) mod 2, i - 1]"), "{text}");
    assert_eq!(p.statements[0].divs.len(), 2);
    let deps = polyhedral::deps::compute_dependences(&p).unwrap();
    let flows: Vec<Vec<(Option<i64>, Option<i64>)>> = deps
        .dataflow
        .iter()
        .map(|d| d.distance.iter().map(|r| (r.min, r.max)).collect())
        .collect();
    assert_eq!(flows.len(), 3);
    assert!(
        flows.iter().all(|d| d[0] == (Some(1), Some(1))),
        "{flows:?}"
    );
    // The interpreter runs it as C does.
    use polyhedral::interp;
    let mut memory = interp::random_inputs(&p, 3);
    let start = memory.clone();
    interp::run(&p, &mut memory).unwrap();
    let mut a = start.arrays[0].clone();
    for t in 0..6 {
        let (from, to) = ((t % 2) * 20, ((t + 1) % 2) * 20);
        for i in 1..19 {
            a[to + i] = 0.33 * (a[from + i - 1] + a[from + i] + a[from + i + 1]);
        }
    }
    assert_eq!(memory.arrays[0], a);
    // So does the tree-walking oracle.
    let mut walked = start.clone();
    interp::run_tree_walker(&p, &mut walked).unwrap();
    assert_eq!(walked.arrays[0], a);
}

/// A bound with a division of coefficient one is an affine constraint: `j <= i / 2` is
/// `2j <= i`; `floord` and `ceild` (a file's own definitions of them too) are the floor and
/// the ceiling; a dividend that is never positive truncates up.
#[test]
fn divisions_in_bounds_are_exact_constraints() {
    let text = lower("for (i = 0; i < N; i++)\n for (j = 0; j <= i / 2; j++)\n  A[i][j] = 0.0;");
    assert!(
        text.contains("{ S0[i, j] : 0 <= i < N and j >= 0 and 2j <= i }"),
        "{text}"
    );
    let text = lower(
        "for (i = ceild(N, 4); i <= floord(3 * N - 1, 4); i++)\n x[i] = 0.0;\n\
         for (i = 0; i < N; i++)\n x[i / 3] = x[(N - 1 - i) % 4];\n\
         for (i = 0; i < N; i++)\n x[N - 1 + (-i) / 4] = 1.0;",
    );
    assert!(text.contains("{ S0[i] : N <= 4i < 3N }"), "{text}");
    assert!(
        text.contains("S1: x[floor((i)/3)] = x[(-i + N - 1) mod 4]"),
        "{text}"
    );
    assert!(text.contains("S2: x[N - floor((i)/4) - 1] = 1.0"), "{text}");
    let pluto = "#define floord(n,d) (((n)<0) ? -((-(n)+(d)-1)/(d)) : (n)/(d))\n";
    let src = format!(
        "{pluto}{}",
        wrap("for (i = 0; i <= floord(N - 3, 2); i++) x[2 * i] = 1.0;")
    );
    let p = parse(&src).unwrap_or_else(|e| panic!("{}", e.render(false)));
    assert_eq!(p.instances(polyhedral::program::StmtId(0)), Some(4));
    // Values: C's truncating / and %, and floord in a statement's value.
    use polyhedral::interp;
    let src = "void k(int v[6]) {\nint i;\n#pragma scop\n\
               for (i = 0; i < 6; i++) v[i] = floord(i - 3, 2) + ceild(i - 3, 2);\n\
               #pragma endscop\n}\n";
    let p = parse(src).unwrap();
    let mut memory = interp::random_inputs(&p, 1);
    interp::run(&p, &mut memory).unwrap();
    assert_eq!(memory.arrays[0], [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0]);
    // Subscripts: C truncates toward zero, for negative dividends and divisors too.
    let src = "void k(int y[4], int z[3], int w[3], int u[3]) {\nint i;\n#pragma scop\n\
               for (i = 0; i < 8; i++) y[(-i) / 4 + 3] = i;\n\
               for (i = 0; i < 6; i++) z[i / -3 + 2] = i;\n\
               for (i = 0; i < 6; i++) w[(i + 1) % 3] = i;\n\
               for (i = 0; i < 6; i++) u[(-i) % 3 + 2] = i;\n\
               #pragma endscop\n}\n";
    let p = parse(src).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let mut memory = interp::random_inputs(&p, 1);
    interp::run(&p, &mut memory).unwrap();
    let get = |n: &str| memory.array(p.array_by_name(n).unwrap()).to_vec();
    assert_eq!(get("y")[2..], [7.0, 3.0]);
    assert_eq!(get("z")[1..], [5.0, 2.0]);
    assert_eq!(get("w"), [5.0, 3.0, 4.0]);
    assert_eq!(get("u"), [5.0, 4.0, 3.0]);
}

#[test]
fn error_division_needs_a_known_sign() {
    let (m, line, col) = body_error("for (i = 0; i < N; i++)\n x[(i - 5) / 2 + 3] = 1.0;");
    assert_eq!(m, "the dividend of `/` in this subscript may be negative");
    assert_eq!((line, col), (2, 5));
    let (m, line, col) = body_error("for (i = 0; i < N; i++)\n x[(i - 5) % 2 + 1] = 1.0;");
    assert_eq!(m, "the dividend of `%` in this subscript may be negative");
    assert_eq!((line, col), (2, 5));
    let (m, _, _) = body_error("for (i = 0; i < N; i++) x[i / 0] = 1.0;");
    assert_eq!(m, "division by zero in this subscript");
    let (m, line, col) = body_error("for (i = 0; i < N; i++) x[floord(i, N)] = 1.0;");
    assert_eq!(m, "the divisor of `floord` must be a positive constant");
    assert_eq!((line, col), (1, 37));
}

#[test]
fn error_condition_needs_a_division_in_the_domain() {
    let (m, line, col) = body_error("for (i = 0; i < N; i++)\n if (i % 2 == 0) x[i] = 1.0;");
    assert_eq!(
        m,
        "this bound or condition needs a division variable in the iteration domain, which is \
         not supported yet"
    );
    assert_eq!((line, col), (2, 6));
}

/// After its loop an iterator holds the value that ended it: affine in the sizes and the outer
/// iterators, one statement per case of whether the loop ran where that changes the value.
#[test]
fn iterators_after_their_loops() {
    let text = lower("for (i = 0; i < N - 1; i++)\n x[i] = 1.0;\nx[i] = i;");
    assert!(text.contains("S1: x[N - 1] = f64(N - 1)"), "{text}");
    assert!(text.contains("S2: x[0] = f64(0)"), "{text}");
    assert!(
        text.contains("domain: [N] -> { S1[] : N - 2 >= 0 }"),
        "{text}"
    );
    // A loop that runs once at least, or whose exit equals its start where it does not.
    let text = lower("for (i = 0; i < N; i++)\n x[i] = 1.0;\nA[i - 1][0] = 2.0;");
    assert!(text.contains("S1: A[N - 1, 0] = 2.0"), "{text}");
    assert!(!text.contains("S2"), "{text}");
    let text = lower(
        "for (i = 0; i < N; i++) {\n for (j = 0; j < i; j++)\n  A[i][j] = 1.0;\n x[i] = j;\n}",
    );
    assert!(text.contains("S1: x[i] = f64(i)"), "{text}");
    assert!(!text.contains("S2"), "{text}");
    // A loop that starts from an exit value of two pieces leaves one in each.
    let text = lower(
        "for (i = 0; i < N - 1; i++) x[i] = 1.0;\n\
         for (j = i; j < N; j++) x[j] = 2.0;\nA[j - 1][0] = 3.0;",
    );
    assert!(text.contains("S3: A[N - 1, 0] = 3.0"), "{text}");
    assert!(text.contains("S4: A[N - 1, 0] = 3.0"), "{text}");
    // Strided: the first multiple of 3 from 1 not below N, N + 2 (N = 10: 1, 4, 7, 10).
    let text = lower("for (i = 1; i < N; i += 3)\n x[i - 1] = 1.0;\nA[i - 9][0] = 2.0;");
    assert!(text.contains("A[3floor((N - 2)/3) - 5, 0]"), "{text}");
    // The interpreter runs them as C does, at sizes where the loops run and where not.
    use polyhedral::interp;
    let src = "#define N 4\nvoid k(double a[N + 1], double b[N], double c[N + 3]) {\n\
               int i, j;\n#pragma scop\n\
               for (i = 0; i < N - 1; i++) a[i] = b[i];\na[i] = i;\n\
               for (j = 1; j < N; j += 3) c[j] = 0.5;\nc[j] = j;\n\
               #pragma endscop\n}\n";
    for (n, a_last, c_at) in [(4, (3, 3.0), (4, 4.0)), (1, (0, 0.0), (1, 1.0))] {
        let options = Options {
            sizes: vec![("N".into(), n)],
            ..Options::default()
        };
        let p = parse_scop(&SourceFile::new("test.c", src), &options).unwrap();
        let mut memory = interp::random_inputs(&p, 1);
        interp::run(&p, &mut memory).unwrap();
        let get = |n: &str| memory.array(p.array_by_name(n).unwrap()).to_vec();
        assert_eq!(get("a")[a_last.0], a_last.1, "N = {n}");
        assert_eq!(get("c")[c_at.0], c_at.1, "N = {n}");
    }
}

#[test]
fn error_iterator_after_its_loop_without_an_affine_value() {
    let (m, line, col) = body_error("x[i] = 1.0;\nfor (i = 0; i < N; i++) x[i] = 2.0;");
    assert_eq!(m, "`i` is used outside a loop over it");
    assert_eq!((line, col), (1, 3));
    let (m, line, col) = body_error("for (i = 0; i < min(N, M); i++) x[i] = 2.0;\nx[i - 1] = 1.0;");
    assert_eq!(
        m,
        "the value of `i` after its loop is not affine: its bound is a min of several"
    );
    assert_eq!((line, col), (2, 3));
    // Inside an `if`, the loop may not have run at all: no value after the `if`.
    let (m, ..) = body_error("if (N > 3) for (i = 0; i < N; i++) x[i] = 2.0;\nx[i - 1] = 1.0;");
    assert_eq!(m, "`i` is used outside a loop over it");
}

/// Undeclared names: arrays and scalars of double with notes saying so, sizes where only
/// bounds read them; an undeclared array's extents come from its accesses or --extent.
#[test]
fn undeclared_names_are_the_kernels_data() {
    let src = "#pragma scop\nfor (i = 0; i < n; i++) {\n s = 0.0;\n\
               for (j = 0; j < 4; j++) s = s + alpha * C[i][j + 1];\n v[i] = s;\n}\n\
               #pragma endscop\n";
    let options = Options {
        sizes: vec![("n".into(), 6)],
        ..Options::default()
    };
    let (p, notes) = parse_with(src, &options).unwrap_or_else(|e| panic!("{}", e.render(false)));
    p.verify().unwrap();
    let names: Vec<&str> = p.arrays.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["s", "alpha", "C", "v"]);
    assert!(p.arrays.iter().all(|a| a.elem == ScalarType::F64));
    assert_eq!(p.array_extents(p.array_by_name("C").unwrap()), [6, 5]);
    assert_eq!(p.array_extents(p.array_by_name("v").unwrap()), [6]);
    assert_eq!(
        p.array(p.array_by_name("alpha").unwrap()).role,
        ArrayRole::Input
    );
    assert_eq!(
        notes,
        [
            "s: not declared, taken as a scalar of double, as clan assumes",
            "alpha: not declared, taken as a scalar of double, as clan assumes",
            "C: not declared, taken as an array of double, as clan assumes",
            "C: extents inferred from its accesses: [6, 5]",
            "v: not declared, taken as an array of double, as clan assumes",
            "v: extents inferred from its accesses: [6]",
        ]
    );
    let options = Options {
        sizes: vec![("n".into(), 6)],
        extents: vec![("C".into(), vec![8, 8])],
        ..Options::default()
    };
    let (p, notes) = parse_with(src, &options).unwrap();
    assert_eq!(p.array_extents(p.array_by_name("C").unwrap()), [8, 8]);
    assert!(
        notes.contains(&"C: extents from --extent: [8, 8]".to_string()),
        "{notes:?}"
    );
}

#[test]
fn error_undeclared_arrays() {
    let at = |src: &str, options: &Options| {
        let e = parse_with(src, options).expect_err("an error");
        assert!(e.diagnostic.hint.is_some(), "no hint: {e}");
        let (line, col) = e.line_col();
        (e.diagnostic.message, line, col)
    };
    let none = Options::default();
    let src = "#pragma scop\nfor (i = 0; i < 8; i++)\n y[i] = x[i - 1];\n#pragma endscop\n";
    assert_eq!(
        at(src, &none),
        (
            "`x` is not declared and this access reaches index -1 of dimension 0".into(),
            3,
            9
        )
    );
    let src = "#pragma scop\nfor (i = 0; i < 8; i++)\n y[i] = y[i][0];\n#pragma endscop\n";
    assert_eq!(
        at(src, &none),
        (
            "`y` is used with 2 subscripts here and 1 elsewhere".into(),
            3,
            9
        )
    );
    let src = "#pragma scop\nfor (i = 0; i < 8; i++)\n y[i] = y;\n#pragma endscop\n";
    assert_eq!(
        at(src, &none).0,
        "`y` is used both with and without subscripts"
    );
    let src = "#pragma scop\nfor (i = 0; i < 8; i++)\n y[i] = 1.0;\n#pragma endscop\n";
    let small = Options {
        extents: vec![("y".into(), vec![4])],
        ..Options::default()
    };
    assert_eq!(
        at(src, &small),
        (
            "out-of-bounds access: `y` writes index 7 of dimension 0 (past the extent 4) at i = 7"
                .into(),
            3,
            2
        )
    );
    let wrong = Options {
        extents: vec![("y".into(), vec![8, 8])],
        ..Options::default()
    };
    assert_eq!(
        at(src, &wrong).0,
        "--extent y gives 2 extents, but `y` is used with 1 subscripts"
    );
    let unknown = Options {
        extents: vec![("z".into(), vec![8])],
        ..Options::default()
    };
    assert_eq!(
        at(src, &unknown),
        (
            "--extent z: the SCoP has no undeclared array `z`".into(),
            1,
            1
        )
    );
}
