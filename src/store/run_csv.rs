//! The run CSV: one per run, every configuration, baselines included, with its status and
//! reason.

use super::best::{line_of, BEST_REQUIRED};
use super::files::slug;
use super::record::{Confirmed, Kind, Note, Record, RunInfo, Status};
use crate::error::{Error, Result};
use crate::measure::bench::Stats;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const FIXED_BEFORE: [&str; 2] = ["kind", "name"];
const CONFIRM_COLUMNS: [&str; 6] = [
    "confirm_median_ms",
    "vs_winner_pct",
    "vs_winner_ci_low_pct",
    "vs_winner_ci_high_pct",
    "tied",
    "winner",
];

const FIXED_AFTER: [&str; 19] = [
    "status",
    "error",
    "median_ms",
    "min_ms",
    "max_ms",
    "spread_pct",
    "samples",
    "batch",
    "throughput",
    column::UNIT,
    "frac_of_roof",
    column::ROOF,
    "compile_ms",
    "registers",
    column::OP,
    column::SHAPE,
    column::DTYPE,
    column::GPU,
    column::CACHE,
];

/// The names of the columns that describe the run rather than the row (the same in every
/// row), for the readers that look them up: `tune report` and `tune merge`.
pub mod column {
    pub const UNIT: &str = "unit";
    pub const ROOF: &str = "roof";
    pub const OP: &str = "op";
    pub const SHAPE: &str = "shape";
    pub const DTYPE: &str = "dtype";
    pub const GPU: &str = "gpu";
    pub const CACHE: &str = "cache";
}

/// The number columns, each with whether a negative value is possible: times, spreads,
/// throughputs and fractions of the roof are not; the re-timing's differences to the winner
/// are.
const NUMBERS: [(&str, bool); 11] = [
    ("median_ms", false),
    ("min_ms", false),
    ("max_ms", false),
    ("spread_pct", false),
    ("throughput", false),
    ("frac_of_roof", false),
    ("compile_ms", false),
    ("confirm_median_ms", false),
    ("vs_winner_pct", true),
    ("vs_winner_ci_low_pct", true),
    ("vs_winner_ci_high_pct", true),
];

/// The run CSV's path: `DIR/<op>_<shape>_<gpu>.csv` for float32 and
/// `DIR/<op>_<shape>_<dtype>_<gpu>.csv` for any other element type
/// ([`crate::model::dtype::named`]), so `tune merge` and readers of a results folder need no
/// spec to find a file.
pub fn run_csv_path(dir: &Path, info: &RunInfo) -> PathBuf {
    run_csv_path_of(dir, &info.op, &info.shape, &info.dtype, &info.gpu)
}

/// [`run_csv_path`] from the run's key alone (before the run has a [`RunInfo`]).
pub fn run_csv_path_of(dir: &Path, op: &str, shape: &str, dtype: &str, gpu: &str) -> PathBuf {
    let dtype = crate::model::dtype::named(dtype)
        .map(|d| format!("_{}", slug(d)))
        .unwrap_or_default();
    dir.join(format!("{op}_{shape}{dtype}_{}.csv", slug(gpu)))
}

