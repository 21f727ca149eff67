//! Evaluating a [`Model`] for tile sizes: footprints of blocks, reuse events with their stack
//! distances, and the misses they cause in each cache level.
//!
//! A *block* of a node is one execution of it with the loops above it fixed. The model takes a
//! representative block: every fixed point loop at the middle of its range, every fixed tile
//! loop the average tile around it (a loop of `w` values in tiles of `T` runs `⌈w/T⌉` tiles of
//! `w/⌈w/T⌉` values). A block's footprint, per array, is the union of the boxes its accesses
//! touch (boxes that overlap are merged into their hull), counted in cache lines: a box is
//! `runs` contiguous runs (rows, or several full rows together) of `run_lines` lines each. A run
//! of `B` bytes starting at an offset `o` within a line touches `⌊(o + B − 1)/L⌋ + 1` lines; the
//! offsets a run starts at are the multiples of the gcd of the line size, the arrays' base
//! alignment ([`ARRAY_ALIGNMENT`]), the row pitch and the distances the loops outside the block
//! move it by, taken as equally likely.
//!
//! *Reuse events.* Let `E(u)` be the number of executions of node `u` and `D(u, X)` the lines of
//! array `X` one execution touches. Of the `E(b)·D(b, X)` first touches of a line within an
//! execution of a loop's body `b`, all but the loop's own `E(u)·D(u, X)` reuse a line an earlier
//! iteration of the loop touched; their stack distance is the footprint of one iteration of the
//! body (every line touched between two consecutive uses), with the lines of arrays that
//! change from one iteration to the next counted as far as the tail of one iteration and the
//! head of the next touch them (see `reuse_distance`: for a body that is a sequence, as far as
//! the children after the reuse's last user and before its first user touch them). In a sequence, a child's first
//! touches of lines an earlier child touched reuse them across the children in between, at
//! stack distances between the two children's footprints (a producer and a consumer walking the
//! same data in the same order meet after `(1 − t)` of one's footprint and `t` of the other's,
//! for `t` from 0 to 1). The first touches of the whole program are *compulsory* misses, at
//! every level.
//!
//! *Miss probability.* An access whose line was last used at stack distance `d` misses a fully
//! associative LRU cache of `C` lines when `d ≥ C`. In a set-associative cache it misses when
//! `ways` or more of the other lines touched since map to its set. Each merged box of the
//! footprint is placed line by line (its rows at their pitch), which gives the share of sets
//! holding each number of its lines; different boxes lie at independent random sets, so the
//! loads of a set add up as independent counts (a convolution, exact up to `ways`). The
//! reused line is drawn from the footprint, so its set is weighted by the lines it holds. A
//! footprint too large to place ([`PLACEMENT_BUDGET`]), or a box that is not dense, counts its
//! runs as starting at independent random sets instead: a run of `ℓ = qS + r` lines covers
//! every one of the `S` sets `q` times and `r` of them once more.
//!
//! *Packed buffers* (`packing.rs`) are arrays of their own, at [`BUFFER_ALIGNMENT`]: an access
//! to one spans the values its coordinates take relative to the buffer's box, which the loops
//! above its mark do not move; the copies in and out are blocks that touch the box of the array
//! and the buffer once, as a sequence around the loops.
//!
//! *Non-rectangular domains* (triangles, skews) are modelled by their fill (instances over the
//! volume of the coordinates' box): a block whose coupled coordinates span a fraction `ρ` of
//! their ranges is non-empty with probability `fill + (1 − fill)·ρ`, and an access whose image
//! has the domain's shape fills `fill + (1 − fill)·(1 − ρ)` of its box, so that the whole
//! program counts its instances and its distinct lines exactly and a single instance counts
//! one execution.

use std::sync::{Mutex, MutexGuard, PoisonError};

use rustc_hash::FxHashMap;

use crate::program::ArrayId;

use super::nest::{Model, Node, Role};
use super::packing::{buffer_box, relative, Frame, BUFFER_ALIGNMENT};
use super::Level;

/// The alignment in bytes of every array's first element: what `malloc` guarantees on 64-bit
/// systems, and what the generated code's own buffers have.
pub const ARRAY_ALIGNMENT: u64 = 16;

/// What the model predicts for one set of tile sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Misses per cache level, in the order of the levels given (closest first).
    pub misses: Vec<f64>,
    /// The same misses per array the program accesses and per packed buffer of one:
    /// `(array, whether it is a buffer of it, misses per level)`.
    pub arrays: Vec<(ArrayId, bool, Vec<f64>)>,
    /// Lines touched at all: the misses of a cache that never evicts.
    pub compulsory: f64,
    /// Where the model has a tiled band: the closest level's misses within the executions of
    /// its outermost tile loop (reuses inside them that miss), and the lines each execution
    /// touches, summed over the executions (first touches, which no shape of the band keeps).
    pub band: Option<(f64, f64)>,
}

/// A prediction [`streams`](Prediction::streams) when its first level misses at most this
/// share more than the lines the kernel touches: the margin by which the tile search asks
/// the model to beat the capacity rule before it believes it
/// ([`super::search::RULE_MARGIN`]).
pub const STREAM_SLACK: f64 = super::search::RULE_MARGIN;

impl Prediction {
    /// Whether the tiled band streams: within its executions, its closest level (and so every
    /// level) misses little more than the lines each execution touches, so that no tile shape
    /// can keep more of them. (A band inside a loop that sweeps its data again, as
    /// floyd-warshall's `k`, misses every line once per execution however it is tiled.)
    /// Without a tiled band, whether the kernel [streams](Self::kernel_streams).
    pub fn streams(&self) -> bool {
        match self.band {
            Some((within, lines)) => within <= lines * STREAM_SLACK,
            None => self.kernel_streams(),
        }
    }

    /// Whether the whole kernel streams: its closest level misses little more than the lines
    /// it touches at all.
    pub fn kernel_streams(&self) -> bool {
        self.misses
            .first()
            .is_some_and(|&m| m <= self.compulsory * (1.0 + STREAM_SLACK))
    }

    /// The cycles the misses cost: each level's misses times its miss penalty.
    pub fn cost(&self, levels: &[Level]) -> f64 {
        self.misses
            .iter()
            .zip(levels)
            .map(|(m, l)| m * l.miss_penalty_cycles as f64)
            .sum()
    }
}

/// Miss probabilities already computed, by cache and footprint: candidates of one search share
/// most of their inner loops' footprints. The threads that evaluate a search's candidates
/// share one memo; what it holds is a function of its key alone, so which thread computed it
/// first does not matter.
#[derive(Debug, Default)]
pub(super) struct Memo {
    known: Mutex<FxHashMap<(usize, Vec<u64>), f64>>,
    /// Per cache, box and placement (whether the box's runs are placed at their sets or at
    /// random ones), the distribution of the lines the box puts into one set.
    loads: Mutex<FxHashMap<BoxKey, Vec<f64>>>,
}

