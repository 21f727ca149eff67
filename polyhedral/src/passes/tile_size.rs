//! Tile-size selection: how large the tiles of a permutable band are, read from the target's
//! description alone (never from its name). The tiling transformation itself is in
//! [`super::tile`]; [`band_sizes`] is the one entry point it calls.
//!
//! The rules, chosen by what the description holds:
//!
//! - **caches with their geometry** (line size, associativity, miss penalty: a CPU): the
//!   sizes the cache model's search finds cheapest ([`crate::cache_model::search_band`]),
//!   when they beat the capacity rule's below by a clear margin;
//! - **caches without it**, or a schedule the model does not cover: with two or more caches,
//!   the cache rule of [`hierarchy_sizes`] (for a time-skewed band whose blocks move too far
//!   from one time step to the next, the densest tile that fits the second cache,
//!   [`skewed_sizes`]); with one, the uniform rule on it; then, where the band's tiles run
//!   as a wavefront on a target with parallel units, fewer and longer tiles that still fit
//!   the closest cache ([`wavefront_sizes`]);
//! - **workgroups** (a GPU): the largest uniform power of two for which the band's parallel
//!   members fit the workgroup's invocation limits (in all and per dimension), the tile's
//!   footprint fits the workgroup memory and, where the machine caps the loop iterations of
//!   one invocation, the tile's sequential iterations stay well below the cap;
//! - **scratchpads** (an accelerator): the largest uniform power of two whose footprint fits the
//!   smallest scratchpad, a multiple of the matrix unit's fractal where the target has one;
//!   on several cores, reshaped so that the band's outer parallel tiles are at least as many
//!   as the cores, with a longer vector loop where that fits ([`core_sizes`]);
//! - otherwise nothing is tiled.
//!
//! Footprints are the bounding boxes of the array elements one interior tile touches, computed
//! exactly from the access relations at the program's parameter values ([`footprint`]).

use crate::cache_model::{search_band, wavefront_tiles, PARALLEL_TILE};
use crate::deps::Dependences;
use crate::passes::tile::Lookahead;
use crate::program::{AffineExpr, ConstraintKind, Program, StmtId, Var};
use crate::sets::{Map, Set, Tuple};
use crate::target::{MemoryNode, TargetDescription};

use super::intra_tile::predicted_innermost;
use crate::schedule::pluto::{
    affine_row, affine_row_with_divs, stmt_tuple, Band, DimKind, Error, PlutoSchedule,
};

/// Where tile sizes come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TileSizes {
    /// No tiling.
    Off,
    /// One size per band member, outermost first; a band longer than the list repeats the
    /// last size.
    Fixed(Vec<i64>),
    /// The rules of the module docs, on the target's description.
    #[default]
    FromTarget,
}

/// The tile sizes of `band`, one per member (all 1: leave the band untiled). `lookahead` holds
/// the passes after tiling that the cache model's search may look ahead to (the buffers the
/// pack pass gives its finalists).
pub fn band_sizes(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    sizes: &TileSizes,
    lookahead: Option<&Lookahead>,
    target: &TargetDescription,
) -> Result<Vec<i64>, Error> {
    match sizes {
        TileSizes::Off => Ok(vec![1; band.len]),
        TileSizes::Fixed(v) => Ok((0..band.len)
            .map(|k| *v.get(k).unwrap_or(v.last().unwrap_or(&1)))
            .collect()),
        TileSizes::FromTarget => {
            match search_band(program, deps, schedule, band, target, lookahead)? {
                Some(found) => Ok(found.best.sizes),
                None => rule_sizes(program, deps, schedule, band, target),
            }
        }
    }
}

