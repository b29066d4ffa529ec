//! The `anneal` strategy: simulated annealing over one-parameter moves, several chains at once
//! so a batch is several distinct proposals.

use super::budget::DEFAULT_BUDGET;
use super::lattice::Lattice;
use super::pool::Pool;
use super::rng::Rng;
use super::space::SearchSpace;
use super::strategy::{score, Strategy, StrategyInfo};
use std::collections::HashMap;

/// This strategy's entry in [`super::registry::REGISTRY`].
pub(super) const INFO: StrategyInfo = StrategyInfo {
    name: "anneal",
    about: "simulated annealing over neighbouring configurations, within --budget",
    budget: DEFAULT_BUDGET,
    build: |space, seed, horizon| Box::new(Anneal::new(space, seed, horizon)),
};

/// Running mean and variance (Welford) of the finite log-costs seen so far.
#[derive(Debug, Clone, Default)]
struct Spread {
    n: f64,
    mean: f64,
    m2: f64,
}

impl Spread {
    fn add(&mut self, x: f64) {
        self.n += 1.0;
        let d = x - self.mean;
        self.mean += d / self.n;
        self.m2 += d * (x - self.mean);
    }

    fn std(&self) -> f64 {
        if self.n < 2.0 {
            0.0
        } else {
            (self.m2 / (self.n - 1.0)).sqrt()
        }
    }
}

/// One annealing chain.
#[derive(Debug, Clone)]
struct Chain {
    /// The state the chain moves from, with its log-cost; None while its start is unknown.
    current: Option<(usize, f64)>,
    /// The chain's best log-cost since its last restart, and how many of its results since
    /// then did not improve on it.
    best: f64,
    stale: usize,
    /// Bumped at each restart, so results of proposals made before it are not applied to the
    /// new state.
    epoch: u64,
}

