//! Race detection by happens-before between pipes, with vector clocks.
//!
//! Each pipe has a clock vector; an instruction on pipe P ticks P's own entry. Issuing from the
//! scalar pipe orders everything S had seen at the issue before the issued instruction; `set_flag` publishes
//! the setter's clock with the flag and the matching `wait_flag` joins it; `pipe_barrier` joins
//! the drained pipes' clocks into S. Two accesses from different pipes to overlapping bytes, at
//! least one a write, race unless the earlier one's tick is covered by the later one's clock.
//! Accesses of one pipe are ordered because each pipe executes in order.

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

pub(crate) struct Hazards {
    pub clocks: [Clock; Pipe::COUNT],
    records: [Vec<Access>; Mem::COUNT],
    limits: [usize; Mem::COUNT],
}

impl Hazards {
    pub(crate) fn new() -> Hazards {
        Hazards {
            clocks: [[0; Pipe::COUNT]; Pipe::COUNT],
            records: Default::default(),
            limits: [64; Mem::COUNT],
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

    /// Records an access, returning the first unordered conflicting one.
    pub(crate) fn access(&mut self, mem: Mem, a: Access) -> Option<Race> {
        let clock = self.clocks[a.pipe as usize];
        let list = &mut self.records[mem as usize];
        for r in list.iter() {
            if r.pipe != a.pipe
                && (r.write || a.write)
                && clock[r.pipe as usize] < r.tick
                && r.overlaps(&a)
            {
                return Some(Race {
                    first: *r,
                    second: a,
                    mem,
                });
            }
        }
        // A newer access of the same pipe, range and kind subsumes the older one: any later
        // access unordered with the older is unordered with the newer too.
        // A newer access of the same pipe covering an older one subsumes it unless the older is
        // a write and the newer a read: any later access unordered with the older one is
        // unordered with the newer one too.
        list.retain(|r| {
            !(r.pipe == a.pipe
                && !a.strided()
                && a.lo <= r.lo
                && r.hi <= a.hi
                && (a.write || !r.write))
        });
        list.push(a);
        if list.len() > self.limits[mem as usize] {
            let clocks = &self.clocks;
            let users = accessors(mem);
            // An access that every other pipe able to touch this memory has already seen can
            // never race again (clocks only grow, and later instructions inherit them).
            list.retain(|r| {
                users
                    .iter()
                    .any(|&p| p != r.pipe && clocks[p as usize][r.pipe as usize] < r.tick)
            });
            self.limits[mem as usize] = (list.len() * 2).max(64);
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
