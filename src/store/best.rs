//! The best-configuration database, `best.csv`: one row per op, shape, dtype and GPU, read
//! row by row (a damaged row is named, the others used) and updated under a lock.

use super::files::write_atomic;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The database's file name in a results folder (`--out`), where runs keep their winners.
pub const BEST_FILE: &str = "best.csv";

/// The database of the results folder `dir`.
pub fn best_path(dir: &Path) -> PathBuf {
    dir.join(BEST_FILE)
}

/// One row of `best.csv`: the winning configuration for an op, shape, dtype and GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BestRow {
    pub op: String,
    pub shape: String,
    pub dtype: String,
    pub gpu: String,
    pub compute_capability: String,
    /// `NAME=value` pairs separated by `;` (ops have different parameters).
    pub params: String,
    pub median_ms: f64,
    pub throughput: f64,
    pub unit: String,
    pub frac_of_roof: Option<f64>,
    pub roof: String,
    pub cache: String,
    pub reps: usize,
    pub tool_version: String,
    /// The CUDA version the driver supports (`13.0`, from `cuDriverGetVersion`), not the
    /// driver's release number (580.xx).
    pub driver: String,
    pub nvrtc: String,
    pub tuned_at: String,
    /// The GPU's UUID: which physical card measured it.
    #[serde(default)]
    pub gpu_uuid: String,
    /// SHA-256 of the winner's generated source, compiler options, NVRTC version and arch.
    #[serde(default)]
    pub source_hash: String,
    /// The fastest other configuration of the interleaved re-timing (`NAME=value;...`).
    #[serde(default)]
    pub runner_up: String,
    /// How much slower the runner-up is, in percent, with its 95 % interval.
    #[serde(default)]
    pub margin_pct: Option<f64>,
    #[serde(default)]
    pub margin_ci_low_pct: Option<f64>,
    #[serde(default)]
    pub margin_ci_high_pct: Option<f64>,
    /// The winner was tied with others and picked by the tie rule.
    #[serde(default)]
    pub tie: bool,
    /// The configurations it was tied with (`NAME=value;...`, separated by ` | `).
    #[serde(default)]
    pub tied_with: String,
    /// The GPU's number of SMs: specs read it (`NUM_SMS`, in grids and waves), so the row's
    /// kernel is rendered again with it ([`super::tuned::row_limits`]). Empty in rows written
    /// before the column existed, which read as 132 (an H100's and an H200's).
    #[serde(default)]
    pub num_sms: Option<i64>,
    /// The architecture the kernel was compiled for (`sm_90`, or what `--arch` named): the
    /// source hash is keyed with it and specs read its compute capability. Empty in rows
    /// written before the column existed, which read as the GPU's own (`sm_XY` or `sm_XYa`).
    #[serde(default)]
    pub arch: String,
}

impl BestRow {
    /// What identifies a row: op, shape, element type and GPU (one row per key).
    pub fn key(&self) -> (&str, &str, &str, &str) {
        (&self.op, &self.shape, &self.dtype, &self.gpu)
    }

