//! Tile sizes of the Cube's matrix products, chosen from the machine's capacities and costs.
//!
//! The last stage's result (`M × N`, for each iteration of its independent loops) is cut into
//! `tm × tn` tiles and its reduction into `tk` steps, each a multiple of the 16-element
//! fractal (`tn` and `tk` dividing N and K rounded up to whole fractals; `tm` may leave a row
//! tail). A block (one `block_idx`, one core at a time) computes `ob` iterations of the
//! independent loops, and in each one row panel of `tm` rows and `ntb` consecutive column
//! tiles; `ng` blocks share a row panel. A stage that feeds the last one is computed by every
//! block for what the block reads of it: the rows of its panel and every reduction column, or
//! every reduction row and the columns of its group; its tiles are the largest that fit.
//!
//! Every candidate whose footprints fit L0A, L0B, L0C (the largest stage's tiles), UB (the
//! epilogue's and prologue's tiles, the vectors, the scalars) and L1 (operand slots, the
//! resident and produced panels) — tiles doubled when double buffering — is estimated with the
//! machine's costs: per block, the busiest of MTE2 (GM→L1 at the path's bandwidth or the share
//! of the GM bandwidth the running blocks leave it), MTE1, the Cube and the write-back, times
//! the waves of blocks over the cores. The cheapest estimate wins among the tilings that keep
//! the Cubes they use busy (more blocks than the GM bandwidth can feed only add idle cores);
//! ties go to the larger tile.

use sim::isa::{CopyPath, Mem};

use super::conv_rows::{self, Slide};
use super::{NpuTarget, FRACTAL};

/// What a stage does in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The last stage: the block's row panel and column group.
    Last,
    /// Feeds the last stage's A: the panel's rows, every column.
    FeedsA,
    /// Feeds the last stage's B: every row, the group's columns.
    FeedsB,
}

/// How the reduction may be cut into steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steps {
    /// Any multiple of 16 dividing the padded reduction.
    Any,
    /// A gathered reduction whose rows are `outer` groups of `group` contiguous rows: a step
    /// is the whole reduction, or whole groups dividing it.
    Groups { group: u64, outer: u64 },
}

/// A stage as the tiling sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageShape {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Iterations of the accumulating loops outside the Cube's reduction.
    pub ko: u64,
    pub steps: Steps,
    pub role: Role,
    /// Operand read from L1 rather than streamed from GM (a stage's result or a scaled
    /// operand), for A and B.
    pub a_in_l1: bool,
    pub b_in_l1: bool,
    /// Scaled operands (kept in L1 as a panel scaled on the way in).
    pub a_scaled: bool,
    pub b_scaled: bool,
    /// A gathered operand (A when true) and its reduction's largest component: its tiles are
    /// copied in bursts of 16 elements, along that component or along the chunks.
    pub gather: Option<(bool, u64)>,
    /// A gathered B read through `load3d`: the reduction rows per channel and the elements
    /// each channel takes in L1; a step's channels are copied whole from GM.
    pub window: Option<(u64, u64)>,
    /// How that window slides over the innermost independent loop (a convolution's output
    /// rows), when a block's consecutive iterations can share one copy of it.
    pub slide: Option<Slide>,
}

/// The kernel as the tiling sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Bytes of an operand element (2 or 4).
    pub es: u64,
    /// The stages, the last one last.
    pub stages: Vec<StageShape>,
    /// Iterations of the last stage's independent loops.
    pub outer: u64,
    /// Whether the last stage's A (from GM) is the same in every independent iteration.
    pub a_invariant: bool,
    pub ub: UbNeeds,
    /// Whether the last stage's tiles must be square (`tm = tn`), so that every tile a
    /// diagonal band cuts is cut one of a few ways.
    pub square: bool,
}

/// What UB must hold besides the drained tiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UbNeeds {
    /// `tm × tn` f32 tiles per buffer after the product (the accumulator's copy and the
    /// epilogue's).
    pub tiles: u64,
    /// `tm × tn` f32 tiles per buffer of the prologue (0: the accumulator starts at zero).
    pub init_tiles: u64,
    /// f32 per-column vectors (each `ntb · tn` elements).
    pub columns: u64,
    /// Expanded f32 per-row vectors (each a `tm × tn` tile, staged through `tm` more).
    pub rows: u64,
    /// Bytes of scalars.
    pub scalar_bytes: u64,
    /// The epilogue's Vector instructions on each tile.
    pub ops: VectorOps,
}

