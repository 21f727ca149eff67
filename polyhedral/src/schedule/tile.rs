//! Tiling of permutable bands (Pluto's second stage).
//!
//! A permutable band `(φ_1, …, φ_n)` of at least two members becomes a *tile band*
//! `(floor(φ_1 / T_1), …, floor(φ_n / T_n))` followed by a *point band* `(φ_1, …, φ_n)`. Since
//! every dependence distance of a permutable band is non-negative on each member, tiles are
//! executed in an order that respects them (rectangular tiles of the band's space, which are
//! parallelograms in the original iteration space). Both bands are permutable.
//!
//! When the outermost tile member carries a dependence but another member is parallel, that
//! member becomes the outermost tile loop. When none is, the tile band is turned into a
//! wavefront (the seed's figure 10): its first member becomes the sum of the tile members, so
//! every dependence between different tiles is carried by that first member and the remaining
//! tile members become parallel.
//!
//! Tile sizes are given, or chosen by a capacity rule: the largest uniform size whose tile
//! footprint — the bounding boxes of the array elements one tile touches, computed exactly
//! from the access relations at the program's parameter values — fits a cache of the given
//! size.
//!
//! Invariants: the output is a [`PlutoSchedule`] whose coincident flags are recomputed exactly
//! for the new dimensions; bands that are not tiled are copied unchanged.

use crate::deps::Dependences;
use crate::program::{AffineExpr, ConstraintKind, Program, StmtId};
use crate::sets::{Map, Set, Tuple};

use super::expr::QuasiAffine;
use super::intra_tile::predicted_innermost;
use super::pluto::{
    affine_row, coincident_dims, coincident_dims_among, stmt_tuple, Band, BandKind, DimKind, Error,
    PlutoSchedule, ScheduleDim,
};

/// Where tile sizes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TileSizes {
    /// One size per band member, outermost first; a band longer than the list repeats the
    /// last size.
    Fixed(Vec<i64>),
    /// The largest uniform size (a power of two from 2 to 256) whose footprint fits in this
    /// many bytes.
    Capacity { bytes: u64 },
    /// Sizes for a cache hierarchy (see [`hierarchy_sizes`]): the member that intra-tile
    /// permutation will make the innermost, vectorized loop gets `vector` iterations, the
    /// middle members the largest uniform size whose one-outer-iteration footprint fits `l1`
    /// bytes, the outermost member the largest size whose whole tile fits `l2` bytes. Bands
    /// of two members, and bands where nothing will be vectorized, get the uniform rule of
    /// `Capacity` with `l1`.
    Hierarchy { l1: u64, l2: u64, vector: i64 },
}

/// Tiling options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileOptions {
    pub sizes: TileSizes,
    /// Turn tile bands whose first member is not parallel into wavefronts.
    pub wavefront: bool,
}

impl Default for TileOptions {
    fn default() -> TileOptions {
        TileOptions {
            sizes: TileSizes::Fixed(vec![32]),
            wavefront: true,
        }
    }
}

