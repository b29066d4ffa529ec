//! The `model` strategy: rank the space with a surrogate model fitted to what was measured,
//! and measure the configurations it ranks best.
//!
//! Compiling is most of a cold run, so the aim is to compile few configurations and the right
//! ones. The first proposals are an all-pairs covering set of the space
//! ([`crate::spec::cover::pairwise_rows`]): every value of every parameter, and every pair of
//! values that occurs together, measured once (in one round: it needs no measurement, so it
//! compiles together). Where the space knows each point's compile cost, the set leaves out
//! the heavy compiles: the whole round would wait for a source NVRTC takes seconds over.
//! Then each round fits the log of the measured times with kernel ridge regression and
//! proposes, for half the round, the one-parameter neighbours of the fastest
//! point so far that the model ranks best, and for the rest the unmeasured points with the
//! lowest prediction anywhere.
//!
//! The kernel is `1 + m + m(m-1)/2`, where `m` is the number of parameters two points share:
//! that is the inner product of their one-hot encodings with every pairwise interaction
//! (a constant, one indicator per parameter value, one per pair of values). The ridge fit in
//! that feature space is then the same as solving an n x n system in the measured points,
//! however many interaction features there are. Main effects alone miss what a tile size does
//! only with a given vector width; interactions of three or more parameters would need more
//! measurements than a budget of a few dozen gives.
//!
//! A failed point (compile error, wrong answer, fault) is fitted as twice the slowest measured
//! time, so the model steers away from its values without an infinite cost.
//!
//! Replayed over exhaustive transpose runs on an H100 (tests/search.rs), a budget of
//! [`MODEL_BUDGET`] finds a configuration within 1 % of the exhaustive best at every shape
//! (99.3 % at worst), where random sampling of the same budget averages up to 6 % behind.

use super::space::SearchSpace;
use super::strategy::{Strategy, StrategyInfo};
use std::collections::HashSet;

/// The default budget of a `model` search: the all-pairs set (a few dozen points) and a few
/// rounds of the model's best.
pub const MODEL_BUDGET: usize = 80;

/// This strategy's entry in [`super::registry::REGISTRY`].
pub(super) const INFO: StrategyInfo = StrategyInfo {
    name: "model",
    about: "an all-pairs set of configurations, then the ones a model fitted to the measurements ranks fastest, within --budget",
    budget: MODEL_BUDGET,
    build: |space, _, horizon| Box::new(Model::new(space, horizon)),
};

/// Ridge penalty of the fit (in units of the kernel, whose diagonal is at least 1).
const LAMBDA: f64 = 1.0;

pub(super) struct Model {
    points: Vec<Vec<usize>>,
    /// The points' compile costs (empty: unknown), to keep the cover off heavy compiles.
    costs: Vec<i64>,
    /// Values per parameter, for the cover's (parameter, value) ids.
    counts: Vec<usize>,
    /// Points of the cover at most (half the budget).
    cap: usize,
    /// The covering set still to propose, in the order the cover chose it; made when first
    /// needed (a re-run that only re-times the last run's leaders never asks for it).
    cover: std::cell::OnceCell<std::collections::VecDeque<usize>>,
    asked: HashSet<usize>,
    /// Measured points and their log cost (`None`: failed).
    told: Vec<(usize, Option<f64>)>,
    /// Each point's place in the first fitted ranking (0 = predicted fastest).
    first_rank: Option<Vec<usize>>,
}

impl Model {
    /// The cover is capped at half the budget (`horizon`), so the model always has rounds of
    /// its own.
    pub(super) fn new(space: &SearchSpace, horizon: usize) -> Model {
        Model {
            points: space.points.clone(),
            costs: space.costs.clone(),
            counts: space.values.iter().map(Vec::len).collect(),
            cap: (horizon / 2).max(1),
            cover: std::cell::OnceCell::new(),
            asked: HashSet::new(),
            told: Vec::new(),
            first_rank: None,
        }
    }