/// A box's key in [`Memo`]: the cache, the box's [`key`] and whether its runs are placed.
type BoxKey = (usize, Vec<u64>, bool);

/// The map behind `mutex` (a thread that panicked holding it left nothing half-written: every
/// entry is inserted whole).
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The bits of `runs`, as a key.
fn key(runs: &[Runs]) -> Vec<u64> {
    let mut key = Vec::with_capacity(runs.len() * 4);
    for r in runs {
        key.push(r.count.to_bits());
        key.push(r.lines.to_bits());
        if let Some((lattice, bytes)) = &r.layout {
            key.push(bytes.to_bits());
            for &(n, pitch) in lattice {
                key.push(n as u64);
                key.push(pitch.to_bits());
            }
        }
        key.push(u64::MAX);
    }
    key
}

impl Memo {
    fn p_miss(&self, cache: usize, caches: &[Cache], runs: &[Runs]) -> f64 {
        let whole = (cache, key(runs));
        if let Some(&p) = locked(&self.known).get(&whole) {
            return p;
        }
        let p = p_miss(&caches[cache], runs, &mut |c, r, placed| {
            let box_key = (cache, key(std::slice::from_ref(r)), placed);
            if let Some(known) = locked(&self.loads).get(&box_key) {
                return known.clone();
            }
            let computed = loads(c, r, placed);
            locked(&self.loads).insert(box_key, computed.clone());
            computed
        });
        locked(&self.known).insert(whole, p);
        p
    }
}

/// The misses of `model` with tile sizes `sizes` (one per slot) in each of `levels`.
pub fn predict(model: &Model, sizes: &[i64], levels: &[Level]) -> Prediction {
    predict_with(model, sizes, levels, &Memo::default())
}

/// [`predict`], reusing and extending `memo`, which must have been used with `levels` only.
pub(super) fn predict_with(
    model: &Model,
    sizes: &[i64],
    levels: &[Level],
    memo: &Memo,
) -> Prediction {
    let sizes = &model.slot_sizes(sizes)[..];
    let boxes: Vec<(Vec<f64>, Vec<f64>)> = model
        .groups
        .iter()
        .map(|g| match g.buffer {
            Some(_) => buffer_box(model, g, sizes),
            None => (vec![0.0; g.extents.len()], g.extents.clone()),
        })
        .collect();
    let mut misses = vec![0.0; levels.len()];
    let mut arrays: Vec<(ArrayId, bool, Vec<f64>)> = model
        .groups
        .iter()
        .map(|g| (g.array, g.buffer.is_some(), vec![0.0; levels.len()]))
        .collect();
    let mut compulsory = 0.0;
    let mut band = None;
    // The footprint in lines depends on the line size: one walk per line size.
    let mut line_sizes: Vec<u32> = levels.iter().map(|l| l.line_bytes).collect();
    line_sizes.sort_unstable();
    line_sizes.dedup();
    for line in line_sizes {
        let chosen: Vec<usize> = (0..levels.len())
            .filter(|&k| levels[k].line_bytes == line)
            .collect();
        let caches: Vec<Cache> = levels.iter().map(Cache::of).collect();
        let mut walk = Walk {
            model,
            sizes,
            boxes: &boxes,
            line: line as f64,
            caches: &caches,
            chosen: &chosen,
            memo,
            misses: vec![vec![0.0; chosen.len()]; model.groups.len()],
            closest: chosen.iter().position(|&k| k == 0),
            band: None,
            in_band: false,
        };
        let blocks: Vec<Block> = model
            .stmts
            .iter()
            .map(|s| Block {
                lo: s.ranges.iter().map(|r| r.0).collect(),
                hi: s.ranges.iter().map(|r| r.1).collect(),
                step: vec![0.0; s.ranges.len()],
                count: 1.0,
            })
            .collect();
        let root = walk.visit(model.root, &blocks);
        if walk.closest.is_some() {
            band = walk.band;
        }
        compulsory = 0.0;
        for a in &root.arrays {
            let first = a.execs * a.lines;
            compulsory += first;
            for m in walk.misses[a.group].iter_mut() {
                *m += first;
            }
        }
        for (g, group_misses) in walk.misses.iter().enumerate() {
            for (&k, m) in chosen.iter().zip(group_misses) {
                misses[k] += m;
                arrays[g].2[k] += m;
            }
        }
    }
    Prediction {
        misses,
        arrays,
        compulsory,
        band,
    }
}

/// A reuse's footprint: how many levels below a loop's body it lies and, in a sequence, the
/// first and the last child that use the reused array.
type SpanKey = (usize, Option<(usize, usize)>);

/// A cache level in the units the walk needs.
struct Cache {
    lines: f64,
    sets: f64,
    ways: usize,
    line_bytes: f64,
}

impl Cache {
    fn of(level: &Level) -> Cache {
        Cache {
            line_bytes: level.line_bytes as f64,
            lines: (level.bytes / level.line_bytes as u64) as f64,
            sets: level.sets as f64,
            ways: level.ways as usize,
        }
    }
}

/// One statement's representative block: an interval per coordinate, how far apart the
/// block's positions along each coordinate are (0: the block spans the coordinate's range), and
/// how many times the block's box runs (before the domain's fill).
#[derive(Clone, Debug)]
struct Block {
    lo: Vec<f64>,
    hi: Vec<f64>,
    step: Vec<f64>,
    count: f64,
}

/// Lines of one array in a block.
#[derive(Clone, Debug)]
struct ArrayFoot {
    group: usize,
    lines: f64,
    /// Executions of the block that touch the array.
    execs: f64,
    /// The runs of each merged box.
    runs: Vec<Runs>,
}

/// The runs of one merged box: how many, how many lines each, and where they lie.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Runs {
    pub count: f64,
    pub lines: f64,
    /// The runs' starts as a lattice (`(runs, bytes apart)` per dimension) and each run's
    /// bytes, when the box is dense enough to be placed line by line.
    pub layout: Option<(Vec<(usize, f64)>, f64)>,
}

#[derive(Clone, Debug, Default)]
struct Foot {
    arrays: Vec<ArrayFoot>,
    /// For a loop, the footprint of one iteration of it (of a full tile).
    iteration: Option<Box<Foot>>,
    /// For a loop, how far each array's box moves from one iteration to the next and from the
    /// first iteration to the last, in bytes: `(group, step, first to last)`.
    moves: Vec<(usize, f64, f64)>,
    /// For a sequence, what its children touch.
    sequence: Option<Box<Children>>,
}

/// The lines of each array (by group) a sequence's children touch: `prefix[j]` those of
/// children `0..=j` together, `suffix[j]` those of children `j..`; `tail[j]` the share of child
/// `j`'s own lines that it touches after a point drawn uniformly from its run.
#[derive(Clone, Debug)]
struct Children {
    prefix: Vec<Vec<f64>>,
    suffix: Vec<Vec<f64>>,
    tail: Vec<Vec<f64>>,
    touches: Vec<Vec<bool>>,
}

