//! Which live configurations a run measures when a strategy searches the space: [`Search`]
//! asks the strategy for a round at a time within the budget, after the stored winners
//! nearest to this space ([`warm_start`]).

use super::options::TuneOptions;
use super::plan::Setup;
use crate::error::Result;
use crate::model::dtype::Dtype;
use crate::model::shape::Shape;
use crate::search::budget::{Budget, DEFAULT_BUDGET};
use crate::spec::ops::Op;
use crate::spec::space::Candidate;
use crate::store::best::{parse_params, read_best_checked, shipped_best, stored_params, BestRow};
use crate::store::record::{Kind, Record, Status};
use crate::store::run_csv::{read_run_file_where, run_csv_path_of};
use std::collections::HashMap;
use std::time::Instant;

/// The strategy `--strategy auto` searches with; spaces no larger than its default budget
/// are timed whole.
pub const AUTO_SEARCH: &str = "model";

/// The variant budget of strategy `name` when none is given, from its registry entry (the
/// `model` search is built to answer in few compiles; the others need more).
pub fn default_budget(name: &str) -> usize {
    crate::search::registry::lookup(name).map_or(DEFAULT_BUDGET, |s| s.budget)
}
/// Configurations per search round. Each round waits for most of its sources to compile, so a
/// round of one source per compile worker (16 on 16 cores) waits at every round for its
/// slowest; half again as many keep the workers busy through that tail and leave the default
/// budget's model two rounds after the all-pairs set, each fitted to everything measured
/// before it. A constant, not the worker count, so the same command proposes the same
/// configurations on every machine.
pub const SEARCH_BATCH: usize = 24;

/// Live candidates (indices) to measure before a search: for each stored winner of `op` in
/// `stored` (a best.csv) of the same element type, measured on this GPU (`gpu`, or any
/// without one), the live configuration that differs from it in the fewest parameters, at
/// most [`WARM_START_NEAR`] (parameters added since the row was stored take their `missing`
/// values); this shape's own row first, then the others in the file's order.
///
/// Why: the anneal measures a few hundred of thousands of configurations and can miss the
/// winner a previous run, or a neighbouring shape, found, so a re-run could come out slower
/// than what is stored. Measured first, this shape's own stored winner (when it is a
/// configuration of the space) bounds the result from below, up to timing noise, and the
/// others give the search good starts. Nearest, not only equal: a winner at 1024^3 (REPACK=0)
/// is a configuration at 1023x1025x1027 only with REPACK=1, and a row stored with a choice
/// outside the default values (ORDER=row) is worth its tile in the default space. The seeds
/// depend on what best.csv holds, so two runs with the same `--seed` propose the same only
/// over the same database.
pub fn warm_start(
    op: &Op,
    shape: &Shape,
    gpu: Option<&str>,
    candidates: &[Candidate],
    live: &[usize],
    stored: &[BestRow],
) -> Vec<usize> {
    let here = shape.to_string();
    let mut rows: Vec<&BestRow> = stored.iter().filter(|r| seeds_for(r, op, gpu)).collect();
    rows.sort_by_key(|r| (r.shape != here, r.dtype != op.dtype.name()));
    let mut seeds = Vec::new();
    for r in rows {
        let given = parse_params(&r.params);
        if !op
            .spec
            .params
            .iter()
            .any(|p| given.iter().any(|(n, _)| *n == p.name))
        {
            continue; // names none of this op's parameters: no configuration to stand for
        }
        let pairs = stored_params(op, &r.params);
        let wanted: HashMap<&str, crate::spec::expr::Value> = pairs
            .iter()
            .map(|(n, v)| (n.as_str(), crate::spec::expr::Value::parse(v)))
            .collect();
        // Fewest differing parameters; among those, the one whose first difference comes
        // latest in the spec's order (the tile before REPACK, ORDER or CSTORE), then the first.
        let nearest = live
            .iter()
            .map(|&i| {
                let differ: Vec<usize> = candidates[i]
                    .config
                    .values()
                    .enumerate()
                    .filter(|(_, (n, v))| wanted.get(n) != Some(*v))
                    .map(|(k, _)| k)
                    .collect();
                let first = differ.first().copied().unwrap_or(usize::MAX);
                (differ.len(), std::cmp::Reverse(first), i)
            })
            .min();
        if let Some((differ, _, i)) = nearest {
            if differ <= WARM_START_NEAR && !seeds.contains(&i) {
                seeds.push(i);
            }
        }
    }
    seeds
}

/// The GPU whose stored winners seed a search on `gpu` (compute capability `cc`, as
/// `9.0`): `gpu` itself when `rows` hold a winner of `op` in its element type measured on
/// it; otherwise the GPU of the same compute capability with the most such winners (the
/// first in `rows` on a tie); otherwise `gpu`, which then has none. `None` (no GPU: every
/// GPU's rows count) stays `None`.
///
/// Why: the database names GPUs as the driver does, so an H100 PCIe or an H800 finds no row
/// of its own and a search there would start from nothing, although the winners of a GPU of
/// the same architecture are the best starts it has. They only seed the search: the tie rule
/// keeps a stored winner of this GPU alone.
pub fn seeding_gpu<'a>(
    op: &Op,
    gpu: Option<&'a str>,
    cc: Option<&str>,
    rows: impl IntoIterator<Item = &'a BestRow> + Clone,
) -> Option<&'a str> {
    let gpu = gpu?;
    let mine = |r: &BestRow| r.op == op.name() && r.dtype == op.dtype.name();
    if rows.clone().into_iter().any(|r| mine(r) && r.gpu == gpu) {
        return Some(gpu);
    }
    let Some(cc) = cc else { return Some(gpu) };
    let mut counts: Vec<(&'a str, usize)> = Vec::new();
    for r in rows {
        if mine(r) && r.compute_capability == cc {
            match counts.iter_mut().find(|(g, _)| *g == r.gpu) {
                Some((_, n)) => *n += 1,
                None => counts.push((r.gpu.as_str(), 1)),
            }
        }
    }
    // The most rows; on a tie, the first in `rows` (max_by_key keeps the last maximum).
    counts
        .iter()
        .rev()
        .max_by_key(|(_, n)| *n)
        .map_or(Some(gpu), |(g, _)| Some(*g))
}

/// Whether stored row `r` is a winner of `op` in its very element type, measured on `gpu` (on
/// any GPU when there is none, as with `--compile-only`): a seed ([`seeds_for`]) of this
/// type, which the tie rule may keep.
pub(super) fn stored_for(r: &BestRow, op: &Op, gpu: Option<&str>) -> bool {
    seeds_for(r, op, gpu) && r.dtype == op.dtype.name()
}

