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

use super::cube::Emitter;
use super::FRACTAL;

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
        // Rows past the data in every data chunk, then whole chunks past the data.
        if r.valid_rows < r.tile_rows && data_chunks > 0 {
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
                r.tile_rows * chunk_bytes as u64 / 32,
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
                let mut line = format!(
                    "copy {}[{}], {}[{}]",
                    r.dst,
                    dst.text(),
                    r.gm,
                    src.text()
                );
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
            self.line(format!("copy {ub}[0], {gm}[{}], len={}", src.text(), bytes / 32));
        } else {
            self.line(format!(
                "copy_pad {ub}[0], {gm}[{}], bytes={bytes}",
                src.text()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_print_as_the_assembler_reads_them() {
        assert_eq!(Off::at(0).text(), "0");
        assert_eq!(Off::at(64).plus("kt", 128).plus("s8", 1).text(), "kt*128 + s8 + 64");
        assert_eq!(Off::at(-4).plus("j", 32).text(), "j*32 - 4");
        assert!(Off::at(64).plus("j", 32).aligned(32));
        assert!(!Off::at(64).plus("j", 20).aligned(32));
        assert_eq!(Off::at(0).plus("j", 2).plus("j", -2).text(), "0");
    }
}
