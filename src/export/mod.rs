//! Tuned configurations out of the database and into users' builds: `tune best`,
//! `tune export`, `tune report`, and the same as a Rust API ([`TunedDb`], [`tuned_source`]).
//!
//! # The database
//!
//! `results/best.csv` (the default `--db`) holds **one row per (op, shape, dtype, GPU)**: the
//! fastest *verified* configuration of a run of that key, with its parameters (`K=V;K=V`),
//! median time, throughput, fraction of the same run's roof, L2 state, the tool version, the
//! CUDA version the driver supports (`driver`: `13.0`, not the driver's release number),
//! NVRTC's version, when it was tuned, the hash of the source it timed, and the GPU's SM count
//! and the architecture compiled for (which the row's kernel is rendered again with,
//! [`crate::store::tuned::row_limits`]). The tuner writes it
//! ([`crate::store::best::upsert_best`]); nothing here does. The rule: a new tuning run of the
//! same key **replaces** the row, so the newer run wins even when it measured a slower best
//! (another L2 state, a narrowed `--param` space, a busier GPU); with `tune --keep-best` the
//! stored row stays when it is faster (lower median, same L2 state) and today's template still
//! renders the source it timed. Rows of other keys are never touched. Rows are kept sorted by
//! key; the file is replaced atomically under an exclusive lock on `best.csv.lock`, so
//! concurrent runs each keep their row.
//!
//! A hand-edited or damaged file stays usable: lines that cannot be used are skipped with a
//! `warning: FILE:LINE: why` on stderr ([`crate::store::best::read_best_checked`],
//! [`TunedDb::skipped`]) and every other row is served; an empty file has no rows.
//!
//! Reading it, always by (op, dtype, shape): [`TunedDb::best`] (exact), [`TunedDb::nearest`]
//! (by [`shape_distance`], Σ |ln(dᵢ / tᵢ)|), [`TunedDb::select`] (exact, else the nearest
//! tuned shape of the same dtype whose kernel may run on the shape, see [`Applicability`]),
//! [`safe_default`] (what to run where `select` finds nothing: a configuration of the op's
//! spec valid at every shape) and [`tuned_source`] (the kernel of a row, rendered from the
//! op's template as the tuner compiled it). A kernel of another dtype is never chosen: it
//! reads and writes elements of another size.
//!
//! # Formats
//!
//! One file per format, each with its `INFO` entry in [`FORMATS`] (`--format`'s values come
//! from there): a single file behind [`Exporter`] (CSV, JSON, Markdown), or a folder (CUDA
//! sources plus a header, [`cuda`]). A new format is a file here and one entry in [`FORMATS`].
//! [`mod@report`] writes an HTML report of one run CSV.
//!
//! [`shape_distance`]: db::shape_distance
//! [`tuned_source`]: kernel::tuned_source
//! [`safe_default`]: kernel::safe_default
//! [`Applicability`]: kernel::Applicability

pub mod csv;
pub mod cuda;
pub mod db;
pub mod json;
pub mod kernel;
pub mod markdown;
pub mod report;

use crate::error::{Error, Result};
use crate::model::dtype::{self, Dtype};
use crate::model::shape::Shape;
use crate::pipeline::options::DEFAULT_DB;
use crate::spec::ops::Op;
use crate::store::best::{parse_params, shipped_best, BestRow};
use crate::store::files::{check_not_an_input, is_stdout, write_atomic, STDOUT};
use db::{parse_dims, TunedDb};
use std::path::{Path, PathBuf};

/// A format of `tune export`: the name `--format` takes, its help line (empty: none) and
/// what it writes.
pub struct ExportFormat {
    pub name: &'static str,
    pub about: &'static str,
    pub writes: Writes,
}

/// What an export format writes.
pub enum Writes {
    /// One file, to stdout or `--output FILE`: the rows serialized.
    File(&'static dyn Exporter),
    /// A folder, `--output DIR` (required): writes the rows of `db` there and returns the
    /// summary printed on stdout.
    Folder(
        fn(db: &TunedDb, rows: Vec<&BestRow>, args: &ExportOptions, dir: &Path) -> Result<String>,
    ),
}

/// Every export format, in the order `tune export --help` lists them.
pub const FORMATS: &[ExportFormat] = &[csv::INFO, json::INFO, markdown::INFO, cuda::INFO];

/// The registered format `name`; another is bad input that names the known ones.
pub fn format(name: &str) -> Result<&'static ExportFormat> {
    FORMATS.iter().find(|f| f.name == name).ok_or_else(|| {
        let known: Vec<&str> = FORMATS.iter().map(|f| f.name).collect();
        Error::Usage(format!(
            "unknown export format '{name}' (known formats: {})",
            known.join(", ")
        ))
    })
}

