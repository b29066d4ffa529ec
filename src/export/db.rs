//! The tuning database (`best.csv`) as a value: exact lookups, nearest shapes and filters.

use super::kernel::Applicability;
use crate::error::{Error, Result};
use crate::store::best::{read_best_checked, BadRow, BestRow};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The rows of a `best.csv`, in file order (sorted by op, shape, dtype and GPU, as
/// [`crate::store::best::upsert_best`] writes them).
///
/// One row per (op, shape, dtype, GPU): the newest run of its key, or with `tune
/// --keep-best` the fastest of today's kernel (see the [module docs](super)).
#[derive(Debug, Clone, PartialEq)]
pub struct TunedDb {
    path: PathBuf,
    rows: Vec<BestRow>,
    skipped: Vec<BadRow>,
    rules: RuleCache,
}

/// Per row, its [`Applicability`] under the built-in templates, computed the first time
/// [`TunedDb::select`] needs it (rendering a row and working out its rule takes
/// milliseconds).
/// Not part of the database's value: two databases of the same rows are equal whatever each
/// has computed.
#[derive(Debug, Clone, Default)]
struct RuleCache(Vec<OnceLock<Applicability>>);

impl RuleCache {
    fn new(rows: usize) -> RuleCache {
        RuleCache((0..rows).map(|_| OnceLock::new()).collect())
    }
}

impl PartialEq for RuleCache {
    fn eq(&self, _: &RuleCache) -> bool {
        true
    }
}

impl TunedDb {
    /// Reads a `best.csv`. A missing file is an error that says how to make one; an empty
    /// file has no rows. Lines that cannot be used (a truncated last line, a hand edit gone
    /// wrong) are skipped with a `warning: FILE:LINE: why` on stderr and listed in
    /// [`TunedDb::skipped`]; every other row is used.
    pub fn load(path: impl AsRef<Path>) -> Result<TunedDb> {
        let path = path.as_ref();
        if !path.exists() {
            return Err(Error::Usage(format!(
                "tuning database {} does not exist: tune first (tune --op transpose --shape \
                 1000x1000) or pass --db FILE",
                path.display()
            )));
        }
        let file = read_best_checked(path)?;
        file.warn();
        Ok(TunedDb {
            path: path.to_path_buf(),
            rules: RuleCache::new(file.rows.len()),
            rows: file.rows,
            skipped: file.bad,
        })
    }

    /// A database from rows already in memory (`path` is only used in messages).
    pub fn from_rows(path: impl Into<PathBuf>, rows: Vec<BestRow>) -> TunedDb {
        TunedDb {
            path: path.into(),
            rules: RuleCache::new(rows.len()),
            rows,
            skipped: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn rows(&self) -> &[BestRow] {
        &self.rows
    }

    /// The lines of the file that could not be used (each was warned about on loading).
    pub fn skipped(&self) -> &[BadRow] {
        &self.skipped
    }

    /// The distinct ops, in file order.
    pub fn ops(&self) -> Vec<&str> {
        let mut ops: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !ops.contains(&r.op.as_str()) {
                ops.push(&r.op);
            }
        }
        ops
    }

    /// The distinct GPU names, in file order.
    pub fn gpus(&self) -> Vec<&str> {
        let mut gpus: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !gpus.contains(&r.gpu.as_str()) {
                gpus.push(&r.gpu);
            }
        }
        gpus
    }

    /// Rows of `op` (any op when `None`) on a GPU whose name contains `gpu`
    /// (case-insensitive; any GPU when `None`).
    pub fn filter(&self, op: Option<&str>, gpu: Option<&str>) -> Vec<&BestRow> {
        self.rows
            .iter()
            .filter(|r| op.is_none_or(|o| r.op == o) && gpu_matches(&r.gpu, gpu))
            .collect()
    }

    /// Every row tuned for exactly this op and shape, of element type `dtype` (every dtype
    /// when `None`: one row per GPU and dtype).
    pub fn exact(
        &self,
        op: &str,
        dtype: Option<&str>,
        dims: &[u64],
        gpu: Option<&str>,
    ) -> Vec<&BestRow> {
        self.filter(Some(op), gpu)
            .into_iter()
            .filter(|r| dtype.is_none_or(|d| r.dtype == d))
            .filter(|r| row_dims(r).as_deref() == Some(dims))
            .collect()
    }

    /// The row tuned for exactly this op, dtype and shape (the first, if several GPUs match).
    pub fn best(&self, op: &str, dtype: &str, dims: &[u64], gpu: Option<&str>) -> Option<&BestRow> {
        self.exact(op, Some(dtype), dims, gpu).into_iter().next()
    }

    /// Rows of `op` and `dtype` (every dtype when `None`) with the same number of dimensions,
    /// nearest shape first, with their [`shape_distance`] from `dims`. The order is that of
    /// [`shape_ratio`] (the header's `ca_shape_ratio`, computed the same way), ties in file
    /// order, so that [`TunedDb::select`] and `ca_select` pick the same row.
    pub fn ranked(
        &self,
        op: &str,
        dtype: Option<&str>,
        dims: &[u64],
        gpu: Option<&str>,
    ) -> Vec<(f64, &BestRow)> {
        self.ranked_rows(op, dtype, dims, gpu)
            .into_iter()
            .map(|(_, d, r)| (d, &self.rows[r]))
            .collect()
    }

    /// [`TunedDb::ranked`] with each row's index in [`TunedDb::rows`].
    fn ranked_rows(
        &self,
        op: &str,
        dtype: Option<&str>,
        dims: &[u64],
        gpu: Option<&str>,
    ) -> Vec<(f64, f64, usize)> {
        let mut ranked: Vec<(f64, f64, usize)> = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.op == op && gpu_matches(&r.gpu, gpu))
            .filter(|(_, r)| dtype.is_none_or(|d| r.dtype == d))
            .filter_map(|(i, r)| {
                let tuned = row_dims(r)?;
                Some((shape_ratio(dims, &tuned)?, shape_distance(&tuned, dims)?, i))
            })
            .collect();
        // A stable sort: equal ratios keep file order, as ca_select keeps entry order.
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
        ranked
    }

    /// The row of `op` and `dtype` whose shape is nearest to `dims` (the exact one when
    /// tuned). Rows of another element type are never considered: their kernels read and
    /// write elements of another size.
    ///
    /// Nearness says nothing about whether that row's kernel is *valid* for `dims` (a kernel
    /// without bounds checks, tuned for 1024x1024, must not run on 1000x1000): use
    /// [`TunedDb::select`] to pick a kernel to run.
    pub fn nearest(
        &self,
        op: &str,
        dtype: &str,
        dims: &[u64],
        gpu: Option<&str>,
    ) -> Option<&BestRow> {
        self.ranked(op, Some(dtype), dims, gpu)
            .first()
            .map(|(_, r)| *r)
    }

    /// The row to run for `op` on `dtype` elements at `dims`: the exact match, else the
    /// nearest tuned shape of the same dtype whose kernel
    /// [admits](super::kernel::Applicability::admits) `dims`, else `None` (run
    /// [`safe_default`](super::kernel::safe_default) of the op and dtype). The same rule as
    /// `ca_select` in the header that `tune export --format cuda` writes. `templates` is
    /// where the op specs come from (`None`: the built-in ones).
    pub fn select(
        &self,
        op: &str,
        dtype: &str,
        dims: &[u64],
        gpu: Option<&str>,
        templates: Option<&Path>,
    ) -> Result<Option<&BestRow>> {
        if let Some(row) = self.best(op, dtype, dims, gpu) {
            return Ok(Some(row));
        }
        for (_, _, i) in self.ranked_rows(op, Some(dtype), dims, gpu) {
            if self.applicability(i, templates)?.admits(dims) {
                return Ok(Some(&self.rows[i]));
            }
        }
        Ok(None)
    }

    /// The [`Applicability`] of row `i`: kept after the first call for the built-in templates
    /// (`templates` `None`), computed each time for others (their files may change between
    /// calls).
    fn applicability(&self, i: usize, templates: Option<&Path>) -> Result<Applicability> {
        let row = &self.rows[i];
        if templates.is_some() {
            return super::kernel::applicability(row, templates);
        }
        if let Some(rule) = self.rules.0.get(i).and_then(OnceLock::get) {
            return Ok(rule.clone());
        }
        let rule = super::kernel::applicability(row, None)?;
        if let Some(cell) = self.rules.0.get(i) {
            let _ = cell.set(rule.clone());
        }
        Ok(rule)
    }

    /// The distinct (op, dtype) pairs, in file order.
    pub fn op_dtypes(&self) -> Vec<(&str, &str)> {
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for r in &self.rows {
            let key = (r.op.as_str(), r.dtype.as_str());
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
}

/// True when `name` contains `wanted`, ignoring case (always for `None`).
pub fn gpu_matches(name: &str, wanted: Option<&str>) -> bool {
    wanted.is_none_or(|w| name.to_lowercase().contains(&w.to_lowercase()))
}

/// `1000x1000` → `[1000, 1000]`; `None` unless every part is a positive integer.
pub fn parse_dims(shape: &str) -> Option<Vec<u64>> {
    let dims: Option<Vec<u64>> = shape
        .trim()
        .split(['x', 'X'])
        .map(|p| p.trim().parse::<u64>().ok().filter(|&d| d > 0))
        .collect();
    dims.filter(|d| !d.is_empty())
}

/// The dimensions of a row's shape.
pub fn row_dims(row: &BestRow) -> Option<Vec<u64>> {
    parse_dims(&row.shape)
}

/// How far apart two shapes are: Σ |ln(aᵢ / bᵢ)|, so doubling one dimension costs as much as
/// halving it and the scale does not matter (1000 vs 2000 is as far as 4000 vs 8000).
/// `None` when the shapes have different numbers of dimensions.
pub fn shape_distance(a: &[u64], b: &[u64]) -> Option<f64> {
    (a.len() == b.len()).then(|| {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| ((x as f64) / (y as f64)).ln().abs())
            .sum()
    })
}

/// exp(Σ |ln(queryᵢ / tunedᵢ)|) as the header's `ca_shape_ratio` computes it: the product,
/// in dimension order from 1.0, of each dimension's larger-over-smaller ratio in `f64`. The
/// same order as [`shape_distance`] where the two differ by more than rounding, and the very
/// same numbers as the C code, so that ties fall alike. `None` when the shapes have
/// different numbers of dimensions.
pub fn shape_ratio(query: &[u64], tuned: &[u64]) -> Option<f64> {
    (query.len() == tuned.len()).then(|| {
        query.iter().zip(tuned).fold(1.0f64, |r, (&q, &t)| {
            let (a, b) = (q as f64, t as f64);
            r * if a > b { a / b } else { b / a }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::best::parse_params;

    #[test]
    fn distance_is_symmetric_in_scale() {
        let d = |a: &[u64], b: &[u64]| shape_distance(a, b).unwrap();
        assert_eq!(d(&[1000, 1000], &[1000, 1000]), 0.0);
        assert!((d(&[1000, 1000], &[2000, 1000]) - d(&[4000, 8000], &[4000, 4000])).abs() < 1e-12);
        assert!((d(&[1000, 1000], &[500, 1000]) - d(&[1000, 1000], &[2000, 1000])).abs() < 1e-12);
        assert_eq!(shape_distance(&[1, 2], &[1, 2, 3]), None);
    }

    #[test]
    fn dims_and_params_parse() {
        assert_eq!(parse_dims("1000x3000"), Some(vec![1000, 3000]));
        assert_eq!(parse_dims("8X8x8"), Some(vec![8, 8, 8]));
        assert_eq!(parse_dims("0x8"), None);
        assert_eq!(parse_dims("ax8"), None);
        assert_eq!(
            parse_params("TILE_DIM=64;BOUNDS=edge;"),
            vec![
                ("TILE_DIM".to_string(), "64".to_string()),
                ("BOUNDS".to_string(), "edge".to_string())
            ]
        );
    }
}
