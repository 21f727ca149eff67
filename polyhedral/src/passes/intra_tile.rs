//! Intra-tile loop permutation for spatial locality and vectorization (Pluto's "prevector"):
//! inside a permutable point band (or a permutable band that was not tiled), the member whose
//! iterations walk the most arrays with stride one becomes the innermost loop, provided it is
//! parallel, so that consecutive iterations touch consecutive elements and can run in SIMD
//! lanes.
//!
//! How far one step of a band member moves a statement's accesses is computed exactly: the
//! statement's non-tile loop rows form an invertible matrix `T` over its iterators (when they
//! do not, the statement has no say), one step along member `d` with every other loop fixed
//! is the iterator change `v = T⁻¹ e_d`, and an access `A·i + c` moves by `A·v`. An access is
//! *contiguous* along `d` when only its last subscript moves, by ±1; *invariant* when none
//! moves; *strided* otherwise. A member's score is `2·contiguous + invariant − 4·strided` over
//! the accesses of every statement in the band: a strided access costs a cache line per
//! iteration, which outweighs what a contiguous one gains.
//!
//! A parallel member with at least one contiguous access replaces the innermost member when
//! it scores at least as well (strictly better, when the innermost member is parallel too):
//! between equals, the parallel loop wins because it can be vectorized. Where no parallel
//! member has a contiguous access and the innermost member is not parallel (a time-skewed
//! stencil band), the member that scores best replaces it when it scores strictly better:
//! stride one still saves a cache line per iteration.
//!
//! A point band whose innermost member is sequential and whose statements write a new element
//! at every step of it is a recurrence (the row sweeps of `adi` and `deriche`: `p[i][j]` from
//! `p[i][j - 1]`): each iteration waits for the one before, through a division or a chain of
//! multiplications. There a parallel member becomes the innermost loop whatever its strides,
//! so that the tile's independent rows run in SIMD lanes: inside a tile its strided accesses
//! come back to the lines the tile's first iterations brought into the cache. A sequential
//! member that writes one element throughout (an accumulator: a reduction) keeps the rule
//! above, as reductions get their independent chains from register tiles instead.
//!
//! The permutation keeps every dependence satisfied because the band is permutable; moving a
//! member inwards never makes a parallel member sequential. Where a band that was not tiled
//! has a parallel outermost member, the permutation keeps a parallel member outermost, so the
//! loop nest keeps its outer parallel loop. Coincidence flags are recomputed exactly
//! afterwards.

use num_rational::Rational64;
use num_traits::{One, Signed, Zero};

use crate::deps::Dependences;
use crate::passes::{Pass, PassContext};
use crate::pipeline::Error as PipelineError;
use crate::program::{Program, StmtId, Var};
use crate::schedule::pluto::{
    coincident_dims, coincident_dims_among, Band, BandKind, DimKind, Error, PlutoSchedule,
};

/// `schedule` with the innermost member of every permutable point band (and untiled
/// permutable band) chosen for stride-one accesses, as the module docs describe.
pub fn sink_vector_loops(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
) -> Result<PlutoSchedule, Error> {
    let mut out = schedule.clone();
    let mut changed = false;
    for band in schedule.bands.clone() {
        let eligible = band.permutable
            && matches!(band.kind, BandKind::Point | BandKind::Plain)
            && band.len >= 2
            && (band.start..band.start + band.len).all(|d| out.dims[d].kind == DimKind::Loop);
        if !eligible {
            continue;
        }
        // Statements that scalar dimensions put into different loop nests share the band's
        // dimensions but not its loops: each nest is permuted on its own.
        for nest in out.nests_at(band.start) {
            let Some(order) = nest_order(program, deps, &out, &band, &nest)? else {
                continue;
            };
            for &s in &nest {
                let members: Vec<_> = order
                    .iter()
                    .map(|&d| out.dims[band.start + d].exprs[s.index()].clone())
                    .collect();
                for (k, m) in members.into_iter().enumerate() {
                    out.dims[band.start + k].exprs[s.index()] = m;
                }
            }
            changed = true;
        }
    }
    if changed {
        let flags = coincident_dims(program, deps, &out)?;
        for (d, f) in out.dims.iter_mut().zip(flags) {
            d.coincident = f;
        }
    }
    Ok(out)
}