/// Tiles every permutable band of at least two loop members of `schedule`.
pub fn tile(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    options: &TileOptions,
) -> Result<PlutoSchedule, Error> {
    if let TileSizes::Fixed(v) = &options.sizes {
        if v.is_empty() || v.iter().any(|&t| t < 1) {
            return Err(Error::Invalid(
                "tile sizes must be a non-empty list of positive integers".into(),
            ));
        }
    }
    let mut dims: Vec<ScheduleDim> = Vec::new();
    let mut bands: Vec<Band> = Vec::new();
    let mut d = 0;
    while d < schedule.dims.len() {
        let band = schedule.bands.iter().find(|b| b.start == d).copied();
        let Some(band) = band else {
            dims.push(schedule.dims[d].clone());
            d += 1;
            continue;
        };
        let members = &schedule.dims[band.start..band.start + band.len];
        let tileable = band.permutable
            && band.kind == BandKind::Plain
            && band.len >= 2
            && members.iter().all(|m| m.kind == DimKind::Loop);
        let sizes = if tileable {
            band_sizes(program, deps, schedule, &band, &options.sizes)?
        } else {
            Vec::new()
        };
        if !tileable || sizes.iter().all(|&t| t == 1) {
            bands.push(Band {
                start: dims.len(),
                ..band
            });
            dims.extend(members.iter().cloned());
            d += band.len;
            continue;
        }
        let tile_start = dims.len();
        for (m, &t) in members.iter().zip(&sizes) {
            let exprs = m
                .exprs
                .iter()
                .map(|e| {
                    if !e.is_affine() {
                        return Err(Error::Invalid("only affine bands can be tiled".into()));
                    }
                    e.floor_div(t)
                        .ok_or_else(|| Error::Invalid("tile sizes must be positive".into()))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            dims.push(ScheduleDim {
                kind: DimKind::Loop,
                exprs,
                coincident: false,
            });
        }
        bands.push(Band {
            start: tile_start,
            len: band.len,
            permutable: true,
            kind: BandKind::Tile,
        });
        bands.push(Band {
            start: dims.len(),
            len: band.len,
            permutable: true,
            kind: BandKind::Point,
        });
        dims.extend(members.iter().cloned());
        d += band.len;
    }
    let mut out = PlutoSchedule { dims, bands };
    refresh_coincidence(program, deps, &mut out)?;
    // Per loop nest (statements that scalar dimensions distribute share the band's dimensions
    // but not its loops): a parallel tile loop goes outermost in its band (the band is
    // permutable), so that tiles run in parallel without a wavefront; where no tile loop is
    // parallel, the band becomes a wavefront.
    let mut changed = false;
    for b in out.bands.clone() {
        if b.kind != BandKind::Tile || b.len < 2 {
            continue;
        }
        for nest in out.nests_at(b.start) {
            let flags = coincident_dims_among(program, deps, &out, &nest)?;
            if flags[b.start] {
                continue;
            }
            match (b.start..b.start + b.len).find(|&d| flags[d]) {
                Some(k) => {
                    for &s in &nest {
                        let member = out.dims[k].exprs[s.index()].clone();
                        for d in (b.start..k).rev() {
                            out.dims[d + 1].exprs[s.index()] = out.dims[d].exprs[s.index()].clone();
                        }
                        out.dims[b.start].exprs[s.index()] = member;
                    }
                }
                None if options.wavefront => make_wavefront(&mut out, &b, &nest),
                None => continue,
            }
            changed = true;
        }
    }
    if changed {
        refresh_coincidence(program, deps, &mut out)?;
    }
    Ok(out)
}

fn refresh_coincidence(
    program: &Program,
    deps: &Dependences,
    s: &mut PlutoSchedule,
) -> Result<(), Error> {
    let flags = coincident_dims(program, deps, s)?;
    for (d, f) in s.dims.iter_mut().zip(flags) {
        d.coincident = f;
    }
    Ok(())
}

/// The first member of tile band `b` becomes the sum of its members, for the statements of
/// one loop nest.
fn make_wavefront(s: &mut PlutoSchedule, b: &Band, nest: &[StmtId]) {
    for st in nest.iter().map(|s| s.index()) {
        let sum = (b.start..b.start + b.len).fold(QuasiAffine::default(), |acc, d| {
            acc.add(&s.dims[d].exprs[st])
        });
        s.dims[b.start].exprs[st] = sum;
    }
}

fn band_sizes(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    sizes: &TileSizes,
) -> Result<Vec<i64>, Error> {
    match sizes {
        &TileSizes::Hierarchy { l1, l2, vector } => {
            // Two-member bands have no middle member whose block is reused from the L1
            // cache; measured on PolyBench, uniform tiles that fit it serve them best.
            if band.len < 3 {
                return uniform_sizes(program, schedule, band, l1);
            }
            match predicted_innermost(program, deps, schedule, band)? {
                Some(v) => hierarchy_sizes(program, schedule, band, v, l1, l2, vector),
                // Nothing will be vectorized: long inner tiles would buy nothing.
                None => uniform_sizes(program, schedule, band, l1),
            }
        }
        TileSizes::Fixed(v) => Ok((0..band.len)
            .map(|k| *v.get(k).unwrap_or(v.last().unwrap_or(&1)))
            .collect()),
        &TileSizes::Capacity { bytes } => uniform_sizes(program, schedule, band, bytes),
    }
}

/// The sizes the capacity rules choose from, largest first.
const TILE_SIZES: [i64; 8] = [256, 128, 64, 32, 16, 8, 4, 2];

/// The largest uniform power of two from 2 to 256 whose tile footprint fits `bytes` (1 when
/// none does).
fn uniform_sizes(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    bytes: u64,
) -> Result<Vec<i64>, Error> {
    for t in TILE_SIZES {
        let sizes = vec![t; band.len];
        if footprint(program, schedule, band, &sizes)? <= bytes {
            return Ok(sizes);
        }
    }
    Ok(vec![1; band.len])
}

/// The largest tile of a parallel outermost member under [`TileSizes::Hierarchy`]: a loop of
/// 500 to 1,000 iterations then has 16 to 32 tiles, which 2 to 8 threads share with at most
/// one tile of imbalance, while the block reused from the L1 cache is still brought in only
/// once per 32 iterations.
const PARALLEL_TILE: i64 = 32;

/// Tile sizes for a cache hierarchy. The member `v` (predicted by [`predicted_innermost`])
/// will run innermost, vectorized: it gets `vector` iterations, enough for long SIMD loops
/// and hardware prefetching.
/// The members between the outermost one and it get the largest uniform power of two for which
/// one iteration of the outermost member — the data reused from one iteration of it to the next
/// — fits `l1` bytes (for a matrix product, the block of the right operand). The outermost
/// member gets the largest power of two up to 256 for which the whole tile fits `l2` bytes,
/// which amortises bringing that block into the closest cache; when the outermost member is
/// parallel, at most [`PARALLEL_TILE`], so that threads get equal shares of it. When not even
/// middle tiles of 2 fit `l1`, the band gets the uniform rule instead.
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
    // Not even the smallest middle block fits the L1 cache: there is no reuse there for
    // long vector tiles to exploit.
    let Some(t_mid) = t_mid else {
        return uniform_sizes(program, schedule, band, l1);
    };
    for &k in &middle {
        sizes[k] = t_mid;
    }
    // A parallel outermost member is shared among threads tile by tile: keep its tiles small
    // enough that a loop of a few hundred iterations splits evenly.
    let cap = if schedule.dims[band.start + outer].coincident {
        PARALLEL_TILE
    } else {
        TILE_SIZES[0]
    };
    for t in TILE_SIZES.into_iter().filter(|&t| t <= cap) {
        sizes[outer] = t;
        if footprint(program, schedule, band, &sizes)? <= l2 {
            return Ok(sizes);
        }
    }
    sizes[outer] = 1;
    Ok(sizes)
}

/// Inclusive bounds per array dimension.
type BoundingBox = Vec<(i64, i64)>;

/// Bytes of the bounding boxes of the array elements touched by one interior tile of `band`,
/// at the program's parameter values: one iteration of the loops outside the band (their
/// values fixed at an interior instance), the tile's `sizes` along the band. Statements that
/// scalar dimensions before the band put into different loop nests run their tiles at
/// different times, so the answer is the largest nest's footprint, not their sum.
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
    for (si, s) in program.statements.iter().enumerate() {
        let slot = groups
            .iter()
            .position(|g| g.contains(&StmtId(si as u32)))
            .unwrap_or(0);
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
        let mut eqs = Vec::new();
        let mut ineqs = Vec::new();
        for c in &s.domain {
            let r = bind(&affine_row(&c.expr, np, ds), &values);
            match c.kind {
                ConstraintKind::Zero => eqs.push(r),
                ConstraintKind::NonNegative => ineqs.push(r),
            }
        }
        let domain = Set::from_constraints(&[], stmt_tuple(s), &eqs, &ineqs)?;
        let Some(point) = interior_point(&domain, ds)? else {
            continue;
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
                    let mut row = bind(&affine_row(phi, np, ds), &values);
                    row[0] -= phi.eval(&point, &values);
                    eqs.push(row);
                }
            }
        }
        for (phi, &t) in phis.iter().zip(sizes) {
            if phi.terms().is_empty() {
                continue;
            }
            let origin = phi.eval(&point, &values).div_euclid(t) * t;
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
            let mut rows = Vec::new();
            for (j, e) in acc.subscripts.iter().enumerate() {
                let mut r = bind(&affine_row(e, np, ds + k), &values);
                r[1 + ds + j] = -1;
                rows.push(r);
            }
            let map = Map::from_constraints(
                &[],
                stmt_tuple(s),
                Tuple::anonymous_dims(Some(&program.array(acc.array).name), k),
                &rows,
                &[],
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
