//! The Pluto scheduler and tiling on the kernels in `kernels/`: every schedule and every tiled
//! schedule is checked exactly for legality, and the textbook answers are asserted.

use polyhedral::deps::{compute_dependences, Dependences};
use polyhedral::passes::tile::{tile, TileOptions};
use polyhedral::passes::tile_size::{band_sizes, footprint, TileSizes};
use polyhedral::program::{AffineExpr, Program, StmtId, Var};
use polyhedral::schedule::legality::{check_legality_exact, coincident_dims_exact};
use polyhedral::schedule::pluto::{
    self, check_legality, BandKind, DimKind, Fusion, Options, PlutoSchedule,
};
use polyhedral::target::{MemoryKind, MemoryTree, ParallelLevel, TargetDescription};
use snapshots::tiny_target;
use std::path::{Path, PathBuf};

fn kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels")
}

fn load(name: &str) -> (Program, Dependences) {
    let options = frontend::Options {
        defines: vec![("MINI_DATASET".into(), None)],
        ..Default::default()
    };
    let p = frontend::load(&kernels_dir().join(name), &options)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let d = compute_dependences(&p).unwrap();
    (p, d)
}

/// The C file `source`, written to a file called after `name` and loaded, with its
/// dependences.
fn load_source(name: &str, source: &str) -> (Program, Dependences) {
    let path = std::env::temp_dir().join(format!("{name}-{}.c", std::process::id()));
    std::fs::write(&path, source).unwrap();
    let p = frontend::load(&path, &frontend::Options::default()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let d = compute_dependences(&p).unwrap();
    (p, d)
}

/// A machine with one cache of `bytes` bytes: tiles get the uniform capacity rule on it.
fn one_cache(bytes: u64) -> TargetDescription {
    let mut memory = MemoryTree::global("DRAM", 1 << 30);
    memory.add("L1", MemoryKind::Cache, bytes, memory.root());
    TargetDescription {
        memory,
        ..tiny_target()
    }
}

fn sched(p: &Program, d: &Dependences, fuse: Fusion) -> PlutoSchedule {
    let s = pluto::schedule(
        p,
        d,
        &Options {
            fuse,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", p.name));
    check_legality(p, d, &s)
        .unwrap_or_else(|e| panic!("{} {}: {e}\n{}", p.name, fuse.name(), s.display(p)));
    s
}

/// `Σ c·iter + constant` of one statement's dimension.
fn affine(s: &PlutoSchedule, stmt: u32, d: usize) -> AffineExpr {
    s.dims[d].exprs[stmt as usize].as_affine().unwrap().clone()
}

fn expr(terms: &[(usize, i64)], c: i64) -> AffineExpr {
    AffineExpr::from_terms(terms.iter().map(|&(k, v)| (Var::Iter(k), v)), c)
}

#[test]
fn every_kernel_every_strategy_is_legal_and_tiles_legally() {
    let mut names: Vec<String> = std::fs::read_dir(kernels_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pf") || n.ends_with(".c"))
        .collect();
    names.sort();
    assert!(names.len() >= 10);
    for name in &names {
        let (p, d) = load(name);
        for fuse in [Fusion::NoFuse, Fusion::SmartFuse, Fusion::MaxFuse] {
            let s = sched(&p, &d, fuse);
            for st in p.statement_ids() {
                // Every statement gets a full-rank schedule: its loop rows span its iterators.
                let depth = p.statements[st.index()].depth();
                let rows: Vec<Vec<i64>> = s
                    .dims
                    .iter()
                    .filter(|x| x.kind == DimKind::Loop)
                    .map(|x| {
                        let e = x.exprs[st.index()].as_affine().unwrap();
                        (0..depth).map(|k| e.coeff(Var::Iter(k))).collect()
                    })
                    .collect();
                assert_eq!(
                    rank(&rows),
                    depth,
                    "{name} {}: {}",
                    fuse.name(),
                    s.display(&p)
                );
            }
            let t = tile(
                &p,
                &d,
                &s,
                &TileOptions {
                    sizes: TileSizes::Fixed(vec![4]),
                    wavefront: true,
                    lookahead: None,
                },
                &tiny_target(),
            )
            .unwrap();
            check_legality(&p, &d, &t)
                .unwrap_or_else(|e| panic!("{name} {} tiled: {e}\n{}", fuse.name(), t.display(&p)));
        }
    }
}

/// Tiled schedules are checked from their point bands (see `schedule::legality`): on every
/// kernel the answer agrees with the exact one on the tiled schedule maps, and every member
/// found coincident is coincident.
#[test]
fn tiled_schedules_are_checked_soundly_from_their_point_bands() {
    for name in [
        "jacobi2d.pf",
        "gemm.pf",
        "2mm.c",
        "lu.pf",
        "softmax.pf",
        "jacobi-2d.c",
    ] {
        let (p, d) = load(name);
        for fuse in [Fusion::SmartFuse, Fusion::MaxFuse] {
            let s = sched(&p, &d, fuse);
            let options = TileOptions {
                sizes: TileSizes::Fixed(vec![4]),
                wavefront: true,
                lookahead: None,
            };
            let t = tile(&p, &d, &s, &options, &tiny_target()).unwrap();
            check_legality_exact(&p, &d, &t).unwrap();
            let all: Vec<StmtId> = p.statement_ids().collect();
            let exact = coincident_dims_exact(&p, &d, &t, &all).unwrap();
            for (k, dim) in t.dims.iter().enumerate() {
                assert!(
                    !dim.coincident || exact[k],
                    "{name} {}: dimension {k} is not coincident\n{}",
                    fuse.name(),
                    t.display(&p)
                );
            }
        }
    }
    // Tiling a band that is not permutable: (t, i, j) for both statements of jacobi2d, where
    // A(i - 1, j) of the next time step goes backwards along i.
    let (p, d) = load("jacobi2d.pf");
    let mut s = sched(&p, &d, Fusion::SmartFuse);
    let band = *s.bands.iter().find(|b| b.len == 3).unwrap();
    for st in 0..2usize {
        for k in 0..3 {
            s.dims[band.start + k].exprs[st] =
                polyhedral::schedule::QuasiAffine::from(expr(&[(k, 1)], 0));
        }
    }
    let options = TileOptions {
        sizes: TileSizes::Fixed(vec![4]),
        wavefront: false,
        lookahead: None,
    };
    let t = tile(&p, &d, &s, &options, &tiny_target()).unwrap();
    assert!(check_legality(&p, &d, &t).is_err());
    assert!(check_legality_exact(&p, &d, &t).is_err());
}

fn rank(rows: &[Vec<i64>]) -> usize {
    let mut m: Vec<Vec<i128>> = rows
        .iter()
        .map(|r| r.iter().map(|&x| x as i128).collect())
        .collect();
    let cols = m.first().map_or(0, Vec::len);
    let mut r = 0;
    for c in 0..cols {
        let Some(p) = (r..m.len()).find(|&i| m[i][c] != 0) else {
            continue;
        };
        m.swap(r, p);
        for i in 0..m.len() {
            if i != r && m[i][c] != 0 {
                let (a, b) = (m[r][c], m[i][c]);
                let pr = m[r].clone();
                for (x, y) in m[i].iter_mut().zip(&pr) {
                    *x = *x * a - *y * b;
                }
            }
        }
        r += 1;
    }
    r
}

#[test]
fn gemm_keeps_a_permutable_3d_band_with_i_and_j_coincident() {
    for name in ["gemm.c", "gemm.pf"] {
        let (p, d) = load(name);
        for fuse in [Fusion::SmartFuse, Fusion::MaxFuse, Fusion::NoFuse] {
            let s = sched(&p, &d, fuse);
            let band = s.bands.iter().find(|b| b.len == 3).expect("a 3-D band");
            assert!(band.permutable);
            let flags: Vec<bool> = (band.start..band.start + 3)
                .map(|k| s.dims[k].coincident)
                .collect();
            assert_eq!(flags, [true, true, false], "{name}\n{}", s.display(&p));
            // The update statement's band is (i, j, k) whatever the loop order of the source.
            let upd = &p.statements[1];
            let it = |n: &str| upd.iterators.iter().position(|x| x == n).unwrap();
            let got: Vec<AffineExpr> = (band.start..band.start + 3)
                .map(|k| affine(&s, 1, k))
                .collect();
            assert_eq!(
                got,
                [
                    expr(&[(it("i"), 1)], 0),
                    expr(&[(it("j"), 1)], 0),
                    expr(&[(it("k"), 1)], 0)
                ]
            );
        }
    }
}

#[test]
fn jacobi_2d_gets_a_skewed_band_and_a_tile_wavefront() {
    for name in ["jacobi-2d.c", "jacobi2d.pf"] {
        let (p, d) = load(name);
        let s = sched(&p, &d, Fusion::SmartFuse);
        assert_eq!(s.bands.len(), 1);
        assert_eq!(
            (s.bands[0].start, s.bands[0].len, s.bands[0].permutable),
            (0, 3, true)
        );
        // (t, 2t + i, 2t + j) and the second statement shifted by one.
        assert_eq!(affine(&s, 0, 0), expr(&[(0, 1)], 0));
        assert_eq!(affine(&s, 0, 1), expr(&[(0, 2), (1, 1)], 0));
        assert_eq!(affine(&s, 0, 2), expr(&[(0, 2), (2, 1)], 0));
        assert_eq!(affine(&s, 1, 1), expr(&[(0, 2), (1, 1)], 1));
        assert_eq!(affine(&s, 1, 2), expr(&[(0, 2), (2, 1)], 1));
        assert!(s.dims.iter().all(|x| !x.coincident));

        let t = tile(
            &p,
            &d,
            &s,
            &TileOptions {
                sizes: TileSizes::Fixed(vec![8, 16, 16]),
                wavefront: true,
                lookahead: None,
            },
            &tiny_target(),
        )
        .unwrap();
        check_legality(&p, &d, &t).unwrap();
        assert_eq!(t.dims.len(), 6);
        let kinds: Vec<BandKind> = t.bands.iter().map(|b| b.kind).collect();
        assert_eq!(kinds, [BandKind::Tile, BandKind::Point]);
        // The wavefront: the first tile dimension is the sum of the three tile dimensions,
        // and the next tile dimension is parallel.
        assert_eq!(t.dims[0].exprs[0].floors.len(), 3);
        assert!(!t.dims[0].coincident);
        assert!(t.dims[1].coincident, "{}", t.display(&p));
        let (time, i, j) = (3, 20, 40);
        let one = t.eval(StmtId(0), &[time, i, j], &p.param_values());
        let tiles = [time / 8, (2 * time + i) / 16, (2 * time + j) / 16];
        assert_eq!(&one[..3], &[tiles.iter().sum(), tiles[1], tiles[2]]);
        assert_eq!(&one[3..], &[3, 26, 46]);

        let flat = tile(
            &p,
            &d,
            &s,
            &TileOptions {
                sizes: TileSizes::Fixed(vec![8]),
                wavefront: false,
                lookahead: None,
            },
            &tiny_target(),
        )
        .unwrap();
        check_legality(&p, &d, &flat).unwrap();
        assert!(!flat.dims[1].coincident);
    }
}

#[test]
fn lu_and_trmm_get_legal_permutable_bands() {
    for name in ["lu.pf", "trmm.pf"] {
        let (p, d) = load(name);
        for fuse in [Fusion::SmartFuse, Fusion::MaxFuse, Fusion::NoFuse] {
            let s = sched(&p, &d, fuse);
            assert!(
                s.bands.iter().any(|b| b.permutable && b.len >= 2),
                "{name}\n{}",
                s.display(&p)
            );
        }
    }
    let (p, d) = load("lu.pf");
    let s = sched(&p, &d, Fusion::SmartFuse);
    assert_eq!(
        (s.bands[0].start, s.bands[0].len),
        (0, 3),
        "{}",
        s.display(&p)
    );
}

#[test]
fn two_and_three_mm_are_fused_or_distributed_by_strategy() {
    for name in ["2mm.c", "3mm.pf"] {
        let (p, d) = load(name);
        let n = p.statements.len();
        let s = sched(&p, &d, Fusion::NoFuse);
        assert_eq!(s.dims[0].kind, DimKind::Scalar);
        let mut groups: Vec<i64> = (0..n).map(|k| affine(&s, k as u32, 0).constant).collect();
        groups.dedup();
        assert_eq!(
            groups.len(),
            n,
            "{name}: every statement apart\n{}",
            s.display(&p)
        );

        let s = sched(&p, &d, Fusion::MaxFuse);
        assert_eq!(
            s.dims[0].kind,
            DimKind::Loop,
            "{name}: fused outer loop\n{}",
            s.display(&p)
        );
        assert_eq!(s.bands[0].start, 0);
        assert!(s.bands[0].len >= 2);
    }
    // Smart fusion distributes the initialisations (depth 2) from the products (depth 3).
    let (p, d) = load("2mm.c");
    let s = sched(&p, &d, Fusion::SmartFuse);
    assert_eq!(s.dims[0].kind, DimKind::Scalar);
}

#[test]
fn capacity_rule_picks_the_largest_fitting_tile() {
    let (p, d) = load("gemm.pf");
    let s = sched(&p, &d, Fusion::NoFuse);
    let band = *s.bands.iter().find(|b| b.len == 3).unwrap();
    // A 16×16×16 tile of C += alpha·A·B touches three 16×16 blocks of f64 and alpha; the
    // scaling by beta is a loop nest of its own, whose tiles touch less.
    assert_eq!(
        footprint(&p, &s, &band, &[16, 16, 16]).unwrap(),
        3 * 16 * 16 * 8 + 8
    );
    let t = tile(
        &p,
        &d,
        &s,
        &TileOptions {
            sizes: TileSizes::FromTarget,
            wavefront: true,
            lookahead: None,
        },
        &one_cache(32 * 1024),
    )
    .unwrap();
    let tb = t
        .bands
        .iter()
        .find(|b| b.kind == BandKind::Tile && b.len == 3)
        .unwrap();
    // 32³ needs 24 KiB, 64³ 96 KiB.
    assert_eq!(t.dims[tb.start].exprs[1].floors[0].den, 32);
    check_legality(&p, &d, &t).unwrap();
    // gemm's outer tile member is parallel: no wavefront.
    assert_eq!(t.dims[tb.start].exprs[1].floors.len(), 1);
    assert!(t.dims[tb.start].coincident);
}

#[test]
fn bad_tile_sizes_are_errors() {
    let (p, d) = load("gemm.pf");
    let s = sched(&p, &d, Fusion::SmartFuse);
    for sizes in [vec![], vec![0], vec![32, -1]] {
        assert!(tile(
            &p,
            &d,
            &s,
            &TileOptions {
                sizes: TileSizes::Fixed(sizes),
                wavefront: true,
                lookahead: None,
            },
            &tiny_target(),
        )
        .is_err());
    }
}

#[test]
fn an_illegal_schedule_is_reported() {
    let (p, d) = load("jacobi2d.pf");
    let mut s = sched(&p, &d, Fusion::SmartFuse);
    // (t, i, j) for the first statement and (t, i − 1, j − 1) for the second runs a read of
    // B before the write it needs.
    for st in 0..2 {
        for k in 1..3 {
            s.dims[k].exprs[st as usize] =
                polyhedral::schedule::QuasiAffine::from(expr(&[(k, 1)], -(st as i64)));
        }
    }
    assert!(check_legality(&p, &d, &s).is_err());
}

/// The sizes `band_sizes` chooses for gemm's three-member band on `target`.
fn gemm_sizes(target: &TargetDescription) -> Vec<i64> {
    let (p, d) = load("gemm.pf");
    let s = sched(&p, &d, Fusion::NoFuse);
    let band = *s.bands.iter().find(|b| b.len == 3).unwrap();
    band_sizes(&p, &d, &s, &band, &TileSizes::FromTarget, None, target).unwrap()
}

#[test]
fn workgroup_limits_bound_the_parallel_members_of_a_tile() {
    let mut memory = MemoryTree::global("storage", 1 << 30);
    memory.add("workgroup", MemoryKind::Scratchpad, 16 << 10, memory.root());
    let gpu = TargetDescription {
        memory,
        parallel: vec![
            ParallelLevel::Workgroups,
            ParallelLevel::Invocations {
                max_total: 256,
                max_per_dim: [256, 256, 64],
                max_loop_iterations: None,
            },
        ],
        ..tiny_target()
    };
    // gemm's i and j are parallel: 16 × 16 = 256 invocations; a 16³ tile of f64 blocks of A,
    // B and C takes 6 KiB, a 32³ one 24 KiB.
    assert_eq!(gemm_sizes(&gpu), [16, 16, 16]);
}

#[test]
fn scratchpad_tiles_fit_the_smallest_buffer_in_fractal_multiples() {
    let mut memory = MemoryTree::global("GM", 1 << 30);
    let l1 = memory.add("L1", MemoryKind::Scratchpad, 1 << 20, memory.root());
    memory.add("L0A", MemoryKind::Scratchpad, 64 << 10, l1);
    memory.add("L0B", MemoryKind::Scratchpad, 64 << 10, l1);
    let npu = TargetDescription {
        memory,
        parallel: vec![
            ParallelLevel::Cores { count: 2 },
            ParallelLevel::Matrix {
                m: 16,
                n: 16,
                k: 16,
                memories: None,
            },
        ],
        vector: None,
        ..tiny_target()
    };
    // 32³ f64 tiles take 24 KiB of the 64 KiB buffers, 64³ ones 96 KiB.
    assert_eq!(gemm_sizes(&npu), [32, 32, 32]);
    // Where not even a fractal fits, nothing is tiled.
    let mut small = npu.clone();
    small.memory.nodes[2].bytes = 1024;
    assert_eq!(gemm_sizes(&small), [1, 1, 1]);
}

/// heat-3d of PolyBench/C 4.2.1 at LARGE_DATASET (N = 120, TSTEPS = 500): two 7-point
/// sweeps per time step, which Pluto fuses into one band skewed by `2t`.
const HEAT_3D: &str = "#define N 120
#define TSTEPS 500
void kernel_heat_3d(double A[N][N][N], double B[N][N][N]) {
  int t, i, j, k;
#pragma scop
  for (t = 1; t <= TSTEPS; t++) {
    for (i = 1; i < N - 1; i++)
      for (j = 1; j < N - 1; j++)
        for (k = 1; k < N - 1; k++)
          B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k])
                     + 0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k])
                     + 0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1])
                     + A[i][j][k];
    for (i = 1; i < N - 1; i++)
      for (j = 1; j < N - 1; j++)
        for (k = 1; k < N - 1; k++)
          A[i][j][k] = 0.125 * (B[i + 1][j][k] - 2.0 * B[i][j][k] + B[i - 1][j][k])
                     + 0.125 * (B[i][j + 1][k] - 2.0 * B[i][j][k] + B[i][j - 1][k])
                     + 0.125 * (B[i][j][k + 1] - 2.0 * B[i][j][k] + B[i][j][k - 1])
                     + B[i][j][k];
  }
