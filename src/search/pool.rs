//! The points a strategy has not asked yet: the never-twice rule in one place.

use super::rng::Rng;

/// The points not asked yet, with O(1) removal of a given point and O(1) uniform draws: the
/// strategies mix "this particular neighbour" and "any point at random", and both must keep
/// the never-twice rule.
#[derive(Debug, Clone)]
pub(super) struct Pool {
    pub(super) remaining: Vec<usize>,
    /// Position of each point in `remaining`, or `usize::MAX` once taken.
    at: Vec<usize>,
}

impl Pool {
    pub(super) fn new(n: usize) -> Pool {
        Pool {
            remaining: (0..n).collect(),
            at: (0..n).collect(),
        }
    }

    pub(super) fn is_free(&self, p: usize) -> bool {
        self.at[p] != usize::MAX
    }

    pub(super) fn is_empty(&self) -> bool {
        self.remaining.is_empty()
    }

    /// Marks `p` asked; false when it already was, or is no point of the space.
    pub(super) fn take(&mut self, p: usize) -> bool {
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

    pub(super) fn take_random(&mut self, rng: &mut Rng) -> Option<usize> {
        if self.remaining.is_empty() {
            return None;
        }
        let p = self.remaining[rng.below(self.remaining.len())];
        self.take(p);
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