/// Whether stored row `r` may seed a search of `op` on `gpu`: a winner of `op` measured there
/// (on any GPU without one) in its element type or in another of the same size.
///
/// Why: a kernel's memory traffic, vector widths and shared-memory layout depend on the
/// element's size, not its kind, so a bf16 search starts from f16 winners where bf16 has none
/// of its own (a transpose moves the same bits either way). Seeds are only starts: each is
/// measured, and the tie rule keeps a stored winner of this very type alone.
pub(super) fn seeds_for(r: &BestRow, op: &Op, gpu: Option<&str>) -> bool {
    r.op == op.name()
        && Dtype::parse(&r.dtype).is_some_and(|d| d.bytes() == op.dtype.bytes())
        && gpu.is_none_or(|g| r.gpu == g)
}

/// How many shipped winners of other shapes seed a search at a shape with no row of its own
/// ([`nearest_shipped`]).
pub const NEAR_SHAPES: usize = 3;

/// The shipped winners of `op` (this GPU or any without one, [`seeds_for`]) at the
/// [`NEAR_SHAPES`] shapes nearest to `shape`, nearest first: distance is the sum over the
/// dimensions of |ln(a / b)|, so 517x389x931 is near 511x513x515 and far from 4096^3. Rows of
/// another element type of the same size count from this very shape on, after this type's
/// own at the same distance.
///
/// Why: at a new shape the search otherwise starts from nothing, and at small odd sgemm
/// shapes the all-pairs set rarely meets the tile and split that fill the SMs; a neighbour's
/// winner, or its one-parameter neighbours that the search explores next, often does. Only a
/// few, because each one measured takes a variant of the budget and a winner of another shape
/// is a start only as good as the shapes are alike.
pub fn nearest_shipped(
    op: &Op,
    shape: &Shape,
    gpu: Option<&str>,
    shipped: &[BestRow],
) -> Vec<BestRow> {
    let distance = |row: &BestRow| -> Option<f64> {
        let there = Shape::parse(&row.shape, &op.spec.dims).ok()?;
        Some(
            there
                .dims
                .iter()
                .zip(&shape.dims)
                .map(|(&a, &b)| (a as f64 / b as f64).ln().abs())
                .sum(),
        )
    };
    let mut near: Vec<(f64, &BestRow)> = shipped
        .iter()
        .filter(|r| seeds_for(r, op, gpu))
        .filter_map(|r| distance(r).map(|d| (d, r)))
        .filter(|(d, r)| *d > 0.0 || r.dtype != op.dtype.name())
        .collect();
    // Stable: equally near rows keep the file's order.
    let other = |r: &BestRow| r.dtype != op.dtype.name();
    near.sort_by(|a, b| a.0.total_cmp(&b.0).then(other(a.1).cmp(&other(b.1))));
    near.into_iter()
        .take(NEAR_SHAPES)
        .map(|(_, r)| r.clone())
        .collect()
}

/// How many parameters a warm-start configuration may differ in from the stored winner it
/// stands for ([`warm_start`]).
pub const WARM_START_NEAR: usize = 2;

/// The search of a run, or `None` when every live configuration is measured (or, with
/// `--compile-only`, compiled).
pub(super) fn start(opts: &TuneOptions, setup: &Setup) -> Result<Option<Search>> {
    let (op, shape, candidates, live) = (&setup.op, &setup.shape, &setup.candidates, &setup.live);
    let gpu = setup.device.as_ref().map(|d| d.name.as_str());
    let cc = setup.device.as_ref().map(|d| d.cc_string());
    // Read only when a search will use it, and quietly: a damaged database is reported
    // where the run writes to it; here it only means fewer or no stored winners.
    let seeds = || {
        let mut stored = read_best_checked(&crate::store::best::best_path(&opts.out_dir))
            .map(|f| f.rows)
            .unwrap_or_default();
        let shipped = if op.is_builtin() {
            shipped_best()
        } else {
            Vec::new()
        };
        let seat =
            seeding_gpu(op, gpu, cc.as_deref(), stored.iter().chain(&shipped)).map(str::to_owned);
        // Whose winners seed the search; the last run read below is this GPU's own.
        let seed_gpu = seat.as_deref();
        // Then the shipped winner of a built-in op at this very shape, when the folder has
        // none; at a shape with no row anywhere, the shipped winners of the few nearest
        // shapes ([`nearest_shipped`]).
        if op.is_builtin() {
            let here = shape.to_string();
            for row in &shipped {
                if row.shape == here && !stored.iter().any(|s| s.key() == row.key()) {
                    stored.push(row.clone());
                }
            }
            let own = stored
                .iter()
                .any(|r| r.shape == here && stored_for(r, op, seed_gpu));
            if !own {
                stored.extend(nearest_shipped(op, shape, seed_gpu, &shipped));
            }
        }
        let last = gpu
            .map(|g| {
                let path = run_csv_path_of(
                    &opts.out_dir,
                    op.name(),
                    &shape.to_string(),
                    op.dtype.name(),
                    g,
                );
                // What a re-run reads of its last run: what it measured, tried, or carried;
                // not the rows of the configurations it never reached.
                let kept = read_run_file_where(&path, |status, error| {
                    status != Status::Skipped || error.starts_with(NOT_TIMED_AGAIN)
                });
                match kept {
                    Ok(file) => file.records,
                    // None yet: the first run into this folder.
                    Err(_) if !path.exists() => Vec::new(),
                    Err(e) => {
                        eprintln!(
                            "warning: {e}; this run does not start from it (a new run CSV \
                             replaces it at the end)"
                        );
                        Vec::new()
                    }
                }
            })
            .unwrap_or_default();
        let (replay, earlier) = last_measured(candidates, live, &last);
        Seeds {
            replay,
            earlier,
            tried: last
                .iter()
                .filter(|r| {
                    r.kind == Kind::Variant
                        && (matches!(r.status, Status::Ok | Status::Failed | Status::NotRun)
                            || r.error.starts_with(NOT_TIMED_AGAIN))
                })
                .count(),
            winners: warm_start(op, shape, seed_gpu, candidates, live, &stored),
        }
    };
    Search::new(
        opts,
        op,
        shape,
        candidates,
        live,
        &setup.finish,
        &setup.base,
        seeds,
    )
}

/// At most this many leaders of a search try the finishing values
/// ([`crate::spec::ops::ParamSpec::finish`]): those within
/// [`super::options::CONFIRM_WITHIN`] of the fastest, fastest first.
pub const FINISH_TOP: usize = 4;

/// The configurations a search tries on its leaders only: those with a finishing value
/// ([`crate::spec::ops::ParamSpec::finish`]), grouped by the rest of their parameters, so
/// that a leader finds its own.
#[derive(Default)]
pub(super) struct Finishing {
    /// The live candidates the strategy searches (all the others are finishing ones).
    searched: Vec<usize>,
    /// Parameter slots whose finishing values are left to the leaders.
    slots: Vec<usize>,
    /// A configuration's digits with those slots blanked → its finishing candidates.
    groups: HashMap<Vec<u16>, Vec<usize>>,
    /// Finishing candidates already proposed (as seeds or on a leader).
    asked: std::collections::HashSet<usize>,
    /// What the search was told before the finishing round, (candidate, median ms), in the
    /// order it was told.
    told: Vec<(usize, f64)>,
    /// The finishing values, as `TAIL=1`.
    text: String,
    /// The leaders have had their finishing round.
    done: bool,
}