impl Children {
    /// The first and the last child that touch `group`.
    fn users(&self, group: usize) -> Option<(usize, usize)> {
        let first = self.touches.iter().position(|t| t[group])?;
        let last = self.touches.iter().rposition(|t| t[group])?;
        Some((first, last))
    }

    /// The lines of `group` touched from a point within child `last` to the end of the
    /// sequence, and from its start to a point within child `first`.
    fn tail_and_head(&self, group: usize, (first, last): (usize, usize)) -> (f64, f64) {
        let suffix = |j: usize| self.suffix.get(j).map_or(0.0, |l| l[group]);
        let prefix = |j: Option<usize>| j.map_or(0.0, |j| self.prefix[j][group]);
        // The lines child `last` touches that no later child touches again, of which the part
        // after the point is seen; symmetrically for the head, the part before the point.
        let tail = suffix(last + 1) + self.tail[last][group] * (suffix(last) - suffix(last + 1));
        let before = prefix(first.checked_sub(1));
        let head = before + self.tail[first][group] * (prefix(Some(first)) - before);
        (tail, head)
    }
}

impl Foot {
    fn total(&self) -> f64 {
        self.arrays.iter().map(|a| a.lines).sum()
    }

    fn runs(&self) -> Vec<Runs> {
        self.arrays
            .iter()
            .flat_map(|a| a.runs.iter().cloned())
            .collect()
    }

    fn array(&self, group: usize) -> Option<&ArrayFoot> {
        self.arrays.iter().find(|a| a.group == group)
    }
}

struct Walk<'a> {
    model: &'a Model,
    sizes: &'a [i64],
    /// Per group, the least subscripts (a buffer's, see `packing.rs`; else 0) and the
    /// extents of its array.
    boxes: &'a [(Vec<f64>, Vec<f64>)],
    line: f64,
    /// Every level's cache, and the ones (of this walk's line size) the walk counts.
    caches: &'a [Cache],
    chosen: &'a [usize],
    memo: &'a Memo,
    /// Per group, misses per cache.
    misses: Vec<Vec<f64>>,
    /// Where the closest level is among `chosen`: the walk that accounts for the band.
    closest: Option<usize>,
    /// The band's account ([`Prediction::band`]), once the walk has met the band.
    band: Option<(f64, f64)>,
    /// Whether the walk is below the band's outermost tile loop.
    in_band: bool,
}

