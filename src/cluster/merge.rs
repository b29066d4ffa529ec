//! `tune merge DIR...`: joins the output folders of `tune --shard K/N` runs into one results
//! folder and one `best.csv`, as if one process had tuned the whole sweep.
//!
//! Everything is read and checked before anything is written, so a refused merge leaves the
//! output folder as it was. The output folder may hold no shard's manifest, and a shard's
//! folder must hold its own results: split by variants, no variant in two shards, and every
//! shard its share of them. A run CSV or journal already in the output folder is kept as
//! `.bak` before it is replaced when it holds rows the merge drops, as a tuning run keeps its
//! run CSV. The result depends only on the shards' files (timestamps come from the
//! manifests), so merging the same shards again rewrites the same bytes.
//!
//! Per (op, shape, dtype, GPU):
//! * the run CSV is the union of the shards' rows: each variant once (by name; a pruned row,
//!   present in every shard, once), each baseline's fastest verified row (every shard times
//!   the baselines), variants in space order after the baselines, as the tuner writes them;
//! * the roof is the fastest of those baselines that was some shard's roof (the fastest roof
//!   baseline overall is always its own shard's roof), and every `frac_of_roof` is recomputed
//!   against it;
//! * the winner: when exactly one row carries the `winner` flag of an interleaved
//!   confirmation (the whole shape was tuned in one shard), that one, as the tuner chose it;
//!   otherwise the tuner's tie rule over the medians: of the verified variants within
//!   `TIE_WITHIN` of the fastest median, the fewest registers, then the first in the space
//!   (the same configuration whichever shard's noise was lowest). Confirmation columns from several
//!   shards' partial confirmations would compare against different winners, so they are
//!   cleared then;
//! * the journal is the shards' journals, entries deduplicated, torn lines of killed runs
//!   dropped, after a first line naming the shards' journal headers.

use crate::cluster::shard::{self, Manifest, ShardOutput};

use crate::error::{Error, Result};
use crate::measure::stats::Comparison;
use crate::model::slice::Split;
use crate::model::task::TaskId;
use crate::pipeline::persist::keep_what_this_run_drops;
use crate::pipeline::summary::too_noisy_to_rank;
use crate::store::best::{upsert_best, BestRow, Keep};
use crate::store::files::{print_out, write_atomic};
use crate::store::journal::{Journal, JournalKey};
use crate::store::record::{fastest_roof, set_fracs_of_roof, Kind, Record, RunInfo, Status};
use crate::store::run_csv::{column, read_run_file, run_csv, run_csv_path, RunFile};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// This build of tune as a shard's manifest records it (its `tool_version`), and as the merge
/// compares it: the crate's version, then after a `+` the identity `build.rs` stamps into the
/// binary (`src.` and 16 hex digits, a hash of the files it is built from). The crate's
/// version alone names no code: it stays the same across builds of different code, whose
/// results do not rank together.
///
/// A manifest written without the identity carries the bare version: such shards merge with
/// each other, and never with a shard whose manifest records an identity.
pub const TOOL_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "+", env!("CUDA_AUTOTUNE_BUILD"));

/// `tune merge`: the shards' folders and where the merged results go.
#[derive(Debug, Clone)]
pub struct MergeOptions {
    /// The --out folders of the shards (each holds a shard-K-of-N.json manifest).
    pub dirs: Vec<PathBuf>,
    /// Folder for the merged run CSVs, journals and best.csv.
    pub out: PathBuf,
    /// Merge what is there although shards are missing or unfinished.
    pub partial: bool,
}

/// A manifest and the folder it was found in.
struct Loaded {
    dir: PathBuf,
    path: PathBuf,
    m: Manifest,
}

/// One shard's results for one key.
struct Part<'a> {
    k: usize,
    dir: &'a Path,
    out: &'a ShardOutput,
    run: &'a RunInfo,
    tool_version: &'a str,
    param_names: Vec<String>,
    records: Vec<Record>,
}

/// What merging one key produced, ready to write.
struct MergedKey {
    label: String,
    info: RunInfo,
    param_names: Vec<String>,
    records: Vec<Record>,
    journal: Option<String>,
    best: Option<BestRow>,
    winner: Option<usize>,
    /// Why no best.csv row is written although a winner exists (a partial merge).
    partial: Option<String>,
    /// Why the best.csv row claims no margin: the rounds were too noisy to rank the leaders.
    noisy: Option<String>,
    shards: usize,
    cleared_confirmation: bool,
}

fn usage(text: String) -> Error {
    Error::Usage(format!("merge: {text}"))
}