impl Finishing {
    /// Splits `live` into what the strategy searches and the finishing candidates of the
    /// parameters `finish` names ([`super::plan::Setup::finish`]). Where every live
    /// candidate has a finishing value, the strategy searches them all.
    pub(super) fn split(
        candidates: &[Candidate],
        live: &[usize],
        finish: &[(String, Vec<crate::spec::expr::Value>)],
    ) -> Finishing {
        let Some(axes) = live.first().map(|&i| candidates[i].config.axes()) else {
            return Finishing::default();
        };
        // Per finishing parameter: its slot and the digits of its finishing values.
        let marks: Vec<(usize, Vec<u16>)> = finish
            .iter()
            .filter_map(|(name, values)| {
                let k = axes.names.iter().position(|n| n == name)?;
                let digits = (0..axes.values[k].len())
                    .filter(|&d| values.contains(&axes.values[k][d]))
                    .map(|d| d as u16)
                    .collect();
                Some((k, digits))
            })
            .collect();
        let mut f = Finishing {
            slots: marks.iter().map(|(k, _)| *k).collect(),
            text: finish
                .iter()
                .map(|(n, vs)| {
                    let vs: Vec<String> = vs.iter().map(ToString::to_string).collect();
                    format!("{n}={}", vs.join(","))
                })
                .collect::<Vec<_>>()
                .join(" "),
            ..Finishing::default()
        };
        for &i in live {
            let digits = candidates[i].config.digits();
            if marks.iter().any(|(k, ds)| ds.contains(&digits[*k])) {
                f.groups.entry(f.key(digits)).or_default().push(i);
            } else {
                f.searched.push(i);
            }
        }
        if f.searched.is_empty() {
            f.searched = live.to_vec();
            f.groups.clear();
        }
        f
    }

    /// The configuration the strategy searches that `c`, a finishing candidate, finishes (its
    /// own configuration without the finishing values), if it is live.
    fn base_of(&self, candidates: &[Candidate], c: usize) -> Option<usize> {
        let key = self.key(candidates[c].config.digits());
        self.searched
            .iter()
            .copied()
            .find(|&s| self.key(candidates[s].config.digits()) == key)
    }

    /// Hears a measured candidate; kept only while a finishing round is still to come (none
    /// is in a space without finishing values, the common case).
    fn tell(&mut self, candidate: usize, ms: f64) {
        if !self.groups.is_empty() && !self.done {
            self.told.push((candidate, ms));
        }
    }

    fn key(&self, digits: &[u16]) -> Vec<u16> {
        let mut key = digits.to_vec();
        for &k in &self.slots {
            key[k] = u16::MAX;
        }
        key
    }

    /// The finishing candidates of the leaders told so far ([`FINISH_TOP`]) not yet proposed
    /// nor carried from an earlier run (`earlier`), leaders fastest first; once a search, at
    /// the first call with leaders to go by.
    fn round(&mut self, candidates: &[Candidate], earlier: &HashMap<usize, String>) -> Vec<usize> {
        if self.groups.is_empty() || self.done || self.told.is_empty() {
            return Vec::new();
        }
        self.done = true;
        let mut told = std::mem::take(&mut self.told);
        told.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let Some(&(_, fastest)) = told.first() else {
            return Vec::new();
        };
        // A leader and its own finishing configurations are one group: one of the leaders.
        let mut leaders: Vec<Vec<u16>> = Vec::new();
        for &(c, _) in told
            .iter()
            .take_while(|(_, ms)| *ms <= fastest * (1.0 + super::options::CONFIRM_WITHIN))
        {
            let key = self.key(candidates[c].config.digits());
            if !leaders.contains(&key) {
                leaders.push(key);
                if leaders.len() == FINISH_TOP {
                    break;
                }
            }
        }
        let mut out = Vec::new();
        for key in &leaders {
            for &c in self.groups.get(key).into_iter().flatten() {
                if !earlier.contains_key(&c) && self.asked.insert(c) {
                    out.push(c);
                }
            }
        }
        out
    }
}

/// What a search measures before its own proposals.
#[derive(Default)]
pub struct Seeds {
    /// The leaders of the last run at this shape, on this GPU, into the same folder, fastest
    /// first ([`last_measured`]).
    pub replay: Vec<usize>,
    /// Why the configurations the last runs measured but this one does not replay are not
    /// measured, with their last median.
    pub earlier: HashMap<usize, String>,
    /// How many configurations that run tried (measured, failed or not compiled): a re-run
    /// spends as much of its budget as that run did before it searches on, so it does not
    /// try again what failed or ran past the compile time limit.
    pub tried: usize,
    /// The stored winners nearest to this space ([`warm_start`]).
    pub winners: Vec<usize>,
}

/// The start of the reason of a configuration an earlier run measured and a re-run did not
/// time again (it was not among the leaders).
pub const NOT_TIMED_AGAIN: &str = "not timed again:";

