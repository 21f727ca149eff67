//! Tile sizes of the Cube's matrix product, chosen from the machine's capacities and costs.
//!
//! The output `M × N` is cut into `tm × tn` tiles and the reduction into `tk` steps, each a
//! multiple of the 16-element fractal (`tn` and `tk` dividing N and K; `tm` may leave a row
//! tail). A block (one `block_idx`, one core at a time) computes one row panel of `tm` rows
//! and `ntb` consecutive column tiles; `ng` blocks share a row panel. Every candidate whose
//! footprints fit L0A (`tm·tk` f16), L0B (`tk·tn` f16), L0C (`tm·tn` f32), UB (the epilogue's
//! tiles, `tm·tn` f32 each, plus the per-column vectors) and L1 — all doubled when double
//! buffering — is estimated with the machine's costs: per block, the busiest of MTE2 (GM→L1
//! at the path's bandwidth or the share of the GM bandwidth the running blocks leave it),
//! MTE1, the Cube and the write-back, times the waves of blocks over the cores. A's row panel
//! stays in L1 across the block's column tiles when it fits, so it crosses GM once. The
//! cheapest estimate wins among the tilings that keep the Cubes they use busy (more blocks
//! than the GM bandwidth can feed only add idle cores); ties go to the larger tile.

use sim::isa::{CopyPath, Mem};

use super::{NpuTarget, FRACTAL};

/// The chosen tiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiles {
    pub tm: u64,
    pub tn: u64,
    pub tk: u64,
    /// Column tiles per block.
    pub ntb: u64,
    /// Blocks per row panel.
    pub ng: u64,
    /// Whether A's whole row panel (`tm × K`) stays in L1.
    pub a_resident: bool,
    /// Buffers per double-buffered tile: 2, or 1 without double buffering.
    pub nbuf: u64,
    /// Estimated cycles.
    pub estimate: u64,
}

impl Tiles {
    /// Row panels.
    pub fn mt(&self, m: u64) -> u64 {
        m.div_ceil(self.tm)
    }

    pub fn blocks(&self, m: u64) -> u64 {
        self.mt(m) * self.ng
    }
}

/// What the tiles must hold besides the Cube's operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UbNeeds {
    /// `tm × tn` f32 tiles per buffer (the accumulator's copy and the epilogue's).
    pub tiles: u64,
    /// f32 per-column vectors (each `ntb · tn` elements).
    pub columns: u64,
    /// Bytes of scalars.
    pub scalar_bytes: u64,
}

const SIZES: [u64; 5] = [16, 32, 64, 128, 256];

/// The cheapest tiling of an `m × n × k` product, or why none fits.
pub fn choose(
    target: &NpuTarget,
    (m, n, k): (u64, u64, u64),
    ub: UbNeeds,
    double_buffer: bool,
    max_tile: Option<(u64, u64, u64)>,
) -> Result<Tiles, String> {
    let nbuf = if double_buffer { 2 } else { 1 };
    let (cap_m, cap_n, cap_k) = max_tile.unwrap_or((u64::MAX, u64::MAX, u64::MAX));
    let mut best: Option<Tiles> = None;
    let mp = m.div_ceil(FRACTAL) * FRACTAL;
    for &tm in SIZES.iter().filter(|&&t| t <= mp.max(16) && t <= cap_m) {
        for &tn in SIZES.iter().filter(|&&t| n % t == 0 && t <= cap_n) {
            for &tk in SIZES.iter().filter(|&&t| k % t == 0 && t <= cap_k) {
                let nt = n / tn;
                for ng in (1..=nt).filter(|g| nt % g == 0) {
                    let ntb = nt / ng;
                    let Some(a_resident) = fits(target, (tm, tn, tk, ntb), k, ub, nbuf) else {
                        continue;
                    };
                    let mut t = Tiles {
                        tm,
                        tn,
                        tk,
                        ntb,
                        ng,
                        a_resident,
                        nbuf,
                        estimate: 0,
                    };
                    t.estimate = estimate(target, &t, (m, n, k), ub);
                    let key = |t: &Tiles| {
                        (
                            !efficient(target, t, (m, n, k)),
                            t.estimate,
                            u64::MAX - t.tm * t.tn * t.tk,
                        )
                    };
                    let better = best.as_ref().is_none_or(|b| key(&t) < key(b));
                    if better {
                        best = Some(t);
                    }
                }
            }
        }
    }
    best.ok_or_else(|| {
        format!(
            "even 16×16×16 tiles with {} UB tiles and {} column vectors overflow a memory",
            ub.tiles, ub.columns
        )
    })
}

/// The share of the cores' time the Cube must be busy for a tiling to count as efficient.
const EFFICIENT: f64 = 0.8;

/// Whether the estimate keeps the Cube of every core it uses busy at least [`EFFICIENT`] of
/// the time: more cores than the GM bandwidth can feed only wait for data, so the fastest
/// efficient tiling is preferred to a marginally faster one that leaves the Cubes idle.
fn efficient(target: &NpuTarget, t: &Tiles, (m, n, k): (u64, u64, u64)) -> bool {
    let blocks = t.blocks(m);
    let cores = blocks.min(target.cores()).max(1);
    let macs = m.div_ceil(FRACTAL) * (n / FRACTAL) * (k / FRACTAL);
    macs as f64 >= EFFICIENT * (t.estimate.max(1) * cores) as f64
}