    /// The all-pairs cover of the points, at most `cap` of them. Heavy compiles
    /// ([`super::space::heavy`] among the space's median cost) are left out, and with them
    /// the pairs of values only they hold: the cover is proposed whatever the model
    /// predicts, and one source NVRTC takes seconds over holds up the whole first round
    /// (the model may still propose such a point later, as any other).
    fn cover(&self) -> &std::collections::VecDeque<usize> {
        self.cover.get_or_init(|| {
            let eligible: Vec<usize> = if self.costs.len() == self.points.len() {
                let median = super::space::median_cost(&self.costs);
                (0..self.points.len())
                    .filter(|&p| !super::space::heavy(self.costs[p], median))
                    .collect()
            } else {
                (0..self.points.len()).collect()
            };
            // One id per (parameter, value): parameter k's values are offset by the counts
            // before it.
            let offset: Vec<u32> = self
                .counts
                .iter()
                .scan(0u32, |next, &n| {
                    let at = *next;
                    *next += n as u32;
                    Some(at)
                })
                .collect();
            let rows: Vec<Vec<u32>> = eligible
                .iter()
                .map(|&p| {
                    self.points[p]
                        .iter()
                        .zip(&offset)
                        .map(|(&v, &o)| o + v as u32)
                        .collect()
                })
                .collect();
            crate::spec::cover::pairwise_rows(&rows)
                .into_iter()
                .take(self.cap)
                .map(|k| eligible[k])
                .collect()
        })
    }

    /// The fastest point measured so far.
    fn incumbent(&self) -> Option<usize> {
        self.told
            .iter()
            .filter_map(|&(p, c)| c.map(|c| (p, c)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(p, _)| p)
    }

    /// Number of parameters `a` and `b` share.
    fn shared(a: &[usize], b: &[usize]) -> f64 {
        a.iter().zip(b).filter(|(x, y)| x == y).count() as f64
    }

    fn kernel(a: &[usize], b: &[usize]) -> f64 {
        let m = Self::shared(a, b);
        1.0 + m + m * (m - 1.0) / 2.0
    }

    /// The predicted log cost of every point, or `None` before anything was measured.
    fn predict(&self) -> Option<Vec<f64>> {
        let ok: Vec<f64> = self.told.iter().filter_map(|(_, c)| *c).collect();
        if ok.is_empty() {
            return None;
        }
        let worst = ok.iter().copied().fold(f64::NEG_INFINITY, f64::max) + 2f64.ln();
        let y: Vec<f64> = self.told.iter().map(|(_, c)| c.unwrap_or(worst)).collect();
        let mean = y.iter().sum::<f64>() / y.len() as f64;
        let centred: Vec<f64> = y.iter().map(|v| v - mean).collect();
        let xs: Vec<&[usize]> = self
            .told
            .iter()
            .map(|(p, _)| &self.points[*p][..])
            .collect();
        let n = xs.len();
        let mut k = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let v = Self::kernel(xs[i], xs[j]) + if i == j { LAMBDA } else { 0.0 };
                k[i * n + j] = v;
                k[j * n + i] = v;
            }
        }
        let alpha = solve_spd(&mut k, n, centred)?;
        Some(
            self.points
                .iter()
                .map(|p| {
                    mean + xs
                        .iter()
                        .zip(&alpha)
                        .map(|(x, a)| a * Self::kernel(p, x))
                        .sum::<f64>()
                })
                .collect(),
        )
    }
}

/// Solves `a x = b` for a symmetric positive definite `a` (n x n, row-major, overwritten by
/// its Cholesky factor); `None` if it is not positive definite. Written here: a dense solve of
/// at most a few hundred rows does not warrant a linear-algebra dependency.
fn solve_spd(a: &mut [f64], n: usize, mut b: Vec<f64>) -> Option<Vec<f64>> {
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
    }
    // L y = b, then L^T x = y.
    for i in 0..n {
        let s: f64 = (0..i).map(|k| a[i * n + k] * b[k]).sum();
        b[i] = (b[i] - s) / a[i * n + i];
    }
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| a[k * n + i] * b[k]).sum();
        b[i] = (b[i] - s) / a[i * n + i];
    }
    Some(b)
}