/// The leaders of a run's CSV (`last`, the same op and shape) as live candidates (indices),
/// fastest first: the configurations its confirmation found tied with its winner, and those
/// within [`super::options::CONFIRM_WITHIN`] of its fastest, at most
/// [`super::options::CONFIRM_TOP`] in all; and, for every other configuration it measured (or
/// carried from a run before it), the reason it is not measured again, with its last median.
///
/// Why: a search learns from noisy times, so running the same search again would propose a
/// different set, and compiling what the first run did not costs most of a re-run. Timing
/// again only the last run's leaders (their images are in the cubin cache) answers a re-run
/// in the time the contest takes; the rest were clearly slower and keep their last time in
/// their record's reason, and a larger `--budget` searches on from there.
pub fn last_measured(
    candidates: &[Candidate],
    live: &[usize],
    last: &[Record],
) -> (Vec<usize>, HashMap<usize, String>) {
    let mut measured: Vec<(f64, &Record)> = last
        .iter()
        .filter(|r| r.kind == Kind::Variant && r.status == Status::Ok)
        .filter_map(|r| Some((r.stats?.median_ms, r)))
        .collect();
    measured.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Configurations are matched by their digits in this space (an index per parameter),
    // and only the few looked up (measured or carried) are matched at all: the space can
    // hold tens of thousands.
    let carried = |r: &&Record| r.error.starts_with(NOT_TIMED_AGAIN);
    let Some(space) = live.first().map(|&i| &candidates[i].config) else {
        return (Vec::new(), HashMap::new());
    };
    let digits = |r: &Record| space.digits_of(&r.params);
    let wanted: std::collections::HashSet<Vec<u16>> = measured
        .iter()
        .map(|(_, r)| *r)
        .chain(last.iter().filter(carried))
        .filter_map(digits)
        .collect();
    let by_digits: HashMap<&[u16], usize> = live
        .iter()
        .map(|&i| (candidates[i].config.digits(), i))
        .filter(|(d, _)| wanted.contains(*d))
        .collect();
    let find = |r: &Record| digits(r).and_then(|d| by_digits.get(d.as_slice()).copied());
    // The configurations of this space, fastest first (one pruned here is not one of them).
    let here: Vec<(f64, usize, bool)> = measured
        .iter()
        .filter_map(|(ms, r)| {
            let tied = r.confirm.is_some_and(|c| c.tied || c.winner);
            find(r).map(|at| (*ms, at, tied))
        })
        .collect();
    let Some(&(fastest, ..)) = here.first() else {
        return (Vec::new(), HashMap::new());
    };
    let limit = fastest * (1.0 + super::options::CONFIRM_WITHIN);
    let mut replay = Vec::new();
    let mut earlier = HashMap::new();
    for (ms, at, tied) in here {
        if tied || (ms <= limit && replay.len() < super::options::CONFIRM_TOP) {
            replay.push(at);
        } else {
            earlier.insert(
                at,
                format!("{NOT_TIMED_AGAIN} an earlier run at this shape measured {ms:.5} ms, outside its leaders"),
            );
        }
    }
    // What the last run carried from the runs before it stays carried.
    for r in last.iter().filter(carried) {
        if let Some(at) = find(r).filter(|at| !replay.contains(at)) {
            earlier.entry(at).or_insert_with(|| r.error.clone());
        }
    }
    (replay, earlier)
}

/// A search over the live configurations: asks the strategy for a round at a time and keeps
/// the budget (variants, or seconds since the search started).
pub(super) struct Search {
    strategy: Box<dyn crate::search::strategy::Strategy>,
    /// Candidates measured before the strategy's own proposals (the warm start).
    first: std::collections::VecDeque<usize>,
    name: String,
    budget: Budget,
    /// Search point → candidate index, and back.
    candidate_of: Vec<usize>,
    point_of: HashMap<usize, usize>,
    asked: usize,
    /// What only the leaders try, and what the search was told.
    finishing: Finishing,
    /// Finishing candidates proposed on the leaders, past the budget.
    finished: usize,
    /// Budget the last run at this shape spent on configurations this run does not measure
    /// again ([`Seeds::tried`]).
    carried: usize,
    /// Why what the last runs measured and this run does not replay is not measured.
    earlier: HashMap<usize, String>,
    live: usize,
    started: Instant,
}

impl Search {
    /// `None` when every live configuration is to be measured. `base` is what the spec's
    /// `compile_cost` is evaluated in, so that the strategy knows each point's cost.
    #[allow(clippy::too_many_arguments)]
    fn new(
        opts: &TuneOptions,
        op: &Op,
        shape: &Shape,
        candidates: &[Candidate],
        live: &[usize],
        finish: &[(String, Vec<crate::spec::expr::Value>)],
        base: &crate::spec::expr::Vars,
        seeds: impl FnOnce() -> Seeds,
    ) -> Result<Option<Search>> {
        let name = match (opts.strategy.as_str(), opts.budget) {
            ("auto", None) if live.len() <= default_budget(AUTO_SEARCH) => return Ok(None),
            ("auto", _) => AUTO_SEARCH,
            ("exhaustive", None) => return Ok(None),
            (other, _) => other,
        };
        // The space is the live configurations this run owns (all, or a shard's share), less
        // those only the leaders try; built only where a search runs.
        let mut finishing = Finishing::split(candidates, live, finish);
        let (mut space, candidate_of) =
            crate::search::space::SearchSpace::from_candidates(candidates, &finishing.searched)?;
        if op.spec.compile_cost.is_some() {
            space.costs = candidate_of
                .iter()
                .map(|&c| candidates[c].compile_cost(op, base))
                .collect::<Result<_>>()?;
        }
        let live = live.len();
        let budget = opts
            .budget
            .unwrap_or(Budget::Variants(default_budget(name)));
        let hint = match budget {
            Budget::Variants(n) => Some(n),
            Budget::Seconds(_) => None,
        };
        let mut strategy = crate::search::registry::strategy(name, &space, opts.seed, hint)?;
        let point_of: HashMap<usize, usize> = candidate_of
            .iter()
            .enumerate()
            .map(|(p, &c)| (c, p))
            .collect();
        // At most a quarter of a variant budget (at least one) goes to stored winners, the rest
        // to the search; with a time budget, as many as a quarter of the default budget. An
        // exhaustive sweep with a budget stays the in-order reference: no warm start.
        let room = match budget {
            Budget::Variants(n) => (n / 4).max(1),
            Budget::Seconds(_) => default_budget(name) / 4,
        };
        let seeds = if opts.warm_start && name != "exhaustive" {
            seeds()
        } else {
            Seeds::default()
        };
        // The last run's configurations may fill the budget; the stored winners get `room`.
        let whole = match budget {
            Budget::Variants(n) => n,
            Budget::Seconds(_) => default_budget(name),
        };
        // A stored winner with a finishing value is followed by its own configuration without
        // it, which the strategy learns from (it never hears of finishing candidates).
        let winners: Vec<usize> = seeds
            .winners
            .iter()
            .flat_map(|&c| {
                let base = if point_of.contains_key(&c) {
                    None
                } else {
                    finishing.base_of(candidates, c)
                };
                std::iter::once(c).chain(base)
            })
            .collect();
        // A seed the strategy searches is taken from it; a finishing one is marked proposed.
        let mut fresh = |c: &usize| match point_of.get(c) {
            Some(&p) => strategy.take(p),
            None => finishing.asked.insert(*c),
        };
        let mut first: std::collections::VecDeque<usize> = seeds
            .replay
            .iter()
            .filter(|c| fresh(c))
            .take(whole)
            .copied()
            .collect();
        let replayed = first.len();
        first.extend(
            winners
                .iter()
                .filter(|c| fresh(c))
                .take(room.min(whole - replayed)),
        );
        let search = Search {
            strategy,
            first,
            name: name.to_string(),
            budget,
            candidate_of,
            point_of,
            asked: 0,
            finishing,
            finished: 0,
            carried: if replayed > 0 {
                seeds.tried.saturating_sub(replayed)
            } else {
                0
            },
            earlier: seeds.earlier,
            live,
            started: Instant::now(),
        };
        let warm = match (replayed, search.first.len() - replayed) {
            (0, 0) => String::new(),
            (0, n) => format!(
                ", {n} stored winner(s) first, from best.csv or the shipped database (--no-warm-start: none)"
            ),
            (r, 0) => format!(
                ", the last run's {r} leaders at this shape first (--no-warm-start: a fresh search)"
            ),
            (r, n) => format!(
                ", the last run's {r} leaders at this shape and {n} stored winner(s) first (--no-warm-start: a fresh search)"
            ),
        };
        let leaders = if search.finishing.groups.is_empty() {
            String::new()
        } else {
            format!(
                "; its {FINISH_TOP} leaders also try {}",
                search.finishing.text
            )
        };
        // An exhaustive sweep cut by --budget takes the space in order.
        let all = if search.name == "exhaustive" {
            "in the space's order; without --budget it times them all"
        } else {
            "--strategy exhaustive times them all"
        };
        eprintln!(
            "{} {shape}: {live} valid configurations; searching with {} ({}{warm}{leaders}); \
             {all}",
            op.name(),
            search.name,
            search.budget_text()
        );
        Ok(Some(search))
    }

