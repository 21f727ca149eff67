//! The optimizing pipeline, written out in one place: operand prescaling for a matrix unit
//! ([`passes::prescale`]) → dependences → array expansion ([`passes::expand`]) → Pluto scheduling (with the fusion strategy) → schedule tree → the
//! tree passes of [`passes::PASSES`] that the target and the options select, each followed by
//! the verifier → AST. Tiling's search looks ahead once: it runs the passes after it up to
//! packing on its choice to rank its finalists with their packed buffers
//! ([`crate::cache_model::PackedRanking`]).
//!
//! What a pass does for a target comes from the target's [`TargetDescription`] (its memories,
//! parallel hierarchy and vector unit), never from its name. With [`Options::verify`] every
//! pass's result is checked before the next one runs: the flat schedules exactly against every
//! legality dependence ([`pluto::check_legality`]), the tree by the tree verifier
//! ([`crate::schedule::verify`]); AST generation verifies the tree once more on entry.
//!
//! What holds on the way out: [`Compiled::ast`] runs every statement instance of the program
//! exactly once, in an order that respects every dependence, so it computes what the
//! reference interpreter computes.

use crate::ast::Ast;
use crate::deps::{compute_dependences, Dependences};
use crate::passes::expand::{self, Expansion};
use crate::passes::tile_size::TileSizes;
use crate::passes::{self, PassContext};
use crate::program::Program;
use crate::schedule::pluto::{self, Fusion, PlutoSchedule};
use crate::schedule::{verify, ScheduleError, ScheduleTree};
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
    /// innermost member (see [`crate::passes::distribute`]), on targets whose vector unit
    /// runs the innermost loop of one thread.
    pub distribute: bool,
    /// Split innermost loops whose statements pass values through memory from one iteration
    /// to the next into one loop per statement (see [`crate::passes::fission`]), on targets
    /// whose vector unit runs the innermost loop of one thread.
    pub fission: bool,
    /// Expand arrays whose reuse keeps an outermost loop sequential (see [`crate::passes::expand`]),
    /// and temporaries along the loops their values live in, on targets with parallel units, within the capacity of the target's outermost cache
    /// (or of its global memory, when it has no cache).
    pub expand: bool,
    /// Run post-tiling fusion ([`crate::passes::post_tiling_fusion`]) after the other tree passes:
    /// producers pulled into the tiles of the live-out statements that read them.
    pub post_tiling_fusion: bool,
    /// Pack arrays into contiguous buffers where the analysis of [`crate::passes::pack`] finds it
    /// pays (on targets that describe a TLB).
    pub pack: bool,
    /// Mark the point bands whose innermost loops become register tiles (see
    /// [`crate::passes::register_tile`]), on targets with vector registers, and those whose innermost
    /// reductions get independent chains from a parallel loop (see [`crate::passes::reduction_tile`]),
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
    /// The program the schedule and the AST are for: the input, or the input with the scaled
    /// operands of contractions prescaled for a matrix unit ([`passes::prescale`]) and arrays
    /// expanded for parallelism (the same arrays in the same order, temporaries added after
    /// them, and the statements that fill or copy them out).
    pub program: Program,
    /// What array expansion did.
    pub expansions: Vec<Expansion>,
    pub deps: Dependences,
    /// The scheduler's flat schedule, before tiling.
    pub schedule: PlutoSchedule,
    /// The flat schedule after tiling (the same as `schedule` when nothing was tiled).
    pub tiled: PlutoSchedule,
    pub tree: ScheduleTree,
    /// The tree as each stage left it: [`passes::SCHEDULE`] (built from the scheduler's
    /// schedule), then one entry per pass of [`passes::PASSES`] that ran, by the pass's name.
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

/// Runs the pipeline on `program` for `target`.
pub fn compile(
    program: &Program,
    target: &TargetDescription,
    options: &Options,
) -> Result<Compiled, Error> {
    target.supports(program)?;
    let prescaled = passes::prescale::run(program, target);
    let program = prescaled.as_ref().unwrap_or(program);
    if options.verify && prescaled.is_some() {
        program.verify().map_err(|e| Error::Deps(e.to_string()))?;
    }
    let deps = compute_dependences(program).map_err(|e| Error::Deps(e.to_string()))?;
    let expand::Expanded {
        program: expanded,
        deps,
        expansions,
    } = expand::run(program, deps, target, options)?;
    let program = expanded.as_ref().unwrap_or(program);

    let scheduler = pluto::Options {
        fuse: options.fuse,
        alone: passes::matrix::contractions(program, target),
        ..Default::default()
    };
    let schedule = pluto::schedule(program, &deps, &scheduler)?;
    if options.verify {
        pluto::check_legality(program, &deps, &schedule)?;
    }
    let mut cx = PassContext::new(program, &deps, target, options, schedule.clone())?;
    if options.verify {
        verify(program, &cx.tree)?;
    }
    let mut stages = vec![(passes::SCHEDULE, cx.tree.clone())];
    let passes = passes::select(target, options);
    cx.run(&passes, 0..passes.len(), |pass, cx| {
        stages.push((pass.name, cx.tree.clone()));
        Ok(())
    })?;
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