/// The sizes of the capacity rules of the module docs (without the cache model).
pub(crate) fn rule_sizes(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    target: &TargetDescription,
) -> Result<Vec<i64>, Error> {
    let caches = target.memory.cache_chain();
    if let Some(closest) = caches.first() {
        let sizes = cache_sizes(program, deps, schedule, band, target, &caches)?;
        return wavefront_sizes(program, schedule, band, target, sizes, closest.bytes);
    }
    let smallest = target.memory.scratchpads().map(|m| m.bytes).min();
    if let Some((max_total, max_per_dim)) = target.invocations() {
        let bytes = smallest.unwrap_or(u64::MAX);
        let parallel: Vec<usize> = (0..band.len)
            .filter(|&k| schedule.dims[band.start + k].coincident)
            .collect();
        let mapped = parallel.len().min(3);
        // The members not mapped to invocations run sequentially in one invocation, inside
        // whatever loops enclose the tile: under a cap on the loop iterations of one
        // invocation, a tile's own share stays a sixteenth of it.
        let sequential = (band.len - mapped) as u32;
        let budget = target
            .loop_iterations()
            .map_or(u64::MAX, |cap| u64::from(cap) / LOOP_CAP_SHARE);
        return uniform_sizes(program, schedule, band, bytes, |t| {
            (t as u64).saturating_pow(mapped as u32) <= max_total as u64
                && max_per_dim[..mapped].iter().all(|&m| t <= m as i64)
                && (t as u64).saturating_pow(sequential) <= budget
        });
    }
    if let Some(bytes) = smallest {
        let multiple = target
            .fractal()
            .map_or(1, |(m, n, k)| m.max(n).max(k) as i64);
        let sizes = match vector_first_sizes(program, deps, schedule, band, target, bytes)? {
            Some(sizes) => sizes,
            None => uniform_sizes(program, schedule, band, bytes, |t| t % multiple == 0)?,
        };
        return core_sizes(program, deps, schedule, band, target, sizes, bytes);
    }
    Ok(vec![1; band.len])
}

/// On a scratchpad target with a vector unit, the sizes of a band whose innermost loop will
/// be vectorized ([`predicted_innermost`]): that member gets the unit's tile length (or all of
/// it, where it is shorter), a multiple of the matrix unit's fractal where there is one; the
/// others the largest uniform power of two with which the tile fits `bytes`. Where not even
/// tiles of 1 along the others fit, the vector member is halved (down to one vector of its
/// narrowest type). `None` where the band has no such member or no vector unit.
fn vector_first_sizes(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    target: &TargetDescription,
    bytes: u64,
) -> Result<Option<Vec<i64>>, Error> {
    let Some(unit) = target.vector else {
        return Ok(None);
    };
    let Some(v) = predicted_innermost(program, deps, schedule, band)? else {
        return Ok(None);
    };
    let multiple = target
        .fractal()
        .map_or(1, |(m, n, k)| i64::from(m.max(n).max(k)));
    let extent = member_extents(program, schedule, band)?[v];
    let round = |t: i64| (t + multiple - 1) / multiple * multiple;
    let lanes = unit.narrowest_lanes(program);
    let mut length = round(unit.tile_length(program).min(extent.max(1)));
    loop {
        let mut sizes = vec![1i64; band.len];
        sizes[v] = length;
        for t in TILE_SIZES.into_iter().chain([1]) {
            for (k, size) in sizes.iter_mut().enumerate() {
                if k != v {
                    *size = t;
                }
            }
            if footprint(program, schedule, band, &sizes)? <= bytes {
                return Ok(Some(sizes));
            }
        }
        if length / 2 < lanes.max(multiple) {
            return Ok(None);
        }
        length = round(length / 2);
    }
}