    fn budget_text(&self) -> String {
        match self.budget {
            Budget::Variants(n) => format!("budget {n} variants"),
            // As given: `--budget 0.5s` reads "budget 0.5 s", `90s` "budget 90 s".
            Budget::Seconds(s) => format!("budget {s} s"),
        }
    }

    /// The next round's candidate indices; empty when the budget or the strategy is spent.
    /// A round is [`SEARCH_BATCH`] points, or more when the strategy's next proposals do not
    /// depend on measurements (the stored winners and a fixed first set): those compile
    /// together instead of in rounds that wait for the GPU.
    ///
    /// The round that spends the budget (or the strategy) also holds the finishing
    /// candidates of the leaders measured by then ([`Finishing`]), so that they compile with
    /// it rather than in a round of their own after it (which would add a compile of a
    /// slow source to every run); a leader that only that round finds does not try them.
    /// They are not counted against the budget.
    pub(super) fn ask(&mut self, candidates: &[Candidate]) -> Vec<usize> {
        let left = match self.budget {
            Budget::Variants(b) => Some(b.saturating_sub(self.asked + self.carried)),
            Budget::Seconds(s) if self.started.elapsed().as_secs_f64() >= s => Some(0),
            Budget::Seconds(_) => None,
        };
        // The strategy's fixed first set counts only where the budget reaches past the
        // stored winners (a re-run that re-times the last run's leaders alone never asks).
        let batch = if left.is_some_and(|l| l <= self.first.len()) {
            SEARCH_BATCH.max(self.first.len())
        } else {
            SEARCH_BATCH.max(self.first.len() + self.strategy.unconditional())
        };
        let n = left.map_or(batch, |l| l.min(batch));
        let mut round: Vec<usize> = (0..n).map_while(|_| self.first.pop_front()).collect();
        if round.len() < n {
            let points = self.strategy.ask(n - round.len());
            round.extend(points.iter().map(|&p| self.candidate_of[p]));
        }
        round.truncate(n);
        self.asked += round.len();
        if round.len() < n || left.is_some_and(|l| l <= n) {
            let finishing = self.finishing.round(candidates, &self.earlier);
            self.finished += finishing.len();
            round.extend(finishing);
        }
        round
    }

