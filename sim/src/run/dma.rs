//! The DMA instructions of the MTE pipes (and V's UB → UB copies): `copy`, whose bursts are
//! whole 32-byte blocks, and `copy_pad`, whose bursts are any number of whole GM elements at
//! any element of a GM tensor while their on-chip side stays on block boundaries (loads fill
//! the rest of a burst's blocks with zeros, stores write only the burst's bytes).

use super::{Block, Machine};
use crate::assemble::Exec;
use crate::diagnostic::{Diagnostic, Error};
use crate::isa::{CopyPath, Mem};

/// The shape of one DMA: `n` bursts, each reading `src_len` bytes and writing `dst_len` (the
/// bytes both have, then zeros), consecutive bursts `pitch.0` bytes apart in the source and
/// `pitch.1` in the destination, each end aligned as `align` says; the transfer is timed as
/// `timed` bytes.
pub(super) struct Bursts {
    pub n: u64,
    pub src_len: u64,
    pub dst_len: u64,
    pub pitch: (u64, u64),
    pub align: (u64, u64),
    pub timed: u64,
}

impl Machine<'_> {
    /// `copy`: bursts of `len` blocks with gaps of whole blocks.
    pub(super) fn copy(
        &mut self,
        b: &mut Block,
        e: &Exec,
        (n, len): (u64, u64),
        (src_gap, dst_gap): (u64, u64),
    ) -> Result<(), Error> {
        let mc = &self.k.machine;
        let dst_mem = self.k.bufs[e.ops[0].buf as usize].mem;
        let src_mem = self.k.bufs[e.ops[1].buf as usize].mem;
        let bursts = Bursts {
            n,
            src_len: len * 32,
            dst_len: len * 32,
            pitch: ((len + src_gap) * 32, (len + dst_gap) * 32),
            align: (mc.mem(src_mem).align, mc.mem(dst_mem).align),
            timed: n * len * 32,
        };
        self.dma(b, e, &bursts)
    }

    /// `copy_pad`: bursts of `bytes` bytes, strides in bytes; a load fills `blocks` blocks per
    /// burst, a store reads the burst's whole blocks and writes its bytes. The GM side needs
    /// the alignment of its elements and must stay inside the tensor's elements. Timed as the
    /// on-chip blocks.
    pub(super) fn copy_pad(
        &mut self,
        b: &mut Block,
        e: &Exec,
        (n, bytes, blocks): (u64, u64, u64),
        strides: (u64, u64),
    ) -> Result<(), Error> {
        let load = self.k.bufs[e.ops[0].buf as usize].mem != Mem::Gm;
        let gm_op = usize::from(load);
        let chip_mem = self.k.bufs[e.ops[1 - gm_op].buf as usize].mem;
        let chip_align = self.k.machine.mem(chip_mem).align;
        let gm = &self.k.bufs[e.ops[gm_op].buf as usize];
        let (gm_elem, gm_base, gm_exact) = (gm.elem, gm.base, gm.exact);
        let (src_len, dst_len, align) = if load {
            (bytes, blocks * 32, (gm_elem, chip_align))
        } else {
            (bytes.div_ceil(32) * 32, bytes, (chip_align, gm_elem))
        };
        let gm_stride = if load { strides.0 } else { strides.1 };
        // A negative offset is reported where the operands are resolved.
        let gm_start = b.f.offs[gm_op].max(0) as u64 + gm_base;
        let gm_end = if n == 0 || bytes == 0 {
            gm_start
        } else {
            gm_start + (n - 1) * gm_stride + bytes
        };
        if gm_end > gm_base + gm_exact {
            let site = &self.k.sites[e.site as usize];
            return Err(self.error(
                Diagnostic::new(
                    e.spans[gm_op],
                    format!(
                        "`{}` {} bytes {}..{} of `{}`, which has {gm_exact} bytes{}",
                        site.text,
                        if load { "reads" } else { "writes" },
                        gm_start - gm_base,
                        gm_end - gm_base,
                        gm.name,
                        self.context(&b.f.slots, e.site)
                    ),
                )
                .with_label("past the tensor's last element")
                .with_hint("shorten the last burst or use fewer bursts"),
            ));
        }
        let bursts = Bursts {
            n,
            src_len,
            dst_len,
            pitch: strides,
            align,
            timed: n * if load { dst_len } else { src_len },
        };
        self.dma(b, e, &bursts)
    }

    /// Checks, times and performs a DMA between the memories of operands 1 (source) and 0
    /// (destination).
    fn dma(&mut self, b: &mut Block, e: &Exec, t: &Bursts) -> Result<(), Error> {
        let core = b.core;
        let nb = t.n;
        let moved = t.src_len.min(t.dst_len);
        let extent = |pitch: u64, len: u64| {
            if nb == 0 || len == 0 {
                0
            } else {
                (nb - 1) * pitch + len
            }
        };
        let (src_ext, dst_ext) = (extent(t.pitch.0, t.src_len), extent(t.pitch.1, t.dst_len));
        let dst_mem = self.k.bufs[e.ops[0].buf as usize].mem;
        let src_mem = self.k.bufs[e.ops[1].buf as usize].mem;
        let (_, dst) = self.resolve(b, e, 0, dst_ext, t.align.1, "writes")?;
        let (_, src) = self.resolve(b, e, 1, src_ext, t.align.0, "reads")?;
        // The assembler accepted only paths that exist.
        let path = CopyPath::between(src_mem, dst_mem).unwrap_or(CopyPath::UbUb);
        let pipe = path.pipe();
        let (s, end) = self.copy_time(b, path, t.timed);
        let tick = b.begin(pipe);
        self.check(
            b,
            e,
            pipe,
            tick,
            &[
                (1, src, src + src_ext, false),
                (0, dst, dst + dst_ext, true),
            ],
        )?;
        self.touch(b, e, 0, s, end);
        self.touch(b, e, 1, s, end);
        self.stats.path_bytes[path as usize] += t.timed;
        if src_mem == Mem::Gm {
            self.stats.gm_read += nb * moved;
        }
        if dst_mem == Mem::Gm {
            self.stats.gm_written += nb * moved;
        }
        if self.gm_log.is_some() && (src_mem == Mem::Gm || dst_mem == Mem::Gm) {
            let (base, pitch, write) = if dst_mem == Mem::Gm {
                (dst, t.pitch.1, true)
            } else {
                (src, t.pitch.0, false)
            };
            for i in 0..nb {
                let lo = base + i * pitch;
                self.log_gm(b, lo, lo + moved, write, e.site);
            }
        }
        let mut tmp = std::mem::take(&mut self.scratch);
        tmp.clear();
        tmp.resize(t.dst_len as usize, 0);
        for i in 0..nb {
            let so = (src + i * t.pitch.0) as usize;
            let d = (dst + i * t.pitch.1) as usize;
            let m = moved as usize;
            tmp[..m].copy_from_slice(&self.mem_ref(core, src_mem)[so..so + m]);
            tmp[m..].fill(0);
            self.mem_mut(core, dst_mem)[d..d + t.dst_len as usize].copy_from_slice(&tmp);
        }
        self.scratch = tmp;
        Ok(())
    }
}
