//! The optimizing pipeline, written out in one place: dependences → array expansion →
//! Pluto scheduling (with the fusion strategy) → tiling → intra-tile permutation → schedule
//! tree → verification → AST.
//!
//! What a pass does for a target comes from the target's [`TargetDescription`] (its memory
//! levels and vector width), never from its name. With [`Options::verify`] every pass's
//! result is checked before the next one runs: the flat schedules exactly against every
//! legality dependence ([`pluto::check_legality`]), the tree by the tree verifier
//! ([`crate::schedule::verify`]); AST generation verifies the tree once more on entry.
//!
//! What holds on the way out: [`Compiled::ast`] runs every statement instance of the program
//! exactly once, in an order that respects every dependence, so it computes what the
//! reference interpreter computes.

use crate::ast::Ast;
use crate::deps::{compute_dependences, Dependences};
use crate::expand::{expand_for_parallelism, Expansion};
use crate::program::Program;
use crate::schedule::intra_tile;
use crate::schedule::pluto::{self, BandKind, DimKind, Fusion, PlutoSchedule};
use crate::schedule::tile::{self, TileOptions, TileSizes};
use crate::schedule::{tree_of_schedule, verify, ScheduleError, ScheduleTree};

/// One level of a target's memory hierarchy, closest to the compute units first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLevel {
    /// What the level is called in messages (`L1d`, `UB`, `shared`).
    pub name: String,
    /// Capacity in bytes.
    pub bytes: u64,
    /// Transfer granularity in bytes (a cache line).
    pub line_bytes: u32,
}

/// What the middle end needs to know about a target to optimize for it. Each back end
/// describes its machine with one; the passes read the numbers and never the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetDescription {
    /// The target's name, for messages only.
    pub name: String,
    /// Memory levels, closest first. Tiles are sized for the first one.
    pub memory: Vec<MemoryLevel>,
    /// Bytes of one vector register (0: no vector unit).
    pub vector_bytes: u32,
}

impl TargetDescription {
    /// The capacity a tile's footprint must fit in: the closest memory level's.
    pub fn tile_capacity(&self) -> Option<u64> {
        self.memory.first().map(|m| m.bytes)
    }
}

/// Where tile sizes come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Tiling {
    /// No tiling.
    Off,
    /// One size per member of the deepest permutable band, outermost first; shallower bands
    /// take the first sizes.
    Sizes(Vec<i64>),
    /// The capacity rule on the target's closest memory level.
    #[default]
    FromTarget,
}

/// Pipeline options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub fuse: Fusion,
    pub tiling: Tiling,
    /// Turn tile bands whose outer member carries a dependence into wavefronts.
    pub wavefront: bool,
    /// Permute point bands so that a parallel loop with stride-one accesses is innermost.
    pub intra_tile: bool,
    /// Expand arrays whose reuse keeps an outermost loop sequential (see
    /// [`crate::expand`]), within the capacity of the target's outermost memory level.
    pub expand: bool,
    /// Check every pass's result before the next pass (see the module docs).
    pub verify: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            fuse: Fusion::SmartFuse,
            tiling: Tiling::FromTarget,
            wavefront: true,
            intra_tile: true,
            expand: true,
            verify: true,
        }
    }
}

/// What can go wrong in the pipeline; each message is one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("dependence analysis: {0}")]
    Deps(String),
    #[error("{0}")]
    Schedule(#[from] pluto::Error),
    #[error("{0}")]
    Tree(#[from] ScheduleError),
    /// `Tiling::Sizes` does not fit the schedule's bands.
    #[error("{0}")]
    TileSizes(String),
}

/// Everything the pipeline computed, for the emitters and for `--emit`.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The program the schedule and the AST are for: the input, or the input with arrays
    /// expanded for parallelism (the same arrays in the same order, temporaries added after
    /// them, and copy-out statements).
    pub program: Program,
    /// What array expansion did.
    pub expansions: Vec<Expansion>,
    pub deps: Dependences,
    /// The scheduler's flat schedule, before tiling.
    pub schedule: PlutoSchedule,
    /// The flat schedule after tiling (the same as `schedule` when nothing was tiled).
    pub tiled: PlutoSchedule,
    pub tree: ScheduleTree,
    pub ast: Ast,
}