/// A tile's Vector instructions by how they cover it (as `tile_ops::vector_op` emits them),
/// each kind counted apart for the operations at the slow rate (index 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VectorOps {
    /// Over the whole tile (against a row vector too), in repeats of 256 bytes.
    pub whole: [u64; 2],
    /// Against a column vector: two instructions per 16-column chunk.
    pub by_column: [u64; 2],
}

impl VectorOps {
    /// Cycles of the Vector unit on one `tm × tn` f32 tile.
    pub fn cycles(&self, mc: &sim::Machine, tm: u64, tn: u64) -> u64 {
        let cost = |instrs: u64, repeats: u64, slow: usize| {
            let per = if slow == 1 {
                mc.vector_per_repeat_slow
            } else {
                mc.vector_per_repeat
            };
            instrs * mc.vector_startup + repeats * per
        };
        let whole = tm * tn * 4 / super::VECTOR_BYTES;
        let chunks = tn / FRACTAL;
        (0..2)
            .map(|s| {
                self.whole[s] * cost(whole.div_ceil(255), whole, s)
                    + self.by_column[s] * cost(2 * chunks, chunks * tm / 4, s)
            })
            .sum()
    }
}

/// Bytes of each UB buffer a scaled operand streams through on its way to L1.
pub const PIECE_BYTES: u64 = 16 * 1024;

/// One stage's tile sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageTiles {
    pub tm: u64,
    pub tn: u64,
    pub tk: u64,
}

/// The chosen tiling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiles {
    /// Per stage, in the plan's order.
    pub stages: Vec<StageTiles>,
    /// Column tiles of the last stage per block.
    pub ntb: u64,
    /// Blocks per row panel.
    pub ng: u64,
    /// Independent iterations per block.
    pub ob: u64,
    /// Whether the last stage's A from GM stays in L1 across the block's column tiles.
    pub a_resident: bool,
    /// Per stage, whether its A stays in L0A across the block's column tiles
    /// ([`a_l0_resident`]).
    pub a_l0: Vec<bool>,
    /// Buffers per double-buffered tile: 2, or 1 without double buffering.
    pub nbuf: u64,
    /// L1 slots of the operands streamed from GM ([`stream_slots`]): `nbuf`, or more.
    pub nl1: u64,
    /// Estimated cycles.
    pub estimate: u64,
    /// Estimated GM bytes read (the results' writes are the same in every tiling).
    pub gm_bytes: u64,
}

impl Tiles {
    pub fn last(&self) -> StageTiles {
        self.stages[self.stages.len() - 1]
    }

    /// Row panels of the last stage.
    pub fn mt(&self, m: u64) -> u64 {
        m.div_ceil(self.last().tm)
    }

    pub fn blocks(&self, shape: &Shape) -> u64 {
        let last = shape.stages[shape.stages.len() - 1];
        shape.outer / self.ob * self.mt(last.m) * self.ng
    }
}

/// Multiples of 16 dividing `x` (a multiple of 16), at most `cap`.
fn divisors(x: u64, cap: u64) -> Vec<u64> {
    (1..=x / FRACTAL)
        .map(|d| d * FRACTAL)
        .filter(|&t| x.is_multiple_of(t) && t <= cap)
        .collect()
}

fn round16(x: u64) -> u64 {
    x.div_ceil(FRACTAL) * FRACTAL
}

/// `x` rounded up to a multiple of `t`.
pub fn round_to(x: u64, t: u64) -> u64 {
    x.div_ceil(t) * t
}

/// Multiples of 16 up to `x` rounded to 16 and `cap`: tiles of a dimension that may end in a
/// padded tile.
fn multiples(x: u64, cap: u64) -> Vec<u64> {
    (1..=round16(x).min(cap) / FRACTAL)
        .map(|d| d * FRACTAL)
        .collect()
}

impl Shape {
    /// Whether the last stage's column and reduction tiles may leave a partly padded last
    /// tile: one stage, no gathered operand (a chain's panels and a window's channels need
    /// tiles that divide their extents rounded to 16).
    pub fn free(&self) -> bool {
        let s = &self.stages[self.stages.len() - 1];
        self.stages.len() == 1 && s.steps == Steps::Any && s.gather.is_none()
    }
}

/// Whether a stage's A stays in L0A across its column tiles: the whole reduction of the
/// tile's rows (`tm × kp` elements of `es` bytes) fits L0A, so each step's A fractals are
/// loaded at the first column tile only and the Cube reads them again for the others.
pub fn a_in_l0(target: &NpuTarget, tm: u64, kp: u64, es: u64) -> bool {
    tm * kp * es <= target.capacity(Mem::L0a)
}