/// On a target of several cores that take the tiles of a band's outer parallel members (its
/// leading coincident members, spread over the cores together): where `sizes` give fewer
/// such tiles than there are cores, the sizes of those members halved, outermost first, until
/// there are as many (down to 2), all but the member that will run innermost
/// ([`predicted_innermost`], the vector loop); then that member's doubled while the tile still
/// fits `bytes`, is shorter than the member and leaves as many tiles for the cores (longer
/// vector loops, fewer sequential tiles).
/// `sizes` otherwise.
fn core_sizes(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    target: &TargetDescription,
    sizes: Vec<i64>,
    bytes: u64,
) -> Result<Vec<i64>, Error> {
    let cores = i64::from(target.cores());
    let lead = (0..band.len)
        .take_while(|&k| schedule.dims[band.start + k].coincident)
        .count();
    if cores <= 1 || lead == 0 || sizes.iter().all(|&t| t == 1) {
        return Ok(sizes);
    }
    let extents = member_extents(program, schedule, band)?;
    let last = predicted_innermost(program, deps, schedule, band)?.unwrap_or(band.len - 1);
    let tiles = |s: &[i64]| -> i64 {
        (0..lead)
            .map(|k| (extents[k] + s[k] - 1) / s[k].max(1))
            .product()
    };
    if tiles(&sizes) >= cores {
        return Ok(sizes);
    }
    let mut out = sizes.clone();
    'halve: while tiles(&out) < cores {
        for k in (0..lead).filter(|&k| k != last) {
            let count = |t: i64| (extents[k] + t - 1) / t;
            if out[k] > 2 && count(out[k] / 2) > count(out[k]) {
                out[k] /= 2;
                continue 'halve;
            }
        }
        break;
    }
    if out == sizes {
        return Ok(sizes);
    }
    while out[last] > 1 && out[last] < extents[last] {
        let mut longer = out.clone();
        longer[last] *= 2;
        if tiles(&longer) < cores.min(tiles(&out))
            || footprint(program, schedule, band, &longer)? > bytes
        {
            break;
        }
        out = longer;
    }
    Ok(out)
}

/// The capacity rules' sizes on a target with the caches `caches` (closest first, at least
/// one): the uniform rule on the only cache, or with two or more, the cache rule of
/// [`hierarchy_sizes`] for a band of three or more members whose innermost will be vectorized.
fn cache_sizes(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    target: &TargetDescription,
    caches: &[&MemoryNode],
) -> Result<Vec<i64>, Error> {
    let (l1, l2) = match caches {
        [l1, l2, ..] => (l1.bytes, l2.bytes),
        _ => return uniform_sizes(program, schedule, band, caches[0].bytes, |_| true),
    };
    // Two-member bands have no middle member whose block is reused from the L1 cache;
    // measured on PolyBench, uniform tiles that fit it serve them best. Without a vector
    // unit, long inner tiles would buy nothing.
    let vector = match target.vector {
        Some(v) if band.len >= 3 => v,
        _ => return uniform_sizes(program, schedule, band, l1, |_| true),
    };
    let length = vector.tile_length(program);
    match predicted_innermost(program, deps, schedule, band)? {
        Some(v) => hierarchy_sizes(program, schedule, band, v, l1, l2 / 2, length),
        // Nothing will be vectorized: long inner tiles would buy nothing.
        None => uniform_sizes(program, schedule, band, l1, |_| true),
    }
}

/// The sizes of a band whose tiles run as a wavefront (no member is parallel: each diagonal
/// of tiles is a parallel loop the threads finish together before the next starts), on a
/// target with parallel units, given the capacity rule's `sizes`: each tiled member is cut
/// into [`WAVEFRONT_TILES`](crate::cache_model::WAVEFRONT_TILES) tiles
/// ([`wavefront_tiles`]) where that makes its tiles longer, as long as one tile still fits
/// the closest cache (`closest` bytes): the band keeps the locality the rule gave it, with
/// fewer diagonals to wait for. Where the band's data fits that cache several times over,
/// the rule's sizes are the largest it tries (256), and the diagonals, not the cache, decide
/// the time: jacobi-1d at PolyBench's EXTRALARGE (4,000 points, 1,000 steps) in tiles of
/// 256 x 256 made 27 diagonals of at most 4 tiles and ran no faster than gcc's sequential
/// loops (1.61 against 1.60 ms); in 256 x 750, 11 diagonals, it ran in 1.50 ms (medians of
/// 21 interleaved runs on 2 threads). `sizes` as they are otherwise.
fn wavefront_sizes(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    target: &TargetDescription,
    sizes: Vec<i64>,
    closest: u64,
) -> Result<Vec<i64>, Error> {
    let parallel = (0..band.len).any(|k| schedule.dims[band.start + k].coincident);
    if parallel || !target.has_parallel_units() || sizes.iter().all(|&t| t == 1) {
        return Ok(sizes);
    }
    let extents = member_extents(program, schedule, band)?;
    let longer: Vec<i64> = sizes
        .iter()
        .zip(&extents)
        .map(|(&t, &extent)| match t {
            1 => 1,
            t => t.max(wavefront_tiles(extent, 1)),
        })
        .collect();
    if longer != sizes && footprint(program, schedule, band, &longer)? <= closest {
        return Ok(longer);
    }
    Ok(sizes)
}

