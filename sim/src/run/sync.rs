//! What orders work across pipes and blocks: `set_flag` / `wait_flag`, `pipe_barrier`,
//! `sync_all` (every block arrives with its pipes drained, all leave together), the messages
//! of deadlocks, and the race check between blocks' GM accesses, epoch by epoch.

use super::{flag_index, Block, FlagToken, GmAccess, Machine};
use crate::assemble::{Exec, Op};
use crate::diagnostic::{Diagnostic, Error};
use crate::isa::*;

impl Machine<'_> {
    /// The block reaches a `sync_all`: every pipe drains first.
    pub(super) fn arrive(&mut self, b: &mut Block) -> Result<(), Error> {
        self.pump(b)?;
        if b.pending() {
            return Err(self.deadlock(b, None));
        }
        let drained = b.timing.free.iter().copied().max().unwrap_or(0);
        b.arrived = Some(drained.max(b.timing.issue));
        Ok(())
    }

    /// No block can run: every block still running waits at a `sync_all`. When all blocks of
    /// the kernel are there (each has a core of its own), they leave together once the last
    /// has arrived; a block that ended instead leaves the others waiting forever.
    pub(super) fn release(&mut self, running: &mut [Option<Block>]) -> Result<(), Error> {
        let waiting: Vec<&mut Block> = running.iter_mut().flatten().collect();
        if waiting.len() < self.k.program.blockdim as usize {
            let ids: Vec<usize> = waiting.iter().map(|b| b.id).collect();
            let ended = (0..self.k.program.blockdim as usize)
                .find(|id| !ids.contains(id))
                .unwrap_or(0);
            let site = self
                .k
                .code
                .iter()
                .find_map(|op| match op {
                    Op::Exec(e) if matches!(e.instr, Instr::SyncAll) => {
                        Some(&self.k.sites[e.site as usize])
                    }
                    _ => None,
                })
                .unwrap_or(&self.k.sites[0]);
            return Err(self.error(
                Diagnostic::new(
                    site.span,
                    format!(
                        "deadlock: block {} waits at a `sync_all` that block {ended} ended without reaching",
                        ids[0]
                    ),
                )
                .with_hint("every block must pass the same number of `sync_all`s"),
            ));
        }
        let sync = self.k.machine.sync_cost;
        let at = waiting.iter().filter_map(|b| b.arrived).max().unwrap_or(0);
        for b in waiting {
            b.arrived = None;
            b.epoch += 1;
            b.timing.scalar(sync, at);
            for p in Pipe::ALL {
                b.hazards.barrier(p);
            }
            b.hazards.begin(Pipe::S);
        }
        Ok(())
    }

    /// The flag and barrier instructions, on S or on their pipe.
    pub(super) fn sync(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let sync = self.k.machine.sync_cost;
        match &e.instr {
            Instr::SetFlag { src, dst, event } => {
                let (_, end) = if *src == Pipe::S {
                    b.timing.scalar(sync, 0)
                } else {
                    b.dispatch(*src, sync, 0)
                };
                b.begin(*src);
                let clock = b.hazards.snapshot(*src);
                b.flags[flag_index(*src, *dst, *event)].push_back(FlagToken { time: end, clock });
            }
            Instr::WaitFlag { src, dst, event } => {
                let i = flag_index(*src, *dst, *event);
                if b.flags[i].is_empty() {
                    // Only S runs into an unset flag here; the queues hold other waits back.
                    self.pump(b)?;
                }
                let Some(token) = b.flags[i].pop_front() else {
                    return Err(self.wait_deadlock(b, e, ""));
                };
                if *dst == Pipe::S {
                    b.timing.scalar(sync, token.time);
                } else {
                    b.dispatch(*dst, sync, token.time);
                }
                b.begin(*dst);
                b.hazards.acquire(*dst, &token.clock);
            }
            Instr::Barrier { pipe } => {
                self.pump(b)?;
                let pipes: Vec<Pipe> = match pipe {
                    Some(p) => vec![*p],
                    None => Pipe::ALL.to_vec(),
                };
                if pipes.iter().any(|p| !b.queues[*p as usize].is_empty()) {
                    return Err(self.deadlock(b, None));
                }
                let drained = pipes
                    .iter()
                    .map(|p| b.timing.free[*p as usize])
                    .max()
                    .unwrap_or(0);
                b.timing.scalar(sync, drained);
                for p in pipes {
                    b.hazards.barrier(p);
                }
                b.hazards.begin(Pipe::S);
            }
            _ => {}
        }
        Ok(())
    }

    /// Nothing can run any more while work is left: names the wait that blocks it (a queue
    /// head waiting on a flag) and, when S is stuck on a full queue, the instruction it holds.
    pub(super) fn deadlock(&self, b: &Block, stuck: Option<(&Exec, Pipe)>) -> Error {
        let k = self.k;
        let head = b.queues[1..].iter().find_map(|q| {
            q.front().and_then(|p| match &k.code[p.pc as usize] {
                Op::Exec(e) if matches!(e.instr, Instr::WaitFlag { .. }) => Some((e, p)),
                _ => None,
            })
        });
        let Some((e, p)) = head else {
            // Queues drain unless a wait blocks them, so a head wait always exists here.
            let site = &k.sites[0];
            return self.error(Diagnostic::new(site.span, "deadlock".to_string()));
        };
        let extra = match stuck {
            Some((s, pipe)) => {
                let site = &k.sites[s.site as usize];
                format!(
                    "; the scalar unit cannot issue `{}` (line {}) because pipe {}'s queue is full (depth {})",
                    site.text,
                    site.line,
                    pipe.name(),
                    k.machine.queue_depth
                )
            }
            None => String::new(),
        };
        self.wait_message(b, e, &p.frame.slots, &extra)
    }

    pub(super) fn wait_deadlock(&self, b: &Block, e: &Exec, extra: &str) -> Error {
        self.wait_message(b, e, &b.slots, extra)
    }

    pub(super) fn wait_message(&self, b: &Block, e: &Exec, slots: &[i64], extra: &str) -> Error {
        let k = self.k;
        let Instr::WaitFlag { src, dst, event } = e.instr else {
            return self.error(Diagnostic::new(k.sites[e.site as usize].span, "deadlock"));
        };
        let site = &k.sites[e.site as usize];
        // A matching set that was issued but is stuck behind another wait.
        let queued = b.queues[src as usize]
            .iter()
            .find_map(|p| match &k.code[p.pc as usize] {
                Op::Exec(x) => match x.instr {
                    Instr::SetFlag {
                        src: s2,
                        dst: d2,
                        event: e2,
                    } if (s2, d2, e2) == (src, dst, event) => Some(&k.sites[x.site as usize]),
                    _ => None,
                },
                _ => None,
            });
        let why = match queued {
            Some(set) => format!(
                "whose `{}` (line {}) is queued on pipe {} behind a wait that never ends",
                set.text,
                set.line,
                src.name()
            ),
            None => format!(
                "which no `set_flag {}, {}, {}` sets",
                src.name(),
                dst.name(),
                event
            ),
        };
        let pending: Vec<String> = (0..8u8)
            .filter(|ev| !b.flags[flag_index(src, dst, *ev)].is_empty())
            .map(|ev| format!("event {ev}"))
            .collect();
        let hint = if pending.is_empty() {
            format!(
                "set the flag on pipe {} (for ping-pong loops, set it once before the loop)",
                src.name()
            )
        } else {
            format!(
                "{}->{} {} is set and not waited for: did you mean that id?",
                src.name(),
                dst.name(),
                pending.join(", ")
            )
        };
        self.error(
            Diagnostic::new(
                site.span,
                format!(
                    "deadlock: `{}` (line {}) waits on pipe {} for event {} from pipe {}, {why}; pipe {} would stall forever{extra}{}",
                    site.text,
                    site.line,
                    dst.name(),
                    event,
                    src.name(),
                    dst.name(),
                    self.context(slots, e.site)
                ),
            )
            .with_label("waits forever")
            .with_hint(hint),
        )
    }

    /// GM accesses of different blocks to overlapping bytes, one a write: nothing orders
    /// blocks (there is no cross-core synchronisation), so each such pair is a race.
    pub(super) fn cross_block_races(&mut self) -> Result<(), Error> {
        let Some(mut log) = self.gm_log.take() else {
            return Ok(());
        };
        log.sort_unstable_by_key(|a| (a.epoch, a.lo, a.block, a.hi));
        let mut active: Vec<GmAccess> = Vec::new();
        for a in log {
            active.retain(|x| x.epoch == a.epoch && x.hi > a.lo);
            if let Some(x) = active
                .iter()
                .find(|x| x.block != a.block && (x.write || a.write))
            {
                let (lo, hi) = (a.lo, x.hi.min(a.hi));
                let (s1, s2) = (
                    &self.k.sites[x.site as usize],
                    &self.k.sites[a.site as usize],
                );
                let owner = self.owner(Mem::Gm, lo, hi);
                let verb = |w: bool| if w { "writes" } else { "reads" };
                return Err(self.error(
                    Diagnostic::new(
                        s2.span,
                        format!(
                            "race on GM bytes {lo}..{hi}{owner} between blocks: `{}` (line {}) of block {} {} them and `{}` (line {}) of block {} {} them, and nothing orders two blocks",
                            s1.text,
                            s1.line,
                            x.block,
                            verb(x.write),
                            s2.text,
                            s2.line,
                            a.block,
                            verb(a.write),
                        ),
                    )
                    .with_label(format!("block {} {} here", a.block, verb(a.write)))
                    .with_secondary(s1.span, format!("block {} {} here", x.block, verb(x.write)))
                    .with_hint("give each block its own part of every tensor it writes, or separate the two with `sync_all`"),
                ));
            }
            active.push(a);
        }
        Ok(())
    }

    /// Notes a GM access of the current block for the cross-block race check.
    pub(super) fn log_gm(&mut self, b: &Block, lo: u64, hi: u64, write: bool, site: u32) {
        let Some(log) = &mut self.gm_log else {
            return;
        };
        if lo == hi {
            return;
        }
        let block = b.id as u32;
        if let Some(last) = log.last_mut() {
            if last.block == block && last.write == write && last.hi == lo && last.epoch == b.epoch
            {
                last.hi = hi;
                return;
            }
        }
        log.push(GmAccess {
            lo,
            hi,
            write,
            block,
            site,
            epoch: b.epoch,
        });
    }
}
