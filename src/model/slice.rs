//! Which share of a sweep one process owns: shard K of N, how the sweep is split, and the
//! share of one shape's variants (`--shard K/N`). Plain data: the plan that computes these is
//! in `cluster::shard`, a layer above.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The most shards a sweep is cut into: as many as a Kubernetes indexed Job's completions may
/// be (Slurm's arrays default to far fewer), and few enough that per-shard tables stay small.
pub const MAX_SHARDS: usize = 100_000;

/// Shard `k` of `n` (0 <= k < n), as given by `--shard K/N`. K counts from 0 like Slurm's
/// `SLURM_ARRAY_TASK_ID` (with `--array=0-(N-1)`) and Kubernetes' `JOB_COMPLETION_INDEX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

impl Shard {
    /// Parses `K/N`; anything else is a one-line usage error that says what is wrong.
    pub fn parse(text: &str) -> Result<Shard> {
        let bad = |why: &str| {
            Error::Usage(format!(
                "--shard '{text}': {why} (expected K/N with 0 <= K < N, e.g. 0/4)"
            ))
        };
        let (k, n) = text.trim().split_once('/').ok_or_else(|| bad("no '/'"))?;
        let number = |part: &str, what: &str| {
            let part = part.trim();
            if part.starts_with('-') {
                return Err(bad(&format!("{what} must not be negative")));
            }
            part.parse::<usize>()
                .map_err(|_| bad(&format!("{what} '{part}' is not a whole number")))
        };
        let (k, n) = (number(k, "K")?, number(n, "N")?);
        if n == 0 {
            return Err(bad("N must be at least 1"));
        }
        if n > MAX_SHARDS {
            return Err(bad(&format!("N must be at most {MAX_SHARDS}")));
        }
        if k >= n {
            return Err(bad(&format!("K must be below N (shards are 0..{})", n - 1)));
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// How a sweep is cut into shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Every shard tunes every shape, each a share of its variants.
    Variants,
    /// Every shard tunes whole shapes (all their variants).
    Shapes,
}

/// What one shard does with one shape of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub shard: Shard,
    pub split: Split,
    /// The shape's position in the sweep (as given on the command line or in the file).
    pub shape_pos: usize,
}

impl Slice {
    /// Whether the live (unpruned) variant at position `p` of the shape's list of live
    /// variants belongs to this shard: with [`Split::Variants`], position `p` of shape `s`
    /// goes to shard `(p + s) % N`, so each shard gets every N-th variant (balanced within one
    /// variant per shape) and the offset `s` spreads the remainders over the shards; with
    /// [`Split::Shapes`] the shard owns all of them (it was given the whole shape).
    pub fn owns(&self, p: usize) -> bool {
        match self.split {
            Split::Shapes => true,
            Split::Variants => (p + self.shape_pos) % self.shard.n == self.shard.k,
        }
    }
}

/// The tuner's hook: the live candidate indices (in space order) this shard measures. Without
/// a shard, all of them.
pub fn owned(live: Vec<usize>, slice: Option<&Slice>) -> Vec<usize> {
    match slice {
        None => live,
        Some(s) => live
            .into_iter()
            .enumerate()
            .filter(|(p, _)| s.owns(*p))
            .map(|(_, i)| i)
            .collect(),
    }
}