/// Whether a stage's A stays in L0A in a block of `t` (see [`a_in_l0`]): one row tile and
/// several column tiles, and the same A in every independent iteration the block runs.
pub fn a_l0_resident(
    target: &NpuTarget,
    shape: &Shape,
    t: &Tiles,
    stage: usize,
    (row_tiles, col_tiles): (u64, u64),
) -> bool {
    let s = &shape.stages[stage];
    let st = t.stages[stage];
    let kp = round_to(s.k, st.tk) * s.ko;
    row_tiles == 1
        && col_tiles > 1
        && (t.ob == 1 || (s.role == Role::Last && shape.a_invariant && !s.a_in_l1))
        && a_in_l0(target, st.tm, kp, shape.es)
}

/// The largest tile of any dimension.
const MAX_TILE: u64 = 256;

/// The reduction steps a stage may take, largest first.
fn k_steps(s: &StageShape, cap: u64, free: bool) -> Vec<u64> {
    let kp = round16(s.k);
    let mut v: Vec<u64> = match s.steps {
        Steps::Any if free => multiples(s.k, cap.min(MAX_TILE)),
        Steps::Any => divisors(kp, cap.min(MAX_TILE)),
        Steps::Groups { group, .. } => {
            let mut v: Vec<u64> = divisors(kp, u64::MAX)
                .into_iter()
                .filter(|&t| t == kp || (s.k.is_multiple_of(t) && t.is_multiple_of(group)))
                .collect();
            // A gathered reduction in one step even past the usual cap when nothing smaller
            // divides it.
            if v.iter().any(|&t| t <= cap.min(MAX_TILE)) {
                v.retain(|&t| t <= cap.min(MAX_TILE));
            } else {
                v.retain(|&t| t == kp && t <= cap);
            }
            v
        }
    };
    v.reverse();
    v
}

/// The cheapest tiling of the kernel, or why none fits.
pub fn choose(
    target: &NpuTarget,
    shape: &Shape,
    double_buffer: bool,
    max_tile: Option<(u64, u64, u64)>,
) -> Result<Tiles, String> {
    ranked(target, shape, double_buffer, max_tile).map(|mut v| v.swap_remove(0))
}

/// Every tiling that fits, the cheapest first ([`choose`]'s order), or why none fits.
pub fn ranked(
    target: &NpuTarget,
    shape: &Shape,
    double_buffer: bool,
    max_tile: Option<(u64, u64, u64)>,
) -> Result<Vec<Tiles>, String> {
    let nbuf = if double_buffer { 2 } else { 1 };
    let (cap_m, cap_n, cap_k) = max_tile.unwrap_or((u64::MAX, u64::MAX, u64::MAX));
    let last = shape.stages[shape.stages.len() - 1];
    let (mp, np) = (round16(last.m), round16(last.n));
    let mut all: Vec<Tiles> = Vec::new();
    let tms: Vec<u64> = (1..=mp.min(MAX_TILE) / FRACTAL)
        .map(|d| d * FRACTAL)
        .filter(|&t| t <= cap_m && (t.is_power_of_two() || t == mp))
        .collect();
    let free = shape.free();
    let tns = if free {
        multiples(last.n, cap_n.min(MAX_TILE))
    } else {
        divisors(np, cap_n.min(MAX_TILE))
    };
    for &tm in &tms {
        for &tn in tns.iter().rev().filter(|&&tn| !shape.square || tn == tm) {
            for &tk in &k_steps(&last, cap_k, free) {
                let nt = round_to(np, tn) / tn;
                for ng in (1..=nt).filter(|g| nt.is_multiple_of(*g)) {
                    let ntb = nt / ng;
                    for ob in (1..=shape.outer).filter(|o| shape.outer.is_multiple_of(*o)) {
                        let Some(t) = candidate(
                            target,
                            shape,
                            StageTiles { tm, tn, tk },
                            (ntb, ng, ob),
                            nbuf,
                            (cap_m, cap_n, cap_k),
                        ) else {
                            continue;
                        };
                        all.push(t);
                    }
                }
            }
        }
    }
    if all.is_empty() {
        return Err(format!(
            "even 16×16 tiles with {} UB tiles, {} column and {} row vectors overflow a memory",
            shape.ub.tiles, shape.ub.columns, shape.ub.rows
        ));
    }
    let key = |t: &Tiles| {
        let l = t.last();
        (
            !efficient(target, t, shape),
            // The estimated cycles alone. A convolution that slides its window over a block's
            // output rows reads all the weights and `kh − 1` halo rows again in every block,
            // so more blocks read more GM; the fastest split is chosen all the same
            // (`--npu-cores` caps the blocks where the traffic matters more than the cycles).
            t.estimate,
            u64::MAX - l.tm * l.tn * l.tk,
        )
    };
    // Stable: among equal keys the first found stays first, as a strict minimum keeps it.
    all.sort_by_key(key);
    Ok(all)
}