/// `tune best`: which stored rows to print.
#[derive(Debug, Clone)]
pub struct BestQuery {
    pub op: String,
    pub shape: String,
    /// GPU name to match (any when `None`).
    pub gpu: Option<String>,
    /// Element type to match (any when `None`).
    pub dtype: Option<String>,
    /// The tuning database; `None`: `results/best.csv`, or where that file does not exist the
    /// winners built into this binary ([`shipped_best`]), as the tuner's warm start reads them.
    pub db: Option<PathBuf>,
}

/// How messages name the database built into the binary.
const SHIPPED_DB: &str = "the database built into tune";

/// `tune export`: what to export, from where, to where.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The name of a format of [`FORMATS`].
    pub format: String,
    /// Only entries of this op.
    pub op: Option<String>,
    /// Only entries whose GPU name contains this text.
    pub gpu: Option<String>,
    /// File to write (csv, json, markdown; stdout when `None` or `-`) or folder (cuda,
    /// required).
    pub output: Option<PathBuf>,
    /// The tuning database.
    pub db: PathBuf,
    /// Op specs and templates to read instead of the built-in ones (for cuda).
    pub templates: Option<PathBuf>,
}

/// `tune report`: the run CSV to read and the HTML file to write.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub csv: PathBuf,
    pub output: PathBuf,
}

/// A single-file format of the database rows.
pub trait Exporter {
    /// The whole file for `rows`, in their order.
    fn serialize(&self, rows: &[&BestRow]) -> Result<Vec<u8>>;
}

/// `0.0076` ms → `7.648 µs`; a millisecond and more in ms.
pub fn format_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.3} µs", ms * 1e3)
    } else if ms < 1e6 {
        format!("{ms:.3} ms")
    } else {
        // Past a quarter of an hour a kernel's time is a damaged row's: kept short.
        format!("{ms:.3e} ms")
    }
}

