//! The tile-size search driven by the cache model (the seed's search, on the model's miss
//! counts rather than on stack-distance thresholds).
//!
//! A candidate is one size per band member; its cost is the cycles its predicted misses take
//! (each level's misses times its miss penalty). The members' sizes come from
//! [`COARSE`] (and the member's whole range, which leaves it untiled), within the limits the
//! rest of the pipeline sets: the member that will run innermost and vectorized gets a whole
//! number of the vector unit's tile length (long vector loops that start on aligned
//! boundaries, which the model does not see), the parallel member that will be the outermost tile loop
//! at most [`PARALLEL_TILE`] so that threads get even shares, and, where the point band gets
//! a register tile, the members its accumulators stay in registers across at least as many
//! iterations as the vectorized loop (the copies of the accumulators around them, one load
//! and one store each, which the model does not count as misses, stay a small part of the
//! multiply-adds). With a register tile the model walks the point band as the code does:
//! blocks of the tile's rows and columns, the members between inside them; its rows member
//! takes whole blocks of the shape with the most rows whose columns divide the vectorized
//! tiles (6x8 with AVX2: fewer operands loaded per multiply-add than 4x8), and where that
//! member is the parallel one its tiles may pass [`PARALLEL_TILE`] at sizes that 2, 4 and 8
//! threads share evenly ([`register_rows`]): every tile of rows packs the column operand's
//! tiles again (gemm's `B`), so longer ones read it fewer times. Where the band
//! streams (with the capacity rule's sizes, each execution of the band misses the closest
//! cache only on the lines it touches at all, so no shape keeps more), the innermost point
//! loop, when it walks an array contiguously, gets tiles at least a page long: the hardware
//! prefetcher follows a run to the end of its page, and a shorter tile restarts it at every
//! tile, which the model does not see (gesummv's rows ran almost twice as fast in tiles of
//! 512 as in tiles of 32).
//! Where no member of such a band is parallel and the band streams the kernel's data once,
//! that member stays untiled: its tiles would only make the band a wavefront of tiles that
//! wait for each other (trisolv). A band that sweeps its data again at every step of a loop
//! around it (floyd-warshall) stays tiled, since untiled every sweep would run on one
//! thread, but its wavefront's diagonals, not the prefetcher, decide the shape: every member
//! is cut into [`WAVEFRONT_TILES`] tiles ([`wavefront_tiles`]). Where the streamed member is
//! also the parallel one, whose tiles are capped at [`PARALLEL_TILE`], the band is judged
//! with that member page-long (at the cap, what the other members subscript is read again
//! at every short tile), and its tiles may pass the cap as long as
//! [`STREAMED_PARALLEL_TILES`] remain (gemver).
//! With a band split into loop nests by scalar dimensions, each nest's point loops are
//! walked in the order the intra-tile permutation gives that nest.
//! The coarse grid is searched
//! exhaustively when it has at most [`EXHAUSTIVE`] points, otherwise one member at a time
//! until no member improves, from the best uniform size and from the capacity rule's sizes;
//! then the best candidate and the capacity rule's sizes are refined with
//! finer steps ([`FINE_STEPS`]) until no neighbour is cheaper by
//! [`REFINE_GAIN`]. Between candidates of equal cost the larger tile wins (fewer loop
//! iterations around it). The capacity rule's sizes ([`crate::passes::tile_size`], the
//! register tile's limit applied) stay unless the best candidate beats them by
//! [`RULE_MARGIN`]. Candidates that do not wait for each other's costs (the whole grid, one
//! member's sizes, a refinement round's neighbours) are evaluated side by side on the
//! machine's cores and then compared in order, so that the outcome is that of evaluating
//! them one by one. Where the pack pass will run after tiling, the search's finalists are
//! ranked again with the packed buffers it gives them ([`super::lookahead`]).

use std::collections::HashMap;

use rayon::prelude::*;

use crate::deps::Dependences;
use crate::passes::intra_tile::{
    deepest_nest, member_scores, predicted_innermost, predicted_order,
};
use crate::passes::register_tile;
use crate::passes::tile::Lookahead;
use crate::passes::tile_size::rule_sizes;
use crate::program::{Program, StmtId};
use crate::schedule::pluto::{Band, Error, PlutoSchedule};
use crate::target::TargetDescription;