/// Runs `tune merge`; `Ok(false)` when a shape of the merged sweep has no verified variant
/// (the exit code is then 1, as for a tuning run where nothing verified).
pub fn command(args: &MergeOptions) -> Result<bool> {
    crate::store::files::check_output_folder("--out", &args.out)
        .map_err(|e| usage(e.to_string()))?;
    let loaded = load(&args.dirs)?;
    check_out_dir(args, &loaded)?;
    check_same_sweep(&loaded)?;
    let n = loaded[0].m.n;
    let split = loaded[0].m.split;
    let sweep = loaded[0].m.sweep.clone();
    let by_k = shards_by_index(&loaded, n)?;
    check_gaps(&by_k, n, args.partial)?;
    let parts = read_parts(&by_k, &sweep, loaded.len())?;
    let merged = merge_keys(&parts, &by_k, split, n, sweep.confirm_rounds)?;
    // Everything is checked: write.
    write_merged(args, &merged, by_k.len(), n, split)
}

/// A merged run's key: (position of the shape in the sweep, op, shape, dtype, GPU).
type PartKey = (usize, String, String, String, String);

/// The shards by index; a shard given twice is bad input.
fn shards_by_index(loaded: &[Loaded], n: usize) -> Result<BTreeMap<usize, &Loaded>> {
    let mut by_k: BTreeMap<usize, &Loaded> = BTreeMap::new();
    for l in loaded {
        if let Some(other) = by_k.insert(l.m.k, l) {
            return Err(usage(format!(
                "shard {} of {n} appears twice ({} and {})",
                l.m.k,
                other.path.display(),
                l.path.display()
            )));
        }
    }
    Ok(by_k)
}

/// Missing and unfinished shards: bad input, or a warning with `partial` (`--partial`).
fn check_gaps(by_k: &BTreeMap<usize, &Loaded>, n: usize, partial: bool) -> Result<()> {
    let missing: Vec<String> = (0..n)
        .filter(|k| !by_k.contains_key(k))
        .map(|k| k.to_string())
        .collect();
    let incomplete: Vec<String> = by_k
        .values()
        .filter(|l| !l.m.complete)
        .map(|l| {
            let why =
                l.m.outputs
                    .iter()
                    .find(|o| !o.complete)
                    .map(|o| format!("{}: {}", o.shape, o.error))
                    .unwrap_or_else(|| {
                        format!(
                            "{} of {} shape(s) finished",
                            l.m.outputs.iter().filter(|o| o.complete).count(),
                            l.m.shapes.len()
                        )
                    });
            format!("shard {} ({why})", l.m.k)
        })
        .collect();
    let mut gaps = Vec::new();
    if !missing.is_empty() {
        gaps.push(format!(
            "shard(s) {} of {n} missing (0..{} expected)",
            missing.join(", "),
            n - 1
        ));
    }
    if !incomplete.is_empty() {
        gaps.push(format!("unfinished: {}", incomplete.join("; ")));
    }
    if !gaps.is_empty() {
        if !partial {
            return Err(usage(format!(
                "{}; nothing written (rerun those shards, or merge what is there with --partial)",
                gaps.join("; ")
            )));
        }
        eprintln!("warning: merge --partial: {}", gaps.join("; "));
    }
    Ok(())
}

/// The output folder must not be a shard's, merged or not: the merged run CSVs and journals
/// would replace that shard's own, and a later merge would read them as its results.
fn check_out_dir(args: &MergeOptions, loaded: &[Loaded]) -> Result<()> {
    if let Ok(out) = args.out.canonicalize() {
        if let Some(l) = loaded
            .iter()
            .find(|l| l.dir.canonicalize().is_ok_and(|d| d == out))
        {
            return Err(usage(format!(
                "--out {} is the folder of shard {}; merge into another folder",
                args.out.display(),
                l.m.k
            )));
        }
    }
    if args.out.is_dir() {
        if let Some((s, path)) = shard::manifests_in(&args.out)?.into_iter().next() {
            return Err(usage(format!(
                "--out {} holds the results of shard {s} ({}); merge into a folder that \
                 holds no shard's results",
                args.out.display(),
                path.file_name().unwrap_or_default().to_string_lossy()
            )));
        }
    }
    Ok(())
}

