//! The Vector unit's instructions on UB: element-wise binary, vector-scalar, unary, dup,
//! compare, select and reductions over repeats of 256 bytes with block and repeat strides and
//! the vector mask; and `vbrcb`, which broadcasts elements into whole blocks.

use super::{Block, Machine};
use crate::assemble::Exec;
use crate::diagnostic::Error;
use crate::exec;
use crate::isa::*;

impl Machine<'_> {
    /// All same-typed vector instructions: binary, scalar, unary, dup, compare, select, reduce.
    pub(super) fn vector(
        &mut self,
        b: &mut Block,
        e: &Exec,
        ty: DType,
        cfg: &VecCfg,
    ) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let es = ty.size() as usize;
        let lanes = 256 / es;
        let mask = b.f.mask;
        let ub_align = mc.mem(Mem::Ub).align;
        let repeat = cfg.repeat as usize;
        let slow = matches!(
            e.instr,
            Instr::VUn {
                op: VUnOp::Exp | VUnOp::Ln | VUnOp::Rec | VUnOp::Rsqrt | VUnOp::Sqrt,
                ..
            } | Instr::VBin {
                op: VBinOp::Div,
                ..
            }
        );
        let per = if slow {
            mc.vector_per_repeat_slow
        } else {
            mc.vector_per_repeat
        };
        let cost = mc.vector_startup + per * cfg.repeat as u64;
        // Operand extents and addresses.
        let n_ops = e.ops.len();
        let mut addrs = [0usize; 4];
        let mut accesses = [(0usize, 0u64, 0u64, false); 4];
        for i in 0..e.ops.len() {
            let (ext, align, write) = match (&e.instr, i) {
                (Instr::VCmp { .. }, 0) => ((repeat * lanes).div_ceil(8) as u64, ub_align, true),
                (Instr::VSel { .. }, 3) => ((repeat * lanes).div_ceil(8) as u64, ub_align, false),
                (Instr::VRed { .. }, 0) => (
                    if exec::last_lane(mask, lanes).is_some() {
                        ((repeat - 1) * cfg.rep[0] as usize * es + es) as u64
                    } else {
                        0
                    },
                    es as u64,
                    true,
                ),
                (Instr::VCmp { .. }, i) => (
                    Self::vec_extent(mask, lanes, es, cfg, i - 1),
                    ub_align,
                    false,
                ),
                (_, i) => (Self::vec_extent(mask, lanes, es, cfg, i), ub_align, i == 0),
            };
            let (_, a) =
                self.resolve(b, e, i, ext, align, if write { "writes" } else { "reads" })?;
            addrs[i] = a as usize;
            accesses[i] = (i, a, a + ext, write);
        }
        let mut accesses = accesses[..n_ops].to_vec();
        // Reads before the write, so an in-place operation is not reported against itself.
        accesses.rotate_left(1);
        if matches!(e.instr, Instr::VRed { acc: true, .. }) {
            // The destination's old values are read first.
            let (_, lo, hi, _) = accesses[n_ops - 1];
            accesses.insert(0, (0, lo, hi, false));
        }
        let (s, t) = b.dispatch(Pipe::V, cost, 0);
        let tick = b.begin(Pipe::V);
        self.check(b, e, Pipe::V, tick, &accesses)?;
        for i in 0..n_ops {
            self.touch(b, e, i, s, t);
        }
        let scalar = b.f.scalar.map(|sv| exec::round_to(self.sval(b, sv).0, ty));
        let ub = &mut self.local[core][Mem::Ub as usize];
        if exec::contiguous_full(&e.instr, ty, mask, cfg)
            && exec::fast_vector(&e.instr, ty, ub, &addrs[..n_ops], cfg, scalar)
        {
            return Ok(());
        }
        // A compare's strides describe its two sources only; its destination is a bit string.
        let shift = usize::from(matches!(e.instr, Instr::VCmp { .. }));
        let at = |i: usize, r: usize, l: usize| {
            exec::lane_addr(addrs[i], r, l, es, cfg.blk[i - shift], cfg.rep[i - shift])
        };
        match &e.instr {
            Instr::VCmp { op, .. } => {
                // Inactive lanes write 0 bits; each repeat's bits follow the previous repeat's.
                for r in 0..repeat {
                    for l in 0..lanes {
                        let bit = r * lanes + l;
                        let on = exec::lane_on(mask, l)
                            && exec::compare(
                                *op,
                                exec::load(ub, at(1, r, l), ty),
                                exec::load(ub, at(2, r, l), ty),
                            );
                        let byte = &mut ub[addrs[0] + bit / 8];
                        if on {
                            *byte |= 1 << (bit % 8);
                        } else {
                            *byte &= !(1 << (bit % 8));
                        }
                    }
                }
            }
            Instr::VRed { op, acc: fold, .. } => {
                for r in 0..repeat {
                    let at_dst = addrs[0] + r * cfg.rep[0] as usize * es;
                    let old = fold.then(|| exec::load(ub, at_dst, ty));
                    let mut acc: Option<f64> = old;
                    let mut sum = old.unwrap_or(0.0);
                    for l in 0..lanes {
                        if !exec::lane_on(mask, l) {
                            continue;
                        }
                        let v = exec::load(ub, at(1, r, l), ty);
                        match op {
                            // Sums accumulate in f32 (exactly for i32 in i64) and round once.
                            VRedOp::Cadd => {
                                sum = if ty == DType::I32 {
                                    sum + v
                                } else {
                                    (sum as f32 + v as f32) as f64
                                }
                            }
                            VRedOp::Cmax => acc = Some(acc.map_or(v, |a| a.max(v))),
                            VRedOp::Cmin => acc = Some(acc.map_or(v, |a| a.min(v))),
                        }
                    }
                    if exec::last_lane(mask, lanes).is_none() {
                        continue;
                    }
                    let result = match op {
                        VRedOp::Cadd if ty == DType::I32 => (sum as i64 as i32) as f64,
                        VRedOp::Cadd => sum,
                        _ => acc.unwrap_or(0.0),
                    };
                    exec::store(ub, at_dst, ty, result);
                }
            }
            instr => {
                let mut out = [0f64; 128];
                for r in 0..repeat {
                    for (l, slot) in out.iter_mut().enumerate().take(lanes) {
                        if !exec::lane_on(mask, l) {
                            continue;
                        }
                        *slot = match instr {
                            Instr::VBin { op, .. } => exec::binary(
                                *op,
                                ty,
                                exec::load(ub, at(1, r, l), ty),
                                exec::load(ub, at(2, r, l), ty),
                            ),
                            Instr::VScalar { op, .. } => {
                                let x = exec::load(ub, at(1, r, l), ty);
                                let y = scalar.unwrap_or(0.0);
                                let bop = match op {
                                    VScalarOp::Adds => VBinOp::Add,
                                    VScalarOp::Muls => VBinOp::Mul,
                                    VScalarOp::Maxs => VBinOp::Max,
                                };
                                exec::binary(bop, ty, x, y)
                            }
                            Instr::VUn { op, .. } => {
                                exec::unary(*op, ty, exec::load(ub, at(1, r, l), ty))
                            }
                            Instr::VDup { .. } => scalar.unwrap_or(0.0),
                            Instr::VSel { .. } => {
                                let bit = r * lanes + l;
                                let on = ub[addrs[3] + bit / 8] >> (bit % 8) & 1 == 1;
                                exec::load(ub, at(if on { 1 } else { 2 }, r, l), ty)
                            }
                            _ => 0.0,
                        };
                    }
                    for (l, &v) in out.iter().enumerate().take(lanes) {
                        if exec::lane_on(mask, l) {
                            exec::store(ub, at(0, r, l), ty, v);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// `vbrcb`: element `8r + k` of the source fills block `k` of repeat `r` of the
    /// destination, whatever the mask.
    pub(super) fn broadcast(
        &mut self,
        b: &mut Block,
        e: &Exec,
        ty: DType,
        cfg: &VecCfg,
    ) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let es = ty.size() as usize;
        let per_block = 32 / es;
        let repeat = cfg.repeat as usize;
        let ub_align = mc.mem(Mem::Ub).align;
        let (blk, rep) = (cfg.blk[0] as usize, cfg.rep[0] as usize);
        let dst_ext = ((repeat - 1) * rep + 7 * blk) * 32 + 32;
        let src_ext = repeat * 8 * es;
        let (_, dst) = self.resolve(b, e, 0, dst_ext as u64, ub_align, "writes")?;
        let (_, src) = self.resolve(b, e, 1, src_ext as u64, es as u64, "reads")?;
        let cost = mc.vector_startup + mc.vector_per_repeat * cfg.repeat as u64;
        let (s, t) = b.dispatch(Pipe::V, cost, 0);
        let tick = b.begin(Pipe::V);
        self.check(
            b,
            e,
            Pipe::V,
            tick,
            &[
                (1, src, src + src_ext as u64, false),
                (0, dst, dst + dst_ext as u64, true),
            ],
        )?;
        self.touch(b, e, 0, s, t);
        self.touch(b, e, 1, s, t);
        let ub = &mut self.local[core][Mem::Ub as usize];
        let (dst, src) = (dst as usize, src as usize);
        for r in 0..repeat {
            let values: Vec<f64> = (0..8)
                .map(|k| exec::load(ub, src + (8 * r + k) * es, ty))
                .collect();
            for (k, &v) in values.iter().enumerate() {
                let block = dst + (r * rep + k * blk) * 32;
                for l in 0..per_block {
                    exec::store(ub, block + l * es, ty, v);
                }
            }
        }
        Ok(())
    }

    /// `vconv`: each active lane converted from one element type to another.
    pub(super) fn vconv(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::VConv { from, to, cfg, .. } = &e.instr else {
            return Ok(());
        };
        let lanes = 256 / from.size().max(to.size()) as usize;
        let mask = b.f.mask;
        let ub_align = mc.mem(Mem::Ub).align;
        let de = Self::vec_extent(mask, lanes, to.size() as usize, cfg, 0);
        let se = Self::vec_extent(mask, lanes, from.size() as usize, cfg, 1);
        let (_, dst) = self.resolve(b, e, 0, de, ub_align, "writes")?;
        let (_, src) = self.resolve(b, e, 1, se, ub_align, "reads")?;
        let cost = mc.vector_startup + mc.vector_per_repeat * cfg.repeat as u64;
        let (s, t) = b.dispatch(Pipe::V, cost, 0);
        let tick = b.begin(Pipe::V);
        self.check(
            b,
            e,
            Pipe::V,
            tick,
            &[(1, src, src + se, false), (0, dst, dst + de, true)],
        )?;
        self.touch(b, e, 0, s, t);
        self.touch(b, e, 1, s, t);
        let ub = &mut self.local[core][Mem::Ub as usize];
        let mut vals = Vec::with_capacity(lanes);
        for r in 0..cfg.repeat as usize {
            vals.clear();
            for l in 0..lanes {
                if exec::lane_on(mask, l) {
                    let sa = exec::lane_addr(
                        src as usize,
                        r,
                        l,
                        from.size() as usize,
                        cfg.blk[1],
                        cfg.rep[1],
                    );
                    vals.push((l, exec::load(ub, sa, *from)));
                }
            }
            for &(l, v) in &vals {
                let da = exec::lane_addr(
                    dst as usize,
                    r,
                    l,
                    to.size() as usize,
                    cfg.blk[0],
                    cfg.rep[0],
                );
                exec::store(ub, da, *to, v);
            }
        }
        Ok(())
    }
}
