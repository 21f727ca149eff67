//! Zero rows of operand slots written once per block instead of at every copy.
//!
//! An operand tile whose rows run along the reduction holds, past the reduction's end, rows of
//! zeros up to the step (the fractal's padding, [`super::copies`]). When the reduction is one
//! step, every copy into a slot leaves those rows the same, so they need writing only once: at
//! the block's start, MTE3 copies them from a UB region the Vector unit zeroed (the drain
//! buffer, unused until the first tile is drained), and MTE2 — which every copy of the
//! operands keeps busy — copies only data. The copies then write the rows before the zeros
//! only, also where a whole chunk past the data is zero-filled, so that MTE2 and MTE3 never
//! write the same bytes.
//!
//! Order: `vdup` (V) → `copy` UB→L1 (MTE3) → the first `load2d` (MTE1 waits once, after
//! the flags it presets). The drain's first write into its buffer waits for MTE3 (the
//! preset `set_flag MTE3, V` is issued after these copies), so the zeros are read out first.

use super::cube::{Emitter, Fill, Run, RunOperand};
use super::plan::Inner;
use super::{FRACTAL, VECTOR_BYTES};

/// The event of the prologue's flags (V → MTE3, MTE3 → MTE1); no other flag of the cube
/// programs uses it on those pipe pairs.
const EVENT: u8 = 4;

/// The zero rows of one operand's slots: the on-chip buffer, the byte offset of each slot's
/// first zero row, chunks per slot, bytes between chunks and zero bytes per chunk.
struct ZeroRows {
    buf: String,
    slots: Vec<i64>,
    chunks: u64,
    chunk_stride: i64,
    bytes: u64,
}

impl Emitter<'_> {
    /// The operands' zero rows that can be written once, at the block's start: those of a
    /// one-stage kernel's operands from GM whose rows are the reduction, when it is one step
    /// that ends inside it.
    fn zero_rows(&self, runs: &[Run]) -> Vec<ZeroRows> {
        let [r] = runs else {
            return Vec::new();
        };
        let st = &self.plan.stages[r.stage];
        let (t, es) = (r.tiles, self.es);
        let k = st.k.extent();
        if self.plan.stages.len() != 1 || !st.k_outer.is_empty() || self.kp(r.stage) != t.tk {
            return Vec::new();
        }
        if k >= t.tk {
            return Vec::new();
        }
        let chunk_bytes = FRACTAL * es;
        let mut out = Vec::new();
        for (o, tile_len) in [(&r.a, t.tm), (&r.b, t.tn)] {
            if let Some(z) = self.operand_zero_rows(o, tile_len, (k, t.tk), chunk_bytes) {
                out.push(z);
            }
        }
        out
    }

    fn operand_zero_rows(
        &self,
        o: &RunOperand,
        tile_len: u64,
        (k, tk): (u64, u64),
        chunk_bytes: u64,
    ) -> Option<ZeroRows> {
        let Some((_, Inner::Other, false)) = &o.gm else {
            return None;
        };
        if !matches!(o.fill, Fill::Stream | Fill::Resident) || o.view.held != tk {
            return None;
        }
        // Every value the slot's registers take; anything else in the offset (a tile
        // counter) leaves the rows to the copies.
        let at = o.view.at(self.es);
        let mut slots = vec![at.c];
        for (name, coef) in &at.terms {
            let values = match name.as_str() {
                "kt" => 1,
                "s6" => self.t.nbuf,
                "s29" => self.t.nl1,
                _ => return None,
            } as i64;
            slots = slots
                .iter()
                .flat_map(|&s| (0..values).map(move |v| s + v * coef))
                .collect();
        }
        Some(ZeroRows {
            buf: o.view.buf.clone(),
            slots: slots.iter().map(|s| s + (k * chunk_bytes) as i64).collect(),
            chunks: tile_len / FRACTAL,
            chunk_stride: (tk * chunk_bytes) as i64,
            bytes: (tk - k) * chunk_bytes,
        })
    }

    /// Writes the zero rows that [`Self::zero_rows`] finds and records their buffers, so that
    /// the copies leave those rows alone. Emitted before any flag of the runs is preset.
    pub(crate) fn prefill_zero_rows(&mut self, runs: &[Run]) {
        let rows = self.zero_rows(runs);
        let source = rows.iter().map(|z| z.chunks * z.bytes).max().unwrap_or(0);
        // The zeros come from the drain buffer: `tm·tn` f32 elements per slot hold
        // `chunks·bytes` (fewer than 16 rows of 16 elements per chunk) with room to spare;
        // checked all the same.
        let t = self.t.last();
        let repeats = source.div_ceil(VECTOR_BYTES);
        if rows.is_empty() || repeats * VECTOR_BYTES > t.tm * t.tn * 4 || repeats > 255 {
            return;
        }
        self.line("// Zero rows past the reduction, once: UB zeros into every slot.");
        self.line(format!("vdup.f32 ub_t0[0], 0.0, repeat={repeats}"));
        self.line(format!("set_flag V, MTE3, {EVENT}"));
        self.line(format!("wait_flag V, MTE3, {EVENT}"));
        for z in &rows {
            let len = z.bytes / 32;
            let gap = (z.chunk_stride - z.bytes as i64) / 32;
            for s in &z.slots {
                let mut line = format!("copy {}[{s}], ub_t0[0]", z.buf);
                if z.chunks > 1 {
                    line += &format!(", n_burst={}", z.chunks);
                }
                line += &format!(", len={len}");
                if z.chunks > 1 && gap > 0 {
                    line += &format!(", dst_gap={gap}");
                }
                self.line(line);
            }
            self.prefilled.push(z.buf.clone());
        }
        self.line(format!("set_flag MTE3, MTE1, {EVENT}"));
    }

    /// MTE1's wait for the zero rows, once, after the flags the runs preset (MTE1 sets some of
    /// those that MTE2 waits for first, which must not wait behind the zeros).
    pub(crate) fn wait_zero_rows(&mut self) {
        if !self.prefilled.is_empty() && !self.prefill_waited {
            self.line(format!("wait_flag MTE3, MTE1, {EVENT}"));
            self.prefill_waited = true;
        }
    }
}