    /// Why the row cannot be used although its columns parsed (empty names, a shape that is
    /// not `AxB...`, a time that is not positive, a half-written timestamp or architecture),
    /// if it cannot.
    fn check(&self) -> std::result::Result<(), String> {
        for (column, value) in [("op", &self.op), ("dtype", &self.dtype), ("gpu", &self.gpu)] {
            if value.is_empty() {
                return Err(format!("column {column} is empty"));
            }
        }
        let dims_ok = self
            .shape
            .split(['x', 'X'])
            .all(|d| d.trim().parse::<u64>().is_ok_and(|d| d > 0));
        if !dims_ok {
            return Err(format!(
                "column shape: '{}' is not positive integers separated by x",
                self.shape
            ));
        }
        let not_pair = self
            .params
            .split(';')
            .filter(|p| !p.trim().is_empty())
            .find(|p| {
                !p.split_once('=')
                    .is_some_and(|(k, v)| !k.trim().is_empty() && !v.trim().is_empty())
            });
        if let Some(part) = not_pair {
            return Err(format!("column params: '{part}' is not NAME=value"));
        }
        if !(self.median_ms.is_finite() && self.median_ms > 0.0) {
            return Err(format!(
                "column median_ms: {} is not a positive time",
                self.median_ms
            ));
        }
        if !(self.throughput.is_finite() && self.throughput >= 0.0) {
            return Err(format!(
                "column throughput: {} is not a throughput",
                self.throughput
            ));
        }
        if !matches!(self.cache.as_str(), "cold" | "warm") {
            return Err(format!(
                "column cache: '{}' is neither cold nor warm",
                self.cache
            ));
        }
        if !self.tuned_at.is_empty() && humantime::parse_rfc3339_weak(&self.tuned_at).is_err() {
            return Err(format!(
                "column tuned_at: '{}' is not an RFC 3339 time",
                self.tuned_at
            ));
        }
        if let Some(n) = self.num_sms.filter(|&n| n <= 0) {
            return Err(format!("column num_sms: {n} is not a number of SMs"));
        }
        let arch_ok =
            crate::model::limits::arch_compute_capability(&self.arch).is_some_and(|cc| cc >= 50);
        if !self.arch.is_empty() && !arch_ok {
            return Err(format!(
                "column arch: '{}' is not an architecture such as sm_90",
                self.arch
            ));
        }
        // Written together since they exist: one without the other is a cut line.
        if self.num_sms.is_some() && self.arch.is_empty() {
            return Err("column arch: empty where num_sms is recorded".into());
        }
        Ok(())
    }
}

/// The columns every `best.csv` has (the others were added later and may be missing).
pub(super) const BEST_REQUIRED: [&str; 17] = [
    "op",
    "shape",
    "dtype",
    "gpu",
    "compute_capability",
    "params",
    "median_ms",
    "throughput",
    "unit",
    "frac_of_roof",
    "roof",
    "cache",
    "reps",
    "tool_version",
    "driver",
    "nvrtc",
    "tuned_at",
];

/// A line of `best.csv` that cannot be used, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRow {
    pub path: PathBuf,
    /// 1-based line in the file (the header is line 1).
    pub line: u64,
    pub why: String,
}

impl std::fmt::Display for BadRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.why)
    }
}

/// A `best.csv` as read: the usable rows, in file order, and the lines that are not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BestFile {
    pub rows: Vec<BestRow>,
    pub bad: Vec<BadRow>,
}

impl BestFile {
    /// One `warning:` line on stderr per unusable line.
    pub fn warn(&self) {
        for b in &self.bad {
            if self.rows.is_empty() && self.bad.len() == 1 {
                // A bad header: nothing else of the file is read, so no other row is used.
                eprintln!("warning: {b}");
            } else {
                eprintln!("warning: {b}; skipped (the other rows are used)");
            }
        }
    }
}

/// Reads a `best.csv` without printing anything. A missing or empty file has no rows. A line
/// that does not parse or holds impossible values (a truncated last line, a hand edit gone
/// wrong, a second row of the same key) goes to [`BestFile::bad`] with its line number and
/// every other row is used; a header without the columns of a `best.csv` makes the one bad
/// line 1. Fails only when the file cannot be read (a folder is bad input).
pub fn read_best_checked(path: &Path) -> Result<BestFile> {
    if path.is_dir() {
        return Err(Error::Usage(format!(
            "tuning database {}: is a folder, not a file (pass the best.csv in it)",
            path.display()
        )));
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BestFile::default()),
        Err(e) => return Err(Error::io("cannot read", path, e)),
    };
    parse_best_checked(&bytes, path)
}

/// The winners this build ships (`results/best.csv` when it was built): the built-in ops
/// tuned on the GPUs the project measured. A search of one of those shapes on one of those
/// GPUs starts from its shipped winner when its own database has none.
pub fn shipped_best() -> Vec<BestRow> {
    parse_best_checked(SHIPPED, Path::new("results/best.csv (built in)"))
        .map(|f| f.rows)
        .unwrap_or_default()
}