use super::eval::{predict_with, Memo, Prediction};
use super::lookahead::{rank_packed, PackedRanking};
use super::nest::{Model, RegisterBlocking, Role};
use super::{levels, Level};

/// The sizes the coarse search tries for a member.
pub const COARSE: [i64; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Coarse grids up to this many points are searched exhaustively.
const EXHAUSTIVE: usize = 64;

/// The refinement's steps, coarsest first.
const FINE_STEPS: [i64; 2] = [16, 8];

/// The refinement moves to a neighbour only when it is at least this much cheaper: smaller
/// differences are far below what the model can tell apart, and following them walks a
/// long way in small steps, each an evaluation of the whole kernel.
const REFINE_GAIN: f64 = 0.003;

/// The largest tile of the parallel member that becomes the outermost tile loop: a loop of
/// 500 to 1,000 iterations then has 16 to 32 tiles, which 2 to 8 threads share with at most one
/// tile of imbalance.
pub const PARALLEL_TILE: i64 = 32;

/// The thread counts a register tile's parallel rows member is balanced for when its tiles
/// pass [`PARALLEL_TILE`], and the most the slowest thread's share may exceed an even one.
const BALANCED_THREADS: [i64; 3] = [2, 4, 8];
const SHARE_EXCESS: f64 = 0.10;
/// At most this many sizes past the parallel cap are candidates: a long member has a balanced
/// size at nearly every multiple (9,815 of them for a million rows of 5), so the count, and
/// the search's time, would grow with the member's extent. Every extent up to 4,000 has fewer
/// (84 at most, for rows of 2), so those keep all of theirs.
const MAX_BALANCED_SIZES: usize = 128;

/// The fewest tiles a streamed parallel member keeps when its tiles are made page-long: 2 to 8
/// threads still get at least one each.
pub const STREAMED_PARALLEL_TILES: i64 = 8;

/// The tiles each member of a streaming wavefront band is cut into ([`wavefront_tiles`]):
/// diagonals of up to this many tiles for 2 to 8 threads.
pub const WAVEFRONT_TILES: i64 = 8;

/// One evaluated candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// One size per band member, in the band's order.
    pub sizes: Vec<i64>,
    pub prediction: Prediction,
    /// The cycles the predicted misses cost.
    pub cost: f64,
}

/// The model replaces the capacity rule's sizes only when it predicts misses at least this
/// much cheaper. Below that, what the model does not see decides: hardware prefetching hides
/// most of the cost of misses that stream from the next level (doitgen's 11% fewer predicted
/// L1 misses ran slower, covariance's 36% cheaper misses ran faster), as do loop overhead and
/// the threads' shares; and the rule's sizes have been measured.
pub const RULE_MARGIN: f64 = 0.15;

/// The outcome of a search: the best candidate and the runner-up.
#[derive(Clone, Debug)]
pub struct BandSearch {
    pub best: Candidate,
    pub runner_up: Option<Candidate>,
    /// Whether `best` is the capacity rule's sizes kept over the model's cheapest candidate
    /// (then `runner_up`), which did not beat them by [`RULE_MARGIN`].
    pub kept_rule: bool,
    /// The capacity rule's sizes.
    pub rule: Vec<i64>,
    /// Where the band streams ([`Prediction::streams`]), how its innermost point loop's tiles
    /// were lengthened.
    pub streamed: Option<Streamed>,
    /// The model's levels, closest first.
    pub levels: Vec<Level>,
    /// The model the candidates were evaluated on: the schedule with the band tiled (its
    /// members' sizes in slots `0..band.len`).
    pub model: Model,
    /// Where the pack pass will give the band buffers, the finalists ranked with them
    /// ([`PackedRanking`]); when a finalist replaced the choice, `best` is it and
    /// `runner_up` the choice it replaced.
    pub packed: Option<PackedRanking>,
}

/// A streaming band's member whose tiles were made long: the innermost point loop, walking an
/// array contiguously.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Streamed {
    /// The member, an index into the band.
    pub member: usize,
    /// The least length of its tiles.
    pub run: i64,
    /// Whether it stays untiled: no member is parallel and the whole kernel streams.
    pub whole: bool,
    /// Whether it is the parallel member, whose tiles were lengthened past [`PARALLEL_TILE`]
    /// as far as [`STREAMED_PARALLEL_TILES`] tiles allow.
    pub parallel: bool,
    /// Whether the band runs as a wavefront of tiles over data it sweeps again and again,
    /// every member cut into [`WAVEFRONT_TILES`] tiles ([`wavefront_tiles`]).
    pub wavefront: bool,
}

