//! The DMA instructions of the MTE pipes (and V's UB → UB copies): `copy`, whose bursts are
//! whole 32-byte blocks, and `copy_pad`, whose bursts are any number of bytes at any GM byte
//! address while their UB side stays on block boundaries.

use super::{Block, Machine};
use crate::assemble::Exec;
use crate::diagnostic::Error;
use crate::isa::{CopyPath, Mem};

/// The shape of one DMA: `n` bursts of `len` bytes, consecutive bursts `pitch.0` bytes apart
/// in the source and `pitch.1` in the destination, each end aligned as `align` says; the
/// transfer is timed as `timed` bytes.
pub(super) struct Bursts {
    pub n: u64,
    pub len: u64,
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
            len: len * 32,
            pitch: ((len + src_gap) * 32, (len + dst_gap) * 32),
            align: (mc.mem(src_mem).align, mc.mem(dst_mem).align),
            timed: n * len * 32,
        };
        self.dma(b, e, &bursts)
    }

    /// `copy_pad`: bursts of `bytes` bytes; the GM side at any byte address with gaps in bytes,
    /// the UB side padded to whole blocks with gaps in blocks. Timed as the padded blocks.
    pub(super) fn copy_pad(
        &mut self,
        b: &mut Block,
        e: &Exec,
        n: u64,
        bytes: u64,
        (src_gap, dst_gap): (u64, u64),
    ) -> Result<(), Error> {
        let ub_align = self.k.machine.mem(Mem::Ub).align;
        let padded = bytes.div_ceil(32) * 32;
        let to_gm = self.k.bufs[e.ops[0].buf as usize].mem == Mem::Gm;
        let (pitch, align) = if to_gm {
            ((padded + src_gap * 32, bytes + dst_gap), (ub_align, 1))
        } else {
            ((bytes + src_gap, padded + dst_gap * 32), (1, ub_align))
        };
        let bursts = Bursts {
            n,
            len: bytes,
            pitch,
            align,
            timed: n * padded,
        };
        self.dma(b, e, &bursts)
    }

    /// Checks, times and performs a DMA between the memories of operands 1 (source) and 0
    /// (destination).
    fn dma(&mut self, b: &mut Block, e: &Exec, t: &Bursts) -> Result<(), Error> {
        let core = b.core;
        let (nb, ln) = (t.n, t.len);
        let extent = |pitch: u64| if nb == 0 { 0 } else { (nb - 1) * pitch + ln };
        let (src_ext, dst_ext) = (extent(t.pitch.0), extent(t.pitch.1));
        let dst_mem = self.k.bufs[e.ops[0].buf as usize].mem;
        let src_mem = self.k.bufs[e.ops[1].buf as usize].mem;
        let (_, dst) = self.resolve(b, e, 0, dst_ext, t.align.1, "writes")?;
        let (_, src) = self.resolve(b, e, 1, src_ext, t.align.0, "reads")?;
        // The assembler accepted only paths that exist.
        let path = CopyPath::between(src_mem, dst_mem).unwrap_or(CopyPath::UbUb);
        let bytes = nb * ln;
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
        self.stats.path_bytes[path as usize] += bytes;
        if src_mem == Mem::Gm {
            self.stats.gm_read += bytes;
        }
        if dst_mem == Mem::Gm {
            self.stats.gm_written += bytes;
        }
        if self.gm_log.is_some() && (src_mem == Mem::Gm || dst_mem == Mem::Gm) {
            let (base, pitch, write) = if dst_mem == Mem::Gm {
                (dst, t.pitch.1, true)
            } else {
                (src, t.pitch.0, false)
            };
            for i in 0..nb {
                let lo = base + i * pitch;
                self.log_gm(b, lo, lo + ln, write, e.site);
            }
        }
        let mut tmp = std::mem::take(&mut self.scratch);
        tmp.resize(ln as usize, 0);
        for i in 0..nb {
            let so = (src + i * t.pitch.0) as usize;
            let d = (dst + i * t.pitch.1) as usize;
            tmp.copy_from_slice(&self.mem_ref(core, src_mem)[so..so + ln as usize]);
            self.mem_mut(core, dst_mem)[d..d + ln as usize].copy_from_slice(&tmp);
        }
        self.scratch = tmp;
        Ok(())
    }
}
