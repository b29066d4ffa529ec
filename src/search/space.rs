//! The space a strategy searches: the live configurations of a tuning space as points, each
//! a value index per parameter.

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
    /// Each point's compile cost (the spec's `compile_cost`), or empty where the spec has
    /// none: a strategy may keep its unconditional proposals off the [`heavy`] compiles.
    pub costs: Vec<i64>,
}

/// A compile this many times the median cost or more is heavy: the transposes NVRTC takes
/// seconds on cost 16-64 times a typical configuration, and the automatic compile time limit
/// stops a source at 15 times the median compile.
pub const HEAVY: i64 = 8;

/// Whether `cost` is a heavy compile among costs of median `median` ([`HEAVY`] times it or
/// more).
pub fn heavy(cost: i64, median: i64) -> bool {
    median > 0 && cost >= HEAVY * median
}

/// The median of `costs` (0 for none): what [`heavy`] compares a cost with, over a round
/// (the build stage's order) or over the space (the model's first round).
pub fn median_cost(costs: &[i64]) -> i64 {
    let mut sorted = costs.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(0)
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
            in_numeric_order(list, String::clone);
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
            costs: Vec::new(),
        })
    }

    /// The candidates `live` (positions in `candidates`, e.g. the unpruned ones, or a shard's
    /// share of them) as a space, and for each point its candidate's position (what the tuner
    /// needs to go from a proposal to a kernel). The same space [`SearchSpace::from_rows`]
    /// makes of their values as text, built from each configuration's digits: a sgemm space
    /// has tens of thousands of live points, and every run builds it.
    pub fn from_candidates(
        candidates: &[Candidate],
        live: &[usize],
    ) -> Result<(SearchSpace, Vec<usize>)> {
        let Some(axes) = live.first().map(|&i| candidates[i].config.axes()) else {
            let names = candidates
                .first()
                .map(|c| c.config.axes().names.clone())
                .unwrap_or_default();
            return Ok((SearchSpace::from_rows(names, &[])?, Vec::new()));
        };
        // Each parameter's values in the order they first appear, then ordered as `from_rows`
        // orders them ([`in_numeric_order`]); `index[k][d]` is where the axis value `d` went.
        let mut order: Vec<Vec<u16>> = vec![Vec::new(); axes.names.len()];
        for &i in live {
            for (k, &d) in candidates[i].config.digits().iter().enumerate() {
                if !order[k].contains(&d) {
                    order[k].push(d);
                }
            }
        }
        let mut values: Vec<Vec<String>> = Vec::with_capacity(order.len());
        let mut index: Vec<Vec<usize>> = Vec::with_capacity(order.len());
        for (k, digits) in order.iter_mut().enumerate() {
            let text = |d: &u16| axes.text(k, usize::from(*d)).to_string();
            in_numeric_order(digits, text);
            let mut at = vec![0; axes.values[k].len()];
            for (pos, &d) in digits.iter().enumerate() {
                at[usize::from(d)] = pos;
            }
            index.push(at);
            values.push(digits.iter().map(text).collect());
        }
        // Enumerated candidates are distinct points, so no duplicate check is needed here.
        let points = live
            .iter()
            .map(|&i| {
                let digits = candidates[i].config.digits();
                digits
                    .iter()
                    .enumerate()
                    .map(|(k, &d)| index[k][usize::from(d)])
                    .collect()
            })
            .collect();
        let space = SearchSpace {
            names: axes.names.clone(),
            values,
            points,
            costs: Vec::new(),
        };
        Ok((space, live.to_vec()))
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
    pub(super) fn check(&self) -> Result<()> {
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

/// Fixtures the strategies' tests share.
/// Sorts a parameter's values (`text` gives each one's text) numerically when every one is an
/// integer, so that a neighbour one step away is the next size up or down; otherwise leaves
/// them in the order they first appeared.
fn in_numeric_order<T>(list: &mut [T], text: impl Fn(&T) -> String) {
    let int = |v: &T| text(v).trim().parse::<i64>().ok();
    if list.iter().all(|v| int(v).is_some()) {
        list.sort_by_cached_key(|v| int(v).unwrap_or(0));
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A 4 x 3 x 5 grid with every point whose coordinates sum to a multiple of 4 removed.
    pub(in crate::search) fn holey() -> SearchSpace {
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

    pub(in crate::search) fn cost_of(space: &SearchSpace, p: usize) -> Option<f64> {
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

    /// The space built from the candidates' digits is the one their values as text give,
    /// value order (numeric for integers) and points alike, over a live subset in an order
    /// that is not the space's.
    #[test]
    fn a_space_from_candidates_is_the_space_of_their_values() {
        use crate::model::limits::DeviceLimits;
        use crate::model::shape::Shape;
        use crate::spec::ops::Op;
        use crate::spec::space::enumerate;
        for (name, shape) in [("sgemm", "999x777x555"), ("transpose", "2049x17")] {
            let op = Op::load(name, None).unwrap();
            let shape = Shape::parse(shape, &op.spec.dims).unwrap();
            let all = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
            let mut live: Vec<usize> = (0..all.len())
                .filter(|&i| all[i].launch.is_some() && i % 3 != 1)
                .collect();
            live.reverse();
            assert!(live.len() > 100, "{name}: {}", live.len());
            let (space, of) = SearchSpace::from_candidates(&all, &live).unwrap();
            let names: Vec<String> = all[0].config.values().map(|(n, _)| n.to_string()).collect();
            let rows: Vec<Vec<String>> = live
                .iter()
                .map(|&i| all[i].config.values().map(|(_, v)| v.to_string()).collect())
                .collect();
            let text = SearchSpace::from_rows(names, &rows).unwrap();
            assert_eq!(of, live);
            assert_eq!(space.names, text.names, "{name}");
            assert_eq!(space.values, text.values, "{name}");
            assert_eq!(space.points, text.points, "{name}");
        }
    }
}