/// `results/best.csv` as this build embeds it.
const SHIPPED: &[u8] = include_bytes!("../../results/best.csv");

/// [`read_best_checked`] of the bytes of a best.csv; `path` names it in messages.
fn parse_best_checked(bytes: &[u8], path: &Path) -> Result<BestFile> {
    let mut out = BestFile::default();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(out);
    }
    let bad = |line: u64, why: String| BadRow {
        path: path.to_path_buf(),
        line,
        why,
    };
    let read_err = |e: csv::Error| Error::Csv {
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    let mut r = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(bytes);
    let header = r.byte_headers().map_err(read_err)?.clone();
    let records = r
        .byte_records()
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(read_err)?;
    let missing: Vec<&str> = BEST_REQUIRED
        .into_iter()
        .filter(|c| !header.iter().any(|h| h == c.as_bytes()))
        .collect();
    if !missing.is_empty() {
        let line = header.position().map_or(1, |p| line_of(bytes, p));
        let has = |c: &str| header.iter().any(|h| h == c.as_bytes());
        let why = if has("kind") && has("status") {
            // The other file a run writes, passed by mistake.
            "a run CSV (a row per configuration), not a tuning database: pass the best.csv \
             the run upserted"
                .to_string()
        } else {
            format!(
                "not a best.csv header (no column {}), so none of its {} row(s) can be used",
                missing.join(", "),
                records.len()
            )
        };
        out.bad.push(bad(line, why));
        return Ok(out);
    }
    let mut first_of: std::collections::HashMap<(String, String, String, String), u64> =
        Default::default();
    for rec in records {
        let line = rec.position().map_or(0, |p| line_of(bytes, p));
        if rec.len() != header.len() {
            out.bad.push(bad(
                line,
                format!(
                    "{} field(s) where the header has {} (a truncated or hand-edited line)",
                    rec.len(),
                    header.len()
                ),
            ));
            continue;
        }
        let row = match rec.deserialize::<BestRow>(Some(&header)) {
            Ok(row) => row,
            Err(e) => {
                out.bad.push(bad(line, deserialize_why(&e, &header, &rec)));
                continue;
            }
        };
        if let Err(why) = row.check() {
            out.bad.push(bad(line, why));
            continue;
        }
        let key = row.key();
        let key = (key.0.into(), key.1.into(), key.2.into(), key.3.into());
        if let Some(first) = first_of.get(&key) {
            out.bad.push(bad(
                line,
                format!(
                    "the same op, shape, dtype and GPU as line {first} (only the first is used)"
                ),
            ));
            continue;
        }
        first_of.insert(key, line);
        out.rows.push(row);
    }
    Ok(out)
}

/// The 1-based line of `bytes` on which the record at `pos` starts. The csv reader's own
/// `Position::line` cannot be used: a record's position is where the reader stopped after the
/// previous record, before that record's line terminator when it is `\r\n` (as every file
/// the csv writer makes, best.csv and the run CSVs included, ends its lines) and before any
/// blank lines, so it names the line above. The byte offset is exact, so the line is counted from it, past the
/// terminators and blank lines in front of the record.
pub(super) fn line_of(bytes: &[u8], pos: &csv::Position) -> u64 {
    let mut at = (pos.byte() as usize).min(bytes.len());
    while at < bytes.len() && (bytes[at] == b'\r' || bytes[at] == b'\n') {
        at += 1;
    }
    1 + bytes[..at].iter().filter(|&&b| b == b'\n').count() as u64
}

/// `column median_ms: invalid float literal ('fast')` from a row's deserialization error.
fn deserialize_why(e: &csv::Error, header: &csv::ByteRecord, rec: &csv::ByteRecord) -> String {
    if let csv::ErrorKind::Deserialize { err, .. } = e.kind() {
        if let Some(i) = err.field().map(|i| i as usize) {
            let text =
                |r: &csv::ByteRecord| String::from_utf8_lossy(r.get(i).unwrap_or(b"")).into_owned();
            return format!("column {}: {} ('{}')", text(header), err.kind(), text(rec));
        }
        return err.kind().to_string();
    }
    e.to_string()
}