/// Tile sizes for `band` of `schedule` chosen with the cache model on `target`'s caches, or
/// `None` when the target's caches lack a geometry or the model does not cover the schedule.
pub fn search_band(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    band: &Band,
    target: &TargetDescription,
    lookahead: Option<&Lookahead>,
) -> Result<Option<BandSearch>, Error> {
    let Some(levels) = levels(target) else {
        return Ok(None);
    };
    let innermost = match target.vector {
        Some(_) => predicted_innermost(program, deps, schedule, band)?,
        None => None,
    };
    let mut order: Vec<usize> = (0..band.len).filter(|&k| Some(k) != innermost).collect();
    order.extend(innermost);
    let register = register_blocking(program, schedule, band, &order, target);
    // The members a register tile's accumulators stay in registers across.
    let held: Vec<usize> = register
        .as_ref()
        .map(|r| {
            let ends = [r.rows, r.cols];
            order
                .iter()
                .copied()
                .filter(|k| !ends.contains(k))
                .collect()
        })
        .unwrap_or_default();
    // The point loops of the band's other loop nests keep the order the intra-tile
    // permutation will give them, each its own.
    let mut orders = vec![order.clone(); program.statements.len()];
    let main = deepest_nest(program, schedule, band).unwrap_or_default();
    // (A nest whose statements move along fewer than two of the band's members has no order
    // to choose.)
    for nest in schedule.nests_at(band.start) {
        if nest != main && nest.iter().any(|&s| schedule.members_moved(band, s) >= 2) {
            let own = predicted_order(program, deps, schedule, band, &nest)?;
            for s in nest {
                orders[s.index()] = own.clone();
            }
        }
    }
    let Ok(model) = Model::with_nests_tiled(program, schedule, band, &orders, register) else {
        return Ok(None);
    };
    // Each member's extent: the largest range of its coordinate over the statements.
    let mut extents = vec![1i64; band.len];
    for s in &model.stmts {
        for role in &s.roles {
            // (The register tile's slots follow the band's.)
            if let Role::Tile { coord, slot } = *role {
                if slot >= band.len {
                    continue;
                }
                let (lo, hi) = s.ranges[coord];
                extents[slot] = extents[slot].max((hi - lo + 1.0) as i64);
            }
        }
    }
    let vector_length = target.vector.map(|v| v.tile_length(program));
    let parallel = (0..band.len).find(|&k| schedule.dims[band.start + k].coincident);
    let mut limits: Vec<Limit> = (0..band.len)
        .map(|k| {
            let whole = extents[k].max(1);
            let mut limit = Limit {
                lo: 1,
                hi: whole,
                multiple: 1,
                shares: None,
            };
            if Some(k) == innermost {
                if let Some(len) = vector_length {
                    limit.lo = len.min(whole);
                    limit.multiple = len;
                }
            }
            if held.contains(&k) {
                if let Some(unit) = target.vector {
                    limit.lo = limit.lo.max(unit.tile_iterations.min(whole));
                }
            }
            if Some(k) == parallel && target.has_parallel_units() {
                limit.hi = limit.hi.min(PARALLEL_TILE);
            }
            limit.hi = limit.hi.max(limit.lo);
            limit
        })
        .collect();
    if let Some(r) = &model.register {
        register_rows(r, &extents, &mut limits, parallel, target);
    }
    // The capacity rule's sizes are a candidate too, and where the descent starts from.
    let mut rule: Vec<i64> = rule_sizes(program, deps, schedule, band, target)?
        .into_iter()
        .enumerate()
        .map(|(k, t)| {
            let limit = &limits[k];
            if held.contains(&k) {
                t.max(limit.lo)
            } else if model.register.as_ref().is_some_and(|r| r.rows == k)
                && t % limit.multiple != 0
                && t < extents[k]
            {
                // Whole register tiles of rows: the multiple at or below the rule's size.
                (t / limit.multiple * limit.multiple).max(limit.multiple.min(limit.hi))
            } else {
                t
            }
        })
        .collect();
    let memo = Memo::default();
    let mut streamed = None;
    if let Some(k) = streamed_member(program, schedule, band, &order, target) {
        // Where the streamed member is also the parallel one, its tiles are capped for the
        // threads' shares, and that cap alone can keep the band from streaming: whatever the
        // other members subscript is read again at every short tile (gemver's vectors). It is
        // judged, and tiled, page-long instead, as long as it keeps [`STREAMED_PARALLEL_TILES`]
        // tiles: a band that streams is bound by the memory's bandwidth, which a few long runs
        // use as well as many short ones.
        let capped = Some(k) == parallel && target.has_parallel_units();
        let extent = extents[k].max(1);
        let run = prefetch_run(program, target).map(|run| {
            let run = run.min(extent);
            if capped {
                run.min((extent + STREAMED_PARALLEL_TILES - 1) / STREAMED_PARALLEL_TILES)
            } else {
                run
            }
        });
        let prediction = match run {
            Some(run) if capped && rule[k] < run => {
                let mut judged = rule.clone();
                judged[k] = run;
                predict_with(&model, &judged, &levels, &memo)
            }
            _ => predict_with(&model, &rule, &levels, &memo),
        };
        if let (true, Some(run)) = (prediction.streams(), run) {
            if capped {
                limits[k].hi = limits[k].hi.max(run);
            }
            // Without a parallel member the tiles run as a wavefront, whose diagonals wait
            // for each other. Where the band streams the kernel's data once (trisolv), tiling
            // the streamed member buys nothing but those waits and shorter runs, so it stays
            // whole. Where the band runs again and again over its data (floyd-warshall's
            // `k`), a whole streamed member makes every run sequential, and the wavefront of
            // tiles is the band's only parallelism: no shape keeps more in the caches, so the
            // shape serves the wavefront ([`wavefront_tiles`]).
            let whole = parallel.is_none() && prediction.kernel_streams();
            let wavefront = parallel.is_none() && !whole && target.has_parallel_units();
            if wavefront {
                for (m, limit) in limits.iter_mut().enumerate() {
                    let t = wavefront_tiles(extents[m].max(1), limit.multiple);
                    (limit.lo, limit.hi) = (t, t);
                    rule[m] = t;
                }
            } else {
                let limit = &mut limits[k];
                let run = if whole { limit.hi } else { run };
                limit.lo = round_up(limit.lo.max(run.min(limit.hi)), limit.multiple);
                limit.hi = limit.hi.max(limit.lo);
                rule[k] = rule[k].max(limit.lo);
            }
            streamed = Some(Streamed {
                member: k,
                run: limits[k].lo,
                whole,
                parallel: capped,
                wavefront,
            });
        }
    }
    let grid: Vec<Vec<i64>> = limits
        .iter()
        .map(|limit| {
            let mut v: Vec<i64> = if limit.multiple > 1 {
                (1..=4)
                    .map(|m| m * limit.multiple)
                    .filter(|&t| limit.allows(t))
                    .collect()
            } else {
                COARSE
                    .iter()
                    .copied()
                    .filter(|&t| limit.allows(t))
                    .collect()
            };
            for t in [limit.lo, limit.hi]
                .into_iter()
                .chain(limit.balanced_sizes())
            {
                if !v.contains(&t) {
                    v.push(t);
                }
            }
            v.sort_unstable();
            v
        })
        .collect();
    let mut search = Search {
        model: &model,
        levels: &levels,
        limits: &limits,
        best: None,
        runner_up: None,
        seen: HashMap::new(),
        memo,
    };
    search.try_sizes(&rule);
    let points: usize = grid.iter().map(Vec::len).product();
    if points <= EXHAUSTIVE {
        search.all(&grid);
    } else {
        search.descend(&grid, &rule);
    }
    // The misses of a register-tiled band change by steps with the register tile's shape, so
    // the sizes around the rule's can beat those around the coarse grid's best.
    search.refine(search.best_sizes());
    search.refine(rule.clone());
    let incumbent = predict_with(&model, &rule, &levels, &search.memo);
    let incumbent = Candidate {
        cost: incumbent.cost(&levels),
        sizes: rule,
        prediction: incumbent,
    };
    let (Some(best), runner_up) = (search.best, search.runner_up) else {
        return Ok(None);
    };
    let incumbent_sizes = incumbent.sizes.clone();
    let mut kept_rule =
        best.sizes != incumbent.sizes && best.cost >= incumbent.cost * (1.0 - RULE_MARGIN);
    let (mut best, mut runner_up) = if kept_rule {
        (incumbent, Some(best))
    } else {
        (best, runner_up)
    };
    let packed = lookahead.and_then(|lookahead| {
        rank_packed(
            program,
            deps,
            schedule,
            band,
            target,
            lookahead,
            &model,
            &levels,
            &search.seen,
            &search.memo,
            &best.sizes,
            kept_rule,
        )
    });
    if let Some(challenger) = packed
        .as_ref()
        .filter(|p| p.replaced)
        .and_then(|p| p.challenger.as_ref())
    {
        let prediction = predict_with(&model, &challenger.sizes, &levels, &search.memo);
        let replaced = Candidate {
            cost: prediction.cost(&levels),
            sizes: challenger.sizes.clone(),
            prediction,
        };
        runner_up = Some(std::mem::replace(&mut best, replaced));
        kept_rule = false;
    }
    Ok(Some(BandSearch {
        best,
        runner_up,
        kept_rule,
        packed,
        rule: incumbent_sizes,
        streamed,
        levels,
        model,
    }))
}

