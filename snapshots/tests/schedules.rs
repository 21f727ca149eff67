//! The optimized schedules of the textbook kernels, as `polyfuse compile --emit tree` prints
//! them, and the C the CPU target generates from them (`polyfuse compile --target cpu`: the
//! kernel function for `.pf` input, the file with its SCoP replaced for C input), at the
//! kernels' default sizes on the CPU target description. 2mm and 3mm are also snapshotted
//! under the other fusion strategies, which distribute or fuse their statements differently.
//! The cache model's report (`--emit cache-model`) of a few of them is snapshotted too.

use backends::cpu;
use polyhedral::passes::tile::Lookahead;
use polyhedral::pipeline::{compile, Compiled, Options};
use polyhedral::program::SourceKind;
use polyhedral::schedule::pluto::Fusion;
use snapshots::{load, snapshot_name};

const KERNELS: &[&str] = &[
    "gemm.pf",
    "gemm.c",
    "jacobi2d.pf",
    "jacobi-2d.c",
    "lu.pf",
    "trmm.pf",
    "2mm.pf",
    "2mm.c",
    "3mm.pf",
    "3mm.c",
    "syrk.c",
    "doitgen.c",
];

fn kernel(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kernels")
        .join(name)
}

fn optimized(program: &polyhedral::Program, fuse: Fusion) -> Compiled {
    let options = Options {
        fuse,
        ..Options::default()
    };
    compile(program, &cpu::description(), &options)
        .unwrap_or_else(|e| panic!("{}: {e}", program.name))
}

#[test]
fn optimized_trees_and_c_of_the_textbook_kernels() {
    for name in KERNELS {
        let path = kernel(name);
        let program = load(&path);
        let c = optimized(&program, Fusion::SmartFuse);
        let snap = snapshot_name(&path);
        insta::assert_snapshot!(format!("tree_{snap}"), c.tree.display(&c.program));
        let code = c_code(&path, &program, &c, &cpu::Options::default());
        insta::assert_snapshot!(format!("c_{snap}"), code);
    }
}

