//! Data movement between GM and the chip for the Cube's programs: operand tiles and panels into
//! L1 in fractal order, result tiles out of UB, vectors and accumulator starts into UB.
//!
//! On chip an operand is held as `[chunks][R rows][16]`: 16 consecutive elements of its GM
//! inner (contiguous) dimension per row, rows of its other dimension, so that every 16 rows of
//! a chunk are one fractal (`load2d` reads it as it is or transposed). Every copy moves whole
//! elements of the arrays only: a chunk or row past the data is padded on chip — a partial
//! chunk by `copy_pad`'s zero fill, missing rows and chunks by bursts of zeros — so the padding
//! of an operand tile is exactly zero and the products over it add nothing. Rows whose GM
//! start is off the 32-byte grid, and partial chunks, go through `copy_pad`; everything else
//! through block-granular `copy`. Results leave UB for GM as their valid rows and columns
//! only.

use std::fmt::Write;

use super::cube::{Emitter, Run, RunOperand, Tail, Window};
use super::epilogue;
use super::plan::{Factor, Init, Inner};
use super::tiles::{self, Role};
use super::{FRACTAL, VECTOR_BYTES};

/// A byte offset affine in loop counters and registers: `c + Σ k·name`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Off {
    pub c: i64,
    pub terms: Vec<(String, i64)>,
}

impl Off {
    pub fn at(c: i64) -> Off {
        Off {
            c,
            terms: Vec::new(),
        }
    }

    /// `self + k·name`.
    pub fn plus(mut self, name: &str, k: i64) -> Off {
        if k != 0 {
            match self.terms.iter_mut().find(|(n, _)| n == name) {
                Some(t) => t.1 += k,
                None => self.terms.push((name.to_string(), k)),
            }
            self.terms.retain(|(_, k)| *k != 0);
        }
        self
    }

    pub fn add(mut self, c: i64) -> Off {
        self.c += c;
        self
    }

    pub fn sum(mut self, other: &Off) -> Off {
        self.c += other.c;
        for (n, k) in &other.terms {
            self = self.plus(n, *k);
        }
        self
    }

    /// Whether every value it takes is a multiple of `a` (its registers and loop counters hold
    /// indices, so only the coefficients matter).
    pub fn aligned(&self, a: i64) -> bool {
        self.c % a == 0 && self.terms.iter().all(|(_, k)| k % a == 0)
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        for (n, k) in &self.terms {
            if !s.is_empty() {
                s += " + ";
            }
            if *k == 1 {
                s += n;
            } else {
                let _ = write!(s, "{n}*{k}");
            }
        }
        if self.c != 0 || s.is_empty() {
            if s.is_empty() {
                let _ = write!(s, "{}", self.c);
            } else if self.c > 0 {
                let _ = write!(s, " + {}", self.c);
            } else {
                let _ = write!(s, " - {}", -self.c);
            }
        }
        s
    }
}

/// One dimension of a GM region: `count` indices starting at an offset, `stride` bytes apart;
/// or, for gathered rows, nested components (outermost first) each with its count and byte
/// stride.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rows {
    /// (count, byte stride) from the outermost component in.
    pub comps: Vec<(u64, i64)>,
}

impl Rows {
    pub fn plain(count: u64, stride: i64) -> Rows {
        Rows {
            comps: vec![(count, stride)],
        }
    }
}

/// A GM region copied into `[chunks][R][16]` on chip.
#[derive(Clone, Debug)]
pub(crate) struct Region {
    /// The GM tensor and the region's first element (bytes).
    pub gm: String,
    pub src: Off,
    /// The on-chip buffer and where the region's chunk 0, row 0 goes.
    pub dst: String,
    pub at: Off,
    /// Rows held per chunk on chip (`R`).
    pub held: u64,
    /// Rows of the region, where its data rows are in GM, and how many of them hold data
    /// (the others are zeros).
    pub tile_rows: u64,
    pub rows: Rows,
    pub valid_rows: u64,
    /// Elements along the inner dimension the region spans (a multiple of 16), and how many
    /// hold data.
    pub inner: u64,
    pub valid_inner: u64,
    /// Bytes of an element.
    pub es: u64,
}

