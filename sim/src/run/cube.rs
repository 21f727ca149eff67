//! The cube and its MTE1 loads: `load2d` moves fractals from L1 into L0A or L0B, `img2col` and
//! `load3d` build the im2col matrix of a feature map there, and `mmad` multiplies the fractals
//! of L0A and L0B into L0C.

use super::{Block, Burst, Machine};
use crate::assemble::Exec;
use crate::diagnostic::Error;
use crate::exec;
use crate::isa::*;

impl Machine<'_> {
    /// `load2d`: fractals from L1 into L0A or L0B, transposed if asked.
    pub(super) fn load2d(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::Load2d {
            repeat,
            src_stride,
            transpose,
            f32,
            ..
        } = &e.instr
        else {
            return Ok(());
        };
        let es: u64 = if *f32 { 4 } else { 2 };
        let fr = 256 * es;
        let (r, st) = (*repeat as u64, *src_stride as u64);
        let dst_mem = self.k.bufs[e.ops[0].buf as usize].mem;
        let (_, dst) = self.resolve(b, e, 0, r * fr, mc.mem(dst_mem).align, "writes")?;
        let src_ext = if r == 0 { 0 } else { (r - 1) * st * fr + fr };
        let (_, src) = self.resolve(b, e, 1, src_ext, mc.mem(Mem::L1).align, "reads")?;
        let path = if dst_mem == Mem::L0a {
            CopyPath::L1L0a
        } else {
            CopyPath::L1L0b
        };
        self.transfer(
            b,
            e,
            path,
            r * fr,
            &[
                Burst::strided(1, src, r, fr, st * fr, false),
                Burst::strided(0, dst, 1, r * fr, 0, true),
            ],
        )?;
        let (es, fr) = (es as usize, fr as usize);
        let mut frac = [0u8; 1024];
        for i in 0..r {
            let so = (src + i * st * fr as u64) as usize;
            let l1 = &self.local[core][Mem::L1 as usize];
            if *transpose {
                for row in 0..16 {
                    for col in 0..16 {
                        let from = so + (col * 16 + row) * es;
                        let to = (row * 16 + col) * es;
                        frac[to..to + es].copy_from_slice(&l1[from..from + es]);
                    }
                }
            } else {
                frac[..fr].copy_from_slice(&l1[so..so + fr]);
            }
            let d = (dst + i * fr as u64) as usize;
            self.local[core][dst_mem as usize][d..d + fr].copy_from_slice(&frac[..fr]);
        }
        Ok(())
    }

    /// `img2col`: the im2col matrix of a feature map from L1 into L0A, zZ.
    pub(super) fn img2col(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::Img2col {
            h,
            w,
            c1,
            kh,
            kw,
            stride,
            pad,
            pos,
            m1,
            ..
        } = &e.instr
        else {
            return Ok(());
        };
        let (h, w, c1, kh, kw) = (*h as i64, *w as i64, *c1 as i64, *kh as i64, *kw as i64);
        let (stride, pad, pos, m1) = (*stride as i64, *pad as i64, *pos as i64, *m1 as i64);
        // The parser checked that the kernel fits the padded map.
        let oh = (h + 2 * pad - kh) / stride + 1;
        let ow = (w + 2 * pad - kw) / stride + 1;
        let k1 = c1 * kh * kw;
        let dst_len = (m1 * k1 * 512) as u64;
        let src_len = (c1 * h * w * 32) as u64;
        let (_, dst) = self.resolve(b, e, 0, dst_len, mc.mem(Mem::L0a).align, "writes")?;
        let (_, src) = self.resolve(b, e, 1, src_len, mc.mem(Mem::L1).align, "reads")?;
        let (s, t) = self.copy_time(b, CopyPath::L1L0a, dst_len);
        let tick = b.begin(Pipe::Mte1);
        self.check(
            b,
            e,
            Pipe::Mte1,
            tick,
            &[
                (1, src, src + src_len, false),
                (0, dst, dst + dst_len, true),
            ],
        )?;
        self.touch(b, e, 0, s, t);
        self.touch(b, e, 1, s, t);
        self.stats.path_bytes[CopyPath::L1L0a as usize] += dst_len;
        let [_, l1, l0a, _, _, _] = &mut self.local[core];
        for m in 0..m1 {
            for k in 0..k1 {
                let (c, i, j) = (k / (kh * kw), (k / kw) % kh, k % kw);
                for r in 0..16 {
                    let p = pos + m * 16 + r;
                    let (y, x) = ((p / ow) * stride + i - pad, (p % ow) * stride + j - pad);
                    let d = dst as usize + (((m * k1 + k) * 16 + r) * 32) as usize;
                    let row = &mut l0a[d..d + 32];
                    if p < oh * ow && (0..h).contains(&y) && (0..w).contains(&x) {
                        let from = src as usize + (((c * h + y) * w + x) * 32) as usize;
                        row.copy_from_slice(&l1[from..from + 32]);
                    } else {
                        row.fill(0);
                    }
                }
            }
        }
        Ok(())
    }

    /// `load3d`: the im2col matrix of a feature map from L1 into L0B, zN.
    pub(super) fn load3d(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::Load3d {
            c,
            cs,
            w,
            kh,
            kw,
            k,
            n,
            f32,
            ..
        } = &e.instr
        else {
            return Ok(());
        };
        let es: u64 = if *f32 { 4 } else { 2 };
        let (c, cs, w, kh, kw) = (*c as u64, *cs as u64, *w as u64, *kh as u64, *kw as u64);
        let (k, n) = (*k as u64, *n as u64);
        let dst_len = k * n * es;
        // The last element any row reads: channel c-1, row kh-1, tap kw-1, column n-1.
        let src_len = ((c - 1) * cs + (kh - 1) * w + kw - 1 + n) * es;
        let (_, dst) = self.resolve(b, e, 0, dst_len, mc.mem(Mem::L0b).align, "writes")?;
        let (_, src) = self.resolve(b, e, 1, src_len, mc.mem(Mem::L1).align, "reads")?;
        self.transfer(
            b,
            e,
            CopyPath::L1L0b,
            dst_len,
            &[
                Burst::strided(1, src, 1, src_len, 0, false),
                Burst::strided(0, dst, 1, dst_len, 0, true),
            ],
        )?;
        let rows = c * kh * kw;
        let (es, n1) = (es as usize, (n / 16) as usize);
        let [_, l1, _, l0b, _, _] = &mut self.local[core];
        for row in 0..k as usize {
            let (k1, kk) = (row / 16, row % 16);
            let from = if (row as u64) < rows {
                let (ci, i, j) = (
                    row as u64 / (kh * kw),
                    (row as u64 / kw) % kh,
                    row as u64 % kw,
                );
                Some(src as usize + ((ci * cs + i * w + j) as usize) * es)
            } else {
                None
            };
            for col in 0..n as usize {
                let (f, nn) = (col / 16, col % 16);
                let d = dst as usize + (((k1 * n1 + f) * 16 + nn) * 16 + kk) * es;
                match from {
                    Some(at) => {
                        let at = at + col * es;
                        l0b[d..d + es].copy_from_slice(&l1[at..at + es]);
                    }
                    None => l0b[d..d + es].fill(0),
                }
            }
        }
        Ok(())
    }

    /// `mmad`: the cube.
    pub(super) fn mmad(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::Mmad {
            out,
            m,
            k,
            n,
            init,
            src_f32,
            ..
        } = &e.instr
        else {
            return Ok(());
        };
        let (m1, k1, n1) = (
            (*m as u64).div_ceil(16),
            (*k as u64).div_ceil(16),
            (*n as u64).div_ceil(16),
        );
        let (src_ty, per_fractal) = if *src_f32 {
            (DType::F32, mc.cube_per_fractal_f32)
        } else {
            (DType::F16, mc.cube_per_fractal)
        };
        let fr_bytes = 256 * src_ty.size();
        let c_bytes = m1 * n1 * 256 * out.size();
        let (_, c) = self.resolve(b, e, 0, c_bytes, mc.mem(Mem::L0c).align, "writes")?;
        let (_, a) = self.resolve(b, e, 1, m1 * k1 * fr_bytes, mc.mem(Mem::L0a).align, "reads")?;
        let (_, bb) = self.resolve(b, e, 2, k1 * n1 * fr_bytes, mc.mem(Mem::L0b).align, "reads")?;
        let fr = m1 * k1 * n1;
        let cost = mc.cube_startup + per_fractal * fr;
        let (s, t) = b.dispatch(Pipe::M, cost, 0);
        let tick = b.begin(Pipe::M);
        let mut acc = vec![
            (1, a, a + m1 * k1 * fr_bytes, false),
            (2, bb, bb + k1 * n1 * fr_bytes, false),
        ];
        if !*init {
            acc.push((0, c, c + c_bytes, false));
        }
        acc.push((0, c, c + c_bytes, true));
        self.check(b, e, Pipe::M, tick, &acc)?;
        for i in 0..3 {
            self.touch(b, e, i, s, t);
        }
        self.stats.fractal_macs += fr;
        let [_, _, l0a, l0b, l0c, _] = &mut self.local[core];
        exec::mmad(
            l0a,
            a as usize,
            l0b,
            bb as usize,
            l0c,
            c as usize,
            (m1 as usize, k1 as usize, n1 as usize),
            src_ty,
            *out,
            *init,
        );
        Ok(())
    }
}
