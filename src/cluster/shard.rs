//! `--shard K/N`: one of N independent processes (a Slurm array task, a Kubernetes indexed-job
//! pod) runs a deterministic share of a sweep, and `tune merge` (see [`crate::cluster::merge`]) joins
//! the shares afterwards. There is no coordinator: every shard computes the same plan from the
//! same arguments, so the shares are a partition without any process talking to another.
//!
//! The plan is [`plan`]; the tuner applies a shard's share of a shape's variants with
//! [`owned`](crate::model::slice::owned). A sharded run records what it did in a manifest,
//! `shard-K-of-N.json` in its output folder ([`Manifest`]), which is what `tune merge` reads.

use crate::error::{Error, Result};
use crate::model::limits::DeviceLimits;
use crate::model::shape::Shape;
use crate::model::slice::{Shard, Slice, Split};
use crate::spec::ops::Op;
use crate::spec::space;
use crate::store::record::RunInfo;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// With at least this many shapes per shard, a sweep is split by shapes.
pub const SHAPES_PER_SHARD: usize = 4;

/// One shape to tune, with the share of it this process owns.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// Position in the sweep.
    pub pos: usize,
    pub shape: String,
    /// Estimated work (the op's metric amount: bytes or flops), for ordering and balancing.
    pub work: f64,
    pub slice: Option<Slice>,
}

/// How a sweep of `shapes` shapes is split into `n` shards: by shapes when there are at
/// least [`SHAPES_PER_SHARD`] per shard (each shape is then tuned, and its leaders confirmed,
/// on one GPU, and the shards still balance), else by variants (a few shapes still spread
/// over every shard). One shard holds every variant of every shape, so it is split by
/// shapes whatever their number: it runs the sweep as an unsharded run does, confirmation
/// included.
pub fn split_for(n: usize, shapes: usize) -> Split {
    if n == 1 || shapes >= SHAPES_PER_SHARD * n {
        Split::Shapes
    } else {
        Split::Variants
    }
}

/// The sweep as one process runs it: without a shard, every shape; with one, this shard's
/// share (see [`split_for`]). By variants, every shape, each with a [`Slice`]. By shapes, the
/// shapes are dealt largest-first to the shard with the least work so far (ties: the lowest
/// K), a greedy longest-processing-time split that keeps the shards within about a third of
/// the optimum, and deterministic because it depends only on the shapes and their work.
/// `work[i]` is the estimated work of `shapes[i]` ([`estimated_work`]).
pub fn plan(shard: Option<Shard>, shapes: &[String], work: &[f64]) -> Vec<Assignment> {
    let all = shapes.iter().zip(work).enumerate();
    let Some(shard) = shard else {
        return all
            .map(|(pos, (s, w))| Assignment {
                pos,
                shape: s.clone(),
                work: *w,
                slice: None,
            })
            .collect();
    };
    let split = split_for(shard.n, shapes.len());
    let owner: Vec<usize> = match split {
        Split::Variants => vec![shard.k; shapes.len()],
        Split::Shapes => {
            let mut load = vec![0.0f64; shard.n];
            let mut owner = vec![0; shapes.len()];
            for i in longest_first(work) {
                let k = (0..shard.n)
                    .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
                    .expect("n >= 1");
                load[k] += work[i];
                owner[i] = k;
            }
            owner
        }
    };
    all.filter(|(pos, _)| owner[*pos] == shard.k)
        .map(|(pos, (s, w))| Assignment {
            pos,
            shape: s.clone(),
            work: *w,
            slice: Some(Slice {
                shard,
                split,
                shape_pos: pos,
            }),
        })
        .collect()
}

/// Indices of `work`, largest first (ties: the earlier one first).
pub fn longest_first(work: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..work.len()).collect();
    order.sort_by(|&a, &b| work[b].total_cmp(&work[a]).then(a.cmp(&b)));
    order
}

/// The op's metric amount (bytes moved or flops) for each shape: the work a shape costs, up to
/// a factor the same for every shape of one op. Evaluated with fixed (H100) limits, never the
/// local GPU's, so every machine of a cluster computes the same plan.
pub fn estimated_work(op: &Op, shapes: &[String]) -> Result<Vec<f64>> {
    let (expr, _) = op.spec.metric.amount();
    shapes
        .iter()
        .map(|s| {
            let shape = Shape::parse(s, &op.spec.dims)?;
            let vars = space::base_vars(op, &shape, &DeviceLimits::SM90_DEFAULT);
            Ok(vars.eval_int(expr, &format!("{} metric", op.at(expr)))? as f64)
        })
        .collect()
}