/// Serializes a run's records (parameter columns from the first variant row).
pub fn run_csv(info: &RunInfo, param_names: &[String], records: &[Record]) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| Error::Internal(format!("serializing a run CSV: {e}"));
    let header: Vec<&str> = FIXED_BEFORE
        .iter()
        .copied()
        .chain(param_names.iter().map(String::as_str))
        .chain(FIXED_AFTER.iter().copied())
        .chain(CONFIRM_COLUMNS.iter().copied())
        .collect();
    w.write_record(&header).map_err(csv_err)?;
    // Field by field into the writer, each formatted into one reused buffer: a run CSV has a
    // row per configuration of the space (tens of thousands for sgemm), written at the end of
    // every run.
    let mut text = String::new();
    let mut field = |w: &mut csv::Writer<Vec<u8>>, v: Option<&dyn std::fmt::Display>| {
        text.clear();
        if let Some(v) = v {
            let _ = write!(text, "{v}");
        }
        w.write_field(&text).map_err(csv_err)
    };
    for r in records {
        let (s, c, reason) = (r.stats.as_ref(), r.confirm.as_ref(), r.reason());
        field(&mut w, Some(&r.kind))?;
        field(&mut w, Some(&r.name))?;
        for p in param_names {
            let v = r.params.iter().find(|(k, _)| k == p).map(|(_, v)| v);
            field(&mut w, v.map(|v| v as _))?;
        }
        // The columns of FIXED_AFTER, then of CONFIRM_COLUMNS.
        let rest: [Option<&dyn std::fmt::Display>; FIXED_AFTER.len() + CONFIRM_COLUMNS.len()] = [
            Some(&r.status.as_str()),
            Some(&reason),
            s.map(|s| &s.median_ms as _),
            s.map(|s| &s.min_ms as _),
            s.map(|s| &s.max_ms as _),
            s.map(|s| &s.spread_pct as _),
            s.map(|s| &s.samples as _),
            s.map(|s| &s.batch as _),
            r.throughput.as_ref().map(|x| x as _),
            Some(&info.unit),
            r.frac_of_roof.as_ref().map(|x| x as _),
            Some(&info.roof),
            r.compile_ms.as_ref().map(|x| x as _),
            r.registers.as_ref().map(|x| x as _),
            Some(&info.op),
            Some(&info.shape),
            Some(&info.dtype),
            Some(&info.gpu),
            Some(&info.cache),
            c.map(|c| &c.median_ms as _),
            c.map(|c| &c.vs_winner_pct as _),
            c.map(|c| &c.ci_low_pct as _),
            c.map(|c| &c.ci_high_pct as _),
            c.map(|c| &c.tied as _),
            c.map(|c| &c.winner as _),
        ];
        for v in rest {
            field(&mut w, v)?;
        }
        w.write_record(None::<&[u8]>).map_err(csv_err)?;
    }
    w.into_inner()
        .map_err(|e| Error::Internal(format!("serializing a run CSV: {e}")))
}

/// What a run CSV's rows say about the run as a whole (the same in every row).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunLabels {
    pub op: String,
    pub shape: String,
    pub dtype: String,
    pub gpu: String,
    pub cache: String,
    pub unit: String,
    pub roof: String,
}

impl RunLabels {
    /// True for a `--compile-only` run's CSV: its `gpu` column names the architecture compiled
    /// for ([`compile_only_gpu`]), and nothing in it was run or timed.
    pub fn is_compile_only(&self) -> bool {
        self.gpu.ends_with(COMPILE_ONLY)
    }
}

/// What ends the `gpu` column of a compile-only run's CSV.
const COMPILE_ONLY: &str = " compile-only";

/// The `gpu` column of a `--compile-only` run's CSV for architecture `arch` (`sm_90
/// compile-only`), which also names its file (`..._sm-90-compile-only.csv`).
pub fn compile_only_gpu(arch: &str) -> String {
    format!("{arch}{COMPILE_ONLY}")
}

/// A run CSV read back: its parameter columns, what its rows say about the run, and its rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFile {
    /// The parameter columns, in the file's order (between `name` and `status`).
    pub params: Vec<String>,
    /// Taken from the first row; empty for a file with no rows.
    pub labels: RunLabels,
    pub records: Vec<Record>,
}

/// Reads a run CSV back (the inverse of [`run_csv`]): its records ([`read_run_file`]).
pub fn read_run_csv(path: &Path) -> Result<Vec<Record>> {
    Ok(read_run_file(path)?.records)
}

/// Reads a run CSV back, whole. Every reader takes it through here, so none ranks, merges or
/// shows what a damaged or hand-edited file says: a number column ([`NUMBERS`]) that holds
/// text, NaN, an infinity or a negative value where none is possible, or a row whose run
/// columns (op, shape, GPU, ...) differ from the first row's, fails, naming its line and
/// column.
pub fn read_run_file(path: &Path) -> Result<RunFile> {
    read_run_file_where(path, |_, _| true)
}

