//! Search strategies: which configurations of a space to measure when there are too many to
//! measure them all.
//!
//! The tuner owns measuring; a [`Strategy`] only proposes points (`ask`) and learns their cost
//! (`tell`). Points are indices into [`SearchSpace::points`], the live configurations only,
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
//! Randomness comes from a SplitMix64 generator written here rather than from `rand`:
//! `rand`'s `StdRng` may change its algorithm between releases and `SmallRng` differs between
//! 32- and 64-bit targets, while a replay or a CI test must give the same proposals for a
//! seed everywhere and forever. The strategies themselves are own code too: the crates for
//! metaheuristics work on continuous vectors or take ownership of the evaluation loop, while
//! here the space is a sparse set of discrete points, the tuner evaluates batches in
//! parallel, and the no-repeat rule has to hold across every move.

pub mod model;
pub mod replay;

use crate::error::{Error, Result};
use crate::spec::space::Candidate;
use std::collections::HashMap;

/// The live (valid) configurations of a space, as value indices per parameter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SearchSpace {
    pub names: Vec<String>,
    /// The values of each parameter, in the order "adjacent" refers to (numeric order for
    /// integer parameters).
    pub values: Vec<Vec<String>>,
    /// Each live configuration: for each parameter, an index into `values`.
    pub points: Vec<Vec<usize>>,
}

impl SearchSpace {
    /// Builds a space from the values of each live configuration (one row per configuration,
    /// one column per name). Integer-valued parameters are ordered numerically, so that a
    /// neighbour one step away is the next size up or down; other parameters keep the order
    /// in which their values first appear. A configuration listed twice is an error: it would
    /// be two points with one cost.
    pub fn from_rows(names: Vec<String>, rows: &[Vec<String>]) -> Result<SearchSpace> {
        let mut values: Vec<Vec<String>> = vec![Vec::new(); names.len()];
        for row in rows {
            if row.len() != names.len() {
                return Err(Error::Usage(format!(
                    "search space: a configuration has {} values for {} parameters ({})",
                    row.len(),
                    names.len(),
                    names.join(", ")
                )));
            }
            for (list, v) in values.iter_mut().zip(row) {
                if !list.contains(v) {
                    list.push(v.clone());
                }
            }
        }
        for list in &mut values {
            if list.iter().all(|v| v.trim().parse::<i64>().is_ok()) {
                list.sort_by_key(|v| v.trim().parse::<i64>().unwrap_or(0));
            }
        }
        let mut points = Vec::with_capacity(rows.len());
        let mut seen = HashMap::new();
        for row in rows {
            let point: Vec<usize> = row
                .iter()
                .zip(&values)
                .map(|(v, list)| list.iter().position(|x| x == v).unwrap_or(0))
                .collect();
            if seen.insert(point.clone(), ()).is_some() {
                let label: Vec<String> = names
                    .iter()
                    .zip(row)
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect();
                return Err(Error::Usage(format!(
                    "search space: configuration {} appears twice",
                    label.join(" ")
                )));
            }
            points.push(point);
        }
        Ok(SearchSpace {
            names,
            values,
            points,
        })
    }

