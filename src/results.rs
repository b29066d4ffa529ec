//! Results on disk: one CSV per run (every configuration, baselines included, with its
//! status and reason) and `best.csv`, one row per op, shape, dtype and GPU. Every file is
//! written to a temporary name and renamed into place, so a crash never leaves a truncated CSV.

use crate::bench::Stats;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Outcome of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Compiled, verified and timed.
    Ok,
    /// Render, compile, launch or verification failed; `error` says which and why.
    Failed,
    /// Removed by a constraint before compiling; `error` holds the reason.
    Pruned,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Pruned => "pruned",
        }
    }

    fn parse(s: &str) -> Option<Status> {
        match s {
            "ok" => Some(Status::Ok),
            "failed" => Some(Status::Failed),
            "pruned" => Some(Status::Pruned),
            _ => None,
        }
    }
}

/// One row of a run's CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// "variant" for the tuned space, "baseline" for the reference kernels.
    pub kind: String,
    /// `v0042` (index in the space) or the baseline's name.
    pub name: String,
    pub params: Vec<(String, String)>,
    pub status: Status,
    pub error: String,
    pub stats: Option<Stats>,
    pub throughput: Option<f64>,
    pub frac_of_roof: Option<f64>,
    pub compile_ms: Option<f64>,
    pub registers: Option<i32>,
    /// The interleaved re-timing of the leading candidates, for those that took part.
    pub confirm: Option<Confirmed>,
}

/// A leading candidate re-timed interleaved with the others, against the chosen winner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Confirmed {
    pub median_ms: f64,
    /// How much slower than the winner (negative: faster), in percent, with its 95 % interval.
    pub vs_winner_pct: f64,
    pub ci_low_pct: f64,
    pub ci_high_pct: f64,
    /// Statistically tied with the fastest candidate (its interval spans zero).
    pub tied: bool,
    pub winner: bool,
}

impl Record {
    /// A record with no outcome yet (status `pruned`, no error): callers fill in the rest.
    pub fn new(kind: &str, name: &str, params: Vec<(String, String)>) -> Record {
        Record {
            kind: kind.into(),
            name: name.into(),
            params,
            status: Status::Pruned,
            error: String::new(),
            stats: None,
            throughput: None,
            frac_of_roof: None,
            compile_ms: None,
            registers: None,
            confirm: None,
        }
    }

    pub fn label(&self) -> String {
        if self.params.is_empty() {
            return self.name.clone();
        }
        let parts: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.join(" ")
    }
}

/// What a run measured: the same for every row.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub op: String,
    pub shape: String,
    pub dtype: String,
    pub gpu: String,
    pub compute_capability: String,
    pub cache: String,
    pub reps: usize,
    pub unit: String,
    /// Name of the baseline whose time is the roof (e.g. "memcpy").
    pub roof: String,
    pub driver: String,
    pub nvrtc: String,
}

const FIXED_BEFORE: [&str; 2] = ["kind", "name"];
const CONFIRM_COLUMNS: [&str; 6] = [
    "confirm_median_ms",
    "vs_winner_pct",
    "vs_winner_ci_low_pct",
    "vs_winner_ci_high_pct",
    "tied",
    "winner",
];

