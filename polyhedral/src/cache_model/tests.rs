//! The model on small nests whose misses are counted by hand. Caches with 16-byte lines keep
//! every run of the test arrays (16-byte aligned, rows of whole lines) on line boundaries, so
//! the counts are exact.

use super::eval::{p_miss_runs, predict, Runs};
use super::*;
use crate::program::{
    Access, AffineExpr, Array, ArrayId, ArrayRole, Constraint, Expr, ExprArena, Param, ParamId,
    Program, ScalarType, Span, Statement, Var,
};
use crate::schedule::expr::QuasiAffine;
use crate::schedule::pluto::{Band, BandKind, DimKind, PlutoSchedule, ScheduleDim};

fn it(d: usize) -> AffineExpr {
    AffineExpr::var(Var::Iter(d))
}

fn n() -> AffineExpr {
    AffineExpr::var(Var::Param(ParamId(0)))
}

fn zero() -> AffineExpr {
    AffineExpr::constant(0)
}

fn access(a: u32, subs: Vec<AffineExpr>) -> Access {
    Access {
        array: ArrayId(a),
        subscripts: subs,
        span: Span::default(),
    }
}

/// `write = read[0]` over `0 <= it(k) < N` for each of `depth` iterators.
fn copy(depth: usize, write: Access, read: Access) -> Statement {
    let mut exprs = ExprArena::new();
    let body = exprs.push(Expr::Read(0));
    let mut domain = Vec::new();
    for k in 0..depth {
        domain.push(Constraint::le(&zero(), &it(k)));
        domain.push(Constraint::lt(&it(k), &n()));
    }
    Statement {
        divs: Vec::new(),
        name: "S0".into(),
        iterators: (0..depth).map(|k| format!("i{k}")).collect(),
        domain,
        write,
        reads: vec![read],
        exprs,
        body,
        position: vec![0; depth + 1],
        reduction: None,
        span: Span::default(),
    }
}

/// Two f64 arrays `A`, `B` of `dims` dimensions of extent `N`, and one statement.
fn program(size: i64, dims: usize, stmt: Statement) -> Program {
    let array = |name: &str, role| Array {
        name: name.into(),
        elem: ScalarType::F64,
        shape: vec![n(); dims],
        role,
        span: Span::default(),
    };
    let p = Program {
        name: "test".into(),
        params: vec![Param {
            name: "N".into(),
            value: size,
        }],
        arrays: vec![array("A", ArrayRole::Input), array("B", ArrayRole::Output)],
        statements: vec![stmt],
        ..Program::default()
    };
    p.verify().expect("test programs are valid");
    p
}

/// The identity schedule of one statement of `depth` loops, as one permutable band.
fn loops(depth: usize) -> PlutoSchedule {
    PlutoSchedule {
        dims: (0..depth)
            .map(|k| ScheduleDim {
                kind: DimKind::Loop,
                exprs: vec![QuasiAffine::var(Var::Iter(k))],
                coincident: true,
            })
            .collect(),
        bands: vec![Band {
            start: 0,
            len: depth,
            permutable: true,
            kind: BandKind::Plain,
        }],
    }
}

/// A fully associative LRU cache of `lines` lines of 16 bytes.
fn fully_associative(lines: u64) -> Level {
    Level {
        name: format!("{lines} lines"),
        bytes: lines * 16,
        line_bytes: 16,
        ways: lines as u32,
        sets: 1,
        miss_penalty_cycles: 1,
    }
}

#[test]
fn a_stream_misses_once_per_line() {
    // B[i] = A[i] over 4096 doubles: 2048 lines of 16 bytes per array, whatever the cache.
    let p = program(
        4096,
        1,
        copy(1, access(1, vec![it(0)]), access(0, vec![it(0)])),
    );
    let model = Model::of_schedule(&p, &loops(1)).unwrap();
    for lines in [4, 64, 1 << 20] {
        let m = predict(&model, &[], &[fully_associative(lines)]);
        assert_eq!(m.misses, [4096.0], "{lines} lines");
        assert_eq!(m.compulsory, 4096.0);
    }
    // 64-byte lines and 16-byte alignment: a run of 32 KiB at an offset of 0, 16, 32 or 48
    // bytes touches 512 lines once and a 513th three times out of four.
    let level = Level {
        line_bytes: 64,
        bytes: 64 * 64,
        ..fully_associative(64)
    };
    let m = predict(&model, &[], &[level]);
    assert_eq!(m.misses, [2.0 * 512.75]);
}

/// `B[j][i] = A[i][j]` over 64 × 64 doubles: 32 lines of 16 bytes per row, 2048 per array.
fn transpose() -> Program {
    program(
        64,
        2,
        copy(
            2,
            access(1, vec![it(1), it(0)]),
            access(0, vec![it(0), it(1)]),
        ),
    )
}

#[test]
fn a_transpose_misses_once_per_line_while_a_column_of_b_stays_cached() {
    let p = transpose();
    let model = Model::of_schedule(&p, &loops(2)).unwrap();
    // One iteration of i touches a row of A (32 lines) and a column of B (64 lines): with 128
    // lines B's lines are still there for the next i, with 64 they are not and every access
    // to B misses.
    let m = predict(
        &model,
        &[],
        &[fully_associative(128), fully_associative(64)],
    );
    assert_eq!(m.misses, [2048.0 + 2048.0, 2048.0 + 4096.0]);
}