/// The C the CPU target writes for `c` with `options`: for C input, the file at `path` with
/// its SCoP replaced.
fn c_code(
    path: &std::path::Path,
    program: &polyhedral::Program,
    c: &Compiled,
    options: &cpu::Options,
) -> String {
    match program.source {
        SourceKind::CScop { .. } => {
            let source = std::fs::read_to_string(path).unwrap();
            cpu::replace_scop(&c.program, &c.ast, &source, options)
        }
        SourceKind::Kernel => cpu::Writer::new(&c.program, options).write(&c.ast),
    }
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn fusion_strategies_of_2mm_and_3mm() {
    for name in ["2mm.c", "3mm.c"] {
        let path = kernel(name);
        let program = load(&path);
        for fuse in [Fusion::NoFuse, Fusion::MaxFuse] {
            let c = optimized(&program, fuse);
            insta::assert_snapshot!(
                format!("tree_{}_{}", snapshot_name(&path), fuse.name()),
                c.tree.display(&c.program)
            );
        }
    }
}

#[test]
fn cache_model_reports() {
    for name in ["gemm.pf", "2mm.c", "syrk.c", "doitgen.c", "trmm.pf"] {
        let path = kernel(name);
        let program = load(&path);
        let c = optimized(&program, Fusion::SmartFuse);
        let report = polyhedral::cache_model::report(&c, &cpu::description())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_snapshot!(format!("cache_model_{}", snapshot_name(&path)), report);
    }
}

/// The AVX-512 model's tree and C of the matrix products: register tiles of 64-byte vectors
/// (5 × 32 doubles: 20 accumulators, four column vectors and a broadcast operand, 25 of the
/// 28 registers the model lets a register tile fill).
#[test]
fn wide_vector_register_tiles() {
    let model = cpu::models::X86_64_V4;
    for name in ["gemm.pf", "gemm.c", "2mm.c"] {
        let path = kernel(name);
        let program = load(&path);
        let c = compile(&program, &cpu::description_for(&model), &Options::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let snap = format!("{}_{}", snapshot_name(&path), model.name);
        insta::assert_snapshot!(format!("tree_{snap}"), c.tree.display(&c.program));
        let code = c_code(&path, &program, &c, &cpu::Options::for_model(model));
        insta::assert_snapshot!(format!("c_{snap}"), code);
    }
}

/// gemver's four statements share one band in three loop nests. In the first, `j` (the band's
/// parallel member) is the contiguous innermost loop; the last nest runs `i` outside `j`. The
/// search walks each nest's point loops in the order the code runs them, so its misses of the
/// chosen tiles are the final schedule's; and the band streams once `j`'s tiles are long, so
/// they are lengthened past the parallel member's cap.
#[test]
fn gemver_tiles_streamed_along_its_parallel_member() {
    let program = load(&kernel("gemver.c"));
    let c = optimized(&program, Fusion::SmartFuse);
    let report = polyhedral::cache_model::report(&c, &cpu::description()).unwrap();
    let l1 = |section: &str| -> f64 {
        let after = report.split(section).nth(1).unwrap();
        let row = after
            .lines()
            .find(|l| l.trim_start().starts_with("L1d"))
            .unwrap_or_else(|| panic!("{report}"));
        row.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(
        l1("as the search compared them:"),
        l1("predicted misses of the kernel:"),
        "{report}"
    );
    let found = searched(&c, 2);
    let streamed = found.streamed.expect("the band streams");
    assert!(streamed.parallel && !streamed.whole, "{streamed:?}");
    let size = found.best.sizes[streamed.member];
    assert!(size > polyhedral::cache_model::PARALLEL_TILE, "{report}");
    // N = 2000: 8 tiles of at most 250 iterations, rounded up to the vector tile's multiple.
    assert!(
        size * (polyhedral::cache_model::STREAMED_PARALLEL_TILES - 1) < 2000,
        "{report}"
    );
}

/// gemm's band gets a register tile with AVX2: its rows member takes whole tiles of the
/// shape with the most rows whose columns divide the vectorised tiles (6x8), and, being the
/// parallel member too, tiles past the parallel cap that 2, 4 and 8 threads share evenly
/// (each tile of rows packs `B`'s tiles again).
#[test]
fn gemm_rows_take_whole_register_tiles() {
    let program = load(&kernel("gemm.c"));
    let c = optimized(&program, Fusion::SmartFuse);
    let found = searched(&c, 3);
    let rows = found.best.sizes[0];
    assert_eq!(rows % 6, 0, "{:?}", found.best.sizes);
    assert!(rows > polyhedral::cache_model::PARALLEL_TILE, "{rows}");
    let tree = c.tree.display(&c.program).to_string();
    assert!(tree.contains("register tile 6x8"), "{tree}");
}

/// The tile search's result, on the CPU target, for the first band of `c` with `members`
/// members.
fn searched(c: &Compiled, members: usize) -> polyhedral::cache_model::BandSearch {
    let band = c
        .schedule
        .bands
        .iter()
        .find(|b| b.len == members)
        .unwrap_or_else(|| panic!("{} has no band of {members} members", c.program.name));
    polyhedral::cache_model::search_band(
        &c.program,
        &c.deps,
        &c.schedule,
        band,
        &cpu::description(),
        Lookahead::of(&cpu::description(), &c.options).as_ref(),
    )
    .unwrap()
    .unwrap()
}

/// On a core whose L2 holds 512 KiB in 8 ways (this benchmark machine's), gemm's packed
/// tiles of 256 columns fill the L2 before any row of `A` is read: the search, ranking its
/// finalists with the buffers the pack pass gives them, takes 128 columns instead, which the
/// kernel without buffers ranks behind. With the named models' 1 MiB L2 the 256 columns stay.
#[test]
fn gemm_finalists_ranked_with_their_packed_buffers() {
    use backends::cpu::models::{CacheLevel, Caches, CpuModel, SERVER_CACHES};
    let program = load(&kernel("gemm.c"));
    let small_l2 = CpuModel {
        caches: Caches {
            l2: CacheLevel {
                bytes: 512 << 10,
                ways: 8,
            },
            ..SERVER_CACHES
        },
        ..CpuModel::default()
    };
    for (model, replaced) in [(CpuModel::default(), false), (small_l2, true)] {
        let target = cpu::description_for(&model);
        let options = Options::default();
        let c = compile(&program, &target, &options).unwrap();
        let band = c.schedule.bands.iter().find(|b| b.len == 3).unwrap();
        let found = polyhedral::cache_model::search_band(
            &c.program,
            &c.deps,
            &c.schedule,
            band,
            &target,
            Lookahead::of(&target, &options).as_ref(),
        )
        .unwrap()
        .unwrap();
        let packed = found.packed.expect("gemm's band gets packed buffers");
        assert_eq!(packed.replaced, replaced, "{:?}", found.best.sizes);
        let columns = found.best.sizes[1];
        if replaced {
            let challenger = packed.challenger.as_ref().unwrap();
            assert_eq!(challenger.sizes, found.best.sizes);
            assert!(challenger.cost < packed.choice.cost * (1.0 - packed.margin));
            // The kernel without buffers ranks the replaced choice ahead.
            let before = found.runner_up.as_ref().unwrap();
            assert!(before.cost < found.best.cost, "{:?}", before.sizes);
            assert_eq!(columns, 128);
        } else {
            assert_eq!(columns, 256);
        }
        // The code gets the search's sizes.
        let tree = c.tree.display(&c.program).to_string();
        assert!(tree.contains(&format!("floor((j)/{columns})")), "{tree}");
    }
}
