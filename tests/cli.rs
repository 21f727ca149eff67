//! The command line as a user meets it: exit statuses, located diagnostics, JSON output.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn polyfuse(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_polyfuse"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the polyfuse binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes `text` to a fresh file named `name` in a temporary folder of this test.
fn source(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("polyfuse-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_prints_domains_and_accesses() {
    let o = polyfuse(&["check", "kernels/gemm.pf", "--size", "NI=64"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("params: NI = 64, NJ = 144, NK = 160"),
        "{text}"
    );
    assert!(
        text.contains("{ S1[i, j, k] : 0 <= i < NI and 0 <= j < NJ and 0 <= k < NK }"),
        "{text}"
    );
}

#[test]
fn run_json_is_stable_and_complete() {
    let args = [
        "run",
        "kernels/gemm.pf",
        "--target",
        "interp",
        "--seed",
        "3",
        "--json",
        "--size",
        "NI=8",
        "--size",
        "NJ=9",
        "--size",
        "NK=10",
    ];
    let o = polyfuse(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["kernel"], "gemm");
    assert_eq!(doc["target"], "interp");
    assert_eq!(doc["seed"], 3);
    assert_eq!(doc["params"]["NK"], 10);
    let c = &doc["outputs"][0];
    assert_eq!(c["name"], "C");
    assert_eq!(c["type"], "f64");
    assert_eq!(c["shape"], serde_json::json!([8, 9]));
    assert_eq!(c["samples"][0]["index"], serde_json::json!([0, 0]));
    assert_eq!(c["samples"].as_array().unwrap().len(), 4);
    assert!(c["checksum"].is_f64() && c["abs_sum"].as_f64().unwrap() > 0.0);
    // Deterministic: the same command prints the same bytes.
    assert_eq!(polyfuse(&args).stdout, o.stdout);
}

#[test]
fn c_and_pf_versions_agree_through_the_cli() {
    let sizes = [
        "--size", "NI=12", "--size", "NJ=13", "--size", "NK=14", "--json",
    ];
    let pf = polyfuse(&[&["run", "kernels/gemm.pf"][..], &sizes].concat());
    let c = polyfuse(&[&["run", "kernels/gemm.c"][..], &sizes].concat());
    let a: serde_json::Value = serde_json::from_slice(&pf.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    assert_eq!(a["outputs"], b["outputs"]);
}

/// Malformed input of every kind: exit status 1, file:line:col, a caret, a hint, no panic.
#[test]
fn malformed_inputs_get_located_errors() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("lex.pf", "kernel k() -> (C: f32[4]) {\n  C(i) = 1.0 @ 2.0;\n}\n", ":2:14", "character"),
        ("syntax.pf", "kernel k() -> (C: f32[4]) {\n  C(i) = ;\n}\n", ":2:10", "expected"),
        ("unknown.pf", "kernel k() -> (C: f32[4]) {\n  C(i) = X(i);\n}\n", ":2:10", "unknown"),
        (
            "shape.pf",
            "kernel k(A: f32[4]) -> (C: f32[4, 4]) {\n  C(i) = A(i);\n}\n",
            ":2:3",
            "subscript",
        ),
        (
            "type.pf",
            "kernel k(A: f32[4]) -> (C: f32[4]) {\n  C(i) = A(i) < 1.0;\n}\n",
            ":2:10",
            "bool",
        ),
        (
            "affine.pf",
            "kernel k(A: f32[16]) -> (C: f32[4, 4]) {\n  C(i, j) = A(i * j);\n}\n",
            ":2:15",
            "affine",
        ),
        (
            "while.c",
            "void k(int n, double A[10]) {\n  int i;\n#pragma scop\n  while (i < 10) A[i] = 0;\n#pragma endscop\n}\n",
            ":4:3",
            "while",
        ),
        (
            "subscript.c",
            "void k(double A[10], double B[10]) {\n  int i;\n#pragma scop\n  for (i = 0; i < 10; i++)\n    A[i * i] = B[i];\n#pragma endscop\n}\n",
            ":5:7",
            "affine",
        ),
        ("noscop.c", "int main(void) { return 0; }\n", ":1:1", "scop"),
    ];
    for (name, text, location, word) in cases {
        let path = source(name, text);
        let o = polyfuse(&["check", path.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(&format!("{name}{location}")), "{name}: {err}");
        assert!(err.contains('^'), "{name}: {err}");
        assert!(err.contains("hint:"), "{name}: {err}");
        assert!(
            err.to_lowercase().contains(word),
            "{name}: expected `{word}` in {err}"
        );
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

#[test]
fn unreadable_and_unknown_files_exit_1() {
    let o = polyfuse(&["check", "no/such/kernel.pf"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read no/such/kernel.pf"));
    let path = source("kernel.txt", "kernel");
    let o = polyfuse(&["run", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown kind of file"));
}

#[test]
fn bad_sizes_are_reported() {
    let o = polyfuse(&["check", "kernels/gemm.pf", "--size", "Q=4"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains('Q'), "{}", stderr(&o));
    let o = polyfuse(&["check", "kernels/gemm.pf", "--size", "NI=x"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("must be an integer"), "{}", stderr(&o));
}

#[test]
fn c_kernels_read_datasets_and_includes() {
    let o = polyfuse(&["check", "kernels/gemm.c", "-D", "MINI_DATASET"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("params: NI = 20, NJ = 25, NK = 30"),
        "{}",
        stdout(&o)
    );
    let o = polyfuse(&["check", "kernels/gemm.c"]);
    assert!(
        stdout(&o).contains("NI = 1000"),
        "PolyBench's default is LARGE"
    );
    let copy = source(
        "gemm_copy.c",
        &std::fs::read_to_string("kernels/gemm.c").unwrap(),
    );
    let o = polyfuse(&["check", copy.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "gemm.h is not next to the copy");
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let o = polyfuse(&[
        "check",
        copy.to_str().unwrap(),
        "-I",
        kernels.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn compile_writes_a_kernel_function_for_pf_input() {
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--target", "cpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("int gemm("), "{text}");
    assert!(text.contains("#pragma omp parallel for"), "{text}");
    assert!(text.contains("#pragma omp simd"), "{text}");
    let threads = polyfuse(&["compile", "kernels/gemm.pf", "--threads", "3"]);
    assert!(stdout(&threads).contains("num_threads(3)"));
}

#[test]
fn compile_replaces_the_scop_of_c_input() {
    let out = source("gemm.opt.c", "");
    let o = polyfuse(&[
        "compile",
        "kernels/gemm.c",
        "--target",
        "cpu",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains("#pragma scop"), "{text}");
    assert!(text.contains("optimized by polyfuse"), "{text}");
    // The rest of the file is untouched.
    assert!(text.contains("static void init_array("), "{text}");
    assert!(text.contains("int main(int argc, char** argv)"), "{text}");
}

#[test]
fn compile_emits_every_stage() {
    let tree = polyfuse(&["compile", "kernels/gemm.pf", "--emit", "tree"]);
    assert!(stdout(&tree).contains("permutable: 1"), "{}", stdout(&tree));
    let ast = polyfuse(&["compile", "kernels/gemm.pf", "--emit", "ast", "--no-tile"]);
    assert!(stdout(&ast).contains("for "), "{}", stdout(&ast));
    let deps = polyfuse(&["compile", "kernels/gemm.pf", "--emit", "deps"]);
    assert!(stdout(&deps).contains("flow"), "{}", stdout(&deps));
    // The dependences of a program whose arrays the pipeline expanded name the expanded arrays.
    let deps = polyfuse(&["compile", "kernels/doitgen.c", "--emit", "deps"]);
    assert!(deps.status.success(), "{}", stderr(&deps));
    assert!(stdout(&deps).contains("on sum_x"), "{}", stdout(&deps));
    // And the program they are for: the expanded array, and its copy-out statement.
    let program = polyfuse(&["compile", "kernels/doitgen.c", "--emit", "program"]);
    assert!(program.status.success(), "{}", stderr(&program));
    let text = stdout(&program);
    assert!(text.contains("sum_x: f64[NR, NP] temporary"), "{text}");
    assert!(text.contains("  S3: "), "{text}");
    for fuse in ["nofuse", "smartfuse", "maxfuse"] {
        let o = polyfuse(&[
            "compile",
            "kernels/2mm.pf",
            "--fuse",
            fuse,
            "--emit",
            "tree",
        ]);
        assert!(o.status.success(), "{fuse}: {}", stderr(&o));
    }
}

/// An LU factorisation with a scalar accumulator, used by two loop nests (as in PolyBench's
/// `ludcmp`).
const SCALAR_TEMPORARY: &str = "#define N 23
void lu_with_a_scalar(double A[N][N], double b[N], double y[N])
{
  int i, j, k;
  double w;
#pragma scop
  for (i = 0; i < N; i++) {
    for (j = 0; j < i; j++) {
      w = A[i][j];
      for (k = 0; k < j; k++)
        w -= A[i][k] * A[k][j];
      A[i][j] = w / (A[j][j] + 3.0);
    }
    for (j = i; j < N; j++) {
      w = A[i][j];
      for (k = 0; k < i; k++)
        w -= A[i][k] * A[k][j];
      A[i][j] = w;
    }
  }
  for (i = 0; i < N; i++) {
    w = b[i];
    for (j = 0; j < i; j++)
      w -= A[i][j] * y[j];
    y[i] = w;
  }
#pragma endscop
}
";

#[test]
fn scalar_temporaries_are_expanded_per_loop_nest() {
    let file = source("lu_with_a_scalar.c", SCALAR_TEMPORARY);
    let file = file.to_str().unwrap();
    let program = polyfuse(&["compile", file, "--emit", "program"]);
    assert!(program.status.success(), "{}", stderr(&program));
    let text = stdout(&program);
    // The factorisation's copy spans the two `j` loops (`j < i` and `j >= i`); the forward
    // substitution gets its own.
    assert!(text.contains("w_x: f64[N, N] temporary"), "{text}");
    assert!(text.contains("w_x_2: f64[N] temporary"), "{text}");
    assert!(
        text.contains("S1: w_x[i, j] = w_x[i, j] - A[i, k] * A[k, j]"),
        "{text}"
    );
    // No anti or output dependence on the scalar is left.
    let deps = polyfuse(&["compile", file, "--emit", "deps"]);
    assert!(deps.status.success(), "{}", stderr(&deps));
    assert!(!stdout(&deps).contains(" on w,"), "{}", stdout(&deps));
    for target in ["cpu", "gpu"] {
        let o = polyfuse(&["run", file, "--target", target, "--gpu-f32"]);
        if target == "gpu" && !o.status.success() && stderr(&o).contains("no GPU adapter") {
            continue;
        }
        assert!(o.status.success(), "{target}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("result: matches the interpreter"),
            "{target}: {}",
            stdout(&o)
        );
    }
}

#[test]
fn compile_emits_the_cache_model() {
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--emit", "cache-model"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("caches: L1d 32 KiB 8-way 64-byte lines"),
        "{text}"
    );
    // The model's best saves less than 15% on the capacity rule's tiles (their `i` tile rounded
    // down to whole 6x8 register tiles, their `k` tile raised to the 128 iterations a register
    // tile's reduction loop gets): they stay, and the model's best is shown beside them.
    assert!(
        text.contains("tiles 30 x 128 x 128, the capacity rule's"),
        "{text}"
    );
    assert!(text.contains("(the model's best)"), "{text}");
    // C, A and B (128 × 144, 128 × 160 and 160 × 144 doubles, 16-byte aligned) span 2304.75,
    // 2560.75 and 2880.75 lines on average: every one is touched, and the 32 MiB L3 keeps them.
    assert!(text.contains("lines touched: 7746\n"), "{text}");
    let misses = |level: &str| -> f64 {
        let after = text
            .split("predicted misses of the kernel:")
            .nth(1)
            .unwrap();
        let row = after
            .lines()
            .find(|l| l.trim_start().starts_with(level))
            .unwrap_or_else(|| panic!("no {level} row: {text}"));
        row.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(misses("L3"), 7746.0, "{text}");
    assert!(
        misses("L1d") >= misses("L2") && misses("L2") >= misses("L3"),
        "{text}"
    );
    // Where it saves more, the model's choice is taken, and the runner-up shown beside it.
    let chosen = polyfuse(&["compile", "kernels/covariance.c", "--emit", "cache-model"]);
    assert!(chosen.status.success(), "{}", stderr(&chosen));
    assert!(
        stdout(&chosen).contains("chosen by the cache model"),
        "{}",
        stdout(&chosen)
    );
    assert!(
        stdout(&chosen).contains("(runner-up)"),
        "{}",
        stdout(&chosen)
    );
    // Given tile sizes are reported as such, next to the model's choice.
    let given = polyfuse(&[
        "compile",
        "kernels/gemm.pf",
        "--emit",
        "cache-model",
        "--tile",
        "4,4,4",
    ]);
    assert!(given.status.success(), "{}", stderr(&given));
    assert!(
        stdout(&given).contains("tiles 4 x 4 x 4, given"),
        "{}",
        stdout(&given)
    );
    assert!(
        stdout(&given).contains("(model's choice)"),
        "{}",
        stdout(&given)
    );
    // What the model does not cover, or a target without caches, is one line and status 1.
    for (args, message) in [
        (
            &["kernels/jacobi-2d.c", "--emit", "cache-model"][..],
            "not supported yet by the cache model: the skewed loop",
        ),
        (
            &[
                "kernels/gemm_f16.pf",
                "--target",
                "npu",
                "--emit",
                "cache-model",
            ][..],
            "describes no cache",
        ),
    ] {
        let o = polyfuse(&[&["compile"][..], args].concat());
        assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
        assert!(stderr(&o).contains(message), "{}", stderr(&o));
        assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
    }
}

#[test]
fn compile_emits_the_tree_after_a_stage() {
    let after = |stage: &str| {
        polyfuse(&[
            "compile",
            "kernels/gemm.pf",
            "--emit",
            &format!("tree=after:{stage}"),
        ])
    };
    let scheduled = after("schedule");
    assert!(scheduled.status.success(), "{}", stderr(&scheduled));
    let tiled = after("tile");
    assert!(tiled.status.success(), "{}", stderr(&tiled));
    // Tiling adds the floor divisions of the tile band.
    assert!(
        !stdout(&scheduled).contains("floor("),
        "{}",
        stdout(&scheduled)
    );
    assert!(stdout(&tiled).contains("floor("), "{}", stdout(&tiled));
    let last = after("register-tile");
    let full = polyfuse(&["compile", "kernels/gemm.pf", "--emit", "tree"]);
    assert_eq!(stdout(&last), stdout(&full));
    // The register-tile pass adds its mark above gemm's point band.
    assert!(!stdout(&after("intra-tile")).contains("register tile"));
    assert!(
        stdout(&last).contains("register tile 6x8"),
        "{}",
        stdout(&last)
    );
    let o = after("nothing");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("schedule, tile, intra-tile"),
        "{}",
        stderr(&o)
    );
    let o = polyfuse(&[
        "compile",
        "kernels/gemm.pf",
        "--emit",
        "tree=after:tile",
        "--no-tile",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("did not run"), "{}", stderr(&o));
}

#[test]
fn targets_come_from_the_table() {
    let help = polyfuse(&["run", "--help"]);
    let text = stdout(&help);
    assert!(
        text.contains("interp") && text.contains("cpu") && text.contains("all"),
        "{text}"
    );
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--target", "interp"]);
    assert!(!o.status.success());
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--emit", "wgsl"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("it writes c,"), "{}", stderr(&o));
}

#[test]
fn bad_optimizer_options_are_reported() {
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--tile", "32,32"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("tile sizes"), "{}", stderr(&o));
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--tile", "0,4,4"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("positive integers"), "{}", stderr(&o));
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--tile", "4,x,4"]);
    assert!(!o.status.success());
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--fuse", "somefuse"]);
    assert!(!o.status.success());
    let o = polyfuse(&["compile", "kernels/gemm.pf", "--tile", "4,4,4", "--no-tile"]);
    assert!(!o.status.success());
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

#[test]
fn run_on_the_cpu_matches_the_interpreter() {
    let sizes = ["--size", "NI=20", "--size", "NJ=21", "--size", "NK=22"];
    let o = polyfuse(
        &[
            &["run", "kernels/gemm.pf", "--target", "cpu", "--json"][..],
            &sizes,
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["target"], "cpu");
    assert_eq!(doc["matches_interp"], true);
    assert_eq!(doc["outputs"][0]["mismatches"], 0);
    assert!(doc["kernel_seconds"].as_f64().unwrap() >= 0.0);
    // The CPU's checksums are the interpreter's.
    let interp = polyfuse(&[&["run", "kernels/gemm.pf", "--json"][..], &sizes].concat());
    let reference: serde_json::Value = serde_json::from_slice(&interp.stdout).unwrap();
    assert_eq!(
        doc["outputs"][0]["checksum"],
        reference["outputs"][0]["checksum"]
    );
    let all = polyfuse(&[&["run", "kernels/gemm.pf", "--target", "all"][..], &sizes].concat());
    assert!(all.status.success(), "{}", stderr(&all));
    let text = stdout(&all);
    assert!(
        text.contains("on interp") && text.contains("on cpu"),
        "{text}"
    );
}

/// Every subcommand that prints, run with its standard output a pipe nobody reads: the process
/// ends by `SIGPIPE` (or successfully, where it wrote nothing), never with a panic.
#[cfg(unix)]
#[test]
fn closed_stdout_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let runs: &[&[&str]] = &[
        &["check", "kernels/gemm.pf"],
        &["check", "kernels/gemm.pf", "--emit", "deps"],
        &["check", "kernels/gemm.pf", "--emit", "tree"],
        &["check", "kernels/gemm.pf", "--emit", "ast"],
        &["compile", "kernels/gemm.pf"],
        &["run", "kernels/gemm.pf", "--size", "NI=16"],
        &["run", "kernels/gemm.pf", "--size", "NI=16", "--json"],
        &["--help"],
    ];
    for args in runs {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_polyfuse"))
            .args(*args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("the polyfuse binary runs");
        let err = stderr(&out);
        assert!(err.is_empty(), "{args:?}: {err}");
        assert!(
            out.status.signal() == Some(libc_sigpipe()) || out.status.success(),
            "{args:?}: {:?}",
            out.status
        );
    }
}

/// `SIGPIPE`'s number, which POSIX fixes at 13 on every Unix polyfuse builds for.
#[cfg(unix)]
fn libc_sigpipe() -> i32 {
    13
}

/// Compiles `kernels/{name}.pf` for the accelerator at `sizes` and simulates the program; both
/// must succeed. The program's path and the simulator's output.
fn compile_npu_and_simulate(name: &str, sizes: &[&str]) -> (PathBuf, Output) {
    let asm = source(&format!("{name}.npuasm"), "");
    let kernel = format!("kernels/{name}.pf");
    let o = polyfuse(
        &[
            &["compile", kernel.as_str(), "--target", "npu", "-o"][..],
            &[asm.to_str().unwrap()],
            sizes,
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = polyfuse(&["sim", asm.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    (asm, o)
}

#[test]
fn the_accelerator_compiles_runs_and_refuses_with_one_line() {
    let sizes = ["--size", "M=40", "--size", "N=32", "--size", "K=32"];
    let (_, o) = compile_npu_and_simulate("gemm_f16", &sizes);
    assert!(stdout(&o).contains("cube:"), "{}", stdout(&o));

    let svg = source("gemm_f16.svg", "");
    let o = polyfuse(
        &[
            &[
                "run",
                "kernels/gemm_f16.pf",
                "--target",
                "npu",
                "--timeline",
            ][..],
            &[svg.to_str().unwrap()],
            &sizes,
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("result: matches the interpreter"),
        "{}",
        stdout(&o)
    );
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));

    let o = polyfuse(
        &[
            &["run", "kernels/gemm_f16.pf", "--target", "npu", "--json"][..],
            &sizes,
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(doc["matches_interp"], true);
    assert!(doc["simulator"]["cycles"].as_u64().unwrap() > 0);

    let o = polyfuse(&["run", "kernels/gemm.pf", "--target", "npu"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("not supported on npu: f64"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");

    // A group over three dimensions whose body uses an inner iterator's value, which the
    // Vector unit's lowering does not flatten to rows and columns, runs through the general
    // lowering of the middle end's AST.
    let k = source(
        "inner_iterator_value.pf",
        "kernel k<N = 3, M = 4>(A: f32[N, N]) -> (O: f32[M, N, M]) {\n\
         \x20   O(i, j, k) = f32(k) where i in 0:M, j in 0:N, k in 0:M;\n\
         \x20   T2(i, j) +=! A(k, j) where i in 0:M;\n}\n",
    );
    let o = polyfuse(&[
        "run",
        k.to_str().unwrap(),
        "--target",
        "npu",
        "--fuse",
        "nofuse",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("result: matches the interpreter"),
        "{}",
        stdout(&o)
    );
}

/// `--npu-cores N` caps the cores a kernel uses, fused or not: a value outside the machine's
/// cores is a one-line error; a capped run matches the interpreter on fewer blocks.
#[test]
fn the_accelerator_runs_on_fewer_cores_when_asked() {
    for bad in ["0", "33", "x"] {
        let err = refused_in_one_line(&[
            "run",
            "kernels/conv2d_relu.pf",
            "--target",
            "npu",
            "--npu-cores",
            bad,
        ]);
        assert!(err.contains("--npu-cores"), "{err}");
    }
    let blocks = |cores: Option<&str>, fuse: &str| {
        let mut args = vec![
            "run",
            "kernels/conv2d_relu.pf",
            "--target",
            "npu",
            "--json",
            "--fuse",
            fuse,
        ];
        if let Some(n) = cores {
            args.extend(["--npu-cores", n]);
        }
        let o = polyfuse(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        assert_eq!(doc["matches_interp"], true, "{args:?}");
        let sim = &doc["simulator"];
        (
            sim["blocks"].as_u64().unwrap(),
            sim["cores_used"].as_u64().unwrap(),
        )
    };
    for fuse in ["post-tiling", "nofuse"] {
        let (all, all_cores) = blocks(None, fuse);
        let (few, few_cores) = blocks(Some("4"), fuse);
        assert!(few < all, "{fuse}: {few} blocks on 4 cores, {all} on all");
        assert!(
            few_cores <= 4 && few_cores < all_cores,
            "{fuse}: {few_cores} cores"
        );
    }
}

#[test]
fn the_vector_unit_runs_kernels_without_a_contraction() {
    for args in [
        &[
            "run",
            "kernels/softmax.pf",
            "--target",
            "npu",
            "--size",
            "N=40",
        ][..],
        &[
            "run",
            "kernels/blur_unsharp.pf",
            "--target",
            "npu",
            "--size",
            "H=30",
        ][..],
        &[
            "run",
            "kernels/jacobi2d.pf",
            "--target",
            "npu",
            "--npu-f32",
            "--size",
            "N=30",
        ][..],
    ] {
        let o = polyfuse(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("result: matches the interpreter"),
            "{args:?}: {}",
            stdout(&o)
        );
    }
    // The simulator runs the written program on its own, sync_all included.
    let asm = source("jacobi2d.npuasm", "");
    let o = polyfuse(&[
        "compile",
        "kernels/jacobi2d.pf",
        "--target",
        "npu",
        "--npu-f32",
        "--size",
        "N=30",
        "-o",
        asm.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = polyfuse(&["sim", asm.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = polyfuse(&["run", "kernels/jacobi2d.pf", "--target", "npu"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--npu-f32"), "{}", stderr(&o));
}

#[test]
fn run_on_the_gpu_matches_the_interpreter() {
    let sizes = ["--size", "NI=20", "--size", "NJ=21", "--size", "NK=22"];
    let run = |extra: &[&str]| {
        polyfuse(
            &[
                &["run", "kernels/gemm.pf", "--target", "gpu"][..],
                &sizes,
                extra,
            ]
            .concat(),
        )
    };
    let o = run(&[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not supported on gpu: f64"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--gpu-f32", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["target"], "gpu");
    assert_eq!(doc["matches_interp"], true);
    let o = run(&["--gpu-f32", "--no-promote"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let all = polyfuse(
        &[
            &["run", "kernels/gemm.pf", "--target", "all", "--gpu-f32"][..],
            &sizes,
        ]
        .concat(),
    );
    assert!(all.status.success(), "{}", stderr(&all));
    assert!(stdout(&all).contains("on gpu"), "{}", stdout(&all));
    let wgsl = polyfuse(&[
        "compile",
        "kernels/softmax.pf",
        "--target",
        "gpu",
        "--emit",
        "wgsl",
    ]);
    assert!(wgsl.status.success(), "{}", stderr(&wgsl));
    assert!(stdout(&wgsl).contains("@compute"));
    let tree = polyfuse(&[
        "compile",
        "kernels/softmax.pf",
        "--target",
        "gpu",
        "--emit",
        "tree",
    ]);
    assert!(
        stdout(&tree).contains("mark: \"kernel\""),
        "{}",
        stdout(&tree)
    );
}

#[test]
fn post_tiling_fusion_runs_on_the_gpu() {
    let o = polyfuse(&[
        "run",
        "kernels/layernorm.pf",
        "--target",
        "gpu",
        "--fuse",
        "post-tiling",
        "--size",
        "N=40",
        "--size",
        "D=72",
    ]);
    if stderr(&o).contains("no GPU adapter") {
        eprintln!("no adapter: nothing to run");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("matches the interpreter"),
        "{}",
        stdout(&o)
    );
}

/// Runs `args` and checks the shape of a refusal: status 1, no panic, an `error:` first line.
fn refused(args: &[&str]) -> String {
    let o = polyfuse(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.starts_with("error"), "{args:?}: {err}");
    err
}

/// A refusal in one line.
fn refused_in_one_line(args: &[&str]) -> String {
    let err = refused(args);
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    err
}

/// Every kind of bad option value, and arguments the parser does not know: status 1 and one
/// line naming the option.
#[test]
fn bad_options_are_one_line_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "kernels/gemm.pf", "--seed", "abc"], "--seed"),
        (&["run", "kernels/gemm.pf", "--threads", "0"], "--threads"),
        (
            &["run", "kernels/gemm.pf", "--target", "xyz"],
            "possible values",
        ),
        (&["run", "kernels/gemm.pf", "--size", "NI=-3"], "at least 1"),
        (&["run", "kernels/gemm.pf", "--size", "NI"], "NAME=VALUE"),
        (
            &[
                "run",
                "kernels/gemm.pf",
                "--size",
                "NI=99999999999999999999",
            ],
            "integer",
        ),
        (&["check", "kernels/gemm.c", "-D", "1X"], "macro name"),
        (
            &["compile", "kernels/gemm.pf", "--fuse", "somefuse"],
            "--fuse",
        ),
        (&["compile", "kernels/gemm.pf", "--tile", "4,x,4"], "--tile"),
        // Every size is checked, also where the kernel has no band to tile.
        (&["compile", "kernels/gemm.pf", "--tile", "4,0,4"], "--tile"),
        (&["compile", "kernels/softmax.pf", "--tile", "0"], "--tile"),
        (
            &["compile", "kernels/gemm.pf", "--tile", "4,4,4", "--no-tile"],
            "--no-tile",
        ),
        (
            &["check", "kernels/gemm.pf", "--emit", "everything"],
            "--emit",
        ),
        (&["run", "kernels/gemm.pf", "--bogus"], "--bogus"),
        (&["run"], "<FILE>"),
        (&[], "command"),
        (&["frobnicate"], "frobnicate"),
        (
            &["compile", "kernels/gemm.pf", "--emit", "wgsl"],
            "--emit wgsl",
        ),
        (
            &["compile", "kernels/gemm.pf", "--emit", "tree=after:nothing"],
            "nothing",
        ),
        (
            &["compile", "kernels/gemm.pf", "--tile", "2,2"],
            "tile sizes",
        ),
        (
            &[
                "compile",
                "kernels/gemm.pf",
                "--target",
                "gpu",
                "--emit",
                "c",
            ],
            "--emit c",
        ),
        (
            &[
                "run",
                "kernels/gemm.pf",
                "--target",
                "gpu",
                "--adapter",
                "no such adapter",
            ],
            "adapter",
        ),
    ];
    for (args, word) in cases {
        let err = refused_in_one_line(args);
        assert!(err.contains(word), "{args:?}: expected `{word}` in {err}");
    }
    // Help and version are answers, not errors.
    assert!(polyfuse(&["--help"]).status.success());
    assert!(polyfuse(&["run", "--help"]).status.success());
    assert!(polyfuse(&["--version"]).status.success());
}

/// `-D` naming a size of a `.pf` kernel must give it a number; other macros are for C input.
#[test]
fn defines_of_sizes_need_numbers() {
    let err = refused(&["run", "kernels/gemm.pf", "-D", "NI=abc"]);
    assert!(
        err.contains("`-D NI=abc`") && err.contains("gemm.pf:"),
        "{err}"
    );
    let o = polyfuse(&["check", "kernels/gemm.pf", "-D", "NI=12", "-D", "OTHER=x"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("NI = 12"), "{}", stdout(&o));
}

/// Sizes so large that the interpreter could not hold the arrays: refused before anything is
/// allocated.
#[test]
fn sizes_beyond_memory_are_refused() {
    let err = refused_in_one_line(&[
        "run",
        "kernels/gemm.pf",
        "--size",
        "NI=2000000000",
        "--size",
        "NJ=2000000000",
    ]);
    assert!(err.contains("smaller `--size`"), "{err}");
    assert!(err.contains("does not fit in memory"), "{err}");
}

/// Kernels larger than what a target holds: one line that says what does not fit, where.
#[test]
fn kernels_beyond_a_targets_limits_do_not_fit() {
    // One row of 200000 f32 is more than the accelerator's unified buffer: the middle end's
    // tiles of it are what goes there.
    let wide = source(
        "wide.pf",
        "kernel wide<N = 2, M = 200000>(A: f32[N, M]) -> (B: f32[N, M]) {\n    \
         B(i, j) = A(i, j) + 1.0;\n}\n",
    );
    let o = polyfuse(&["run", wide.to_str().unwrap(), "--target", "npu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("result: matches the interpreter"),
        "{}",
        stdout(&o)
    );
    // 136 MB: more than WebGPU's 128 MiB storage buffer that lavapipe allows too; a GPU that
    // binds more runs it.
    let long = source(
        "long.pf",
        "kernel long<N = 34000000>(A: f32[N]) -> (B: f32[N]) {\n    B(i) = A(i) + 1.0;\n}\n",
    );
    let o = polyfuse(&[
        "run",
        long.to_str().unwrap(),
        "--target",
        "gpu",
        "--tile",
        "64",
    ]);
    let err = stderr(&o);
    if err.contains("no GPU adapter") || o.status.success() {
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("`A` does not fit the GPU: 136000000 bytes"),
        "{err}"
    );
}

/// Kernel files that are not kernels: missing, a folder, empty, not text, of an unknown kind.
#[test]
fn unreadable_kernel_files_are_refused() {
    let dir = source("folder.pf", "")
        .parent()
        .unwrap()
        .join("a-folder.pf");
    std::fs::create_dir_all(&dir).unwrap();
    refused_in_one_line(&["check", dir.to_str().unwrap()]);
    let empty = source("empty.pf", "");
    let err = refused(&["check", empty.to_str().unwrap()]);
    assert!(
        err.contains("empty.pf:1:1") && err.contains("no kernel"),
        "{err}"
    );
    let binary = source("binary.pf", "\u{fffd}\u{0}kernel");
    std::fs::write(&binary, [0xff, 0xfe, b'k']).unwrap();
    let err = refused(&["check", binary.to_str().unwrap()]);
    assert!(err.contains("binary.pf:1:1"), "{err}");
    let c = source("empty.c", "");
    let err = refused(&["run", c.to_str().unwrap()]);
    assert!(err.contains("empty.c:1:1"), "{err}");
}

/// Output paths that cannot be written.
#[test]
fn unwritable_outputs_are_refused() {
    let err = refused_in_one_line(&["compile", "kernels/gemm.pf", "-o", "no/such/dir/gemm.c"]);
    assert!(err.contains("no/such/dir/gemm.c"), "{err}");
    let err = refused_in_one_line(&[
        "run",
        "kernels/gemm_f16.pf",
        "--target",
        "npu",
        "--size",
        "M=16",
        "--size",
        "N=16",
        "--size",
        "K=16",
        "--timeline",
        "no/such/dir/t.svg",
    ]);
    assert!(err.contains("no/such/dir/t.svg"), "{err}");
}

/// `polyfuse sim`: programs, machine descriptions and input folders that are wrong in every way
/// get an error that says where.
#[test]
fn bad_simulator_inputs_are_refused_with_their_place() {
    let example = "sim/examples/vadd.npuasm";
    // Programs.
    let bad = source("bad.npuasm", "kernel k\nparam x : f16[16] in\nbogus 1, 2\n");
    let err = refused(&["sim", bad.to_str().unwrap()]);
    assert!(err.contains("bad.npuasm:3:1"), "{err}");
    refused_in_one_line(&["sim", "no/such/file.npuasm"]);
    refused_in_one_line(&["sim", "sim/examples"]);
    let binary = source("binary.npuasm", "");
    std::fs::write(&binary, [0xff, 0xfe]).unwrap();
    refused_in_one_line(&["sim", binary.to_str().unwrap()]);
    let huge = source(
        "huge.npuasm",
        "kernel k\nparam x : f16[4294967296, 4294967296] in\n",
    );
    let err = refused(&["sim", huge.to_str().unwrap()]);
    assert!(err.contains("huge.npuasm:2:"), "{err}");
    // Machine descriptions.
    refused_in_one_line(&["sim", example, "--machine", "no/such.machine"]);
    let machine = source("bad.machine", "cores = x\n");
    let err = refused(&["sim", example, "--machine", machine.to_str().unwrap()]);
    assert!(err.contains("bad.machine:1:"), "{err}");
    let default = std::fs::read_to_string("sim/machines/davinci910.machine").unwrap();
    let big = source(
        "big.machine",
        &default.replace("mem.UB.capacity = 262144", "mem.UB.capacity = 26265536144"),
    );
    let err = refused(&["sim", example, "--machine", big.to_str().unwrap()]);
    assert!(err.contains("big.machine:"), "{err}");
    // Input folders.
    let err = refused_in_one_line(&["sim", example, "--inputs", "no/such/folder"]);
    assert!(err.contains("no/such/folder: no such folder"), "{err}");
    let err = refused_in_one_line(&["sim", example, "--inputs", example]);
    assert!(err.contains("not a folder"), "{err}");
    let folder = source("inputs.marker", "").with_extension("d");
    std::fs::create_dir_all(&folder).unwrap();
    let folder = folder.as_path();
    std::fs::write(folder.join("x.txt"), "1 2\n3 x 5\n").unwrap();
    let err = refused_in_one_line(&["sim", example, "--inputs", folder.to_str().unwrap()]);
    assert!(err.contains("x.txt:2:3") && err.contains("`x`"), "{err}");
    std::fs::write(folder.join("x.txt"), "1 2 3").unwrap();
    let err = refused_in_one_line(&["sim", example, "--inputs", folder.to_str().unwrap()]);
    assert!(err.contains("3 numbers"), "{err}");
    std::fs::remove_file(folder.join("x.txt")).unwrap();
    std::fs::write(folder.join("x.bin"), [0u8; 7]).unwrap();
    let err = refused_in_one_line(&["sim", example, "--inputs", folder.to_str().unwrap()]);
    assert!(err.contains("7 bytes"), "{err}");
    let err = refused_in_one_line(&["sim", example, "--timeline", "no/such/dir/t.svg"]);
    assert!(err.contains("no/such/dir/t.svg"), "{err}");
}

#[test]
fn emit_vector_prints_classes_masks_and_lane_statistics() {
    let o = polyfuse(&["check", "kernels/mandelbrot.pf", "--emit", "vector"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("function escape(cr: varying, ci: uniform, limit: uniform) -> i32"),
        "{text}"
    );
    assert!(text.contains("exit when none(m1)"), "{text}");
    assert!(text.contains("lanes on random inputs (8 lanes)"), "{text}");
    let o = polyfuse(&["check", "kernels/gemm.pf", "--emit", "vector"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("no statement calls a scalar function"));
}

#[test]
fn scalar_functions_vectorised_by_default_and_scalar_on_request() {
    let o = polyfuse(&["compile", "kernels/gelu.pf", "--size", "M=20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("gelu_1_v8_v("), "{}", stdout(&o));
    let o = polyfuse(&[
        "compile",
        "kernels/gelu.pf",
        "--size",
        "M=20",
        "--no-vectorize-functions",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("pf_v8f"), "{}", stdout(&o));
    // The C compiler vectorises threshold's loop itself: the cost model keeps it scalar.
    let o = polyfuse(&["compile", "kernels/threshold.pf", "--size", "M=20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("pf_v8f"), "{}", stdout(&o));
}

/// A kernel with i32 arrays that `run --target npu` takes (a scalar function's counters on
/// the Vector unit) compiles to the program `run` simulates; i32 arithmetic elsewhere runs on
/// the scalar unit, compiled and simulated alike.
#[test]
fn the_accelerator_compiles_what_it_runs_with_i32_counters() {
    let sizes = ["--size", "N=8", "--size", "M=16"];
    compile_npu_and_simulate("collatz", &sizes);
    let o = polyfuse(
        &[
            &["run", "kernels/collatz.pf", "--target", "npu"][..],
            &sizes,
        ]
        .concat(),
    );
    assert!(
        stdout(&o).contains("result: matches the interpreter"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let inc = source(
        "inc_i32.pf",
        "kernel inc<N = 64>(a: i32[N]) -> (b: i32[N]) {\n    b(i) = a(i) + 1;\n}\n",
    );
    let o = polyfuse(&["run", inc.to_str().unwrap(), "--target", "npu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("result: matches the interpreter"),
        "{}",
        stdout(&o)
    );
    let o = polyfuse(&["compile", inc.to_str().unwrap(), "--target", "npu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("param b : i32[64] out"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn an_integer_division_by_zero_stops_the_reference_on_every_target() {
    let path = source(
        "idiv.pf",
        "kernel idiv<N = 8>(X: i32[N]) -> (Y: i32[N]) {\n    Y(i) = X(i) / 0;\n}\n",
    );
    for target in ["interp", "cpu", "gpu"] {
        let o = polyfuse(&["run", path.to_str().unwrap(), "--target", target]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{target}: {err}");
        assert!(
            err.contains("S0 divides an integer by zero"),
            "{target}: {err}"
        );
        assert!(!err.contains("compiler bug"), "{target}: {err}");
    }
}

#[test]
fn non_finite_elements_on_the_gpu_are_reported_as_unspecified() {
    // `x - x` of an infinite `x` is NaN, but WGSL lets a shader compiler fold it to zero.
    let path = source(
        "nan.pf",
        "kernel not_a_number<N = 8>(X: f32[N]) -> (Y: f32[N]) {\n    Y(i) = (X(i) / 0.0) - (X(i) / 0.0);\n}\n",
    );
    let o = polyfuse(&["run", path.to_str().unwrap(), "--target", "cpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("result: matches the interpreter\n"));
    let o = polyfuse(&["run", path.to_str().unwrap(), "--target", "gpu"]);
    if stderr(&o).contains("no GPU adapter") {
        return;
    }
    let text = stdout(&o);
    assert!(o.status.success(), "{text}{}", stderr(&o));
    if !text.contains("result: matches the interpreter\n") {
        assert!(
            text.contains("non-finite on gpu: unspecified by WGSL"),
            "{text}"
        );
        assert!(!text.contains("  ok\n"), "{text}");
    }
}

#[test]
fn a_simulation_that_runs_out_of_its_budget_exits_with_status_3() {
    let path = source(
        "spin.npuasm",
        "kernel spin\nfor i in 0..1000000000 {\n    mov s0, i\n}\n",
    );
    let file = path.to_str().unwrap();
    let o = polyfuse(&["sim", file, "--max-instructions", "1000"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stopped after 1000 instructions"),
        "{}",
        stderr(&o)
    );
    let o = polyfuse(&["sim", file, "--max-cycles", "2000"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stopped after 2000 cycles"),
        "{}",
        stderr(&o)
    );
    // The default budget ends it too.
    let o = polyfuse(&["sim", file]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

/// A kernel no dedicated lowering takes (a SwiGLU gate: two products and an element-wise gate)
/// is lowered from the middle end's AST: `--tile` changes the program, which still matches the
/// interpreter, and the loops of `--emit ast` are the program's.
#[test]
fn the_accelerator_lowers_the_middle_ends_tiles() {
    let kernel = "tests/ml/swiglu.pf";
    let sizes = ["--size", "T=40", "--size", "D=16", "--size", "F=48"];
    let compile = |extra: &[&str]| {
        let o = polyfuse(&[&["compile", kernel, "--target", "npu"][..], &sizes, extra].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let default = compile(&[]);
    let tiled = compile(&["--tile", "16,16,16"]);
    assert_ne!(default, tiled);
    let ast = compile(&["--tile", "16,16,16", "--emit", "ast"]);
    // The tile loops of the AST (`c0` over the 3 tiles of 16 of the 40 rows, `c1` over the 3
    // of the 48 columns) are the program's: their 9 tiles spread over 9 blocks.
    assert!(ast.contains("c0 <= floord(T - 1, 16)"), "{ast}");
    assert!(ast.contains("c1 <= floord(F - 1, 16)"), "{ast}");
    assert!(tiled.starts_with("kernel swiglu blockdim=9\n"), "{tiled}");
    for tile in [&[][..], &["--tile", "16,16,16"][..]] {
        let o = polyfuse(&[&["run", kernel, "--target", "npu"][..], &sizes, tile].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stdout(&o).contains("result: matches the interpreter"),
            "{}",
            stdout(&o)
        );
    }
}
