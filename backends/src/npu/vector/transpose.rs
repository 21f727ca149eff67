//! Transposed tile reads, `Y[c + b, r + a]`: the tile's rows are columns of `Y` in GM.
//!
//! MTE2 cannot transpose, but `copy_pad` moves a few bytes per burst and pads each burst to a
//! 32-byte block: per group of 8 tile rows, one burst per stage column `c` copies the group's
//! 8 consecutive elements of GM row `c + b` into block `c` of the group (the **gather**
//! layout, as large as the tile's). The Vector unit then packs each tile row out of it: a
//! `vcmax` over one lane per repeat (the row's lane of the group), a repeat per column, writes
//! the row's elements one after the other. A maximum over one lane is that lane's value
//! exactly (negative zeros and NaNs included), so the tile holds the array's bits.
//!
//! On the way in: the transfer's rows are the tile rows it fills, its column the array row of
//! the stage's first column. Every byte copied is an element of the array ([`check`]).

use polyhedral::program::ArrayId;
use polyhedral::Program;
use sim::isa::CopyPath;

use super::code::{Slot, StageCode};
use super::lower::{Opnd, Transfer};
use super::stages::Stage;
use crate::npu::Error;

/// Elements of one group: the f32 elements of a 32-byte block.
const GROUP: u64 = 8;
const MAX_REPEAT: u64 = 255;
const MAX_BURSTS: u64 = 4095;

/// Bytes of the gather layout of `rows` tile rows over `width` columns.
pub(crate) fn gather_bytes(rows: u64, width: u64) -> u64 {
    rows.div_ceil(GROUP) * width * 32
}

/// The tiles' transposed reads of `a` (rows `span` around each tile, array rows from the
/// stage's column `col` on) lie inside the array.
pub(crate) fn check(
    program: &Program,
    stage: &Stage,
    a: ArrayId,
    col: i64,
    span: (i64, i64),
) -> Result<(), Error> {
    let ext = program.array_extents(a);
    let name = &program.array(a).name;
    let (lo, hi) = stage.rows;
    let (c0, c1) = stage.cols.unwrap_or((0, 0));
    if ext.len() != 2 {
        return Err(Error::NotYet(format!(
            "a transposed read of `{name}`, which is not a matrix"
        )));
    }
    if lo + span.0 < 0 || hi + span.1 > ext[1] {
        return Err(Error::NotYet(format!(
            "the tiles read columns {}..{} of `{name}`, which has {}",
            lo + span.0,
            hi + span.1,
            ext[1]
        )));
    }
    if c0 + col < 0 || c1 + col > ext[0] {
        return Err(Error::NotYet(format!(
            "the tiles read rows {}..{} of `{name}`, which has {}",
            c0 + col,
            c1 + col,
            ext[0]
        )));
    }
    Ok(())
}

impl StageCode<'_> {
    /// MTE2's gathering copies of transfer `t` at tile height `n` for the tile in register
    /// `tile`; returns MTE2's cycles.
    pub(crate) fn gather(
        &self,
        t: &Transfer,
        n: u64,
        tile: &str,
        slot: Slot,
        out: &mut Vec<String>,
    ) -> u64 {
        let array = &self.program.array(t.array).name;
        let gm_row = self.program.array_extents(t.array)[1] as u64 * 4;
        let rows = StageCode::rows(n, t.rows);
        let first_col = (self.stage.rows.0 + t.rows.0) as u64 * 4 + t.col as u64 * gm_row;
        let bw = self
            .target
            .bandwidth(CopyPath::GmUb)
            .min(self.gm_share)
            .max(1);
        let startup = self.target.startup(CopyPath::GmUb);
        let mut cycles = 0;
        for g in 0..rows.div_ceil(GROUP) {
            let bytes = (rows - g * GROUP).min(GROUP) * 4;
            let mut done = 0;
            while done < self.width {
                let count = (self.width - done).min(MAX_BURSTS);
                let gm = first_col + g * GROUP * 4 + done * gm_row;
                out.push(format!(
                    "copy_pad {}, {array}[{tile}*{} + {gm}], n_burst={count}, bytes={bytes}, src_stride={gm_row}, dst_stride=32",
                    self.addr(t.buf, slot, (g * self.width + done) * 32),
                    self.tr * 4,
                ));
                cycles += startup + (count * 32).div_ceil(bw);
                done += count;
            }
        }
        cycles
    }

    /// V's packing of the `rows` of gathered `src` into full `dst`; returns V's cycles.
    pub(crate) fn pack(
        &self,
        dst: Opnd,
        src: Opnd,
        rows: (i64, i64),
        n: u64,
        out: &mut Vec<String>,
    ) -> u64 {
        let r = StageCode::rows(n, rows);
        let mut cycles = 0;
        for lane in 0..GROUP.min(r) {
            out.push(format!("set_vector_mask 0x0, {:#x}", 1u64 << lane));
            for row in (lane..r).step_by(GROUP as usize) {
                let group = row / GROUP;
                for c in (0..self.width).step_by(MAX_REPEAT as usize) {
                    let count = (self.width - c).min(MAX_REPEAT);
                    out.push(format!(
                        "vcmax.f32 {}, {}, repeat={count}, rep=(1, 1)",
                        self.addr(
                            dst.buf,
                            Slot::Cur,
                            self.base(dst) + row * self.pitch + c * 4
                        ),
                        self.addr(src.buf, Slot::Cur, (group * self.width + c) * 32),
                    ));
                    cycles += self.vcost("vcmax", count);
                }
            }
        }
        out.push("set_vector_mask 0xffffffffffffffff, 0xffffffffffffffff".into());
        cycles
    }
}