/// Reads every shard's run CSVs, grouped by key; `n_loaded` manifests were read.
fn read_parts<'a>(
    by_k: &BTreeMap<usize, &'a Loaded>,
    sweep: &shard::Sweep,
    n_loaded: usize,
) -> Result<BTreeMap<PartKey, Vec<Part<'a>>>> {
    let mut parts: BTreeMap<(usize, String, String, String, String), Vec<Part>> = BTreeMap::new();
    for l in by_k.values() {
        for o in &l.m.outputs {
            let (Some(run), Some(csv)) = (&o.run, &o.csv) else {
                continue;
            };
            let path = l.dir.join(csv);
            if !path.is_file() {
                return Err(usage(format!(
                    "{} lists {csv}, which is not in {}",
                    l.path.display(),
                    l.dir.display()
                )));
            }
            if let Some(j) = o.journal.as_deref() {
                if is_merged_journal(&l.dir.join(j)) {
                    return Err(usage(format!(
                        "{}: {j} is the journal of a merge, not of shard {}/{}: the folder was \
                         a merge's --out, which replaced the shard's results; run shard {}/{} \
                         again and merge again",
                        l.dir.display(),
                        l.m.k,
                        l.m.n,
                        l.m.k,
                        l.m.n
                    )));
                }
            }
            let RunFile {
                params: param_names,
                records,
                ..
            } = read_checked(&path, run)?;
            let pos = sweep
                .shapes
                .iter()
                .position(|s| *s == run.shape)
                .unwrap_or(usize::MAX);
            parts
                .entry((
                    pos,
                    run.op.clone(),
                    run.shape.clone(),
                    run.dtype.clone(),
                    run.gpu.clone(),
                ))
                .or_default()
                .push(Part {
                    k: l.m.k,
                    dir: &l.dir,
                    out: o,
                    run,
                    tool_version: &l.m.tool_version,
                    param_names,
                    records,
                });
        }
    }
    if parts.is_empty() {
        return Err(usage(format!(
            "the {} shard manifest(s) list no finished run CSV; nothing to merge",
            n_loaded
        )));
    }
    Ok(parts)
}

