//! The optimizing pipeline, written out in one place: dependences → array expansion →
//! Pluto scheduling (with the fusion strategy) → schedule tree → the tree passes of
//! [`passes`] (tiling, intra-tile permutation, intra-tile distribution, innermost-loop fission, post-tiling fusion, packing, register tiles, reduction tiles, mapping marks), each
//! followed by the verifier → AST. Tiling's search looks ahead once: it runs the passes up to
//! packing on its choice to rank its finalists with their packed buffers
//! ([`crate::cache_model::PackedRanking`]).
//!
//! What a pass does for a target comes from the target's [`TargetDescription`] (its memories,
//! parallel hierarchy and vector unit), never from its name. With [`Options::verify`] every
//! pass's result is checked before the next one runs: the flat schedules exactly against every
//! legality dependence ([`pluto::check_legality`]), the tree by the tree verifier
//! ([`crate::schedule::verify`]); AST generation verifies the tree once more on entry.
//!
//! A tree pass is a [`Pass`]: a name (what `--emit tree=after:NAME` asks for) and a rewrite of
//! the [`PassContext`]. Passes that work on the flat schedule (tiling, intra-tile permutation, distribution, fission)
//! hand the new schedule to [`PassContext::set_schedule`], which checks it and rebuilds the tree;
//! passes that rewrite the tree itself replace [`PassContext::tree`].
//!
//! What holds on the way out: [`Compiled::ast`] runs every statement instance of the program
//! exactly once, in an order that respects every dependence, so it computes what the
//! reference interpreter computes.

use crate::ast::Ast;
use crate::deps::{compute_dependences, Dependences};
use crate::expand::{expand_for_parallelism, expand_temporaries, Expansion};
use crate::fusion::post_tiling::PostTilingFusion;
use crate::pack::Pack;
use crate::program::Program;
use crate::reduction_tile::ReductionTile;
use crate::register_tile::RegisterTile;
use crate::schedule::distribute::Distribute;
use crate::schedule::fission::Fission;
use crate::schedule::intra_tile::IntraTile;
use crate::schedule::map::MapMarks;
use crate::schedule::pluto::{self, Fusion, PlutoSchedule};
use crate::schedule::tile::Tile;
use crate::schedule::tile_size::TileSizes;
use crate::schedule::{tree_of_schedule, verify, ScheduleError, ScheduleTree};
use crate::target::{TargetDescription, TargetError};

/// Pipeline options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub fuse: Fusion,
    pub tiling: TileSizes,
    /// Turn tile bands whose outer member carries a dependence into wavefronts.
    pub wavefront: bool,
    /// Permute point bands so that a parallel loop with stride-one accesses is innermost (on
    /// targets with a vector unit).
    pub intra_tile: bool,
    /// Distribute the statements of a point band that walk memory with stride one along
    /// different members into loop nests of their own inside the tile, each with its own
    /// innermost member (see [`crate::schedule::distribute`]), on targets whose vector unit
    /// runs the innermost loop of one thread.
    pub distribute: bool,
    /// Split innermost loops whose statements pass values through memory from one iteration
    /// to the next into one loop per statement (see [`crate::schedule::fission`]), on targets
    /// whose vector unit runs the innermost loop of one thread.
    pub fission: bool,
    /// Expand arrays whose reuse keeps an outermost loop sequential (see [`crate::expand`]),
    /// and temporaries along the loops their values live in, on targets with parallel units, within the capacity of the target's outermost cache
    /// (or of its global memory, when it has no cache).
    pub expand: bool,
    /// Run post-tiling fusion ([`crate::fusion::post_tiling`]) after the other tree passes:
    /// producers pulled into the tiles of the live-out statements that read them.
    pub post_tiling_fusion: bool,
    /// Pack arrays into contiguous buffers where the analysis of [`crate::pack`] finds it
    /// pays (on targets that describe a TLB).
    pub pack: bool,
    /// Mark the point bands whose innermost loops become register tiles (see
    /// [`crate::register_tile`]), on targets with vector registers, and those whose innermost
    /// reductions get independent chains from a parallel loop (see [`crate::reduction_tile`]),
    /// on targets that describe their multiply-add pipes.
    pub register_tile: bool,
    /// Check every pass's result before the next pass (see the module docs).
    pub verify: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            fuse: Fusion::SmartFuse,
            tiling: TileSizes::FromTarget,
            wavefront: true,
            intra_tile: true,
            distribute: true,
            fission: true,
            expand: true,
            post_tiling_fusion: false,
            pack: true,
            register_tile: true,
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
    /// `TileSizes::Fixed` does not fit the schedule's bands.
    #[error("{0}")]
    TileSizes(String),
    #[error("{0}")]
    Target(#[from] TargetError),
    /// A combination of passes that is not implemented yet.
    #[error("not supported yet: {0}")]
    Unsupported(String),
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
    /// The tree as each stage left it: `schedule` (built from the scheduler's schedule), then
    /// one entry per pass of [`passes`] that ran, by the pass's name.
    pub stages: Vec<(&'static str, ScheduleTree)>,
    pub ast: Ast,
    /// The options it was compiled with.
    pub options: Options,
}

impl Compiled {
    /// The tree as the stage `name` left it (see [`Compiled::stages`]).
    pub fn tree_after(&self, name: &str) -> Option<&ScheduleTree> {
        self.stages.iter().find(|(n, _)| *n == name).map(|(_, t)| t)
    }
}

/// What a tree pass reads and rewrites.
pub struct PassContext<'a> {
    pub program: &'a Program,
    pub deps: &'a Dependences,
    pub target: &'a TargetDescription,
    pub options: &'a Options,
    /// The flat schedule the tree was last built from.
    pub schedule: PlutoSchedule,
    pub tree: ScheduleTree,
}