/// The register tile the band's point loops will get ([`crate::passes::register_tile`]): where the
/// band is permutable, the first and the last member of `order` (the point loops' order) are
/// coincident, and a statement of the band accumulates into an element those two subscript
/// and the members between do not. Its shape depends on the tile sizes, so the model holds
/// the vector unit that gives it.
fn register_blocking(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    order: &[usize],
    target: &TargetDescription,
) -> Option<RegisterBlocking> {
    let unit = target.vector.filter(|u| u.tile_registers >= 4)?;
    let (&rows, &cols) = (order.first()?, order.last()?);
    let coincident = |k: usize| schedule.dims[band.start + k].coincident;
    if !band.permutable || order.len() < 3 || !coincident(rows) || !coincident(cols) {
        return None;
    }
    let stmt = (0..program.statements.len()).find(|&s| {
        let functions: Vec<_> = order
            .iter()
            .map(|&k| schedule.dims[band.start + k].exprs[s].clone())
            .collect();
        register_tile::accumulated(program, StmtId(s as u32), &functions).is_some()
    })?;
    let written = program.statements[stmt].write.array;
    Some(RegisterBlocking {
        rows,
        cols,
        unit,
        lanes: unit.lanes(program.array(written).elem),
    })
}

/// Where the band gets a register tile, its rows member takes whole register tiles: sizes
/// that are a multiple of the rows of the best shape whose columns divide the columns
/// member's tiles (a partial block of rows runs without the tile), so that the search can
/// reach the shapes with more rows, which load fewer operands per multiply-add (6x8 rather
/// than 4x8 with AVX2). Where the rows member is also the parallel one, its tiles may pass
/// [`PARALLEL_TILE`] at sizes that [`BALANCED_THREADS`] share evenly: each row tile packs the
/// column operand's tiles again, so longer ones read it fewer times.
fn register_rows(
    register: &RegisterBlocking,
    extents: &[i64],
    limits: &mut [Limit],
    parallel: Option<usize>,
    target: &TargetDescription,
) {
    let cols = limits[register.cols].multiple;
    let Some((rows, _)) = register_tile::shape(&register.unit, register.lanes, None, Some(cols))
    else {
        return;
    };
    let limit = &mut limits[register.rows];
    let extent = extents[register.rows].max(1);
    if rows <= 1 || extent < rows || limit.multiple != 1 {
        return;
    }
    limit.multiple = rows;
    limit.lo = limit.lo.max(rows);
    // A cap below the extent is no whole member: it takes whole register tiles too.
    if limit.hi < extent {
        limit.hi = (limit.hi / rows * rows).max(limit.lo);
    }
    if Some(register.rows) == parallel && target.has_parallel_units() {
        limit.shares = Some(extent);
    }
}

