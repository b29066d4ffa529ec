//! Replaying searches against a run that measured everything: each strategy asks for points
//! and gets the cost the exhaustive run recorded for them, so strategies and budgets can be
//! compared offline, on real landscapes, as often as we like, without a GPU.
//!
//! Throughput is taken as proportional to 1 / median time (every variant of a run does the
//! same work), so "best found throughput / exhaustive best" is `exhaustive best ms / best
//! found ms`.

use super::registry::strategy;
use super::space::SearchSpace;
use super::strategy::drive;
use crate::error::{Error, Result};
use crate::store::record::{Kind, Record, Status};

/// A found point counts as a hit when its throughput is at least this fraction of the best.
pub const HIT: f64 = 0.95;

/// The measured landscape of one exhaustive run.
#[derive(Debug, Clone)]
pub struct Landscape {
    pub space: SearchSpace,
    /// Median ms of each point of `space`; None where the variant failed.
    pub costs: Vec<Option<f64>>,
    /// The fastest median ms of the run.
    pub best_ms: f64,
}

impl Landscape {
    /// The variant rows of a run CSV: `ok` rows with their median, `failed` rows as failures;
    /// pruned rows and baselines are not part of the space.
    pub fn from_records(records: &[Record]) -> Result<Landscape> {
        let live: Vec<&Record> = records
            .iter()
            .filter(|r| r.kind == Kind::Variant && r.status != Status::Pruned)
            .collect();
        let mut names: Vec<String> = Vec::new();
        for r in &live {
            for (k, _) in &r.params {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
        let mut rows = Vec::with_capacity(live.len());
        let mut costs = Vec::with_capacity(live.len());
        for r in &live {
            let row = names
                .iter()
                .map(|n| {
                    r.params
                        .iter()
                        .find(|(k, _)| k == n)
                        .map(|(_, v)| v.clone())
                        .ok_or_else(|| {
                            Error::Usage(format!("variant {} has no value for {n}", r.name))
                        })
                })
                .collect::<Result<Vec<String>>>()?;
            rows.push(row);
            costs.push(match r.status {
                Status::Ok => Some(r.stats.map(|s| s.median_ms).ok_or_else(|| {
                    Error::Usage(format!("variant {} is ok but has no median_ms", r.name))
                })?),
                _ => None,
            });
        }
        let best_ms = costs
            .iter()
            .flatten()
            .copied()
            .filter(|c| c.is_finite() && *c > 0.0)
            .min_by(f64::total_cmp)
            .ok_or_else(|| {
                Error::Usage("the run has no measured variant to replay against".into())
            })?;
        Ok(Landscape {
            space: SearchSpace::from_rows(names, &rows)?,
            costs,
            best_ms,
        })
    }

    /// Every (point, cost) a strategy measures with `budget` variants in batches of `batch`.
    pub fn run(
        &self,
        name: &str,
        budget: usize,
        batch: usize,
        seed: u64,
    ) -> Result<Vec<(usize, Option<f64>)>> {
        let mut s = strategy(name, &self.space, seed, Some(budget))?;
        Ok(drive(s.as_mut(), budget, batch, |points| {
            points.iter().map(|&p| self.costs[p]).collect()
        }))
    }
}

/// One strategy at one budget, summarized over seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub strategy: String,
    /// The budget, capped at the size of the space.
    pub budget: usize,
    /// Mean over seeds of best found throughput / exhaustive best (0 when nothing ran).
    pub mean_ratio: f64,
    /// Fraction of seeds whose best is within [`HIT`] of the exhaustive best.
    pub hit_rate: f64,
    /// Median over seeds of the evaluations until the first hit; a seed without one counts
    /// as never, and None means at least half the seeds never hit.
    pub median_evals_to_hit: Option<f64>,
}

/// Replays each strategy at each budget for seeds `0..seeds`.
pub fn table(
    land: &Landscape,
    strategies: &[&str],
    budgets: &[usize],
    seeds: u64,
    batch: usize,
) -> Result<Vec<Row>> {
    let mut capped: Vec<usize> = Vec::new();
    for &b in budgets {
        let b = b.min(land.space.len());
        if b > 0 && !capped.contains(&b) {
            capped.push(b);
        }
    }
    let mut rows = Vec::new();
    for &name in strategies {
        for &budget in &capped {
            let mut ratios = Vec::new();
            let mut to_hit = Vec::new();
            for seed in 0..seeds {
                let trace = land.run(name, budget, batch, seed)?;
                let best = trace.iter().filter_map(|&(_, c)| c).min_by(f64::total_cmp);
                ratios.push(best.map_or(0.0, |b| land.best_ms / b));
                let first = trace
                    .iter()
                    .position(|&(_, c)| c.is_some_and(|c| land.best_ms / c >= HIT));
                to_hit.push(first.map_or(f64::INFINITY, |i| (i + 1) as f64));
            }
            let n = seeds.max(1) as f64;
            rows.push(Row {
                strategy: name.to_string(),
                budget,
                mean_ratio: ratios.iter().sum::<f64>() / n,
                hit_rate: to_hit.iter().filter(|x| x.is_finite()).count() as f64 / n,
                median_evals_to_hit: median(&mut to_hit).filter(|m| m.is_finite()),
            });
        }
    }
    Ok(rows)
}

fn median(xs: &mut [f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    Some(if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    })
}

/// The table as markdown, with a header that says what was replayed.
pub fn markdown(source: &str, land: &Landscape, rows: &[Row], seeds: u64, batch: usize) -> String {
    let failed = land.costs.iter().filter(|c| c.is_none()).count();
    let mut out = format!(
        "# Search strategy replay\n\n\
         - run: `{source}`\n\
         - space: {} live variants ({} failed), {} parameters ({})\n\
         - exhaustive best: {:.6} ms ({})\n\
         - seeds: {seeds} (0..{seeds}), batch: {batch}\n\
         - ratio: best found throughput / exhaustive best (mean over seeds); hit: within {:.0} % of it\n\
         - evals to hit: median over seeds, a seed that never hits counting as never (— when half or more never hit)\n\n",
        land.space.len(),
        failed,
        land.space.names.len(),
        land.space.names.join(", "),
        land.best_ms,
        land.costs
            .iter()
            .position(|&c| c == Some(land.best_ms))
            .map(|p| land.space.label(p))
            .unwrap_or_default(),
        (1.0 - HIT) * 100.0,
    );
    out.push_str("| strategy | budget | mean ratio | hit rate | evals to hit |\n");
    out.push_str("|---|---:|---:|---:|---:|\n");
    for r in rows {
        let evals = r
            .median_evals_to_hit
            .map_or("—".to_string(), |m| format!("{m}"));
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.2} | {} |\n",
            r.strategy, r.budget, r.mean_ratio, r.hit_rate, evals
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::bench::Stats;

    fn variant(name: &str, a: &str, b: &str, status: Status, ms: Option<f64>) -> Record {
        let mut r = Record::new(
            Kind::Variant,
            name,
            vec![("A".into(), a.into()), ("B".into(), b.into())],
        );
        r.status = status;
        r.stats = ms.map(|m| Stats {
            median_ms: m,
            min_ms: m,
            max_ms: m,
            spread_pct: 0.0,
            samples: 1,
            batch: 1,
        });
        r
    }

    #[test]
    fn landscape_keeps_live_variants_only() {
        let records = vec![
            Record::new(Kind::Baseline, "memcpy", vec![]),
            variant("v0", "1", "x", Status::Ok, Some(2.0)),
            variant("v1", "1", "y", Status::Failed, None),
            variant("v2", "2", "x", Status::Pruned, None),
            variant("v3", "2", "y", Status::Ok, Some(1.0)),
        ];
        let land = Landscape::from_records(&records).unwrap();
        assert_eq!(land.space.len(), 3);
        assert_eq!(land.costs, vec![Some(2.0), None, Some(1.0)]);
        assert_eq!(land.best_ms, 1.0);
        let rows = table(&land, &["exhaustive"], &[1, 2, 10], 3, 2).unwrap();
        // 10 is capped at the 3 live variants.
        assert_eq!(rows.iter().map(|r| r.budget).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(rows[0].mean_ratio, 0.5);
        assert_eq!(rows[0].median_evals_to_hit, None);
        assert_eq!(rows[2].mean_ratio, 1.0);
        assert_eq!(rows[2].hit_rate, 1.0);
        assert_eq!(rows[2].median_evals_to_hit, Some(3.0));
        let md = markdown("x.csv", &land, &rows, 3, 2);
        assert!(md.contains("| exhaustive | 1 | 0.500 | 0.00 | — |"), "{md}");
        assert!(md.contains("A=2 B=y"), "{md}");
    }

    #[test]
    fn a_run_without_measurements_cannot_be_replayed() {
        let records = vec![variant("v0", "1", "x", Status::Failed, None)];
        assert!(Landscape::from_records(&records).is_err());
    }
}
