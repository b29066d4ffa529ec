//! The strategies' source of randomness.
//!
//! A SplitMix64 generator written here rather than `rand`: `rand`'s `StdRng` may change its
//! algorithm between releases and `SmallRng` differs between 32- and 64-bit targets, while a
//! replay or a CI test must give the same proposals for a seed everywhere and forever.

/// SplitMix64 (Steele, Lea and Flood 2014): tiny, fast, and the same sequence on every
/// platform, which is the property the replay and the tests depend on.
#[derive(Debug, Clone)]
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), without modulo bias: draws in the incomplete top range are
    /// rejected.
    pub(super) fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return (x % n) as usize;
            }
        }
    }

    /// Uniform in [0, 1).
    pub(super) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(super) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// An index drawn with probability proportional to `weights` (not all zero).
    pub(super) fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.unit() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_splitmix64() {
        // The first output for seed 0 published with the algorithm.
        assert_eq!(Rng::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        let mut r = Rng::new(9);
        let mut counts = [0usize; 3];
        for _ in 0..3000 {
            counts[r.below(3)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (900..1100).contains(&c)),
            "{counts:?}"
        );
    }
}