impl Walk<'_> {
    /// The footprint of one execution of `node` for `blocks`, counting the misses of the
    /// reuses within it (and, at the band's outermost tile loop, the band's account).
    fn visit(&mut self, node: usize, blocks: &[Block]) -> Foot {
        let band_root = match &self.model.nodes[node] {
            Node::Loop {
                position, stmts, ..
            } => {
                !self.in_band
                    && stmts
                        .iter()
                        .any(|&s| matches!(self.model.stmts[s].roles[*position], Role::Tile { .. }))
            }
            _ => false,
        };
        let (Some(closest), true) = (self.closest, band_root) else {
            return self.visit_node(node, blocks);
        };
        let missed = |walk: &Self| walk.misses.iter().map(|m| m[closest]).sum::<f64>();
        let before = missed(self);
        self.in_band = true;
        let foot = self.visit_node(node, blocks);
        self.in_band = false;
        let lines: f64 = foot.arrays.iter().map(|a| a.execs * a.lines).sum();
        let (within, touched) = self.band.unwrap_or_default();
        self.band = Some((within + missed(self) - before, touched + lines));
        foot
    }

    fn visit_node(&mut self, node: usize, blocks: &[Block]) -> Foot {
        let stmts = self.model.nodes[node].stmts();
        let mut own = self.footprint(&stmts, blocks);
        match &self.model.nodes[node] {
            // A copy touches each line of its box once: no reuse within it.
            Node::Leaf { .. } | Node::Copy { .. } => {}
            Node::Loop { position, body, .. } => {
                let mut variants = vec![blocks.to_vec()];
                for &s in &stmts {
                    variants = self.fix(s, *position, variants);
                }
                let feet: Vec<Foot> = variants.iter().map(|v| self.visit(*body, v)).collect();
                own.moves = self.moves(*position, &stmts, blocks);
                // The loop's reuse: first touches in its iterations beyond its own, shared among
                // the variants of the body in proportion to their first touches.
                let groups = self.model.groups.len();
                let (mut firsts, mut execs) = (vec![0.0; groups], vec![0.0; groups]);
                for f in &feet {
                    for a in &f.arrays {
                        firsts[a.group] += a.execs * a.lines;
                        execs[a.group] += a.execs;
                    }
                }
                for f in &feet {
                    let events: Vec<f64> = f
                        .arrays
                        .iter()
                        .map(|a| {
                            let mine = a.execs * a.lines;
                            if mine <= 0.0 {
                                return 0.0;
                            }
                            let outer = own.array(a.group).map_or(0.0, |o| o.execs * o.lines);
                            mine - outer * mine / firsts[a.group]
                        })
                        .collect();
                    // Per array, the share of an iteration's lines the iteration before it
                    // touched: the reuses over the first touches of the iterations that follow
                    // another (all but the first of every execution of the loop).
                    let shares: Vec<(usize, f64)> = f
                        .arrays
                        .iter()
                        .zip(&events)
                        .map(|(a, e)| {
                            let starts = own.array(a.group).map_or(0.0, |o| o.execs);
                            let later = a.execs * a.lines * (1.0 - starts / execs[a.group]);
                            let share = if later > 0.0 { e / later } else { 0.0 };
                            (a.group, share.clamp(0.0, 1.0))
                        })
                        .collect();
                    // Miss probabilities per depth of the footprint the reuse spans (and, in a
                    // sequence, per children that use the array first and last).
                    let mut by_span: FxHashMap<SpanKey, Vec<f64>> = FxHashMap::default();
                    for (a, &events) in f.arrays.iter().zip(&events) {
                        if events <= 0.0 {
                            continue;
                        }
                        let (depth, span) = last_use(f, a.group);
                        let users = span.sequence.as_ref().and_then(|s| s.users(a.group));
                        let probabilities = by_span.entry((depth, users)).or_insert_with(|| {
                            let carried = Carried {
                                body: f,
                                depth,
                                shares: &shares,
                                moves: &own.moves,
                                line: self.line,
                            };
                            self.probabilities(&reuse_distance(&carried, span, users))
                        });
                        for (m, p) in self.misses[a.group].iter_mut().zip(probabilities.iter()) {
                            *m += events * p;
                        }
                    }
                }
                own.iteration = feet.into_iter().next().map(Box::new);
            }
            Node::Sequence { children, .. } => {
                let children = children.clone();
                let feet: Vec<Foot> = children.iter().map(|&c| self.visit(c, blocks)).collect();
                let groups = self.model.groups.len();
                let lines_of = |f: &Foot| -> Vec<f64> {
                    let mut lines = vec![0.0; groups];
                    for a in &f.arrays {
                        lines[a.group] = a.lines;
                    }
                    lines
                };
                let mut spans = Children {
                    prefix: Vec::with_capacity(children.len()),
                    suffix: vec![Vec::new(); children.len()],
                    tail: feet
                        .iter()
                        .map(|f| (0..groups).map(|g| tail_share(f, g)).collect())
                        .collect(),
                    touches: feet
                        .iter()
                        .map(|f| (0..groups).map(|g| f.array(g).is_some()).collect())
                        .collect(),
                };
                let mut suffix_stmts: Vec<usize> = Vec::new();
                for (j, &c) in children.iter().enumerate().rev() {
                    suffix_stmts.extend(self.model.nodes[c].stmts());
                    spans.suffix[j] = lines_of(&self.footprint(&suffix_stmts, blocks));
                }
                let mut prefix_stmts: Vec<usize> = Vec::new();
                let mut before = Foot::default();
                for (j, &c) in children.iter().enumerate() {
                    prefix_stmts.extend(self.model.nodes[c].stmts());
                    let after = self.footprint(&prefix_stmts, blocks);
                    spans.prefix.push(lines_of(&after));
                    for a in &feet[j].arrays {
                        let Some(b) = before.array(a.group) else {
                            continue;
                        };
                        let union = after.array(a.group).map_or(0.0, |u| u.lines);
                        let events = a.execs * (a.lines + b.lines - union);
                        if events <= 0.0 {
                            continue;
                        }
                        let Some(i) = (0..j).rev().find(|&i| feet[i].array(a.group).is_some())
                        else {
                            continue;
                        };
                        // Each child walks the array whole within the innermost iterations
                        // that touch it all (see `last_use`): the two touches lie within those.
                        let fi = last_use(&feet[i], a.group).1.total();
                        let fj = last_use(&feet[j], a.group).1.total();
                        let between: f64 = feet[i + 1..j].iter().map(Foot::total).sum();
                        let lo = fi.min(fj) + between;
                        let hi = fi.max(fj) + between;
                        let runs: Vec<Runs> = feet[i..=j].iter().flat_map(|f| f.runs()).collect();
                        let all: f64 = runs.iter().map(|r| r.count * r.lines).sum();
                        for (k, &level) in self.chosen.iter().enumerate() {
                            let p = spread_p_miss(&self.caches[level], &runs, all, lo, hi);
                            self.misses[a.group][k] += events * p;
                        }
                    }
                    before = after;
                }
                own.sequence = Some(Box::new(spans));
            }
        }
        own
    }

    /// Per array the loop at `position` moves: how many bytes its box moves from one iteration
    /// of the loop to the next and from the first to the last, in the block `blocks` (before
    /// the loop is fixed), as the first access of the loop's statements to it moves.
    fn moves(&self, position: usize, stmts: &[usize], blocks: &[Block]) -> Vec<(usize, f64, f64)> {
        let mut out = Vec::new();
        for (g, group) in self.model.groups.iter().enumerate() {
            // A loop above a buffer's mark leaves the buffer where it is.
            if group.buffer.as_ref().is_some_and(|b| position < b.position) {
                if group.members.iter().any(|m| stmts.contains(&m.stmt)) {
                    out.push((g, 0.0, 0.0));
                }
                continue;
            }
            let pitches = pitches(&self.boxes[g].1, group.elem_bytes);
            let Some((m, (c, step, span))) = group.members.iter().find_map(|m| {
                let b = &blocks[m.stmt];
                if !stmts.contains(&m.stmt) || b.count <= 0.0 {
                    return None;
                }
                let width = |c: usize| b.hi[c] - b.lo[c];
                match self.model.stmts[m.stmt].roles[position] {
                    Role::Point(c) => Some((m, (c, 1.0, width(c)))),
                    Role::Tile { coord: c, slot } => {
                        let t = self.sizes.get(slot).copied().unwrap_or(1).max(1) as f64;
                        Some((m, (c, t, ((width(c) + 1.0) / t).ceil().max(1.0) * t - t)))
                    }
                    Role::Scalar(_) | Role::Fixed => None,
                }
            }) else {
                continue;
            };
            let bytes: f64 = m
                .subscripts
                .iter()
                .zip(&pitches)
                .map(|((coeffs, _), pitch)| coeffs[c] * pitch)
                .sum();
            out.push((g, bytes * step, bytes * span));
        }
        out
    }

    /// The miss probability in each counted cache of a reuse across the lines `runs`.
    fn probabilities(&mut self, runs: &[Runs]) -> Vec<f64> {
        self.chosen
            .iter()
            .map(|&level| self.memo.p_miss(level, self.caches, runs))
            .collect()
    }

    /// Fixes position `p` of statement `s` in each of `variants` (blocks of every statement):
    /// the block of one iteration of that loop. A tile loop whose range is no multiple of the
    /// tile size runs full tiles and one last partial tile: the first variant holds the full
    /// tiles, a second one (made here when needed) the partial tile.
    fn fix(&self, s: usize, p: usize, mut variants: Vec<Vec<Block>>) -> Vec<Vec<Block>> {
        let middle = self.model.middle[p];
        match self.model.stmts[s].roles[p] {
            Role::Point(c) => {
                for v in variants.iter_mut() {
                    let block = &mut v[s];
                    if block.count <= 0.0 {
                        // The statement does not run in this variant.
                        continue;
                    }
                    let width = block.hi[c] - block.lo[c] + 1.0;
                    let x = middle.max(block.lo[c]).min(block.hi[c]);
                    block.lo[c] = x;
                    block.hi[c] = x;
                    block.step[c] = 1.0;
                    block.count *= width;
                }
            }
            Role::Tile { coord: c, slot } => {
                let t = self.sizes.get(slot).copied().unwrap_or(1).max(1) as f64;
                let block = &variants[0][s];
                let (lo, hi) = (block.lo[c], block.hi[c]);
                let width = hi - lo + 1.0;
                if block.count > 0.0 && width > t {
                    let full = (width / t).floor();
                    let rest = width - full * t;
                    if rest > 0.0 && variants.len() == 1 {
                        let mut partial = variants[0].clone();
                        for b in partial.iter_mut() {
                            b.count = 0.0;
                        }
                        variants.push(partial);
                    }
                    // The full tile around the middle of the range.
                    let index = ((middle - lo) / t).floor().clamp(0.0, full - 1.0);
                    let mut at = variants[0][s].clone();
                    at.lo[c] = lo + index * t;
                    at.hi[c] = lo + index * t + t - 1.0;
                    at.step[c] = t;
                    at.count *= full;
                    if variants.len() > 1 {
                        let mut last = variants[0][s].clone();
                        last.lo[c] = lo + full * t;
                        last.hi[c] = hi;
                        last.step[c] = t;
                        if rest <= 0.0 {
                            last.count = 0.0;
                        }
                        variants[1][s] = last;
                    }
                    variants[0][s] = at;
                } else if variants.len() > 1 {
                    variants[1][s] = variants[0][s].clone();
                    variants[1][s].count = 0.0;
                }
            }
            Role::Scalar(_) | Role::Fixed => {
                if variants.len() > 1 {
                    variants[1][s] = variants[0][s].clone();
                    variants[1][s].count = 0.0;
                }
            }
        }
        variants
    }

    /// The lines per array that one execution of a block of statements `stmts` touches.
    fn footprint(&self, stmts: &[usize], blocks: &[Block]) -> Foot {
        let mut foot = Foot::default();
        for (gi, group) in self.model.groups.iter().enumerate() {
            let (offsets, extents) = &self.boxes[gi];
            let alignment = if group.buffer.is_some() {
                BUFFER_ALIGNMENT
            } else {
                ARRAY_ALIGNMENT
            };
            let pitches = pitches(extents, group.elem_bytes);
            let mut boxes: Vec<Region> = Vec::new();
            let mut execs: f64 = 0.0;
            for m in group.members.iter().filter(|m| stmts.contains(&m.stmt)) {
                let s = &self.model.stmts[m.stmt];
                let b = &blocks[m.stmt];
                if b.count <= 0.0 {
                    continue;
                }
                let rho = relative_size(s, b);
                execs = execs.max(b.count * (s.fill + (1.0 - s.fill) * rho));
                let scale = m.fill + (1.0 - m.fill) * (1.0 - rho);
                let mut region = Region {
                    lo: Vec::with_capacity(m.subscripts.len()),
                    hi: Vec::with_capacity(m.subscripts.len()),
                    stride: 1.0,
                    scale,
                    align: gcd(self.line as u64, alignment),
                };
                // The coordinates' values in the block; in a buffer, relative to its box.
                let span: Vec<(f64, f64)> = (0..b.lo.len())
                    .map(|c| match &m.frames {
                        Some(frames) => {
                            relative(frames[c], b.lo[c], b.hi[c], s.ranges[c].0, self.sizes)
                        }
                        None => (b.lo[c], b.hi[c]),
                    })
                    .collect();
                for (j, (coeffs, constant)) in m.subscripts.iter().enumerate() {
                    let base = constant - offsets[j];
                    let (mut lo, mut hi) = (base, base);
                    let mut stride = f64::INFINITY;
                    for (c, &a) in coeffs.iter().enumerate() {
                        let (l, h) = span[c];
                        lo += (a * l).min(a * h);
                        hi += (a * l).max(a * h);
                        if a != 0.0 && h > l {
                            stride = stride.min(a.abs());
                        }
                    }
                    let top = extents[j] - 1.0;
                    region.lo.push(lo.clamp(0.0, top.max(0.0)));
                    region.hi.push(hi.clamp(0.0, top.max(0.0)));
                    if j + 1 == m.subscripts.len() && stride.is_finite() {
                        region.stride = stride.max(1.0);
                    }
                }
                // The distance in bytes between the box's positions in consecutive blocks (a
                // buffer stays where it is while the loops above its mark move).
                for (c, &step) in b.step.iter().enumerate() {
                    let moves = match m.frames.as_ref().map(|f| f[c]) {
                        None | Some(Frame::Free) => true,
                        Some(Frame::Pinned) => false,
                        Some(Frame::Tile { slot }) => {
                            step < self.sizes.get(slot).copied().unwrap_or(1) as f64
                        }
                    };
                    if step > 0.0 && moves {
                        let shift: f64 = m
                            .subscripts
                            .iter()
                            .zip(&pitches)
                            .map(|((coeffs, _), pitch)| coeffs[c] * step * pitch)
                            .sum();
                        region.align = gcd(region.align, shift.abs().round() as u64);
                    }
                }
                // Where the box starts when every coordinate is at its least value.
                let first: f64 = m
                    .subscripts
                    .iter()
                    .zip(&pitches)
                    .zip(offsets)
                    .map(|(((coeffs, constant), pitch), offset)| {
                        let at: f64 = match &m.frames {
                            Some(_) => 0.0,
                            None => coeffs.iter().zip(&s.ranges).map(|(a, r)| a * r.0).sum(),
                        };
                        (constant - offset + at) * pitch
                    })
                    .sum();
                region.align = gcd(region.align, first.abs().round() as u64);
                boxes.push(region);
            }
            if boxes.is_empty() {
                continue;
            }
            let merged = merge(boxes);
            let total_lines = run_lines(
                extents.iter().product::<f64>() * group.elem_bytes,
                alignment,
                self.line,
            );
            let runs: Vec<Runs> = merged
                .iter()
                .map(|r| {
                    let mut runs = r.runs(extents, group.elem_bytes, self.line);
                    runs.count *= r.scale;
                    if r.scale < 1.0 {
                        runs.layout = None;
                    }
                    runs
                })
                .collect();
            let lines: f64 = runs
                .iter()
                .map(|r| r.count * r.lines)
                .sum::<f64>()
                .min(total_lines);
            foot.arrays.push(ArrayFoot {
                group: gi,
                lines,
                execs,
                runs,
            });
        }
        foot
    }
}