    /// When a time budget runs out (`None` for a variant budget, or one too long to end).
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.budget {
            Budget::Seconds(s) => std::time::Duration::try_from_secs_f64(s)
                .ok()
                .and_then(|d| self.started.checked_add(d)),
            Budget::Variants(_) => None,
        }
    }

    pub(super) fn tell(&mut self, candidate: usize, cost: Option<f64>) {
        if let Some(ms) = cost {
            self.finishing.tell(candidate, ms);
        }
        if let Some(&p) = self.point_of.get(&candidate) {
            self.strategy.tell(p, cost);
        }
    }

    /// Variants still to come, as far as the budget says (for the progress bar).
    pub(super) fn remaining(&self) -> usize {
        match self.budget {
            Budget::Variants(b) => b.min(self.live).saturating_sub(self.asked + self.carried),
            Budget::Seconds(_) => 0,
        }
    }

    /// Where the strategy's model first ranked `candidate` among the live configurations, as
    /// (rank from 1, of how many); `None` without a model or before its first fit.
    pub(super) fn first_rank(&self, candidate: usize) -> Option<(usize, usize)> {
        let p = *self.point_of.get(&candidate)?;
        self.strategy.first_rank(p).map(|(r, n)| (r + 1, n))
    }

    /// Why the configuration at `at` (a candidate index) was not measured when an earlier
    /// run measured it and it was not among the leaders timed again; `None` for the rest,
    /// which [`Search::skipped_reason`] covers.
    pub(super) fn not_timed_again(&self, at: usize) -> Option<&str> {
        self.earlier.get(&at).map(String::as_str)
    }

    pub(super) fn skipped_reason(&self) -> String {
        format!(
            "not measured: --strategy {} ({}) did not propose it",
            self.name,
            self.budget_text()
        )
    }

    /// Why a configuration is not in a compile-only run that a stop (Ctrl-C, SIGTERM) ended
    /// before the search was spent.
    pub(super) fn interrupted_reason(&self) -> String {
        format!(
            "not proposed: --strategy {} ({}) had not proposed it when the run was {}",
            self.name,
            self.budget_text(),
            crate::isolate::interrupt::STOPPED
        )
    }

    /// What the search did; `done` is what happened to its proposals (measured, proposed).
    pub(super) fn summary(&self, done: &str) -> String {
        let finished = match self.finished {
            0 => String::new(),
            n => format!(
                "; {n} of them the leaders' finishing values ({})",
                self.finishing.text
            ),
        };
        format!(
            "{}: {} of {} valid configurations {done} ({}{finished}, {:.1} s)",
            self.name,
            self.asked + self.finished,
            self.live,
            self.budget_text(),
            self.started.elapsed().as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::limits::DeviceLimits;
    use crate::spec::space;
    use crate::store::best::read_best;
    use std::path::Path;

    /// The default space of `op` at `shape` on an sm_90 device, and its live candidates.
    fn default_space(op: &Op, shape: &Shape) -> (Vec<Candidate>, Vec<usize>) {
        let candidates = space::enumerate(op, shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        let live = (0..candidates.len())
            .filter(|&at| candidates[at].pruned.is_none())
            .collect();
        (candidates, live)
    }

    /// A re-run's replay: the last run's measured configurations, fastest first, by their
    /// parameters (whatever their position); failed rows, baselines and configurations that
    /// are not live here give nothing.
    #[test]
    fn the_last_runs_leaders_come_fastest_first_and_the_rest_keep_their_time() {
        let op = Op::load("transpose", None).unwrap();
        let shape = Shape::parse("1000x1000", &op.spec.dims).unwrap();
        let (candidates, live) = default_space(&op, &shape);
        let row = |at: usize, status: Status, ms: Option<f64>| {
            let mut r = super::super::build::shown_record(&candidates[at], "");
            r.status = status;
            r.stats = ms.map(|median_ms| crate::measure::bench::Stats {
                median_ms,
                min_ms: median_ms,
                max_ms: median_ms,
                spread_pct: 0.0,
                samples: 5,
                batch: 1,
            });
            r
        };
        let pruned = (0..candidates.len())
            .find(|&at| candidates[at].pruned.is_some())
            .unwrap();
        let mut baseline = row(live[9], Status::Ok, Some(0.001));
        baseline.kind = Kind::Baseline;
        let last = vec![
            row(live[3], Status::Ok, Some(0.030)),
            row(live[7], Status::Failed, None),
            baseline,
            row(live[5], Status::Ok, Some(0.010)),
            row(pruned, Status::Ok, Some(0.005)),
            row(live[1], Status::Ok, Some(0.0105)),
            row(live[2], Status::Ok, Some(0.0109)),
        ];
        // Within 10 % of the fastest: leaders, timed again; the rest keep their last time.
        let (replay, earlier) = last_measured(&candidates, &live, &last);
        assert_eq!(replay, vec![live[5], live[1], live[2]]);
        assert_eq!(
            earlier,
            HashMap::from([(
                live[3],
                "not timed again: an earlier run at this shape measured 0.03000 ms, outside its leaders"
                    .to_string()
            )])
        );
        // A re-run's CSV carries that reason on: the run after it keeps it.
        let mut carried = row(live[3], Status::Skipped, None);
        carried.error = earlier[&live[3]].clone();
        let again = vec![row(live[5], Status::Ok, Some(0.010)), carried];
        assert_eq!(last_measured(&candidates, &live, &again).1, earlier);
        // A configuration the last run found tied with its winner is a leader at any time.
        let mut tied = row(live[4], Status::Ok, Some(0.050));
        tied.confirm = Some(crate::store::record::Confirmed {
            median_ms: 0.050,
            vs_winner_pct: 1.0,
            ci_low_pct: -1.0,
            ci_high_pct: 3.0,
            tied: true,
            winner: false,
        });
        let mut with_tie = last.clone();
        with_tie.push(tied);
        assert_eq!(
            last_measured(&candidates, &live, &with_tie).0,
            vec![live[5], live[1], live[2], live[4]]
        );
        assert!(last_measured(&candidates, &live, &[]).0.is_empty());
    }

    /// At a shape with no row, the shipped rows of the nearest shapes (by the sum of |ln| of
    /// the dimensions' ratios) of the same op, element type and GPU, nearest first and at
    /// most NEAR_SHAPES; rows of the very shape, of another GPU, dtype or op, or whose shape
    /// does not parse as the op's dimensions give nothing.
    #[test]
    fn a_new_shape_is_seeded_by_the_shipped_winners_of_the_nearest_shapes() {
        let op = Op::load("sgemm", None).unwrap();
        let shape = Shape::parse("517x389x931", &op.spec.dims).unwrap();
        let template = read_best(Path::new("tests/fixtures/runs/best.csv")).unwrap()[0].clone();
        let h100 = "NVIDIA H100 80GB HBM3";
        let row = |op: &str, shape: &str, dtype: &str, gpu: &str| BestRow {
            op: op.into(),
            shape: shape.into(),
            dtype: dtype.into(),
            gpu: gpu.into(),
            ..template.clone()
        };
        let rows = vec![
            row("sgemm", "4096x4096x4096", "f32", h100),
            row("sgemm", "1000x1000x1000", "f32", h100),
            row("sgemm", "333x555x777", "f32", h100),
            row("sgemm", "517x389x931", "f32", h100),
            row("sgemm", "520x390x930", "f32", "NVIDIA H200"),
            row("sgemm", "518x390x930", "f64", h100),
            row("transpose", "517x389", "f32", h100),
            row("sgemm", "517x389", "f32", h100),
            row("sgemm", "511x513x515", "f32", h100),
            row("sgemm", "777x555x999", "f32", h100),
        ];
        let shapes = |gpu: Option<&str>| {
            nearest_shipped(&op, &shape, gpu, &rows)
                .into_iter()
                .map(|r| r.shape)
                .collect::<Vec<_>>()
        };
        // 0.83, 0.88 and 0.98 away; 1000^3 (1.68) is the fourth.
        assert_eq!(
            shapes(Some(h100)),
            ["777x555x999", "511x513x515", "333x555x777"]
        );
        // Without a GPU (compile-only), rows of every GPU count.
        assert_eq!(shapes(None), ["520x390x930", "777x555x999", "511x513x515"]);
        assert!(nearest_shipped(&op, &shape, Some("NVIDIA A100-SXM4-80GB"), &rows).is_empty());
    }

    /// A bf16 search with no row of its own starts from the f16 winners too (the same bytes
    /// to move): nearest first, the very shape's f16 row before the nearest bf16 one, and a
    /// bf16 row before an f16 one as near; rows of other sizes (f32, f64) never.
    #[test]
    fn an_element_type_without_a_row_is_seeded_by_one_of_the_same_size() {
        let op = Op::load("transpose", None)
            .unwrap()
            .with_dtype(Some("bf16"))
            .unwrap();
        let shape = Shape::parse("8191x8191", &op.spec.dims).unwrap();
        let template = read_best(Path::new("tests/fixtures/runs/best.csv")).unwrap()[0].clone();
        let h200 = "NVIDIA H200";
        let row = |shape: &str, dtype: &str, params: &str| BestRow {
            op: "transpose".into(),
            shape: shape.into(),
            dtype: dtype.into(),
            gpu: h200.into(),
            params: params.into(),
            ..template.clone()
        };
        let chunk = "TILE_DIM=64;BLOCK_ROWS=2;BOUNDS=edge;VEC=1;ASPECT=wide;CACHE=l2_256;\
                     RUNS=chunk;BLOCK_ORDER=columns";
        let rows = vec![
            row("8191x8191", "f32", chunk),
            row(
                "8192x8192",
                "bf16",
                "TILE_DIM=64;BLOCK_ROWS=16;VEC=4;ASPECT=tall",
            ),
            row(
                "8192x8192",
                "f16",
                "TILE_DIM=64;BLOCK_ROWS=32;VEC=4;ASPECT=tall",
            ),
            row("8191x8191", "f16", chunk),
            row("8191x8191", "f64", chunk),
            row("1000x1000", "f16", "TILE_DIM=32;BLOCK_ROWS=8;VEC=4"),
        ];
        let near: Vec<(String, String)> = nearest_shipped(&op, &shape, Some(h200), &rows)
            .into_iter()
            .map(|r| (r.shape, r.dtype))
            .collect();
        let pair = |s: &str, d: &str| (s.to_string(), d.to_string());
        assert_eq!(
            near,
            [
                pair("8191x8191", "f16"),
                pair("8192x8192", "bf16"),
                pair("8192x8192", "f16")
            ]
        );
        // The f16 row's configuration is live in bf16 and is the first seed.
        let (candidates, live) = default_space(&op, &shape);
        let seeds = warm_start(&op, &shape, Some(h200), &candidates, &live, &rows[3..4]);
        assert_eq!(seeds.len(), 1);
        let label = candidates[seeds[0]].config.label();
        assert!(
            label.contains("RUNS=chunk") && label.contains("BLOCK_ORDER=columns"),
            "{label}"
        );
        // An f32 or f64 row seeds nothing.
        assert!(warm_start(&op, &shape, Some(h200), &candidates, &live, &rows[..1]).is_empty());
        assert!(warm_start(&op, &shape, Some(h200), &candidates, &live, &rows[4..5]).is_empty());
    }

    /// A GPU the database holds winners for seeds from its own; one it does not know starts
    /// from the GPU of its compute capability with the most winners of the op in that
    /// element type (the first on a tie), and one of another architecture from none.
    #[test]
    fn a_gpu_without_winners_is_seeded_by_its_architectures() {
        let op = Op::load("sgemm", None).unwrap();
        let template = read_best(Path::new("tests/fixtures/runs/best.csv")).unwrap()[0].clone();
        let (h100, h200) = ("NVIDIA H100 80GB HBM3", "NVIDIA H200");
        let row = |gpu: &str, cc: &str, dtype: &str, shape: &str| BestRow {
            op: "sgemm".into(),
            shape: shape.into(),
            dtype: dtype.into(),
            gpu: gpu.into(),
            compute_capability: cc.into(),
            ..template.clone()
        };
        let rows = vec![
            row(h200, "9.0", "f32", "1000x1000x1000"),
            row(h100, "9.0", "f32", "1000x1000x1000"),
            row(h100, "9.0", "f32", "4096x4096x4096"),
            row("NVIDIA A100-SXM4-80GB", "8.0", "f32", "1000x1000x1000"),
            row("NVIDIA L40S", "8.9", "f64", "1000x1000x1000"),
        ];
        let seat = |gpu: Option<&'static str>, cc: Option<&str>, rows: &[BestRow]| {
            seeding_gpu(&op, gpu, cc, rows.iter()).map(str::to_owned)
        };
        assert_eq!(seat(Some(h200), Some("9.0"), &rows).as_deref(), Some(h200));
        // An H100 PCIe: the H100's two rows outnumber the H200's one.
        let pcie = "NVIDIA H100 PCIe";
        assert_eq!(seat(Some(pcie), Some("9.0"), &rows).as_deref(), Some(h100));
        // A tie goes to the GPU first in the rows.
        assert_eq!(
            seat(Some(pcie), Some("9.0"), &rows[..2]).as_deref(),
            Some(h200)
        );
        // Another architecture (here with rows of another element type only): its own name,
        // which holds no rows.
        assert_eq!(
            seat(Some("NVIDIA L40S"), Some("8.9"), &rows).as_deref(),
            Some("NVIDIA L40S")
        );
        assert_eq!(seat(Some(pcie), None, &rows).as_deref(), Some(pcie));
        assert_eq!(seat(None, Some("9.0"), &rows), None);
    }

    /// TAIL=1 is a finishing value of sgemm: the model never proposes it, and the round that
    /// spends the budget holds it, outside the budget, for the four leaders measured by then
    /// (a configuration and its own TAIL=1 one count as one): each leader's own configuration
    /// with TAIL=1. A stored winner with TAIL=1 brings its TAIL=0 configuration along.
    /// `--param TAIL=0,1` makes it a value like any other.
    #[test]
    fn only_the_leaders_try_the_finishing_values() {
        let op = Op::load("sgemm", None).unwrap();
        let shape = Shape::parse("4096x4096x4096", &op.spec.dims).unwrap();
        let candidates =
            space::enumerate_space(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[], false)
                .unwrap()
                .candidates;
        let live: Vec<usize> = (0..candidates.len()).collect();
        let finish = space::finishing(&op, &[]);
        assert_eq!(
            finish,
            [("TAIL".to_string(), vec![crate::spec::expr::Value::Int(1)])]
        );
        let tail = |c: usize| candidates[c].config.label().ends_with("TAIL=1");
        let f = Finishing::split(&candidates, &live, &finish);
        let grouped: usize = f.groups.values().map(Vec::len).sum();
        assert!(
            grouped > 1000,
            "4096^3 has many configurations with TAIL=1: {grouped}"
        );
        assert_eq!(f.searched.len() + grouped, live.len());
        assert!(f.searched.iter().all(|&c| !tail(c)));
        // Swept by hand: no finishing values, one space.
        let swept = space::parse_override(&op, "TAIL=0,1").unwrap();
        assert!(space::finishing(&op, &[swept]).is_empty());

        // A made-up cost that favours the configurations with a TAIL=1 one (so that leaders
        // have one), and TAIL=1 2 % faster than its sibling.
        let has_tail: std::collections::HashSet<usize> = f
            .searched
            .iter()
            .copied()
            .filter(|&c| f.groups.contains_key(&f.key(candidates[c].config.digits())))
            .collect();
        let sibling: HashMap<usize, usize> = has_tail
            .iter()
            .flat_map(|&c| {
                let key = f.key(candidates[c].config.digits());
                f.groups[&key].iter().map(move |&t| (t, c))
            })
            .collect();
        let cost = |c: usize| {
            let base = |c: usize| 1.0 + (c % 97) as f64 / 1000.0;
            match (sibling.get(&c), has_tail.contains(&c)) {
                (Some(&s), _) => 0.9 * base(s) * 0.98,
                (None, true) => 0.9 * base(c),
                (None, false) => base(c),
            }
        };
        let opts = TuneOptions::default();
        let vars = crate::spec::expr::Vars::new();
        let start = |seeds: Seeds| {
            Search::new(
                &opts,
                &op,
                &shape,
                &candidates,
                &live,
                &finish,
                &vars,
                || seeds,
            )
            .unwrap()
            .expect("a search")
        };
        let mut search = start(Seeds::default());
        let mut rounds: Vec<Vec<usize>> = Vec::new();
        // The leaders when each round was asked for.
        let mut leaders_then: Vec<Vec<Vec<u16>>> = Vec::new();
        loop {
            let mut ranked = rounds.concat();
            ranked.sort_by(|&a, &b| cost(a).total_cmp(&cost(b)).then(a.cmp(&b)));
            let mut leaders: Vec<Vec<u16>> = Vec::new();
            for c in ranked {
                let key = search.finishing.key(candidates[c].config.digits());
                if !leaders.contains(&key) && leaders.len() < FINISH_TOP {
                    leaders.push(key);
                }
            }
            leaders_then.push(leaders);
            let round = search.ask(&candidates);
            if round.is_empty() {
                break;
            }
            for &c in &round {
                search.tell(c, Some(cost(c)));
            }
            rounds.push(round);
            assert!(rounds.len() < 50, "the search ends");
        }
        let within: Vec<usize> = rounds.concat().into_iter().filter(|&c| !tail(c)).collect();
        assert_eq!(within.len(), default_budget(AUTO_SEARCH));
        let finished: Vec<usize> = rounds.concat().into_iter().filter(|&c| tail(c)).collect();
        assert_eq!(search.finished, finished.len());
        assert!(!finished.is_empty() && finished.len() <= FINISH_TOP);
        // TAIL=1 only in the round that spends the budget; each is a measured leader's own.
        let first_finish = rounds
            .iter()
            .position(|r| r.iter().any(|&c| tail(c)))
            .unwrap();
        let spent = rounds
            .iter()
            .scan(0, |n, r| {
                *n += r.iter().filter(|&&c| !tail(c)).count();
                Some(*n)
            })
            .position(|n| n == default_budget(AUTO_SEARCH))
            .unwrap();
        assert_eq!(first_finish, spent);
        assert!(finished.iter().all(|c| rounds[spent].contains(c)));
        let same_but_tail = |a: usize, b: usize| {
            candidates[a].config.label().replace("TAIL=1", "TAIL=0") == candidates[b].config.label()
        };
        for &c in &finished {
            assert!(within.iter().any(|&w| same_but_tail(c, w)));
        }
        // They are the TAIL=1 configurations of the leaders before that round.
        let mut expected: Vec<usize> = leaders_then[spent]
            .iter()
            .flat_map(|key| search.finishing.groups[key].clone())
            .collect();
        expected.sort();
        let mut got = finished.clone();
        got.sort();
        assert_eq!(got, expected);

        // A stored winner with TAIL=1 is measured first, and its TAIL=0 configuration (which
        // the model hears of) right after it.
        let stored = finished[0];
        let mut search = start(Seeds {
            winners: vec![stored],
            ..Seeds::default()
        });
        let first = search.ask(&candidates);
        assert_eq!(first[0], stored);
        assert!(same_but_tail(stored, first[1]));
        assert!(search.point_of.contains_key(&first[1]));
        assert!(first[2..].iter().all(|&c| !tail(c)));
    }

    /// Stored sgemm winners as warm-start configurations at an odd shape: a 1024^3 winner
    /// (REPACK=0 WINDOWS=0, which needs aligned rows) stands for its tile with WINDOWS=1 (as
    /// near as REPACK=1; the tie goes to the later parameter); this shape's
    /// row, stored with ORDER=row and without CSTORE (both outside the default values),
    /// stands for its tile with the defaults and comes first; rows of another op, another
    /// dtype, another GPU (when the GPU is known), without parameters, or too far from any
    /// live configuration give nothing.
    #[test]
    fn warm_start_maps_stored_winners_to_the_nearest_live_configurations() {
        let op = Op::load("sgemm", None).unwrap();
        let shape = Shape::parse("1023x1025x1027", &op.spec.dims).unwrap();
        let (candidates, live) = default_space(&op, &shape);
        // Any stored row as a template for the columns the warm start does not read.
        let template = read_best(Path::new("tests/fixtures/runs/best.csv")).unwrap()[0].clone();
        let h100 = "NVIDIA H100 80GB HBM3";
        let row = |op: &str, shape: &str, dtype: &str, gpu: &str, params: &str| BestRow {
            op: op.into(),
            shape: shape.into(),
            dtype: dtype.into(),
            gpu: gpu.into(),
            params: params.into(),
            ..template.clone()
        };
        let tile = "BM=32;BN=64;BK=32;TM=8;TN=4;WARP_N=16;VEC=4;PAD=0;STAGES=3;GROUP_M=8;\
                    OCCUPANCY=0;LOAD=async;BOUNDS=specialized";
        let cube = format!("{tile};REPACK=0;ORDER=snakek;CSTORE=scalar");
        let own = "BM=64;BN=32;BK=32;TM=8;TN=4;WARP_N=8;VEC=4;PAD=4;STAGES=2;GROUP_M=8;\
                   OCCUPANCY=0;LOAD=async;BOUNDS=edge;REPACK=1;ORDER=row";
        let rows = vec![
            row(
                "transpose",
                "1000x1000",
                "f32",
                h100,
                "TILE_DIM=32;BLOCK_ROWS=8",
            ),
            row("sgemm", "1024x1024x1024", "f32", h100, &cube),
            row(
                "sgemm",
                "512x512x512",
                "f32",
                "NVIDIA A100-SXM4-80GB",
                &cube.replace("STAGES=3", "STAGES=2"),
            ),
            row(
                "sgemm",
                "256x256x256",
                "f64",
                h100,
                &cube.replace("BK=32", "BK=16"),
            ),
            row("sgemm", "128x128x128", "f32", h100, "FOO=1"),
            row(
                "sgemm",
                "64x64x64",
                "f32",
                h100,
                &cube.replace("BM=32;BN=64;BK=32", "BM=999;BN=999;BK=999"),
            ),
            row("sgemm", "1023x1025x1027", "f32", h100, own),
        ];
        let text = |i: usize| candidates[i].config.label();
        let texts = |seeds: &[usize]| seeds.iter().map(|&i| text(i)).collect::<Vec<_>>();
        let seeds = warm_start(&op, &shape, Some(h100), &candidates, &live, &rows);
        assert_eq!(
            texts(&seeds),
            [
                // This shape's row first: its tile, ORDER, CSTORE, KSPLIT and B_ELEMS at the
                // default values, SPLITK and TAIL at the values of rows stored before they
                // existed.
                "BM=64 BN=32 BK=32 TM=8 TN=4 WARP_N=8 VEC=4 PAD=4 STAGES=2 GROUP_M=8 \
                 OCCUPANCY=0 LOAD=async BOUNDS=edge REPACK=1 WINDOWS=0 ORDER=snakek CSTORE=scalar KSPLIT=1 \
                 B_ELEMS=0 SPLITK=1 TAIL=0",
                // The 1024^3 winner's tile, windowed (not REPACK=1 nor VEC=1, also one
                // parameter away).
                "BM=32 BN=64 BK=32 TM=8 TN=4 WARP_N=16 VEC=4 PAD=0 STAGES=3 GROUP_M=8 \
                 OCCUPANCY=0 LOAD=async BOUNDS=specialized REPACK=0 WINDOWS=1 ORDER=snakek \
                 CSTORE=scalar KSPLIT=1 B_ELEMS=0 SPLITK=1 TAIL=0",
            ]
        );
        // Without a GPU name every GPU's rows count: the A100 row's configuration joins.
        let any = warm_start(&op, &shape, None, &candidates, &live, &rows);
        assert_eq!(any.len(), 3, "{:?}", texts(&any));
        assert_eq!(any[..2], seeds[..]);
        assert!(text(any[2]).contains("STAGES=2") && text(any[2]).contains("BN=64 BK=32"));
        assert!(warm_start(&op, &shape, None, &candidates, &live, &[]).is_empty());
    }
}
