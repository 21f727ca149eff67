//! The deterministic pseudo-random numbers of polyfuse, in one place.
//!
//! - [`Rng`]: the generator of random test cases, fuzz inputs and random kernels (SplitMix64);
//! - [`input_bits`], [`input_int`], [`input_unit`]: the contents every run of a kernel starts
//!   from when no data is given. An element's value depends only on the seed, its array's name
//!   and its flat index, so the reference interpreter, the simulator and every target's runner
//!   see the same inputs, and so do two versions of a kernel that declare their arrays in
//!   different orders.

/// A SplitMix64 generator: fast, and every seed (zero included) gives a full-period stream.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        finalize(self.0)
    }

    /// Uniform in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in `lo..=hi` (`lo ≤ hi`).
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    /// Uniform in `[0, 1)`, from 53 random bits.
    pub fn unit(&mut self) -> f64 {
        unit(self.next_u64())
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// One of `items`, each as likely as its weight (the last when every weight is 0).
    pub fn weighted<'a, T>(&mut self, items: &'a [(T, u32)]) -> &'a T {
        let total: u32 = items.iter().map(|(_, w)| w).sum();
        let mut r = self.below(total as usize) as u32;
        for (item, w) in items {
            if r < *w {
                return item;
            }
            r -= w;
        }
        &items[items.len() - 1].0
    }
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function.
fn finalize(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `[0, 1)` from the top 53 bits of `bits`, exactly.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// FNV-1a of a name.
fn hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The random bits of element `index` of the array `name`, for `seed`.
pub fn input_bits(seed: u64, name: &str, index: u64) -> u64 {
    let base = finalize((seed ^ hash(name)).wrapping_add(GOLDEN));
    finalize((base ^ index.wrapping_mul(GOLDEN)).wrapping_add(GOLDEN))
}

/// An integer input from [`input_bits`]: uniform in `[-16, 16)`.
pub fn input_int(bits: u64) -> i64 {
    (bits >> 59) as i64 - 16
}

/// A floating-point input from [`input_bits`]: uniform in `[-1, 1)`, to be rounded to the
/// element type.
pub fn input_unit(bits: u64) -> f64 {
    2.0 * unit(bits) - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_depend_on_the_name_and_the_index_only() {
        let a = input_bits(7, "A", 3);
        assert_eq!(a, input_bits(7, "A", 3));
        assert_ne!(a, input_bits(7, "B", 3));
        assert_ne!(a, input_bits(7, "A", 4));
        assert_ne!(a, input_bits(8, "A", 3));
        for i in 0..1000 {
            let b = input_bits(1, "x", i);
            assert!((-16..16).contains(&input_int(b)));
            assert!((-1.0..1.0).contains(&input_unit(b)));
        }
    }

    #[test]
    fn the_generator_stays_in_its_ranges() {
        let mut rng = Rng::new(0);
        for _ in 0..1000 {
            assert!(rng.below(5) < 5);
            assert!((-3..=3).contains(&rng.range(-3, 3)));
            assert!((0.0..1.0).contains(&rng.unit()));
        }
        assert_eq!(rng.below(0), 0);
        assert_eq!(*rng.weighted(&[("a", 0), ("b", 1)]), "b");
    }
}
