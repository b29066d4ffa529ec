//! How a run numbers the GPU tasks of its job: the ids in the worker protocol and the journal.

/// A task's id within a run's job: a baseline's is its index in the spec (from 0), a variant's
/// is [`TaskId::VARIANT_BASE`] + its candidate index, so the two never collide and an id in a
/// journal says which it is and, for a variant, which configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(usize);

impl TaskId {
    /// The first variant id; specs have far fewer baselines than this.
    const VARIANT_BASE: usize = 10_000;

    /// The task of baseline `index` (its place in the spec's list).
    pub fn baseline(index: usize) -> TaskId {
        TaskId(index)
    }

    /// The task of the variant with candidate index `candidate`.
    pub fn variant(candidate: usize) -> TaskId {
        TaskId(Self::VARIANT_BASE + candidate)
    }

    /// The id a task carries as a number (worker protocol, journal).
    pub fn from_number(n: usize) -> TaskId {
        TaskId(n)
    }

    /// The id as the number a task carries.
    pub fn number(self) -> usize {
        self.0
    }

    /// The candidate index of a variant's task; `None` for a baseline's.
    pub fn candidate(self) -> Option<usize> {
        self.0.checked_sub(Self::VARIANT_BASE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_and_variant_ids_do_not_collide_and_round_trip() {
        assert_eq!(TaskId::baseline(3).candidate(), None);
        assert_eq!(TaskId::variant(0).candidate(), Some(0));
        assert_eq!(TaskId::variant(42).number(), 10_042);
        assert_eq!(TaskId::from_number(10_042), TaskId::variant(42));
        assert_ne!(TaskId::baseline(0), TaskId::variant(0));
    }
}