#[test]
fn a_tiled_transpose_misses_once_per_line_in_a_small_cache() {
    let p = transpose();
    let schedule = loops(2);
    let model = Model::with_band_tiled(&p, &schedule, &schedule.bands[0], &[0, 1], None).unwrap();
    // 8 × 8 tiles: 32 lines of A and 32 of B per tile, no line shared between tiles; one row
    // of a tile (4 lines of A, 8 of B) keeps B's tile column cached in 64 lines.
    let levels = [fully_associative(64)];
    let m = predict(&model, &[8, 8], &levels);
    assert_eq!(m.misses, [4096.0]);
    // Untiled (tiles as large as the array) it is the untiled nest again.
    let m = predict(&model, &[64, 64], &levels);
    assert_eq!(m.misses, [6144.0]);
    // The search finds tiles that miss no more than once per line.
    let target = one_cache(64 * 16, 16, None);
    let deps = crate::deps::compute_dependences(&p).unwrap();
    let found = searched(&p, &deps, &schedule, 0, &target);
    assert_eq!(found.best.prediction.misses, [4096.0], "{:?}", found.best);
    let runner_up = found.runner_up.unwrap();
    assert!(runner_up.cost >= found.best.cost);
    assert_ne!(runner_up.sizes, found.best.sizes);
}

#[test]
fn column_blocks_of_a_one_row_register_tile_walk_the_columns_outside_the_rows() {
    // The transpose with j walked in blocks of 8 outside i (a register tile of one row): per
    // block, each i touches 4 lines of A and 8 of B, and B's 8 lines are still cached at the
    // next i, so in 64 lines every line misses once, where the plain nest misses B's lines
    // at every i.
    let p = transpose();
    let blocks = [super::nest::ColumnBlocks {
        at: 0,
        columns: vec![(0, it(1))],
        width: 8,
    }];
    let model = Model::of_schedule_with(&p, &loops(2), &blocks).unwrap();
    assert_eq!(model.sizes, [8]);
    let levels = [fully_associative(64)];
    assert_eq!(predict(&model, &[8], &levels).misses, [4096.0]);
    let plain = Model::of_schedule(&p, &loops(2)).unwrap();
    assert_eq!(predict(&plain, &[], &levels).misses, [6144.0]);
}

/// A target with one fully associative cache of `bytes` in lines of `line` bytes, and
/// optionally pages of `page` bytes.
fn one_cache(bytes: u64, line: u32, page: Option<u64>) -> crate::target::TargetDescription {
    crate::target::TargetDescription {
        name: "test".into(),
        memory: {
            let mut memory = crate::target::MemoryTree::global("DRAM", 1 << 30);
            let root = memory.root();
            memory.add_cache(
                "L1",
                bytes,
                crate::target::CacheGeometry {
                    line_bytes: line,
                    ways: (bytes / line as u64) as u32,
                    miss_penalty_cycles: 1,
                },
                root,
            );
            memory
        },
        parallel: Vec::new(),
        vector: None,
        tlb: page.map(|page_bytes| crate::target::Tlb {
            entries: 64,
            page_bytes,
        }),
        element_types: vec![ScalarType::F64],
    }
}

/// A streamed member that is not the parallel one, its tiles at least `run` long.
fn lengthened(member: usize, run: i64, whole: bool) -> Streamed {
    Streamed {
        member,
        run,
        whole,
        parallel: false,
        wavefront: false,
    }
}

/// The tile search's result for band `band` of `schedule` on `target`.
fn searched(
    p: &Program,
    deps: &crate::deps::Dependences,
    schedule: &PlutoSchedule,
    band: usize,
    target: &crate::target::TargetDescription,
) -> super::search::BandSearch {
    search_band(p, deps, schedule, &schedule.bands[band], target, None)
        .unwrap()
        .unwrap()
}

#[test]
fn a_streaming_band_gets_tiles_a_page_long_along_its_contiguous_loop() {
    // B[i][j] = A[i][j] over 1024 × 1024 doubles touches every line once, whatever the tiles:
    // the tiles of j, along which both rows run, are made a page (512 doubles) long.
    let p = program(
        1024,
        2,
        copy(
            2,
            access(1, vec![it(0), it(1)]),
            access(0, vec![it(0), it(1)]),
        ),
    );
    let schedule = loops(2);
    let deps = crate::deps::compute_dependences(&p).unwrap();
    let found = searched(
        &p,
        &deps,
        &schedule,
        0,
        &one_cache(32 << 10, 64, Some(4096)),
    );
    assert!(found.best.prediction.streams());
    assert_eq!(found.streamed, Some(lengthened(1, 512, false)));
    assert!(found.best.sizes[1] >= 512, "{:?}", found.best.sizes);
    // Without pages to follow, nothing is made longer.
    let found = searched(&p, &deps, &schedule, 0, &one_cache(32 << 10, 64, None));
    assert_eq!(found.streamed, None);
    // Where neither member is parallel (tiles would run as a wavefront), j stays whole.
    let mut wavefront = schedule.clone();
    for d in &mut wavefront.dims {
        d.coincident = false;
    }
    let found = searched(
        &p,
        &deps,
        &wavefront,
        0,
        &one_cache(32 << 10, 64, Some(4096)),
    );
    assert_eq!(found.streamed, Some(lengthened(1, 1024, true)));
    assert_eq!(found.best.sizes[1], 1024);
    // An untiled transpose in a small cache misses B's lines again: it does not stream.
    let p = transpose();
    let model = Model::of_schedule(&p, &loops(2)).unwrap();
    assert!(!predict(&model, &[], &[fully_associative(64)]).streams());
    assert!(predict(&model, &[], &[fully_associative(128)]).streams());
}

