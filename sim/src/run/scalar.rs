//! The scalar unit's instructions that compute or touch memory: arithmetic into a register, and
//! `ld`, `st` and `count` on UB.

use super::{wrap32, Block, Machine};
use crate::assemble::Exec;
use crate::diagnostic::{Diagnostic, Error};
use crate::exec;
use crate::isa::*;

impl Machine<'_> {
    /// A scalar binary operation into an integer or float register.
    pub(super) fn sbin(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let Instr::SBin { op, dst, .. } = &e.instr else {
            return Ok(());
        };
        match dst {
            Reg::S(r) => {
                let (x, y) = (self.sint(b, e.scalars[0]), self.sint(b, e.scalars[1]));
                let v = match op {
                    SOp::Add => x.wrapping_add(y),
                    SOp::Sub => x.wrapping_sub(y),
                    SOp::Mul => x.wrapping_mul(y),
                    SOp::Div => x.checked_div(y).ok_or_else(|| {
                        let site = &self.k.sites[e.site as usize];
                        self.error(
                            Diagnostic::new(
                                site.span,
                                format!(
                                    "`{}` divides by zero{}",
                                    site.text,
                                    self.context(&b.f.slots, e.site)
                                ),
                            )
                            .with_hint("guard the division with `if`"),
                        )
                    })?,
                    SOp::Min => x.min(y),
                    SOp::Max => x.max(y),
                };
                b.sregs[*r as usize] = wrap32(v);
            }
            Reg::F(r) => {
                let x = self.sval(b, e.scalars[0]).0 as f32;
                let y = self.sval(b, e.scalars[1]).0 as f32;
                b.fregs[*r as usize] = match op {
                    SOp::Add => x + y,
                    SOp::Sub => x - y,
                    SOp::Mul => x * y,
                    SOp::Div => x / y,
                    SOp::Min => x.min(y),
                    SOp::Max => x.max(y),
                };
            }
        }
        Ok(())
    }

    /// `ld`: one element from UB into a register.
    pub(super) fn ld(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::Ld { ty, dst, .. } = &e.instr else {
            return Ok(());
        };
        let es = ty.size();
        let (mem, addr) = self.resolve(b, e, 0, es, es, "reads")?;
        let (s, t) = b.timing.scalar(mc.scalar_mem, 0);
        let tick = b.begin(Pipe::S);
        self.check(b, e, Pipe::S, tick, &[(0, addr, addr + es, false)])?;
        self.touch(b, e, 0, s, t);
        let v = exec::load(self.mem_ref(core, mem), addr as usize, *ty);
        match dst {
            Reg::S(r) => b.sregs[*r as usize] = v as i64,
            Reg::F(r) => b.fregs[*r as usize] = v as f32,
        }
        Ok(())
    }

    /// `st`: a scalar into one element of UB.
    pub(super) fn st(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::St { ty, .. } = &e.instr else {
            return Ok(());
        };
        let es = ty.size();
        let (mem, addr) = self.resolve(b, e, 0, es, es, "writes")?;
        let (s, t) = b.timing.scalar(mc.scalar_mem, 0);
        let tick = b.begin(Pipe::S);
        self.check(b, e, Pipe::S, tick, &[(0, addr, addr + es, true)])?;
        self.touch(b, e, 0, s, t);
        let v = self.sval(b, e.scalars[0]).0;
        exec::store(self.mem_mut(core, mem), addr as usize, *ty, v);
        Ok(())
    }

    /// `count`: the set bits at an address of UB into a register.
    pub(super) fn count(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let Instr::Count { dst, bits, .. } = &e.instr else {
            return Ok(());
        };
        let len = (*bits as u64).div_ceil(8);
        let (mem, addr) = self.resolve(b, e, 0, len, 1, "reads")?;
        let (s, t) = b.timing.scalar(mc.scalar_mem, 0);
        let tick = b.begin(Pipe::S);
        self.check(b, e, Pipe::S, tick, &[(0, addr, addr + len, false)])?;
        self.touch(b, e, 0, s, t);
        let m = self.mem_ref(core, mem);
        let mut n = 0i64;
        for bit in 0..*bits as usize {
            n += (m[addr as usize + bit / 8] >> (bit % 8) & 1) as i64;
        }
        match dst {
            Reg::S(r) => b.sregs[*r as usize] = n,
            Reg::F(r) => b.fregs[*r as usize] = n as f32,
        }
        Ok(())
    }
}