/// Whether the journal at `path` starts with the header [`merge_journals`] writes.
fn is_merged_journal(path: &Path) -> bool {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut line = String::new();
    if std::io::BufReader::new(file).read_line(&mut line).is_err() {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(&line).is_ok_and(|v| v.get("merged").is_some())
}

/// Merges each key's parts, noting the keys that are not whole: every shard tuned its share
/// of the shape, completely. `confirm_rounds` is the sweep's `--confirm-rounds`.
fn merge_keys(
    parts: &BTreeMap<PartKey, Vec<Part>>,
    by_k: &BTreeMap<usize, &Loaded>,
    split: Split,
    n: usize,
    confirm_rounds: usize,
) -> Result<Vec<MergedKey>> {
    let owner_of = |shape: &str| {
        by_k.values()
            .find(|l| l.m.shapes.iter().any(|s| s == shape))
            .map(|l| l.m.k)
    };
    let mut merged = Vec::new();
    for ((pos, _, shape, _, _), ps) in parts {
        let done: BTreeSet<usize> = ps.iter().filter(|p| p.out.complete).map(|p| p.k).collect();
        let partial = match split {
            Split::Variants => {
                let lacking: Vec<String> = (0..n)
                    .filter(|k| !done.contains(k))
                    .map(|k| k.to_string())
                    .collect();
                (!lacking.is_empty())
                    .then(|| format!("shard(s) {} did not finish it", lacking.join(", ")))
            }
            Split::Shapes => match owner_of(shape) {
                Some(k) if done.contains(&k) => None,
                _ => Some("its shard did not finish it".to_string()),
            },
        };
        if split == Split::Variants {
            check_shares(ps, n, *pos, partial.is_none())?;
        }
        merged.push(merge_key(ps, partial, confirm_rounds)?);
    }
    Ok(merged)
}

/// The number of the positions `0..live` that shard `k` of `n` owns by variants for the
/// shape at `pos` in the sweep: position p is shard (p + pos) mod n's
/// ([`crate::model::slice::Slice::owns`]).
fn share(live: usize, n: usize, pos: usize, k: usize) -> usize {
    let first = (k + n - pos % n) % n;
    if first >= live {
        0
    } else {
        (live - 1 - first) / n + 1
    }
}

/// Split by variants, each live variant of a shape is one shard's, and each shard's run CSV
/// has a row for every variant of its share (measured, failed or left out by the search).
/// Refuses the parts of a key (in shard order, the shape at `pos` in the sweep) where a
/// variant is in two shards' run CSVs, or, when every shard finished the shape (`whole`), a
/// shard holds fewer variants than its share of their union: a folder that holds rows not
/// its shard's own (another run's, or a merge's) or lost some.
fn check_shares(ps: &[Part], n: usize, pos: usize, whole: bool) -> Result<()> {
    let label = |p: &Part| format!("{} {} on {}", p.run.op, p.run.shape, p.run.gpu);
    let csv = |p: &Part| p.dir.join(p.out.csv.as_deref().unwrap_or_default());
    let mut holder: HashMap<&str, &Part> = HashMap::new();
    let mut held: BTreeMap<usize, usize> = BTreeMap::new();
    for p in ps {
        let live = p
            .records
            .iter()
            .filter(|r| r.kind == Kind::Variant && r.status != Status::Pruned);
        for r in live {
            match holder.insert(&r.name, p) {
                Some(other) if other.k != p.k => {
                    return Err(usage(format!(
                        "{}: variant {} is in the run CSVs of shard {} ({}) and shard {} ({}), \
                         but each variant is one shard's: one of them holds rows not its own \
                         (was its folder a merge's --out?); run that shard again and merge again",
                        label(p),
                        r.name,
                        other.k,
                        csv(other).display(),
                        p.k,
                        csv(p).display()
                    )));
                }
                Some(_) => {}
                None => *held.entry(p.k).or_default() += 1,
            }
        }
    }
    if !whole || pos == usize::MAX {
        return Ok(());
    }
    let live = holder.len();
    for p in ps {
        let (have, want) = (
            held.get(&p.k).copied().unwrap_or(0),
            share(live, n, pos, p.k),
        );
        if have < want {
            return Err(usage(format!(
                "{}: the run CSV of shard {} ({}) has {have} variants where its share of the \
                 {live} the shards hold is {want}: it is not that shard's whole output; run \
                 shard {}/{n} again and merge again",
                label(p),
                p.k,
                csv(p).display(),
                p.k
            )));
        }
    }
    Ok(())
}

/// Writes the merged run CSVs, journals and best.csv rows of `n_shards` of the `n` shards,
/// saying what each holds. `Ok(false)` when a whole key has no verified variant.
fn write_merged(
    args: &MergeOptions,
    merged: &[MergedKey],
    n_shards: usize,
    n: usize,
    split: Split,
) -> Result<bool> {
    let best_path = crate::store::best::best_path(&args.out);
    let mut rows = 0;
    let mut all_verified = true;
    print_out(format_args!(
        "merged {} of {n} shard(s) (split by {}) into {}:\n",
        n_shards,
        match split {
            Split::Variants => "variants",
            Split::Shapes => "shapes",
        },
        args.out.display()
    ));
    for m in merged {
        // A run CSV or journal already there is kept as .bak when this one drops what it
        // holds, as a tuning run keeps its run CSV.
        let csv_path = run_csv_path(&args.out, &m.info);
        keep_what_this_run_drops(&csv_path, &m.records)?;
        write_atomic(&csv_path, &run_csv(&m.info, &m.param_names, &m.records)?)?;
        if let Some(j) = &m.journal {
            let path = Journal::path_for(&args.out, &m.info);
            keep_journal_entries_dropped(&path, j)?;
            write_atomic(&path, j.as_bytes())?;
        }
        let measured = m
            .records
            .iter()
            .filter(|r| r.kind == Kind::Variant && r.status != Status::Pruned)
            .count();
        let ok = m
            .records
            .iter()
            .filter(|r| r.kind == Kind::Variant && r.status == Status::Ok)
            .count();
        let best = match m.winner {
            Some(w) => {
                let r = &m.records[w];
                let roof = r
                    .frac_of_roof
                    .map(|f| format!(" ({:.1} % of {})", f * 100.0, m.info.roof))
                    .unwrap_or_default();
                format!(
                    "best {} {} {:.1} {}{roof}",
                    r.name,
                    r.label(),
                    r.throughput.unwrap_or_default(),
                    m.info.unit
                )
            }
            None => {
                all_verified &= m.partial.is_some();
                "no variant verified".to_string()
            }
        };
        print_out(format_args!(
            "  {}: {measured} variants measured ({ok} verified) in {} shard(s), {best}\n",
            m.label, m.shards
        ));
        if m.cleared_confirmation {
            print_out(format_args!(
                "    (the shards' partial confirmations were dropped: they compare against \
                 different winners)\n"
            ));
        }
        if let Some(why) = &m.partial {
            print_out(format_args!("    partial: {why}; no best.csv row\n"));
        }
        if let Some(why) = &m.noisy {
            print_out(format_args!("    no margin in best.csv: {why}\n"));
        }
        if let Some(row) = &m.best {
            upsert_best(&best_path, row.clone(), Keep::Newest)?;
            rows += 1;
        }
    }
    print_out(format_args!(
        "{} run CSV(s) in {}; {rows} row(s) upserted into {}\n",
        merged.len(),
        args.out.display(),
        best_path.display()
    ));
    Ok(all_verified)
}

/// Keeps the journal at `path` as `NAME.bak` (or `.bak.N`:
/// [`crate::store::files::backup_path`]) before `new` replaces it, when it holds an entry
/// `new` does not or cannot be read: the rule of [`keep_what_this_run_drops`] for the run CSV
/// beside it. Torn lines count as nothing (no run
/// reads them); merging the same shards again writes the same journal and keeps no copy.
fn keep_journal_entries_dropped(path: &Path, new: &str) -> Result<()> {
    if !path.is_file() {
        return Ok(());
    }
    let dropped = match std::fs::read_to_string(path) {
        Ok(old) => {
            let now: HashSet<&str> = new.lines().skip(1).collect();
            Some(
                old.lines()
                    .skip(1)
                    .filter(|l| {
                        !now.contains(l) && serde_json::from_str::<serde_json::Value>(l).is_ok()
                    })
                    .count(),
            )
        }
        // Unreadable: whatever it holds is not this merge's to throw away.
        Err(_) => None,
    };
    crate::store::files::keep_dropped(path, dropped, "entries this merge does not")
}

/// Reads the manifests of every folder (a folder given twice counts once).
fn load(dirs: &[PathBuf]) -> Result<Vec<Loaded>> {
    let mut seen = BTreeSet::new();
    let mut loaded = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            return Err(usage(format!("{} is not a folder", dir.display())));
        }
        if !seen.insert(dir.canonicalize().unwrap_or_else(|_| dir.clone())) {
            continue;
        }
        let found = shard::manifests_in(dir)?;
        if found.is_empty() {
            let empty = std::fs::read_dir(dir)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            return Err(usage(format!(
                "{} {}: it holds no shard manifest (shard-K-of-N.json); give the --out \
                 folders of `tune --shard K/N` runs",
                dir.display(),
                if empty {
                    "is empty"
                } else {
                    "is not a shard's output folder"
                }
            )));
        }
        for (s, path) in found {
            let m = Manifest::read(&path)?;
            if (m.k, m.n) != (s.k, s.n) {
                return Err(usage(format!(
                    "{} holds the manifest of shard {}/{}; was it renamed?",
                    path.display(),
                    m.k,
                    m.n
                )));
            }
            if m.format != shard::MANIFEST_FORMAT {
                return Err(usage(format!(
                    "{}: manifest format {} (this tune reads {})",
                    path.display(),
                    m.format,
                    shard::MANIFEST_FORMAT
                )));
            }
            loaded.push(Loaded {
                dir: dir.clone(),
                path,
                m,
            });
        }
    }
    Ok(loaded)
}

