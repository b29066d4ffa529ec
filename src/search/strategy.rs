//! What a strategy is: the [`Strategy`] trait the tuner drives, the [`StrategyInfo`] each
//! strategy registers itself with (see [`super::registry`]), and the loop that drives one.

use super::space::SearchSpace;

/// A way of choosing which configurations to measure next.
pub trait Strategy {
    fn name(&self) -> &'static str;
    /// Up to `n` points (indices into `space.points`) never asked before; empty when it has
    /// nothing more to propose.
    fn ask(&mut self, n: usize) -> Vec<usize>;
    /// The measured cost of an asked point (median ms, lower is better); None = failed
    /// (compile error, wrong answer, fault).
    fn tell(&mut self, point: usize, cost: Option<f64>);
    /// Marks `point` as measured on someone else's proposal (a stored winner the tuner measures
    /// first, see `--no-warm-start`): it is never proposed, and its cost, told later, counts
    /// as if the strategy had asked for it (an annealing start, a genetic parent). False when
    /// it was asked already. Call before the first `ask`.
    fn take(&mut self, point: usize) -> bool;
    /// Where a ranking strategy first placed `point`, as (rank from 0, points ranked): how
    /// good its model was, told for the run's winner. `None` for strategies without one.
    fn first_rank(&self, _point: usize) -> Option<(usize, usize)> {
        None
    }
    /// How many of its next proposals do not depend on what it is told (a fixed first round):
    /// the tuner asks for them in one round, so they compile together.
    fn unconditional(&self) -> usize {
        0
    }
}

/// A search strategy as the tuner offers it: the name `--strategy` takes, what it does in
/// one line (the CLI's help for the value), and how it is built for a space, a seed and a
/// horizon (the number of variants the schedule plans for).
pub struct StrategyInfo {
    pub name: &'static str,
    pub about: &'static str,
    /// The variant budget of a run that gives none.
    pub budget: usize,
    pub(super) build: fn(&SearchSpace, u64, usize) -> Box<dyn Strategy>,
}

/// Log of a measured cost; failures (and times that cannot be real) are infinitely bad.
pub(super) fn score(cost: Option<f64>) -> f64 {
    match cost {
        Some(c) if c.is_finite() && c > 0.0 => c.ln(),
        _ => f64::INFINITY,
    }
}

/// Drives a strategy in batches until the budget (variants) or the strategy runs out; `eval`
/// measures a batch and returns one cost per point. Returns every (point, cost) in order.
pub fn drive(
    s: &mut dyn Strategy,
    budget: usize,
    batch: usize,
    mut eval: impl FnMut(&[usize]) -> Vec<Option<f64>>,
) -> Vec<(usize, Option<f64>)> {
    let batch = batch.max(1);
    let mut out: Vec<(usize, Option<f64>)> = Vec::new();
    while out.len() < budget {
        let mut points = s.ask(batch.min(budget - out.len()));
        // A strategy that returns more than it was asked for must not overrun the budget.
        points.truncate(budget - out.len());
        if points.is_empty() {
            break;
        }
        let costs = eval(&points);
        assert_eq!(
            costs.len(),
            points.len(),
            "eval must return one cost per point"
        );
        for (&p, &c) in points.iter().zip(&costs) {
            s.tell(p, c);
            out.push((p, c));
        }
    }
    out
}
