//! Race detection by happens-before between pipes, with vector clocks.
//!
//! Each pipe has a clock vector; an instruction on pipe P ticks P's own entry. Issuing from the
//! scalar pipe orders everything S had seen at the issue before the issued instruction; `set_flag` publishes
//! the setter's clock with the flag and the matching `wait_flag` joins it; `pipe_barrier` joins
//! the drained pipes' clocks into S. Two accesses from different pipes to overlapping bytes, at
//! least one a write, race unless the earlier one's tick is covered by the later one's clock.
//! Accesses of one pipe are ordered because each pipe executes in order.

use std::collections::BTreeMap;

use crate::isa::{Mem, Pipe};

pub(crate) type Clock = [u32; Pipe::COUNT];

/// One recorded access: the bytes `lo..hi`, or with `period > 0` the bursts of `len` bytes
/// starting every `period` bytes from `lo` up to `hi` (a strided copy, whose gaps it does not
/// touch).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Access {
    pub lo: u64,
    pub hi: u64,
    pub period: u64,
    pub len: u64,
    pub pipe: Pipe,
    pub tick: u32,
    pub write: bool,
    pub site: u32,
}

/// Two accesses that race: the earlier one and the later one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Race {
    pub first: Access,
    pub second: Access,
    pub mem: Mem,
}

/// The pipes whose instructions can access a memory.
fn accessors(mem: Mem) -> &'static [Pipe] {
    match mem {
        Mem::Gm => &[Pipe::Mte2, Pipe::Mte3],
        Mem::L1 => &[Pipe::Mte1, Pipe::Mte2, Pipe::Mte3],
        Mem::L0a | Mem::L0b => &[Pipe::Mte1, Pipe::M],
        Mem::L0c => &[Pipe::M, Pipe::V],
        Mem::Ub => &[Pipe::S, Pipe::V, Pipe::Mte2, Pipe::Mte3],
    }
}

impl Access {
    fn strided(&self) -> bool {
        self.period > self.len
    }

    fn bursts(&self) -> u64 {
        if self.strided() {
            (self.hi - self.lo - self.len) / self.period + 1
        } else {
            1
        }
    }

    /// Whether some byte of `x..y` is one this access touches.
    fn touches(&self, x: u64, y: u64) -> bool {
        if x >= y || self.hi <= x || y <= self.lo {
            return false;
        }
        if !self.strided() {
            return true;
        }
        // Bursts i with lo + i·period < y and lo + i·period + len > x.
        let first = if x >= self.lo + self.len {
            (x - self.lo - self.len) / self.period + 1
        } else {
            0
        };
        let last = ((y - 1 - self.lo) / self.period).min(self.bursts() - 1);
        first <= last
    }

    /// Whether the two accesses share a byte.
    fn overlaps(&self, other: &Access) -> bool {
        if !(self.lo < other.hi && other.lo < self.hi) {
            return false;
        }
        let (few, many) = if self.bursts() <= other.bursts() {
            (self, other)
        } else {
            (other, self)
        };
        if !few.strided() {
            return many.touches(few.lo, few.hi);
        }
        (0..few.bursts()).any(|i| {
            let lo = few.lo + i * few.period;
            many.touches(lo, lo + few.len)
        })
    }
}

/// The recorded accesses of one pipe to one memory.
#[derive(Default)]
struct Records {
    /// Accesses without gaps by (lo, hi, write), each the latest of its kind: a newer access
    /// of the same pipe, bytes and kind subsumes an older one (any later access unordered with
    /// the older one is unordered with the newer one too), and a write subsumes a read.
    plain: BTreeMap<(u64, u64, bool), (u64, Access)>,
    /// Strided accesses, with their sequence numbers.
    strided: Vec<(u64, Access)>,
    /// The most bytes one plain access spans.
    widest: u64,
}

impl Records {
    fn len(&self) -> usize {
        self.plain.len() + self.strided.len()
    }