/// Refuses shards that do not rank together: other sweeps, code, cache states, GPU models or
/// NVRTC versions. A different driver only warns.
fn check_same_sweep(loaded: &[Loaded]) -> Result<()> {
    let a = &loaded[0];
    for b in &loaded[1..] {
        let (pa, pb) = (a.path.display(), b.path.display());
        if a.m.n != b.m.n {
            return Err(usage(format!(
                "{pa} is one of {} shards but {pb} one of {}: merge the shards of one sweep",
                a.m.n, b.m.n
            )));
        }
        if a.m.tool_version != b.m.tool_version {
            return Err(usage(format!(
                "{pa} was written by tune {} but {pb} by tune {}: results of different code \
                 versions do not rank together; run every shard with one build of tune",
                a.m.tool_version, b.m.tool_version
            )));
        }
        if a.m.sweep.op_fingerprint != b.m.sweep.op_fingerprint {
            return Err(usage(format!(
                "{pa} and {pb} tuned different code for op {} (its spec or templates differ): \
                 results of different code versions do not rank together",
                a.m.sweep.op
            )));
        }
        if a.m.sweep.cache != b.m.sweep.cache {
            return Err(usage(format!(
                "{pa} was timed with --cache {} but {pb} with --cache {}: times under \
                 different cache states do not rank together",
                a.m.sweep.cache, b.m.sweep.cache
            )));
        }
        if a.m.sweep != b.m.sweep || a.m.split != b.m.split {
            let (va, vb) = (
                serde_json::to_value(&a.m.sweep).expect("serializable"),
                serde_json::to_value(&b.m.sweep).expect("serializable"),
            );
            // A field either side may leave out (an unset --budget) reads as null.
            let keys = [&va, &vb].into_iter().filter_map(|v| v.as_object());
            let field = keys
                .flat_map(|o| o.keys())
                .find(|k| va.get(k.as_str()) != vb.get(k.as_str()))
                .map(|k| format!("{k}: {} vs {}", va[k.as_str()], vb[k.as_str()]))
                .unwrap_or_else(|| "split".into());
            return Err(usage(format!(
                "{pa} and {pb} are shards of different sweeps ({field})"
            )));
        }
    }
    // GPU models and compilers, over every shape every shard measured.
    let runs: Vec<(usize, &RunInfo)> = loaded
        .iter()
        .flat_map(|l| {
            l.m.outputs
                .iter()
                .filter_map(|o| o.run.as_ref().map(|r| (l.m.k, r)))
        })
        .collect();
    let differ = |what: &dyn Fn(&RunInfo) -> &str| {
        let mut by: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
        for (k, r) in &runs {
            by.entry(what(r)).or_default().insert(*k);
        }
        (by.len() > 1).then(|| {
            by.iter()
                .map(|(v, ks)| {
                    let ks: Vec<String> = ks.iter().map(|k| k.to_string()).collect();
                    format!("{v} (shard {})", ks.join(", "))
                })
                .collect::<Vec<_>>()
                .join(" vs ")
        })
    };
    if let Some(list) = differ(&|r| r.gpu.as_str()) {
        return Err(usage(format!(
            "the shards ran on different GPU models: {list}; one ranking needs one GPU model \
             (pin the shards to one model, then merge each model's shards separately)"
        )));
    }
    if let Some(list) = differ(&|r| r.nvrtc.as_str()) {
        return Err(usage(format!(
            "the shards compiled with different NVRTC versions: {list}; results of different \
             code versions do not rank together"
        )));
    }
    if let Some(list) = differ(&|r| r.driver.as_str()) {
        eprintln!("warning: merge: the shards ran under different drivers: {list}");
    }
    Ok(())
}

