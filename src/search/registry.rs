//! The strategies the tuner offers, in one table: `--strategy`'s values and their help, the
//! names a replay runs, and each strategy's default budget all come from [`REGISTRY`].
//! A new strategy is a file with its `INFO` and one entry here.

use super::space::SearchSpace;
use super::strategy::{Strategy, StrategyInfo};
use super::{anneal, exhaustive, genetic, model, random};
use crate::error::{Error, Result};

/// Every strategy [`strategy`] builds, in the order the CLI lists them.
pub const REGISTRY: &[StrategyInfo] = &[
    exhaustive::INFO,
    random::INFO,
    model::INFO,
    anneal::INFO,
    genetic::INFO,
];

/// The names [`strategy`] accepts: those of [`REGISTRY`], in its order.
pub const STRATEGIES: &[&str] = &registry_names();

const fn registry_names() -> [&'static str; REGISTRY.len()] {
    let mut names = [""; REGISTRY.len()];
    let mut i = 0;
    while i < REGISTRY.len() {
        names[i] = REGISTRY[i].name;
        i += 1;
    }
    names
}

/// The registry's entry for `name`; an unknown name is bad input, said with the known ones.
pub fn lookup(name: &str) -> Result<&'static StrategyInfo> {
    REGISTRY.iter().find(|s| s.name == name).ok_or_else(|| {
        Error::Usage(format!(
            "unknown search strategy '{name}' (known strategies: {})",
            STRATEGIES.join(", ")
        ))
    })
}

/// A strategy by name, for `space`, with its random choices fixed by `seed`. `budget_hint`
/// (the number of variants the run may measure, when known) sets the annealing schedule and
/// the population size; without it they are set from the size of the space.
pub fn strategy(
    name: &str,
    space: &SearchSpace,
    seed: u64,
    budget_hint: Option<usize>,
) -> Result<Box<dyn Strategy>> {
    let info = lookup(name)?;
    space.check()?;
    let n = space.len();
    // A run without a variant budget (a time budget) still needs a horizon for the schedule:
    // a tenth of the space, at least 100, is what a time budget typically buys.
    let horizon = budget_hint.unwrap_or((n / 10).max(100)).clamp(1, n.max(1));
    Ok((info.build)(space, seed, horizon))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::space::tests::{cost_of, holey};
    use crate::search::strategy::drive;

    /// The registry is the list of names, and an unknown name is an error that lists them
    /// (no fallback to some strategy).
    #[test]
    fn strategies_come_from_the_registry_and_unknown_names_are_refused() {
        let names: Vec<&str> = REGISTRY.iter().map(|s| s.name).collect();
        assert_eq!(names, STRATEGIES);
        let err = lookup("simplex").err().expect("unknown").to_string();
        assert!(
            err.contains("simplex") && err.contains("exhaustive, random, model, anneal, genetic"),
            "{err}"
        );
        assert!(REGISTRY.iter().all(|s| !s.about.is_empty()));
    }

    /// A point taken before the search (a stored winner measured first) is never proposed
    /// again by any strategy, and an annealing chain starts from it: its first proposal is a
    /// one-parameter move away.
    #[test]
    fn taken_points_are_never_proposed_and_anneal_starts_from_them() {
        let space = holey();
        let optimum = (0..space.len())
            .min_by(|&a, &b| {
                let c = |p| cost_of(&space, p).unwrap_or(f64::INFINITY);
                c(a).total_cmp(&c(b))
            })
            .unwrap();
        for name in STRATEGIES {
            for seed in 0..5 {
                let mut s = strategy(name, &space, seed, Some(20)).unwrap();
                assert!(s.take(optimum), "{name}");
                assert!(!s.take(optimum), "{name}: taken twice");
                s.tell(optimum, cost_of(&space, optimum));
                let first = s.ask(1);
                if *name == "anneal" {
                    let moved = space.points[first[0]]
                        .iter()
                        .zip(&space.points[optimum])
                        .filter(|(a, b)| a != b)
                        .count();
                    assert_eq!(moved, 1, "seed {seed}: chain 0 starts at the taken point");
                }
                let rest = drive(s.as_mut(), usize::MAX, 4, |b| {
                    b.iter().map(|&p| cost_of(&space, p)).collect()
                });
                let mut asked: Vec<usize> = first
                    .iter()
                    .copied()
                    .chain(rest.iter().map(|&(p, _)| p))
                    .collect();
                assert!(!asked.contains(&optimum), "{name} seed {seed}");
                asked.sort_unstable();
                asked.dedup();
                assert_eq!(
                    asked.len(),
                    space.len() - 1,
                    "{name} seed {seed}: every other point"
                );
            }
        }
    }

    #[test]
    fn no_strategy_repeats_and_all_end_with_the_whole_space() {
        let space = holey();
        for name in STRATEGIES {
            for seed in 0..5 {
                let mut s = strategy(name, &space, seed, Some(20)).unwrap();
                let seen = drive(s.as_mut(), usize::MAX, 4, |b| {
                    b.iter().map(|&p| cost_of(&space, p)).collect()
                });
                let mut points: Vec<usize> = seen.iter().map(|&(p, _)| p).collect();
                points.sort_unstable();
                assert_eq!(
                    points,
                    (0..space.len()).collect::<Vec<_>>(),
                    "{name} seed {seed}"
                );
                assert!(
                    s.ask(1).is_empty(),
                    "{name} proposes after the space is used up"
                );
            }
        }
    }

    #[test]
    fn unknown_strategy_lists_the_known_ones() {
        let e = match strategy("hillclimb", &holey(), 0, None) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted an unknown strategy"),
        };
        assert!(
            e.contains("'hillclimb'") && e.contains("exhaustive, random, model, anneal, genetic"),
            "{e}"
        );
    }

    #[test]
    fn inconsistent_space_is_rejected() {
        let mut space = holey();
        space.points.push(vec![0, 9, 0]);
        assert!(strategy("random", &space, 0, None).is_err());
    }

    #[test]
    fn empty_space_proposes_nothing() {
        let space = SearchSpace::default();
        for name in STRATEGIES {
            let mut s = strategy(name, &space, 0, None).unwrap();
            assert!(s.ask(4).is_empty(), "{name}");
        }
    }
}