#pragma endscop
}
";

#[test]
fn skewed_stencil_tiles_keep_their_data_across_time_steps() {
    let (p, d) = load_source("heat-3d", HEAT_3D);
    let s = sched(&p, &d, Fusion::SmartFuse);
    let band = *s.bands.iter().find(|b| b.len == 4).unwrap();
    // (t, 2t + i, 2t + j, 2t + k): one time step moves a block two columns along i and j.
    assert_eq!(affine(&s, 0, band.start + 1).coeff(Var::Iter(0)), 2);
    let cpu = backends::cpu::description();
    let sizes = band_sizes(&p, &d, &s, &band, &TileSizes::FromTarget, None, &cpu).unwrap();
    // The L1 rule would give the middle members blocks of 2 × 2 columns, which share only
    // their halo with the next time step's; the densest tile that fits half the L2 cache
    // keeps (8 − 2)² / 8² of each block from one step to the next.
    assert_eq!(sizes, [4, 8, 8, 128]);
    assert!(footprint(&p, &s, &band, &sizes).unwrap() <= (1 << 20) / 2);
}

/// jacobi-1d of PolyBench/C 4.2.1 at EXTRALARGE_DATASET (N = 4000, TSTEPS = 1000): two
/// 3-point sweeps per time step, 64 KB of data.
const JACOBI_1D: &str = "#define N 4000
#define TSTEPS 1000
void kernel_jacobi_1d(double A[N], double B[N]) {
  int t, i;
#pragma scop
  for (t = 0; t < TSTEPS; t++) {
    for (i = 1; i < N - 1; i++)
      B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
    for (i = 1; i < N - 1; i++)
      A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1]);
  }
