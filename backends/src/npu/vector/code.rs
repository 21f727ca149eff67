//! The instructions of one stage for a given tile height: buffer sizes and their UB layout,
//! the Vector instructions of every operation (with masks for column tails and repeats over
//! rows or over contiguous bytes), the DMA of every transfer, and the cycles each pipe spends
//! on a tile, which [`super::tiles`] compares across tile heights.
//!
//! Instruction shapes, for `R` rows of `W` columns (`P` bytes apart, 64 f32 lanes a repeat):
//! - operands all full (or all blocks), with splats: one pass over the `R·P` (or `R·32`)
//!   contiguous bytes, a repeat per 256 bytes, splats with repeat stride 0;
//! - full results with blocks or columns among the operands: per 64-column chunk (the last one
//!   masked), a repeat per row: full operands advance `P/32` blocks a repeat, blocks one block
//!   (block stride 0: the row's value in every lane), columns and splats stay;
//! - reductions: per chunk, a repeat per row folding onto the row's compact element (`acc`);
//! - at most 255 repeats per instruction, the rest in further instructions.

use std::fmt::Write;

use polyhedral::Program;
use sim::isa::{CopyPath, Mem};

use super::lower::{Form, Lowered, Opnd, Transfer, VOp};
use super::stages::Stage;
use crate::npu::epilogue::Scalar;
use crate::npu::NpuTarget;

/// Bytes of one vector repeat, and f32 lanes in it.
const REPEAT: u64 = 256;
const LANES: u64 = 64;
const MAX_REPEAT: u64 = 255;
const MAX_BURSTS: u64 = 4095;
const FULL_MASK: &str = "set_vector_mask 0xffffffffffffffff, 0xffffffffffffffff";

/// Only the first `lanes` f32 lanes run.
fn push_mask(out: &mut Vec<String>, lanes: u64) {
    out.push(format!("set_vector_mask 0x0, {:#x}", (1u64 << lanes) - 1));
}

/// Which copy of a double-buffered buffer an instruction uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The current tile's (`s7`).
    Cur,
    /// The next tile's (`1 - s7`).
    Next,
}

/// One stage at one tile height: sizes, places and instructions.
pub(crate) struct StageCode<'a> {
    pub program: &'a Program,
    pub target: &'a NpuTarget,
    pub stage: &'a Stage,
    pub low: &'a Lowered,
    /// Rows per tile.
    pub tr: u64,
    /// Columns of the stage, and the bytes between rows of a full buffer.
    pub width: u64,
    pub pitch: u64,
    /// Whether double-buffered buffers have two copies.
    pub double: bool,
    /// Bytes of one copy of each buffer, and its UB address.
    pub sizes: Vec<u64>,
    pub addrs: Vec<u64>,
    /// Bytes of UB the stage takes from its first address.
    pub bytes: u64,
    /// GM bandwidth one core's copies get when the stage's blocks run at once.
    pub gm_share: u64,
}

/// The tile count of a stage at tile height `tr`, the tiles per block and the blocks.
pub(crate) fn distribution(rows: u64, tr: u64, cores: u64) -> (u64, u64, u64) {
    let tiles = rows.div_ceil(tr);
    let per_block = tiles.div_ceil(tiles.min(cores).max(1));
    (tiles, per_block, tiles.div_ceil(per_block))
}