/// Whether threads share the `tiles` of `t` iterations of a loop of `extent` iterations
/// evenly, for every count of [`BALANCED_THREADS`]: the slowest thread's tiles exceed an
/// even share by at most [`SHARE_EXCESS`].
fn balanced(extent: i64, t: i64) -> bool {
    let tiles = (extent + t - 1) / t;
    BALANCED_THREADS.iter().all(|&threads| {
        let slowest = (tiles + threads - 1) / threads * t;
        slowest as f64 * threads as f64 <= (1.0 + SHARE_EXCESS) * extent as f64
    })
}

/// The member of `band` that will be the innermost point loop (the last of `order`), when
/// some access of the band's statements walks an array contiguously along it.
fn streamed_member(
    program: &Program,
    schedule: &PlutoSchedule,
    band: &Band,
    order: &[usize],
    target: &TargetDescription,
) -> Option<usize> {
    target.tlb?;
    let &last = order.last()?;
    let stmts: Vec<StmtId> = schedule.nests_at(band.start).concat();
    let plain = Band {
        kind: crate::schedule::pluto::BandKind::Point,
        ..*band
    };
    let (_, contiguous) = member_scores(program, schedule, &plain, &stmts);
    (contiguous[last] > 0).then_some(last)
}

/// The iterations of a loop that walks one page of the widest element type the program
/// uses: a run the hardware prefetcher follows from its start to the page's end (prefetchers
/// do not cross pages), where a shorter run restarts it at every tile.
fn prefetch_run(program: &Program, target: &TargetDescription) -> Option<i64> {
    let page = target.tlb?.page_bytes;
    let elem = program
        .arrays
        .iter()
        .map(|a| a.elem.size_in_bytes() as u64)
        .max()?;
    Some((page / elem.max(1)) as i64)
}