/// Reads a `best.csv`: its usable rows, with a `warning: FILE:LINE: why` line on stderr for
/// each line skipped (see [`read_best_checked`]). A missing or empty file has no rows.
pub fn read_best(path: &Path) -> Result<Vec<BestRow>> {
    let file = read_best_checked(path)?;
    file.warn();
    Ok(file.rows)
}

/// The lock file of a `best.csv`: `best.csv.lock` beside it. [`upsert_best`] holds an
/// exclusive advisory lock on it while it reads and replaces the database. It is left in place
/// (removing a lock file races with the next writer that opened it).
pub fn best_lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

/// With `--keep-best`: whether the stored row stays instead of the new one of the same key.
/// It stays when it is faster (a lower median time) at the same L2 cache state; times under
/// different cache states do not compare, so then the newer run replaces it.
pub fn keeps_stored(stored: &BestRow, new: &BestRow) -> bool {
    stored.cache == new.cache && stored.median_ms < new.median_ms
}

/// Which row [`upsert_best`] keeps when a new row meets a stored row of its key.
#[derive(Clone, Copy)]
pub enum Keep<'a> {
    /// The new row: a newer run replaces the stored one (the default).
    Newest,
    /// `--keep-best`: the stored row stays when it is faster ([`keeps_stored`]) and `current`
    /// holds for it: its figures are of the kernel today's templates render for it (the
    /// caller renders it; [`super::tuned::renders_as_timed`]). A faster time of a source the
    /// templates no longer render says nothing of today's kernel, so such a row is replaced.
    Fastest {
        current: &'a dyn Fn(&BestRow) -> bool,
    },
}

/// What [`upsert_best`] did with the new row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Upserted {
    /// No row of its key was stored: it was added.
    Added,
    /// It replaced the stored row of its key.
    Replaced,
    /// [`Keep::Fastest`], and the stored row of its key is faster and current: that one stays.
    KeptStored { stored_median_ms: f64 },
    /// [`Keep::Fastest`], and the stored row of its key is faster but not current: the new
    /// row replaced it.
    ReplacedStale { stored_median_ms: f64 },
}

/// Stores `row` in the `best.csv` at `path`, one row per op, shape, dtype and GPU.
///
/// The rule: by default ([`Keep::Newest`]) the newer run replaces the stored row of its key,
/// whatever either measured (another L2 state, a narrowed `--param` space, a busier GPU).
/// With [`Keep::Fastest`] the stored row stays when it is faster ([`keeps_stored`]: lower
/// `median_ms`, same `cache`) and its figures are of today's kernel. Rows of other keys are
/// never touched.
///
/// Concurrent runs writing the same file are safe: an exclusive advisory lock on
/// [`best_lock_path`] is held from the read to the atomic replace ([`write_atomic`]), so
/// each run's row survives and a reader sees the old or the new file, never a mix. Lines that
/// cannot be used ([`read_best_checked`]) are dropped from the rewritten file with a warning
/// on stderr, after the file as it was is saved to `best.csv.bak` (or the first free
/// `best.csv.bak.N`: [`super::files::backup_path`]).
pub fn upsert_best(path: &Path, row: BestRow, keep: Keep) -> Result<Upserted> {
    let lock_path = best_lock_path(path);
    if let Some(dir) = lock_path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    }
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io("cannot open", &lock_path, e))?;
    let mut lock = fd_lock::RwLock::new(lock_file);
    let _locked = lock
        .write()
        .map_err(|e| Error::io("cannot lock", &lock_path, e))?;

    let stored = read_best_checked(path)?;
    if !stored.bad.is_empty() {
        stored.warn();
        let backup = super::files::backup_path(path);
        let original = std::fs::read(path).map_err(|e| Error::io("cannot read", path, e))?;
        write_atomic(&backup, &original)?;
        eprintln!(
            "warning: {}: rewriting it without the {} unusable line(s); the file as it was is \
             saved as {}",
            path.display(),
            stored.bad.len(),
            backup.display()
        );
    }
    let mut rows = stored.rows;
    let done = match rows.iter().position(|r| r.key() == row.key()) {
        Some(i) => match keep {
            Keep::Fastest { current } if keeps_stored(&rows[i], &row) => {
                let stored_median_ms = rows[i].median_ms;
                if current(&rows[i]) {
                    Upserted::KeptStored { stored_median_ms }
                } else {
                    rows[i] = row;
                    Upserted::ReplacedStale { stored_median_ms }
                }
            }
            _ => {
                rows[i] = row;
                Upserted::Replaced
            }
        },
        None => {
            rows.push(row);
            Upserted::Added
        }
    };
    if matches!(done, Upserted::KeptStored { .. }) && stored.bad.is_empty() {
        return Ok(done);
    }
    rows.sort_by(|a, b| a.key().cmp(&b.key()));
    let csv_err = |e: String| Error::Internal(format!("serializing {}: {e}", path.display()));
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in &rows {
        w.serialize(r).map_err(|e| csv_err(e.to_string()))?;
    }
    let bytes = w.into_inner().map_err(|e| csv_err(e.to_string()))?;
    write_atomic(path, &bytes)?;
    Ok(done)
}