/// [`read_run_file`], keeping only the rows for which `keep(status, error)` holds, decided
/// before a row becomes a [`Record`] (every row is still checked): a re-run wants the few
/// measured rows of a file that has one per configuration of the space.
pub fn read_run_file_where(path: &Path, keep: impl Fn(Status, &str) -> bool) -> Result<RunFile> {
    let csv_err = |why: String| Error::Csv {
        path: path.to_path_buf(),
        why,
    };
    // A file that cannot be read is the machine's problem; one that reads but is not a run
    // CSV is the input's (Error::Csv, exit code 2). The bytes are kept to name lines exactly
    // ([`super::best::line_of`]).
    let bytes = std::fs::read(path).map_err(|e| Error::io("cannot read", path, e))?;
    let mut r = csv::Reader::from_reader(bytes.as_slice());
    let header: Vec<String> = r
        .headers()
        .map_err(|e| csv_err(e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let status_at = header
        .iter()
        .position(|h| h == "status")
        .filter(|&i| i >= 2)
        .ok_or_else(|| csv_err(not_a_run_csv(&header)))?;
    // Each column's position, looked up once: a run CSV has a row per configuration of the
    // space (tens of thousands for sgemm), and a re-run reads it before it starts.
    let at: HashMap<&str, usize> = header
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    let numbers: Vec<(usize, &str, bool)> = NUMBERS
        .iter()
        .filter_map(|&(name, signed)| Some((*at.get(name)?, name, signed)))
        .collect();
    let label_columns = [
        column::OP,
        column::SHAPE,
        column::DTYPE,
        column::GPU,
        column::CACHE,
        column::UNIT,
        column::ROOF,
    ];
    let params: Vec<String> = header[2..status_at].to_vec();
    let mut first: Option<[String; 7]> = None;
    let mut out = Vec::new();
    for row in r.records() {
        let row = row.map_err(|e| csv_err(e.to_string()))?;
        let get = |name: &str| at.get(name).and_then(|&i| row.get(i)).unwrap_or("");
        let line = || row.position().map_or(0, |p| line_of(&bytes, p));
        for &(i, name, signed) in &numbers {
            let text = row.get(i).unwrap_or("");
            if text.is_empty() {
                continue;
            }
            let why = match text.parse::<f64>() {
                Err(_) => "is not a number",
                Ok(x) if !x.is_finite() => "is not a finite number",
                Ok(x) if x < 0.0 && !signed => "is negative",
                Ok(_) => continue,
            };
            return Err(csv_err(format!(
                "line {}, column {name}: '{text}' {why} (a damaged or hand-edited file)",
                line()
            )));
        }
        let labels = label_columns.map(|c| get(c).to_string());
        match &first {
            None => first = Some(labels),
            Some(f) => {
                if let Some(k) = (0..labels.len()).find(|&k| labels[k] != f[k]) {
                    return Err(csv_err(format!(
                        "line {}, column {}: '{}' where the first row says '{}' (a file that \
                         mixes runs, or a damaged one)",
                        line(),
                        label_columns[k],
                        labels[k],
                        f[k]
                    )));
                }
            }
        }
        let status = Status::parse(get("status"))
            .ok_or_else(|| csv_err(format!("line {}: bad status '{}'", line(), get("status"))))?;
        if !keep(status, get("error")) {
            continue;
        }
        let num = |name: &str| get(name).parse::<f64>().ok();
        let stats = num("median_ms").map(|median_ms| Stats {
            median_ms,
            min_ms: num("min_ms").unwrap_or(median_ms),
            max_ms: num("max_ms").unwrap_or(median_ms),
            spread_pct: num("spread_pct").unwrap_or(0.0),
            samples: get("samples").parse().unwrap_or(0),
            // Files written before batched timing: one launch per sample.
            batch: get("batch").parse().unwrap_or(1),
        });
        // A reason the run acts on comes back as its note; any other stays text.
        let (error, note) = match Note::parse(get("error")) {
            Some(note) => (String::new(), Some(note)),
            None => (get("error").to_string(), None),
        };
        out.push(Record {
            kind: Kind::parse(get("kind"))
                .ok_or_else(|| csv_err(format!("line {}: bad kind '{}'", line(), get("kind"))))?,
            name: get("name").to_string(),
            params: params
                .iter()
                .enumerate()
                .filter(|(i, _)| !row.get(i + 2).unwrap_or("").is_empty())
                .map(|(i, p)| (p.clone(), row.get(i + 2).unwrap_or("").to_string()))
                .collect(),
            status,
            error,
            note,
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
    let labels = first
        .map(|[op, shape, dtype, gpu, cache, unit, roof]| RunLabels {
            op,
            shape,
            dtype,
            gpu,
            cache,
            unit,
            roof,
        })
        .unwrap_or_default();
    Ok(RunFile {
        params,
        labels,
        records: out,
    })
}

/// Why a CSV header is not a run CSV's, naming what the file looks like instead.
fn not_a_run_csv(header: &[String]) -> String {
    let has = |c: &str| header.iter().any(|h| h == c);
    if header.iter().all(|h| h.trim().is_empty()) {
        "the file is empty, not a run CSV written by tune".into()
    } else if BEST_REQUIRED.iter().all(|c| has(c)) {
        "this is a tuning database (best.csv), not a run CSV: pass one of the \
         <op>_<shape>_<gpu>.csv files a run wrote"
            .into()
    } else {
        "not a run CSV written by tune (no status column)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::files::write_atomic;
    use crate::store::journal::Journal;

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
    fn run_csv_names_carry_the_dtype_unless_f32() {
        let dir = Path::new("out");
        let f32_info = info();
        assert_eq!(
            run_csv_path(dir, &f32_info),
            dir.join("transpose_1000x1000_nvidia-h100-80gb-hbm3.csv"),
            "float32 runs keep the names they had before --dtype"
        );
        let f64_info = RunInfo {
            dtype: "f64".into(),
            ..info()
        };
        assert_eq!(
            run_csv_path(dir, &f64_info),
            dir.join("transpose_1000x1000_f64_nvidia-h100-80gb-hbm3.csv")
        );
        assert_eq!(
            Journal::path_for(dir, &f64_info),
            dir.join("transpose_1000x1000_f64_nvidia-h100-80gb-hbm3.journal.jsonl"),
            "a journal per dtype: results of one element type never resume another's"
        );
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
            batch: 17,
        };
        let records = vec![
            Record {
                kind: Kind::Baseline,
                note: None,
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
                kind: Kind::Variant,
                note: None,
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
                kind: Kind::Variant,
                note: None,
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
    fn a_number_that_cannot_be_one_is_refused_by_line_and_column() {
        let stats = Stats {
            median_ms: 0.5,
            min_ms: 0.4,
            max_ms: 0.6,
            spread_pct: 2.0,
            samples: 30,
            batch: 1,
        };
        let row = |kind: Kind, name: &str, status: Status, error: &str| Record {
            kind,
            note: None,
            name: name.into(),
            params: vec![],
            status,
            error: error.into(),
            stats: (status == Status::Ok).then_some(stats),
            throughput: (status == Status::Ok).then_some(100.0),
            frac_of_roof: (status == Status::Ok).then_some(0.5),
            compile_ms: None,
            registers: None,
            confirm: None,
        };
        // Lines 1 (header), 2, 3 and 4 (a reason of two lines), then 5.
        let mut last = row(Kind::Variant, "v0002", Status::Ok, "");
        last.confirm = Some(Confirmed {
            median_ms: 0.5,
            vs_winner_pct: -1.5,
            ci_low_pct: -3.0,
            ci_high_pct: -0.5,
            tied: false,
            winner: true,
        });
        let records = vec![
            row(Kind::Baseline, "memcpy", Status::Ok, ""),
            row(
                Kind::Variant,
                "v0001",
                Status::Failed,
                "compile: error\nsecond line",
            ),
            last,
        ];
        let good = run_csv(&info(), &[], &records).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.csv");
        write_atomic(&path, &good).unwrap();
        assert_eq!(
            read_run_csv(&path).unwrap(),
            records,
            "differences to the winner may be negative"
        );
        // `good` with the last row's `column` set to `value`.
        let edited = |column: &str, value: &str| {
            let mut r = csv::Reader::from_reader(good.as_slice());
            let header = r.headers().unwrap().clone();
            let at = header.iter().position(|h| h == column).unwrap();
            let mut rows: Vec<csv::StringRecord> = r.records().map(|r| r.unwrap()).collect();
            let last = rows.last_mut().unwrap();
            *last = last
                .iter()
                .enumerate()
                .map(|(i, f)| if i == at { value } else { f })
                .collect();
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(&header).unwrap();
            for row in &rows {
                w.write_record(row).unwrap();
            }
            w.into_inner().unwrap()
        };
        for (column, value, why) in [
            ("median_ms", "-5000", "is negative"),
            ("min_ms", "NaN", "is not a finite number"),
            ("throughput", "inf", "is not a finite number"),
            ("frac_of_roof", "-0.5", "is negative"),
            ("spread_pct", "fast", "is not a number"),
            ("vs_winner_pct", "-inf", "is not a finite number"),
        ] {
            write_atomic(&path, &edited(column, value)).unwrap();
            let e = read_run_csv(&path).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            let want = format!("line 5, column {column}: '{value}' {why}");
            assert!(e.to_string().contains(&want), "{e}\nlacks: {want}");
            assert!(!e.to_string().contains('\n'), "one line: {e}");
        }
        // A row of another run (two files pasted together) is refused the same way.
        write_atomic(&path, &edited(column::SHAPE, "2000x2000")).unwrap();
        let e = read_run_csv(&path).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(
            e.to_string()
                .contains("line 5, column shape: '2000x2000' where the first row says '1000x1000'"),
            "{e}"
        );
        write_atomic(&path, &good).unwrap();
        let file = read_run_file(&path).unwrap();
        assert_eq!(file.labels.shape, "1000x1000");
        assert_eq!(file.labels.roof, info().roof);
    }
}