    /// The candidates `live` (positions in `candidates`, e.g. the unpruned ones, or a shard's
    /// share of them) as a space, and for each point its candidate's position (what the tuner
    /// needs to go from a proposal to a kernel). Nothing is copied but the value labels.
    pub fn from_candidates(
        candidates: &[Candidate],
        live: &[usize],
    ) -> Result<(SearchSpace, Vec<usize>)> {
        let names: Vec<String> = candidates
            .first()
            .map(|c| c.config.values().map(|(n, _)| n.to_string()).collect())
            .unwrap_or_default();
        let rows: Vec<Vec<String>> = live
            .iter()
            .map(|&i| {
                let values = candidates[i].config.values();
                values.map(|(_, v)| v.to_string()).collect()
            })
            .collect();
        Ok((SearchSpace::from_rows(names, &rows)?, live.to_vec()))
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// `A=1 B=x`, the form the tables print.
    pub fn label(&self, point: usize) -> String {
        let parts: Vec<String> = self.points[point]
            .iter()
            .enumerate()
            .map(|(k, &v)| format!("{}={}", self.names[k], self.values[k][v]))
            .collect();
        parts.join(" ")
    }

    /// A space whose fields were filled by hand can be inconsistent; the strategies index
    /// with these numbers, so they are checked once up front instead of panicking later.
    fn check(&self) -> Result<()> {
        let bad = |why: String| Err(Error::Usage(format!("search space: {why}")));
        if self.values.len() != self.names.len() {
            return bad(format!(
                "{} value lists for {} parameters",
                self.values.len(),
                self.names.len()
            ));
        }
        let mut seen = HashMap::new();
        for (i, p) in self.points.iter().enumerate() {
            if p.len() != self.names.len() {
                return bad(format!("point {i} has {} coordinates", p.len()));
            }
            if let Some(k) = (0..p.len()).find(|&k| p[k] >= self.values[k].len()) {
                return bad(format!(
                    "point {i} uses value {} of {}, which has {} values",
                    p[k],
                    self.names[k],
                    self.values[k].len()
                ));
            }
            if let Some(first) = seen.insert(p.clone(), i) {
                return bad(format!("points {first} and {i} are the same configuration"));
            }
        }
        Ok(())
    }
}

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

/// How much searching a run may do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// Measure at most this many configurations.
    Variants(usize),
    /// Stop proposing once this many seconds have passed. [`drive`] counts variants only; with
    /// a time budget the caller runs the same ask/measure/tell loop and stops asking when the
    /// time is up.
    Seconds(f64),
}

/// `200` → 200 variants; `90s`, `2m`, `1.5h` → a time. Zero, negatives and anything else are
/// a usage error that says what is accepted.
pub fn parse_budget(text: &str) -> Result<Budget> {
    let t = text.trim();
    let bad = |why: &str| {
        Error::Usage(format!(
            "invalid budget '{text}': {why} (expected a number of variants such as 200, or a time such as 90s, 2m or 1h)"
        ))
    };
    if t.is_empty() {
        return Err(bad("it is empty"));
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return match t.parse::<usize>() {
            Ok(0) => Err(bad("zero variants measure nothing")),
            Ok(n) => Ok(Budget::Variants(n)),
            Err(_) => Err(bad("the number is too large")),
        };
    }
    let split = t
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| bad("it is neither a whole number nor a time"))?;
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad("unknown time unit")),
    };
    let number = number.trim();
    let value: f64 = number
        .parse()
        .map_err(|_| bad("it is neither a whole number nor a time"))?;
    if number.starts_with('-') || value <= 0.0 {
        return Err(bad("it must be positive"));
    }
    if !value.is_finite() {
        return Err(bad("it must be finite"));
    }
    Ok(Budget::Seconds(value * scale))
}

/// A search strategy as the tuner offers it: the name `--strategy` takes, what it does in
/// one line (the CLI's help for the value), and how it is built for a space, a seed and a
/// horizon (the number of variants the schedule plans for).
pub struct StrategyInfo {
    pub name: &'static str,
    pub about: &'static str,
    /// The variant budget of a run that gives none.
    pub budget: usize,
    build: fn(&SearchSpace, u64, usize) -> Box<dyn Strategy>,
}

/// The variant budget of a search that gives none, except where its entry says otherwise.
pub const DEFAULT_BUDGET: usize = 256;