/// Runs the pipeline on `program` for `target`.
pub fn compile(
    program: &Program,
    target: &TargetDescription,
    options: &Options,
) -> Result<Compiled, Error> {
    let mut deps = compute_dependences(program).map_err(|e| Error::Deps(e.to_string()))?;
    let mut expansions = Vec::new();
    let mut expanded = None;
    if options.expand {
        let budget = target.memory.last().map_or(0, |m| m.bytes);
        if let Some((p, e)) = expand_for_parallelism(program, &deps, budget) {
            if options.verify {
                p.verify().map_err(|e| Error::Deps(e.to_string()))?;
            }
            deps = compute_dependences(&p).map_err(|e| Error::Deps(e.to_string()))?;
            expansions = e;
            expanded = Some(p);
        }
    }
    let program = expanded.as_ref().unwrap_or(program);

    let scheduler = pluto::Options {
        fuse: options.fuse,
        ..Default::default()
    };
    let schedule = pluto::schedule(program, &deps, &scheduler)?;
    if options.verify {
        pluto::check_legality(program, &deps, &schedule)?;
    }

    let tiled = match tile_sizes(program, target, &schedule, &options.tiling)? {
        Some(sizes) => {
            let tiled = tile::tile(
                program,
                &deps,
                &schedule,
                &TileOptions {
                    sizes,
                    wavefront: options.wavefront,
                },
            )?;
            if options.verify {
                pluto::check_legality(program, &deps, &tiled)?;
            }
            tiled
        }
        None => schedule.clone(),
    };
    let tiled = if options.intra_tile {
        let permuted = intra_tile::sink_vector_loops(program, &deps, &tiled)?;
        if options.verify && permuted != tiled {
            pluto::check_legality(program, &deps, &permuted)?;
        }
        permuted
    } else {
        tiled
    };

    let tree = tree_of_schedule(program, &deps, &tiled)?;
    if options.verify {
        verify(program, &tree)?;
    }

    let ast = crate::codegen::generate_ast(program, &tree)?;
    Ok(Compiled {
        program: program.clone(),
        expansions,
        deps,
        schedule,
        tiled,
        tree,
        ast,
    })
}

/// The members of the deepest band tiling would split (permutable, at least two loops).
pub fn deepest_tileable_band(schedule: &PlutoSchedule) -> usize {
    schedule
        .bands
        .iter()
        .filter(|b| {
            b.permutable
                && b.kind == BandKind::Plain
                && b.len >= 2
                && schedule.dims[b.start..b.start + b.len]
                    .iter()
                    .all(|d| d.kind == DimKind::Loop)
        })
        .map(|b| b.len)
        .max()
        .unwrap_or(0)
}

/// The tiling pass's sizes, or `None` when nothing is to be tiled.
fn tile_sizes(
    program: &Program,
    target: &TargetDescription,
    schedule: &PlutoSchedule,
    tiling: &Tiling,
) -> Result<Option<TileSizes>, Error> {
    let deepest = deepest_tileable_band(schedule);
    match tiling {
        Tiling::Off => Ok(None),
        _ if deepest == 0 => Ok(None),
        Tiling::Sizes(sizes) => {
            if sizes.len() != deepest {
                return Err(Error::TileSizes(format!(
                    "{} tile sizes given, but the deepest permutable band of `{}` has {deepest} \
                     members",
                    sizes.len(),
                    program.name
                )));
            }
            if let Some(t) = sizes.iter().find(|&&t| t < 1) {
                return Err(Error::TileSizes(format!(
                    "tile sizes must be positive, found {t}"
                )));
            }
            Ok(Some(TileSizes::Fixed(sizes.clone())))
        }
        Tiling::FromTarget => Ok(target
            .tile_capacity()
            .map(|bytes| TileSizes::Capacity { bytes })),
    }
}