/// The member of `band` (an index into it) that will be the innermost loop of its deepest loop
/// nest after [`sink_vector_loops`], when that loop will be vectorizable: it has a contiguous
/// access, and no statement depends on itself across its iterations (dependences between
/// different statements, as in a fused stencil, a C compiler vectorizes statement by
/// statement). Tiling gives it long tiles.
pub fn predicted_innermost(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
) -> Result<Option<usize>, Error> {
    let Some(nest) = deepest_nest(program, schedule, band) else {
        return Ok(None);
    };
    let flags = coincident_dims_among(program, deps, schedule, &nest)?;
    let plain = Band {
        kind: BandKind::Point,
        ..*band
    };
    let last = choose_order(program, schedule, &plain, &nest, &flags)
        .and_then(|order| order.last().copied())
        .unwrap_or(band.len - 1);
    let (_, contiguous) = member_scores(program, schedule, &plain, &nest);
    if contiguous[last] == 0 {
        return Ok(None);
    }
    if flags[band.start + last] {
        return Ok(Some(last));
    }
    let own = Dependences {
        memory: deps
            .memory
            .iter()
            .filter(|d| d.source == d.sink)
            .cloned()
            .collect(),
        dataflow: Vec::new(),
        live_in: Vec::new(),
        live_out: Vec::new(),
    };
    let flags = coincident_dims_among(program, &own, schedule, &nest)?;
    Ok(flags[band.start + last].then_some(last))
}

/// The first of the loop nests of `band` ([`PlutoSchedule::nests_at`]) whose statements have
/// the most loops: the nest whose innermost loop [`predicted_innermost`] predicts.
pub fn deepest_nest(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
) -> Option<Vec<StmtId>> {
    let depth = |nest: &Vec<StmtId>| -> usize {
        nest.iter()
            .map(|s| program.statements[s.index()].depth())
            .sum()
    };
    let mut nests = schedule.nests_at(band.start);
    nests.reverse();
    nests.into_iter().max_by_key(depth)
}

/// The order (indices into `band`) [`sink_vector_loops`] will give the point loops of the
/// statements `nest` once `band` of `schedule` (not yet tiled) is tiled: the band's own order
/// where it keeps it.
pub fn predicted_order(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    nest: &[StmtId],
) -> Result<Vec<usize>, Error> {
    let point = Band {
        kind: BandKind::Point,
        ..*band
    };
    Ok(nest_order(program, deps, schedule, &point, nest)?
        .unwrap_or_else(|| (0..band.len).collect()))
}

/// The new order of `band`'s members for the loop nest of the statements `nest`, with their
/// coincidence among themselves, or `None` to keep it.
fn nest_order(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    nest: &[StmtId],
) -> Result<Option<Vec<usize>>, Error> {
    let flags = coincident_dims_among(program, deps, schedule, nest)?;
    Ok(choose_order(program, schedule, band, nest, &flags))
}

/// How one access moves along a band member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stride {
    Contiguous,
    Invariant,
    Strided,
}

/// The new order of the band's members (indices into the band) for the loop nest of the
/// statements `nest`, whose dimensions' coincidence is `flags`, or `None` to keep it.
fn choose_order(
    program: &Program,
    s: &PlutoSchedule,
    band: &Band,
    nest: &[StmtId],
    flags: &[bool],
) -> Option<Vec<usize>> {
    let len = band.len;
    let coincident: Vec<bool> = (0..len).map(|k| flags[band.start + k]).collect();
    let (score, contiguous) = member_scores(program, s, band, nest);
    let last = len - 1;
    let recurrence = band.kind == BandKind::Point
        && !coincident[last]
        && writes_move_along(program, s, band, nest, last);
    if recurrence {
        if let Some(k) = (0..len)
            .filter(|&k| coincident[k])
            .max_by_key(|&k| (score[k], k))
        {
            return Some(innermost_last(len, k));
        }
    }
    let parallel = (0..len)
        .filter(|&k| coincident[k] && contiguous[k] > 0)
        .max_by_key(|&k| (score[k], k));
    let best = match parallel {
        Some(k) => k,
        // No parallel member walks an array contiguously (a time-skewed band): spatial
        // locality alone decides, without giving up a parallel innermost loop.
        None if !coincident[last] => (0..len)
            .filter(|&k| contiguous[k] > 0 && score[k] > score[last])
            .max_by_key(|&k| (score[k], k))?,
        None => return None,
    };
    if best == last {
        return None;
    }
    let better = if coincident[last] {
        score[best] > score[last]
    } else {
        score[best] >= score[last]
    };
    if !better {
        return None;
    }
    let mut order = innermost_last(len, best);
    if band.kind == BandKind::Plain && coincident[0] && !coincident[order[0]] {
        // Keep the nest's outer parallel loop: bring another parallel member to the front.
        let front = order[..last].iter().position(|&k| coincident[k])?;
        let k = order.remove(front);
        order.insert(0, k);
    }
    Some(order)
}

