//! An all-pairs covering set of a space: a small subset of the runnable configurations in
//! which every value of every parameter, and every pair of values of any two parameters that
//! occur together in some runnable configuration, appears at least once.
//!
//! It is what CI compiles instead of whole cartesian products: a template bug that needs one
//! value, or two values together, shows in the covering set as it would in the whole space,
//! at a few hundred compiles instead of thousands. (Pairs no runnable configuration holds,
//! because the constraints forbid them, need no covering.) For the same reason it is the
//! first round of the `model` search: every value and every pair of values measured once is
//! what a model of main effects and pairwise interactions needs to rank the rest.
//!
//! Greedy set cover with lazy gains: the configuration that covers the most uncovered pairs
//! is taken first. Gains only shrink as pairs get covered, so a stale gain is an upper bound
//! and a candidate whose recomputed gain still tops the heap is the true best.

use crate::spec::space::Candidate;
use std::collections::{BinaryHeap, HashMap, HashSet};

/// Positions (into `candidates`) of an all-pairs covering set of the runnable candidates,
/// in the order they were chosen (the first covers the most). Pruned candidates are never
/// chosen. Deterministic: ties go to the lower position.
pub fn pairwise(candidates: &[Candidate]) -> Vec<usize> {
    let rows: Vec<(usize, Vec<u32>)> = encode(candidates);
    let ids: Vec<Vec<u32>> = rows.iter().map(|(_, r)| r.clone()).collect();
    pairwise_rows(&ids).into_iter().map(|k| rows[k].0).collect()
}

/// Positions (into `rows`) of an all-pairs covering set of `rows`, each row one id per
/// (parameter, value), unique across parameters. The greedy choice takes the row covering
/// the most uncovered pairs; gains only shrink, so a popped gain that still beats the next
/// one is exact (lazy evaluation). Deterministic: ties go to the lower position.
pub fn pairwise_rows(rows: &[Vec<u32>]) -> Vec<usize> {
    let mut uncovered = PairSet::of(rows);
    // Max-heap of (gain, lower position first).
    let mut heap: BinaryHeap<(usize, std::cmp::Reverse<usize>)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (pairs(r).count(), std::cmp::Reverse(i)))
        .collect();
    let mut chosen = Vec::new();
    while !uncovered.is_empty() {
        let Some((_, std::cmp::Reverse(i))) = heap.pop() else {
            break;
        };
        let gain = pairs(&rows[i]).filter(|&p| uncovered.contains(p)).count();
        if gain == 0 {
            continue;
        }
        let next = heap.peek().map_or(0, |&(g, _)| g);
        if gain >= next {
            for p in pairs(&rows[i]) {
                uncovered.remove(p);
            }
            chosen.push(i);
        } else {
            heap.push((gain, std::cmp::Reverse(i)));
        }
    }
    chosen
}

/// The pairs of ids no chosen row covers yet. Ids number the (parameter, value)s of a space,
/// a few dozen in the built-in ones, so a bitmap over every (id, id) pair is small and its
/// look-ups are a shift and a mask: hashing the pairs of a sgemm space's 30,000-odd rows
/// (200-odd pairs each) was most of the search's setup. Spaces with too many ids for a
/// bitmap (it grows as their square) keep a hash set.
enum PairSet {
    Bitmap {
        ids: usize,
        bits: Vec<u64>,
        len: usize,
    },
    Hashed(HashSet<(u32, u32)>),
}

/// Ids up to which [`PairSet`] is a bitmap: 4096² bits, 2 MiB.
const BITMAP_IDS: usize = 4096;

impl PairSet {
    /// Every pair of every row.
    fn of(rows: &[Vec<u32>]) -> PairSet {
        let ids = rows.iter().flatten().max().map_or(0, |&m| m as usize + 1);
        let mut set = if ids <= BITMAP_IDS {
            PairSet::Bitmap {
                ids,
                bits: vec![0; (ids * ids).div_ceil(64)],
                len: 0,
            }
        } else {
            PairSet::Hashed(HashSet::new())
        };
        for p in rows.iter().flat_map(|r| pairs(r)) {
            set.insert(p);
        }
        set
    }

    fn insert(&mut self, (a, b): (u32, u32)) {
        match self {
            PairSet::Bitmap { ids, bits, len } => {
                let k = a as usize * *ids + b as usize;
                if bits[k / 64] & (1 << (k % 64)) == 0 {
                    bits[k / 64] |= 1 << (k % 64);
                    *len += 1;
                }
            }
            PairSet::Hashed(set) => {
                set.insert((a, b));
            }
        }
    }

    fn contains(&self, (a, b): (u32, u32)) -> bool {
        match self {
            PairSet::Bitmap { ids, bits, .. } => {
                let k = a as usize * *ids + b as usize;
                bits[k / 64] & (1 << (k % 64)) != 0
            }
            PairSet::Hashed(set) => set.contains(&(a, b)),
        }
    }