    /// The earliest recorded access (by sequence number) that satisfies `conflicts`.
    fn first_conflict(
        &self,
        a: &Access,
        conflicts: &dyn Fn(&Access) -> bool,
    ) -> Option<(u64, Access)> {
        let mut best: Option<(u64, Access)> = None;
        let mut consider = |seq: u64, r: &Access| {
            if best.is_none_or(|(s, _)| seq < s) && conflicts(r) {
                best = Some((seq, *r));
            }
        };
        // Plain accesses that may reach `a.lo..a.hi`: starting below `a.hi`, at most the widest
        // span before `a.lo`.
        let from = (a.lo.saturating_sub(self.widest), 0, false);
        for (&(_, hi, _), (seq, r)) in self.plain.range(from..(a.hi, 0, false)) {
            if hi > a.lo {
                consider(*seq, r);
            }
        }
        for (seq, r) in &self.strided {
            consider(*seq, r);
        }
        best
    }

    fn insert(&mut self, seq: u64, a: Access) {
        if a.strided() {
            self.strided.push((seq, a));
            return;
        }
        if a.write {
            self.plain.remove(&(a.lo, a.hi, false));
        }
        self.widest = self.widest.max(a.hi - a.lo);
        self.plain.insert((a.lo, a.hi, a.write), (seq, a));
    }

    fn retain(&mut self, keep: &dyn Fn(&Access) -> bool) {
        self.plain.retain(|_, (_, r)| keep(r));
        self.strided.retain(|(_, r)| keep(r));
    }
}

pub(crate) struct Hazards {
    pub clocks: [Clock; Pipe::COUNT],
    records: [[Records; Pipe::COUNT]; Mem::COUNT],
    limits: [usize; Mem::COUNT],
    /// Accesses recorded so far: the order in which races are reported.
    seq: u64,
}

impl Hazards {
    pub(crate) fn new() -> Hazards {
        Hazards {
            clocks: [[0; Pipe::COUNT]; Pipe::COUNT],
            records: Default::default(),
            limits: [64; Mem::COUNT],
            seq: 0,
        }
    }

    fn join(into: &mut Clock, from: &Clock) {
        for (a, b) in into.iter_mut().zip(from) {
            *a = (*a).max(*b);
        }
    }

    /// An instruction runs on S: returns its tick.
    pub(crate) fn begin(&mut self, pipe: Pipe) -> u32 {
        let c = &mut self.clocks[pipe as usize][pipe as usize];
        *c += 1;
        *c
    }

    /// An instruction S issued when its clock was `issued` starts on `pipe`: returns its tick.
    /// S runs ahead of the pipes, so the clock it had at the issue is what orders the two.
    pub(crate) fn begin_at(&mut self, pipe: Pipe, issued: &Clock) -> u32 {
        Self::join(&mut self.clocks[pipe as usize], issued);
        self.begin(pipe)
    }

    pub(crate) fn snapshot(&self, pipe: Pipe) -> Clock {
        self.clocks[pipe as usize]
    }

    pub(crate) fn acquire(&mut self, pipe: Pipe, clock: &Clock) {
        Self::join(&mut self.clocks[pipe as usize], clock);
    }

    /// S waited until `pipe` drained.
    pub(crate) fn barrier(&mut self, pipe: Pipe) {
        let c = self.clocks[pipe as usize];
        Self::join(&mut self.clocks[Pipe::S as usize], &c);
    }