/// The share of the cores' time the Cube must be busy for a tiling to count as efficient.
const EFFICIENT: f64 = 0.8;

/// Whether the estimate keeps the Cube of every core it uses busy at least [`EFFICIENT`] of
/// the time: more cores than the GM bandwidth can feed only wait for data, so the fastest
/// efficient tiling is preferred to a marginally faster one that leaves the Cubes idle.
fn efficient(target: &NpuTarget, t: &Tiles, shape: &Shape) -> bool {
    let cores = t.blocks(shape).min(target.cores()).max(1);
    let per = target.machine.cube_per_fractal.max(1) * if shape.es == 4 { 2 } else { 1 };
    let macs: u64 = shape
        .stages
        .iter()
        .map(|s| s.m.div_ceil(FRACTAL) * round16(s.n) / FRACTAL * round16(s.k) / FRACTAL * s.ko)
        .sum::<u64>()
        * shape.outer
        * per;
    macs as f64 >= EFFICIENT * (t.estimate.max(1) * cores) as f64
}

/// The producers' tiles for a last-stage tiling, the memories checked, and the estimate.
fn candidate(
    target: &NpuTarget,
    shape: &Shape,
    lt: StageTiles,
    (ntb, ng, ob): (u64, u64, u64),
    nbuf: u64,
    caps: (u64, u64, u64),
) -> Option<Tiles> {
    let es = shape.es;
    let last = shape.stages[shape.stages.len() - 1];
    let kp_last = round16(last.k);
    let group = ntb * lt.tn;
    let l0a = target.capacity(Mem::L0a);
    let l0b = target.capacity(Mem::L0b);
    let l0c = target.capacity(Mem::L0c);
    let fits_l0 = |t: &StageTiles| {
        t.tm * t.tk * es * nbuf <= l0a
            && t.tk * t.tn * es * nbuf <= l0b
            && t.tm * t.tn * 4 * nbuf <= l0c
    };
    if !fits_l0(&lt) {
        return None;
    }
    let mut stages = Vec::new();
    for s in &shape.stages[..shape.stages.len() - 1] {
        // The region the block computes: its rows and columns, each a multiple of the tile.
        let (rows, cols) = match s.role {
            Role::FeedsA => (lt.tm, kp_last),
            _ => (kp_last, group),
        };
        let tm_choices: Vec<u64> = if s.role == Role::FeedsA {
            vec![lt.tm]
        } else {
            divisors(rows, MAX_TILE.min(caps.0))
        };
        let mut pick: Option<StageTiles> = None;
        for &tm in &tm_choices {
            for &tn in &divisors(cols, MAX_TILE.min(caps.1)) {
                for &tk in &k_steps(s, caps.2, false) {
                    let t = StageTiles { tm, tn, tk };
                    let better = pick.is_none_or(|p| (tm * tn, tk) > (p.tm * p.tn, p.tk));
                    if fits_l0(&t) && better {
                        pick = Some(t);
                    }
                }
            }
        }
        stages.push(pick?);
    }
    stages.push(lt);
    // UB: the drain tile (shared by every stage), the epilogue's and prologue's tiles.
    let tile = lt.tm * lt.tn * 4 * nbuf;
    let drain = stages.iter().map(|t| t.tm * t.tn * 4 * nbuf).max()?;
    let scaled = shape.stages.iter().any(|s| s.a_scaled || s.b_scaled);
    let ub = drain
        + shape.ub.tiles.saturating_sub(1) * tile
        + shape.ub.init_tiles * tile
        + shape.ub.columns * group * 4
        + shape.ub.rows * lt.tm * (lt.tn + 1) * 4
        + shape.ub.scalar_bytes
        + if scaled { 2 * PIECE_BYTES } else { 0 };
    if ub > target.capacity(Mem::Ub) {
        return None;
    }
    // L1: the streamed operands' slots (shared by every stage), the panels.
    let mut a_slot = 0;
    let mut b_slot = 0;
    let mut panels = 0;
    for (s, t) in shape.stages.iter().zip(&stages) {
        let (rows, cols) = match s.role {
            Role::Last => (t.tm, group),
            Role::FeedsA => (t.tm, kp_last),
            Role::FeedsB => (kp_last, group),
        };
        let kp = round_to(s.k, t.tk) * s.ko;
        if s.a_scaled {
            panels += rows * kp * 4;
        } else if !s.a_in_l1 {
            a_slot = a_slot.max(t.tm * t.tk * es * nbuf);
        }
        if s.b_scaled {
            panels += kp * cols * 4;
        } else if let Some((per, cs)) = s.window {
            b_slot = b_slot.max(match sliding(s, t, lt, ob) {
                Some(sl) => sl.bytes(ob, es),
                None => t.tk.min(s.k).div_ceil(per) * cs * es * nbuf,
            });
        } else if !s.b_in_l1 {
            b_slot = b_slot.max(t.tk * t.tn * es * nbuf);
        }
        match s.role {
            Role::FeedsA => panels += lt.tm * kp_last * 4,
            Role::FeedsB => panels += kp_last * group * 4,
            Role::Last => {}
        }
    }
    let l1 = target.capacity(Mem::L1);
    if a_slot + b_slot + panels > l1 {
        return None;
    }
    // The last stage's A from GM stays in L1 across its column tiles when it fits and is the
    // same in every independent iteration of the block.
    let a_panel = lt.tm * round_to(last.k, lt.tk) * last.ko * es;
    let a_resident = !last.a_in_l1
        && !last.a_scaled
        && (ob == 1 || shape.a_invariant)
        && a_panel + b_slot + panels <= l1;
    let a_held = if a_resident { a_panel } else { 0 };
    let nl1 = stream_slots(
        shape,
        &stages,
        (ntb, nbuf),
        (a_slot + b_slot, a_held + panels),
        l1,
    );
    let mut t = Tiles {
        stages,
        ntb,
        ng,
        ob,
        a_resident,
        a_l0: Vec::new(),
        nbuf,
        nl1,
        estimate: 0,
        gm_bytes: 0,
    };
    t.a_l0 = (0..shape.stages.len())
        .map(|i| {
            let (rows, cols) = region(shape, &t, i);
            let st = t.stages[i];
            a_l0_resident(target, shape, &t, i, (rows.div_ceil(st.tm), cols / st.tn))
        })
        .collect();
    (t.estimate, t.gm_bytes) = estimate(target, shape, &t);
    Some(t)
}