/// SHA-256 of the op's spec and templates: results of different kernel code never rank
/// together, even under the same op name.
pub fn op_fingerprint(op: &Op) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        op.spec_text.as_str(),
        op.template.as_str(),
        op.baseline_template.as_deref().unwrap_or(""),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The arguments that must be the same in every shard of one sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub op: String,
    /// [`op_fingerprint`] of the spec and templates.
    pub op_fingerprint: String,
    /// Every shape of the sweep, in order (not only this shard's).
    pub shapes: Vec<String>,
    /// `--dtype`, when given (shards of one sweep must tune the same element type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// `--param` overrides (with `--block-size` folded in), in name order.
    pub params: Vec<String>,
    pub reps: usize,
    pub warmup: usize,
    /// L2 state while timing: `cold` or `warm`.
    pub cache: String,
    pub seed: u64,
    pub rtol: Option<f64>,
    pub adaptive: bool,
    pub confirm_rounds: usize,
    /// `--strategy`: shards searched by other strategies or budgets rank different subsets
    /// of the space, so their leaders are not one sweep's.
    #[serde(default)]
    pub strategy: String,
    /// `--budget` as given (`200`, `90s`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<String>,
    /// `--no-warm-start` clears it: the search starts from the stored winners or not.
    #[serde(default = "yes")]
    pub warm_start: bool,
}

fn yes() -> bool {
    true
}

/// What a sharded run wrote for one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardOutput {
    pub shape: String,
    /// The run finished: not interrupted, no error.
    pub complete: bool,
    /// Why it is not complete.
    #[serde(default)]
    pub error: String,
    /// The run CSV, relative to the manifest's folder.
    pub csv: Option<String>,
    /// The journal, relative to the manifest's folder.
    pub journal: Option<String>,
    /// What the run measured on (GPU, driver, NVRTC, cache state...).
    pub run: Option<RunInfo>,
    /// The op's parameter names, in column order.
    pub param_names: Vec<String>,
    pub gpu_uuid: String,
    /// When the shape finished (RFC 3339): `tune merge` stores it in best.csv, so merging the
    /// same shards again writes the same bytes.
    pub tuned_at: String,
    /// The GPU's number of SMs, for best.csv's `num_sms` (none in manifests written before).
    #[serde(default)]
    pub num_sms: Option<i64>,
    /// The architecture the shape was compiled for, for best.csv's `arch`.
    #[serde(default)]
    pub arch: String,
}

/// `shard-K-of-N.json`: written when a sharded run starts (`complete: false`), again after
/// every shape, and with `complete: true` once every shape of the share finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub tool_version: String,
    pub k: usize,
    pub n: usize,
    pub split: Split,
    pub sweep: Sweep,
    /// This shard's shapes.
    pub shapes: Vec<String>,
    pub complete: bool,
    pub outputs: Vec<ShardOutput>,
}

/// The manifest format written by this version.
pub const MANIFEST_FORMAT: u32 = 1;

/// `DIR/shard-K-of-N.json`.
pub fn manifest_path(dir: &Path, shard: Shard) -> PathBuf {
    dir.join(format!("shard-{}-of-{}.json", shard.k, shard.n))
}

/// K and N of a manifest file name `shard-K-of-N.json`, if it is one.
pub fn parse_manifest_name(name: &str) -> Option<Shard> {
    let body = name.strip_prefix("shard-")?.strip_suffix(".json")?;
    let (k, n) = body.split_once("-of-")?;
    let (k, n) = (k.parse().ok()?, n.parse().ok()?);
    (k < n).then_some(Shard { k, n })
}