impl Strategy for Model {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn ask(&mut self, n: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            self.cover();
            let Some(p) = self.cover.get_mut().and_then(|c| c.pop_front()) else {
                break;
            };
            if self.asked.insert(p) {
                out.push(p);
            }
        }
        if out.len() == n {
            return out;
        }
        let mut order: Vec<usize> = (0..self.points.len()).collect();
        // Nothing measured yet (a compile-only run, or every cover point pending): the space's
        // own order.
        let Some(pred) = self.predict() else {
            out.extend(
                order
                    .into_iter()
                    .filter(|&p| self.asked.insert(p))
                    .take(n - out.len()),
            );
            return out;
        };
        order.sort_by(|&a, &b| pred[a].total_cmp(&pred[b]).then(a.cmp(&b)));
        if self.first_rank.is_none() {
            let mut rank = vec![0; order.len()];
            for (r, &p) in order.iter().enumerate() {
                rank[p] = r;
            }
            self.first_rank = Some(rank);
        }
        // Half the round: the neighbours of the fastest point so far (one parameter changed)
        // that the model places in the better half of the space, best predicted first; a fit
        // of pairs misses what only the incumbent's exact combination does, and a step away
        // from it is what refines it. The other half, and whatever the neighbourhood cannot
        // fill: the best predicted anywhere.
        let local = (n - out.len()) / 2;
        if let Some(best) = self.incumbent() {
            let here = &self.points[best];
            let near: Vec<usize> = order[..order.len().div_ceil(2)]
                .iter()
                .copied()
                .filter(|&p| {
                    !self.asked.contains(&p)
                        && self.points[p]
                            .iter()
                            .zip(here)
                            .filter(|(a, b)| a != b)
                            .count()
                            == 1
                })
                .take(local)
                .collect();
            for p in near {
                self.asked.insert(p);
                out.push(p);
            }
        }
        for p in order {
            if out.len() == n {
                break;
            }
            if self.asked.insert(p) {
                out.push(p);
            }
        }
        out
    }

    fn tell(&mut self, point: usize, cost: Option<f64>) {
        let log = cost.filter(|c| c.is_finite() && *c > 0.0).map(f64::ln);
        self.told.push((point, log));
    }

    fn take(&mut self, point: usize) -> bool {
        point < self.points.len() && self.asked.insert(point)
    }

    fn unconditional(&self) -> usize {
        self.cover().len()
    }

    fn first_rank(&self, point: usize) -> Option<(usize, usize)> {
        let rank = self.first_rank.as_ref()?;
        Some((rank.get(point).copied()?, rank.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::strategy::drive;

    /// A space of `dims` parameters of `k` values each, every combination valid.
    fn product(dims: usize, k: usize) -> SearchSpace {
        let mut points = vec![Vec::new()];
        for _ in 0..dims {
            points = points
                .into_iter()
                .flat_map(|p: Vec<usize>| {
                    (0..k).map(move |v| {
                        let mut q = p.clone();
                        q.push(v);
                        q
                    })
                })
                .collect();
        }
        SearchSpace {
            names: (0..dims).map(|d| format!("P{d}")).collect(),
            values: (0..dims)
                .map(|_| (0..k).map(|v| v.to_string()).collect())
                .collect(),
            points,
            costs: Vec::new(),
        }
    }

    #[test]
    fn cholesky_solves_a_known_system() {
        let mut a = vec![4.0, 2.0, 2.0, 3.0];
        let x = solve_spd(&mut a, 2, vec![2.0, 1.0]).unwrap();
        assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12, "{x:?}");
        let mut not_pd = vec![1.0, 2.0, 2.0, 1.0];
        assert!(solve_spd(&mut not_pd, 2, vec![1.0, 1.0]).is_none());
    }

    /// A landscape with a product of per-parameter factors and one interaction (the best value
    /// of P1 depends on P0): the model finds the optimum of 4^5 = 1024 points within 60, where
    /// random sampling rarely does, and never proposes a point twice.
    #[test]
    fn finds_the_optimum_of_an_interacting_landscape_in_a_small_budget() {
        let space = product(5, 4);
        let cost = |p: &[usize]| {
            let mut c = 1.0;
            for (d, &v) in p.iter().enumerate() {
                c *= 1.0 + 0.1 * ((v + d) % 4) as f64;
            }
            // P1 should match P0.
            if p[0] != p[1] {
                c *= 1.3;
            }
            c
        };
        let best = space
            .points
            .iter()
            .map(|p| cost(p))
            .fold(f64::INFINITY, f64::min);
        let mut s = Model::new(&space, 60);
        let got = drive(&mut s, 60, 16, |pts| {
            pts.iter().map(|&p| Some(cost(&space.points[p]))).collect()
        });
        let distinct: HashSet<usize> = got.iter().map(|(p, _)| *p).collect();
        assert_eq!(distinct.len(), got.len());
        let found = got
            .iter()
            .filter_map(|(_, c)| *c)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(found, best);
        let (p_best, _) = got
            .iter()
            .min_by(|a, b| a.1.unwrap().total_cmp(&b.1.unwrap()))
            .unwrap();
        let (rank, of) = s.first_rank(*p_best).unwrap();
        assert_eq!(of, 1024);
        assert!(rank < 60, "first fit ranked the optimum {rank}");
    }

    /// Failed points are fitted as slow: a parameter value that always fails is not proposed
    /// in the round after the cover measured it, and a taken point is never proposed.
    #[test]
    fn failures_steer_the_model_away_and_taken_points_are_skipped() {
        let space = product(3, 4);
        let mut s = Model::new(&space, 40);
        assert!(s.take(5));
        assert!(!s.take(5));
        let cover_len = s.cover().len();
        let got = drive(&mut s, 40, 8, |pts| {
            pts.iter()
                .map(|&p| {
                    let q = &space.points[p];
                    (q[2] != 3).then(|| 1.0 + q[0] as f64 + q[1] as f64)
                })
                .collect()
        });
        assert!(got.iter().all(|(p, _)| *p != 5));
        let after_cover = &got[cover_len..];
        assert!(
            after_cover
                .iter()
                .take(8)
                .all(|(p, _)| space.points[*p][2] != 3),
            "the model proposed the failing value again"
        );
    }

    /// Without any measurement (a compile-only run) it still proposes: the cover, then the
    /// space in order, each point once.
    #[test]
    fn proposes_without_measurements() {
        let space = product(2, 3);
        let mut s = Model::new(&space, 100);
        let a = s.ask(4);
        let b = s.ask(100);
        assert_eq!(a.len() + b.len(), 9);
        let all: HashSet<usize> = a.iter().chain(&b).copied().collect();
        assert_eq!(all.len(), 9);
        assert!(s.first_rank(0).is_none());
    }

    /// The cover leaves out heavy compiles (8 times the space's median cost or more) and
    /// the pairs only they hold, and covers every pair the others hold; the heavy points
    /// are still proposed later, by the model.
    #[test]
    fn the_cover_keeps_off_heavy_compiles() {
        let mut space = product(3, 4);
        // P0 = 3 together with P1 = 3 compiles 10 times as long as the rest.
        let heavy = |q: &[usize]| q[0] == 3 && q[1] == 3;
        let costs: Vec<i64> = space
            .points
            .iter()
            .map(|q| if heavy(q) { 10 } else { 1 })
            .collect();
        space.costs = costs.clone();
        let s = Model::new(&space, 200);
        let cover: Vec<usize> = s.cover().iter().copied().collect();
        assert!(cover.iter().all(|&p| !heavy(&space.points[p])));
        let pairs = |q: &[usize]| {
            let mut out = Vec::new();
            for a in 0..q.len() {
                for b in a + 1..q.len() {
                    out.push((a, q[a], b, q[b]));
                }
            }
            out
        };
        let covered: HashSet<_> = cover
            .iter()
            .flat_map(|&p| pairs(&space.points[p]))
            .collect();
        for q in space.points.iter().filter(|q| !heavy(q)) {
            for pair in pairs(q) {
                assert!(covered.contains(&pair), "{pair:?} not covered");
            }
        }
        // Without costs the same space's cover holds the pair (3, 3) of P0 and P1.
        space.costs.clear();
        let plain = Model::new(&space, 200);
        assert!(plain.cover().iter().any(|&p| heavy(&space.points[p])));
        // The heavy points stay in the space: a search that runs on proposes them too.
        space.costs = costs;
        let mut s = Model::new(&space, 200);
        let got = drive(&mut s, 64, 8, |pts| {
            pts.iter().map(|&p| Some(1.0 + p as f64)).collect()
        });
        assert_eq!(got.len(), 64);
        assert!(got.iter().any(|(p, _)| heavy(&space.points[*p])));
    }
}