const FIXED_AFTER: [&str; 18] = [
    "status",
    "error",
    "median_ms",
    "min_ms",
    "max_ms",
    "spread_pct",
    "samples",
    "throughput",
    "unit",
    "frac_of_roof",
    "roof",
    "compile_ms",
    "registers",
    "op",
    "shape",
    "dtype",
    "gpu",
    "cache",
];

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// `NVIDIA H100 80GB HBM3` → `nvidia-h100-80gb-hbm3`, for file names.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// The run CSV's path: `DIR/<op>_<shape>_<gpu>.csv`.
pub fn run_csv_path(dir: &Path, info: &RunInfo) -> PathBuf {
    dir.join(format!(
        "{}_{}_{}.csv",
        info.op,
        info.shape,
        slug(&info.gpu)
    ))
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    // Unique per process and per call, so concurrent writers never share a temporary file.
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{serial}.tmp", std::process::id()));
    let written = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        // On disk before the rename: after a power loss the name shows old or new, never short.
        f.sync_all()
    })();
    let result = written
        .map_err(|e| Error::io("cannot write", &tmp, e))
        .and_then(|()| {
            std::fs::rename(&tmp, path).map_err(|e| Error::io("cannot replace", path, e))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Serializes a run's records (parameter columns from the first variant row).
pub fn run_csv(info: &RunInfo, param_names: &[String], records: &[Record]) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| Error::Csv {
        path: "<memory>".into(),
        why: e.to_string(),
    };
    let header: Vec<&str> = FIXED_BEFORE
        .iter()
        .copied()
        .chain(param_names.iter().map(String::as_str))
        .chain(FIXED_AFTER.iter().copied())
        .chain(CONFIRM_COLUMNS.iter().copied())
        .collect();
    w.write_record(&header).map_err(csv_err)?;
    for r in records {
        let mut row: Vec<String> = vec![r.kind.clone(), r.name.clone()];
        for p in param_names {
            row.push(
                r.params
                    .iter()
                    .find(|(k, _)| k == p)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default(),
            );
        }
        let s = r.stats;
        row.extend([
            r.status.as_str().to_string(),
            r.error.clone(),
            opt(s.map(|s| s.median_ms)),
            opt(s.map(|s| s.min_ms)),
            opt(s.map(|s| s.max_ms)),
            opt(s.map(|s| s.spread_pct)),
            s.map(|s| s.samples.to_string()).unwrap_or_default(),
            opt(r.throughput),
            info.unit.clone(),
            opt(r.frac_of_roof),
            info.roof.clone(),
            opt(r.compile_ms),
            r.registers.map(|x| x.to_string()).unwrap_or_default(),
            info.op.clone(),
            info.shape.clone(),
            info.dtype.clone(),
            info.gpu.clone(),
            info.cache.clone(),
        ]);
        let c = r.confirm;
        row.extend([
            opt(c.map(|c| c.median_ms)),
            opt(c.map(|c| c.vs_winner_pct)),
            opt(c.map(|c| c.ci_low_pct)),
            opt(c.map(|c| c.ci_high_pct)),
            c.map(|c| c.tied.to_string()).unwrap_or_default(),
            c.map(|c| c.winner.to_string()).unwrap_or_default(),
        ]);
        w.write_record(&row).map_err(csv_err)?;
    }
    w.into_inner().map_err(|e| Error::Csv {
        path: "<memory>".into(),
        why: e.to_string(),
    })
}

/// Reads a run CSV back (the inverse of [`run_csv`]).
pub fn read_run_csv(path: &Path) -> Result<Vec<Record>> {
    let csv_err = |why: String| Error::Csv {
        path: path.to_path_buf(),
        why,
    };
    let mut r = csv::Reader::from_path(path).map_err(|e| csv_err(e.to_string()))?;
    let header: Vec<String> = r
        .headers()
        .map_err(|e| csv_err(e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let status_at = header
        .iter()
        .position(|h| h == "status")
        .ok_or_else(|| csv_err("no status column".into()))?;
    let col = |name: &str| header.iter().position(|h| h == name);
    let params: Vec<String> = header[2..status_at].to_vec();
    let mut out = Vec::new();
    for row in r.records() {
        let row = row.map_err(|e| csv_err(e.to_string()))?;
        let get = |name: &str| col(name).and_then(|i| row.get(i)).unwrap_or("");
        let num = |name: &str| get(name).parse::<f64>().ok();
        let stats = num("median_ms").map(|median_ms| Stats {
            median_ms,
            min_ms: num("min_ms").unwrap_or(median_ms),
            max_ms: num("max_ms").unwrap_or(median_ms),
            spread_pct: num("spread_pct").unwrap_or(0.0),
            samples: get("samples").parse().unwrap_or(0),
        });
        out.push(Record {
            kind: get("kind").to_string(),
            name: get("name").to_string(),
            params: params
                .iter()
                .enumerate()
                .filter(|(i, _)| !row.get(i + 2).unwrap_or("").is_empty())
                .map(|(i, p)| (p.clone(), row.get(i + 2).unwrap_or("").to_string()))
                .collect(),
            status: Status::parse(get("status"))
                .ok_or_else(|| csv_err(format!("bad status '{}'", get("status"))))?,
            error: get("error").to_string(),
            stats,
            throughput: num("throughput"),
            frac_of_roof: num("frac_of_roof"),
            compile_ms: num("compile_ms"),
            registers: get("registers").parse().ok(),
            confirm: num("confirm_median_ms").map(|median_ms| Confirmed {
                median_ms,
                vs_winner_pct: num("vs_winner_pct").unwrap_or(0.0),
                ci_low_pct: num("vs_winner_ci_low_pct").unwrap_or(0.0),
                ci_high_pct: num("vs_winner_ci_high_pct").unwrap_or(0.0),
                tied: get("tied") == "true",
                winner: get("winner") == "true",
            }),
        });
    }
    Ok(out)
}

/// One row of `best.csv`: the winning configuration for an op, shape, dtype and GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The winner was statistically tied with others and picked by the tie rule.
    #[serde(default)]
    pub tie: bool,
}

impl BestRow {
    fn key(&self) -> (&str, &str, &str, &str) {
        (&self.op, &self.shape, &self.dtype, &self.gpu)
    }
}

pub fn read_best(path: &Path) -> Result<Vec<BestRow>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let csv_err = |e: csv::Error| Error::Csv {
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    let mut r = csv::Reader::from_path(path).map_err(csv_err)?;
    r.deserialize()
        .collect::<std::result::Result<Vec<BestRow>, _>>()
        .map_err(csv_err)
}

/// Inserts `row`, replacing the row of the same op, shape, dtype and GPU: the newer run wins.
pub fn upsert_best(path: &Path, row: BestRow) -> Result<()> {
    let mut rows = read_best(path)?;
    rows.retain(|r| r.key() != row.key());
    rows.push(row);
    rows.sort_by(|a, b| a.key().cmp(&b.key()));
    let mut w = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| Error::Csv {
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    for r in &rows {
        w.serialize(r).map_err(csv_err)?;
    }
    let bytes = w.into_inner().map_err(|e| Error::Csv {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> RunInfo {
        RunInfo {
            op: "transpose".into(),
            shape: "1000x1000".into(),
            dtype: "f32".into(),
            gpu: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: "9.0".into(),
            cache: "cold".into(),
            reps: 30,
            unit: "GB/s".into(),
            roof: "copy_vec4".into(),
            driver: "13.0".into(),
            nvrtc: "13.0".into(),
        }
    }

    #[test]
    fn run_csv_round_trips() {
        let params = vec!["TILE_DIM".to_string(), "BOUNDS".to_string()];
        let stats = Stats {
            median_ms: 0.0123,
            min_ms: 0.012,
            max_ms: 0.02,
            spread_pct: 3.5,
            samples: 30,
        };
        let records = vec![
            Record {
                kind: "baseline".into(),
                name: "memcpy".into(),
                params: vec![],
                status: Status::Ok,
                error: String::new(),
                stats: Some(stats),
                throughput: Some(650.5),
                frac_of_roof: Some(1.0),
                compile_ms: None,
                registers: None,
                confirm: None,
            },
            Record {
                kind: "variant".into(),
                name: "v0001".into(),
                params: vec![
                    ("TILE_DIM".into(), "32".into()),
                    ("BOUNDS".into(), "edge".into()),
                ],
                status: Status::Failed,
                error: "compile: error: expected a \";\", line 3\nsecond line".into(),
                stats: None,
                throughput: None,
                frac_of_roof: None,
                compile_ms: Some(12.5),
                registers: Some(32),
                confirm: Some(Confirmed {
                    median_ms: 0.0125,
                    vs_winner_pct: 1.5,
                    ci_low_pct: -0.25,
                    ci_high_pct: 3.0,
                    tied: true,
                    winner: false,
                }),
            },
            Record {
                kind: "variant".into(),
                name: "v0002".into(),
                params: vec![
                    ("TILE_DIM".into(), "8".into()),
                    ("BOUNDS".into(), "none".into()),
                ],
                status: Status::Pruned,
                error: "BOUNDS=none needs both dimensions to be tile multiples".into(),
                stats: None,
                throughput: None,
                frac_of_roof: None,
                compile_ms: None,
                registers: None,
                confirm: None,
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = run_csv_path(dir.path(), &info());
        assert!(path.ends_with("transpose_1000x1000_nvidia-h100-80gb-hbm3.csv"));
        write_atomic(&path, &run_csv(&info(), &params, &records).unwrap()).unwrap();
        assert_eq!(read_run_csv(&path).unwrap(), records);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn best_upsert_replaces_the_same_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("best.csv");
        let row = |shape: &str, ms: f64| BestRow {
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
            tie: false,
        };
        upsert_best(&path, row("1000x1000", 2.0)).unwrap();
        upsert_best(&path, row("1024x1024", 3.0)).unwrap();
        upsert_best(&path, row("1000x1000", 1.0)).unwrap();
        let rows = read_best(&path).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], row("1000x1000", 1.0));
        assert_eq!(rows[1], row("1024x1024", 3.0));
    }
}

/// The record of a run in progress: one JSON line per finished task, appended and flushed as
/// it finishes, so a crash or `kill -9` loses at most the task in flight. The first line
/// identifies the run; `--resume` reuses entries only from a journal whose first line matches.
pub struct Journal {
    file: std::fs::File,
    path: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct JournalEntry<T> {
    key: String,
    result: T,
}

impl Journal {
    /// `DIR/<op>_<shape>_<gpu>.journal.jsonl`, beside the run CSV.
    pub fn path_for(dir: &Path, info: &RunInfo) -> PathBuf {
        run_csv_path(dir, info).with_extension("journal.jsonl")
    }

    /// Opens the journal: with `resume`, keeps a matching journal and returns its entries;
    /// otherwise (or when the header differs) starts a new one.
    pub fn open<T: serde::de::DeserializeOwned>(
        path: &Path,
        header: &serde_json::Value,
        resume: bool,
    ) -> Result<(Journal, Vec<(String, T)>)> {
        use std::io::{BufRead, Write};
        let header_line = serde_json::to_string(header).expect("serializable");
        let mut entries = Vec::new();
        let mut reused = false;
        if resume {
            if let Ok(f) = std::fs::File::open(path) {
                let mut lines = std::io::BufReader::new(f).lines().map_while(|l| l.ok());
                if lines.next().as_deref() == Some(header_line.as_str()) {
                    reused = true;
                    // A torn last line (killed mid-write) is skipped, never an error.
                    entries.extend(
                        lines
                            .filter_map(|l| serde_json::from_str::<JournalEntry<T>>(&l).ok())
                            .map(|e| (e.key, e.result)),
                    );
                }
            }
        }
        if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
        }
        let file = if reused {
            std::fs::OpenOptions::new()
                .append(true)
                .read(true)
                .open(path)
                .and_then(|mut f| {
                    // After a torn last line, start the next entry on a line of its own.
                    use std::io::{Read, Seek, SeekFrom};
                    let mut last = [0u8];
                    if f.seek(SeekFrom::End(-1)).is_ok()
                        && f.read_exact(&mut last).is_ok()
                        && last[0] != b'\n'
                    {
                        writeln!(f)?;
                    }
                    Ok(f)
                })
        } else {
            std::fs::File::create(path).and_then(|mut f| {
                writeln!(f, "{header_line}")?;
                Ok(f)
            })
        }
        .map_err(|e| Error::io("cannot write", path, e))?;
        Ok((
            Journal {
                file,
                path: path.to_path_buf(),
            },
            entries,
        ))
    }

    /// Appends one finished task and flushes it to the OS.
    pub fn append<T: Serialize>(&mut self, key: &str, result: &T) -> Result<()> {
        use std::io::Write;
        let line = serde_json::to_string(&JournalEntry {
            key: key.to_string(),
            result,
        })
        .expect("serializable");
        writeln!(self.file, "{line}")
            .and_then(|_| self.file.flush())
            .map_err(|e| Error::io("cannot append to", &self.path, e))
    }
}

#[cfg(test)]
mod journal_tests {
    use super::*;

    #[test]
    fn journal_resumes_only_a_matching_run_and_survives_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.journal.jsonl");
        let header = serde_json::json!({"op": "transpose", "shape": "64x64"});
        let (mut j, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert!(old.is_empty());
        j.append("a", &1u32).unwrap();
        j.append("b", &2u32).unwrap();
        drop(j);
        // A process killed mid-write leaves half a line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"key\":\"c\",\"res"))
            .unwrap();
        let (mut j, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert_eq!(old, vec![("a".to_string(), 1), ("b".to_string(), 2)]);
        j.append("c", &3u32).unwrap();
        drop(j);
        let (_, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert_eq!(old.len(), 3, "the entry after a torn line is kept");
        // Another run's header: nothing is reused and the journal starts over.
        let other = serde_json::json!({"op": "transpose", "shape": "128x128"});
        let (_, old) = Journal::open::<u32>(&path, &other, true).unwrap();
        assert!(old.is_empty());
        // Without --resume the journal starts over too.
        let (_, old) = Journal::open::<u32>(&path, &header, false).unwrap();
        assert!(old.is_empty());
    }
}
