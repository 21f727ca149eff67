//! Timing of one block on one core: the scalar pipe issues in program order, every other pipe
//! runs its instructions in order, each starting when its pipe is free, it has been issued and
//! the flag it waits on (if any) was set.
//!
//! Flags are counting events per (source pipe, destination pipe, id); the k-th wait consumes the
//! k-th set, so a wait is matched at issue time with a set issued before it in program order.
//! Costs are per instruction (never per lane). Queues between S and the other pipes are unbounded.

use crate::isa::Pipe;

pub(crate) struct Timing {
    /// When S can issue the next instruction.
    pub issue: u64,
    pub free: [u64; Pipe::COUNT],
    pub busy: [u64; Pipe::COUNT],
    pub start: u64,
    /// Busy intervals per pipe, merged where they touch; kept only when a timeline is wanted.
    pub intervals: Option<Vec<Vec<(u64, u64)>>>,
}

impl Timing {
    pub(crate) fn new(start: u64, record: bool) -> Timing {
        Timing {
            issue: start,
            free: [start; Pipe::COUNT],
            busy: [0; Pipe::COUNT],
            start,
            intervals: record.then(|| vec![Vec::new(); Pipe::COUNT]),
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

    /// Issues an instruction to `pipe` (not S) costing `cost`, not starting before `not_before`.
    pub(crate) fn dispatch(
        &mut self,
        pipe: Pipe,
        issue_cost: u64,
        cost: u64,
        not_before: u64,
    ) -> (u64, u64) {
        let (_, issued) = self.scalar(issue_cost, 0);
        let start = issued.max(self.free[pipe as usize]).max(not_before);
        let end = start + cost;
        self.free[pipe as usize] = end;
        self.record(pipe, start, end);
        (start, end)
    }

    /// S stalls until `pipe` (or every pipe) has drained.
    pub(crate) fn barrier(&mut self, pipe: Option<Pipe>, cost: u64) -> (u64, u64) {
        let drained = match pipe {
            Some(p) => self.free[p as usize],
            None => self.free.iter().copied().max().unwrap_or(self.issue),
        };
        self.scalar(cost, drained)
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
        let mut t = Timing::new(0, true);
        assert_eq!(t.dispatch(Pipe::Mte2, 1, 100, 0), (1, 101));
        assert_eq!(t.dispatch(Pipe::M, 1, 50, 0), (2, 52));
        assert_eq!(t.dispatch(Pipe::Mte2, 1, 10, 0), (101, 111));
        // A wait whose flag is set at 111 delays the pipe.
        assert_eq!(t.dispatch(Pipe::M, 1, 1, 111), (111, 112));
        assert_eq!(t.barrier(None, 1), (112, 113));
        assert_eq!(t.end(), 113);
        assert_eq!(t.busy[Pipe::Mte2 as usize], 110);
        assert_eq!(
            t.intervals.as_ref().unwrap()[Pipe::Mte2 as usize],
            vec![(1, 111)]
        );
    }
}