/// The members `0..len` in their order with member `k` moved innermost.
pub(super) fn innermost_last(len: usize, k: usize) -> Vec<usize> {
    (0..len).filter(|&m| m != k).chain([k]).collect()
}

/// Per member of `band`, its score over the accesses of the statements `nest` and how many
/// of those accesses are contiguous along it (see the module docs).
pub(crate) fn member_scores(
    program: &Program,
    s: &PlutoSchedule,
    band: &Band,
    nest: &[StmtId],
) -> (Vec<i64>, Vec<usize>) {
    let mut score = vec![0i64; band.len];
    let mut contiguous = vec![0usize; band.len];
    for &id in nest {
        let (st, stmt) = (id.index(), &program.statements[id.index()]);
        let Some(steps) = member_steps(program, s, band, st) else {
            continue;
        };
        for (k, v) in steps.iter().enumerate() {
            let Some(v) = v else { continue };
            for (_, access) in stmt.accesses() {
                match stride(access, v) {
                    Stride::Contiguous => {
                        score[k] += 2;
                        contiguous[k] += 1;
                    }
                    Stride::Invariant => score[k] += 1,
                    Stride::Strided => score[k] -= 4,
                }
            }
        }
    }
    (score, contiguous)
}

/// Whether every statement of `nest` writes a different element at each step of `member` (no
/// statement keeps one element, as an accumulator does); `false` when a statement's steps are
/// not known.
pub(crate) fn writes_move_along(
    program: &Program,
    s: &PlutoSchedule,
    band: &Band,
    nest: &[StmtId],
    member: usize,
) -> bool {
    nest.iter().all(|&id| {
        let stmt = &program.statements[id.index()];
        let Some(steps) = member_steps(program, s, band, id.index()) else {
            return false;
        };
        let Some(v) = &steps[member] else {
            return false;
        };
        stride(&stmt.write, v) != Stride::Invariant
    })
}

/// For statement `st`, the iterator change of one step along each member of `band` with every
/// other non-tile loop fixed (`None` for a member the statement does not move along), or
/// `None` when its loop rows do not determine one.
fn member_steps(
    program: &Program,
    s: &PlutoSchedule,
    band: &Band,
    st: usize,
) -> Option<Vec<Option<Vec<Rational64>>>> {
    let depth = program.statements[st].depth();
    if depth == 0 {
        return None;
    }
    let row = |d: usize| -> Option<Vec<Rational64>> {
        let e = s.dims[d].exprs[st].as_affine()?;
        Some(
            (0..depth)
                .map(|k| Rational64::from_integer(e.coeff(Var::Iter(k))))
                .collect(),
        )
    };
    // The statement's loop rows outside tile bands, keeping only independent ones.
    let mut rows: Vec<Vec<Rational64>> = Vec::new();
    let mut position_of_member = vec![None; band.len];
    for d in 0..s.dims.len() {
        if s.dims[d].kind != DimKind::Loop {
            continue;
        }
        if s.band_of(d).is_some_and(|b| b.kind == BandKind::Tile) {
            continue;
        }
        let r = row(d)?;
        if r.iter().all(Zero::is_zero) {
            continue;
        }
        let mut candidate = rows.clone();
        candidate.push(r.clone());
        if rank(&candidate) == candidate.len() {
            if (band.start..band.start + band.len).contains(&d) {
                position_of_member[d - band.start] = Some(rows.len());
            }
            rows = candidate;
        }
    }
    if rows.len() != depth {
        return None;
    }
    let inverse = invert(&rows)?;
    Some(
        position_of_member
            .iter()
            .map(|p| p.map(|p| inverse.iter().map(|r| r[p]).collect()))
            .collect(),
    )
}