impl Emitter<'_> {
    /// Copies a region of an operand into L1 (or UB), padding with zeros.
    pub(crate) fn copy_in(&mut self, r: &Region) {
        let es = r.es as i64;
        let chunk_bytes = FRACTAL as i64 * es;
        let chunk_stride = r.held as i64 * chunk_bytes;
        let chunks = r.inner / FRACTAL;
        let full = r.valid_inner / FRACTAL;
        let part = r.valid_inner % FRACTAL;
        let len = (chunk_bytes / 32) as u64;
        let data_chunks = full + u64::from(part > 0);
        if r.valid_rows > 0 && r.valid_inner > 0 {
            if r.rows.comps.len() == 1 {
                let (_, stride) = r.rows.comps[0];
                let rows = r.valid_rows;
                // Full chunks: one copy of `rows` bursts each, in a loop over the chunks.
                if full > 0 {
                    let body = |e: &mut Self, chunk: &str, k: i64| {
                        let src = r.src.clone().plus(chunk, k * chunk_bytes);
                        let dst = r.at.clone().plus(chunk, k * chunk_stride);
                        e.burst_copy(r, &dst, &src, rows, chunk_bytes as u64, stride, len);
                    };
                    if full == 1 {
                        let (src, dst) = (r.src.clone(), r.at.clone());
                        self.burst_copy(r, &dst, &src, rows, chunk_bytes as u64, stride, len);
                    } else {
                        let v = self.var("j");
                        self.open(format!("for {v} in 0..{full}"));
                        body(self, &v, 1);
                        self.close();
                        self.free_var();
                    }
                }
                if part > 0 {
                    let src = r.src.clone().add(full as i64 * chunk_bytes);
                    let dst = r.at.clone().add(full as i64 * chunk_stride);
                    self.burst_copy(r, &dst, &src, rows, part * r.es, stride, len);
                }
            } else {
                self.gathered_copy(r, full, part);
            }
        }
        // Rows past the data in every data chunk, then whole chunks past the data (up to the
        // rows written once at the block's start where those are).
        let prefilled = self.prefilled.contains(&r.dst);
        if r.valid_rows < r.tile_rows && data_chunks > 0 && !prefilled {
            let dst = r.at.clone().add(r.valid_rows as i64 * chunk_bytes);
            self.zeros(
                r,
                &dst,
                data_chunks,
                (r.tile_rows - r.valid_rows) * chunk_bytes as u64 / 32,
                chunk_stride,
            );
        }
        if chunks > data_chunks {
            let dst = r.at.clone().add(data_chunks as i64 * chunk_stride);
            self.zeros(
                r,
                &dst,
                chunks - data_chunks,
                if prefilled { r.valid_rows } else { r.tile_rows } * chunk_bytes as u64 / 32,
                chunk_stride,
            );
        }
    }

    /// `n` bursts of `bytes` from GM rows `stride` bytes apart into consecutive on-chip rows
    /// of `len` blocks.
    #[allow(clippy::too_many_arguments)]
    fn burst_copy(
        &mut self,
        r: &Region,
        dst: &Off,
        src: &Off,
        n: u64,
        bytes: u64,
        stride: i64,
        len: u64,
    ) {
        let row = len as i64 * 32;
        if bytes as i64 == row && src.aligned(32) && (stride % 32 == 0 || n == 1) {
            let gap = if n > 1 { (stride - row) / 32 } else { 0 };
            if gap >= 0 {
                let mut line = format!("copy {}[{}], {}[{}]", r.dst, dst.text(), r.gm, src.text());
                if n > 1 {
                    let _ = write!(line, ", n_burst={n}");
                }
                let _ = write!(line, ", len={len}");
                if gap > 0 {
                    let _ = write!(line, ", src_gap={gap}");
                }
                self.line(line);
                return;
            }
        }
        let mut line = format!(
            "copy_pad {}[{}], {}[{}]",
            r.dst,
            dst.text(),
            r.gm,
            src.text()
        );
        if n > 1 {
            let _ = write!(line, ", n_burst={n}");
        }
        let _ = write!(line, ", bytes={bytes}");
        if n > 1 {
            let _ = write!(line, ", src_stride={stride}, dst_stride={row}");
        }
        if bytes.div_ceil(32) != len {
            let _ = write!(line, ", len={len}");
        }
        self.line(line);
    }

    /// Zero-filled blocks: `n` bursts of `len` blocks, `stride` bytes apart on chip.
    fn zeros(&mut self, r: &Region, dst: &Off, n: u64, len: u64, stride: i64) {
        let mut line = format!("copy_pad {}[{}], {}[0]", r.dst, dst.text(), r.gm);
        if n > 1 {
            let _ = write!(line, ", n_burst={n}");
        }
        let _ = write!(line, ", bytes=0");
        if n > 1 {
            let _ = write!(line, ", dst_stride={stride}");
        }
        let _ = write!(line, ", len={len}");
        self.line(line);
    }

    /// Rows made of several components (a gathered reduction): bursts along the component
    /// with the most rows (or along the chunks, when there are more of them and none is
    /// partial), loops over the others.
    fn gathered_copy(&mut self, r: &Region, full: u64, part: u64) {
        let es = r.es as i64;
        let chunk_bytes = FRACTAL as i64 * es;
        let chunk_stride = r.held as i64 * chunk_bytes;
        let len = (chunk_bytes / 32) as u64;
        let comps = &r.rows.comps;
        // On-chip row strides of each component.
        let mut chip = vec![0i64; comps.len()];
        let mut step = chunk_bytes;
        for (i, c) in comps.iter().enumerate().rev() {
            chip[i] = step;
            step *= c.0 as i64;
        }
        let (axis, &(axis_n, axis_stride)) = comps
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (c.0, *i))
            .unwrap_or((0, &(1, 0)));
        let along_chunks = full > axis_n && part == 0;
        let mut src = r.src.clone();
        let mut dst = r.at.clone();
        let mut opened = 0;
        for (i, &(n, stride)) in comps.iter().enumerate() {
            if i == axis && !along_chunks {
                continue;
            }
            if n == 1 {
                continue;
            }
            let v = self.var("g");
            self.open(format!("for {v} in 0..{n}"));
            src = src.plus(&v, stride);
            dst = dst.plus(&v, chip[i]);
            opened += 1;
        }
        if along_chunks {
            self.line(format!(
                "copy_pad {}[{}], {}[{}], n_burst={full}, bytes={chunk_bytes}, src_stride={chunk_bytes}, dst_stride={chunk_stride}",
                r.dst,
                dst.text(),
                r.gm,
                src.text()
            ));
        } else {
            let row = chip[axis];
            let each = |e: &mut Self, c: Option<&str>, bytes: i64, extra: i64| {
                let (mut s, mut d) = (
                    src.clone().add(extra * chunk_bytes),
                    dst.clone().add(extra * chunk_stride),
                );
                if let Some(c) = c {
                    s = s.plus(c, chunk_bytes);
                    d = d.plus(c, chunk_stride);
                }
                let mut line = format!("copy_pad {}[{}], {}[{}]", r.dst, d.text(), r.gm, s.text());
                if axis_n > 1 {
                    let _ = write!(line, ", n_burst={axis_n}");
                }
                let _ = write!(line, ", bytes={bytes}");
                if axis_n > 1 {
                    let _ = write!(line, ", src_stride={axis_stride}, dst_stride={row}");
                }
                if (bytes as u64).div_ceil(32) != len {
                    let _ = write!(line, ", len={len}");
                }
                e.line(line);
            };
            if full == 1 {
                each(self, None, chunk_bytes, 0);
            } else if full > 1 {
                let v = self.var("j");
                self.open(format!("for {v} in 0..{full}"));
                each(self, Some(&v), chunk_bytes, 0);
                self.close();
                self.free_var();
            }
            if part > 0 {
                each(self, None, part as i64 * es, full as i64);
            }
        }
        for _ in 0..opened {
            self.close();
            self.free_var();
        }
    }

    /// Writes `rows × cols` valid elements of a result tile held `[cols/16][held][16]` f32 in
    /// UB at `src` to GM rows `stride` bytes apart.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn copy_out(
        &mut self,
        gm: &str,
        dst: &Off,
        ub: &str,
        src: &Off,
        held: u64,
        rows: u64,
        cols: u64,
        stride: i64,
    ) {
        if rows == 0 || cols == 0 {
            return;
        }
        let full = cols / FRACTAL;
        let part = cols % FRACTAL;
        let chunk = 64i64;
        let chunk_stride = held as i64 * chunk;
        let one = |e: &mut Self, d: Off, s: Off, bytes: i64| {
            let line = if bytes == chunk && d.aligned(32) && (stride % 32 == 0 || rows == 1) {
                let mut l = format!("copy {gm}[{}], {ub}[{}]", d.text(), s.text());
                if rows > 1 {
                    let _ = write!(l, ", n_burst={rows}");
                }
                let _ = write!(l, ", len=2");
                if rows > 1 && stride > chunk {
                    let _ = write!(l, ", dst_gap={}", (stride - chunk) / 32);
                }
                l
            } else {
                let mut l = format!("copy_pad {gm}[{}], {ub}[{}]", d.text(), s.text());
                if rows > 1 {
                    let _ = write!(l, ", n_burst={rows}");
                }
                let _ = write!(l, ", bytes={bytes}");
                if rows > 1 {
                    let _ = write!(l, ", src_stride={chunk}, dst_stride={stride}");
                }
                l
            };
            e.line(line);
        };
        if full == 1 {
            one(self, dst.clone(), src.clone(), chunk);
        } else if full > 1 {
            let v = self.var("n1");
            self.open(format!("for {v} in 0..{full}"));
            one(
                self,
                dst.clone().plus(&v, chunk),
                src.clone().plus(&v, chunk_stride),
                chunk,
            );
            self.close();
            self.free_var();
        }
        if part > 0 {
            one(
                self,
                dst.clone().add(full as i64 * chunk),
                src.clone().add(full as i64 * chunk_stride),
                part as i64 * 4,
            );
        }
    }

    /// Copies `n` contiguous f32 elements from GM into UB (a vector), padding with zeros.
    pub(crate) fn copy_vector(&mut self, ub: &str, gm: &str, src: &Off, n: u64) {
        let bytes = n * 4;
        if bytes.is_multiple_of(32) && src.aligned(32) {
            self.line(format!(
                "copy {ub}[0], {gm}[{}], len={}",
                src.text(),
                bytes / 32
            ));
        } else {
            self.line(format!(
                "copy_pad {ub}[0], {gm}[{}], bytes={bytes}",
                src.text()
            ));
        }
    }
}