/// Reads a run CSV and checks that its rows are of the run its manifest says (op, shape, GPU,
/// cache state).
fn read_checked(path: &Path, run: &RunInfo) -> Result<RunFile> {
    let file = read_run_file(path)?;
    if file.records.is_empty() {
        return Ok(file);
    }
    let l = &file.labels;
    let pairs = [
        (column::OP, &l.op, &run.op),
        (column::SHAPE, &l.shape, &run.shape),
        (column::GPU, &l.gpu, &run.gpu),
        (column::CACHE, &l.cache, &run.cache),
    ];
    for (name, got, value) in pairs {
        if got != value {
            return Err(usage(format!(
                "{}: its rows say {name} '{got}' but the shard's manifest says '{value}'",
                path.display()
            )));
        }
    }
    Ok(file)
}

/// The index in the space of a variant named `vNNNN`.
fn variant_index(name: &str) -> Option<usize> {
    name.strip_prefix('v')?.parse().ok()
}

fn median(r: &Record) -> f64 {
    r.stats.map(|s| s.median_ms).unwrap_or(f64::INFINITY)
}

/// Merges the parts of one key (in shard order); `confirm_rounds` is the sweep's.
fn merge_key(parts: &[Part], partial: Option<String>, confirm_rounds: usize) -> Result<MergedKey> {
    let first = &parts[0];
    // Rows, and the part each came from.
    let mut baselines: Vec<(Record, usize)> = Vec::new();
    let mut variants: BTreeMap<(usize, String), (Record, usize)> = BTreeMap::new();
    for (pi, p) in parts.iter().enumerate() {
        if p.param_names != first.param_names {
            return Err(usage(format!(
                "shard {} and shard {} have different parameter columns for {} {}",
                first.k, p.k, p.run.op, p.run.shape
            )));
        }
        for r in &p.records {
            if r.kind == Kind::Baseline {
                match baselines.iter_mut().find(|(b, _)| b.name == r.name) {
                    None => baselines.push((r.clone(), pi)),
                    Some(slot) => {
                        let faster = r.status == Status::Ok
                            && (slot.0.status != Status::Ok || median(r) < median(&slot.0));
                        if faster {
                            *slot = (r.clone(), pi);
                        }
                    }
                }
            } else {
                let key = (variant_index(&r.name).unwrap_or(usize::MAX), r.name.clone());
                match variants.get(&key) {
                    Some((had, _)) if had.status != Status::Pruned => {}
                    Some(_) if r.status == Status::Pruned => {}
                    _ => {
                        variants.insert(key, (r.clone(), pi));
                    }
                }
            }
        }
    }
    let n_baselines = baselines.len();
    let (mut records, from): (Vec<Record>, Vec<usize>) =
        baselines.into_iter().chain(variants.into_values()).unzip();

    // The roof: the fastest verified baseline among those some shard used as its roof.
    let roof_names: BTreeSet<&str> = parts
        .iter()
        .map(|p| p.run.roof.as_str())
        .filter(|r| !r.is_empty())
        .collect();
    let roof = fastest_roof(
        records[..n_baselines]
            .iter()
            .filter(|r| roof_names.contains(r.name.as_str())),
    );

    // The winner.
    let verified = |r: &Record| r.kind == Kind::Variant && r.status == Status::Ok;
    let flagged: Vec<usize> = (0..records.len())
        .filter(|&i| verified(&records[i]) && records[i].confirm.is_some_and(|c| c.winner))
        .collect();
    let mut cleared_confirmation = false;
    let winner = if let [w] = flagged.as_slice() {
        Some(*w)
    } else {
        if records.iter().any(|r| r.confirm.is_some()) {
            cleared_confirmation = true;
            for r in &mut records {
                r.confirm = None;
            }
        }
        // The tuner's tie rule over medians: every variant within TIE_WITHIN of the fastest
        // is tied with it, and the fewest registers, then the first in the space, wins.
        let fastest = (0..records.len())
            .filter(|&i| verified(&records[i]))
            .map(|i| median(&records[i]))
            .min_by(f64::total_cmp);
        fastest.and_then(|fastest| {
            (0..records.len())
                .filter(|&i| {
                    verified(&records[i])
                        && median(&records[i])
                            <= fastest * (1.0 + crate::pipeline::options::TIE_WITHIN)
                })
                .min_by_key(|&i| (records[i].registers.unwrap_or(i32::MAX), i))
        })
    };

    // Every fraction of the roof, once the confirmation is kept or cleared: a leader keeps
    // the ratio over the interleaved rounds its roof ran in too.
    match &roof {
        Some(roof) => set_fracs_of_roof(&mut records, roof),
        None => records.iter_mut().for_each(|r| r.frac_of_roof = None),
    }
    let mut info = first.run.clone();
    info.roof = roof.map(|r| r.name).unwrap_or_default();
    let journal = merge_journals(parts);
    let (best, noisy) = match (winner, &partial) {
        (Some(w), None) => {
            let noisy = too_noisy(&records, w, confirm_rounds);
            let row = best_row(&records, w, &parts[from[w]], &info, noisy.is_some());
            (Some(row), noisy)
        }
        _ => (None, None),
    };
    let shards = parts.iter().map(|p| p.k).collect::<BTreeSet<_>>().len();
    Ok(MergedKey {
        label: format!("{} {} on {}", info.op, info.shape, info.gpu),
        info,
        param_names: first.param_names.clone(),
        records,
        journal,
        best,
        winner,
        partial,
        noisy,
        shards,
        cleared_confirmation,
    })
}