/// The manifests in `dir`, sorted by file name.
pub fn manifests_in(dir: &Path) -> Result<Vec<(Shard, PathBuf)>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("cannot read", dir, e))?;
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|e| Error::io("cannot read", dir, e))?;
        if let Some(shard) = parse_manifest_name(&e.file_name().to_string_lossy()) {
            out.push((shard, e.path()));
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

impl Manifest {
    pub fn read(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("cannot read", path, e))?;
        serde_json::from_str(&text).map_err(|e| {
            Error::Usage(format!(
                "{}: not a shard manifest of this tune version: {e}",
                path.display()
            ))
        })
    }

    /// Writes the manifest atomically (a reader sees the old or the new one, never half).
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = manifest_path(
            dir,
            Shard {
                k: self.k,
                n: self.n,
            },
        );
        let mut text = serde_json::to_string_pretty(self).expect("serializable");
        text.push('\n');
        crate::store::files::write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::slice::{owned, MAX_SHARDS};

    #[test]
    fn parses_k_of_n_and_rejects_everything_else() {
        assert_eq!(Shard::parse("0/1").unwrap(), Shard { k: 0, n: 1 });
        assert_eq!(Shard::parse(" 3/4 ").unwrap(), Shard { k: 3, n: 4 });
        let last = format!("{}/{}", MAX_SHARDS - 1, MAX_SHARDS);
        assert_eq!(Shard::parse(&last).unwrap().n, MAX_SHARDS);
        for (bad, why) in [
            ("2/2", "K must be below N"),
            ("5/2", "K must be below N"),
            ("1/0", "N must be at least 1"),
            ("0/0", "N must be at least 1"),
            ("0/100001", "N must be at most 100000"),
            ("0/4611686018427387904", "N must be at most"),
            ("a/b", "K 'a' is not a whole number"),
            ("1/b", "N 'b' is not a whole number"),
            ("-1/2", "K must not be negative"),
            ("1/-2", "N must not be negative"),
            ("", "no '/'"),
            ("3", "no '/'"),
            ("1/2/3", "N '2/3' is not a whole number"),
            ("/2", "K '' is not a whole number"),
        ] {
            let e = Shard::parse(bad).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{bad}");
            let line = e.to_string();
            assert!(line.contains(why), "{bad}: {line}");
            assert!(line.starts_with("--shard '"), "{bad}: {line}");
            assert!(!line.contains('\n'), "{bad}: {line}");
        }
    }

    fn shapes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{}x64", i + 1)).collect()
    }

    #[test]
    fn variants_are_a_balanced_partition_for_every_shape() {
        for n in 2..=5 {
            let sweep = shapes(3);
            let work = vec![1.0; 3];
            for (pos, _) in sweep.iter().enumerate() {
                let live: Vec<usize> = (0..23).map(|i| i * 2 + 1).collect();
                let mut seen = Vec::new();
                let mut sizes = Vec::new();
                for k in 0..n {
                    let plan = plan(Some(Shard { k, n }), &sweep, &work);
                    assert_eq!(plan.len(), 3, "by variants every shard has every shape");
                    let mine = owned(live.clone(), plan[pos].slice.as_ref());
                    sizes.push(mine.len());
                    seen.extend(mine);
                }
                seen.sort();
                assert_eq!(seen, live, "n={n} shape {pos}: a partition");
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= 1, "n={n}: {sizes:?}");
            }
        }
    }

    #[test]
    fn many_shapes_split_by_shapes_balanced_and_stable() {
        let n = 3;
        let sweep = shapes(13);
        let work: Vec<f64> = (0..13).map(|i| ((i * 7) % 13 + 1) as f64).collect();
        let plans: Vec<Vec<Assignment>> = (0..n)
            .map(|k| plan(Some(Shard { k, n }), &sweep, &work))
            .collect();
        let mut all: Vec<usize> = plans.iter().flatten().map(|a| a.pos).collect();
        all.sort();
        assert_eq!(all, (0..13).collect::<Vec<_>>());
        for p in plans.iter().flatten() {
            let s = p.slice.unwrap();
            assert_eq!(s.split, Split::Shapes);
            assert!((0..50).all(|i| s.owns(i)), "a whole shape");
        }
        let loads: Vec<f64> = plans
            .iter()
            .map(|p| p.iter().map(|a| a.work).sum())
            .collect();
        let total: f64 = work.iter().sum();
        let max = loads.iter().cloned().fold(0.0, f64::max);
        assert!(max <= total / n as f64 + 13.0, "{loads:?}");
        // Stable: the same arguments give the same plan.
        assert_eq!(plans[1], plan(Some(Shard { k: 1, n }), &sweep, &work));
        // Below 4 shapes per shard, by variants.
        assert_eq!(split_for(3, 11), Split::Variants);
        assert_eq!(split_for(3, 12), Split::Shapes);
    }

    #[test]
    fn one_shard_holds_every_shape_whole() {
        for count in [1, 3, 4, 9] {
            assert_eq!(split_for(1, count), Split::Shapes, "{count} shape(s)");
            let sweep = shapes(count);
            let work: Vec<f64> = (0..count).map(|i| (i + 1) as f64).collect();
            let plan = plan(Some(Shard { k: 0, n: 1 }), &sweep, &work);
            let held: Vec<&String> = plan.iter().map(|a| &a.shape).collect();
            assert_eq!(held, sweep.iter().collect::<Vec<_>>());
            for a in &plan {
                let s = a.slice.expect("a shard's slice");
                assert_eq!(s.split, Split::Shapes, "{count} shape(s)");
                assert!((0..50).all(|i| s.owns(i)), "a whole shape");
            }
        }
    }

    #[test]
    fn longest_first_orders_by_work_then_position() {
        assert_eq!(longest_first(&[1.0, 5.0, 5.0, 2.0]), vec![1, 2, 3, 0]);
    }

    #[test]
    fn manifest_names() {
        assert_eq!(
            parse_manifest_name("shard-2-of-3.json"),
            Some(Shard { k: 2, n: 3 })
        );
        for bad in [
            "shard-3-of-3.json",
            "shard-a-of-3.json",
            "best.csv",
            "shard-1-of-3",
        ] {
            assert_eq!(parse_manifest_name(bad), None, "{bad}");
        }
        assert_eq!(
            manifest_path(Path::new("d"), Shard { k: 1, n: 4 }),
            Path::new("d/shard-1-of-4.json")
        );
    }
}
