//! How sure are we of a winner? Paired bootstrap over interleaved rounds: candidates are timed
//! A B C A B C ..., so drift and clock changes hit all of them alike, and the ratio of medians
//! is resampled by round (keeping each round's samples together) to get a confidence interval.

use rand::{Rng, SeedableRng};

/// `other` relative to `leader`: how much slower `other` is, in percent, with a 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub slower_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
}

impl Comparison {
    /// The interval contains zero: the data cannot tell the two apart.
    pub fn tied(&self) -> bool {
        self.ci_low_pct <= 0.0
    }
}

pub fn median(xs: &[f64]) -> f64 {
    median_in_place(&mut xs.to_vec())
}

/// The median of `s`, reordering it (selection, not a full sort: the bootstrap below takes
/// thousands of medians).
fn median_in_place(s: &mut [f64]) -> f64 {
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    let (below, mid, _) = s.select_nth_unstable_by(n / 2, f64::total_cmp);
    let upper = *mid;
    if n % 2 == 1 {
        upper
    } else {
        // The lower middle is the largest of the lower half.
        let lower = below
            .iter()
            .copied()
            .max_by(f64::total_cmp)
            .unwrap_or(upper);
        (lower + upper) / 2.0
    }
}

/// Percentile bootstrap (2.5 %, 97.5 %) of median(other) / median(leader) − 1, resampling
/// rounds with replacement; `leader[i]` and `other[i]` come from the same round. Seeded, so
/// the same samples always give the same interval.
pub fn compare(leader: &[f64], other: &[f64], iterations: usize, seed: u64) -> Comparison {
    let n = leader.len().min(other.len());
    let ratio = |a: &[f64], b: &[f64]| (median(b) / median(a) - 1.0) * 100.0;
    let estimate = ratio(&leader[..n], &other[..n]);
    if n < 2 {
        return Comparison {
            slower_pct: estimate,
            ci_low_pct: f64::NEG_INFINITY,
            ci_high_pct: f64::INFINITY,
        };
    }
    // A small fast generator: thousands of resamples per comparison, and the interval needs
    // no cryptographic quality, only the same draws for the same seed.
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
    let mut ratios: Vec<f64> = (0..iterations.max(100))
        .map(|_| {
            for i in 0..n {
                let r = rng.random_range(0..n);
                a[i] = leader[r];
                b[i] = other[r];
            }
            (median_in_place(&mut b) / median_in_place(&mut a) - 1.0) * 100.0
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    Comparison {
        slower_pct: estimate,
        ci_low_pct: at(0.025),
        ci_high_pct: at(0.975),
    }
}

/// Relative interquartile range (IQR / median), in percent: a result's own noise.
pub fn rel_iqr_pct(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let q = |p: f64| quantile_sorted(&s, p);
    (q(0.75) - q(0.25)) / q(0.5) * 100.0
}

/// The `p` quantile (0 to 1) of `sorted` (ascending, not empty), interpolated linearly
/// between the two nearest samples.
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let pos = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples around `center` with ±`noise` relative jitter, from a fixed seed.
    fn samples(center: f64, noise: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..n)
            .map(|_| center * (1.0 + rng.random_range(-noise..=noise)))
            .collect()
    }

    #[test]
    fn a_clear_winner_has_an_interval_above_zero() {
        let a = samples(1.0, 0.01, 100, 1);
        let b = samples(1.05, 0.01, 100, 2);
        let c = compare(&a, &b, 2000, 7);
        assert!((c.slower_pct - 5.0).abs() < 1.0, "{c:?}");
        assert!(c.ci_low_pct > 3.0 && c.ci_high_pct < 7.0, "{c:?}");
        assert!(!c.tied());
    }

    #[test]
    fn identical_distributions_are_a_tie() {
        let a = samples(1.0, 0.02, 100, 3);
        let b = samples(1.0, 0.02, 100, 4);
        let c = compare(&a, &b, 2000, 7);
        assert!(c.ci_low_pct < 0.0 && c.ci_high_pct > 0.0, "{c:?}");
        assert!(c.tied());
    }

    #[test]
    fn a_noisy_pair_gets_a_wide_interval() {
        let a = samples(1.0, 0.30, 40, 5);
        let b = samples(1.03, 0.30, 40, 6);
        let c = compare(&a, &b, 2000, 7);
        assert!(c.ci_high_pct - c.ci_low_pct > 10.0, "{c:?}");
        assert!(c.tied(), "3 % under 30 % noise cannot be called: {c:?}");
    }

    #[test]
    fn pairing_by_round_removes_shared_drift() {
        // Both candidates drift from 1.0 to 2.0 over the rounds; b is always 2 % slower.
        let a: Vec<f64> = (0..100).map(|i| 1.0 + i as f64 / 100.0).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.02).collect();
        let c = compare(&a, &b, 2000, 7);
        assert!((c.slower_pct - 2.0).abs() < 0.01, "{c:?}");
        assert!(c.ci_low_pct > 1.9, "{c:?}");
    }

    #[test]
    fn the_interval_is_deterministic() {
        let a = samples(1.0, 0.05, 50, 8);
        let b = samples(1.01, 0.05, 50, 9);
        assert_eq!(compare(&a, &b, 1000, 3), compare(&a, &b, 1000, 3));
    }

    #[test]
    fn relative_iqr() {
        assert!((rel_iqr_pct(&[1.0, 2.0, 3.0, 4.0, 5.0]) - 66.666).abs() < 0.01);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }
}