#[test]
fn a_band_that_sweeps_its_data_at_every_step_of_an_outer_loop_streams_per_execution() {
    // B[i][j] = A[i][j] again at every step of t, over 1024 × 1024 doubles: each execution of
    // the (i, j) band touches every line of A and B once and a 32 KiB cache keeps none of them
    // for the next, so the kernel misses every line 1024 times while each execution streams.
    let p = program(
        1024,
        2,
        copy(
            3,
            access(1, vec![it(1), it(2)]),
            access(0, vec![it(1), it(2)]),
        ),
    );
    // t alone, then (i, j) with neither member parallel (tiles that run as a wavefront).
    let mut schedule = loops(3);
    for d in &mut schedule.dims {
        d.coincident = false;
    }
    schedule.bands = vec![
        Band {
            start: 0,
            len: 1,
            permutable: true,
            kind: BandKind::Plain,
        },
        Band {
            start: 1,
            len: 2,
            permutable: true,
            kind: BandKind::Plain,
        },
    ];
    let deps = crate::deps::compute_dependences(&p).unwrap();
    let found = searched(
        &p,
        &deps,
        &schedule,
        1,
        &one_cache(32 << 10, 64, Some(4096)),
    );
    let prediction = &found.best.prediction;
    assert!(prediction.streams());
    assert!(!prediction.kernel_streams());
    // Each execution touches both arrays' lines (rows at 16-byte offsets straddle one more
    // line now and then).
    let lines = 2.0 * 1024.0 * 1024.0 * 8.0 / 64.0;
    let (_, touched) = prediction.band.unwrap();
    assert!((touched / (1024.0 * lines) - 1.0).abs() < 1e-3, "{touched}");
    // With one thread, j gets page-long tiles, not the whole row.
    assert_eq!(found.streamed, Some(lengthened(1, 512, false)));
    assert_eq!(found.best.sizes[1], 512);
    // With threads the wavefront is the band's only parallelism: rather than page-long tiles
    // of j, each member is cut into eight tiles, 15 diagonals of up to 8 tiles.
    let mut threads = one_cache(32 << 10, 64, Some(4096));
    threads.parallel = vec![crate::target::ParallelLevel::Threads { count: None }];
    let found = searched(&p, &deps, &schedule, 1, &threads);
    let wavefront = Streamed {
        wavefront: true,
        ..lengthened(1, 128, false)
    };
    assert_eq!(found.streamed, Some(wavefront));
    assert_eq!(found.best.sizes, vec![128, 128]);
}

fn runs(count: f64, lines: f64) -> Runs {
    Runs {
        count,
        lines,
        layout: None,
    }
}

#[test]
fn set_associativity_costs_misses_before_the_capacity_is_reached() {
    // 64 sets of 8 ways: 512 lines.
    let level = Level {
        name: "L1".into(),
        bytes: 32 << 10,
        line_bytes: 64,
        ways: 8,
        sets: 64,
        miss_penalty_cycles: 1,
    };
    // One contiguous run fills every set evenly: it fits until it exceeds the capacity.
    assert_eq!(p_miss_runs(&level, &[runs(1.0, 500.0)]), 0.0);
    assert_eq!(p_miss_runs(&level, &[runs(1.0, 600.0)]), 1.0);
    // 400 single lines at random sets: 6.25 per set on average, so some sets overflow.
    let scattered = p_miss_runs(&level, &[runs(400.0, 1.0)]);
    assert!(scattered > 0.1 && scattered < 0.5, "{scattered}");
    // A few lines never miss; far more than the capacity always do.
    assert_eq!(p_miss_runs(&level, &[runs(8.0, 1.0)]), 0.0);
    assert_eq!(p_miss_runs(&level, &[runs(5000.0, 1.0)]), 1.0);
    // 16 rows of 16 lines: a pitch of 17 lines spreads them over the sets (4 lines per set),
    // a pitch of 64 lines (the cache's size over its ways) stacks them on the same 16 sets.
    let rows = |pitch: f64| Runs {
        count: 16.0,
        lines: 16.0,
        layout: Some((vec![(16, pitch)], 1024.0)),
    };
    assert_eq!(p_miss_runs(&level, &[rows(17.0 * 64.0)]), 0.0);
    assert_eq!(p_miss_runs(&level, &[rows(4096.0)]), 1.0);
}