/// The dimensions of `shape` for `op`: checked against the op's spec when the op is known
/// (built in), else parsed as `AxB...` for ops that only the database knows.
fn query_dims(db: &TunedDb, op: &str, shape: &str) -> Result<Vec<u64>> {
    match Op::load(op, None) {
        Ok(op) => Ok(Shape::parse(shape, &op.spec.dims)?.dims),
        Err(_) if db.ops().contains(&op) => parse_dims(shape).ok_or_else(|| Error::Shape {
            input: shape.to_string(),
            why: "expected positive integers separated by x, e.g. 1000x1000".into(),
        }),
        Err(_) => Err(Error::Usage(format!(
            "no op '{op}' in {} (tuned ops: {})",
            db.path().display(),
            list_or_none(&db.ops())
        ))),
    }
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// The one-line error for a shape that was never tuned (for `dtype`, when given), naming the
/// nearest tuned shapes.
fn never_tuned(
    db: &TunedDb,
    op: &str,
    dtype: Option<&str>,
    dims: &[u64],
    gpu: Option<&str>,
) -> Error {
    let shape = Shape {
        dims: dims.to_vec(),
    };
    let mut on = dtype.map(|d| format!(" for {d}")).unwrap_or_default();
    if let Some(g) = gpu {
        on.push_str(&format!(" on a GPU matching '{g}'"));
    }
    let mut other_dtypes: Vec<&str> = Vec::new();
    for r in db.exact(op, None, dims, gpu) {
        if !other_dtypes.contains(&r.dtype.as_str()) {
            other_dtypes.push(&r.dtype);
        }
    }
    if !other_dtypes.is_empty() {
        return Error::Usage(format!(
            "{op} {shape} was never tuned{on} in {}; it was tuned for: {}",
            db.path().display(),
            other_dtypes.join(", ")
        ));
    }
    // One name per GPU model, however many dtypes it was tuned for.
    let mut elsewhere: Vec<&str> = Vec::new();
    for r in db.exact(op, dtype, dims, None) {
        if !elsewhere.contains(&r.gpu.as_str()) {
            elsewhere.push(&r.gpu);
        }
    }
    if !elsewhere.is_empty() {
        return Error::Usage(format!(
            "{op} {shape} was never tuned{on} in {}; it was tuned on: {} (leave out --gpu to see it)",
            db.path().display(),
            elsewhere.join(", ")
        ));
    }
    let mut nearest: Vec<&str> = Vec::new();
    for (_, r) in db.ranked(op, dtype, dims, gpu) {
        if !nearest.contains(&r.shape.as_str()) {
            nearest.push(&r.shape);
        }
    }
    // `--dtype` only where the run would not tune that type without it.
    let default_dtype = Op::load(op, None).map_or(Dtype::F32, |o| o.spec.default_dtype());
    let dtype_arg = dtype
        .filter(|&d| d != default_dtype.name())
        .map(|d| format!(" --dtype {d}"))
        .unwrap_or_default();
    let hint = format!("tune it with: tune --op {op} --shape {shape}{dtype_arg}");
    if nearest.is_empty() {
        return Error::Usage(format!(
            "{op} {shape} was never tuned{on} in {}, nor any other {op} shape; {hint}",
            db.path().display()
        ));
    }
    nearest.truncate(3);
    Error::Usage(format!(
        "{op} {shape} was never tuned{on} in {}; nearest tuned {op} shapes: {}; {hint}",
        db.path().display(),
        nearest.join(", ")
    ))
}

/// A row as `tune best` prints it.
pub fn describe(r: &BestRow) -> String {
    let params: Vec<String> = parse_params(&r.params)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let roof = match r.frac_of_roof {
        Some(f) if r.roof.is_empty() => format!(", {:.1} % of the roof", f * 100.0),
        Some(f) => format!(", {:.1} % of the roof ({})", f * 100.0, r.roof),
        None => String::new(),
    };
    format!(
        "{} {} {} on {} (cc {}, {})\n  \
         parameters  {}\n  \
         time        {} (median of {} timed launches, L2 {})\n  \
         throughput  {:.1} {}{roof}\n  \
         tuned       {} with cuda-autotune {}, driver for CUDA {}, NVRTC {}\n",
        r.op,
        r.shape,
        r.dtype,
        r.gpu,
        r.compute_capability,
        crate::store::tuned::sms_text(r),
        params.join(" "),
        format_ms(r.median_ms),
        r.reps,
        r.cache,
        r.throughput,
        r.unit,
        r.tuned_at,
        r.tool_version,
        r.driver,
        r.nvrtc
    )
}

/// `tune best`: prints the stored best configuration of an op and shape (one block per
/// matching GPU and dtype), without tuning.
pub fn best(args: &BestQuery) -> Result<()> {
    check_dtype(args.dtype.as_deref())?;
    let db = match &args.db {
        Some(path) => TunedDb::load(path)?,
        None if Path::new(DEFAULT_DB).exists() => TunedDb::load(DEFAULT_DB)?,
        None => {
            eprintln!(
                "note: {DEFAULT_DB} does not exist here; reading {SHIPPED_DB} (the winners \
                 shipped with it; --db FILE reads another)"
            );
            TunedDb::from_rows(SHIPPED_DB, shipped_best())
        }
    };
    let rows = best_rows(
        &db,
        &args.op,
        args.dtype.as_deref(),
        &args.shape,
        args.gpu.as_deref(),
    )?;
    let text: Vec<String> = rows
        .iter()
        .map(|r| {
            // A row of an op not built in (a user's spec) cannot be rendered here: no note.
            let untimed = kernel::specialize(r, None)
                .ok()
                .and_then(|tuned| kernel::untimed_note(r, &tuned));
            match untimed {
                Some(why) => format!("{}  note        {why}\n", describe(r)),
                None => describe(r),
            }
        })
        .collect();
    print_stdout(text.join("\n").as_bytes())
}

/// The rows `tune best` prints: those tuned for exactly `op` at `shape` (checked against the
/// op's spec when it is known), of element type `dtype` (every dtype when `None`) on a GPU
/// matching `gpu`. None is an input error that names what was tuned instead: the same shape
/// for other dtypes, on other GPUs, or the nearest tuned shapes.
pub fn best_rows<'a>(
    db: &'a TunedDb,
    op: &str,
    dtype: Option<&str>,
    shape: &str,
    gpu: Option<&str>,
) -> Result<Vec<&'a BestRow>> {
    check_dtype(dtype)?;
    let dims = query_dims(db, op, shape)?;
    let rows = db.exact(op, dtype, &dims, gpu);
    if rows.is_empty() {
        return Err(never_tuned(db, op, dtype, &dims, gpu));
    }
    Ok(rows)
}