impl Emitter<'_> {
    /// The GM region of an operand's step tile and how many of its rows and inner elements
    /// hold data, given the valid rows, columns and reduction of the step.
    pub(crate) fn operand_region(
        &self,
        r: &Run,
        a_role: bool,
        o: &RunOperand,
        (rows_v, cols_v, k_v): (u64, u64, u64),
    ) -> Region {
        let st = &self.plan.stages[r.stage];
        let t = r.tiles;
        // `operand_region` is only asked for operands from GM.
        let (at, inner, gathered) = o.gm.clone().unwrap_or((st.write.clone(), Inner::K, false));
        let es = self.elem(at.array) as i64;
        // The operand's two dimensions: rows (m or n) and the reduction.
        let other = if a_role { &st.m } else { &st.n };
        let block_dims = match (r.role, a_role) {
            (Role::Last, true) | (Role::FeedsA, true) => (Some(other), None),
            (Role::Last, false) | (Role::FeedsB, false) => (None, Some(other)),
            _ => (None, None),
        };
        let mut src = self.gm_base(&at, es as u64, block_dims.0, block_dims.1);
        let s_other = at.dim_stride(other).unwrap_or(0) * es;
        // The tile's position along the other dimension within the run's region.
        let (tile_other, valid_other, tile_len) = if a_role {
            (
                if r.row_tiles > 1 {
                    Some(("mt", t.tm))
                } else {
                    None
                },
                rows_v,
                t.tm,
            )
        } else {
            (
                if r.col_tiles > 1 {
                    Some(("nt", t.tn))
                } else {
                    None
                },
                cols_v,
                t.tn,
            )
        };
        if let Some((v, len)) = tile_other {
            src = src.plus(v, len as i64 * s_other);
        }
        // The reduction: outer loops, then the step.
        let mut k_rows: Vec<(u64, i64)> = Vec::new();
        for (j, c) in st.k_outer.iter().enumerate() {
            src = src.plus(&format!("ko{j}"), at.strides[c.iter] * es);
        }
        let kt_n = self.kp(r.stage) / t.tk;
        if gathered {
            let comps = &st.k.comps;
            let group: u64 = comps[1..].iter().map(|c| c.extent).product();
            let q = if kt_n > 1 {
                t.tk / group
            } else {
                comps[0].extent
            };
            if kt_n > 1 {
                src = src.plus("kt", q as i64 * at.strides[comps[0].iter] * es);
            }
            k_rows.push((q, at.strides[comps[0].iter] * es));
            for c in &comps[1..] {
                k_rows.push((c.extent, at.strides[c.iter] * es));
            }
        } else if kt_n > 1 {
            src = src.plus("kt", t.tk as i64 * at.dim_stride(&st.k).unwrap_or(0) * es);
        }
        let s_k = at.dim_stride(&st.k).unwrap_or(0) * es;
        // On chip: the view's slot, at the step tile's row and chunk.
        let v = &o.view;
        let at_chip = v.at(es as u64);
        let (tile_rows, rows, valid_rows, inner_len, valid_inner) = match inner {
            Inner::K => (
                tile_len,
                Rows::plain(tile_len, s_other),
                valid_other,
                t.tk,
                k_v,
            ),
            Inner::Other => (
                t.tk,
                if gathered {
                    Rows { comps: k_rows }
                } else {
                    Rows::plain(t.tk, s_k)
                },
                k_v,
                tile_len,
                valid_other,
            ),
        };
        Region {
            gm: self.name(at.array),
            src,
            dst: v.buf.clone(),
            at: at_chip,
            held: v.held,
            tile_rows,
            rows,
            valid_rows,
            inner: inner_len,
            valid_inner,
            es: es as u64,
        }
    }

    /// A step's channels of a sliding-window operand into its L1 slot: for each, the `l`
    /// elements from its first tap on (every input row the output row reads), zeros up to
    /// `cs`.
    pub(crate) fn window_in(&mut self, r: &Run, o: &RunOperand, w: &Window) {
        let st = &self.plan.stages[r.stage];
        // Windows come from GM (`window` found them there).
        let Some((at, _, _)) = o.gm.clone() else {
            return;
        };
        let es = w.es as i64;
        let channels = r.tiles.tk.min(st.k.extent()).div_ceil(w.kh * w.kw);
        let mut src = self.gm_base(&at, w.es, None, None);
        if self.kp(r.stage) / r.tiles.tk > 1 {
            src = src.plus("kt", channels as i64 * w.sc * es);
        }
        let array = self.name(at.array);
        let line = window_copy(
            &o.view.buf,
            &o.view.slot,
            &array,
            &src,
            channels,
            w.l as i64 * w.es as i64,
            w,
        );
        self.line(line);
    }

    /// The accumulator's start for this tile: its GM contents through the prologue into L0C.
    pub(crate) fn init_tile(&mut self, r: &Run) {
        let t = r.tiles;
        let st = self.plan.last();
        let acc = st.acc;
        let tile = t.tm * t.tn * 4;
        let ub = self.slot("s7", tile);
        self.line("wait_flag V, MTE2, 2");
        let at = st.write.clone();
        let base = self.gm_base(&at, 4, Some(&st.m), Some(&st.n)).plus(
            if r.col_tiles > 1 { "nt" } else { "" },
            if r.col_tiles > 1 { t.tn as i64 * 4 } else { 0 },
        );
        let stride = at.dim_stride(&st.m).unwrap_or(0) * 4;
        let name = self.name(acc);
        let (rows, cols) = (r.rows.clone(), r.cols.clone());
        self.tails(&[&rows, &cols], &mut |e, v| {
            let region = Region {
                gm: name.clone(),
                src: base.clone(),
                dst: "ub_i0".into(),
                at: ub.clone(),
                held: t.tm,
                tile_rows: t.tm,
                rows: Rows::plain(t.tm, stride),
                valid_rows: v[0],
                inner: t.tn,
                valid_inner: v[1],
                es: 4,
            };
            e.copy_in(&region);
        });
        self.line("set_flag MTE2, V, 2");
        self.line("wait_flag MTE2, V, 2");
        if let Some(before) = &self.ep.before {
            for op in before.ops.clone() {
                self.vector_op(&op, "ub_i", &ub);
            }
        }
        let l0c = self.slot("s7", tile);
        let start = self.ep.start;
        self.line(format!(
            "copy_ub_to_cc l0c[{}], ub_i{start}[{}], len={}",
            l0c.text(),
            ub.text(),
            (t.tm / FRACTAL) * (t.tn / FRACTAL)
        ));
        self.line("set_flag V, MTE2, 2");
        self.line("set_flag V, M, 0");
    }

    /// Whether the tile's accumulator starts from GM ([`Self::init_tile`]) and, then, whether
    /// that start goes after the operand copies of a reduction of one step
    /// ([`Self::init_after_operands`]) rather than before the step.
    pub(crate) fn init_placement(&self, r: &Run) -> Option<bool> {
        let st = &self.plan.stages[r.stage];
        if r.role != Role::Last || !matches!(st.init, Init::Gm(_)) {
            return None;
        }
        let one_step = self.kp(r.stage) == r.tiles.tk && st.k_outer.is_empty();
        Some(one_step && !super::conv_rows::rows_first(r))
    }

    /// The accumulator's start after the operand copies of a one-step reduction: MTE2 copies
    /// first the operands the Cube waits for longest, and the tile's last data to arrive is
    /// the small accumulator tile, whose way to the Cube (the prologue, `copy_ub_to_cc`) is
    /// shorter than the operands' `load2d`. With more steps the start stays ahead of them:
    /// there a step's copy may wait for its slot, and the start must not wait behind it.
    pub(crate) fn init_after_operands(&mut self, r: &Run) {
        if self.init_placement(r) == Some(true) {
            self.init_tile(r);
        }
    }

    /// A stage's result tile into its L1 panel.
    pub(crate) fn write_panel(&mut self, r: &Run, panel: &str, ub: &Off) {
        let t = r.tiles;
        let kp_last = self.kp(self.plan.stages.len() - 1);
        let lt = self.t.last();
        match r.role {
            Role::FeedsA => {
                // [K chunks][tm][16]: the tile's chunks are consecutive.
                let mut at = Off::at(0);
                if r.col_tiles > 1 {
                    at = at.plus("nt", (t.tn * lt.tm * 4) as i64);
                }
                self.line(format!(
                    "copy {panel}[{}], ub_t0[{}], len={}",
                    at.text(),
                    ub.text(),
                    t.tm * t.tn * 4 / 32
                ));
            }
            _ => {
                // [group chunks][Kp rows][16]: each chunk's rows at the tile's row.
                let mut at = Off::at(0);
                if r.col_tiles > 1 {
                    at = at.plus("nt", (t.tn / FRACTAL * kp_last * 64) as i64);
                }
                if r.row_tiles > 1 {
                    at = at.plus("mt", (t.tm * 64) as i64);
                }
                let gap = (kp_last - t.tm) * 64 / 32;
                let mut line = format!("copy {panel}[{}], ub_t0[{}]", at.text(), ub.text());
                if t.tn > FRACTAL {
                    let _ = write!(line, ", n_burst={}", t.tn / FRACTAL);
                }
                let _ = write!(line, ", len={}", t.tm * 64 / 32);
                if gap > 0 && t.tn > FRACTAL {
                    let _ = write!(line, ", dst_gap={gap}");
                }
                self.line(line);
            }
        }
        if self.plan.stages[r.stage].live_out {
            self.write_intermediate(r, ub);
        }
    }

    /// A live-out intermediate's tile to GM too, from the blocks of the first column group
    /// (rows of its row panel) or of the first row panel (columns of its column group), so
    /// that every element is written by one block.
    fn write_intermediate(&mut self, r: &Run, ub: &Off) {
        let t = r.tiles;
        let st = &self.plan.stages[r.stage];
        let at = st.write.clone();
        let name = self.name(st.acc);
        let (mut base, guard) = match r.role {
            Role::FeedsA => (
                self.gm_base(&at, 4, Some(&st.m), None),
                (self.t.ng > 1).then_some("s1 == 0"),
            ),
            _ => (
                self.gm_base(&at, 4, None, Some(&st.n)),
                (self.t.mt(self.plan.last().m.extent()) > 1).then_some("s0 == 0"),
            ),
        };
        let stride = at.dim_stride(&st.m).unwrap_or(0) * 4;
        if r.col_tiles > 1 {
            base = base.plus("nt", t.tn as i64 * 4);
        }
        if r.row_tiles > 1 {
            base = base.plus("mt", t.tm as i64 * stride);
        }
        if let Some(g) = guard {
            self.open(format!("if {g}"));
        }
        let (rows, cols) = (r.rows.clone(), r.cols.clone());
        self.tails(&[&rows, &cols], &mut |e, v| {
            e.copy_out(&name, &base, "ub_t0", ub, t.tm, v[0], v[1], stride);
        });
        if guard.is_some() {
            self.close();
        }
    }

    /// Where the block's tile of live-out array `a` (in UB tile buffer `tile`) goes: its GM
    /// name, the block's base offset, the byte stride of its rows and the UB buffer's name.
    pub(crate) fn output_at(
        &self,
        r: &Run,
        a: polyhedral::program::ArrayId,
        tile: usize,
    ) -> (String, Off, i64, String) {
        let st = self.plan.last();
        let at = &self.plan.tiles[&a];
        let mut base = self.gm_base(at, 4, Some(&st.m), Some(&st.n));
        if r.col_tiles > 1 {
            base = base.plus("nt", r.tiles.tn as i64 * 4);
        }
        let stride = at.dim_stride(&st.m).unwrap_or(0) * 4;
        (self.name(a), base, stride, format!("ub_t{tile}"))
    }

    /// The live-out tiles to GM, their valid rows and columns.
    pub(crate) fn write_out(&mut self, r: &Run, ub: &Off) {
        let t = r.tiles;
        let st = self.plan.last();
        if let Some(band) = st.band {
            self.write_out_band(r, ub, band);
            return;
        }
        let outputs = self.ep.outputs.clone();
        let (rows, cols) = (r.rows.clone(), r.cols.clone());
        for (a, tile) in outputs {
            let (name, base, stride, buf) = self.output_at(r, a, tile);
            self.tails(&[&rows, &cols], &mut |e, v| {
                e.copy_out(&name, &base, &buf, ub, t.tm, v[0], v[1], stride);
            });
        }
    }

    /// A scaled operand's whole region, GM → UB → × factor → its L1 panel, in pieces of
    /// whole chunks (ping-pong UB buffers: MTE2 → V 3, V → MTE3 1, MTE3 → MTE2 3).
    pub(crate) fn prescale(&mut self, r: &Run, o: &RunOperand, a_role: bool, f: Factor) {
        let st = &self.plan.stages[r.stage];
        // Scaled operands always come from GM (the plan refuses the others).
        let Some((at, inner, _)) = o.gm.clone() else {
            return;
        };
        let es = 4i64;
        let held = o.view.held;
        let scalar = match f {
            Factor::Const(c) => epilogue::format_float(c),
            Factor::Scalar(a) => {
                let reg = self
                    .ep
                    .scalars
                    .iter()
                    .find(|(x, _)| *x == a)
                    .map_or(0, |(_, r)| *r);
                format!("f{reg}")
            }
        };
        let other = if a_role { &st.m } else { &st.n };
        let region = self.region_other(r, a_role);
        // Valid elements of the region's non-reduction dimension.
        let other_valid = match (r.role, a_role) {
            (Role::Last | Role::FeedsA, true) => r.rows.clone(),
            (Role::Last | Role::FeedsB, false) => self.group_tail(),
            _ => Tail::none(self.plan.last().k.extent()),
        };
        let block_dims = match (r.role, a_role) {
            (Role::Last | Role::FeedsA, true) => (Some(other), None),
            (Role::Last | Role::FeedsB, false) => (None, Some(other)),
            _ => (None, None),
        };
        let base = self.gm_base(&at, 4, block_dims.0, block_dims.1);
        let s_other = at.dim_stride(other).unwrap_or(0) * es;
        let s_k = at.dim_stride(&st.k).unwrap_or(0) * es;
        let k_valid = st.k.extent();
        let kp = self.kp(r.stage);
        // The panel: [chunks][held][16] along the operand's inner dimension.
        let (n_chunks, stride, rows_valid, inner_valid) = match inner {
            Inner::K => (kp / FRACTAL, s_other, other_valid, Tail::none(k_valid)),
            Inner::Other => (region / FRACTAL, s_k, Tail::none(k_valid), other_valid),
        };
        let (pc, piece_bytes) = piece(held);
        // At least two pieces where the operand has the chunks: the copies, the scaling and
        // the copies to L1 of consecutive pieces overlap, and what is left to drain overlaps
        // the run's first tiles, whose slots are free from the start (`Emitter::run`); more
        // pieces would only add copies to MTE2.
        let pc = pc.min(n_chunks.div_ceil(2)).max(1);
        let chunk_bytes = held * 64;
        let pieces = n_chunks.div_ceil(pc);
        let gm = self.name(at.array);
        self.line(format!("// `{gm}` scaled by {scalar} into L1"));
        self.line("wait_flag MTE1, MTE3, 3");
        for _ in 0..2 {
            self.line("set_flag MTE3, MTE2, 3");
        }
        for p in 0..pieces {
            let slot = Off::at(((p % 2) * piece_bytes) as i64);
            let first = p * pc;
            let count = pc.min(n_chunks - first);
            self.line("wait_flag MTE3, MTE2, 3");
            // With every row and column of the piece holding data, the piece crosses GM → UB
            // as one copy of whole rows, and the chunks are parted on the way to L1.
            let rows_full = !rows_valid.active() && rows_valid.full >= held;
            let chunks_full =
                !inner_valid.active() && inner_valid.full >= (first + count) * FRACTAL;
            let src = base.clone().add(first as i64 * 16 * es);
            let wide = count > 1
                && rows_full
                && chunks_full
                && src.aligned(32)
                && stride % 32 == 0
                && stride / 32 >= count as i64 * 2;
            if wide {
                self.line(format!(
                    "copy ub_v[{}], {gm}[{}], n_burst={held}, len={}, src_gap={}",
                    slot.text(),
                    src.text(),
                    count * 2,
                    stride / 32 - count as i64 * 2
                ));
            }
            self.tails(&[&rows_valid, &inner_valid], &mut |e, v| {
                if wide {
                    return;
                }
                for c in first..first + count {
                    let valid_inner = v[1].saturating_sub(c * FRACTAL).min(FRACTAL);
                    e.copy_in(&Region {
                        gm: gm.clone(),
                        src: base.clone().add(c as i64 * 16 * es),
                        dst: "ub_v".into(),
                        at: slot.clone().add(((c - first) * chunk_bytes) as i64),
                        held,
                        tile_rows: held,
                        rows: Rows::plain(held, stride),
                        valid_rows: v[0].min(held),
                        inner: FRACTAL,
                        valid_inner,
                        es: 4,
                    });
                }
            });
            // The first piece is on its way behind the scalars while S waits for them.
            self.load_scalars();
            self.line("set_flag MTE2, V, 3");
            self.line("wait_flag MTE2, V, 3");
            let repeats = count * chunk_bytes / VECTOR_BYTES;
            let mut done = 0;
            while done < repeats {
                let n = (repeats - done).min(255);
                let at_v = slot.clone().add((done * VECTOR_BYTES) as i64);
                self.line(format!(
                    "vmuls.f32 ub_v[{}], ub_v[{}], {scalar}, repeat={n}",
                    at_v.text(),
                    at_v.text()
                ));
                done += n;
            }
            self.line("set_flag V, MTE3, 1");
            self.line("wait_flag V, MTE3, 1");
            if wide {
                for c in 0..count {
                    self.line(format!(
                        "copy {}[{}], ub_v[{}], n_burst={held}, len=2, src_gap={}",
                        o.view.buf,
                        (first + c) * chunk_bytes,
                        slot.clone().add(c as i64 * 64).text(),
                        (count - 1) * 2
                    ));
                }
            } else {
                self.line(format!(
                    "copy {}[{}], ub_v[{}], len={}",
                    o.view.buf,
                    first * chunk_bytes,
                    slot.text(),
                    count * chunk_bytes / 32
                ));
            }
            self.line("set_flag MTE3, MTE2, 3");
        }
        // The two pieces' flags are waited for after the run (`Emitter::run`).
        self.line("set_flag MTE3, MTE1, 2");
    }

    /// The valid columns of the block's column group.
    pub(crate) fn group_tail(&self) -> Tail {
        let lt = self.t.last();
        let st = self.plan.last();
        let group = self.t.ntb * lt.tn;
        let ng = self.t.ng;
        let conds = if ng > 1 {
            vec![format!("s1 == {}", ng - 1)]
        } else {
            Vec::new()
        };
        Tail::new(conds, group, st.n.extent() - (ng - 1) * group)
    }
}