/// The extent of each member of `band` at the program's sizes: the most values its loop
/// function takes over a statement's domain (estimated from the domain's bounding box).
fn member_extents(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
) -> Result<Vec<i64>, Error> {
    let values = program.param_values();
    let spans = domain_spans(program)?;
    Ok((0..band.len)
        .map(|k| {
            spans
                .iter()
                .enumerate()
                .filter_map(|(si, spans)| {
                    let phi = schedule.dims[band.start + k].exprs[si]
                        .as_affine()?
                        .bind_params(&values);
                    Some(values_taken(&phi, spans.as_ref()?, |_| true))
                })
                .max()
                .unwrap_or(1)
        })
        .collect())
}

/// Under a cap on the loop iterations of one invocation, the sequential iterations of one tile
/// are at most this fraction of it.
pub(crate) const LOOP_CAP_SHARE: u64 = 16;

/// The sizes the capacity rules choose from, largest first.
const TILE_SIZES: [i64; 8] = [256, 128, 64, 32, 16, 8, 4, 2];

/// The largest uniform power of two from 2 to 256 that `allowed` accepts and whose tile
/// footprint fits `bytes` (1 when none does).
fn uniform_sizes(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    bytes: u64,
    allowed: impl Fn(i64) -> bool,
) -> Result<Vec<i64>, Error> {
    for t in TILE_SIZES.into_iter().filter(|&t| allowed(t)) {
        let sizes = vec![t; band.len];
        if footprint(program, schedule, band, &sizes)? <= bytes {
            return Ok(sizes);
        }
    }
    Ok(vec![1; band.len])
}

/// Tile sizes for a cache hierarchy. The member `v` (predicted by [`predicted_innermost`])
/// will run innermost, vectorized: it gets `vector` iterations, enough for long SIMD loops
/// and hardware prefetching.
/// The members between the outermost one and it get the largest uniform power of two for which
/// one iteration of the outermost member — the data reused from one iteration of it to the next
/// — fits `l1` bytes (for a matrix product, the block of the right operand). The outermost
/// member gets the largest power of two up to 256 for which the whole tile fits `l2` bytes,
/// which amortises bringing that block into the closest cache; when the outermost member is
/// parallel, at most [`PARALLEL_TILE`], so that threads get equal shares of it. When not even
/// middle tiles of 2 fit `l1`, the band gets the uniform rule instead. Where the outermost
/// member skews the middle ones and the L1 block would keep less than [`MIN_KEPT`] of its data
/// from one step of it to the next, the sizes come from [`skewed_sizes`].
fn hierarchy_sizes(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    v: usize,
    l1: u64,
    l2: u64,
    vector: i64,
) -> Result<Vec<i64>, Error> {
    let n = band.len;
    let outer = (0..n).find(|&k| k != v).unwrap_or(0);
    let middle: Vec<usize> = (0..n).filter(|&k| k != v && k != outer).collect();
    // A parallel outermost member is shared among threads tile by tile: keep its tiles small
    // enough that a loop of a few hundred iterations splits evenly.
    let cap = if schedule.dims[band.start + outer].coincident {
        PARALLEL_TILE
    } else {
        TILE_SIZES[0]
    };
    let mut sizes = vec![1i64; n];
    sizes[v] = vector.max(1);
    let mut t_mid = None;
    for t in TILE_SIZES {
        for &k in &middle {
            sizes[k] = t;
        }
        if middle.is_empty() || footprint(program, schedule, band, &sizes)? <= l1 {
            t_mid = Some(t);
            break;
        }
    }
    // Where the outermost member skews the middle ones, their block moves at every step of
    // it: the L1 rule pays only while consecutive blocks share most of their data.
    let skews = middle_skews(program, schedule, band, outer, &middle);
    let kept = |t: i64| -> f64 {
        skews
            .iter()
            .map(|&s| (t - s).max(0) as f64 / t as f64)
            .product()
    };
    if skews.iter().any(|&s| s > 0) && t_mid.is_none_or(|t| kept(t) < MIN_KEPT) {
        let shape = SkewedShape {
            v,
            outer,
            middle: &middle,
            vector,
            cap,
        };
        if let Some(sizes) = skewed_sizes(program, schedule, band, &shape, l2)? {
            return Ok(sizes);
        }
    }
    // Not even the smallest middle block fits the L1 cache: there is no reuse there for
    // long vector tiles to exploit.
    let Some(t_mid) = t_mid else {
        return uniform_sizes(program, schedule, band, l1, |_| true);
    };
    for &k in &middle {
        sizes[k] = t_mid;
    }
    for t in TILE_SIZES.into_iter().filter(|&t| t <= cap) {
        sizes[outer] = t;
        if footprint(program, schedule, band, &sizes)? <= l2 {
            return Ok(sizes);
        }
    }
    sizes[outer] = 1;
    Ok(sizes)
}

