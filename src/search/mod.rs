//! Search strategies: which configurations of a space to measure when there are too many to
//! measure them all.
//!
//! The tuner owns measuring; a [`Strategy`](strategy::Strategy) only proposes points (`ask`) and learns their cost
//! (`tell`). Points are indices into [`SearchSpace::points`](space::SearchSpace::points), the live configurations only,
//! so no strategy can propose something a constraint already removed. Every strategy keeps
//! the set of points it has asked and never proposes one twice: a measurement costs a
//! compile and a timing, and repeating it would only spend the budget on a number we have.
//!
//! Costs are compared on a log scale. Kernel times differ by orders of magnitude between
//! shapes, so an absolute threshold ("accept 0.01 ms worse") would mean something different
//! for every run; "accept 10 % worse" means the same everywhere. A failed point (compile
//! error, wrong answer, fault) is infinitely bad: no chain moves onto it and no parent is
//! drawn from it, but it still counts against the budget, as it does on the GPU.
//!
//! The strategies are own code: the crates for metaheuristics work on continuous vectors or
//! take ownership of the evaluation loop, while here the space is a sparse set of discrete
//! points, the tuner evaluates batches in parallel, and the no-repeat rule has to hold across
//! every move. Randomness comes from `rng`, the same sequence for a seed everywhere.
//!
//! The parts: [`space`] (the points), [`strategy`] (the trait and the loop that drives it),
//! [`registry`] (the table of strategies), [`budget`], and one file per strategy
//! (`exhaustive`, `random`, [`model`], `anneal`, `genetic`) on shared helpers (`rng`, `pool`,
//! `lattice`); [`replay`] runs them against measured landscapes. Adding a strategy is one file
//! with its `INFO` (name, help line, default budget, constructor), its `mod` line here and
//! its entry in [`registry::REGISTRY`].

mod anneal;
pub mod budget;
mod exhaustive;
mod genetic;
mod lattice;
pub mod model;
mod pool;
mod random;
pub mod registry;
pub mod replay;
mod rng;
pub mod space;
pub mod strategy;