fn stride(access: &crate::program::Access, v: &[Rational64]) -> Stride {
    // A division variable moves with the iterators it reads, by steps of 0 or 1 in turn.
    if access.subscripts.iter().any(|e| e.has_divisions()) {
        return Stride::Strided;
    }
    let moves: Vec<Rational64> = access
        .subscripts
        .iter()
        .map(|e| {
            v.iter()
                .enumerate()
                .map(|(k, x)| *x * Rational64::from_integer(e.coeff(Var::Iter(k))))
                .sum()
        })
        .collect();
    match moves.split_last() {
        None => Stride::Invariant,
        Some((last, rest)) if rest.iter().all(Zero::is_zero) => {
            if last.is_zero() {
                Stride::Invariant
            } else if last.abs().is_one() {
                Stride::Contiguous
            } else {
                Stride::Strided
            }
        }
        Some(_) => Stride::Strided,
    }
}

/// The rank of a rational matrix.
fn rank(rows: &[Vec<Rational64>]) -> usize {
    let mut m = rows.to_vec();
    let cols = m.first().map_or(0, Vec::len);
    let mut r = 0;
    for c in 0..cols {
        let Some(p) = (r..m.len()).find(|&i| !m[i][c].is_zero()) else {
            continue;
        };
        m.swap(r, p);
        let pivot = m[r].clone();
        for row in m.iter_mut().skip(r + 1) {
            let f = row[c] / pivot[c];
            for (x, y) in row.iter_mut().zip(&pivot) {
                *x -= f * *y;
            }
        }
        r += 1;
    }
    r
}

/// The inverse of a square rational matrix, or `None` when it is singular.
pub(crate) fn invert(rows: &[Vec<Rational64>]) -> Option<Vec<Vec<Rational64>>> {
    let n = rows.len();
    let mut m: Vec<Vec<Rational64>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut r = r.clone();
            r.extend((0..n).map(|j| {
                if i == j {
                    Rational64::one()
                } else {
                    Rational64::zero()
                }
            }));
            r
        })
        .collect();
    for c in 0..n {
        let p = (c..n).find(|&i| !m[i][c].is_zero())?;
        m.swap(c, p);
        let pivot = m[c][c];
        for x in m[c].iter_mut() {
            *x /= pivot;
        }
        let prow = m[c].clone();
        for (i, row) in m.iter_mut().enumerate() {
            if i != c && !row[c].is_zero() {
                let f = row[c];
                for (x, y) in row.iter_mut().zip(&prow) {
                    *x -= f * *y;
                }
            }
        }
    }
    Some(m.into_iter().map(|r| r[n..].to_vec()).collect())
}

/// The intra-tile permutation pass ([`sink_vector_loops`]).
pub const PASS: Pass = Pass {
    name: "intra-tile",
    summary: "inside each point band, a parallel loop with stride-one accesses made innermost",
    enabled: |target, options| options.intra_tile && target.vector.is_some(),
    run,
};

fn run(cx: &mut PassContext) -> Result<(), PipelineError> {
    let permuted = sink_vector_loops(cx.program, cx.deps, &cx.schedule)?;
    cx.set_schedule(permuted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(rows: &[&[i64]]) -> Vec<Vec<Rational64>> {
        rows.iter()
            .map(|r| r.iter().map(|&x| Rational64::from_integer(x)).collect())
            .collect()
    }

    #[test]
    fn inverse_of_a_skew() {
        // t, 2t + i: one step of the second row moves i by 1; one of the first moves t by 1
        // and i by -2.
        let inv = invert(&q(&[&[1, 0], &[2, 1]])).unwrap();
        assert_eq!(inv, q(&[&[1, 0], &[-2, 1]]));
        assert!(invert(&q(&[&[1, 2], &[2, 4]])).is_none());
        assert_eq!(rank(&q(&[&[1, 2], &[2, 4], &[0, 1]])), 2);
    }
}