/// Where a loop's reuse of array `group` from one iteration to the next ends its stack
/// distance, with how many levels down from `body` that is: an array every iteration of the
/// body's own loop uses is last used in the body's last iteration and first used again in the
/// next body's first, so the distance is one iteration of the body's loop (and so on down).
fn last_use(body: &Foot, group: usize) -> (usize, &Foot) {
    let mut at = body;
    let mut depth = 0;
    while let Some(inner) = &at.iteration {
        let (Some(outer), Some(one)) = (at.array(group), inner.array(group)) else {
            break;
        };
        if one.lines < 0.9 * outer.lines {
            break;
        }
        at = inner;
        depth += 1;
    }
    (depth, at)
}

/// The share of a footprint's lines of `group` touched after a point drawn uniformly from its
/// run (and, the same, before it). In a loop of `n` iterations each touching a share `f` of
/// them, the point falls in one iteration: the lines that every iteration touches are seen
/// again in the ones after it (`(n − 1)/n` of the time) or in the rest of its own; the lines
/// the iterations walk through are seen half. A single statement's lines count half.
fn tail_share(foot: &Foot, group: usize) -> f64 {
    let Some(all) = foot.array(group).filter(|a| a.lines > 0.0) else {
        return 0.0;
    };
    let Some((iteration, one)) = foot
        .iteration
        .as_ref()
        .and_then(|i| i.array(group).map(|one| (i, one)))
    else {
        return 0.5;
    };
    let f = (one.lines / all.lines).clamp(0.0, 1.0);
    let n = if all.execs > 0.0 {
        (one.execs / all.execs).max(1.0)
    } else {
        1.0
    };
    f * ((n - 1.0) / n + tail_share(iteration, group) / n) + (1.0 - f) / 2.0
}