/// A `--dtype` to match that names no element type is bad input (no row can be of it).
fn check_dtype(dtype: Option<&str>) -> Result<()> {
    match dtype.filter(|d| Dtype::parse(d).is_none()) {
        Some(d) => Err(Error::Usage(format!(
            "--dtype {d}: '{d}' is not an element type ({})",
            dtype::names(&dtype::ALL)
        ))),
        None => Ok(()),
    }
}

fn print_stdout(bytes: &[u8]) -> Result<()> {
    write_atomic(Path::new(STDOUT), bytes)
}

/// `tune export`: writes the (filtered) database as CSV, JSON or Markdown to stdout or
/// `--output`, or as CUDA sources plus a header into the `--output` folder.
pub fn export(args: &ExportOptions) -> Result<()> {
    let format = format(&args.format)?;
    if let Some(out) = &args.output {
        check_not_an_input("--output", out, &[("--db", &args.db)])?;
    }
    let db = TunedDb::load(&args.db)?;
    let rows = db.filter(args.op.as_deref(), args.gpu.as_deref());
    if rows.is_empty() {
        let mut filter = String::new();
        if let Some(op) = &args.op {
            filter.push_str(&format!(" --op {op}"));
        }
        if let Some(gpu) = &args.gpu {
            filter.push_str(&format!(" --gpu '{gpu}'"));
        }
        return Err(Error::Usage(format!(
            "no entry of {} matches{} (ops: {}; GPUs: {})",
            db.path().display(),
            if filter.is_empty() && !db.skipped().is_empty() {
                format!(
                    " (no usable row: {} line(s) skipped, see the warnings)",
                    db.skipped().len()
                )
            } else if filter.is_empty() {
                " (the database is empty)".to_string()
            } else {
                filter
            },
            list_or_none(&db.ops()),
            list_or_none(&db.gpus())
        )));
    }
    match format.writes {
        Writes::File(exporter) => {
            let bytes = exporter.serialize(&rows)?;
            match &args.output {
                Some(path) => write_atomic(path, &bytes),
                None => print_stdout(&bytes),
            }
        }
        Writes::Folder(write) => {
            let dir = args
                .output
                .as_ref()
                .filter(|d| !is_stdout(d))
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "--format {} writes a folder: pass --output DIR",
                        format.name
                    ))
                })?;
            let summary = write(&db, rows, args, dir)?;
            print_stdout(summary.as_bytes())
        }
    }
}

/// `tune report`: writes a self-contained HTML report with plots of a run CSV.
pub fn report(args: &ReportOptions) -> Result<()> {
    if let Some(why) = crate::error::not_a_file(&args.csv) {
        return Err(Error::Usage(format!(
            "run CSV {}: {why}; pass one that tune wrote, e.g. --csv \
             results/transpose_1000x1000_<gpu>.csv",
            args.csv.display()
        )));
    }
    check_not_an_input("--output", &args.output, &[("--csv", &args.csv)])?;
    let html = report::render_html(&args.csv)?;
    write_atomic(&args.output, html.as_bytes())?;
    if is_stdout(&args.output) {
        return Ok(());
    }
    print_stdout(format!("wrote {}\n", args.output.display()).as_bytes())
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_print_short_at_every_scale() {
        assert_eq!(super::format_ms(0.0123), "12.300 µs");
        assert_eq!(super::format_ms(2.5), "2.500 ms");
        assert_eq!(super::format_ms(1e308), "1.000e308 ms");
    }

    #[test]
    fn a_row_without_a_roof_name_prints_its_fraction_alone() {
        let mut row = crate::store::best::shipped_best()
            .into_iter()
            .next()
            .expect("a shipped row");
        row.frac_of_roof = Some(0.9);
        row.roof.clear();
        let text = super::describe(&row);
        assert!(text.contains(", 90.0 % of the roof\n"), "{text}");
        row.roof = "memcpy".into();
        assert!(super::describe(&row).contains(", 90.0 % of the roof (memcpy)"));
    }
}
