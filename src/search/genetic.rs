//! The `genetic` strategy: a steady-state genetic search over the live points.

use super::budget::DEFAULT_BUDGET;
use super::lattice::Lattice;
use super::pool::Pool;
use super::rng::Rng;
use super::space::SearchSpace;
use super::strategy::{score, Strategy, StrategyInfo};

/// This strategy's entry in [`super::registry::REGISTRY`].
pub(super) const INFO: StrategyInfo = StrategyInfo {
    name: "genetic",
    about: "a genetic search (selection, crossover, mutation), within --budget",
    budget: DEFAULT_BUDGET,
    build: |space, seed, horizon| Box::new(Genetic::new(space, seed, horizon)),
};

/// A steady-state genetic algorithm.
///
/// The population is the best `size` points measured so far (failed points never enter it),
/// so a batch can be bred from whatever results are in: the first `size` proposals are
/// random, later ones children. A child takes each parameter from one of two parents chosen
/// by tournament (3 drawn, the best wins), then, half the time or whenever that combination
/// was measured already, one parameter changes to another value (an adjacent one half the
/// time). A child that is not a live point, or was measured, becomes the nearest free live
/// point (fewest differing parameters, then fewest value steps).
struct Genetic {
    lat: Lattice,
    pool: Pool,
    rng: Rng,
    /// (point, log-cost), best first.
    population: Vec<(usize, f64)>,
    size: usize,
    random_asked: usize,
}

impl Genetic {
    const TOURNAMENT: usize = 3;

    fn new(space: &SearchSpace, seed: u64, horizon: usize) -> Genetic {
        Genetic {
            lat: Lattice::new(space),
            pool: Pool::new(space.len()),
            rng: Rng::new(seed),
            population: Vec::new(),
            size: (horizon / 6).clamp(8, 32),
            random_asked: 0,
        }
    }

    fn select(&mut self) -> usize {
        let n = self.population.len();
        let winner = (0..Self::TOURNAMENT)
            .map(|_| self.rng.below(n))
            .min()
            .expect("a tournament has entrants");
        self.population[winner].0
    }

    fn mutate(&mut self, coords: &mut [usize]) {
        let free: Vec<usize> = (0..coords.len())
            .filter(|&k| self.lat.sizes[k] > 1)
            .collect();
        if free.is_empty() {
            return;
        }
        let k = free[self.rng.below(free.len())];
        let (own, size) = (coords[k], self.lat.sizes[k]);
        coords[k] = if self.rng.chance(0.5) {
            match (own, self.rng.chance(0.5)) {
                (0, _) => 1,
                (v, _) if v + 1 == size => v - 1,
                (v, true) => v + 1,
                (v, false) => v - 1,
            }
        } else {
            let v = self.rng.below(size - 1);
            if v >= own {
                v + 1
            } else {
                v
            }
        };
    }

    fn child(&mut self) -> Option<usize> {
        let a = self.select();
        let b = self.select();
        let mut coords: Vec<usize> = self.lat.points[a]
            .iter()
            .zip(&self.lat.points[b])
            .map(|(&x, &y)| if self.rng.chance(0.5) { x } else { y })
            .collect();
        if self.rng.chance(0.5) {
            self.mutate(&mut coords);
        }
        // A combination already measured gets a few more mutations before repair takes over.
        for _ in 0..4 {
            match self.lat.lookup.get(&coords) {
                Some(&q) if !self.pool.is_free(q) => self.mutate(&mut coords),
                _ => break,
            }
        }
        let q = self.lat.nearest_free(&coords, &self.pool, &mut self.rng)?;
        self.pool.take(q);
        Some(q)
    }
}

impl Strategy for Genetic {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn ask(&mut self, n: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(n.min(self.pool.remaining.len()));
        while out.len() < n {
            let q = if self.random_asked < self.size || self.population.len() < 2 {
                self.random_asked += 1;
                self.pool.take_random(&mut self.rng)
            } else {
                self.child()
            };
            match q {
                Some(q) => out.push(q),
                None => break,
            }
        }
        out
    }

    fn tell(&mut self, point: usize, cost: Option<f64>) {
        let s = score(cost);
        // Failures never breed; a point not asked (or told twice) is not a result.
        if !s.is_finite()
            || self.pool.is_free(point)
            || self.population.iter().any(|&(q, _)| q == point)
        {
            return;
        }
        let at = self.population.partition_point(|&(_, x)| x <= s);
        if at < self.size {
            self.population.insert(at, (point, s));
            self.population.truncate(self.size);
        }
    }

    /// A taken point joins the population like any measured one (when it is good enough).
    fn take(&mut self, point: usize) -> bool {
        self.pool.take(point)
    }
}
