//! Tilings of small Cube kernels chosen on the simulator.
//!
//! The tiling estimate ([`super::tiles`]) leaves out the fill and drain of each block and
//! charges every copy a share of the GM bandwidth as if all blocks copied at once; on small
//! kernels, where those matter most, it can rank a faster tiling below a slower one. For a
//! kernel of at most [`TUNE_MACS`] multiply-adds the best-estimated few tilings are each
//! written out and simulated on deterministic inputs, and the one of fewest simulated cycles
//! is kept (the best-ranked one among equals, and whenever a candidate fails to simulate).
//! Simulating such a kernel costs about as much as compiling it.

use sim::SimOptions;

use super::tiles::{Shape, Tiles};
use super::{NpuTarget, FRACTAL};

/// The most multiply-adds of a kernel whose tiling is chosen on the simulator.
const TUNE_MACS: u64 = 1 << 24;

/// How many of the best-estimated tilings are simulated.
const CANDIDATES: usize = 6;

/// Multiply-adds of the kernel's stages, on whole fractals.
fn macs(shape: &Shape) -> u64 {
    let r = |x: u64| x.div_ceil(FRACTAL) * FRACTAL;
    shape
        .stages
        .iter()
        .map(|s| r(s.m) * r(s.n) * r(s.k) * s.ko)
        .sum::<u64>()
        * shape.outer
}

/// The tiling to use from `ranked` (best estimate first): the fastest on the simulator of the
/// first few when the kernel is small, else the first. `write` writes a tiling's program.
pub(crate) fn fastest(
    mut ranked: Vec<Tiles>,
    shape: &Shape,
    target: &NpuTarget,
    write: impl Fn(&Tiles) -> Option<String>,
) -> Tiles {
    if ranked.len() < 2 || macs(shape) > TUNE_MACS {
        return ranked.swap_remove(0);
    }
    ranked.truncate(CANDIDATES);
    let mut best: Option<(u64, usize)> = None;
    for (i, t) in ranked.iter().enumerate() {
        let Some(cycles) = write(t).and_then(|asm| cycles(&asm, target)) else {
            if i == 0 {
                break;
            }
            continue;
        };
        if best.is_none_or(|(c, _)| cycles < c) {
            best = Some((cycles, i));
        }
    }
    ranked.swap_remove(best.map_or(0, |(_, i)| i))
}

/// Simulated cycles of a program on inputs of the simulator's default seed.
fn cycles(asm: &str, target: &NpuTarget) -> Option<u64> {
    let kernels = sim::load_all("tune.npuasm", asm, &target.machine).ok()?;
    let inputs = sim::random_inputs_all(&kernels, sim::DEFAULT_SEED);
    let outcome = sim::simulate_all(&kernels, &inputs, &SimOptions::default()).ok()?;
    Some(outcome.report.cycles)
}