/// The most L1 slots of the streamed operands.
const MAX_STREAM_SLOTS: u64 = 8;

/// L1 slots of the operands streamed from GM when double-buffered: two, or — when a stage
/// reads a panel that the block writes into L1 first (a scaled operand, a stage's result) —
/// as many as the block's steps up to [`MAX_STREAM_SLOTS`] that L1 holds besides `held`
/// bytes. The Cube's first step waits for the panel; with more slots MTE2 streams the
/// following steps' tiles meanwhile instead of waiting for the first ones to be used.
/// `slots` is the bytes of `nbuf` slots of every streamed operand.
fn stream_slots(
    shape: &Shape,
    stages: &[StageTiles],
    (ntb, nbuf): (u64, u64),
    (slots, held): (u64, u64),
    l1: u64,
) -> u64 {
    let panel = shape
        .stages
        .iter()
        .any(|s| s.a_in_l1 || s.b_in_l1 || s.a_scaled || s.b_scaled);
    if nbuf < 2 || !panel || slots == 0 {
        return nbuf;
    }
    let last = shape.stages[shape.stages.len() - 1];
    let lt = stages[stages.len() - 1];
    let kp_last = round16(last.k);
    let group = ntb * lt.tn;
    let steps = shape
        .stages
        .iter()
        .zip(stages)
        .map(|(s, t)| {
            let (rows, cols) = match s.role {
                Role::Last => (t.tm, group),
                Role::FeedsA => (t.tm, kp_last),
                Role::FeedsB => (kp_last, group),
            };
            rows.div_ceil(t.tm) * (cols / t.tn) * round_to(s.k, t.tk) / t.tk * s.ko
        })
        .max()
        .unwrap_or(0);
    let fit = l1.saturating_sub(held) / (slots / nbuf).max(1);
    steps.min(MAX_STREAM_SLOTS).min(fit).max(nbuf)
}

/// The rows and columns a stage computes in a block: the last stage's row panel and column
/// group, a producer's panel of the last stage's operand.
fn region(shape: &Shape, t: &Tiles, stage: usize) -> (u64, u64) {
    let last = shape.stages[shape.stages.len() - 1];
    let lt = t.last();
    let kp_last = round16(last.k);
    let group = t.ntb * lt.tn;
    match shape.stages[stage].role {
        Role::Last => (t.stages[stage].tm, group),
        Role::FeedsA => (t.stages[stage].tm, kp_last),
        Role::FeedsB => (kp_last, group),
    }
}