/// Whether the footprints fit; `Some(a_resident)` when they do.
fn fits(
    target: &NpuTarget,
    (tm, tn, tk, ntb): (u64, u64, u64, u64),
    k: u64,
    ub: UbNeeds,
    nbuf: u64,
) -> Option<bool> {
    let l0a = tm * tk * 2 * nbuf;
    let l0b = tk * tn * 2 * nbuf;
    let l0c = tm * tn * 4 * nbuf;
    let ub_bytes = ub.tiles * tm * tn * 4 * nbuf + ub.columns * ntb * tn * 4 + ub.scalar_bytes;
    if l0a > target.capacity(Mem::L0a)
        || l0b > target.capacity(Mem::L0b)
        || l0c > target.capacity(Mem::L0c)
        || ub_bytes > target.capacity(Mem::Ub)
    {
        return None;
    }
    let b_l1 = tk * tn * 2 * nbuf;
    let l1 = target.capacity(Mem::L1);
    if tm * k * 2 + b_l1 <= l1 {
        Some(true)
    } else if tm * tk * 2 * nbuf + b_l1 <= l1 {
        Some(false)
    } else {
        None
    }
}

/// Estimated cycles of the whole kernel with tiling `t`.
fn estimate(target: &NpuTarget, t: &Tiles, (m, _n, k): (u64, u64, u64), ub: UbNeeds) -> u64 {
    let mc = &target.machine;
    let blocks = t.blocks(m);
    let running = blocks.min(target.cores()).max(1);
    let waves = blocks.div_ceil(target.cores());
    let gm_bw = target
        .bandwidth(CopyPath::GmL1)
        .min((mc.gm_bandwidth / running).max(1));
    let kt = k / t.tk;
    let f = |x: u64| x / FRACTAL;
    let a_bytes = t.tm * t.tk * 2;
    let b_bytes = t.tk * t.tn * 2;
    let startup2 = target.startup(CopyPath::GmL1);
    let a_copy = f(t.tk) * startup2 + a_bytes.div_ceil(gm_bw);
    let b_copy = f(t.tn) * startup2 + b_bytes.div_ceil(gm_bw);
    let mte1 = t.tm / FRACTAL * target.startup(CopyPath::L1L0a)
        + a_bytes.div_ceil(target.bandwidth(CopyPath::L1L0a))
        + f(t.tk) * target.startup(CopyPath::L1L0b)
        + b_bytes.div_ceil(target.bandwidth(CopyPath::L1L0b));
    let cube = mc.cube_startup + mc.cube_per_fractal * f(t.tm) * f(t.tk) * f(t.tn);
    let c_bytes = t.tm * t.tn * 4;
    let repeats = c_bytes / super::VECTOR_BYTES;
    let vector = c_bytes.div_ceil(target.bandwidth(CopyPath::L0cUb))
        + ub.tiles.saturating_sub(1) * (mc.vector_startup + mc.vector_per_repeat * repeats);
    let mte3 = f(t.tn) * target.startup(CopyPath::UbGm)
        + c_bytes.div_ceil(target.bandwidth(CopyPath::UbGm).min(gm_bw));
    let drain = vector + mte3;
    // The first column tile also brings A's row panel when it stays resident; a streamed A
    // comes with every step.
    let later_a = if t.a_resident { 0 } else { a_copy };
    let block = if t.nbuf == 1 {
        kt * (a_copy + b_copy + mte1 + cube)
            + (t.ntb - 1) * kt * (later_a + b_copy + mte1 + cube)
            + t.ntb * drain
    } else {
        let first = [cube, mte1, a_copy + b_copy].into_iter().max().unwrap_or(0);
        let later = [cube, mte1, later_a + b_copy, drain.div_ceil(kt.max(1))]
            .into_iter()
            .max()
            .unwrap_or(0);
        kt * first + (t.ntb - 1) * kt * later + a_copy + b_copy + mte1 + drain
    };
    waves * block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_fit_and_are_multiples_of_the_fractal() {
        let target = NpuTarget::default();
        for (m, n, k) in [
            (256, 256, 256),
            (1024, 1024, 1024),
            (200, 64, 48),
            (16, 16, 16),
        ] {
            let t = choose(
                &target,
                (m, n, k),
                UbNeeds {
                    tiles: 2,
                    columns: 1,
                    scalar_bytes: 32,
                },
                true,
                None,
            )
            .expect("a tiling");
            assert!(t.tm.is_multiple_of(16) && t.tn.is_multiple_of(16) && t.tk.is_multiple_of(16));
            assert!(n.is_multiple_of(t.tn) && k.is_multiple_of(t.tk));
            assert!(t.tm * t.tk * 2 * 2 <= target.capacity(Mem::L0a));
            assert!(t.tm * t.tn * 4 * 2 <= target.capacity(Mem::L0c));
        }
    }

    #[test]
    fn a_tile_that_would_overflow_l0a_shrinks() {
        // A machine whose L0A holds only 8 KiB: 256 × 256 f16 operands cannot be its tile.
        let text =
            sim::DEFAULT_MACHINE.replace("mem.L0A.capacity = 65536", "mem.L0A.capacity = 8192");
        let target = NpuTarget::new(sim::Machine::parse("small.machine", &text).expect("parses"));
        let t = choose(
            &target,
            (512, 512, 512),
            UbNeeds {
                tiles: 1,
                ..Default::default()
            },
            true,
            None,
        )
        .expect("a smaller tiling");
        assert!(t.tm * t.tk * 2 * t.nbuf <= 8192, "{t:?}");
    }
}