    /// Records an access, returning the first (earliest recorded) unordered conflicting one.
    pub(crate) fn access(&mut self, mem: Mem, a: Access) -> Option<Race> {
        let clock = self.clocks[a.pipe as usize];
        let records = &mut self.records[mem as usize];
        let conflicts =
            |r: &Access| (r.write || a.write) && clock[r.pipe as usize] < r.tick && r.overlaps(&a);
        let race = Pipe::ALL
            .iter()
            .filter(|&&p| p != a.pipe)
            .filter_map(|&p| records[p as usize].first_conflict(&a, &conflicts))
            .min_by_key(|(seq, _)| *seq);
        if let Some((_, first)) = race {
            return Some(Race {
                first,
                second: a,
                mem,
            });
        }
        self.seq += 1;
        records[a.pipe as usize].insert(self.seq, a);
        let total: usize = records.iter().map(Records::len).sum();
        if total > self.limits[mem as usize] {
            let clocks = &self.clocks;
            let users = accessors(mem);
            // An access that every other pipe able to touch this memory has already seen can
            // never race again (clocks only grow, and later instructions inherit them).
            let keep = |r: &Access| {
                users
                    .iter()
                    .any(|&p| p != r.pipe && clocks[p as usize][r.pipe as usize] < r.tick)
            };
            records.iter_mut().for_each(|r| r.retain(&keep));
            let total: usize = records.iter().map(Records::len).sum();
            self.limits[mem as usize] = (total * 2).max(64);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(pipe: Pipe, tick: u32, write: bool) -> Access {
        Access {
            lo: 0,
            hi: 32,
            period: 0,
            len: 32,
            pipe,
            tick,
            write,
            site: 0,
        }
    }

    #[test]
    fn flags_order_accesses_and_missing_flags_race() {
        let mut h = Hazards::new();
        let s = h.snapshot(Pipe::S);
        let t = h.begin_at(Pipe::Mte2, &s);
        assert!(h.access(Mem::Ub, acc(Pipe::Mte2, t, true)).is_none());
        h.begin_at(Pipe::Mte2, &s);
        let flag = h.snapshot(Pipe::Mte2);
        h.begin_at(Pipe::V, &s);
        h.acquire(Pipe::V, &flag);
        let t = h.begin_at(Pipe::V, &s);
        assert!(h.access(Mem::Ub, acc(Pipe::V, t, false)).is_none());
        // Without a flag back, a new MTE2 write races with V's read.
        let t = h.begin_at(Pipe::Mte2, &s);
        let race = h.access(Mem::Ub, acc(Pipe::Mte2, t, true)).expect("race");
        assert_eq!(race.first.pipe, Pipe::V);
    }

    #[test]
    fn strided_accesses_overlap_only_where_their_bursts_do() {
        let at = |lo: u64, hi: u64, period: u64, len: u64| Access {
            lo,
            hi,
            period,
            len,
            pipe: Pipe::Mte2,
            tick: 1,
            write: true,
            site: 0,
        };
        // Bursts 0..32, 64..96, 128..160 against the gaps and against a burst.
        let rows = at(0, 160, 64, 32);
        assert!(!rows.overlaps(&at(32, 64, 0, 32)));
        assert!(!rows.overlaps(&at(96, 128, 0, 32)));
        assert!(rows.overlaps(&at(90, 100, 0, 10)));
        assert!(rows.overlaps(&at(150, 400, 0, 250)));
        // Interleaved rows of two tiles: 32..64, 96..128, 160..192.
        assert!(!rows.overlaps(&at(32, 192, 64, 32)));
        assert!(rows.overlaps(&at(16, 208, 64, 32)));
    }

    #[test]
    fn reads_do_not_race_with_reads() {
        let mut h = Hazards::new();
        let t = h.begin(Pipe::Mte2);
        h.access(Mem::Ub, acc(Pipe::Mte2, t, false));
        let t = h.begin(Pipe::V);
        assert!(h.access(Mem::Ub, acc(Pipe::V, t, false)).is_none());
    }

    #[test]
    fn barrier_orders_the_drained_pipe_before_later_issues() {
        let mut h = Hazards::new();
        let t = h.begin(Pipe::V);
        h.access(Mem::Ub, acc(Pipe::V, t, true));
        h.barrier(Pipe::V);
        let s = h.snapshot(Pipe::S);
        let t = h.begin_at(Pipe::Mte3, &s);
        assert!(h.access(Mem::Ub, acc(Pipe::Mte3, t, false)).is_none());
    }
}
