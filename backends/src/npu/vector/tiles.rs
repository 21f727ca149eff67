//! The tile height of a stage: the number of rows whose buffers fit UB (both copies of the
//! double-buffered ones counted) and whose estimated cycles are fewest.
//!
//! The estimate of a tile height: the tiles go to the cores in runs of consecutive tiles, one
//! run per block; a block's first tile pays its copy in, its Vector work and its copy out one
//! after the other, and every further tile the busiest of MTE2, V, MTE3 and the scalar unit's
//! issue (with double buffering the three overlap; without it they add up). GM copies run at
//! their path's bandwidth or at the share of the GM bandwidth the running blocks leave them.
//! Ties go to the taller tile, which needs fewer instructions.

use polyhedral::Program;

use super::code::{distribution, StageCode};
use super::lower::Lowered;
use super::stages::Stage;
use crate::npu::{Error, NpuTarget};

/// The tile height of `stage` whose buffers fit UB from byte `base`, with the fewest cycles.
pub(crate) fn choose(
    program: &Program,
    target: &NpuTarget,
    stage: &Stage,
    low: &Lowered,
    double: bool,
    base: u64,
) -> Result<u64, Error> {
    let rows = (stage.rows.1 - stage.rows.0) as u64;
    let mut best: Option<(u64, u64)> = None;
    for tr in 1..=rows {
        let code = StageCode::new(program, target, stage, low, tr, double, base);
        if !code.fits(base) {
            // Buffers only grow with the tile.
            break;
        }
        let (_, per_block, _) = distribution(rows, tr, target.cores());
        let (mte2, v, mte3, issue) = code.tile_cycles();
        let alone = mte2 + v + mte3;
        let estimate = if double {
            alone + (per_block - 1) * mte2.max(v).max(mte3).max(issue)
        } else {
            per_block * alone.max(issue)
        };
        if best.is_none_or(|(_, e)| estimate <= e) {
            best = Some((tr, estimate));
        }
    }
    best.map(|(tr, _)| tr).ok_or_else(|| Error::NoTiling {
        kernel: program.name.clone(),
        why: format!(
            "one row of the stage of statement {} overflows UB",
            program.statements[stage.stmts[0].id.index()].name
        ),
    })
}