/// The slide of a stage's window when the block's `ob` iterations share one copy of it.
fn sliding(s: &StageShape, t: &StageTiles, lt: StageTiles, ob: u64) -> Option<Slide> {
    let steps = round_to(s.k, t.tk) / t.tk * s.ko;
    let row_tiles = if s.role == Role::Last {
        lt.tm.div_ceil(t.tm)
    } else {
        2
    };
    s.slide
        .filter(|sl| conv_rows::applies(sl, ob, steps, row_tiles))
}

/// Estimated cycles of the whole kernel with tiling `t`, and the GM bytes it reads.
///
/// A block of several independent iterations whose one stage streams both operands from GM
/// runs them as one pipeline (its flags are set once around them), so the first step's copies
/// and the last tile's drain are counted once for the block; otherwise once per iteration.
fn estimate(target: &NpuTarget, shape: &Shape, t: &Tiles) -> (u64, u64) {
    let mc = &target.machine;
    let blocks = t.blocks(shape);
    let running = blocks.min(target.cores()).max(1);
    let waves = blocks.div_ceil(target.cores());
    let gm_bw = target
        .bandwidth(CopyPath::GmL1)
        .min((mc.gm_bandwidth / running).max(1));
    let es = shape.es;
    let per = if es == 4 {
        mc.cube_per_fractal_f32
    } else {
        mc.cube_per_fractal
    };
    let f = |x: u64| x / FRACTAL;
    let pipelined = t.ob > 1
        && shape.stages.len() == 1
        && shape.stages.iter().all(|s| !s.a_scaled && !s.b_scaled);
    let iters = if pipelined { t.ob } else { 1 };
    let mut block = 0;
    // GM bytes a block reads: once per block, and per independent iteration.
    let (mut gm_block, mut gm_iter) = (0, 0);
    for (i, (s, st)) in shape.stages.iter().zip(&t.stages).enumerate() {
        let (rows, cols) = region(shape, t, i);
        let tiles = rows.div_ceil(st.tm) * cols / st.tn;
        let steps = round_to(s.k, st.tk) / st.tk * s.ko;
        let a_bytes = st.tm * st.tk * es;
        let b_bytes = st.tk * st.tn * es;
        let startup2 = target.startup(CopyPath::GmL1);
        // Copies of a gathered tile: one per 16-element chunk of each row, in bursts along
        // the longer of the largest component and the chunks.
        let gathered = |rows: u64, cols: u64, axis: u64| {
            (rows * f(cols)).div_ceil(axis.max(f(cols)).max(1)) * startup2
        };
        let a_copy = if s.a_in_l1 || s.a_scaled {
            0
        } else if let Some((true, axis)) = s.gather {
            gathered(st.tk, st.tm, axis) + a_bytes.div_ceil(gm_bw)
        } else {
            f(st.tk) * startup2 + a_bytes.div_ceil(gm_bw)
        };
        let slide = sliding(s, st, t.last(), t.ob);
        // A sliding window's rows: every row of the first iteration's window, then one row
        // per iteration.
        let row_copy = |rows: u64| {
            let sl = slide.expect("a sliding window");
            let (per, _) = s.window.expect("a window");
            rows * startup2 + (st.tk.min(s.k).div_ceil(per) * rows * sl.copy * es).div_ceil(gm_bw)
        };
        let b_copy = if s.b_in_l1 || s.b_scaled {
            0
        } else if let Some((per, cs)) = s.window {
            // A window the block's iterations share is copied once for all of them.
            match slide {
                Some(sl) if pipelined => row_copy(sl.kh),
                Some(sl) => {
                    let bytes = st.tk.min(s.k).div_ceil(per) * sl.gm_elements(t.ob) * es;
                    ((sl.kh + t.ob - 1) * startup2 + bytes.div_ceil(gm_bw)).div_ceil(t.ob)
                }
                None => startup2 + (st.tk.min(s.k).div_ceil(per) * cs * es).div_ceil(gm_bw),
            }
        } else if let Some((false, axis)) = s.gather {
            gathered(st.tk, st.tn, axis) + b_bytes.div_ceil(gm_bw)
        } else {
            f(st.tn) * startup2 + b_bytes.div_ceil(gm_bw)
        };
        // A step's MTE1 also waits for and signals MTE2 and the Cube (four flags). An A that
        // stays in L0A (`t.a_l0`) is still counted at every step of a block whose fill and
        // drain this estimate counts per iteration: what it saves matters most on small
        // blocks, and counting it alone would favour fewer, larger blocks than are fastest.
        // A window's B is one `load3d`.
        let load_a = f(st.tm) * target.startup(CopyPath::L1L0a)
            + a_bytes.div_ceil(target.bandwidth(CopyPath::L1L0a));
        let b_loads = if s.window.is_some() { 1 } else { f(st.tk) };
        let mte1 = load_a
            + b_loads * target.startup(CopyPath::L1L0b)
            + b_bytes.div_ceil(target.bandwidth(CopyPath::L1L0b))
            + 4 * mc.sync_cost;
        let mte1_later = if pipelined && t.a_l0.get(i).copied().unwrap_or(false) {
            mte1 - load_a
        } else {
            mte1
        };
        let cube = mc.cube_startup + per * f(st.tm) * f(st.tk) * f(st.tn);
        let c_bytes = st.tm * st.tn * 4;
        let last = i + 1 == shape.stages.len();
        // The drain waits for the Cube and MTE3 and signals them (four flags).
        let vector = target.startup(CopyPath::L0cUb)
            + c_bytes.div_ceil(target.bandwidth(CopyPath::L0cUb))
            + 4 * mc.sync_cost
            + if last {
                shape.ub.ops.cycles(mc, st.tm, st.tn)
            } else {
                0
            };
        let mte3 = f(st.tn) * target.startup(CopyPath::UbGm)
            + c_bytes.div_ceil(target.bandwidth(CopyPath::UbGm).min(gm_bw));
        let drain = vector + mte3;
        // A resident A crosses GM once per row panel.
        let resident = s.role == Role::Last && t.a_resident;
        let later_a = if resident { 0 } else { a_copy };
        // A window's channels in one step are copied once for all the column tiles; a
        // sliding window's next row once per iteration.
        let later_b = match slide {
            Some(_) if pipelined => row_copy(1).div_ceil(tiles * steps),
            _ if s.window.is_some() && steps == 1 => 0,
            _ => b_copy,
        };
        let ub_bw = target
            .bandwidth(CopyPath::GmUb)
            .min((mc.gm_bandwidth / running).max(1));
        // An accumulator that starts from GM crosses GM → UB on MTE2 once per tile; MTE2 also
        // waits for and signals MTE1 at every step.
        let init = if last && shape.ub.init_tiles > 0 {
            target.startup(CopyPath::GmUb) + c_bytes.div_ceil(ub_bw)
        } else {
            0
        };
        let mte2 = init.div_ceil(steps.max(1)) + 2 * mc.sync_cost;
        // The first step's copies; a block that slides its window reads the weights and the
        // first window's rows at its own pace or at its share of what all the blocks read at
        // once through the shared bandwidth, whichever is slower.
        let first_copies = match slide {
            Some(sl) if pipelined && !s.a_in_l1 && !matches!(s.gather, Some((true, _))) => {
                let (per, _) = s.window.expect("a sliding window is a window");
                let bytes = a_bytes + st.tk.min(s.k).div_ceil(per) * sl.kh * sl.copy * es;
                let alone = (f(st.tk) + sl.kh) * startup2
                    + bytes.div_ceil(target.bandwidth(CopyPath::GmL1));
                alone.max((bytes * running).div_ceil(mc.gm_bandwidth.max(1)))
            }
            _ => a_copy + b_copy,
        };
        let n = tiles * iters;
        let run = if t.nbuf == 1 {
            steps * (first_copies + mte2 + mte1 + cube)
                + (n - 1) * steps * (later_a + later_b + mte2 + mte1_later + cube)
                + n * drain
        } else {
            let first = [cube, mte1, first_copies + mte2]
                .into_iter()
                .max()
                .unwrap_or(0);
            // The Vector unit and MTE3 drain one tile while the next is computed.
            let later = [
                cube,
                mte1_later,
                later_a + later_b + mte2,
                vector.div_ceil(steps.max(1)),
                mte3.div_ceil(steps.max(1)),
            ]
            .into_iter()
            .max()
            .unwrap_or(0);
            // After the last step's copies: its loads into L0, the Cube, the drain.
            steps * first + (n - 1) * steps * later + mte1 + cube + drain
        };
        // A resident A that every independent iteration shares crosses GM once per block.
        let once = resident && shape.a_invariant;
        let run = if once && !pipelined {
            run.saturating_sub(a_copy * (t.ob - 1) / t.ob.max(1))
        } else {
            run
        };
        // A scaled operand crosses GM → UB → L1 once per block, in two or more pieces.
        let scaled = (s.a_scaled as u64) * rows * round_to(s.k, st.tk) * s.ko * 4
            + (s.b_scaled as u64) * cols * round_to(s.k, st.tk) * s.ko * 4;
        let pieces = if scaled > 0 { 2 * startup2 } else { 0 };
        block += run + scaled.div_ceil(ub_bw) + pieces;
        // GM bytes: A's tiles (a resident panel once, an A kept in L0A at the first column
        // tile), B's tiles or window rows, the accumulators' starts.
        let kp = round_to(s.k, st.tk) * s.ko;
        gm_block += scaled;
        if s.a_in_l1 || s.a_scaled {
        } else if resident {
            let panel = rows * kp * es;
            if once {
                gm_block += panel;
            } else {
                gm_iter += panel;
            }
        } else if t.a_l0.get(i).copied().unwrap_or(false) {
            let a = rows.div_ceil(st.tm) * steps * a_bytes;
            if t.ob > 1 {
                gm_block += a;
            } else {
                gm_iter += a;
            }
        } else {
            gm_iter += tiles * steps * a_bytes;
        }
        if s.b_in_l1 || s.b_scaled {
        } else if let Some((per, cs)) = s.window {
            let channels = st.tk.min(s.k).div_ceil(per);
            match slide {
                Some(sl) => gm_block += channels * sl.gm_elements(t.ob) * es,
                None if steps == 1 => gm_iter += channels * cs * es,
                None => gm_iter += tiles * steps * channels * cs * es,
            }
        } else {
            gm_iter += tiles * steps * b_bytes;
        }
        if last {
            gm_iter += tiles * shape.ub.init_tiles.min(1) * c_bytes;
        }
    }
    let lt = t.last();
    gm_block += shape.ub.columns * t.ntb * lt.tn * 4 + shape.ub.rows * lt.tm * 4;
    let cycles = waves * block * (t.ob / iters);
    (cycles, blocks * (gm_block + t.ob * gm_iter))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matmul((m, n, k): (u64, u64, u64)) -> Shape {
        Shape {
            es: 2,
            stages: vec![StageShape {
                m,
                n,
                k,
                ko: 1,
                steps: Steps::Any,
                role: Role::Last,
                a_in_l1: false,
                b_in_l1: false,
                a_scaled: false,
                b_scaled: false,
                gather: None,
                window: None,
                slide: None,
            }],
            outer: 1,
            a_invariant: true,
            ub: UbNeeds {
                tiles: 2,
                columns: 1,
                scalar_bytes: 32,
                ..Default::default()
            },
            square: false,
        }
    }

    #[test]
    fn tiles_fit_and_are_multiples_of_the_fractal() {
        let target = NpuTarget::default();
        for (m, n, k) in [
            (256, 256, 256),
            (1024, 1024, 1024),
            (200, 64, 48),
            (16, 16, 16),
            (33, 47, 100),
        ] {
            let t = choose(&target, &matmul((m, n, k)), true, None).expect("a tiling");
            let l = t.last();
            assert!(l.tm.is_multiple_of(16) && l.tn.is_multiple_of(16) && l.tk.is_multiple_of(16));
            assert!(t.ng * t.ntb * l.tn >= n && t.ng * t.ntb * l.tn < n + l.tn);
            assert!(l.tm * l.tk * 2 * 2 <= target.capacity(Mem::L0a));
            assert!(l.tm * l.tn * 4 * 2 <= target.capacity(Mem::L0c));
        }
    }

    #[test]
    fn a_tile_that_would_overflow_l0a_shrinks() {
        // A machine whose L0A holds only 8 KiB: 256 × 256 f16 operands cannot be its tile.
        let text =
            sim::DEFAULT_MACHINE.replace("mem.L0A.capacity = 65536", "mem.L0A.capacity = 8192");
        let target = NpuTarget::new(sim::Machine::parse("small.machine", &text).expect("parses"));
        let t = choose(&target, &matmul((512, 512, 512)), true, None).expect("a smaller tiling");
        let l = t.last();
        assert!(l.tm * l.tk * 2 * t.nbuf <= 8192, "{t:?}");
    }

    #[test]
    fn a_gathered_reduction_steps_over_whole_groups() {
        // 3×3 windows over 32 channels: 288 rows in groups of 9; a step is 144 or 288 rows.
        let mut shape = matmul((32, 64, 288));
        shape.stages[0].steps = Steps::Groups {
            group: 9,
            outer: 32,
        };
        shape.es = 4;
        let t = choose(&NpuTarget::default(), &shape, true, None).expect("a tiling");
        assert!([144, 288].contains(&t.last().tk), "{t:?}");
    }
}