/// Every strategy [`strategy`] builds, in the order the CLI lists them.
pub const REGISTRY: &[StrategyInfo] = &[
    StrategyInfo {
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
    },
    StrategyInfo {
        name: "random",
        about: "measures --budget configurations drawn at random, each once",
        budget: DEFAULT_BUDGET,
        build: |space, seed, _| {
            Box::new(RandomSearch {
                pool: Pool::new(space.len()),
                rng: Rng::new(seed),
            })
        },
    },
    StrategyInfo {
        name: "model",
        about: "an all-pairs set of configurations, then the ones a model fitted to the measurements ranks fastest, within --budget",
        budget: model::MODEL_BUDGET,
        build: |space, _, horizon| Box::new(model::Model::new(space, horizon)),
    },
    StrategyInfo {
        name: "anneal",
        about: "simulated annealing over neighbouring configurations, within --budget",
        budget: DEFAULT_BUDGET,
        build: |space, seed, horizon| Box::new(Anneal::new(space, seed, horizon)),
    },
    StrategyInfo {
        name: "genetic",
        about: "a genetic search (selection, crossover, mutation), within --budget",
        budget: DEFAULT_BUDGET,
        build: |space, seed, horizon| Box::new(Genetic::new(space, seed, horizon)),
    },
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

/// SplitMix64 (Steele, Lea and Flood 2014): tiny, fast, and the same sequence on every
/// platform, which is the property the replay and the tests depend on.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), without modulo bias: draws in the incomplete top range are
    /// rejected.
    fn below(&mut self, n: usize) -> usize {
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
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// An index drawn with probability proportional to `weights` (not all zero).
    fn weighted(&mut self, weights: &[f64]) -> usize {
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

/// The points not asked yet, with O(1) removal of a given point and O(1) uniform draws: the
/// strategies mix "this particular neighbour" and "any point at random", and both must keep
/// the never-twice rule.
#[derive(Debug, Clone)]
struct Pool {
    remaining: Vec<usize>,
    /// Position of each point in `remaining`, or `usize::MAX` once taken.
    at: Vec<usize>,
}

impl Pool {
    fn new(n: usize) -> Pool {
        Pool {
            remaining: (0..n).collect(),
            at: (0..n).collect(),
        }
    }

    fn is_free(&self, p: usize) -> bool {
        self.at[p] != usize::MAX
    }

    fn is_empty(&self) -> bool {
        self.remaining.is_empty()
    }

    /// Marks `p` asked; false when it already was, or is no point of the space.
    fn take(&mut self, p: usize) -> bool {
        let Some(&i) = self.at.get(p) else {
            return false;
        };
        if i == usize::MAX {
            return false;
        }
        let last = *self.remaining.last().expect("a free point is in the list");
        self.remaining.swap_remove(i);
        if last != p {
            self.at[last] = i;
        }
        self.at[p] = usize::MAX;
        true
    }

    fn take_random(&mut self, rng: &mut Rng) -> Option<usize> {
        if self.remaining.is_empty() {
            return None;
        }
        let p = self.remaining[rng.below(self.remaining.len())];
        self.take(p);
        Some(p)
    }
}

/// The geometry of the live points: lookups from coordinates to point, one-parameter
/// neighbours, and the nearest live point to an arbitrary combination.
#[derive(Debug, Clone)]
struct Lattice {
    sizes: Vec<usize>,
    points: Vec<Vec<usize>>,
    lookup: HashMap<Vec<usize>, usize>,
}

impl Lattice {
    fn new(space: &SearchSpace) -> Lattice {
        Lattice {
            sizes: space.values.iter().map(Vec::len).collect(),
            points: space.points.clone(),
            lookup: space
                .points
                .iter()
                .enumerate()
                .map(|(i, p)| (p.clone(), i))
                .collect(),
        }
    }

    /// Free live points that differ from `p` in one parameter, each with how many value
    /// steps away it is.
    fn free_neighbours(&self, p: usize, pool: &Pool) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut coords = self.points[p].clone();
        for k in 0..coords.len() {
            let own = coords[k];
            for v in 0..self.sizes[k] {
                if v == own {
                    continue;
                }
                coords[k] = v;
                if let Some(&q) = self.lookup.get(&coords) {
                    if pool.is_free(q) {
                        out.push((q, v.abs_diff(own)));
                    }
                }
            }
            coords[k] = own;
        }
        out
    }

    /// The free live point closest to `coords`: fewest differing parameters first, then fewest
    /// value steps, ties broken at random. Radius 0 to 2 are searched by enumerating changes
    /// (cheap however large the space); beyond that by scanning the free points.
    fn nearest_free(&self, coords: &[usize], pool: &Pool, rng: &mut Rng) -> Option<usize> {
        if pool.is_empty() {
            return None;
        }
        if let Some(&q) = self.lookup.get(coords) {
            if pool.is_free(q) {
                return Some(q);
            }
        }
        let mut best: Vec<usize> = Vec::new();
        let mut best_steps = usize::MAX;
        let mut consider = |q: usize, steps: usize, best: &mut Vec<usize>| {
            if steps < best_steps {
                best_steps = steps;
                best.clear();
            }
            if steps == best_steps {
                best.push(q);
            }
        };
        let dims = coords.len();
        let mut c = coords.to_vec();
        for a in 0..dims {
            for va in 0..self.sizes[a] {
                if va == coords[a] {
                    continue;
                }
                c[a] = va;
                if let Some(&q) = self.lookup.get(&c) {
                    if pool.is_free(q) {
                        consider(q, va.abs_diff(coords[a]), &mut best);
                    }
                }
            }
            c[a] = coords[a];
        }
        if best.is_empty() {
            for a in 0..dims {
                for b in a + 1..dims {
                    for va in (0..self.sizes[a]).filter(|&v| v != coords[a]) {
                        for vb in (0..self.sizes[b]).filter(|&v| v != coords[b]) {
                            c[a] = va;
                            c[b] = vb;
                            if let Some(&q) = self.lookup.get(&c) {
                                if pool.is_free(q) {
                                    let steps = va.abs_diff(coords[a]) + vb.abs_diff(coords[b]);
                                    consider(q, steps, &mut best);
                                }
                            }
                        }
                    }
                    c[a] = coords[a];
                    c[b] = coords[b];
                }
            }
        }
        if best.is_empty() {
            // Rank by (differing parameters, value steps) in one number.
            let scale = self.sizes.iter().sum::<usize>() + 1;
            for &q in &pool.remaining {
                let p = &self.points[q];
                let differ = p.iter().zip(coords).filter(|(x, y)| x != y).count();
                let steps: usize = p.iter().zip(coords).map(|(x, y)| x.abs_diff(*y)).sum();
                consider(q, differ * scale + steps, &mut best);
            }
        }
        (!best.is_empty()).then(|| best[rng.below(best.len())])
    }
}

/// Log of a measured cost; failures (and times that cannot be real) are infinitely bad.
fn score(cost: Option<f64>) -> f64 {
    match cost {
        Some(c) if c.is_finite() && c > 0.0 => c.ln(),
        _ => f64::INFINITY,
    }
}

/// Every point in order: the reference the others are measured against.
struct Exhaustive {
    next: usize,
    len: usize,
    /// Points measured on someone else's proposal, skipped.
    taken: std::collections::HashSet<usize>,
}

impl Strategy for Exhaustive {
    fn name(&self) -> &'static str {
        "exhaustive"
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

/// Uniform sampling without replacement: the baseline any cleverer strategy has to beat.
struct RandomSearch {
    pool: Pool,
    rng: Rng,
}

impl Strategy for RandomSearch {
    fn name(&self) -> &'static str {
        "random"
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
        "anneal"
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
        "genetic"
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A 4 x 3 x 5 grid with every point whose coordinates sum to a multiple of 4 removed.
    fn holey() -> SearchSpace {
        let names = vec!["A".to_string(), "B".to_string(), "C".to_string()];
        let mut rows = Vec::new();
        for a in 0..4 {
            for b in ["x", "y", "z"] {
                for c in 0..5 {
                    let bi = (b.as_bytes()[0] - b'x') as usize;
                    if !(a + bi + c).is_multiple_of(4) {
                        rows.push(vec![(a * 8).to_string(), b.to_string(), c.to_string()]);
                    }
                }
            }
        }
        SearchSpace::from_rows(names, &rows).unwrap()
    }

    fn cost_of(space: &SearchSpace, p: usize) -> Option<f64> {
        let c = &space.points[p];
        if c == &[1, 1, 1] {
            return None;
        }
        Some(1.0 + (c[0] as f64 - 2.0).powi(2) + (c[1] as f64 - 1.0).powi(2) + c[2] as f64)
    }

    #[test]
    fn from_rows_orders_numbers_numerically_and_rejects_duplicates() {
        let names = vec!["T".to_string(), "M".to_string()];
        let rows = vec![
            vec!["32".to_string(), "on".to_string()],
            vec!["8".to_string(), "off".to_string()],
            vec!["128".to_string(), "on".to_string()],
        ];
        let s = SearchSpace::from_rows(names.clone(), &rows).unwrap();
        assert_eq!(s.values[0], ["8", "32", "128"]);
        assert_eq!(s.values[1], ["on", "off"]);
        assert_eq!(s.points, vec![vec![1, 0], vec![0, 1], vec![2, 0]]);
        assert_eq!(s.label(2), "T=128 M=on");
        let mut twice = rows.clone();
        twice.push(rows[1].clone());
        let e = SearchSpace::from_rows(names, &twice).unwrap_err();
        assert!(e.to_string().contains("T=8 M=off appears twice"), "{e}");
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
    fn neighbours_differ_in_one_parameter_and_nearest_prefers_fewer_changes() {
        let space = holey();
        let lat = Lattice::new(&space);
        let pool = Pool::new(space.len());
        for p in 0..space.len() {
            for (q, steps) in lat.free_neighbours(p, &pool) {
                let (a, b) = (&space.points[p], &space.points[q]);
                let differ: Vec<usize> = (0..3).filter(|&k| a[k] != b[k]).collect();
                assert_eq!(differ.len(), 1);
                assert_eq!(steps, a[differ[0]].abs_diff(b[differ[0]]));
            }
        }
        // (0,0,0) is removed (sum 0); its nearest live points differ in one parameter by one step.
        let mut rng = Rng::new(1);
        for _ in 0..20 {
            let q = lat.nearest_free(&[0, 0, 0], &pool, &mut rng).unwrap();
            let c = &space.points[q];
            assert_eq!(c.iter().sum::<usize>(), 1, "{c:?}");
        }
        // With everything taken but one point, that point is the nearest.
        let mut pool = Pool::new(space.len());
        for p in 1..space.len() {
            pool.take(p);
        }
        assert_eq!(lat.nearest_free(&[3, 2, 4], &pool, &mut rng), Some(0));
    }

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

    #[test]
    fn pool_takes_each_point_once() {
        let mut pool = Pool::new(10);
        let mut rng = Rng::new(3);
        assert!(pool.take(4));
        assert!(!pool.take(4));
        let mut got: Vec<usize> = std::iter::from_fn(|| pool.take_random(&mut rng)).collect();
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2, 3, 5, 6, 7, 8, 9]);
    }

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

    #[test]
    fn budgets_parse() {
        assert_eq!(parse_budget("200").unwrap(), Budget::Variants(200));
        assert_eq!(parse_budget(" 90s ").unwrap(), Budget::Seconds(90.0));
        assert_eq!(parse_budget("2m").unwrap(), Budget::Seconds(120.0));
        assert_eq!(parse_budget("1.5h").unwrap(), Budget::Seconds(5400.0));
        for bad in [
            "0",
            "0s",
            "-5",
            "-5s",
            "abc",
            "",
            "10x",
            "1.5",
            "s",
            "inf s",
            "9".repeat(30).as_str(),
        ] {
            let e = parse_budget(bad).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{bad}");
            assert!(e.to_string().contains("invalid budget"), "{e}");
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
