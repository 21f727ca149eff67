//! The passes of the optimizing pipeline, one module each, and the table that lists the tree
//! passes in the order they run ([`PASSES`]).
//!
//! - [`expand`]: array expansion, before scheduling (a rewrite of the program, not of the
//!   tree): arrays whose reuse keeps an outer loop sequential, and temporaries along the loops
//!   their values live in;
//! - [`tile`]: tiling of permutable bands into tile and point bands, and the tile-level
//!   wavefront; [`tile_size`]: the sizes, from the target's description;
//! - [`intra_tile`]: the permutation of point bands that puts a parallel, stride-one loop
//!   innermost;
//! - [`distribute`]: the distribution of a point band's statements into loop nests of their
//!   own, inside the tile, where they walk memory along different loops;
//! - [`fission`]: innermost loops whose statements pass values through memory split into one
//!   loop per statement;
//! - [`post_tiling_fusion`]: producers pulled into the tiles of the statements that write the
//!   outputs, with extension nodes;
//! - [`matrix`]: contractions retiled in the fractals of a matrix unit and marked for it;
//! - [`pack`]: arrays copied into contiguous buffers where the TLB and the cache lines gain;
//! - [`register_tile`] and [`reduction_tile`]: the point bands the back end turns into outer
//!   products held in registers, and the reductions that get independent chains;
//! - [`map`]: kernel and thread marks, where a grid of groups of threads starts mapping loops.
//!
//! A tree pass is a [`Pass`]: its name (what `--emit tree=after:NAME` asks for), a line saying
//! what it does, when it runs for a target, and a rewrite of the [`PassContext`]. Passes that
//! work on the flat schedule (tiling, intra-tile permutation, distribution, fission) hand the
//! new schedule to [`PassContext::set_schedule`], which checks it and rebuilds the tree; passes
//! that rewrite the tree itself replace [`PassContext::tree`]. A pass that needs to run other
//! passes (tiling's search looks ahead to the buffers packing gives its finalists; post-tiling
//! fusion compares with another schedule taken through the passes before it) is handed them in
//! [`PassContext::earlier`] and [`PassContext::later`]: no pass picks passes itself.

pub mod distribute;
pub mod expand;
pub mod fission;
pub mod intra_tile;
pub mod map;
pub mod matrix;
pub mod pack;
pub mod post_tiling_fusion;
pub mod prescale;
pub mod reduction_tile;
pub mod register_tile;
pub mod tile;
pub mod tile_size;

use std::fmt;
use std::ops::Range;

use crate::deps::Dependences;
use crate::pipeline::{Error, Options};
use crate::program::Program;
use crate::schedule::pluto::{self, PlutoSchedule};
use crate::schedule::{tree_of_schedule, verify, ScheduleTree};
use crate::target::TargetDescription;

/// One pass over the schedule tree.
pub struct Pass {
    /// What `--emit tree=after:NAME` asks for, and the pass's name in messages.
    pub name: &'static str,
    /// What the pass does, in a line (the CLI's help and the README's list of stages).
    pub summary: &'static str,
    /// Whether the pass runs for a target under the pipeline's options.
    pub enabled: fn(&TargetDescription, &Options) -> bool,
    pub run: fn(&mut PassContext) -> Result<(), Error>,
}

impl fmt::Debug for Pass {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Passes are told apart by their names, which [`PASSES`] keeps distinct.
impl PartialEq for Pass {
    fn eq(&self, other: &Pass) -> bool {
        self.name == other.name
    }
}

impl Eq for Pass {}

/// Every tree pass, in the order the pipeline runs them.
pub const PASSES: &[&Pass] = &[
    &tile::PASS,
    &intra_tile::PASS,
    &distribute::PASS,
    &fission::PASS,
    // After the passes that rebuild the tree from the flat schedule, which has no extensions.
    &post_tiling_fusion::PASS,
    &matrix::PASS,
    &pack::PASS,
    &register_tile::PASS,
    &reduction_tile::PASS,
    &map::PASS,
];

/// The stage whose tree is the scheduler's schedule, before any tree pass.
pub const SCHEDULE: &str = "schedule";

/// The names of the stages whose trees [`crate::pipeline::Compiled::stages`] can hold, in
/// order: [`SCHEDULE`], then every pass of [`PASSES`].
pub fn stages() -> impl Iterator<Item = &'static str> {
    std::iter::once(SCHEDULE).chain(PASSES.iter().map(|p| p.name))
}

/// The stages with what each does, one Markdown list item per line (the README's list).
pub fn stage_list() -> String {
    let mut out = format!(
        "- `{SCHEDULE}`: the scheduler's schedule (Pluto's hyperplanes, with the fusion strategy)\n"
    );
    for pass in PASSES {
        out.push_str(&format!("- `{}`: {}\n", pass.name, pass.summary));
    }
    out
}

/// The tree passes for `target` under `options`, in the order they run.
pub fn select(target: &TargetDescription, options: &Options) -> Vec<&'static Pass> {
    PASSES
        .iter()
        .copied()
        .filter(|p| (p.enabled)(target, options))
        .collect()
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
    /// The passes this one runs among, in order, and where it is among them.
    pipeline: &'a [&'static Pass],
    at: usize,
}

impl<'a> PassContext<'a> {
    /// A context for the flat `schedule` of `program` and its tree, before any pass.
    pub fn new(
        program: &'a Program,
        deps: &'a Dependences,
        target: &'a TargetDescription,
        options: &'a Options,
        schedule: PlutoSchedule,
    ) -> Result<PassContext<'a>, Error> {
        let tree = tree_of_schedule(program, deps, &schedule)?;
        Ok(PassContext {
            program,
            deps,
            target,
            options,
            schedule,
            tree,
            pipeline: &[],
            at: 0,
        })
    }

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

    /// The passes the running one runs among, in order (those before it, itself, those after).
    pub fn pipeline(&self) -> &'a [&'static Pass] {
        self.pipeline
    }

    /// The passes that run before the running one, in order.
    pub fn earlier(&self) -> &'a [&'static Pass] {
        &self.pipeline[..self.at.min(self.pipeline.len())]
    }

    /// The passes that run after the running one, in order.
    pub fn later(&self) -> &'a [&'static Pass] {
        &self.pipeline[(self.at + 1).min(self.pipeline.len())..]
    }

    /// Runs the passes of `pipeline` that `range` picks, in order, each told where it is in
    /// `pipeline`, the tree checked after each when verifying; `after` sees each result.
    pub fn run(
        &mut self,
        pipeline: &'a [&'static Pass],
        range: Range<usize>,
        mut after: impl FnMut(&'static Pass, &PassContext) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.pipeline = pipeline;
        for at in range {
            self.at = at;
            let pass = pipeline[at];
            (pass.run)(self)?;
            if self.options.verify {
                verify(self.program, &self.tree)?;
            }
            after(pass, self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pass_has_a_name_of_its_own() {
        let names: Vec<&str> = stages().collect();
        for (k, name) in names.iter().enumerate() {
            assert!(!names[..k].contains(name), "{name} twice");
        }
    }
}