#pragma endscop
}
";

#[test]
fn a_wavefront_band_whose_data_fits_the_cache_gets_fewer_diagonals() {
    let (p, d) = load_source("jacobi-1d", JACOBI_1D);
    let s = sched(&p, &d, Fusion::SmartFuse);
    let band = *s.bands.iter().find(|b| b.len == 2).unwrap();
    // (t, 2t + i): neither member is parallel, so the tiles run as a wavefront.
    assert!((0..2).all(|k| !s.dims[band.start + k].coincident));
    let mut cpu = backends::cpu::description();
    let sizes = band_sizes(&p, &d, &s, &band, &TileSizes::FromTarget, None, &cpu).unwrap();
    // The capacity rule's 256 x 256 fit the L1 cache many times over; `2t + i` spans about
    // 6,000 values, cut into 8 tiles of 750 (27 diagonals become 11). `t`'s tiles of 256 are
    // already longer than 1,000 / 8.
    assert_eq!(sizes, [256, 750]);
    assert!(footprint(&p, &s, &band, &sizes).unwrap() <= 32 << 10);
    // One thread has no diagonals to wait for: the rule's sizes stay.
    cpu.parallel = vec![ParallelLevel::Threads { count: Some(1) }];
    let sizes = band_sizes(&p, &d, &s, &band, &TileSizes::FromTarget, None, &cpu).unwrap();
    assert_eq!(sizes, [256, 256]);
}