/// Chunks of `held` f32 rows per UB piece of a scaled operand, and the piece's bytes.
pub(crate) fn piece(held: u64) -> (u64, u64) {
    let chunk = held * 64;
    let pc = (tiles::PIECE_BYTES / chunk).max(1);
    (pc, pc * chunk)
}

/// `copy_pad` of `channels` channels of a window operand: `bytes` of each from `src` in GM
/// to `dst` in `buf`, channel after channel `w.sc` elements apart in GM and `w.cs` apart on
/// chip, each zero-filled to `w.cs` elements.
#[allow(clippy::too_many_arguments)]
pub(crate) fn window_copy(
    buf: &str,
    dst: &Off,
    array: &str,
    src: &Off,
    channels: u64,
    bytes: i64,
    w: &Window,
) -> String {
    let es = w.es as i64;
    let mut line = format!("copy_pad {buf}[{}], {array}[{}]", dst.text(), src.text());
    if channels > 1 {
        let _ = write!(line, ", n_burst={channels}");
    }
    let _ = write!(line, ", bytes={bytes}");
    if channels > 1 {
        let _ = write!(
            line,
            ", src_stride={}, dst_stride={}",
            w.sc * es,
            w.cs as i64 * es
        );
    }
    let _ = write!(line, ", len={}", w.cs as i64 * es / 32);
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_print_as_the_assembler_reads_them() {
        assert_eq!(Off::at(0).text(), "0");
        assert_eq!(
            Off::at(64).plus("kt", 128).plus("s8", 1).text(),
            "kt*128 + s8 + 64"
        );
        assert_eq!(Off::at(-4).plus("j", 32).text(), "j*32 - 4");
        assert!(Off::at(64).plus("j", 32).aligned(32));
        assert!(!Off::at(64).plus("j", 20).aligned(32));
        assert_eq!(Off::at(0).plus("j", 2).plus("j", -2).text(), "0");
    }
}
