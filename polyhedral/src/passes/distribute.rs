//! Distribution of a tile's statements into loop nests of their own where they walk memory
//! along different loops.
//!
//! The scheduler fuses statements that share data, and tiling gives the fused statements one
//! point band. When two statements of that band read one array, one by rows and one by
//! columns (`s[j] += r[i]·A[i][j]` and `q[i] += A[i][j]·p[j]`), no order of the point loops
//! gives both a stride-one innermost loop: the shared innermost loop walks a column of `A` for
//! one of them, cannot be vectorized, and keeps a guard per statement in its body.
//!
//! The pass gives each statement its *preferred* member of the point band: the one along which
//! its accesses score best for spatial locality (the score of
//! [`super::intra_tile`]: contiguous accesses count for it, strided ones against it; between
//! equals the current innermost member), among the members it may run innermost: those that
//! carry none of its dependences on itself, and those along which it keeps writing one
//! element (an accumulator, which the back end keeps in a register), but not a member along
//! which each step needs the element the step before wrote (a recurrence, which
//! [`super::intra_tile`] keeps out of the innermost loop). A statement without a contiguous
//! access along such a member, or whose loops the band does not determine, has no
//! preference: it stays with the statement before it in the loop body and is permuted as
//! that one is.
//! Where the statements of one point-band loop nest prefer different members, a scalar
//! dimension inserted between the tile band and the point band splits them into one loop nest
//! per preferred member, inside the tile (the tile loops stay shared, so the data a tile
//! brings into the cache serves every nest), and each nest's point members are permuted so
//! that its preferred member is innermost; the others keep their order. The nests run in the
//! order in which their first statements appear in the loop body; when that order reverses a
//! dependence, nests of consecutive statements of the body with one preference are tried
//! instead; when that fails too, the loop nest stays as it was.
//!
//! Every candidate is checked exactly against every legality dependence before it is kept
//! ([`check_legality`]): distribution moves instances of one statement across those of
//! another within a tile, and a permuted band keeps its dependences only because it is
//! permutable, which the check confirms. Coincidence flags are recomputed exactly afterwards.
//! A nest whose preferred member carries a dependence (a reduction) becomes a sequential
//! innermost loop that reads memory with stride one, in a loop nest of its own.

use super::intra_tile::{innermost_last, member_scores, writes_move_along};
use crate::deps::Dependences;
use crate::passes::{Pass, PassContext};
use crate::pipeline::Error as PipelineError;
use crate::program::{Program, StmtId};
use crate::schedule::expr::QuasiAffine;
use crate::schedule::legality::{check_legality, coincident_dims, coincident_dims_among};
use crate::schedule::pluto::{Band, BandKind, DimKind, Error, PlutoSchedule};

/// `schedule` with the statements of every point-band loop nest that prefer different
/// innermost members distributed into one loop nest per preferred member, as the module docs
/// describe.
pub fn distribute_point_bands(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
) -> Result<PlutoSchedule, Error> {
    let mut out = schedule.clone();
    let mut changed = false;
    // Each distribution inserts a dimension, which moves the bands after it: the band list
    // is read afresh after every one, and a distributed nest is never split again (its
    // statements then agree on their preferred member).
    let mut done: Vec<Vec<StmtId>> = Vec::new();
    'search: loop {
        for band in out.bands.clone() {
            let eligible = band.permutable
                && band.kind == BandKind::Point
                && band.len >= 2
                && (band.start..band.start + band.len).all(|d| out.dims[d].kind == DimKind::Loop);
            if !eligible {
                continue;
            }
            for nest in out.nests_at(band.start) {
                if nest.len() < 2 || done.contains(&nest) {
                    continue;
                }
                done.push(nest.clone());
                if let Some(split) = distribute_nest(program, deps, &out, &band, &nest)? {
                    out = split;
                    changed = true;
                    continue 'search;
                }
            }
        }
        break;
    }
    if changed {
        let flags = coincident_dims(program, deps, &out)?;
        for (d, f) in out.dims.iter_mut().zip(flags) {
            d.coincident = f;
        }
    }
    Ok(out)
}