/// The tiles of a member of `extent` iterations in a streaming band that runs as a wavefront
/// of tiles (no member is parallel) and sweeps its data again at every step of a loop around
/// it (floyd-warshall): the extent cut into [`WAVEFRONT_TILES`] tiles, rounded up to a
/// `multiple`. Each diagonal of the wavefront is a parallel loop the threads finish together
/// before the next one starts, so its cost is the number of diagonals (the members' tiles
/// added) and the tiles a diagonal has for the threads; with no shape keeping more in the
/// caches, neither short tiles nor page-long runs of one member pay for the diagonals they
/// add (floyd-warshall's 64 x 1,024 tiles made 46 diagonals of at most 3 tiles per step and
/// ran slower than gcc's sequential loops; 350 x 350 make 15 diagonals of up to 8 and ran
/// 1.6x as fast as gcc's, by hand on 2 threads).
pub fn wavefront_tiles(extent: i64, multiple: i64) -> i64 {
    let even = round_up(extent, WAVEFRONT_TILES) / WAVEFRONT_TILES;
    round_up(even, multiple).min(extent)
}

/// `x` rounded up to a multiple of `multiple` (positive both).
fn round_up(x: i64, multiple: i64) -> i64 {
    let multiple = multiple.max(1);
    (x + multiple - 1) / multiple * multiple
}

/// The sizes a member may take: from `lo` to `hi`, multiples of `multiple` (or `hi`, which
/// leaves the member untiled); past `hi`, where `shares` holds the member's extent, the
/// multiples whose tiles threads share evenly ([`balanced`]).
#[derive(Clone, Copy, Debug)]
struct Limit {
    lo: i64,
    hi: i64,
    multiple: i64,
    shares: Option<i64>,
}

impl Limit {
    fn allows(&self, t: i64) -> bool {
        t >= self.lo.max(1)
            && if t <= self.hi {
                t % self.multiple == 0 || t == self.hi
            } else {
                // (A tile past the extent is one tile: never balanced.)
                self.shares
                    .is_some_and(|extent| t % self.multiple == 0 && balanced(extent, t))
            }
    }

    /// The sizes past `hi` that threads share evenly, the [`MAX_BALANCED_SIZES`] shortest.
    fn balanced_sizes(&self) -> Vec<i64> {
        let Some(extent) = self.shares else {
            return Vec::new();
        };
        let first = self.hi / self.multiple + 1;
        (first..)
            .map(|m| m * self.multiple)
            .take_while(|&t| t <= extent)
            .filter(|&t| self.allows(t))
            .take(MAX_BALANCED_SIZES)
            .collect()
    }
}

