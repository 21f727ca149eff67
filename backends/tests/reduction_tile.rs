//! Reduction tiles on the CPU: rows of a parallel loop jammed into an innermost loop of
//! reductions, each row with its own accumulator, computing what the interpreter computes bit
//! for bit; and bands whose innermost loop carries more than reductions left alone.

use backends::cpu::{self, Options};
use polyhedral::passes::tile_size::TileSizes;
use polyhedral::pipeline::{self, Compiled};
use polyhedral::schedule::mark::{Mark, ReductionTileMark};
use polyhedral::schedule::NodeKind;
use polyhedral::Program;

fn parse(name: &str, text: &str, language: frontend::Language) -> Program {
    let file = frontend::SourceFile::new(name, text);
    frontend::parse(&file, language, &Default::default())
        .unwrap_or_else(|e| panic!("{name}: {}", e.render(false)))
}

fn compile(program: &Program, model: &cpu::CpuModel, tiles: &[i64]) -> Compiled {
    let options = pipeline::Options {
        tiling: TileSizes::Fixed(tiles.to_vec()),
        ..Default::default()
    };
    pipeline::compile(program, &cpu::description_for(model), &options)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The reduction-tile marks of `c`'s tree, their shapes without the reasons.
fn marks(c: &Compiled) -> Vec<ReductionTileMark> {
    let mut out = Vec::new();
    c.tree.root.walk(&mut |n| {
        if let NodeKind::Mark(Mark::ReductionTile(m)) = &n.kind {
            out.push(ReductionTileMark {
                why: String::new(),
                ..m.clone()
            });
        }
    });
    out
}

/// Checks the written kernel against the interpreter: every output exactly equal.
fn check_exact(program: &Program, c: &Compiled, options: &Options) {
    let report = cpu::check_transformed(program, &c.program, &c.ast, options, 7)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.comparison.passed(), "{}", report.to_text(program));
    for a in &report.comparison.arrays {
        assert_eq!(a.max_abs, 0.0, "{}", report.to_text(program));
    }
}

/// Two row reductions over one loop (gesummv's `tmp` and `y`): the rows loop is jammed by the
/// rows the CPU model's multiply-add latency and pipes ask for, each row of each reduction
/// held in a local of its own, the rows left over at the domain's edge (37 rows in tiles of
/// 16) run one at a time; the sums keep their order, so the outputs are bit-identical.
#[test]
fn row_reductions_run_jammed_rows_with_their_own_accumulators() {
    let program = parse(
        "k.c",
        "#define N 37\n#define M 45\n\
         void k(double A[N][M], double B[N][M], double x[M], double tmp[N], double y[N]) {\n\
           int i, j;\n#pragma scop\n\
           for (i = 0; i < N; i++) {\n\
             tmp[i] = 0.0;\n\
             y[i] = 0.0;\n\
             for (j = 0; j < M; j++) {\n\
               tmp[i] = A[i][j] * x[j] + tmp[i];\n\
               y[i] = B[i][j] * x[j] + y[i];\n\
             }\n\
           }\n\
         #pragma endscop\n}\n",
        frontend::Language::CScop,
    );
    for model in cpu::models::MODELS {
        let c = compile(&program, &model, &[16, 16]);
        let found = marks(&c);
        // Latency 4 × 2 pipes = 8 chains, two per row: 4 rows (they divide the tile of 16).
        assert_eq!(
            found,
            vec![ReductionTileMark {
                rows: 4,
                member: 0,
                loops: 2,
                tile: 16,
                why: String::new(),
            }],
            "{}",
            c.tree.display(&c.program)
        );
        for threads in [1, 2] {
            let options = Options::for_model(model).with(|o| o.threads = Some(threads));
            let code = cpu::Writer::new(&c.program, &options)
                .write(&c.ast)
                .unwrap();
            assert!(code.contains("reduction tile: 4 rows"), "{code}");
            for held in ["tmp_acc_3", "y_acc_3"] {
                assert!(code.contains(held), "{held} missing:\n{code}");
            }
            check_exact(&program, &c, &options);
        }
        // Switched off with the other register tiles.
        let off = Options::for_model(model).with(|o| o.register_tile = false);
        let code = cpu::Writer::new(&c.program, &off).write(&c.ast).unwrap();
        assert!(!code.contains("reduction tile"), "{code}");
    }
}