/// A stored configuration of `op` (`NAME=value;...`, the `params` of a best.csv row) as
/// pairs, completed with [`Op::assumed_params`](crate::spec::ops::Op::assumed_params): parameters added to the op since the row was
/// stored take the values its configurations had then.
pub fn stored_params(op: &crate::spec::ops::Op, params: &str) -> Vec<(String, String)> {
    let mut pairs = parse_params(params);
    let names: Vec<&str> = pairs.iter().map(|(n, _)| n.as_str()).collect();
    let assumed = op.assumed_params(&names);
    pairs.extend(
        assumed
            .iter()
            .filter_map(|a| a.split_once('='))
            .map(|(n, v)| (n.to_string(), v.to_string())),
    );
    pairs
}

/// `K=V;K=V` → `[(K, V), ...]`, in order; empty parts are skipped.
pub fn parse_params(params: &str) -> Vec<(String, String)> {
    params
        .split(';')
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.trim().to_string(), v.trim().to_string()),
            None => (p.trim().to_string(), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_csv_read_as_a_database_is_named_as_such() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/report/transpose_1000x1000.csv");
        let file = read_best_checked(&path).unwrap();
        assert!(file.rows.is_empty());
        assert_eq!(file.bad.len(), 1);
        assert!(
            file.bad[0].to_string().ends_with(
                "transpose_1000x1000.csv:1: a run CSV (a row per configuration), not a tuning \
                 database: pass the best.csv the run upserted"
            ),
            "{}",
            file.bad[0]
        );
    }

    fn best_row(shape: &str, ms: f64) -> BestRow {
        BestRow {
            op: "transpose".into(),
            shape: shape.into(),
            dtype: "f32".into(),
            gpu: "GPU".into(),
            compute_capability: "9.0".into(),
            params: "TILE_DIM=32;BLOCK_ROWS=8".into(),
            median_ms: ms,
            throughput: 1.0 / ms,
            unit: "GB/s".into(),
            frac_of_roof: Some(0.9),
            roof: "memcpy".into(),
            cache: "cold".into(),
            reps: 30,
            tool_version: "0.1.0".into(),
            driver: "13.0".into(),
            nvrtc: "13.0".into(),
            tuned_at: "2026-11-22T00:00:00Z".into(),
            gpu_uuid: "GPU-0".into(),
            source_hash: "abc".into(),
            runner_up: "TILE_DIM=32;BLOCK_ROWS=4".into(),
            margin_pct: Some(1.5),
            margin_ci_low_pct: Some(0.5),
            margin_ci_high_pct: Some(2.5),
            num_sms: Some(132),
            arch: "sm_90".into(),
            tie: false,
            tied_with: String::new(),
        }
    }

    #[test]
    fn best_upsert_replaces_the_same_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("best.csv");
        let row = best_row;
        assert_eq!(
            upsert_best(&path, row("1000x1000", 2.0), Keep::Newest).unwrap(),
            Upserted::Added
        );
        upsert_best(&path, row("1024x1024", 3.0), Keep::Newest).unwrap();
        // The newer run replaces the row, faster or not.
        assert_eq!(
            upsert_best(&path, row("1000x1000", 1.0), Keep::Newest).unwrap(),
            Upserted::Replaced
        );
        upsert_best(&path, row("1024x1024", 4.0), Keep::Newest).unwrap();
        let rows = read_best(&path).unwrap();
        assert_eq!(rows, vec![row("1000x1000", 1.0), row("1024x1024", 4.0)]);
        // The lock file stays beside it; no temporary file is left.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["best.csv", "best.csv.lock"]);
    }

    /// `--keep-best` with every stored row current.
    const FASTEST: Keep = Keep::Fastest {
        current: &|_: &BestRow| true,
    };

    #[test]
    fn keep_best_keeps_the_faster_stored_row_at_the_same_cache_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("best.csv");
        upsert_best(&path, best_row("1000x1000", 2.0), FASTEST).unwrap();
        // Slower: the stored row stays, and the file is not rewritten.
        let before = std::fs::read(&path).unwrap();
        assert_eq!(
            upsert_best(&path, best_row("1000x1000", 3.0), FASTEST).unwrap(),
            Upserted::KeptStored {
                stored_median_ms: 2.0
            }
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
        // As fast: the newer run replaces it (only a strictly faster stored row stays).
        let mut same = best_row("1000x1000", 2.0);
        same.tuned_at = "2026-11-23T00:00:00Z".into();
        assert_eq!(
            upsert_best(&path, same.clone(), FASTEST).unwrap(),
            Upserted::Replaced
        );
        assert_eq!(read_best(&path).unwrap(), vec![same]);
        // Faster: replaced.
        upsert_best(&path, best_row("1000x1000", 1.5), FASTEST).unwrap();
        assert_eq!(read_best(&path).unwrap(), vec![best_row("1000x1000", 1.5)]);
        // Another cache state does not compare: the newer run replaces it, even slower.
        let mut warm = best_row("1000x1000", 5.0);
        warm.cache = "warm".into();
        assert_eq!(
            upsert_best(&path, warm.clone(), FASTEST).unwrap(),
            Upserted::Replaced
        );
        assert_eq!(read_best(&path).unwrap(), vec![warm.clone()]);
        // Without keep_best the newer, slower run replaces the row.
        let mut slower = warm.clone();
        slower.median_ms = 9.0;
        upsert_best(&path, slower.clone(), Keep::Newest).unwrap();
        assert_eq!(read_best(&path).unwrap(), vec![slower.clone()]);
        // A faster stored row whose figures are not of today's kernel: replaced, and said so.
        let stale = Keep::Fastest {
            current: &|r: &BestRow| r.source_hash != "old",
        };
        let mut old = slower.clone();
        old.median_ms = 1.0;
        old.source_hash = "old".into();
        upsert_best(&path, old.clone(), Keep::Newest).unwrap();
        assert_eq!(
            upsert_best(&path, slower.clone(), stale).unwrap(),
            Upserted::ReplacedStale {
                stored_median_ms: 1.0
            }
        );
        assert_eq!(read_best(&path).unwrap(), vec![slower.clone()]);
        // The same test leaves a current row in place.
        let mut slowest = slower.clone();
        slowest.median_ms = 9.5;
        assert_eq!(
            upsert_best(&path, slowest, stale).unwrap(),
            Upserted::KeptStored {
                stored_median_ms: 9.0
            }
        );
        assert!(keeps_stored(&best_row("a", 1.0), &best_row("a", 1.1)));
        assert!(!keeps_stored(&best_row("a", 1.1), &best_row("a", 1.0)));
        assert!(!keeps_stored(&warm, &best_row("1000x1000", 9.0)));
    }

    /// Writes `text` as a best.csv and reads it back checked.
    fn checked(text: &str) -> (tempfile::TempDir, PathBuf, BestFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("best.csv");
        std::fs::write(&path, text).unwrap();
        let file = read_best_checked(&path).unwrap();
        (dir, path, file)
    }

    fn two_rows() -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("best.csv");
        upsert_best(&path, best_row("1000x1000", 2.0), Keep::Newest).unwrap();
        upsert_best(&path, best_row("2000x2000", 3.0), Keep::Newest).unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    /// The database this build ships is whole: a line this reader refuses would be a winner
    /// lost to every user.
    #[test]
    fn the_shipped_database_has_no_unusable_line() {
        let file = parse_best_checked(SHIPPED, Path::new("results/best.csv")).unwrap();
        assert!(file.bad.is_empty(), "{:?}", file.bad);
        assert!(!file.rows.is_empty());
    }

    #[test]
    fn missing_and_empty_best_files_have_no_rows() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_best_checked(&dir.path().join("best.csv")).unwrap();
        assert_eq!(missing, BestFile::default());
        for text in ["", "\n", "  \n\n"] {
            assert_eq!(checked(text).2, BestFile::default(), "{text:?}");
        }
        let header_only = two_rows().lines().next().unwrap().to_string() + "\n";
        assert_eq!(checked(&header_only).2, BestFile::default());
    }

    #[test]
    fn a_truncated_last_line_is_skipped_with_its_line_number() {
        let full = two_rows();
        // Cut anywhere in the last row: the first row stays usable, line 3 is named.
        let last = full.trim_end().rfind('\n').unwrap() + 1;
        for cut in [last + 1, last + 20, last + 60, full.trim_end().len() - 5] {
            let (_dir, path, file) = checked(&full[..cut]);
            assert_eq!(file.rows, vec![best_row("1000x1000", 2.0)], "cut at {cut}");
            assert_eq!(file.bad.len(), 1, "cut at {cut}: {:?}", file.bad);
            assert_eq!(file.bad[0].line, 3);
            let shown = file.bad[0].to_string();
            assert!(
                shown.starts_with(&format!("{}:3: ", path.display())),
                "{shown}"
            );
        }
    }

    #[test]
    fn hand_edited_bad_rows_are_named_and_the_good_ones_used() {
        let full = two_rows();
        let lines: Vec<&str> = full.lines().collect();
        let edit = |from: &str, to: &str| lines[1].replacen(from, to, 1);
        let text = [
            lines[0].to_string(),
            edit(",2.0,", ",fast,"),         // line 2: median_ms not a number
            lines[2].to_string(),            // line 3: good
            edit("1000x1000", "1000by1000"), // line 4: not a shape
            edit(",cold,", ",lukewarm,"),    // line 5: not a cache state
            edit("2026-11-22T00:00:00Z", "2026-11-2"), // line 6: half a timestamp
            lines[1].to_string() + ",extra", // line 7: one field too many
            lines[1].to_string(),            // line 8: good
            lines[1].to_string(),            // line 9: the same key again
            edit(",false", ",maybe"),        // line 10: tie not a bool
            edit(",sm_90", ",sm_9"),         // line 11: an architecture cut short
            edit(",132,sm_90", ",132,"),     // line 12: num_sms without arch
            edit(",132,", ",0,"),            // line 13: no SMs
        ]
        .join("\n");
        let (_dir, path, file) = checked(&text);
        assert_eq!(
            file.rows,
            vec![best_row("2000x2000", 3.0), best_row("1000x1000", 2.0)]
        );
        let bad: Vec<(u64, &str)> = file.bad.iter().map(|b| (b.line, b.why.as_str())).collect();
        let want = [
            (2, "column median_ms: invalid float literal ('fast')"),
            (4, "column shape: '1000by1000'"),
            (5, "column cache: 'lukewarm'"),
            (6, "column tuned_at: '2026-11-2'"),
            (7, "28 field(s) where the header has 27"),
            (9, "the same op, shape, dtype and GPU as line 8"),
            (10, "column tie:"),
            (11, "column arch: 'sm_9' is not an architecture"),
            (12, "column arch: empty where num_sms is recorded"),
            (13, "column num_sms: 0 is not a number of SMs"),
        ];
        assert_eq!(bad.len(), want.len(), "{bad:?}");
        for ((line, why), (want_line, want_why)) in bad.iter().zip(want) {
            assert_eq!(*line, want_line, "{why}");
            assert!(why.starts_with(want_why), "line {line}: {why}");
        }
        assert!(file.bad[0]
            .to_string()
            .starts_with(&format!("{}:2: column median_ms", path.display())));
        // A file that is not a best.csv at all: one bad line, the header, and no rows.
        let (_dir, _path, file) = checked("a,b\n1,2\n");
        assert!(file.rows.is_empty());
        assert_eq!(file.bad.len(), 1);
        assert_eq!(file.bad[0].line, 1);
        assert!(
            file.bad[0].why.contains("no column op, shape"),
            "{:?}",
            file.bad
        );
    }

    #[test]
    fn bad_rows_are_named_by_their_line_with_crlf_endings_and_blank_lines() {
        // The csv writer ends lines with \r\n (best.csv as the tuner writes it), and a hand
        // edit may leave blank lines: the line numbers are the file's all the same.
        let full = two_rows();
        let lines: Vec<&str> = full.lines().collect();
        let bad = lines[1].replacen(",2.0,", ",fast,", 1);
        for (ending, blank) in [("\r\n", ""), ("\n", "\n"), ("\r\n", "\r\n\r\n")] {
            // header 1, good 2, bad 3, then blank lines, then good, bad.
            let text = format!(
                "{h}{ending}{good}{ending}{bad}{ending}{blank}{good2}{ending}{bad}{ending}",
                h = lines[0],
                good = lines[1],
                good2 = lines[2],
            );
            let blank_lines = blank.matches('\n').count() as u64;
            let (_dir, _path, file) = checked(&text);
            let at: Vec<u64> = file.bad.iter().map(|b| b.line).collect();
            assert_eq!(
                at,
                vec![3, 5 + blank_lines],
                "{ending:?} with {blank_lines} blank line(s): {:?}",
                file.bad
            );
            assert_eq!(file.rows.len(), 2);
        }
    }

    #[test]
    fn upsert_keeps_the_good_rows_of_a_damaged_file_and_saves_it_first() {
        let full = two_rows();
        let damaged = format!("{}\nnonsense,row\n", full.trim_end());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("best.csv");
        std::fs::write(&path, &damaged).unwrap();
        upsert_best(&path, best_row("3000x3000", 4.0), Keep::Newest).unwrap();
        let file = read_best_checked(&path).unwrap();
        assert!(file.bad.is_empty(), "{:?}", file.bad);
        assert_eq!(
            file.rows,
            vec![
                best_row("1000x1000", 2.0),
                best_row("2000x2000", 3.0),
                best_row("3000x3000", 4.0)
            ]
        );
        assert_eq!(
            std::fs::read_to_string(path.with_file_name("best.csv.bak")).unwrap(),
            damaged
        );
    }

    #[test]
    fn upserts_from_many_threads_keep_every_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("best.csv");
        std::thread::scope(|s| {
            for t in 0..4 {
                let path = &path;
                s.spawn(move || {
                    for i in 0..25 {
                        let shape = format!("{}x{}", t + 1, i + 1);
                        upsert_best(path, best_row(&shape, 1.0), Keep::Newest).unwrap();
                    }
                });
            }
        });
        let file = read_best_checked(&path).unwrap();
        assert!(file.bad.is_empty());
        assert_eq!(file.rows.len(), 100);
    }
}