/// The member of `band` (an index into it) that statement `s` prefers innermost, or `None`
/// when it walks no array contiguously along a member it may run innermost (see the module
/// docs).
fn preferred_member(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    s: StmtId,
) -> Result<Option<usize>, Error> {
    let last = band.len - 1;
    let (score, contiguous) = member_scores(program, schedule, band, &[s]);
    let own = coincident_dims_among(program, deps, schedule, &[s])?;
    // A sequential member along which the statement writes a new element every step is a
    // recurrence: it stays out of the innermost loop (see `super::intra_tile`).
    let eligible =
        |k: usize| own[band.start + k] || !writes_move_along(program, schedule, band, &[s], k);
    Ok((0..band.len)
        .filter(|&k| contiguous[k] > 0 && eligible(k))
        .max_by_key(|&k| (score[k], k == last, k)))
}

/// `schedule` with the loop nest of the statements `nest` below `band` distributed by
/// preferred member, or `None` when they agree or no distribution is legal.
fn distribute_nest(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    nest: &[StmtId],
) -> Result<Option<PlutoSchedule>, Error> {
    // The statements in the order of the loop body: by the scalar dimensions after the band,
    // then by statement.
    let mut order = nest.to_vec();
    order.sort_by_key(|s| {
        let after: Vec<i64> = schedule.dims[band.start + band.len..]
            .iter()
            .filter(|d| d.kind == DimKind::Scalar)
            .map(|d| d.exprs[s.index()].eval(&[], &[]))
            .collect();
        (after, s.index())
    });
    let stated: Vec<Option<usize>> = order
        .iter()
        .map(|&s| preferred_member(program, deps, schedule, band, s))
        .collect::<Result<_, _>>()?;
    let mut said = stated.iter().flatten();
    let Some(&first) = said.next() else {
        return Ok(None);
    };
    if said.all(|&k| k == first) {
        return Ok(None);
    }
    // A statement without a preference stays with the statement before it in the body (the
    // first one with a preference, at the start).
    let mut preferred = Vec::with_capacity(order.len());
    let mut previous = first;
    for k in &stated {
        previous = k.unwrap_or(previous);
        preferred.push(previous);
    }
    // One group per preferred member, in the order of their first statements; failing that,
    // one group per run of consecutive statements with one preferred member.
    let mut members: Vec<usize> = Vec::new();
    for &k in &preferred {
        if !members.contains(&k) {
            members.push(k);
        }
    }
    let by_member: Vec<usize> = preferred
        .iter()
        .map(|k| members.iter().position(|m| m == k).unwrap_or(0))
        .collect();
    let mut by_run = vec![0usize; preferred.len()];
    for i in 1..preferred.len() {
        by_run[i] = by_run[i - 1] + usize::from(preferred[i] != preferred[i - 1]);
    }
    let mut tries = vec![by_member];
    if !tries.contains(&by_run) {
        tries.push(by_run);
    }
    for groups in tries {
        let candidate = split_nest(schedule, band, &order, &preferred, &groups);
        match check_legality(program, deps, &candidate) {
            Ok(()) => return Ok(Some(candidate)),
            Err(Error::Illegal(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// `schedule` with a scalar dimension inserted before `band` that puts statement `order[i]`
/// into loop nest `groups[i]`, and the band's members of that statement permuted so that
/// member `preferred[i]` is innermost.
fn split_nest(
    schedule: &PlutoSchedule,
    band: &Band,
    order: &[StmtId],
    preferred: &[usize],
    groups: &[usize],
) -> PlutoSchedule {
    let mut out = schedule.with_scalar_dim(band.start);
    let start = band.start + 1;
    for ((s, &k), &g) in order.iter().zip(preferred).zip(groups) {
        out.dims[band.start].exprs[s.index()] = QuasiAffine::constant(g as i64);
        let members: Vec<QuasiAffine> = innermost_last(band.len, k)
            .iter()
            .map(|&m| out.dims[start + m].exprs[s.index()].clone())
            .collect();
        for (m, e) in members.into_iter().enumerate() {
            out.dims[start + m].exprs[s.index()] = e;
        }
    }
    out
}

/// The intra-tile distribution pass ([`distribute_point_bands`]).
pub const PASS: Pass = Pass {
    name: "distribute",
    summary:
        "a point band's statements that walk memory along different loops distributed into loop \
        nests of their own inside the tile",
    enabled: |target, options| {
        options.distribute && target.vector.is_some() && target.invocations().is_none()
    },
    run,
};

fn run(cx: &mut PassContext) -> Result<(), PipelineError> {
    let split = distribute_point_bands(cx.program, cx.deps, &cx.schedule)?;
    cx.set_schedule(split)
}