/// Rows that do not divide the tile: one reduction per row asks for 8 rows, and tiles of 12
/// rows take 12 (the next count that divides them within twice as many); 30 rows leave a
/// partial tile of 6, fewer than the jammed rows, which runs one row at a time. Tiles of 7 rows
/// never hold the 8 rows asked for; tiles of 16 run them 2 apart, a partial tile one at a
/// time.
#[test]
fn partial_tiles_run_their_rows_one_at_a_time() {
    let program = parse(
        "k.pf",
        "kernel k<N = 30, M = 21>(A: f32[N, M], x: f32[M]) -> (y: f32[N]) {\n\
             y(i) +=! A(i, j) * x(j);\n\
         }\n",
        frontend::Language::Kernel,
    );
    let model = cpu::models::X86_64_V3;
    let c = compile(&program, &model, &[12, 8]);
    assert_eq!(
        marks(&c),
        vec![ReductionTileMark {
            rows: 12,
            member: 0,
            loops: 2,
            tile: 12,
            why: String::new(),
        }]
    );
    let options = Options::for_model(model).with(|o| o.threads = Some(2));
    let code = cpu::Writer::new(&c.program, &options)
        .write(&c.ast)
        .unwrap();
    // Adjacent rows: the tile holds the jammed rows once; the partial tile of 6 rows runs
    // them one at a time.
    assert!(code.contains("reduction tile: 12 rows"), "{code}");
    assert!(code.contains("y_acc_11 = y[c2 + 11]"), "{code}");
    check_exact(&program, &c, &options);
    let c = compile(&program, &model, &[7, 8]);
    assert_eq!(marks(&c).first().map(|m| m.rows), Some(8));
    let code = cpu::Writer::new(&c.program, &options)
        .write(&c.ast)
        .unwrap();
    // Tiles of 7 rows never hold 8: the mark is there, the jam is not.
    assert!(!code.contains("reduction tile:"), "{code}");
    check_exact(&program, &c, &options);
    let c = compile(&program, &model, &[16, 8]);
    let code = cpu::Writer::new(&c.program, &options)
        .write(&c.ast)
        .unwrap();
    // Tiles of 16 rows run rows 2 apart (`i`, `i + 2`, …); the partial tile of 14 rows one at
    // a time.
    assert!(code.contains("reduction tile: 8 rows"), "{code}");
    assert!(code.contains("y_acc_7 = y[c2 + 14]"), "{code}");
    check_exact(&program, &c, &options);
}

fn with_recurrence(recurrence: bool) -> Program {
    let b = if recurrence {
        "B[i][j - 1]"
    } else {
        "A[i][j - 1]"
    };
    parse(
        "k.c",
        &format!(
            "#define N 24\n#define M 40\n\
             void k(double A[N][M], double B[N][M], double s[N]) {{\n  int i, j;\n#pragma scop\n\
             for (i = 0; i < N; i++)\n\
               for (j = 1; j < M; j++) {{\n\
                 B[i][j] = {b} * 0.5 + A[i][j];\n\
                 s[i] = s[i] + B[i][j];\n\
               }}\n\
             #pragma endscop\n}}\n"
        ),
        frontend::Language::CScop,
    )
}

/// An innermost loop that carries a recurrence through memory besides the reduction
/// (`B[i][j]` from `B[i][j - 1]`) gets no reduction tile, nor does one whose only outer loop
/// carries a dependence (each row starts from the row before). The same loop without the
/// recurrence (`B[i][j]` from `A[i][j - 1]`) gets one.
#[test]
fn recurrences_other_than_reductions_are_left_alone() {
    let model = cpu::models::X86_64_V4;
    let plain = compile(&with_recurrence(false), &model, &[8, 8]);
    assert_eq!(
        marks(&plain).len(),
        1,
        "{}",
        plain.tree.display(&plain.program)
    );
    let recurrence = with_recurrence(true);
    let rows_in_order = parse(
        "k.c",
        "#define N 24\n#define M 40\n\
         void k(double A[N][M], double s[N]) {\n  int i, j;\n#pragma scop\n\
         for (i = 1; i < N; i++)\n\
           for (j = 0; j < M; j++)\n\
             s[i] = s[i] + A[i][j] * s[i - 1];\n\
         #pragma endscop\n}\n",
        frontend::Language::CScop,
    );
    let options = Options::for_model(model).with(|o| o.threads = Some(2));
    check_exact(&with_recurrence(false), &plain, &options);
    for program in [recurrence, rows_in_order] {
        let c = compile(&program, &model, &[8, 8]);
        assert!(marks(&c).is_empty(), "{}", c.tree.display(&c.program));
        check_exact(&program, &c, &options);
        let c = pipeline::compile(
            &program,
            &cpu::description_for(&model),
            &pipeline::Options::default(),
        )
        .unwrap();
        assert!(marks(&c).is_empty(), "{}", c.tree.display(&c.program));
    }
}

/// A reduction whose step runs more than one multiply-add per row (syr2k's two products of
/// three factors) is left to the C compiler, which vectorises its products along the
/// reduction; the same nest with one product per row is jammed.
#[test]
fn heavy_row_steps_are_left_alone() {
    let model = cpu::models::X86_64_V4;
    for (body, jammed) in [
        ("C(i, j) +=! A(j, k) * B(i, k);", true),
        (
            "C(i, j) +=! A(j, k) * 2.0 * B(i, k) + B(j, k) * 2.0 * A(i, k);",
            false,
        ),
    ] {
        let program = parse(
            "k.pf",
            &format!(
                "kernel k<N = 40, M = 24>(A: f64[N, M], B: f64[N, M]) -> (C: f64[N, N]) {{\n    {body}\n}}\n"
            ),
            frontend::Language::Kernel,
        );
        let c = compile(&program, &model, &[8, 16, 8]);
        assert_eq!(
            !marks(&c).is_empty(),
            jammed,
            "{body}\n{}",
            c.tree.display(&c.program)
        );
        let options = Options::for_model(model).with(|o| o.threads = Some(2));
        check_exact(&program, &c, &options);
    }
}
