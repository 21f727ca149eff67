//! The DMA instructions of the MTE pipes (and V's UB → UB copies): `copy`, whose bursts are
//! whole 32-byte blocks, and `copy_pad`, whose bursts are any number of whole GM elements at
//! any element of a GM tensor while their on-chip side stays on block boundaries (loads fill
//! the rest of a burst's blocks with zeros, stores write only the burst's bytes); and the
//! fractal copies between UB and L0C on V, `copy_ub_to_cc` and `copy_cc_to_ub`.

use super::{Block, Burst, Machine};
use crate::assemble::Exec;
use crate::diagnostic::{Diagnostic, Error};
use crate::exec;
use crate::isa::{CopyPath, DType, Instr, Mem, Pipe};

impl Machine<'_> {
    /// `copy`: `n_burst` bursts of `len` blocks with gaps of whole blocks.
    pub(super) fn copy(
        &mut self,
        b: &mut Block,
        e: &Exec,
        (n_burst, len): (u64, u64),
        (src_gap, dst_gap): (u64, u64),
    ) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let (nb, ln) = (n_burst, len * 32);
        let src_ext = if nb == 0 {
            0
        } else {
            (nb - 1) * (ln + src_gap * 32) + ln
        };
        let dst_ext = if nb == 0 {
            0
        } else {
            (nb - 1) * (ln + dst_gap * 32) + ln
        };
        let dst_mem = self.k.bufs[e.ops[0].buf as usize].mem;
        let src_mem = self.k.bufs[e.ops[1].buf as usize].mem;
        let (_, dst) = self.resolve(b, e, 0, dst_ext, mc.mem(dst_mem).align, "writes")?;
        let (_, src) = self.resolve(b, e, 1, src_ext, mc.mem(src_mem).align, "reads")?;
        // The assembler accepted only paths that exist.
        let path = CopyPath::between(src_mem, dst_mem).unwrap_or(CopyPath::UbUb);
        let bytes = nb * ln;
        let src_period = ln + src_gap * 32;
        let dst_period = ln + dst_gap * 32;
        self.transfer(
            b,
            e,
            path,
            bytes,
            &[
                Burst::strided(1, src, nb, ln, src_period, false),
                Burst::strided(0, dst, nb, ln, dst_period, true),
            ],
        )?;
        if src_mem == Mem::Gm {
            self.stats.gm_read += bytes;
        }
        if dst_mem == Mem::Gm {
            self.stats.gm_written += bytes;
        }
        if self.gm_log.is_some() && (src_mem == Mem::Gm || dst_mem == Mem::Gm) {
            let (base, gap, write) = if dst_mem == Mem::Gm {
                (dst, dst_gap * 32, true)
            } else {
                (src, src_gap * 32, false)
            };
            for i in 0..nb {
                let lo = base + i * (ln + gap);
                self.log_gm(b, lo, lo + ln, write, e.site);
            }
        }
        let mut tmp = std::mem::take(&mut self.scratch);
        tmp.resize(ln as usize, 0);
        for i in 0..nb {
            let so = (src + i * (ln + src_gap * 32)) as usize;
            let d = (dst + i * (ln + dst_gap * 32)) as usize;
            tmp.copy_from_slice(&self.mem_ref(core, src_mem)[so..so + ln as usize]);
            self.mem_mut(core, dst_mem)[d..d + ln as usize].copy_from_slice(&tmp);
        }
        self.scratch = tmp;
        Ok(())
    }

    /// `copy_pad`: `n_burst` bursts of `bytes` bytes, strides in bytes; a load fills `blocks`
    /// blocks per burst, a store reads the burst's whole blocks and writes its bytes. The GM
    /// side needs the alignment of its elements and must stay inside the tensor's elements.
    /// Timed as the on-chip blocks.
    pub(super) fn copy_pad(
        &mut self,
        b: &mut Block,
        e: &Exec,
        (n_burst, bytes, blocks): (u64, u64, u64),
        (src_stride, dst_stride): (u64, u64),
    ) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let (nb, ln) = (n_burst, bytes);
        let (ss, ds) = (src_stride, dst_stride);
        let dst_mem = self.k.bufs[e.ops[0].buf as usize].mem;
        let src_mem = self.k.bufs[e.ops[1].buf as usize].mem;
        let load = dst_mem != Mem::Gm;
        // A load fills `len` blocks per burst; a store reads the bursts' whole blocks
        // and writes only their bytes.
        let (src_len, dst_len) = if load {
            (ln, blocks * 32)
        } else {
            (ln.div_ceil(32) * 32, ln)
        };
        let ext = |n: u64, stride: u64, l: u64| {
            if n == 0 || l == 0 {
                0
            } else {
                (n - 1) * stride + l
            }
        };
        let gm_op = if load { 1 } else { 0 };
        let gm_buf = &self.k.bufs[e.ops[gm_op].buf as usize];
        let (gm_elem, gm_exact) = (gm_buf.elem, gm_buf.exact);
        let align = |mem: Mem| {
            if mem == Mem::Gm {
                gm_elem
            } else {
                mc.mem(mem).align
            }
        };
        let (_, dst) = self.resolve(b, e, 0, ext(nb, ds, dst_len), align(dst_mem), "writes")?;
        let (_, src) = self.resolve(b, e, 1, ext(nb, ss, src_len), align(src_mem), "reads")?;
        let (gm_addr, gm_stride) = if load { (src, ss) } else { (dst, ds) };
        let gm_base = self.k.bufs[e.ops[gm_op].buf as usize].base;
        if ln > 0 && nb > 0 && gm_addr + ext(nb, gm_stride, ln) > gm_base + gm_exact {
            let site = &self.k.sites[e.site as usize];
            return Err(self.error(
                Diagnostic::new(
                    e.spans[gm_op],
                    format!(
                        "`{}` {} bytes {}..{} of `{}`, which has {gm_exact} bytes{}",
                        site.text,
                        if load { "reads" } else { "writes" },
                        gm_addr - gm_base,
                        gm_addr - gm_base + ext(nb, gm_stride, ln),
                        self.k.bufs[e.ops[gm_op].buf as usize].name,
                        self.context(&b.f.slots, e.site)
                    ),
                )
                .with_label("past the tensor's last element")
                .with_hint("shorten the last burst or use fewer bursts"),
            ));
        }
        let path = CopyPath::between(src_mem, dst_mem).unwrap_or(CopyPath::GmL1);
        let moved = nb * if load { dst_len } else { src_len };
        self.transfer(
            b,
            e,
            path,
            moved,
            &[
                Burst::strided(1, src, nb, src_len, ss, false),
                Burst::strided(0, dst, nb, dst_len, ds, true),
            ],
        )?;
        if load {
            self.stats.gm_read += nb * ln;
        } else {
            self.stats.gm_written += nb * ln;
        }
        if self.gm_log.is_some() {
            for i in 0..nb {
                let lo = gm_addr + i * gm_stride;
                self.log_gm(b, lo, lo + ln, !load, e.site);
            }
        }
        let mut tmp = std::mem::take(&mut self.scratch);
        tmp.clear();
        tmp.resize(dst_len as usize, 0);
        for i in 0..nb {
            let so = (src + i * ss) as usize;
            let d = (dst + i * ds) as usize;
            tmp[..ln as usize].copy_from_slice(&self.mem_ref(core, src_mem)[so..so + ln as usize]);
            tmp[ln as usize..].fill(0);
            self.mem_mut(core, dst_mem)[d..d + dst_len as usize].copy_from_slice(&tmp);
        }
        self.scratch = tmp;
        Ok(())
    }

    /// `copy_ub_to_cc`: f32 fractals from UB into L0C.
    pub(super) fn copy_ub_to_cc(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::CopyUbToCc {
            n_burst,
            len,
            src_gap,
            dst_gap,
            ..
        } = &e.instr
        else {
            return Ok(());
        };
        let fr = 1024u64;
        let (nb, ln) = (*n_burst as u64, *len as u64);
        let (sp, dp) = ((ln + *src_gap as u64) * fr, (ln + *dst_gap as u64) * fr);
        let ext = |p: u64| if nb == 0 { 0 } else { (nb - 1) * p + ln * fr };
        let (_, dst) = self.resolve(b, e, 0, ext(dp), mc.mem(Mem::L0c).align, "writes")?;
        let (_, src) = self.resolve(b, e, 1, ext(sp), mc.mem(Mem::Ub).align, "reads")?;
        let bytes = nb * ln * fr;
        // The reverse of copy_cc_to_ub, at the cost of its path.
        self.transfer(
            b,
            e,
            CopyPath::L0cUb,
            bytes,
            &[
                Burst::strided(1, src, nb, ln * fr, sp, false),
                Burst::strided(0, dst, nb, ln * fr, dp, true),
            ],
        )?;
        let [_, _, _, _, l0c, ub] = &mut self.local[core];
        for i in 0..nb {
            let (so, d) = ((src + i * sp) as usize, (dst + i * dp) as usize);
            let n = (ln * fr) as usize;
            l0c[d..d + n].copy_from_slice(&ub[so..so + n]);
        }
        Ok(())
    }

    /// `copy_cc_to_ub`: fractals from L0C to UB, converted to f16 and rectified if asked.
    pub(super) fn copy_cc_to_ub(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::CopyCcToUb {
            n_burst,
            len,
            src_gap,
            dst_gap,
            f16,
            relu,
            src_f16,
            ..
        } = &e.instr
        else {
            return Ok(());
        };
        let sty = if *src_f16 { DType::F16 } else { DType::F32 };
        let dty = if *f16 || *src_f16 {
            DType::F16
        } else {
            DType::F32
        };
        let (sf, df) = (256 * sty.size(), 256 * dty.size());
        let (nb, ln) = (*n_burst as u64, *len as u64);
        let src_ext = if nb == 0 {
            0
        } else {
            ((nb - 1) * (ln + *src_gap as u64) + ln) * sf
        };
        let dst_ext = if nb == 0 {
            0
        } else {
            ((nb - 1) * (ln + *dst_gap as u64) + ln) * df
        };
        let (_, dst) = self.resolve(b, e, 0, dst_ext, mc.mem(Mem::Ub).align, "writes")?;
        let (_, src) = self.resolve(b, e, 1, src_ext, sf.min(mc.mem(Mem::L0c).align), "reads")?;
        let bytes = nb * ln * sf;
        let (s, t) = self.copy_time(b, CopyPath::L0cUb, bytes);
        let tick = b.begin(Pipe::V);
        self.check(
            b,
            e,
            Pipe::V,
            tick,
            &[
                (1, src, src + src_ext, false),
                (0, dst, dst + dst_ext, true),
            ],
        )?;
        self.touch(b, e, 0, s, t);
        self.touch(b, e, 1, s, t);
        self.stats.path_bytes[CopyPath::L0cUb as usize] += bytes;
        let [_, _, _, _, l0c, ub] = &mut self.local[core];
        for i in 0..nb {
            for f in 0..ln {
                let so = src + ((i * (ln + *src_gap as u64)) + f) * sf;
                let d = dst + ((i * (ln + *dst_gap as u64)) + f) * df;
                for x in 0..256u64 {
                    let mut v = exec::load(l0c, (so + x * sty.size()) as usize, sty);
                    if *relu && v < 0.0 {
                        v = 0.0;
                    }
                    exec::store(ub, (d + x * dty.size()) as usize, dty, v);
                }
            }
        }
        Ok(())
    }
}
