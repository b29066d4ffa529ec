//! Neighbourhoods in a space: which live points are one parameter away, and which is nearest
//! to a combination that is not live. The strategies that move (anneal, genetic) share it.

use super::pool::Pool;
use super::rng::Rng;
use super::space::SearchSpace;
use std::collections::HashMap;

/// The geometry of the live points: lookups from coordinates to point, one-parameter
/// neighbours, and the nearest live point to an arbitrary combination.
#[derive(Debug, Clone)]
pub(super) struct Lattice {
    pub(super) sizes: Vec<usize>,
    pub(super) points: Vec<Vec<usize>>,
    pub(super) lookup: HashMap<Vec<usize>, usize>,
}

impl Lattice {
    pub(super) fn new(space: &SearchSpace) -> Lattice {
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
    pub(super) fn free_neighbours(&self, p: usize, pool: &Pool) -> Vec<(usize, usize)> {
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
    pub(super) fn nearest_free(
        &self,
        coords: &[usize],
        pool: &Pool,
        rng: &mut Rng,
    ) -> Option<usize> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::space::tests::holey;

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
}
