//! The work one invocation runs in a fused tile, on targets that cap the loop iterations of
//! one invocation (Mesa's llvmpipe leaves every loop silently after 65535 iterations).
//!
//! Tiling keeps the ordinary tree under such a cap by its tile sizes and by running the
//! sequential tile loops on the host, one launch per iteration. A fused tile cannot do that:
//! the producer instances pulled into it and the consumer's tile members below the fused
//! ones run inside one launch, since the intermediates they share live only as long as the
//! tile. So on such a target a producer is fused only when the statement instances of a tile
//! (the consumer's and every fused extension's), spread over the invocations of one
//! workgroup, stay within the same share of the cap that tile sizes keep to
//! ([`LOOP_CAP_SHARE`]). The instances are counted, at the kernel's sizes, in the rectangular
//! hull of a tile in the middle of the tile space.

use crate::passes::tile_size::LOOP_CAP_SHARE;
use crate::program::Program;
use crate::schedule::instances::Instances;
use crate::schedule::ScheduleError;
use crate::target::TargetDescription;

use super::recompute::{fix, fix_params, range, volume};

/// The loop iterations one invocation of a fused tile may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InvocationBudget {
    /// The share of the cap a tile may use.
    iterations: i64,
    /// The cap itself, for messages.
    cap: u32,
    /// The invocations of one workgroup that share a tile's instances.
    invocations: i64,
}

impl InvocationBudget {
    /// The budget of `target`, where it caps the loop iterations of one invocation.
    pub(crate) fn of(target: &TargetDescription) -> Option<InvocationBudget> {
        let cap = target.loop_iterations()?;
        let (invocations, _) = target.invocations()?;
        Some(InvocationBudget {
            iterations: (u64::from(cap) / LOOP_CAP_SHARE) as i64,
            cap,
            invocations: i64::from(invocations.max(1)),
        })
    }

    /// `Err` with the reason when the statements `in_tile` (the consumer's first, tiles of
    /// `k` members) give one invocation of a middle tile more than its share of the cap.
    pub(crate) fn check(
        &self,
        program: &Program,
        in_tile: &[Instances],
        k: usize,
    ) -> Result<Result<(), String>, ScheduleError> {
        let Some(consumer) = in_tile.first() else {
            return Ok(Ok(()));
        };
        let np = program.params.len();
        let mut tiles = consumer.rel.clone();
        fix_params(program, &mut tiles);
        let mut middle = Vec::with_capacity(k);
        for j in 0..k {
            let Some((lo, hi)) = range(program, &tiles, np + j)? else {
                return Ok(Ok(()));
            };
            middle.push(lo + (hi - lo) / 2);
        }
        let mut work = 0i64;
        for inst in in_tile {
            let mut own = inst.rel.clone();
            fix_params(program, &mut own);
            fix(&mut own, np, &middle);
            let iters: Vec<usize> = (np + k..np + k + inst.n_iter).collect();
            work = work.saturating_add(volume(program, &own, &iters)?);
        }
        let per_invocation = (work + self.invocations - 1) / self.invocations;
        if per_invocation <= self.iterations {
            return Ok(Ok(()));
        }
        Ok(Err(format!(
            "one invocation of a fused tile would run about {per_invocation} loop iterations, \
             more than 1/{LOOP_CAP_SHARE} of the target's cap of {} per invocation",
            self.cap
        )))
    }
}