/// The members of a band [`skewed_sizes`] sizes: the one that runs innermost and vectorized
/// (`v`, `vector` iterations), the outermost one (at most `cap`) and those between.
struct SkewedShape<'a> {
    v: usize,
    outer: usize,
    middle: &'a [usize],
    vector: i64,
    cap: i64,
}

/// How far one step of the outermost member `outer` of `band` moves the block of each of
/// `members` along it, the most over the statements: the coefficient of an iterator of the
/// outermost member's loop function in the member's, over its coefficient there (2 for
/// `2t + i` under `t`; 0 where the member does not use those iterators).
fn middle_skews(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    outer: usize,
    members: &[usize],
) -> Vec<i64> {
    members
        .iter()
        .map(|&k| {
            (0..program.statements.len())
                .filter_map(|si| {
                    let phi = |k: usize| schedule.dims[band.start + k].exprs[si].as_affine();
                    let (o, m) = (phi(outer)?, phi(k)?);
                    o.terms()
                        .iter()
                        .filter(|(x, _)| matches!(x, Var::Iter(_)))
                        .map(|&(x, c)| {
                            let c = c.abs();
                            (m.coeff(x).abs() + c - 1) / c
                        })
                        .max()
                })
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// The least share of its data a middle block must keep from one step of the outermost
/// member to the next for the L1 rule of [`hierarchy_sizes`] to hold in a skewed band.
const MIN_KEPT: f64 = 0.5;

/// Tile sizes for a band whose outermost member skews the members inside it (see
/// [`middle_skews`]). There, one iteration of the outermost member reuses the block of the
/// previous one only where the two overlap: the block moves by the skew at every step, and a
/// middle block the size of the skew (the L1 rule of [`hierarchy_sizes`]: 2 × 2 columns for
/// a three-dimensional stencil) shares only its halo with the next. The reuse that remains
/// is the tile's over its whole extent along the outermost member: its footprint comes from
/// the next level once and serves all its instances. So the outermost and the middle members
/// (uniform) get the sizes with the most instances per byte of footprint among those whose
/// footprint fits `l2` bytes, the larger tile between equals; the member `v` gets `vector`
/// iterations as in [`hierarchy_sizes`]. `None` when no candidate fits.
fn skewed_sizes(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    shape: &SkewedShape,
    l2: u64,
) -> Result<Option<Vec<i64>>, Error> {
    // The domains' extents, computed at the first candidate that fits.
    let mut spans: Option<Vec<Option<Vec<i64>>>> = None;
    let mut sizes = vec![1i64; band.len];
    sizes[shape.v] = shape.vector.max(1);
    // (instances per byte, instances, sizes)
    let mut best: Option<(f64, f64, Vec<i64>)> = None;
    // Footprints grow with every size: from the smallest sizes up, each row of the search
    // ends at its first size that does not fit, and the search at a row whose first does not.
    for t_mid in TILE_SIZES.into_iter().rev() {
        for &k in shape.middle {
            sizes[k] = t_mid;
        }
        let mut fitted = false;
        for t_out in TILE_SIZES.into_iter().rev().filter(|&t| t <= shape.cap) {
            sizes[shape.outer] = t_out;
            let bytes = footprint(program, schedule, band, &sizes)?;
            if bytes > l2 {
                break;
            }
            fitted = true;
            let extents = match &spans {
                Some(s) => s,
                None => spans.insert(domain_spans(program)?),
            };
            let instances = tile_instances(program, schedule, band, shape.outer, &sizes, extents);
            let density = instances / bytes.max(1) as f64;
            let better = match &best {
                None => true,
                Some((d, i, _)) => density > *d || (density == *d && instances > *i),
            };
            if better {
                best = Some((density, instances, sizes.clone()));
            }
        }
        if !fitted {
            break;
        }
    }
    Ok(best.map(|(_, _, s)| s))
}

/// Per statement, the extent of its domain's bounding box along each iterator (`hi - lo`)
/// at the program's sizes; `None` for a statement whose domain is empty.
fn domain_spans(program: &Program) -> Result<Vec<Option<Vec<i64>>>, Error> {
    (0..program.statements.len())
        .map(|si| {
            let domain = statement_domain(program, si)?;
            let mut spans = Vec::new();
            for k in 0..program.statements[si].depth() {
                match domain.dim_range(k)? {
                    Some(r) => match (r.min, r.max) {
                        (Some(lo), Some(hi)) => spans.push((hi - lo).max(0)),
                        _ => return Err(Error::Sets(crate::sets::Error::Unbounded)),
                    },
                    None => return Ok(None),
                }
            }
            Ok(Some(spans))
        })
        .collect()
}

/// Statement instances in one interior tile of `band` with `sizes`, estimated from the
/// bounding box of each statement's domain (`spans`, from [`domain_spans`]), the largest over
/// the statements: along member `k` the tile holds at most `sizes[k]` values of the member's
/// loop function, and at most as many as the function takes while the outermost member
/// `outer` stays fixed (over the iterators that member's function does not use; the outermost
/// member itself over all).
fn tile_instances(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    outer: usize,
    sizes: &[i64],
    spans: &[Option<Vec<i64>>],
) -> f64 {
    let values = program.param_values();
    let mut largest: f64 = 0.0;
    for (si, spans) in spans.iter().enumerate() {
        // An empty domain: no instances.
        let Some(spans) = spans else {
            continue;
        };
        let phi = |k: usize| {
            schedule.dims[band.start + k].exprs[si]
                .as_affine()
                .map(|e| e.bind_params(&values))
        };
        let Some(o) = phi(outer) else {
            continue;
        };
        let mut count = 1.0;
        for (k, &t) in sizes.iter().enumerate() {
            let Some(m) = phi(k) else {
                continue;
            };
            let taken = values_taken(&m, spans, |j| k == outer || o.coeff(Var::Iter(j)) == 0);
            count *= t.min(taken) as f64;
        }
        largest = largest.max(count);
    }
    largest
}

/// The most values the affine function `f` takes over a box of iterator spans `spans` (from
/// [`domain_spans`]) while only the iterators `varying` accepts move.
fn values_taken(f: &AffineExpr, spans: &[i64], varying: impl Fn(usize) -> bool) -> i64 {
    1 + (0..spans.len())
        .filter(|&j| varying(j))
        .map(|j| f.coeff(Var::Iter(j)).abs() * spans[j])
        .sum::<i64>()
}

/// Inclusive bounds per array dimension.
type BoundingBox = Vec<(i64, i64)>;

/// Bytes of the bounding boxes of the array elements touched by one interior tile of `band`,
/// at the program's parameter values: one iteration of the loops outside the band (their
/// values fixed at an interior instance), the tile's `sizes` along the band. Statements that
/// scalar dimensions before the band put into different loop nests run their tiles at
/// different times, so the answer is the largest nest's footprint, not their sum. Every
/// statement of a nest is placed in the same tile, the one around an interior instance of the
/// nest's deepest statement: in a skewed band the interior instances of different statements
/// lie in far-apart tiles, and the union of their boxes would be no tile's footprint.
pub fn footprint(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    sizes: &[i64],
) -> Result<u64, Error> {
    let np = program.params.len();
    let values = program.param_values();
    let groups = schedule.nests_at(band.start);
    // Per loop nest, per array: the bounding box of the elements touched, once touched.
    let mut nests: Vec<Vec<Option<BoundingBox>>> =
        vec![vec![None; program.arrays.len()]; groups.len()];
    let nest_of = |si: usize| {
        groups
            .iter()
            .position(|g| g.contains(&StmtId(si as u32)))
            .unwrap_or(0)
    };
    // One tile of each nest: the one around an interior instance of its deepest statement,
    // the same tile for every statement of the nest (statements whose interior instances lie
    // in other tiles, as a skewed band places them, would otherwise add far-apart boxes).
    let mut reference: Vec<Option<(usize, Vec<i64>)>> = vec![None; groups.len()];
    for (si, s) in program.statements.iter().enumerate() {
        let slot = nest_of(si);
        if reference[slot]
            .as_ref()
            .is_some_and(|(r, _)| program.statements[*r].depth() >= s.depth())
        {
            continue;
        }
        if let Some(point) = interior_point(&statement_domain(program, si)?, s.depth())? {
            reference[slot] = Some((si, point));
        }
    }
    for (si, s) in program.statements.iter().enumerate() {
        let slot = nest_of(si);
        let Some((r, r_point)) = &reference[slot] else {
            continue;
        };
        let boxes = &mut nests[slot];
        let ds = s.depth();
        let phis: Vec<AffineExpr> = (band.start..band.start + band.len)
            .map(|d| {
                schedule.dims[d].exprs[si]
                    .as_affine()
                    .cloned()
                    .ok_or_else(|| Error::Invalid("only affine bands can be tiled".into()))
            })
            .collect::<Result<_, _>>()?;
        let (mut eqs, mut ineqs) = domain_rows(program, si);
        // The value of schedule dimension `d` at the reference instance.
        let at_reference = |d: usize| -> Option<i64> {
            Some(
                schedule.dims[d].exprs[*r]
                    .as_affine()?
                    .eval(r_point, &values),
            )
        };
        for d in 0..band.start {
            let dim = &schedule.dims[d];
            if dim.kind != DimKind::Loop {
                continue;
            }
            // A tile dimension outside the band is implied by the point dimensions it
            // divides; only affine loops are fixed.
            if let Some(phi) = dim.exprs[si].as_affine() {
                if !phi.terms().is_empty() {
                    let Some(value) = at_reference(d) else {
                        continue;
                    };
                    let mut row = bind(&affine_row(phi, np, ds), &values);
                    row[0] -= value;
                    eqs.push(row);
                }
            }
        }
        for (k, (phi, &t)) in phis.iter().zip(sizes).enumerate() {
            if phi.terms().is_empty() {
                continue;
            }
            let Some(value) = at_reference(band.start + k) else {
                continue;
            };
            let origin = value.div_euclid(t) * t;
            let mut lo = bind(&affine_row(phi, np, ds), &values);
            lo[0] -= origin;
            let mut hi: Vec<i64> = lo.iter().map(|x| -x).collect();
            hi[0] += t - 1;
            ineqs.push(lo);
            ineqs.push(hi);
        }
        let tile = Set::from_constraints(&[], stmt_tuple(s), &eqs, &ineqs)?;
        for (_, acc) in s.accesses() {
            let k = acc.subscripts.len();
            // The statement's division variables are locals after the range dimensions.
            let width = ds + k + s.divs.len();
            let mut rows = Vec::new();
            for (j, e) in acc.subscripts.iter().enumerate() {
                let mut r = bind(&affine_row_with_divs(e, np, ds + k, width), &values);
                r[1 + ds + j] = -1;
                rows.push(r);
            }
            let mut div_rows = Vec::new();
            for (q, d) in s.divs.iter().enumerate() {
                // den·q <= num <= den·q + den - 1
                let mut lo = bind(&affine_row_with_divs(&d.num, np, ds + k, width), &values);
                lo[1 + ds + k + q] -= d.den;
                let mut hi: Vec<i64> = lo.iter().map(|x| -x).collect();
                hi[0] += d.den - 1;
                div_rows.push(lo);
                div_rows.push(hi);
            }
            let map = Map::from_constraints_with_locals(
                &[],
                stmt_tuple(s),
                Tuple::anonymous_dims(Some(&program.array(acc.array).name), k),
                s.divs.len(),
                &rows,
                &div_rows,
            )?;
            let image = tile.apply(&map);
            let mut b = Vec::with_capacity(k);
            for j in 0..k {
                match image.dim_range(j)? {
                    Some(r) => match (r.min, r.max) {
                        (Some(lo), Some(hi)) => b.push((lo, hi)),
                        _ => return Err(Error::Sets(crate::sets::Error::Unbounded)),
                    },
                    None => break,
                }
            }
            if b.len() < k {
                continue;
            }
            let slot = &mut boxes[acc.array.index()];
            *slot = Some(match slot.take() {
                None => b,
                Some(old) => old
                    .iter()
                    .zip(&b)
                    .map(|(&(a, bb), &(c, d))| (a.min(c), bb.max(d)))
                    .collect(),
            });
        }
    }
    let mut largest: u64 = 0;
    for boxes in &nests {
        let mut total: u64 = 0;
        for (a, b) in boxes.iter().enumerate() {
            if let Some(b) = b {
                let elems: u64 = b
                    .iter()
                    .map(|&(lo, hi)| (hi - lo + 1).max(0) as u64)
                    .product();
                let size = program.arrays[a].elem.size_in_bytes() as u64;
                total = total.saturating_add(elems.saturating_mul(size));
            }
        }
        largest = largest.max(total);
    }
    Ok(largest)
}

/// The constraints of statement `si`'s domain at the program's sizes: (equalities,
/// inequalities).
fn domain_rows(program: &Program, si: usize) -> (Vec<Vec<i64>>, Vec<Vec<i64>>) {
    let s = &program.statements[si];
    let values = program.param_values();
    let mut eqs = Vec::new();
    let mut ineqs = Vec::new();
    for c in &s.domain {
        let r = bind(
            &affine_row(&c.expr, program.params.len(), s.depth()),
            &values,
        );
        match c.kind {
            ConstraintKind::Zero => eqs.push(r),
            ConstraintKind::NonNegative => ineqs.push(r),
        }
    }
    (eqs, ineqs)
}

/// Statement `si`'s domain at the program's sizes.
fn statement_domain(program: &Program, si: usize) -> Result<Set, Error> {
    let (eqs, ineqs) = domain_rows(program, si);
    Ok(Set::from_constraints(
        &[],
        stmt_tuple(&program.statements[si]),
        &eqs,
        &ineqs,
    )?)
}

/// A point of a parameter-free set near the middle of its bounding box (the middle itself when
/// it belongs to the set, else the lexicographic minimum).
fn interior_point(set: &Set, depth: usize) -> Result<Option<Vec<i64>>, Error> {
    let mut mid = Vec::with_capacity(depth);
    for k in 0..depth {
        match set.dim_range(k)? {
            Some(r) => match (r.min, r.max) {
                (Some(lo), Some(hi)) => mid.push(lo + (hi - lo) / 2),
                _ => return Err(Error::Sets(crate::sets::Error::Unbounded)),
            },
            None => return Ok(None),
        }
    }
    if set.contains(&[], &mid).unwrap_or(false) {
        return Ok(Some(mid));
    }
    Ok(set.lexmin_point()?)
}

/// A row with parameter columns replaced by their values (folded into the constant).
fn bind(row: &[i64], values: &[i64]) -> Vec<i64> {
    let np = values.len();
    let mut out = Vec::with_capacity(row.len() - np);
    out.push(
        row[0]
            + row[1..=np]
                .iter()
                .zip(values)
                .map(|(a, v)| a * v)
                .sum::<i64>(),
    );
    out.extend_from_slice(&row[1 + np..]);
    out
}
