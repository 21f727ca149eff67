//! Results over a triangular domain: the last stage computes whole square tiles of the
//! bounding box of rows and columns, and only the elements of the diagonal band
//! ([`Band`]) leave UB for GM.
//!
//! With square tiles of `T` (`tm = tn`) the tile at row panel `s0` and column tile
//! `c = s1 · ntb + nt` holds the elements whose column minus row is `T · q + (col − row)`
//! within the tile, `q = c − s0`. A tile is inside the band, outside it, or cut by it; the cut
//! ones are the few values of `q` near the band's edges, each written row by row (runs of rows
//! cut alike in one multi-burst copy). The register `s30` holds `q`. Every written element is
//! in the band and in the bounding box. A cut row's elements in a chunk of 16 columns are one
//! run; when it starts off UB's 32-byte grid (a lower edge: rows that start past the chunk's
//! first column), the scalar unit first moves the run's head — its elements up to the next
//! 32-byte block — back onto the block's start, over elements outside the band that no one
//! writes out, once the Vector unit has finished writing the tile (`pipe_barrier V`).

use std::fmt::Write as _;

use super::copies::Off;
use super::cube::{Emitter, Run};
use super::plan::Band;
use super::FRACTAL;

/// Bytes of an f32 row of one fractal column chunk in UB.
const CHUNK: i64 = 64;

impl Emitter<'_> {
    /// The block's tile of every live-out array of the epilogue, the band's elements only.
    pub(crate) fn write_out_band(&mut self, r: &Run, ub: &Off, band: Band) {
        let t = r.tiles;
        let tile = t.tm as i64;
        let st = self.plan.last();
        let (m, n) = (st.m.extent() as i64, st.n.extent() as i64);
        self.line("// The tile's diagonal: column tile minus row panel.");
        self.line(format!("mul s30, s1, {}", self.t.ntb));
        if r.col_tiles > 1 {
            self.line("add s30, s30, nt");
        }
        self.line("sub s30, s30, s0");
        // Every q a tile of the bounding box may have.
        let (q_min, q_max) = (-((m - 1) / tile), (n - 1) / tile);
        let span = tile - 1;
        let inside = |q: i64| band.contains(tile * q - span) && band.contains(tile * q + span);
        let outside = |q: i64| {
            band.lo.is_some_and(|lo| tile * q + span < lo)
                || band.hi.is_some_and(|hi| tile * q - span > hi)
        };
        let full: Vec<i64> = (q_min..=q_max).filter(|&q| inside(q)).collect();
        let cut: Vec<i64> = (q_min..=q_max)
            .filter(|&q| !inside(q) && !outside(q))
            .collect();
        let outputs = self.ep.outputs.clone();
        let (rows, cols) = (r.rows.clone(), r.cols.clone());
        for (a, buf) in outputs {
            let (name, base, stride, buf) = self.output_at(r, a, buf);
            self.tails(&[&rows, &cols], &mut |e, v| {
                // Inside the band: the whole tile (full q values are consecutive).
                if let (Some(&first), Some(&last)) = (full.first(), full.last()) {
                    let mut opened = 0;
                    if first > q_min {
                        e.open(format!("if s30 >= {first}"));
                        opened += 1;
                    }
                    if last < q_max {
                        e.open(format!("if s30 <= {last}"));
                        opened += 1;
                    }
                    e.copy_out(&name, &base, &buf, ub, t.tm, v[0], v[1], stride);
                    for _ in 0..opened {
                        e.close();
                    }
                }
                for &q in &cut {
                    e.open(format!("if s30 == {q}"));
                    e.copy_cut(
                        &name,
                        &base,
                        &buf,
                        ub,
                        t.tm,
                        (v[0], v[1]),
                        stride,
                        |r, c| band.contains(tile * q + c - r),
                    );
                    e.close();
                }
            });
        }
    }

    /// The elements `(r, c)` of a tile (`rows × cols` valid, `held` rows in UB) that `keep`
    /// holds, row by row and chunk by chunk, each row's kept elements one run of the chunk;
    /// consecutive rows kept alike are one copy.
    #[allow(clippy::too_many_arguments)]
    fn copy_cut(
        &mut self,
        gm: &str,
        dst: &Off,
        ub: &str,
        src: &Off,
        held: u64,
        (rows, cols): (u64, u64),
        stride: i64,
        keep: impl Fn(i64, i64) -> bool,
    ) {
        /// f32 elements of a 32-byte block.
        const BLOCK: i64 = 8;
        let chunks = cols.div_ceil(FRACTAL) as i64;
        let mut waited = false;
        for ch in 0..chunks {
            let width = (cols as i64 - ch * 16).min(16);
            // Per row: the kept run `[start, end)` of the chunk.
            let runs: Vec<(i64, i64)> = (0..rows as i64)
                .map(|r| {
                    let start = (0..width).find(|&c| keep(r, ch * 16 + c)).unwrap_or(width);
                    let end =
                        start + (start..width).take_while(|&c| keep(r, ch * 16 + c)).count() as i64;
                    (start, end)
                })
                .collect();
            debug_assert!((0..rows as i64).all(|r| {
                let (a, b) = runs[r as usize];
                (0..width).all(|c| keep(r, ch * 16 + c) == (a..b).contains(&c))
            }));
            let row_src = |r: usize| src.clone().add(ch * held as i64 * CHUNK + r as i64 * CHUNK);
            let mut r0 = 0usize;
            while r0 < runs.len() {
                let (start, end) = runs[r0];
                let mut r1 = r0 + 1;
                while r1 < runs.len() && runs[r1] == runs[r0] {
                    r1 += 1;
                }
                let n = r1 - r0;
                let copy = |e: &mut Self, from: i64, at: i64, len: i64| {
                    let d = dst.clone().add(r0 as i64 * stride + ch * CHUNK + at * 4);
                    let s = row_src(r0).add(from * 4);
                    let mut l = format!(
                        "copy_pad {gm}[{}], {ub}[{}], bytes={}",
                        d.text(),
                        s.text(),
                        len * 4
                    );
                    if n > 1 {
                        let _ = write!(l, ", n_burst={n}, src_stride={CHUNK}, dst_stride={stride}");
                    }
                    e.line(l);
                };
                if start < end {
                    let block = start / BLOCK * BLOCK;
                    let head_end = if start == block {
                        start
                    } else {
                        (block + BLOCK).min(end)
                    };
                    if head_end > start {
                        if !waited {
                            self.line("pipe_barrier V");
                            waited = true;
                        }
                        for r in r0..r1 {
                            for c in start..head_end {
                                let from = row_src(r).add(c * 4);
                                let to = row_src(r).add((block + c - start) * 4);
                                self.line(format!("ld.f32 f31, {ub}[{}]", from.text()));
                                self.line(format!("st.f32 {ub}[{}], f31", to.text()));
                            }
                        }
                        copy(self, block, start, head_end - start);
                    }
                    if head_end < end {
                        copy(self, head_end, head_end, end - head_end);
                    }
                }
                r0 = r1;
            }
        }
    }
}