impl PassContext<'_> {
    /// Replaces the flat schedule (checked against every legality dependence when verifying)
    /// and rebuilds the tree from it.
    pub fn set_schedule(&mut self, schedule: PlutoSchedule) -> Result<(), Error> {
        if schedule == self.schedule {
            return Ok(());
        }
        if self.options.verify {
            pluto::check_legality(self.program, self.deps, &schedule)?;
        }
        self.tree = tree_of_schedule(self.program, self.deps, &schedule)?;
        self.schedule = schedule;
        Ok(())
    }
}

/// One pass over the schedule tree.
pub trait Pass {
    /// The pass's name in `--emit tree=after:NAME` and in messages.
    fn name(&self) -> &'static str;
    fn run(&self, cx: &mut PassContext) -> Result<(), Error>;
}

/// The names of the stages whose trees [`Compiled::stages`] can hold, in order.
pub const STAGES: &[&str] = &[
    "schedule",
    Tile::NAME,
    IntraTile::NAME,
    Distribute::NAME,
    Fission::NAME,
    PostTilingFusion::NAME,
    Pack::NAME,
    RegisterTile::NAME,
    ReductionTile::NAME,
    MapMarks::NAME,
];

/// The tree passes for `target` under `options`, in the order they run.
pub fn passes(target: &TargetDescription, options: &Options) -> Vec<Box<dyn Pass>> {
    let mut passes: Vec<Box<dyn Pass>> = Vec::new();
    if options.tiling != TileSizes::Off {
        passes.push(Box::new(Tile));
    }
    if options.intra_tile && target.vector.is_some() {
        passes.push(Box::new(IntraTile));
    }
    if options.distribute && target.vector.is_some() && target.invocations().is_none() {
        passes.push(Box::new(Distribute));
    }
    if options.fission && target.vector.is_some() && target.invocations().is_none() {
        passes.push(Box::new(Fission));
    }
    // After the passes that rebuild the tree from the flat schedule, which has no
    // extensions.
    if options.post_tiling_fusion {
        passes.push(Box::new(PostTilingFusion));
    }
    if options.pack && target.tlb.is_some() {
        passes.push(Box::new(Pack));
    }
    if options.register_tile && target.vector.is_some_and(|v| v.tile_registers > 0) {
        passes.push(Box::new(RegisterTile));
    }
    if options.register_tile
        && target
            .vector
            .is_some_and(|v| v.fma_latency > 0 && v.fma_pipes > 0 && v.registers > 0)
    {
        passes.push(Box::new(ReductionTile));
    }
    if target.invocations().is_some() {
        passes.push(Box::new(MapMarks));
    }
    passes
}

/// Runs the pipeline on `program` for `target`.
pub fn compile(
    program: &Program,
    target: &TargetDescription,
    options: &Options,
) -> Result<Compiled, Error> {
    target.supports(program)?;
    let mut deps = compute_dependences(program).map_err(|e| Error::Deps(e.to_string()))?;
    let mut expansions = Vec::new();
    let mut expanded = None;
    if options.expand && target.has_parallel_units() {
        let budget = target
            .memory
            .cache_chain()
            .last()
            .map_or(target.memory.node(target.memory.root()).bytes, |m| m.bytes);
        if let Some((p, e)) = expand_for_parallelism(program, &deps, budget) {
            if options.verify {
                p.verify().map_err(|e| Error::Deps(e.to_string()))?;
            }
            deps = compute_dependences(&p).map_err(|e| Error::Deps(e.to_string()))?;
            expansions = e;
            expanded = Some(p);
        }
        let current = expanded.as_ref().unwrap_or(program);
        if let Some((p, e)) = expand_temporaries(current, &deps, budget) {
            if options.verify {
                p.verify().map_err(|e| Error::Deps(e.to_string()))?;
            }
            deps = compute_dependences(&p).map_err(|e| Error::Deps(e.to_string()))?;
            expansions.extend(e);
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
    let tree = tree_of_schedule(program, &deps, &schedule)?;
    if options.verify {
        verify(program, &tree)?;
    }

    let mut stages = vec![("schedule", tree.clone())];
    let mut cx = PassContext {
        program,
        deps: &deps,
        target,
        options,
        schedule: schedule.clone(),
        tree,
    };
    for pass in passes(target, options) {
        pass.run(&mut cx)?;
        if options.verify {
            verify(program, &cx.tree)?;
        }
        stages.push((pass.name(), cx.tree.clone()));
    }
    let PassContext {
        schedule: tiled,
        tree,
        ..
    } = cx;

    let ast = crate::codegen::generate_ast(program, &tree)?;
    Ok(Compiled {
        program: program.clone(),
        expansions,
        deps,
        schedule,
        tiled,
        tree,
        stages,
        ast,
        options: options.clone(),
    })
}
