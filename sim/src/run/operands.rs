//! Operands in on-chip memory and GM: resolving them to byte ranges inside their buffers,
//! checking alignment, bounds and GM bursts, and recording which bytes of each buffer were
//! touched.

use super::{Block, Burst, Machine};
use crate::assemble::Exec;
use crate::diagnostic::{Diagnostic, Error};
use crate::hazards::Access;
use crate::isa::*;

impl Machine<'_> {
    /// Resolves operand `i` to an absolute byte address, checking it lies in its buffer with
    /// `len` bytes and is aligned to `align`.
    pub(super) fn resolve(
        &self,
        b: &Block,
        e: &Exec,
        i: usize,
        len: u64,
        align: u64,
        verb: &str,
    ) -> Result<(Mem, u64), Error> {
        let op = &e.ops[i];
        let buf = &self.k.bufs[op.buf as usize];
        let site = &self.k.sites[e.site as usize];
        let addr_span = e.spans[i];
        let off = b.f.offs[i];
        if off < 0 || off as u64 + len > buf.size {
            return Err(self.error(
                Diagnostic::new(
                    addr_span,
                    format!(
                        "`{}` {verb} bytes {}..{} of `{}` ({} bytes in {}){}",
                        site.text,
                        off,
                        off + len as i64,
                        buf.name,
                        buf.size,
                        buf.mem.name(),
                        self.context(&b.f.slots, e.site)
                    ),
                )
                .with_label("outside the buffer")
                .with_secondary(buf.span, "declared here")
                .with_hint(
                    "shrink the transfer, the repeat count or the offset, or enlarge the buffer",
                ),
            ));
        }
        let addr = buf.base + off as u64;
        if !addr.is_multiple_of(align) {
            return Err(self.error(
                Diagnostic::new(
                    addr_span,
                    format!(
                        "misaligned operand: `{}` {verb} {} byte {addr} (`{}` + {off}), which is not a multiple of {align}{}",
                        site.text,
                        buf.mem.name(),
                        buf.name,
                        self.context(&b.f.slots, e.site)
                    ),
                )
                .with_label(format!("must be {align}-byte aligned"))
                .with_hint(format!("{} operands of this instruction start on {align}-byte boundaries", buf.mem.name())),
            ));
        }
        Ok((buf.mem, addr))
    }

    /// ` (`NAME` + lo..hi)`: the buffer of `mem` that byte `lo` falls in, for messages.
    pub(super) fn owner(&self, mem: Mem, lo: u64, hi: u64) -> String {
        self.k
            .bufs
            .iter()
            .filter(|x| x.mem == mem && x.base <= lo && lo < x.base + x.size)
            .map(|x| format!(" (`{}` + {}..{})", x.name, lo - x.base, hi - x.base))
            .next()
            .unwrap_or_default()
    }

    pub(super) fn touch(&mut self, b: &Block, e: &Exec, i: usize, start: u64, end: u64) {
        let buf = e.ops[i].buf as usize;
        let slot = &mut self.stats.touch[b.core][buf];
        *slot = Some(match *slot {
            None => (start, end),
            Some((s, t)) => (s.min(start), t.max(end)),
        });
    }

    pub(super) fn check(
        &self,
        b: &mut Block,
        e: &Exec,
        pipe: Pipe,
        tick: u32,
        accesses: &[(usize, u64, u64, bool)],
    ) -> Result<(), Error> {
        let whole: Vec<Burst> = accesses
            .iter()
            .map(|&(i, lo, hi, write)| Burst {
                op: i,
                lo,
                hi,
                period: 0,
                len: hi - lo,
                write,
            })
            .collect();
        self.check_bursts(b, e, pipe, tick, &whole)
    }

    /// `check` for accesses that may be strided: bursts of `len` bytes every `period`.
    pub(super) fn check_bursts(
        &self,
        b: &mut Block,
        e: &Exec,
        pipe: Pipe,
        tick: u32,
        accesses: &[Burst],
    ) -> Result<(), Error> {
        for &Burst {
            op: i,
            lo,
            hi,
            period,
            len,
            write,
        } in accesses
        {
            let a = Access {
                lo,
                hi,
                period,
                len,
                pipe,
                tick,
                write,
                site: e.site,
            };
            if let Some(race) = b.hazards.access(self.k.bufs[e.ops[i].buf as usize].mem, a) {
                let mem = race.mem;
                let s1 = &self.k.sites[race.first.site as usize];
                let s2 = &self.k.sites[race.second.site as usize];
                let (lo, hi) = (race.first.lo.max(lo), race.first.hi.min(hi));
                let owner = self.owner(mem, lo, hi);
                let verb = |w: bool| if w { "writes" } else { "reads" };
                return Err(self.error(
                    Diagnostic::new(
                        s2.span,
                        format!(
                            "race on {} bytes {lo}..{hi}{owner}: `{}` (line {}, pipe {}) {} them and `{}` (line {}, pipe {}) {} them with no flag or barrier ordering the two{}",
                            mem.name(),
                            s1.text,
                            s1.line,
                            race.first.pipe.name(),
                            verb(race.first.write),
                            s2.text,
                            s2.line,
                            race.second.pipe.name(),
                            verb(race.second.write),
                            self.context(&b.f.slots, e.site)
                        ),
                    )
                    .with_label(format!("pipe {} {} here", race.second.pipe.name(), verb(race.second.write)))
                    .with_secondary(s1.span, format!("pipe {} {} here", race.first.pipe.name(), verb(race.first.write)))
                    .with_hint(format!(
                        "after the first put `set_flag {}, {}, EVENT` and before the second `wait_flag {}, {}, EVENT`",
                        race.first.pipe.name(),
                        race.second.pipe.name(),
                        race.first.pipe.name(),
                        race.second.pipe.name()
                    )),
                ));
            }
        }
        Ok(())
    }
}