    fn remove(&mut self, (a, b): (u32, u32)) {
        match self {
            PairSet::Bitmap { ids, bits, len } => {
                let k = a as usize * *ids + b as usize;
                if bits[k / 64] & (1 << (k % 64)) != 0 {
                    bits[k / 64] &= !(1 << (k % 64));
                    *len -= 1;
                }
            }
            PairSet::Hashed(set) => {
                set.remove(&(a, b));
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            PairSet::Bitmap { len, .. } => *len == 0,
            PairSet::Hashed(set) => set.is_empty(),
        }
    }
}

/// Each runnable candidate as its position and one id per (parameter, value).
fn encode(candidates: &[Candidate]) -> Vec<(usize, Vec<u32>)> {
    let mut ids: HashMap<(usize, String), u32> = HashMap::new();
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.pruned.is_none())
        .map(|(pos, c)| {
            let row = c
                .config
                .values()
                .enumerate()
                .map(|(slot, (_, v))| {
                    let next = ids.len() as u32;
                    *ids.entry((slot, v.to_string())).or_insert(next)
                })
                .collect();
            (pos, row)
        })
        .collect()
}

/// Every pair of (parameter, value) ids of one configuration. A space of one parameter has
/// no pairs; its values are covered as pairs with themselves.
fn pairs(row: &[u32]) -> impl Iterator<Item = (u32, u32)> + '_ {
    let single = (row.len() == 1).then(|| (row[0], row[0]));
    (0..row.len())
        .flat_map(move |a| (a + 1..row.len()).map(move |b| (row[a], row[b])))
        .chain(single)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::limits::DeviceLimits;
    use crate::model::shape::Shape;
    use crate::spec::ops::Op;
    use crate::spec::space::enumerate;

    fn space(op: &str, shape: &str) -> Vec<Candidate> {
        let op = Op::load(op, None).unwrap();
        let shape = Shape::parse(shape, &op.spec.dims).unwrap();
        enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap()
    }

    fn value_pairs(c: &Candidate) -> Vec<String> {
        let v: Vec<(&str, &crate::spec::expr::Value)> = c.config.values().collect();
        let mut out = Vec::new();
        for a in 0..v.len() {
            for b in a + 1..v.len() {
                out.push(format!("{}={} {}={}", v[a].0, v[a].1, v[b].0, v[b].1));
            }
        }
        out
    }

    /// Checked against the definition, by brute force: every pair in a runnable candidate is
    /// in a chosen one, and every chosen one is runnable.
    fn assert_covers(all: &[Candidate], chosen: &[usize]) {
        let covered: HashSet<String> = chosen.iter().flat_map(|&i| value_pairs(&all[i])).collect();
        for c in all.iter().filter(|c| c.pruned.is_none()) {
            for p in value_pairs(c) {
                assert!(covered.contains(&p), "pair {p} not covered");
            }
        }
        assert!(chosen.iter().all(|&i| all[i].pruned.is_none()));
        let distinct: HashSet<usize> = chosen.iter().copied().collect();
        assert_eq!(distinct.len(), chosen.len(), "no configuration twice");
    }

    #[test]
    fn transpose_cover_holds_every_pair_in_a_fraction_of_the_space() {
        for shape in ["256x512", "999x1001"] {
            let all = space("transpose", shape);
            let valid = all.iter().filter(|c| c.pruned.is_none()).count();
            let chosen = pairwise(&all);
            assert_covers(&all, &chosen);
            assert!(
                chosen.len() * 5 < valid,
                "{shape}: {} of {valid}",
                chosen.len()
            );
        }
    }

    /// The bitmap of uncovered pairs and the hash set that replaces it for spaces with many
    /// ids choose the same rows: the same sgemm rows, their ids moved past the bitmap's range.
    #[test]
    fn bitmap_and_hashed_pair_sets_give_the_same_cover() {
        let all = space("sgemm", "100x68x52");
        let rows: Vec<Vec<u32>> = encode(&all).into_iter().map(|(_, r)| r).collect();
        let far: Vec<Vec<u32>> = rows
            .iter()
            .map(|r| r.iter().map(|&id| id + BITMAP_IDS as u32).collect())
            .collect();
        assert!(matches!(PairSet::of(&rows), PairSet::Bitmap { .. }));
        assert!(matches!(PairSet::of(&far), PairSet::Hashed(_)));
        let chosen = pairwise_rows(&rows);
        assert!(!chosen.is_empty());
        assert_eq!(chosen, pairwise_rows(&far));
    }

    #[test]
    fn a_cover_of_nothing_runnable_is_empty() {
        let mut all = space("matmul", "64x64x64");
        for c in &mut all {
            c.pruned = Some("test".into());
        }
        assert!(pairwise(&all).is_empty());
    }

    #[test]
    fn an_unconstrained_product_gets_a_near_optimal_cover() {
        // Every default matmul variant is runnable at 1024^3: 3 block sizes x 2 x 2 x 4 bounds
        // modes. Any all-pairs set holds at least 3 x 4 = 12 (every block size with every
        // bounds mode); greedy lands close to that, far below the 48 of the product.
        let all = space("matmul", "1024x1024x1024");
        assert_eq!(all.iter().filter(|c| c.pruned.is_none()).count(), 48);
        let chosen = pairwise(&all);
        assert_covers(&all, &chosen);
        assert!((12..=16).contains(&chosen.len()), "{}", chosen.len());
    }
}
