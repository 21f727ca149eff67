//! Results over a triangular domain: the last stage computes whole square tiles of the
//! bounding box of rows and columns, and only the elements of the diagonal band
//! ([`Band`]) leave UB for GM.
//!
//! With square tiles of `T` (`tm = tn`) the tile at row panel `s0` and column tile
//! `c = s1 · ntb + nt` holds the elements whose column minus row is `T · q + (col − row)`
//! within the tile, `q = c − s0`. A tile is inside the band, outside it, or cut by it; the cut
//! ones are the few values of `q` near the band's edges, each written row by row (runs of rows
//! cut alike in one multi-burst copy). The register `s30` holds `q`. Every written element is
//! in the band and in the bounding box; the elements of the band's edge rows start on UB's
//! 32-byte grid, since a cut tile row starts at its first column (the band has no lower
//! edge: [`crate::npu::plan`] refuses the others).

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
    /// holds, row by row and chunk by chunk, each row's kept elements a prefix of the chunk;
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
        let chunks = cols.div_ceil(FRACTAL) as i64;
        for ch in 0..chunks {
            let width = (cols as i64 - ch * 16).min(16);
            // Per row: the kept elements of the chunk, a prefix of it.
            let kept: Vec<i64> = (0..rows as i64)
                .map(|r| (0..width).take_while(|&c| keep(r, ch * 16 + c)).count() as i64)
                .collect();
            debug_assert!(
                (0..rows as i64).all(|r| (kept[r as usize]..width).all(|c| !keep(r, ch * 16 + c)))
            );
            let mut r0 = 0usize;
            while r0 < kept.len() {
                let len = kept[r0];
                let mut r1 = r0 + 1;
                while r1 < kept.len() && kept[r1] == len {
                    r1 += 1;
                }
                if len > 0 {
                    let n = r1 - r0;
                    let d = dst.clone().add(r0 as i64 * stride + ch * CHUNK);
                    let s = src
                        .clone()
                        .add(ch * held as i64 * CHUNK + r0 as i64 * CHUNK);
                    let mut l = format!(
                        "copy_pad {gm}[{}], {ub}[{}], bytes={}",
                        d.text(),
                        s.text(),
                        len * 4
                    );
                    if n > 1 {
                        let _ = write!(l, ", n_burst={n}, src_stride={CHUNK}, dst_stride={stride}");
                    }
                    self.line(l);
                }
                r0 = r1;
            }
        }
    }
}