impl Chain {
    fn fresh(epoch: u64) -> Chain {
        Chain {
            current: None,
            best: f64::INFINITY,
            stale: 0,
            epoch,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Proposal {
    chain: usize,
    epoch: u64,
    /// A random starting point rather than a move from the chain's state.
    start: bool,
}

/// Simulated annealing over the discrete space, batched.
///
/// A batch of `n` proposals has to be `n` distinct useful points although no result is in
/// yet, so the search runs [`Anneal::CHAINS`] chains and deals the batch out among them; a
/// chain proposes several distinct one-parameter neighbours of its state, each drawn with
/// weight 1/steps² so adjacent values are preferred without excluding the far ones. A chain
/// without a state proposes random points and starts from the best of them. Results apply
/// Metropolis acceptance on log-cost, at a temperature proportional to the spread of the
/// log-costs seen so far (so the same schedule suits flat and steep landscapes) and cooling
/// geometrically over the budget. A chain that has not improved for [`Anneal::PATIENCE`]
/// results, or whose neighbourhood is used up, restarts: alternately from the best point
/// found so far and from a random point.
struct Anneal {
    lat: Lattice,
    pool: Pool,
    rng: Rng,
    chains: Vec<Chain>,
    next_chain: usize,
    pending: HashMap<usize, Proposal>,
    spread: Spread,
    best: Option<(usize, f64)>,
    told: usize,
    horizon: usize,
    restarts: u64,
    /// Points taken so far (see [`Strategy::take`]), which spreads them over the chains.
    seeded: usize,
}

impl Anneal {
    const CHAINS: usize = 4;
    const PATIENCE: usize = 12;
    /// Start and end temperature as a fraction of the log-cost spread.
    const T_START: f64 = 0.5;
    const T_END: f64 = 0.01;

    fn new(space: &SearchSpace, seed: u64, horizon: usize) -> Anneal {
        Anneal {
            lat: Lattice::new(space),
            pool: Pool::new(space.len()),
            rng: Rng::new(seed),
            chains: (0..Self::CHAINS).map(|_| Chain::fresh(0)).collect(),
            next_chain: 0,
            pending: HashMap::new(),
            spread: Spread::default(),
            best: None,
            told: 0,
            horizon,
            restarts: 0,
            seeded: 0,
        }
    }

    fn temperature(&self) -> f64 {
        let progress = (self.told as f64 / self.horizon as f64).min(1.0);
        let scale = self.spread.std().max(0.01);
        scale * Self::T_START * (Self::T_END / Self::T_START).powf(progress)
    }

    /// Moves chain `c` to a new place: the best point so far when it still has free
    /// neighbours (every other restart), otherwise a random start.
    fn restart(&mut self, c: usize) {
        self.restarts += 1;
        let epoch = self.chains[c].epoch + 1;
        self.chains[c] = Chain::fresh(epoch);
        if self.restarts % 2 == 1 {
            if let Some((p, s)) = self.best {
                if !self.lat.free_neighbours(p, &self.pool).is_empty() {
                    self.chains[c].current = Some((p, s));
                    self.chains[c].best = s;
                }
            }
        }
    }

    /// One proposal for chain `c`, or None when no point is left.
    fn propose(&mut self, c: usize) -> Option<usize> {
        let chain = &self.chains[c];
        let state = chain.current.filter(|(_, s)| s.is_finite());
        let Some((p, _)) = state else {
            let q = self.pool.take_random(&mut self.rng)?;
            self.pending.insert(
                q,
                Proposal {
                    chain: c,
                    epoch: chain.epoch,
                    start: true,
                },
            );
            return Some(q);
        };
        let near = self.lat.free_neighbours(p, &self.pool);
        if near.is_empty() {
            // Nothing left around this state: jump.
            self.restart(c);
            return self.propose(c);
        }
        let weights: Vec<f64> = near
            .iter()
            .map(|&(_, steps)| 1.0 / (steps * steps) as f64)
            .collect();
        let q = near[self.rng.weighted(&weights)].0;
        self.pool.take(q);
        self.pending.insert(
            q,
            Proposal {
                chain: c,
                epoch: self.chains[c].epoch,
                start: false,
            },
        );
        Some(q)
    }
}

impl Strategy for Anneal {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn ask(&mut self, n: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(n.min(self.pool.remaining.len()));
        while out.len() < n {
            let c = self.next_chain;
            self.next_chain = (c + 1) % self.chains.len();
            match self.propose(c) {
                Some(q) => out.push(q),
                None => break,
            }
        }
        out
    }

    /// A taken point is a start of the next chain in turn, competing with that chain's other
    /// starts (a chain begins at the best of them), so a good stored winner becomes a chain's
    /// first state and its neighbourhood is searched first.
    fn take(&mut self, point: usize) -> bool {
        if !self.pool.take(point) {
            return false;
        }
        let c = self.seeded % self.chains.len();
        self.seeded += 1;
        self.pending.insert(
            point,
            Proposal {
                chain: c,
                epoch: self.chains[c].epoch,
                start: true,
            },
        );
        true
    }

    fn tell(&mut self, point: usize, cost: Option<f64>) {
        let Some(prop) = self.pending.remove(&point) else {
            return;
        };
        let s = score(cost);
        self.told += 1;
        if s.is_finite() {
            self.spread.add(s);
            if self.best.is_none_or(|(_, b)| s < b) {
                self.best = Some((point, s));
            }
        }
        let temperature = self.temperature();
        let chain = &mut self.chains[prop.chain];
        if chain.epoch != prop.epoch {
            return;
        }
        let accept = match chain.current {
            None => true,
            // A start competes with the other starts: the chain begins at the best of them.
            Some((_, cur)) if prop.start => s < cur,
            Some((_, cur)) => {
                s <= cur
                    || (s.is_finite()
                        && (cur.is_infinite()
                            || self.rng.unit() < (-(s - cur) / temperature).exp()))
            }
        };
        if accept {
            chain.current = Some((point, s));
        }
        if s < chain.best {
            chain.best = s;
            chain.stale = 0;
        } else {
            chain.stale += 1;
            if chain.stale >= Self::PATIENCE {
                self.restart(prop.chain);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::search::registry::strategy;
    use crate::search::space::SearchSpace;

    #[test]
    fn anneal_moves_to_one_parameter_neighbours_of_measured_points() {
        // An 8 x 8 x 8 bowl: large enough that no chain runs out of neighbours or patience
        // in the rounds checked, so every proposal after the starts must be a move.
        let names = vec!["A".to_string(), "B".to_string(), "C".to_string()];
        let mut rows = Vec::new();
        for a in 0..8 {
            for b in 0..8 {
                for c in 0..8 {
                    rows.push(vec![a.to_string(), b.to_string(), c.to_string()]);
                }
            }
        }
        let space = SearchSpace::from_rows(names, &rows).unwrap();
        let cost = |p: usize| {
            let c = &space.points[p];
            Some(1.0 + c.iter().map(|&x| (x as f64 - 4.5).powi(2)).sum::<f64>())
        };
        let mut s = strategy("anneal", &space, 4, Some(100)).unwrap();
        let mut measured: Vec<usize> = Vec::new();
        for round in 0..4 {
            let batch = s.ask(16);
            assert_eq!(batch.len(), 16);
            if round > 0 {
                for &q in &batch {
                    let near = |p: &usize| {
                        let (a, b) = (&space.points[*p], &space.points[q]);
                        (0..3).filter(|&k| a[k] != b[k]).count() == 1
                    };
                    assert!(
                        measured.iter().any(near),
                        "round {round}: {}",
                        space.label(q)
                    );
                }
            }
            for &q in &batch {
                s.tell(q, cost(q));
            }
            measured.extend(batch);
        }
    }
}
