//! The search's finalists ranked with the packed buffers the later passes give them.
//!
//! The tile search compares sizes on the kernel as tiling leaves it; the pack pass, which
//! runs later, decides which arrays to copy into buffers at the sizes chosen, and the
//! buffers change which sizes are cheapest: a buffer of a tile is dense, so its lines do not
//! conflict with each other, but it takes its tile's whole size of the cache, beside the
//! buffers around it (on a 512 KiB L2, gemm's packed tile of `B` at 256 columns takes 304
//! KiB of it, and 128 columns then miss it less, where on the kernel without buffers 256
//! columns miss it less).
//!
//! So, where packing will run, the search looks ahead: it runs the passes between tiling and
//! packing on the schedule with the band tiled in its chosen sizes, takes the pack marks
//! they give ([`packings`]), and evaluates its finalists with those buffers: the cheapest
//! candidate of each shape (the powers of two of its sizes) other than the choice's, up to
//! [`FINALISTS`] of them, within [`FINALIST_SPREAD`] of the cheapest candidate. The cheapest
//! finalist replaces the choice only when it is cheaper by [`PACKED_MARGIN`] both with the
//! choice's buffers and with those the pack pass gives it at its own sizes (looked ahead to
//! the same way); where the choice is the capacity rule's sizes, kept over the model's best,
//! by [`RULE_MARGIN`], as the model's best must be.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::deps::Dependences;
use crate::passes::tile::{tile_band, Lookahead};
use crate::passes::PassContext;
use crate::program::Program;
use crate::schedule::pluto::{Band, PlutoSchedule};
use crate::target::TargetDescription;

use super::eval::{predict_with, Memo};
use super::nest::Model;
use super::packing::{packings, Packing};
use super::search::{better, Candidate, RULE_MARGIN};
use super::Level;

/// The most candidates ranked with the packed buffers.
pub const FINALISTS: usize = 4;

/// The finalists cost at most this much more than the cheapest candidate, unpacked.
pub const FINALIST_SPREAD: f64 = 0.25;

/// A finalist replaces the search's choice only when, packed, it is at least this much
/// cheaper: smaller differences are below what the model tells apart.
pub const PACKED_MARGIN: f64 = 0.05;

/// The outcome of ranking the finalists with their packed buffers.
#[derive(Clone, Debug)]
pub struct PackedRanking {
    /// How much cheaper a finalist must be to replace the choice ([`PACKED_MARGIN`], or
    /// [`RULE_MARGIN`] against the capacity rule's sizes).
    pub margin: f64,
    /// The arrays the pack pass gives buffers at the search's choice, each once.
    pub arrays: Vec<String>,
    /// The search's choice, with those buffers.
    pub choice: Candidate,
    /// The cheapest other finalist, with the buffers the pack pass gives it at its sizes.
    pub challenger: Option<Candidate>,
    /// Whether the challenger replaced the choice.
    pub replaced: bool,
}

/// Ranks the search's candidates `seen` (sizes and unpacked costs) with the buffers of the
/// pack pass the passes of `lookahead` give them, against the search's choice `choice` (the capacity rule's sizes
/// where `rule`), sharing the search's `memo`; `None` where packing
/// does not run, gives no buffers at `choice`, or the model does not cover them.
#[allow(clippy::too_many_arguments)]
pub(super) fn rank_packed(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    target: &TargetDescription,
    lookahead: &Lookahead,
    model: &Model,
    levels: &[Level],
    seen: &HashMap<Vec<i64>, f64>,
    memo: &Memo,
    choice: &[i64],
    rule: bool,
) -> Option<PackedRanking> {
    let buffers = packings_at(program, deps, schedule, band, choice, target, lookahead)?;
    if buffers.is_empty() {
        return None;
    }
    let cheapest = seen.values().copied().fold(f64::INFINITY, f64::min);
    let mut near: Vec<(&Vec<i64>, f64)> = seen
        .iter()
        .filter(|(sizes, &c)| c <= cheapest * (1.0 + FINALIST_SPREAD) && *sizes != choice)
        .map(|(sizes, &c)| (sizes, c))
        .collect();
    near.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(a.0)));
    // The cheapest of each shape (the sizes' powers of two), so that the finalists are not
    // all the choice's close neighbours.
    let shape = |sizes: &[i64]| -> Vec<u32> { sizes.iter().map(|&t| t.max(1).ilog2()).collect() };
    let mut shapes = vec![shape(choice)];
    let mut finalists = Vec::new();
    for (sizes, c) in near {
        let s = shape(sizes);
        if !shapes.contains(&s) && finalists.len() < FINALISTS {
            shapes.push(s);
            finalists.push((sizes, c));
        }
    }
    let packed = |sizes: &[i64], buffers: &[Packing]| -> Option<Candidate> {
        let with = model.with_packing(program, buffers, sizes).ok()?;
        let prediction = predict_with(&with, sizes, levels, memo);
        let cost = prediction.cost(levels);
        cost.is_finite().then(|| Candidate {
            sizes: sizes.to_vec(),
            prediction,
            cost,
        })
    };
    let mut ranked: Vec<Option<Candidate>> = std::iter::once(choice)
        .chain(finalists.iter().map(|(sizes, _)| sizes.as_slice()))
        .collect::<Vec<_>>()
        .par_iter()
        .map(|sizes| packed(sizes, &buffers))
        .collect();
    let choice = ranked.remove(0)?;
    let best = ranked
        .into_iter()
        .flatten()
        .reduce(|a, b| if better(&b, &a) { b } else { a });
    // The challenger must win with the choice's buffers, and then with those the pack pass
    // gives it at its own sizes.
    let margin = if rule { RULE_MARGIN } else { PACKED_MARGIN };
    let wins = |c: &Candidate| c.cost < choice.cost * (1.0 - margin);
    let challenger = match best {
        Some(c) if wins(&c) => {
            packings_at(program, deps, schedule, band, &c.sizes, target, lookahead)
                .and_then(|own| packed(&c.sizes, &own))
        }
        other => other,
    };
    let replaced = challenger.as_ref().is_some_and(wins);
    let mut arrays: Vec<String> = Vec::new();
    for p in &buffers {
        let name = &program.array(p.array).name;
        if !arrays.contains(name) {
            arrays.push(name.clone());
        }
    }
    Some(PackedRanking {
        margin,
        arrays,
        choice,
        challenger,
        replaced,
    })
}

/// The pack marks the passes of `lookahead` give `schedule` with `band` tiled in `sizes`.
fn packings_at(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    sizes: &[i64],
    target: &TargetDescription,
    lookahead: &Lookahead,
) -> Option<Vec<Packing>> {
    let options = &lookahead.options;
    let tiled = tile_band(program, deps, schedule, band, sizes, options.wavefront).ok()?;
    let mut cx = PassContext::new(program, deps, target, options, tiled).ok()?;
    let passes = &lookahead.passes;
    cx.run(passes, 0..passes.len(), |_, _| Ok(())).ok()?;
    packings(program, &cx.tree).ok()
}
