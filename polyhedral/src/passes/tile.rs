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
//! Tile sizes are given, or chosen from the target's description by [`super::tile_size`].
//!
//! Invariants: the output is a [`PlutoSchedule`] whose coincident flags are recomputed exactly
//! for the new dimensions; bands that are not tiled are copied unchanged.

use crate::deps::Dependences;
use crate::passes::{Pass, PassContext};
use crate::pipeline::{Error as PipelineError, Options as PipelineOptions};
use crate::program::{Program, StmtId};

use super::tile_size::{band_sizes, TileSizes};
use crate::schedule::expr::QuasiAffine;
use crate::schedule::pluto::{
    coincident_dims, coincident_dims_among, Band, BandKind, DimKind, Error, PlutoSchedule,
    ScheduleDim,
};
use crate::target::TargetDescription;

/// Tiling options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileOptions {
    pub sizes: TileSizes,
    /// Turn tile bands whose first member is not parallel into wavefronts.
    pub wavefront: bool,
    /// The passes after tiling that the cache model's search looks ahead to for the packed
    /// buffers they give ([`crate::cache_model::search_band`]).
    pub lookahead: Option<Lookahead>,
}

/// What the tile search runs on its finalists to rank them with the buffers packing gives
/// them: the passes after tiling up to packing, and the options they run under (unverified;
/// post-tiling fusion, which would change which statements a tile holds, left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookahead {
    pub passes: Vec<&'static Pass>,
    pub options: PipelineOptions,
}

impl Lookahead {
    /// The look-ahead of the pipeline's tiling for `target` under `options`; `None` where it
    /// does not tile or does not pack.
    pub fn of(target: &TargetDescription, options: &PipelineOptions) -> Option<Lookahead> {
        let pipeline = super::select(target, options);
        let at = pipeline.iter().position(|p| **p == PASS)?;
        Lookahead::after_tiling(&pipeline[at + 1..], options)
    }

    /// The look-ahead through `later`, the passes that run after tiling under `options`;
    /// `None` where packing is not among them.
    pub fn after_tiling(later: &[&'static Pass], options: &PipelineOptions) -> Option<Lookahead> {
        let end = later.iter().position(|p| **p == super::pack::PASS)?;
        Some(Lookahead {
            passes: later[..=end]
                .iter()
                .copied()
                .filter(|p| **p != super::post_tiling_fusion::PASS)
                .collect(),
            options: PipelineOptions {
                verify: false,
                post_tiling_fusion: false,
                ..options.clone()
            },
        })
    }
}

impl Default for TileOptions {
    fn default() -> TileOptions {
        TileOptions {
            sizes: TileSizes::Fixed(vec![32]),
            wavefront: true,
            lookahead: None,
        }
    }
}

/// Tiles every permutable band of at least two loop members of `schedule`.
pub fn tile(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    options: &TileOptions,
    target: &TargetDescription,
) -> Result<PlutoSchedule, Error> {
    if let TileSizes::Fixed(v) = &options.sizes {
        if v.is_empty() || v.iter().any(|&t| t < 1) {
            return Err(Error::Invalid(
                "tile sizes must be a non-empty list of positive integers".into(),
            ));
        }
    }
    tile_with(program, deps, schedule, options.wavefront, &mut |band| {
        band_sizes(
            program,
            deps,
            schedule,
            band,
            &options.sizes,
            options.lookahead.as_ref(),
            target,
        )
    })
}

/// `schedule` with only `band` tiled, in tiles of `sizes` (one per member), as [`tile`]
/// tiles it.
pub(crate) fn tile_band(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    sizes: &[i64],
    wavefront: bool,
) -> Result<PlutoSchedule, Error> {
    tile_with(program, deps, schedule, wavefront, &mut |b| {
        Ok(if b == band {
            sizes.to_vec()
        } else {
            vec![1; b.len]
        })
    })
}

/// Tiles every permutable band of at least two loop members of `schedule` in tiles of the
/// sizes `sizes_of` gives it (all 1: the band stays untiled).
fn tile_with(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    wavefront: bool,
    sizes_of: &mut dyn FnMut(&Band) -> Result<Vec<i64>, Error>,
) -> Result<PlutoSchedule, Error> {
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
            sizes_of(&band)?
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
                None if wavefront => make_wavefront(&mut out, &b, &nest),
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

/// The tiling pass: every permutable band of two or more loops split into a tile band and a
/// point band, with sizes from [`crate::pipeline::Options::tiling`].
pub const PASS: Pass = Pass {
    name: "tile",
    summary:
        "permutable bands of two or more loops split into tile and point bands, sized by the cache \
        model or `--tile`; tile wavefronts where the outer tile loop carries a dependence",
    enabled: |_, options| options.tiling != TileSizes::Off,
    run,
};

fn run(cx: &mut PassContext) -> Result<(), PipelineError> {
    let deepest = deepest_tileable_band(&cx.schedule);
    if deepest == 0 {
        return Ok(());
    }
    if let TileSizes::Fixed(sizes) = &cx.options.tiling {
        if sizes.len() != deepest {
            return Err(PipelineError::TileSizes(format!(
                "{} tile sizes given, but the deepest permutable band of `{}` has {deepest} \
                 members",
                sizes.len(),
                cx.program.name
            )));
        }
        if let Some(t) = sizes.iter().find(|&&t| t < 1) {
            return Err(PipelineError::TileSizes(format!(
                "tile sizes must be positive, found {t}"
            )));
        }
    }
    let options = TileOptions {
        sizes: cx.options.tiling.clone(),
        wavefront: cx.options.wavefront,
        lookahead: Lookahead::after_tiling(cx.later(), cx.options),
    };
    let tiled = tile(cx.program, cx.deps, &cx.schedule, &options, cx.target)?;
    cx.set_schedule(tiled)
}

/// The members of the deepest band tiling would split (permutable, at least two loops).
pub fn deepest_tileable_band(schedule: &PlutoSchedule) -> usize {
    schedule
        .bands
        .iter()
        .filter(|b| {
            b.permutable
                && b.kind == BandKind::Plain
                && b.len >= 2
                && schedule.dims[b.start..b.start + b.len]
                    .iter()
                    .all(|d| d.kind == DimKind::Loop)
        })
        .map(|b| b.len)
        .max()
        .unwrap_or(0)
}
