//! The `exhaustive` strategy: every point, in the space's order.

use super::budget::DEFAULT_BUDGET;
use super::strategy::{Strategy, StrategyInfo};

/// This strategy's entry in [`super::registry::REGISTRY`].
pub(super) const INFO: StrategyInfo = StrategyInfo {
    name: "exhaustive",
    about: "times every valid configuration, in the space's order",
    budget: DEFAULT_BUDGET,
    build: |space, _, _| {
        Box::new(Exhaustive {
            next: 0,
            len: space.len(),
            taken: Default::default(),
        })
    },
};

/// Every point in order: the reference the others are measured against.
struct Exhaustive {
    next: usize,
    len: usize,
    /// Points measured on someone else's proposal, skipped.
    taken: std::collections::HashSet<usize>,
}

impl Strategy for Exhaustive {
    fn name(&self) -> &'static str {
        INFO.name
    }

    fn ask(&mut self, n: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(n.min(self.len - self.next));
        while out.len() < n && self.next < self.len {
            if !self.taken.contains(&self.next) {
                out.push(self.next);
            }
            self.next += 1;
        }
        out
    }

    fn tell(&mut self, _point: usize, _cost: Option<f64>) {}

    fn take(&mut self, point: usize) -> bool {
        point >= self.next && point < self.len && self.taken.insert(point)
    }
}

#[cfg(test)]
mod tests {
    use crate::search::registry::strategy;
    use crate::search::space::tests::{cost_of, holey};
    use crate::search::strategy::drive;

    #[test]
    fn exhaustive_covers_every_point_once_in_order() {
        let space = holey();
        let mut s = strategy("exhaustive", &space, 7, None).unwrap();
        let seen = drive(s.as_mut(), usize::MAX, 5, |b| {
            b.iter().map(|&p| cost_of(&space, p)).collect()
        });
        let order: Vec<usize> = seen.iter().map(|&(p, _)| p).collect();
        assert_eq!(order, (0..space.len()).collect::<Vec<_>>());
        assert!(s.ask(3).is_empty());
    }
}