impl<'a> StageCode<'a> {
    /// Sizes and addresses of the stage's buffers at tile height `tr`, from UB byte `base`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        program: &'a Program,
        target: &'a NpuTarget,
        stage: &'a Stage,
        low: &'a Lowered,
        tr: u64,
        double: bool,
        base: u64,
    ) -> StageCode<'a> {
        let width = stage.cols.map_or(0, |(a, b)| (b - a) as u64);
        let pitch = (width * 4).div_ceil(32) * 32;
        let rows = |r: (i64, i64)| (tr as i64 + r.1 - r.0).max(0) as u64;
        let mut sizes = Vec::new();
        let mut addrs = Vec::new();
        let mut at = base;
        for b in &low.buffers {
            let size = match b.form {
                Form::Full => rows(b.rows) * pitch + REPEAT,
                Form::Block => rows(b.rows) * 32 + REPEAT,
                Form::Compact => rows(b.rows).div_ceil(8) * 32,
                Form::Col => pitch,
                Form::Splat => REPEAT,
                // A bit per lane of a full or block layout, in chunks of whole blocks.
                Form::Mask => (rows(b.rows) * pitch.max(32)).div_ceil(REPEAT) * 8,
                Form::Gather => super::transpose::gather_bytes(rows(b.rows), width),
            };
            // Every buffer, and so every copy, starts on a 32-byte block.
            let size = size.div_ceil(32) * 32;
            let copies = if double && b.double { 2 } else { 1 };
            sizes.push(size);
            addrs.push(at);
            at += size * copies;
        }
        let total_rows = (stage.rows.1 - stage.rows.0) as u64;
        let (_, _, blocks) = distribution(total_rows, tr, target.cores());
        let gm_share = (target.machine.gm_bandwidth / blocks.max(1)).max(1);
        StageCode {
            program,
            target,
            stage,
            low,
            tr,
            width,
            pitch,
            double,
            sizes,
            addrs,
            bytes: at - base,
            gm_share,
        }
    }

    fn copies(&self, buf: usize) -> bool {
        self.double && self.low.buffers[buf].double
    }

    /// `NAME[slot + offset]` of buffer `buf`.
    pub(crate) fn addr(&self, buf: usize, slot: Slot, offset: u64) -> String {
        let name = &self.low.buffers[buf].name;
        if !self.copies(buf) {
            return format!("{name}[{offset}]");
        }
        let size = self.sizes[buf];
        match slot {
            Slot::Cur => format!("{name}[s7*{size} + {offset}]"),
            Slot::Next => format!("{name}[{} - s7*{size}]", size + offset),
        }
    }

    /// Bytes per row of a buffer's layout.
    fn unit(&self, form: Form) -> u64 {
        match form {
            Form::Full => self.pitch,
            Form::Block => 32,
            Form::Compact => 4,
            Form::Col | Form::Splat | Form::Mask | Form::Gather => 0,
        }
    }

    fn form(&self, o: Opnd) -> Form {
        self.low.buffers[o.buf].form
    }

    /// Byte offset of an operand's first row.
    pub(super) fn base(&self, o: Opnd) -> u64 {
        o.row as u64 * self.unit(self.form(o))
    }

    /// Rows of an operation at tile height `n`.
    pub(super) fn rows(n: u64, rows: (i64, i64)) -> u64 {
        (n as i64 + rows.1 - rows.0).max(0) as u64
    }

    pub(super) fn vcost(&self, op: &str, repeats: u64) -> u64 {
        let m = &self.target.machine;
        let slow = matches!(op, "vexp" | "vln" | "vsqrt" | "vrsqrt" | "vrec" | "vdiv");
        let per = if slow {
            m.vector_per_repeat_slow
        } else {
            m.vector_per_repeat
        };
        m.vector_startup + per * repeats
    }

    /// The instructions of `op` at tile height `n`, appended to `out`; returns V's cycles.
    pub(crate) fn vop(&self, op: &VOp, n: u64, out: &mut Vec<String>) -> u64 {
        match op {
            VOp::Binary {
                op: name,
                dst,
                a,
                b,
                rows,
            } => self.elementwise(name, *dst, &[*a, *b], None, Self::rows(n, *rows), out),
            VOp::WithScalar {
                op: name,
                dst,
                src,
                scalar,
                rows,
            } => self.elementwise(
                name,
                *dst,
                &[*src],
                Some(*scalar),
                Self::rows(n, *rows),
                out,
            ),
            VOp::Unary {
                op: name,
                dst,
                src,
                rows,
            } => self.elementwise(name, *dst, &[*src], None, Self::rows(n, *rows), out),
            VOp::Dup { dst, scalar, rows } => {
                let r = if self.form(*dst) == Form::Splat {
                    1
                } else {
                    Self::rows(n, *rows)
                };
                self.elementwise("vdup", *dst, &[], Some(*scalar), r, out)
            }
            VOp::Compact { dst, src, rows } => {
                let r = Self::rows(n, *rows);
                out.push("set_vector_mask 0x0, 0xff".into());
                let mut cycles = 0;
                for g in (0..r).step_by(MAX_REPEAT as usize) {
                    let rep = (r - g).min(MAX_REPEAT);
                    out.push(format!(
                        "vcmax.f32 {}, {}, repeat={rep}, rep=(1, 1)",
                        self.addr(dst.buf, Slot::Cur, self.base(*dst) + g * 4),
                        self.addr(src.buf, Slot::Cur, self.base(*src) + g * 32),
                    ));
                    cycles += self.vcost("vcmax", rep);
                }
                out.push(FULL_MASK.into());
                cycles
            }
            VOp::Reduce {
                op: name,
                dst,
                src,
                rows,
            } => {
                let r = Self::rows(n, *rows);
                let mut cycles = 0;
                // One instruction from row `row` and column chunk `chunk` on.
                let push = |out: &mut Vec<String>,
                            row: u64,
                            chunk: u64,
                            count: u64,
                            dst_rep: u64,
                            src_rep: u64| {
                    out.push(format!(
                        "{name}.f32 {}, {}, repeat={count}, rep=({dst_rep}, {src_rep}), acc",
                        self.addr(dst.buf, Slot::Cur, self.base(*dst) + row * 4),
                        self.addr(
                            src.buf,
                            Slot::Cur,
                            self.base(*src) + row * self.pitch + chunk * REPEAT
                        ),
                    ));
                    self.vcost(name, count)
                };
                if self.by_rows(r) {
                    // Per row, the chunks one after the other onto its element.
                    let chunks = self.width / LANES;
                    for i in 0..r {
                        for g in (0..chunks).step_by(MAX_REPEAT as usize) {
                            cycles += push(out, i, g, (chunks - g).min(MAX_REPEAT), 0, 8);
                        }
                    }
                    return cycles;
                }
                for c in 0..self.width.div_ceil(LANES) {
                    let lanes = (self.width - c * LANES).min(LANES);
                    if lanes < LANES {
                        push_mask(out, lanes);
                    }
                    for g in (0..r).step_by(MAX_REPEAT as usize) {
                        let count = (r - g).min(MAX_REPEAT);
                        cycles += push(out, g, c, count, 1, self.pitch / 32);
                    }
                    if lanes < LANES {
                        out.push(FULL_MASK.into());
                    }
                }
                cycles
            }
            VOp::Compare {
                cmp,
                dst,
                a,
                b,
                rows,
            } => self.masked(
                &format!("vcmp.{cmp}"),
                *dst,
                &[*a, *b],
                Self::rows(n, *rows),
                out,
            ),
            VOp::Select {
                dst,
                a,
                b,
                mask,
                rows,
            } => self.masked("vsel", *mask, &[*dst, *a, *b], Self::rows(n, *rows), out),
            VOp::Pack { dst, src, rows } => self.pack(*dst, *src, *rows, n, out),
            VOp::Broadcast { dst, src, rows } => {
                let repeats = Self::rows(n, *rows).div_ceil(8);
                let mut cycles = 0;
                for g in (0..repeats).step_by(MAX_REPEAT as usize) {
                    let rep = (repeats - g).min(MAX_REPEAT);
                    out.push(format!(
                        "vbrcb.f32 {}, {}, repeat={rep}",
                        self.addr(dst.buf, Slot::Cur, self.base(*dst) + g * 8 * 32),
                        self.addr(src.buf, Slot::Cur, self.base(*src) + g * 8 * 4),
                    ));
                    cycles += self.vcost("vbrcb", rep);
                }
                cycles
            }
        }
    }

    /// `vcmp` (`mask` its destination, `vectors` its sources) or `vsel` (`vectors` its
    /// destination and sources, `mask` its last operand) over the contiguous bytes of `r` rows
    /// of the vectors' layout; splats stay. A mask holds a bit per lane: each instruction
    /// covers repeats of whole 32-byte blocks of it.
    fn masked(
        &self,
        name: &str,
        mask: Opnd,
        vectors: &[Opnd],
        r: u64,
        out: &mut Vec<String>,
    ) -> u64 {
        // 4 repeats of 64 lanes make one block of bits.
        const CHUNK: u64 = MAX_REPEAT / 4 * 4;
        let form = vectors
            .iter()
            .map(|&o| self.form(o))
            .find(|f| *f != Form::Splat)
            .unwrap_or(Form::Block);
        let repeats = (r * self.unit(form)).div_ceil(REPEAT);
        let reps: Vec<u64> = vectors
            .iter()
            .map(|&o| if self.form(o) == Form::Splat { 0 } else { 8 })
            .collect();
        let tuple = reps
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let mut cycles = 0;
        for g in (0..repeats).step_by(CHUNK as usize) {
            let count = (repeats - g).min(CHUNK);
            let vecs: Vec<String> = vectors
                .iter()
                .map(|&o| {
                    let off = if self.form(o) == Form::Splat {
                        0
                    } else {
                        g * REPEAT
                    };
                    self.addr(o.buf, Slot::Cur, self.base(o) + off)
                })
                .collect();
            let bits = self.addr(mask.buf, Slot::Cur, self.base(mask) + g * 8);
            let operands = if name == "vsel" {
                format!("{}, {bits}", vecs.join(", "))
            } else {
                format!("{bits}, {}", vecs.join(", "))
            };
            out.push(format!(
                "{name}.f32 {operands}, repeat={count}, rep=({tuple})"
            ));
            cycles += self.vcost(name, count);
        }
        cycles
    }

    /// Whether `r` rows of the stage's columns take fewer instructions row by row (a repeat
    /// per 64 columns) than chunk by chunk (a repeat per row); only without a column tail.
    fn by_rows(&self, r: u64) -> bool {
        self.width.is_multiple_of(LANES) && r < self.width / LANES
    }

    /// An element-wise instruction over `r` rows into `dst`.
    fn elementwise(
        &self,
        name: &str,
        dst: Opnd,
        srcs: &[Opnd],
        scalar: Option<Scalar>,
        r: u64,
        out: &mut Vec<String>,
    ) -> u64 {
        let dform = self.form(dst);
        let scalar = scalar
            .map(|s| format!(", {}", s.text()))
            .unwrap_or_default();
        let contiguous = srcs
            .iter()
            .all(|&s| self.form(s) == dform || self.form(s) == Form::Splat);
        let mut cycles = 0;
        let operands = |offs: &[u64]| -> String {
            std::iter::once(dst)
                .chain(srcs.iter().copied())
                .zip(offs)
                .map(|(o, off)| self.addr(o.buf, Slot::Cur, self.base(o) + off))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let tuple = |v: &[u64]| {
            if v.len() == 1 {
                v[0].to_string()
            } else {
                format!(
                    "({})",
                    v.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        };
        if contiguous {
            let bytes = match dform {
                Form::Splat => REPEAT,
                f => r * self.unit(f),
            };
            let repeats = bytes.div_ceil(REPEAT);
            let reps: Vec<u64> = std::iter::once(8)
                .chain(
                    srcs.iter()
                        .map(|&s| if self.form(s) == Form::Splat { 0 } else { 8 }),
                )
                .collect();
            let strides = if reps.iter().all(|&x| x == 8) {
                String::new()
            } else {
                format!(", rep={}", tuple(&reps))
            };
            for g in (0..repeats).step_by(MAX_REPEAT as usize) {
                let rep = (repeats - g).min(MAX_REPEAT);
                let offs: Vec<u64> = reps
                    .iter()
                    .map(|&x| if x == 0 { 0 } else { g * REPEAT })
                    .collect();
                out.push(format!(
                    "{name}.f32 {}{scalar}, repeat={rep}{strides}",
                    operands(&offs)
                ));
                cycles += self.vcost(name, rep);
            }
            return cycles;
        }
        let all: Vec<Opnd> = std::iter::once(dst).chain(srcs.iter().copied()).collect();
        let chunks = self.width.div_ceil(LANES);
        // One instruction from row `row` and column chunk `chunk` on.
        let push =
            |out: &mut Vec<String>, row: u64, chunk: u64, count: u64, blk: &[u64], rep: &[u64]| {
                let offs: Vec<u64> = all
                    .iter()
                    .map(|&o| match self.form(o) {
                        Form::Full => row * self.pitch + chunk * REPEAT,
                        Form::Block => row * 32,
                        Form::Col => chunk * REPEAT,
                        _ => 0,
                    })
                    .collect();
                out.push(format!(
                    "{name}.f32 {}{scalar}, repeat={count}, blk={}, rep={}",
                    operands(&offs),
                    tuple(blk),
                    tuple(rep)
                ));
                self.vcost(name, count)
            };
        // Blocks hold one value per row: block stride 0 in either shape.
        let blk: Vec<u64> = all
            .iter()
            .map(|&o| u64::from(self.form(o) != Form::Block))
            .collect();
        if self.by_rows(r) {
            // Per row, a repeat per chunk of columns: blocks and splats stay.
            let rep: Vec<u64> = all
                .iter()
                .map(|&o| match self.form(o) {
                    Form::Full | Form::Col => 8,
                    _ => 0,
                })
                .collect();
            for i in 0..r {
                for g in (0..chunks).step_by(MAX_REPEAT as usize) {
                    cycles += push(out, i, g, (chunks - g).min(MAX_REPEAT), &blk, &rep);
                }
            }
            return cycles;
        }
        // Per chunk of columns, a repeat per row: full operands advance a row, blocks one
        // block, columns and splats stay.
        let rep: Vec<u64> = all
            .iter()
            .map(|&o| match self.form(o) {
                Form::Full => self.pitch / 32,
                Form::Block => 1,
                _ => 0,
            })
            .collect();
        for c in 0..chunks {
            let lanes = (self.width - c * LANES).min(LANES);
            let masked = lanes < LANES;
            if masked {
                push_mask(out, lanes);
            }
            for g in (0..r).step_by(MAX_REPEAT as usize) {
                cycles += push(out, g, c, (r - g).min(MAX_REPEAT), &blk, &rep);
            }
            if masked {
                out.push(FULL_MASK.into());
            }
        }
        cycles
    }

    /// Bytes per GM row of `t`'s array (1 for per-row and per-column vectors' elements).
    fn gm_row_bytes(&self, t: &Transfer) -> u64 {
        let ext = self.program.array_extents(t.array);
        if ext.len() == 2 {
            ext[1] as u64 * 4
        } else {
            4
        }
    }

    /// A DMA between GM and a buffer at tile height `n` for the tile in register `tile`;
    /// `to_gm` for stores. Returns the pipe's cycles.
    pub(crate) fn transfer(
        &self,
        t: &Transfer,
        n: u64,
        tile: &str,
        slot: Slot,
        to_gm: bool,
        out: &mut Vec<String>,
    ) -> u64 {
        let array = &self.program.array(t.array).name;
        let form = self.low.buffers[t.buf].form;
        if form == Form::Gather {
            return self.gather(t, n, tile, slot, out);
        }
        let row_bytes = self.gm_row_bytes(t);
        let r0 = self.stage.rows.0;
        // GM bytes of the first element, for tile 0, and per tile.
        let (first, per_tile, rows, burst) = match form {
            Form::Full => (
                ((r0 + t.rows.0) as u64) * row_bytes + t.col as u64 * 4,
                self.tr * row_bytes,
                Self::rows(n, t.rows),
                self.width * 4,
            ),
            Form::Compact => {
                let r = Self::rows(n, t.rows);
                ((r0 + t.rows.0) as u64 * 4, self.tr * 4, 1, r * 4)
            }
            _ => (t.col as u64 * 4, 0, 1, self.width * 4),
        };
        let gm_gap = if form == Form::Full {
            row_bytes - burst
        } else {
            0
        };
        let ub_pitch = burst.div_ceil(32) * 32;
        let aligned = first.is_multiple_of(32)
            && per_tile.is_multiple_of(32)
            && burst.is_multiple_of(32)
            && (rows == 1 || row_bytes.is_multiple_of(32));
        let path = if to_gm {
            CopyPath::UbGm
        } else {
            CopyPath::GmUb
        };
        let bw = self.target.bandwidth(path).min(self.gm_share).max(1);
        let startup = self.target.startup(path);
        let ub_base = self.base(Opnd {
            buf: t.buf,
            row: t.buf_row,
        });
        let mut cycles = 0;
        let mut done = 0;
        while done < rows {
            let count = (rows - done).min(MAX_BURSTS);
            let gm = format!(
                "{array}[{}{}]",
                if per_tile > 0 {
                    format!("{tile}*{per_tile} + ")
                } else {
                    String::new()
                },
                first + done * row_bytes
            );
            let ub = self.addr(t.buf, slot, ub_base + done * ub_pitch);
            let (dst, src) = if to_gm { (gm, ub) } else { (ub, gm) };
            let gap_key = if to_gm { "dst_gap" } else { "src_gap" };
            let text = if aligned && gm_gap == 0 && ub_pitch == burst {
                format!("copy {dst}, {src}, len={}", count * burst / 32)
            } else if aligned {
                format!(
                    "copy {dst}, {src}, n_burst={count}, len={}, {gap_key}={}",
                    burst / 32,
                    gm_gap / 32
                )
            } else if count == 1 {
                format!("copy_pad {dst}, {src}, bytes={burst}")
            } else {
                // Bursts a GM row apart there, a UB row apart here.
                let (src_stride, dst_stride) = if to_gm {
                    (ub_pitch, row_bytes)
                } else {
                    (row_bytes, ub_pitch)
                };
                format!(
                    "copy_pad {dst}, {src}, n_burst={count}, bytes={burst}, src_stride={src_stride}, dst_stride={dst_stride}"
                )
            };
            out.push(text);
            cycles += startup + (count * ub_pitch).div_ceil(bw);
            done += count;
        }
        cycles
    }

    /// The buffer declarations.
    pub(crate) fn declarations(&self, out: &mut String) {
        for (i, b) in self.low.buffers.iter().enumerate() {
            let copies = if self.copies(i) { 2 } else { 1 };
            let _ = writeln!(
                out,
                "buffer {} : UB, {} @ {}",
                b.name,
                self.sizes[i] * copies,
                self.addrs[i]
            );
        }
    }

    /// Cycles of MTE2, V and MTE3 for one full tile, and the instructions S issues for it.
    pub(crate) fn tile_cycles(&self) -> (u64, u64, u64, u64) {
        let mut lines = Vec::new();
        let mte2: u64 = self
            .low
            .loads
            .iter()
            .map(|t| self.transfer(t, self.tr, "s0", Slot::Cur, false, &mut lines))
            .sum();
        let v: u64 = self
            .low
            .ops
            .iter()
            .map(|op| self.vop(op, self.tr, &mut lines))
            .sum();
        let mte3: u64 = self
            .low
            .stores
            .iter()
            .map(|t| self.transfer(t, self.tr, "s0", Slot::Cur, true, &mut lines))
            .sum();
        (mte2, v, mte3, lines.len() as u64 + 8)
    }

    /// UB bytes the stage may use.
    pub(crate) fn fits(&self, base: u64) -> bool {
        base + self.bytes <= self.target.capacity(Mem::Ub)
    }
}