/// The leaders re-timed with winner `w` other than it: variants (the roof baselines ran in
/// the rounds too, without competing).
fn is_leader(records: &[Record], w: usize, i: usize) -> bool {
    i != w && records[i].kind == Kind::Variant
}

/// The runner-up of winner `w`: the leader fastest over the interleaved rounds (ties: the
/// faster first timing, then the first in the space).
fn runner_up(records: &[Record], w: usize) -> Option<usize> {
    (0..records.len())
        .filter(|&i| is_leader(records, w, i) && records[i].confirm.is_some())
        .min_by(|&a, &b| {
            let c = |i: usize| records[i].confirm.map(|c| c.median_ms).unwrap_or_default();
            c(a).total_cmp(&c(b))
                .then(median(&records[a]).total_cmp(&median(&records[b])))
                .then(a.cmp(&b))
        })
}

/// Why the interleaved rounds of winner `w` are too noisy to rank the leaders, by the rule a
/// single run's best.csv follows ([`too_noisy_to_rank`]); `None` without a runner-up, where
/// there is no margin to claim. The run CSV keeps no spread of the winner over the rounds,
/// which the rule reads only without a runner-up: it is passed as NaN, which the rule would
/// count as too noisy.
fn too_noisy(records: &[Record], w: usize, rounds: usize) -> Option<String> {
    let c = records[runner_up(records, w)?].confirm?;
    let vs_winner = Comparison {
        slower_pct: c.vs_winner_pct,
        ci_low_pct: c.ci_low_pct,
        ci_high_pct: c.ci_high_pct,
    };
    too_noisy_to_rank(f64::NAN, Some(&vs_winner), rounds)
}

