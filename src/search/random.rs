//! The `random` strategy: points drawn uniformly, each once.

use super::budget::DEFAULT_BUDGET;
use super::pool::Pool;
use super::rng::Rng;
use super::strategy::{Strategy, StrategyInfo};

/// This strategy's entry in [`super::registry::REGISTRY`].
pub(super) const INFO: StrategyInfo = StrategyInfo {
    name: "random",
    about: "measures --budget configurations drawn at random, each once",
    budget: DEFAULT_BUDGET,
    build: |space, seed, _| {
        Box::new(RandomSearch {
            pool: Pool::new(space.len()),
            rng: Rng::new(seed),
        })
    },
};

/// Uniform sampling without replacement: the baseline any cleverer strategy has to beat.
struct RandomSearch {
    pool: Pool,
    rng: Rng,
}

impl Strategy for RandomSearch {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn ask(&mut self, n: usize) -> Vec<usize> {
        (0..n)
            .map_while(|_| self.pool.take_random(&mut self.rng))
            .collect()
    }

    fn tell(&mut self, _point: usize, _cost: Option<f64>) {}

    fn take(&mut self, point: usize) -> bool {
        self.pool.take(point)
    }
}