struct Search<'a> {
    model: &'a Model,
    levels: &'a [Level],
    limits: &'a [Limit],
    best: Option<Candidate>,
    runner_up: Option<Candidate>,
    /// The cost of every candidate evaluated.
    seen: HashMap<Vec<i64>, f64>,
    memo: Memo,
}

impl Search<'_> {
    /// Evaluates `sizes` (once) and keeps it if it is among the two best; returns its cost.
    fn try_sizes(&mut self, sizes: &[i64]) -> f64 {
        self.try_all(std::slice::from_ref(&sizes.to_vec()))[0]
    }

    /// [`Search::try_sizes`] on every candidate of `batch`, in its order: the candidates not
    /// yet seen are evaluated side by side on the search's threads, then kept in the order
    /// given, so that the outcome is the one of evaluating them one after the other.
    fn try_all(&mut self, batch: &[Vec<i64>]) -> Vec<f64> {
        let mut fresh: Vec<&[i64]> = Vec::new();
        for sizes in batch {
            if !self.seen.contains_key(sizes) && !fresh.contains(&sizes.as_slice()) {
                fresh.push(sizes);
            }
        }
        let predictions = evaluate(self.model, self.levels, &fresh, &self.memo);
        for (sizes, prediction) in fresh.into_iter().zip(predictions) {
            self.keep(sizes, prediction);
        }
        batch.iter().map(|sizes| self.seen[sizes]).collect()
    }

    /// Records the cost of `sizes` and keeps it if it is among the two best.
    fn keep(&mut self, sizes: &[i64], prediction: Prediction) {
        let cost = prediction.cost(self.levels);
        let cost = if cost.is_finite() {
            cost
        } else {
            f64::INFINITY
        };
        self.seen.insert(sizes.to_vec(), cost);
        if !cost.is_finite() {
            return;
        }
        let candidate = Candidate {
            sizes: sizes.to_vec(),
            prediction,
            cost,
        };
        match &self.best {
            Some(b) if !better(&candidate, b) => {
                if self
                    .runner_up
                    .as_ref()
                    .is_none_or(|r| better(&candidate, r))
                {
                    self.runner_up = Some(candidate);
                }
            }
            _ => self.runner_up = self.best.replace(candidate),
        }
    }

    /// Every point of `grid`.
    fn all(&mut self, grid: &[Vec<i64>]) {
        let mut points: Vec<Vec<i64>> = vec![Vec::new()];
        for values in grid {
            points = points
                .iter()
                .flat_map(|p| {
                    values.iter().map(move |&t| {
                        let mut p = p.clone();
                        p.push(t);
                        p
                    })
                })
                .collect();
        }
        self.try_all(&points);
    }

    /// One member at a time until no member improves, from the best uniform size and from
    /// `rule` (two starts, so that a good point far from the rule's is still found).
    fn descend(&mut self, grid: &[Vec<i64>], rule: &[i64]) {
        let uniform: Vec<Vec<i64>> = COARSE
            .iter()
            .map(|&t| {
                grid.iter()
                    .map(|v| {
                        *v.iter()
                            .min_by_key(|&&x| (x - t).abs())
                            .expect("every member has a size")
                    })
                    .collect()
            })
            .collect();
        let costs = self.try_all(&uniform);
        let mut start: Option<(f64, &Vec<i64>)> = None;
        for (cost, sizes) in costs.into_iter().zip(&uniform) {
            if start.is_none_or(|(c, _)| cost < c) {
                start = Some((cost, sizes));
            }
        }
        if let Some((_, start)) = start {
            self.descend_from(grid, start.clone());
        }
        self.descend_from(grid, rule.to_vec());
    }

    fn descend_from(&mut self, grid: &[Vec<i64>], start: Vec<i64>) {
        let mut cost = self.try_sizes(&start);
        let mut at = start;
        for _ in 0..8 {
            let before = at.clone();
            for (k, values) in grid.iter().enumerate() {
                // (Moving to a better size changes only member `k`, which every candidate
                // of this member sets anyway.)
                let candidates: Vec<Vec<i64>> = values
                    .iter()
                    .map(|&t| {
                        let mut sizes = at.clone();
                        sizes[k] = t;
                        sizes
                    })
                    .collect();
                let costs = self.try_all(&candidates);
                for (c, sizes) in costs.into_iter().zip(candidates) {
                    if c < cost {
                        cost = c;
                        at = sizes;
                    }
                }
            }
            if at == before {
                break;
            }
        }
    }

    /// Hill climbing with finer steps from `start`.
    fn refine(&mut self, start: Vec<i64>) {
        let mut at = start;
        let mut cost = self.try_sizes(&at);
        for step in FINE_STEPS {
            for _ in 0..16 {
                let before = at.clone();
                let mut candidates = Vec::new();
                for k in 0..before.len() {
                    let limit = self.limits[k];
                    let m = limit.multiple;
                    let step = (step.max(m) + m - 1) / m * m;
                    for t in [before[k] - step, before[k] + step] {
                        let t = (t / step) * step;
                        if limit.allows(t) {
                            let mut sizes = before.clone();
                            sizes[k] = t;
                            candidates.push(sizes);
                        }
                    }
                }
                let costs = self.try_all(&candidates);
                for (c, sizes) in costs.into_iter().zip(candidates) {
                    if c < cost * (1.0 - REFINE_GAIN) {
                        cost = c;
                        at = sizes;
                    }
                }
                if at == before {
                    break;
                }
            }
        }
    }

    fn best_sizes(&self) -> Vec<i64> {
        self.best
            .as_ref()
            .map(|b| b.sizes.clone())
            .unwrap_or_default()
    }
}