/// The best.csv row of a merged key, as the tuner writes it (runner-up and tie from the
/// interleaved confirmation, when there is one, and the margin unless its rounds were
/// `noisy`; time stamp and GPU from the winner's shard).
fn best_row(records: &[Record], w: usize, part: &Part, info: &RunInfo, noisy: bool) -> BestRow {
    let r = &records[w];
    let params = |r: &Record| {
        r.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";")
    };
    let leader = |i: usize| is_leader(records, w, i);
    let runner_up = runner_up(records, w);
    let margin = runner_up
        .and_then(|i| records[i].confirm)
        .filter(|_| !noisy);
    BestRow {
        op: info.op.clone(),
        shape: info.shape.clone(),
        dtype: info.dtype.clone(),
        gpu: info.gpu.clone(),
        compute_capability: part.run.compute_capability.clone(),
        params: params(r),
        median_ms: median(r),
        throughput: r.throughput.unwrap_or_default(),
        unit: info.unit.clone(),
        frac_of_roof: r.frac_of_roof,
        roof: info.roof.clone(),
        cache: info.cache.clone(),
        reps: part.run.reps,
        // The crate's version, as a single run's row has it (without the build identity).
        tool_version: part
            .tool_version
            .split_once('+')
            .map_or(part.tool_version, |(version, _)| version)
            .to_string(),
        driver: part.run.driver.clone(),
        nvrtc: part.run.nvrtc.clone(),
        tuned_at: part.out.tuned_at.clone(),
        gpu_uuid: part.out.gpu_uuid.clone(),
        num_sms: part.out.num_sms,
        arch: part.out.arch.clone(),
        source_hash: variant_index(&r.name)
            .and_then(|i| source_hash(part, i))
            .unwrap_or_default(),
        runner_up: runner_up.map(|i| params(&records[i])).unwrap_or_default(),
        margin_pct: margin.map(|c| c.vs_winner_pct),
        margin_ci_low_pct: margin.map(|c| c.ci_low_pct),
        margin_ci_high_pct: margin.map(|c| c.ci_high_pct),
        tie: (0..records.len()).any(|i| leader(i) && records[i].confirm.is_some_and(|c| c.tied)),
        tied_with: (0..records.len())
            .filter(|&i| leader(i) && records[i].confirm.is_some_and(|c| c.tied))
            .map(|i| params(&records[i]))
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

/// The source hash of variant `index` from its shard's journal: the source the key of its
/// task ([`TaskId::variant`], as the tuner numbers them) names.
fn source_hash(part: &Part, index: usize) -> Option<String> {
    let text = std::fs::read_to_string(part.dir.join(part.out.journal.as_ref()?)).ok()?;
    text.lines().skip(1).find_map(|line| {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        (v["result"]["id"].as_u64()? == TaskId::variant(index).number() as u64)
            .then(|| JournalKey::parse(v["key"].as_str()?).map(|k| k.source().to_string()))
            .flatten()
    })
}

/// The shards' journals as one: a first line `{"merged":[<each shard's header>]}`, then every
/// entry once, in shard order. Lines that are not JSON (the torn last line of a killed run)
/// are dropped. `None` when no shard has a journal.
fn merge_journals(parts: &[Part]) -> Option<String> {
    let mut headers = Vec::new();
    let mut entries: Vec<String> = Vec::new();
    let mut seen: HashMap<String, ()> = HashMap::new();
    for p in parts {
        let Some(name) = &p.out.journal else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(p.dir.join(name)) else {
            continue;
        };
        let mut lines = text.lines();
        let Some(header) = lines
            .next()
            .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        else {
            continue;
        };
        headers.push(header);
        for line in lines {
            if serde_json::from_str::<serde_json::Value>(line).is_ok()
                && seen.insert(line.to_string(), ()).is_none()
            {
                entries.push(line.to_string());
            }
        }
    }
    if headers.is_empty() {
        return None;
    }
    let mut out =
        serde_json::to_string(&serde_json::json!({ "merged": headers })).expect("serializable");
    out.push('\n');
    for e in entries {
        out.push_str(&e);
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::share;
    use crate::model::slice::{Shard, Slice, Split};

    #[test]
    fn a_shards_share_is_the_number_of_positions_it_owns() {
        for n in 1..=5 {
            for pos in 0..7 {
                for live in 0..13 {
                    for k in 0..n {
                        let slice = Slice {
                            shard: Shard { k, n },
                            split: Split::Variants,
                            shape_pos: pos,
                        };
                        let owned = (0..live).filter(|&p| slice.owns(p)).count();
                        assert_eq!(share(live, n, pos, k), owned, "{k}/{n} pos {pos}");
                    }
                }
            }
        }
    }
}