/// A reuse a loop carries from one iteration to the next: the footprint of the loop's body,
/// how many levels below it the footprint the reuse spans lies, the share of each array's
/// lines an iteration shares with the one before, and how the loop moves each array.
struct Carried<'a> {
    body: &'a Foot,
    depth: usize,
    shares: &'a [(usize, f64)],
    moves: &'a [(usize, f64, f64)],
    line: f64,
}

/// The lines touched between two uses of a line that a loop reuses from one iteration to the
/// next, where `span` (the body, or a footprint `carried.depth` levels below it whose every
/// execution uses all the line's array touches) is the footprint around each use: between
/// the use in the last execution of `span` in one iteration and the first execution in the
/// next, the tail of the first and the head of the second run.
///
/// An array the two executions share counts once. One that differs between them counts its
/// lines in the tail and in the head: when `span` is a loop whose iterations walk through the
/// array, the tail sees part and the head the rest (once in all); when every iteration of it
/// uses the array whole, both see it whole (twice). When `span` is a sequence (`users`: the
/// first and the last child using the reused line's array), the tail runs from within the
/// last of them to the end and the head from the start to within the first: an array that
/// changes is seen in the tail as far as the children from there on touch it and in the head
/// as far as the children up to there do (a row read by one nest and written back by a later
/// one is seen whole in the tail, and in part again in the next iteration's head).
///
/// The two executions share an array's lines as far as the loop's iterations share them and,
/// below the loop, the loops between it and `span` (which go back from their last iteration to
/// their first) leave the array in place. The lines seen again lie next to the others when the
/// array's box moves by no more than its length (a row, then the next row), else at a set of
/// their own.
fn reuse_distance(carried: &Carried<'_>, span: &Foot, users: Option<(usize, usize)>) -> Vec<Runs> {
    let mut runs: Vec<Runs> = Vec::new();
    for a in &span.arrays {
        let g = a.group;
        let seen = if let Some(iteration) = &span.iteration {
            iteration
                .array(g)
                .map_or(0.0, |i| (i.lines / a.lines).clamp(0.0, 1.0))
        } else if let (Some(children), Some(users)) = (&span.sequence, users) {
            let (tail, head) = children.tail_and_head(g, users);
            ((tail + head) / a.lines - 1.0).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let mut share = carried
            .shares
            .iter()
            .find(|(s, _)| *s == g)
            .map_or(0.0, |(_, r)| *r);
        // The loops between the carrying loop and the span: `shift` is how far the array's box
        // moves from the last execution of `span` in one iteration to the first in the next.
        let mut shift = carried
            .moves
            .iter()
            .find(|(s, ..)| *s == g)
            .map_or(0.0, |m| m.1);
        let mut at = carried.body;
        for _ in 0..carried.depth {
            let (Some(outer), Some(inner)) = (at.array(g), span.array(g)) else {
                break;
            };
            // A box walked over `outer / inner` of its length returns to overlap its start by
            // what the two ends share.
            if inner.lines > 0.0 {
                share *= (2.0 - outer.lines / inner.lines).clamp(0.0, 1.0);
            }
            shift -= at.moves.iter().find(|(s, ..)| *s == g).map_or(0.0, |m| m.2);
            let Some(next) = &at.iteration else {
                break;
            };
            at = next;
        }
        let again = (1.0 - share) * seen;
        if a.lines <= 0.0 || again <= 0.0 {
            runs.extend(a.runs.iter().cloned());
            continue;
        }
        match a.runs.as_slice() {
            [one]
                if one.count <= 1.0
                    && one.layout.as_ref().is_some_and(|(l, bytes)| {
                        l.is_empty() && shift.abs() <= bytes + carried.line
                    }) =>
            {
                let bytes = one.layout.as_ref().map_or(0.0, |(_, b)| *b);
                let longer = bytes * (1.0 + again);
                runs.push(Runs {
                    count: one.count,
                    lines: one.lines * (1.0 + again),
                    layout: Some((Vec::new(), longer)),
                });
            }
            _ => {
                runs.extend(a.runs.iter().cloned());
                runs.extend(a.runs.iter().map(|r| Runs {
                    count: r.count * again,
                    lines: r.lines,
                    layout: if again > 0.9 { r.layout.clone() } else { None },
                }));
            }
        }
    }
    runs
}

/// The fraction of their ranges a block's coupled coordinates span (1 when the statement's
/// domain is a box: then nothing depends on it).
fn relative_size(s: &super::nest::StmtModel, b: &Block) -> f64 {
    if s.fill >= 1.0 {
        return 1.0;
    }
    let mut rho = 0.0;
    for (c, &coupled) in s.coupled.iter().enumerate() {
        let range = s.ranges[c].1 - s.ranges[c].0;
        if coupled && range > 0.0 {
            rho += (b.hi[c] - b.lo[c]) / range;
        }
    }
    rho.min(1.0)
}

/// A box of array elements, inclusive bounds per dimension.
#[derive(Clone, Debug)]
struct Region {
    lo: Vec<f64>,
    hi: Vec<f64>,
    /// Distance between consecutive touched elements along the last dimension.
    stride: f64,
    /// The fraction of the box the accesses fill.
    scale: f64,
    /// The box's first element is at a multiple of this many bytes from a line's start.
    align: u64,
}

impl Region {
    fn overlaps(&self, o: &Region) -> bool {
        self.lo
            .iter()
            .zip(&self.hi)
            .zip(o.lo.iter().zip(&o.hi))
            .all(|((a, b), (c, d))| *a <= d + 1.0 && *c <= b + 1.0)
    }

    fn hull(&mut self, o: &Region) {
        for k in 0..self.lo.len() {
            self.lo[k] = self.lo[k].min(o.lo[k]);
            self.hi[k] = self.hi[k].max(o.hi[k]);
        }
        self.stride = self.stride.min(o.stride);
        self.scale = self.scale.max(o.scale);
        self.align = gcd(self.align, o.align);
    }

    /// The runs of the box in a row-major array of `extents`.
    fn runs(&self, extents: &[f64], elem: f64, line: f64) -> Runs {
        let r = extents.len();
        if r == 0 {
            return Runs {
                count: 1.0,
                lines: 1.0,
                layout: None,
            };
        }
        let extent: Vec<f64> = (0..r).map(|k| self.hi[k] - self.lo[k] + 1.0).collect();
        let pitches = pitches(extents, elem);
        // Rows of a box start a row pitch apart.
        let rows_align = |last: usize| {
            (0..last)
                .filter(|&k| extent[k] > 1.0)
                .fold(self.align, |g, k| gcd(g, pitches[k].round() as u64))
        };
        let lattice = |last: usize| -> Vec<(usize, f64)> {
            (0..last)
                .filter(|&k| extent[k] > 1.0)
                .map(|k| (extent[k].round() as usize, pitches[k]))
                .collect()
        };
        if self.stride > 1.0 {
            // Elements along the last dimension are apart: each run is one row.
            let count: f64 = extent[..r - 1].iter().product();
            let elements = (extent[r - 1] - 1.0) / self.stride + 1.0;
            let span = (extent[r - 1] - 1.0) * elem + elem;
            let lines = run_lines(span, rows_align(r - 1), line);
            return Runs {
                count,
                lines: elements.min(lines),
                layout: None,
            };
        }
        // Trailing dimensions the box covers fully join its rows into longer runs.
        let mut p = r - 1;
        while p > 0 && extent[p] >= extents[p] {
            p -= 1;
        }
        let elements: f64 = extent[p] * extents[p + 1..].iter().product::<f64>();
        let count: f64 = extent[..p].iter().product();
        let bytes = elements * elem;
        Runs {
            count,
            lines: elements.min(run_lines(bytes, rows_align(p), line)),
            layout: Some((lattice(p), bytes)),
        }
    }
}

/// Bytes between consecutive indices of each dimension of a row-major array.
fn pitches(extents: &[f64], elem: f64) -> Vec<f64> {
    let mut out = vec![elem; extents.len()];
    for k in (0..extents.len().saturating_sub(1)).rev() {
        out[k] = out[k + 1] * extents[k + 1];
    }
    out
}

/// The lines a run of `bytes` bytes touches on average when it starts at a multiple of `align`
/// bytes within a line of `line` bytes, every such offset equally likely.
fn run_lines(bytes: f64, align: u64, line: f64) -> f64 {
    let l = line as u64;
    let g = gcd(align, l).max(1);
    let span = bytes.round().max(1.0) as u64 - 1;
    let whole = span / l;
    let rest = span % l;
    // Offsets o = i·g (i < l/g) with o + rest ≥ l straddle one more line.
    let offsets = l / g;
    let straddling = offsets - (l - rest).div_ceil(g).min(offsets);
    (whole + 1) as f64 + straddling as f64 / offsets as f64
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Merges overlapping boxes into their hulls until none overlap.
fn merge(mut boxes: Vec<Region>) -> Vec<Region> {
    let mut merged: Vec<Region> = Vec::with_capacity(boxes.len());
    while let Some(mut b) = boxes.pop() {
        while let Some(k) = merged.iter().position(|m| m.overlaps(&b)) {
            let m = merged.swap_remove(k);
            b.hull(&m);
        }
        merged.push(b);
    }
    merged
}

/// The most line placements [`p_miss`] makes to find a footprint's per-set loads exactly;
/// beyond, runs are taken as placed at random (as are the runs of a box that is not dense).
const PLACEMENT_BUDGET: f64 = 50_000.0;

/// The most runs of one box that [`p_miss`] places; the loads of more runs than that are
/// close to those of randomly placed runs, and much cheaper to find.
const PLACED_RUNS: f64 = 256.0;

/// The probability that a reuse misses `cache` when the lines touched since the previous use
/// are `runs`, as the module docs describe.
fn p_miss(
    cache: &Cache,
    runs: &[Runs],
    loads_of: &mut dyn FnMut(&Cache, &Runs, bool) -> Vec<f64>,
) -> f64 {
    let total: f64 = runs.iter().map(|r| r.count * r.lines).sum();
    let k = cache.ways;
    if total <= k as f64 {
        return 0.0;
    }
    if cache.sets <= 1.0 {
        return if total > cache.lines { 1.0 } else { 0.0 };
    }
    if total > 4.0 * cache.lines {
        return 1.0;
    }
    let placeable = |r: &Runs| r.layout.is_some() && r.count <= PLACED_RUNS;
    let placed = total <= PLACEMENT_BUDGET;
    // Runs at random sets overflow none when they fill a quarter of the cache; placed runs can
    // (rows a multiple of the cache's way size apart share their sets).
    if total < cache.sets * k as f64 / 4.0 && !(placed && runs.iter().any(placeable)) {
        return 0.0;
    }
    let loads: Vec<Vec<f64>> = runs
        .iter()
        .map(|r| loads_of(cache, r, placed && placeable(r)))
        .collect();
    // The loads of every box but one: products of the boxes before it and after it.
    let n = loads.len();
    let mut before = vec![unit(k + 1)];
    for l in &loads[..n - 1] {
        let mut next = before[before.len() - 1].clone();
        convolve(&mut next, l);
        before.push(next);
    }
    let mut after = vec![unit(k + 1); n];
    for g in (0..n - 1).rev() {
        let mut next = after[g + 1].clone();
        convolve(&mut next, &loads[g + 1]);
        after[g] = next;
    }
    let mut p = 0.0;
    for (g, own) in loads.iter().enumerate() {
        let weight = runs[g].count * runs[g].lines / total;
        if weight <= 0.0 {
            continue;
        }
        // The set of a line drawn from box g holds `v` of its lines with probability
        // proportional to `v` times the share of sets holding `v`; the others are `v − 1`.
        let mut pmf = vec![0.0; k + 1];
        let mean: f64 = own.iter().enumerate().map(|(v, x)| v as f64 * x).sum();
        if mean <= 0.0 {
            continue;
        }
        for (v, x) in own.iter().enumerate().skip(1) {
            pmf[(v - 1).min(k)] += v as f64 * x / mean;
        }
        convolve(&mut pmf, &before[g]);
        p += weight * tail(&pmf, &after[g]);
    }
    p.clamp(0.0, 1.0)
}

/// The distribution of a count that is always 0, over `cells` cells.
fn unit(cells: usize) -> Vec<f64> {
    let mut u = vec![0.0; cells];
    u[0] = 1.0;
    u
}

/// The distribution of the lines box `r` puts into one set, its rows placed at their pitch
/// and the box at a random set (index `v` for `v` lines; more than `ways` lumped at
/// `ways + 1`).
fn placed_loads(cache: &Cache, r: &Runs) -> Vec<f64> {
    let k = cache.ways;
    let sets = cache.sets as usize;
    let Some((lattice, bytes)) = &r.layout else {
        return random_loads(cache, r);
    };
    let line = cache.line_bytes;
    // Each run covers lines first..=last: `whole` times every set, then `rest` sets from
    // `from` on. Few lines are counted by sorting the sets they touch; many with a difference
    // array over every set.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut whole: usize = 0;
    let mut index = vec![0usize; lattice.len()];
    loop {
        let start: f64 = index
            .iter()
            .zip(lattice)
            .map(|(&i, &(_, pitch))| i as f64 * pitch)
            .sum();
        let first = (start / line).floor() as i64;
        let last = ((start + bytes - 1.0) / line).floor() as i64;
        let n = (last - first + 1) as usize;
        whole += n / sets;
        spans.push((first.rem_euclid(sets as i64) as usize, n % sets));
        // The next lattice point.
        let mut d = 0;
        while d < index.len() {
            index[d] += 1;
            if index[d] < lattice[d].0 {
                break;
            }
            index[d] = 0;
            d += 1;
        }
        if d == index.len() {
            break;
        }
    }
    let mut loads = vec![0.0; k + 2];
    let share = 1.0 / sets as f64;
    let touched: usize = spans.iter().map(|&(_, rest)| rest).sum();
    if touched < sets {
        let mut hit: Vec<usize> = spans
            .iter()
            .flat_map(|&(from, rest)| (from..from + rest).map(move |x| x % sets))
            .collect();
        hit.sort_unstable();
        let mut distinct = 0;
        let mut at = 0;
        while at < hit.len() {
            let run = hit[at..].iter().take_while(|&&x| x == hit[at]).count();
            loads[(whole + run).min(k + 1)] += share;
            distinct += 1;
            at += run;
        }
        loads[whole.min(k + 1)] += (sets - distinct) as f64 * share;
        return loads;
    }
    let mut delta = vec![0i64; sets + 1];
    for (from, rest) in spans {
        if from + rest <= sets {
            delta[from] += 1;
            delta[from + rest] -= 1;
        } else {
            delta[from] += 1;
            delta[sets] -= 1;
            delta[0] += 1;
            delta[from + rest - sets] -= 1;
        }
    }
    let mut count = whole as i64;
    for d in &delta[..sets] {
        count += d;
        loads[(count.max(0) as usize).min(k + 1)] += share;
    }
    loads
}

/// The distribution of the lines the runs `r` put into one set when each run starts at a
/// random set (index as in [`placed_loads`]).
fn random_loads(cache: &Cache, r: &Runs) -> Vec<f64> {
    let k = cache.ways;
    let s = cache.sets;
    let q = (r.lines / s).floor();
    let frac = r.lines / s - q;
    // A fractional count of runs is a run more with the fraction's probability.
    let count = r.count.max(0.0);
    let whole = count.floor();
    let with = |n: f64| {
        let mut pmf = vec![0.0; k + 2];
        pmf[0] = 1.0;
        shift(&mut pmf, n * q);
        add_binomial(&mut pmf, n, frac);
        pmf
    };
    let more = count - whole;
    let mut pmf = with(whole);
    if more > 1e-9 {
        for (x, y) in pmf.iter_mut().zip(with(whole + 1.0)) {
            *x = (1.0 - more) * *x + more * y;
        }
    }
    pmf
}

/// Adds an independent count distributed as `other` to `pmf` (the last cells of both hold the
/// probability of that many or more).
fn convolve(pmf: &mut [f64], other: &[f64]) {
    let last = pmf.len() - 1;
    // Distributions have a cell per way and two more: a buffer on the stack serves them all.
    let mut stack = [0.0; 64];
    let mut heap = Vec::new();
    let out = if pmf.len() <= stack.len() {
        &mut stack[..pmf.len()]
    } else {
        heap.resize(pmf.len(), 0.0);
        &mut heap[..]
    };
    for (i, &x) in pmf.iter().enumerate() {
        if x == 0.0 {
            continue;
        }
        // Sums below the last cell, then the ones lumped into it, each in order of `j`.
        let below = (last - i).min(other.len());
        for (o, &y) in out[i..i + below].iter_mut().zip(&other[..below]) {
            *o += x * y;
        }
        for &y in &other[below..] {
            out[last] += x * y;
        }
    }
    pmf.copy_from_slice(out);
}

/// The last cell of [`convolve`]`(pmf, other)` (the probability of `pmf.len() - 1` or more),
/// summed in the same order.
fn tail(pmf: &[f64], other: &[f64]) -> f64 {
    let last = pmf.len() - 1;
    let mut p = 0.0;
    for (i, &x) in pmf.iter().enumerate() {
        if x == 0.0 {
            continue;
        }
        for &y in other.iter().skip(last.saturating_sub(i)) {
            if y != 0.0 {
                p += x * y;
            }
        }
    }
    p
}

/// [`p_miss`] averaged over stack distances spread evenly from `lo` to `hi` lines, the runs
/// (whose lines sum to `all`) scaled to each distance.
fn spread_p_miss(cache: &Cache, runs: &[Runs], all: f64, lo: f64, hi: f64) -> f64 {
    if all <= 0.0 {
        return 0.0;
    }
    const POINTS: usize = 5;
    (0..POINTS)
        .map(|i| {
            let d = lo + (hi - lo) * (i as f64 + 0.5) / POINTS as f64;
            let scaled: Vec<Runs> = runs
                .iter()
                .map(|r| Runs {
                    count: r.count * d / all,
                    lines: r.lines,
                    layout: None,
                })
                .collect();
            p_miss(cache, &scaled, &mut loads)
        })
        .sum::<f64>()
        / POINTS as f64
}

/// Adds a constant `d` to the count whose distribution `pmf` is (the last cell holds the
/// probability of `pmf.len() - 1` or more).
fn shift(pmf: &mut [f64], d: f64) {
    let d = d.max(0.0) as usize;
    if d == 0 {
        return;
    }
    let last = pmf.len() - 1;
    let mut out = vec![0.0; pmf.len()];
    for (i, &x) in pmf.iter().enumerate() {
        out[(i + d).min(last)] += x;
    }
    pmf.copy_from_slice(&out);
}

/// Adds an independent binomial count of `n` trials of probability `p` to `pmf`.
fn add_binomial(pmf: &mut [f64], n: f64, p: f64) {
    if n <= 0.0 || p <= 0.0 {
        return;
    }
    if p >= 1.0 {
        shift(pmf, n);
        return;
    }
    let last = pmf.len() - 1;
    let mut b = vec![0.0; last + 1];
    let mut term = (1.0 - p).powf(n);
    let ratio = p / (1.0 - p);
    let mut below = 0.0;
    for (j, cell) in b.iter_mut().enumerate().take(last) {
        if j as f64 > n {
            break;
        }
        *cell = term;
        below += term;
        term *= (n - j as f64) / (j as f64 + 1.0) * ratio;
    }
    b[last] = (1.0 - below).max(0.0);
    let mut out = vec![0.0; last + 1];
    for (i, &x) in pmf.iter().enumerate() {
        if x == 0.0 {
            continue;
        }
        for (j, &y) in b.iter().enumerate() {
            out[(i + j).min(last)] += x * y;
        }
    }
    pmf.copy_from_slice(&out);
}

/// The per-set loads of a box, computed afresh.
fn loads(cache: &Cache, r: &Runs, placed: bool) -> Vec<f64> {
    if placed {
        placed_loads(cache, r)
    } else {
        random_loads(cache, r)
    }
}

/// [`p_miss`] on a [`Level`], for the tests.
#[cfg(test)]
pub(super) fn p_miss_runs(level: &Level, runs: &[Runs]) -> f64 {
    p_miss(&Cache::of(level), runs, &mut loads)
}