/// The predictions of `batch`, evaluated side by side on the machine's cores, which share
/// `memo`: a prediction is a deterministic function of the model, the sizes and the levels,
/// so which thread evaluates which candidate does not change it.
fn evaluate(model: &Model, levels: &[Level], batch: &[&[i64]], memo: &Memo) -> Vec<Prediction> {
    batch
        .par_iter()
        .map(|sizes| predict_with(model, sizes, levels, memo))
        .collect()
}

/// Whether `a` is better than `b`: cheaper, or as cheap with a larger tile (then the
/// lexicographically larger sizes, so that the choice never depends on the search's order).
pub(super) fn better(a: &Candidate, b: &Candidate) -> bool {
    let tolerance = 1e-9 * a.cost.abs().max(b.cost.abs()).max(1.0);
    if (a.cost - b.cost).abs() > tolerance {
        return a.cost < b.cost;
    }
    let volume = |c: &Candidate| c.sizes.iter().map(|&t| t as f64).product::<f64>();
    match volume(a).partial_cmp(&volume(b)) {
        Some(std::cmp::Ordering::Greater) => true,
        Some(std::cmp::Ordering::Less) => false,
        _ => a.sizes > b.sizes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balanced_tiles_give_every_thread_count_an_even_share() {
        // 1000 rows in 8 tiles of 126 (the last 118): 2, 4 and 8 threads take 4, 2 and 1
        // tiles, at most 1% over an even share.
        assert!(balanced(1000, 126));
        // 11 tiles of 96: 8 threads wait for the ones that take two, 54% over.
        assert!(!balanced(1000, 96));
        // 16 tiles of 66: 5.6% over for each count.
        assert!(balanced(1000, 66));
        // A single tile leaves threads idle.
        assert!(!balanced(1000, 1000));
    }

    #[test]
    fn a_shared_limit_allows_balanced_multiples_past_its_cap() {
        let limit = Limit {
            lo: 6,
            hi: 30,
            multiple: 6,
            shares: Some(1000),
        };
        // Up to the cap, its multiples.
        assert!(limit.allows(6) && limit.allows(30));
        assert!(!limit.allows(4) && !limit.allows(28) && !limit.allows(PARALLEL_TILE));
        // Past it, only the multiples that threads share evenly.
        assert_eq!(limit.balanced_sizes(), vec![42, 66, 126, 132]);
        assert!(!limit.allows(96) && !limit.allows(128));
        let unshared = Limit {
            shares: None,
            ..limit
        };
        assert!(unshared.balanced_sizes().is_empty() && !unshared.allows(126));
    }

    #[test]
    fn a_long_member_keeps_a_bounded_count_of_balanced_sizes() {
        let limit = Limit {
            lo: 5,
            hi: 30,
            multiple: 5,
            shares: Some(1_000_000),
        };
        let sizes = limit.balanced_sizes();
        assert_eq!(sizes.len(), MAX_BALANCED_SIZES);
        // The shortest ones, in order.
        assert_eq!(sizes[..3], [35, 40, 45]);
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
    }
}
