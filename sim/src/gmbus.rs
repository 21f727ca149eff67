//! GM bandwidth shared by time: a calendar of how much of the total GM bandwidth is taken in
//! each cycle range.
//!
//! A GM transfer asks for its path's bandwidth from its start on and gets, cycle range by cycle
//! range, whatever the transfers arbitrated before it left free (at most its path bandwidth),
//! until its bytes are through. Transfers are arbitrated in the order the simulator executes
//! them, which follows issue time across cores. So two cores' copies that overlap in time share
//! the bus and each takes longer than alone, while copies that do not overlap run at full path
//! speed. Invariant: the map's values are the bandwidth in use from their key up to the next
//! key, never above the total; before the first key and after the last nothing is in use.

use std::collections::BTreeMap;

pub(crate) struct GmBus {
    total: u64,
    used: BTreeMap<u64, u64>,
}

impl GmBus {
    pub(crate) fn new(total: u64) -> GmBus {
        GmBus {
            total: total.max(1),
            used: BTreeMap::new(),
        }
    }

    fn at(&self, t: u64) -> u64 {
        self.used.range(..=t).next_back().map_or(0, |(_, &u)| u)
    }

    fn split(&mut self, t: u64) {
        if !self.used.contains_key(&t) {
            let u = self.at(t);
            self.used.insert(t, u);
        }
    }

    fn reserve(&mut self, from: u64, to: u64, rate: u64) {
        self.split(from);
        self.split(to);
        for (_, u) in self.used.range_mut(from..to) {
            *u += rate;
        }
    }

    /// Moves `bytes` at up to `rate` bytes per cycle from cycle `start` on: returns the cycle
    /// the last byte is through.
    pub(crate) fn transfer(&mut self, start: u64, bytes: u64, rate: u64) -> u64 {
        let mut t = start;
        let mut left = bytes;
        while left > 0 {
            let next = self.used.range(t + 1..).next().map(|(&k, _)| k);
            let got = rate.min(self.total.saturating_sub(self.at(t)));
            if got == 0 {
                // Only a reserved range can be full, and every range ends at a later key.
                t = next.unwrap_or(t + 1);
                continue;
            }
            let need = left.div_ceil(got);
            match next {
                Some(n) if n - t < need => {
                    self.reserve(t, n, got);
                    left -= got * (n - t);
                    t = n;
                }
                _ => {
                    self.reserve(t, t + need, got);
                    return t + need;
                }
            }
        }
        t
    }

    /// Forgets the calendar before `horizon`: no transfer will start before it.
    pub(crate) fn forget_before(&mut self, horizon: u64) {
        if self.used.len() < 256 {
            return;
        }
        let u = self.at(horizon);
        self.used = self.used.split_off(&horizon);
        self.used.insert(horizon, u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_transfers_share_and_later_ones_get_the_rest() {
        let mut bus = GmBus::new(100);
        // Alone: 8000 bytes at 80 bytes/cycle.
        assert_eq!(bus.transfer(0, 8000, 80), 100);
        // Beside it only 20 bytes/cycle are left until cycle 100, then 80.
        assert_eq!(bus.transfer(0, 8000, 80), 100 + (8000 - 2000) / 80);
        // After both, the bus is free again.
        assert_eq!(bus.transfer(1000, 8000, 80), 1100);
    }

    #[test]
    fn a_full_bus_makes_a_transfer_wait() {
        let mut bus = GmBus::new(80);
        assert_eq!(bus.transfer(10, 800, 80), 20);
        assert_eq!(bus.transfer(12, 80, 80), 21);
        bus.forget_before(15);
        assert_eq!(bus.transfer(0, 80, 80), 1);
    }
}
