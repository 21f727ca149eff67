//! Timing of one block on one core: the scalar pipe issues in program order into one bounded
//! queue per pipe; every other pipe runs its queue in order, each instruction starting when the
//! pipe is free, it has been issued and the flag it waits on (if any) was set.
//!
//! The driver decides *when* a queued instruction can run (its flag may be set by an
//! instruction issued later); this module only keeps the clocks: S's issue time, each pipe's
//! free time and busy total, and the start times that free queue slots. An instruction is in
//! its pipe's queue from its issue until it starts, so with queue depth `d` the `n`-th
//! instruction to a pipe cannot be issued before the `(n-d)`-th has started. Costs are per
//! instruction (never per lane).

use std::collections::VecDeque;

use crate::isa::Pipe;

pub(crate) struct Timing {
    /// When S can issue the next instruction.
    pub issue: u64,
    pub free: [u64; Pipe::COUNT],
    pub busy: [u64; Pipe::COUNT],
    pub start: u64,
    /// Busy intervals per pipe, merged where they touch; kept only when a timeline is wanted.
    pub intervals: Option<Vec<Vec<(u64, u64)>>>,
    depth: usize,
    /// Per pipe, the start times of its last `depth` started instructions.
    starts: [VecDeque<u64>; Pipe::COUNT],
}

impl Timing {
    pub(crate) fn new(start: u64, depth: usize, record: bool) -> Timing {
        Timing {
            issue: start,
            free: [start; Pipe::COUNT],
            busy: [0; Pipe::COUNT],
            start,
            intervals: record.then(|| vec![Vec::new(); Pipe::COUNT]),
            depth: depth.max(1),
            starts: Default::default(),
        }
    }

    fn record(&mut self, pipe: Pipe, start: u64, end: u64) {
        self.busy[pipe as usize] += end - start;
        if let Some(iv) = &mut self.intervals {
            let list = &mut iv[pipe as usize];
            match list.last_mut() {
                Some(last) if last.1 >= start => last.1 = last.1.max(end),
                _ => list.push((start, end)),
            }
        }
    }

    /// Work on S itself (scalar instructions, loop control): returns (start, end).
    pub(crate) fn scalar(&mut self, cost: u64, not_before: u64) -> (u64, u64) {
        let start = self.issue.max(not_before);
        let end = start + cost;
        self.record(Pipe::S, start, end);
        self.issue = end;
        self.free[Pipe::S as usize] = end;
        (start, end)
    }

    /// When a queue slot of `pipe` is free for the next issue, given `queued` instructions
    /// issued to it that have not started; None when the queue is full of those.
    pub(crate) fn slot_free(&self, pipe: Pipe, queued: usize) -> Option<u64> {
        if queued >= self.depth {
            return None;
        }
        let starts = &self.starts[pipe as usize];
        let back = self.depth - queued;
        Some(if starts.len() >= back {
            starts[starts.len() - back]
        } else {
            0
        })
    }

    /// S issues an instruction to another pipe once a queue slot is free at `slot_free`:
    /// returns the time it is in the queue.
    pub(crate) fn issue(&mut self, cost: u64, slot_free: u64) -> u64 {
        self.scalar(cost, slot_free).1
    }

    /// The earliest start of an instruction issued at `issued` on `pipe`, after `not_before`.
    pub(crate) fn start_time(&self, pipe: Pipe, issued: u64, not_before: u64) -> u64 {
        issued.max(self.free[pipe as usize]).max(not_before)
    }

    /// `pipe` runs an instruction from `start` to `end` (from `start_time`).
    pub(crate) fn occupy(&mut self, pipe: Pipe, start: u64, end: u64) {
        let starts = &mut self.starts[pipe as usize];
        if starts.len() == self.depth {
            starts.pop_front();
        }
        starts.push_back(start);
        self.free[pipe as usize] = end;
        self.record(pipe, start, end);
    }

    /// Runs an instruction of fixed `cost`: returns (start, end).
    pub(crate) fn run(
        &mut self,
        pipe: Pipe,
        issued: u64,
        cost: u64,
        not_before: u64,
    ) -> (u64, u64) {
        let start = self.start_time(pipe, issued, not_before);
        self.occupy(pipe, start, start + cost);
        (start, start + cost)
    }

    pub(crate) fn end(&self) -> u64 {
        self.free
            .iter()
            .copied()
            .max()
            .unwrap_or(self.start)
            .max(self.issue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_overlap_and_serialise_in_order() {
        let mut t = Timing::new(0, 8, true);
        let i = t.issue(1, 0);
        assert_eq!(t.run(Pipe::Mte2, i, 100, 0), (1, 101));
        let i = t.issue(1, 0);
        assert_eq!(t.run(Pipe::M, i, 50, 0), (2, 52));
        let i = t.issue(1, 0);
        assert_eq!(t.run(Pipe::Mte2, i, 10, 0), (101, 111));
        // A wait whose flag is set at 111 delays the pipe.
        let i = t.issue(1, 0);
        assert_eq!(t.run(Pipe::M, i, 1, 111), (111, 112));
        assert_eq!(t.end(), 112);
        assert_eq!(t.busy[Pipe::Mte2 as usize], 110);
        assert_eq!(
            t.intervals.as_ref().unwrap()[Pipe::Mte2 as usize],
            vec![(1, 111)]
        );
    }

    #[test]
    fn a_full_queue_holds_the_issue_until_a_slot_frees() {
        let mut t = Timing::new(0, 2, false);
        for _ in 0..2 {
            let i = t.issue(1, t.slot_free(Pipe::Mte2, 0).unwrap());
            t.run(Pipe::Mte2, i, 100, 0);
        }
        // Two instructions started at 1 and 101: the third may enter when the first started,
        // the fourth when the second did.
        assert_eq!(t.slot_free(Pipe::Mte2, 0), Some(1));
        assert_eq!(t.slot_free(Pipe::Mte2, 1), Some(101));
        assert_eq!(t.slot_free(Pipe::Mte2, 2), None);
    }
}
