//! The pipeline's stages and the worker isolation, end to end through the real `tune` binary,
//! on the simulated device (src/isolate/simulated.rs): `CUDA_AUTOTUNE_SIMULATE` names a model
//! file that plants times, registers, noise, throttled clock readings, wrong results, faults
//! and hangs by configuration, and the test-only op `sim` (tests/fixtures/sim: X=1..4 x Y=1..3,
//! `--param BROKEN=0,1` adds sources that do not compile) gives it real kernel images.
//!
//! Covered: rounds (exhaustive, and searches spending a variant budget over several rounds),
//! ranking against the roof and persisting (run CSV, best.csv), settling (throttled results
//! flagged or re-timed), confirmation (ties, the tie rule, a clear margin), failures (each
//! costs its own record; in-process a fault ends the run), Ctrl-C and `--resume`, time
//! budgets, the compile time limit, heavy compiles heard last, and sweeps over shapes and
//! simulated GPUs.
//!
//! No test needs a GPU; they need NVRTC (the kernels are compiled for real) and fail, saying
//! what to do, when it cannot be loaded: run them through scripts/test.sh, or with
//! `export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)`. The cubin cache is shared by the runs of
//! this file (under cargo's test scratch folder), so each source compiles once.

use cuda_autotune::isolate::simulated::Model;
use cuda_autotune::model::task::TaskId;
use cuda_autotune::pipeline::options::REMEASURE_PAUSE;
use cuda_autotune::pipeline::search::SEARCH_BATCH;
use cuda_autotune::store::best::{read_best, BestRow, Keep};
use cuda_autotune::store::record::{Kind, Record, Status};
use cuda_autotune::store::run_csv::read_run_csv;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tempfile::TempDir;

mod common;
use common::{
    count_before, interrupt_after_first_cubin, interrupt_when, repo, signal_when, text, tmp,
    tune_exe,
};

/// The shape every single-shape run tunes.
const SHAPE: &str = "64x64";
/// Bytes one transpose of the shape moves (the fixture's metric: 2 * ROWS * COLS * 4).
const BYTES: f64 = 2.0 * 64.0 * 64.0 * 4.0;
/// The run CSV's file name part after the shape: the simulated device's name, as a slug.
const GPU_SLUG: &str = "simulated-gpu";

/// The cubin cache the runs of this file share: every run compiles the same few sources, and
/// a source compiled once is read from here by every later run (of this process or the next).
fn shared_cache() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("simulated-cubin-cache");
        std::fs::create_dir_all(&dir).expect("a cubin cache folder");
        dir
    })
}

/// Every label of the fixture's default space, in space order (X outer, Y inner).
fn default_labels() -> Vec<String> {
    (1..=4)
        .flat_map(|x| (1..=3).map(move |y| format!("X={x} Y={y} BROKEN=0")))
        .collect()
}

/// A simulated machine (its model file) and a folder for one test's runs.
struct Sim {
    tmp: TempDir,
    cache: PathBuf,
    /// The `--templates` folder that holds the op `sim`.
    templates: PathBuf,
}

/// What a finished run printed and returned.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Sim {
    /// A machine described by `model` (a simulated-device model, as JSON).
    fn new(model: Value) -> Sim {
        let sim = Sim {
            tmp: tmp(),
            cache: shared_cache().to_path_buf(),
            templates: repo("tests/fixtures/sim"),
        };
        sim.set_model(&model);
        sim
    }

    /// Replaces the model: later runs see the new one.
    fn set_model(&self, model: &Value) {
        std::fs::write(self.model_path(), model.to_string()).expect("the model file");
    }

    fn model_path(&self) -> PathBuf {
        self.tmp.path().join("model.json")
    }

    /// The `--out` folder.
    fn out(&self) -> PathBuf {
        self.tmp.path().join("out")
    }

    /// `tune` on the simulated device, with this machine's cubin cache, in the test's folder.
    fn tune(&self) -> Command {
        let mut cmd = Command::new(tune_exe());
        cmd.env("CUDA_AUTOTUNE_SIMULATE", self.model_path())
            .env("CUDA_AUTOTUNE_CACHE", &self.cache)
            .env_remove("XDG_CACHE_HOME")
            .current_dir(self.tmp.path());
        cmd
    }

    /// `tune --templates TEMPLATES --op sim ARGS --out OUT` on the simulated device.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.tune();
        cmd.arg("--templates")
            .arg(&self.templates)
            .args(["--op", "sim"])
            .args(args)
            .arg("--out")
            .arg(self.out());
        cmd
    }

    /// Runs `tune` with `args` to its end.
    fn run(&self, args: &[&str]) -> Ran {
        ran(self.command(args).output().expect("tune runs"))
    }

    /// Runs `tune check --templates TEMPLATES --db DB` to its end.
    fn check(&self, db: &Path) -> Ran {
        let mut cmd = self.tune();
        cmd.arg("check")
            .arg("--templates")
            .arg(&self.templates)
            .arg("--db")
            .arg(db);
        ran(cmd.output().expect("tune check runs"))
    }

    /// Starts `tune` with `args`, its output piped.
    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tune starts")
    }

    fn csv_path(&self, shape: &str) -> PathBuf {
        self.out().join(format!("sim_{shape}_{GPU_SLUG}.csv"))
    }

    /// The run CSV of `shape`.
    fn csv(&self, shape: &str) -> Vec<Record> {
        let path = self.csv_path(shape);
        read_run_csv(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn journal_path(&self, shape: &str) -> PathBuf {
        self.out()
            .join(format!("sim_{shape}_{GPU_SLUG}.journal.jsonl"))
    }

    /// The journal's entries (`{"key", "result"}`), without its header line; none when there
    /// is no journal yet. A line still being written is left out.
    fn journal(&self, shape: &str) -> Vec<Value> {
        let Ok(body) = std::fs::read_to_string(self.journal_path(shape)) else {
            return Vec::new();
        };
        body.lines()
            .skip(1)
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The rows of `--out`'s best.csv (none when it was not written).
    fn best(&self) -> Vec<BestRow> {
        read_best(&self.out().join("best.csv")).expect("best.csv reads")
    }
}

impl Ran {
    /// Fails with what to do when NVRTC could not be loaded, and on a panic.
    fn check_tools(&self) {
        assert!(
            !self.stderr.contains("NVRTC is not available"),
            "NVRTC could not be loaded: run the tests with scripts/test.sh (or `export \
             LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)` first).\n{}",
            self.stderr
        );
        assert!(
            !self.stderr.contains("panicked"),
            "tune panicked:\n{}",
            self.stderr
        );
    }

    /// Asserts the exit code, showing the output otherwise.
    fn expect_code(&self, code: i32) -> &Ran {
        assert_eq!(
            self.code,
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts that the line starting with `prefix` begins with `start`: a summary line's
    /// content, with the whole stdout as the failure message.
    #[track_caller]
    fn expect_line(&self, prefix: &str, start: &str) -> &Ran {
        assert!(self.line(prefix).starts_with(start), "{}", self.stdout);
        self
    }

    /// Asserts that the line starting with `prefix` holds `part`, with the whole stdout as the
    /// failure message.
    #[track_caller]
    fn expect_line_has(&self, prefix: &str, part: &str) -> &Ran {
        assert!(self.line(prefix).contains(part), "{}", self.stdout);
        self
    }

    /// The stdout line that starts with `prefix`.
    fn line(&self, prefix: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting with '{prefix}' in:\n{}", self.stdout))
    }
}

/// Waits for `child` and returns what it printed.
fn finish(child: Child) -> Ran {
    ran(child.wait_with_output().expect("tune ends"))
}

/// What a finished `tune` printed, checked for a missing NVRTC or a panic.
fn ran(out: std::process::Output) -> Ran {
    let ran = Ran {
        code: out.status.code(),
        stdout: text(&out.stdout),
        stderr: text(&out.stderr),
    };
    ran.check_tools();
    ran
}

fn variants(records: &[Record]) -> impl Iterator<Item = &Record> {
    records.iter().filter(|r| r.kind == Kind::Variant)
}

/// How many variant records have `status`.
fn count(records: &[Record], status: Status) -> usize {
    variants(records).filter(|r| r.status == status).count()
}

/// The record labelled `label` (`X=1 Y=2 BROKEN=0`, or a baseline's name).
fn record<'a>(records: &'a [Record], label: &str) -> &'a Record {
    records
        .iter()
        .find(|r| r.label() == label)
        .unwrap_or_else(|| panic!("no record {label}"))
}

fn median(r: &Record) -> f64 {
    r.stats
        .unwrap_or_else(|| panic!("{} has no time", r.label()))
        .median_ms
}

/// The verified variant with the lowest median.
fn fastest(records: &[Record]) -> &Record {
    variants(records)
        .filter(|r| r.status == Status::Ok)
        .min_by(|a, b| median(a).total_cmp(&median(b)))
        .expect("a verified variant")
}

/// `a` and `b` equal to within a relative `tol`.
fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(f64::MIN_POSITIVE)
}

/// The task id of a variant's record (its name is `v` and its index in the space).
fn task_id(r: &Record) -> u64 {
    let index: usize = r.name[1..].parse().expect("a variant name");
    TaskId::variant(index).number() as u64
}

/// The task ids the journal holds results for, in the order they finished.
fn journal_ids(entries: &[Value]) -> Vec<u64> {
    entries
        .iter()
        .map(|e| e["result"]["id"].as_u64().expect("a task id"))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Rounds
// ---------------------------------------------------------------------------------------

/// Without a search every configuration is measured exactly once, in one job with the copy
/// baseline: one journal entry each, every record verified, the summary's counts those of the
/// CSV.
#[test]
fn an_exhaustive_run_measures_every_configuration_once() {
    let sim = Sim::new(json!({"noise_pct": 2, "baselines": {"copy": 0.04}}));
    let ran = sim.run(&[
        "--shape",
        SHAPE,
        "--strategy",
        "exhaustive",
        "--confirm-rounds",
        "0",
    ]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    let mut labels: Vec<String> = variants(&records).map(Record::label).collect();
    labels.sort();
    let mut expected = default_labels();
    expected.sort();
    assert_eq!(labels, expected, "one row per configuration");
    assert_eq!(count(&records, Status::Ok), 12);
    assert_eq!(record(&records, "copy").status, Status::Ok);
    for r in variants(&records) {
        let samples = r.stats.expect("timed").samples;
        assert!(
            [2, 5, 10, 20, 30].contains(&samples),
            "{}: {samples} samples: the end of a stage (probe 2 or 5, settled at 10 or 20, or \
             all 30 reps)",
            r.label()
        );
    }
    let entries = sim.journal(SHAPE);
    let mut ids = journal_ids(&entries);
    assert_eq!(ids.len(), 13, "the copy and 12 variants, each once");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 13, "no task measured twice");
    assert!(entries.iter().all(|e| e["result"]["stats"].is_object()));
    ran.expect_line_has(
        "Top 10 of 12 verified configurations",
        "(12 in the space: 0 failed, 0 pruned)",
    );
    assert!(!ran.stdout.contains("Search:"), "no search: {}", ran.stdout);
}

/// Launches under 0.1 ms are timed in batches (CUDA graphs on a GPU): the variants of a 4 µs
/// model take their samples as means over batches of about 25 launches, the 150 µs copy launch
/// by launch, and averaging 25 launches of ±10 % noise narrows the spread the CSV reports to a
/// fraction of the copy's. The summary says so below its table.
#[test]
fn microsecond_kernels_are_timed_in_batches() {
    let sim = Sim::new(json!({
        "base_ms": 0.004,
        "spread": 0.0,
        "noise_pct": 10,
        "baselines": {"copy": 0.15}
    }));
    let ran = sim.run(&[
        "--shape",
        SHAPE,
        "--strategy",
        "exhaustive",
        "--confirm-rounds",
        "8",
    ]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    let copy = record(&records, "copy").stats.expect("timed");
    assert_eq!(copy.batch, 1, "a 150 µs launch is timed on its own");
    for r in variants(&records) {
        let st = r.stats.expect("timed");
        assert!(
            (23..=28).contains(&st.batch),
            "{}: 0.1 ms / (4 µs ± 10 %) launches a batch, not {}",
            r.label(),
            st.batch
        );
        assert!(
            close(st.median_ms, 0.004, 0.02),
            "{}: the per-launch time, {} ms",
            r.label(),
            st.median_ms
        );
        assert!(
            st.spread_pct < copy.spread_pct / 2.0,
            "{}: spread over batches {:.2} %, the copy's {:.2} %",
            r.label(),
            st.spread_pct,
            copy.spread_pct
        );
    }
    assert!(
        ran.stdout.contains("timed in CUDA-graph batches of 2"),
        "{}",
        ran.stdout
    );
}

/// Checks a search run that measured `budget` of `space` configurations: the CSV's statuses
/// add up to the space, exactly the budget was measured (and journaled), the rest say which
/// search left them out, and the summary says so.
fn assert_spent(sim: &Sim, ran: &Ran, strategy: &str, budget: usize, space: usize) {
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    let (ok, failed, skipped, not_run) = (
        count(&records, Status::Ok),
        count(&records, Status::Failed),
        count(&records, Status::Skipped),
        count(&records, Status::NotRun),
    );
    assert_eq!(
        ok + failed + skipped + not_run,
        space,
        "one row per configuration"
    );
    assert_eq!(
        (ok, failed, not_run),
        (budget, 0, 0),
        "the budget, measured"
    );
    let why = format!(
        "not measured: --strategy {strategy} (budget {budget} variants) did not propose it"
    );
    for r in variants(&records).filter(|r| r.status == Status::Skipped) {
        assert_eq!(r.error, why, "{}", r.label());
    }
    assert_eq!(
        sim.journal(SHAPE).len(),
        budget + 1,
        "the budget and the copy baseline journaled"
    );
    let search = ran.line("Search: ");
    assert!(
        search.starts_with(&format!(
            "Search: {strategy}: {budget} of {space} valid configurations measured (budget {budget} variants"
        )),
        "{search}"
    );
    let top = ran.line("Top ");
    assert!(
        top.contains(&format!(
            "of {budget} verified configurations ({space} in the space: 0 failed, 0 pruned, {} not searched)",
            space - budget
        )),
        "{top}"
    );
}

/// A random search of 6 of the 12 configurations: one round of 6, nothing more.
#[test]
fn a_random_search_measures_exactly_its_budget() {
    let sim = Sim::new(json!({"baselines": {"copy": 0.04}}));
    let ran = sim.run(&[
        "--shape",
        SHAPE,
        "--strategy",
        "random",
        "--budget",
        "6",
        "--confirm-rounds",
        "0",
    ]);
    assert_spent(&sim, &ran, "random", 6, 12);
}

/// The arguments of a search over a 48-configuration space (X=1..6 x Y=1..8) with a budget
/// of 30: more than one round of [`SEARCH_BATCH`], so the search hears the first round's
/// times before it proposes the rest.
fn larger_search(strategy: &str) -> Vec<String> {
    let budget = LARGER_BUDGET.to_string();
    [
        "--shape",
        SHAPE,
        "--param",
        "X=1,2,3,4,5,6",
        "--param",
        "Y=1,2,3,4,5,6,7,8",
        "--strategy",
        strategy,
        "--budget",
        &budget,
        "--confirm-rounds",
        "0",
    ]
    .map(String::from)
    .to_vec()
}

/// The budget of [`larger_search`] takes more than one round: a round holds at most
/// [`SEARCH_BATCH`] proposals.
const LARGER_BUDGET: usize = 30;
/// Configurations in the space of [`larger_search`].
const LARGER_SPACE: usize = 48;
const _: () = assert!(LARGER_BUDGET > SEARCH_BATCH && LARGER_BUDGET < LARGER_SPACE);

/// `args` as the `&str`s [`Sim::run`] takes.
fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A random search whose budget takes two rounds spends it exactly.
#[test]
fn a_random_search_spends_its_budget_over_several_rounds() {
    let sim = Sim::new(json!({"baselines": {"copy": 0.04}}));
    let ran = sim.run(&strs(&larger_search("random")));
    assert_spent(&sim, &ran, "random", LARGER_BUDGET, LARGER_SPACE);
}

/// The model search (its all-pairs cover first, capped at half the budget, then rounds of
/// its own fits) spends its budget exactly, and finds the planted fastest configuration.
#[test]
fn a_model_search_spends_its_budget_over_several_rounds() {
    let sim = Sim::new(json!({
        "baselines": {"copy": 0.04},
        "rules": [{"when": "X=5", "factor": 0.7}, {"when": "Y=4", "factor": 0.7}],
    }));
    let ran = sim.run(&strs(&larger_search("model")));
    assert_spent(&sim, &ran, "model", LARGER_BUDGET, LARGER_SPACE);
    assert_eq!(fastest(&sim.csv(SHAPE)).label(), "X=5 Y=4 BROKEN=0");
}

/// A GPU the database holds no winner for (here the simulated GPU, whose folder holds only a
/// row of another GPU) starts its search from the winner of another GPU of its compute
/// capability: that configuration is measured even though a random search of 4 of the 48
/// would not reach it. A row of another architecture seeds nothing.
#[test]
fn a_gpu_without_winners_starts_from_a_winner_of_its_architecture() {
    let seeded = "X=6 Y=8 BROKEN=0";
    let run = |cc: &str| {
        let sim = Sim::new(json!({"baselines": {"copy": 0.04}}));
        sim.run(&strs(&larger_search("random"))).expect_code(0);
        let mut row = sim.best().remove(0);
        row.gpu = "NVIDIA H100 PCIe".into();
        row.compute_capability = cc.into();
        row.params = seeded.replace(' ', ";");
        let fresh = Sim::new(json!({"baselines": {"copy": 0.04}}));
        let db = fresh.out().join("best.csv");
        std::fs::create_dir_all(fresh.out()).unwrap();
        cuda_autotune::store::best::upsert_best(&db, row, Keep::Newest).unwrap();
        let mut args = larger_search("random");
        let at = args.iter().position(|a| a == "--budget").unwrap();
        args[at + 1] = "4".into();
        fresh.run(&strs(&args)).expect_code(0);
        variants(&fresh.csv(SHAPE))
            .filter(|r| r.status == Status::Ok)
            .map(Record::label)
            .collect::<Vec<_>>()
    };
    let hopper = run("9.0");
    assert_eq!(hopper.len(), 4, "{hopper:?}");
    assert!(hopper.iter().any(|l| l == seeded), "{hopper:?}");
    let other = run("8.0");
    assert_eq!(other.len(), 4, "{other:?}");
    assert!(!other.iter().any(|l| l == seeded), "{other:?}");
}

/// `--keep-best` keeps a faster stored row of today's kernel, and replaces one whose figures
/// are of a source the templates no longer render (its `source_hash` is another source's),
/// saying so; best.csv records the SM count of the GPU that tuned the row.
#[test]
fn keep_best_keeps_only_a_faster_row_of_todays_kernel() {
    let rules = |factor: f64| {
        json!({"num_sms": 114, "baselines": {"copy": 0.04},
               "rules": [{"when": "X=3 Y=2", "factor": factor}]})
    };
    let sim = Sim::new(rules(0.5));
    sim.run(&["--shape", SHAPE]).expect_code(0);
    let first = sim.best().remove(0);
    assert_eq!(first.num_sms, Some(114));
    assert_eq!(first.params, "X=3;Y=2;BROKEN=0");
    // Slower now: the stored row stays.
    sim.set_model(&rules(0.9));
    let ran = sim.run(&["--shape", SHAPE, "--keep-best"]);
    ran.expect_code(0);
    assert!(ran.stderr.contains("kept the stored row"), "{}", ran.stderr);
    assert_eq!(sim.best(), vec![first.clone()]);
    // The stored row's figures are of another source: the slower run of today's replaces it.
    let db = sim.out().join("best.csv");
    let mut stale = first.clone();
    stale.source_hash = "0".repeat(64);
    std::fs::remove_file(&db).unwrap();
    cuda_autotune::store::best::upsert_best(&db, stale, Keep::Newest).unwrap();
    let ran = sim.run(&["--shape", SHAPE, "--keep-best"]);
    ran.expect_code(0);
    assert!(
        ran.stderr
            .contains("replaced the stored row although it was faster"),
        "{}",
        ran.stderr
    );
    let now = sim.best().remove(0);
    assert_eq!(now.source_hash.len(), 64);
    assert_ne!(now.source_hash, "0".repeat(64));
    assert!(now.median_ms > first.median_ms, "{now:?}");
}

/// `--keep-best` judges a stored row by what it records and, where an older tool did not
/// record it, by this run's (the row is of this run's GPU): the architecture compiled for
/// (`--arch` older than the GPU keys the source with it) and the SM count (a define may read
/// `NUM_SMS`). A faster row of today's kernel stays in every case.
#[test]
fn keep_best_reads_what_an_older_row_does_not_record_as_this_runs() {
    let rules = |factor: f64| {
        json!({"num_sms": 114, "baselines": {"copy": 0.04},
               "rules": [{"when": "X=3 Y=2", "factor": factor}]})
    };
    // The sim op with a define that reads the SM count, rendered into the source.
    let mut sim = Sim::new(rules(0.5));
    let templates = sim.tmp.path().join("templates");
    std::fs::create_dir_all(&templates).unwrap();
    let tera = std::fs::read_to_string(repo("tests/fixtures/sim/sim.cu.tera")).unwrap();
    let tera = format!("// WAVE={{{{ WAVE }}}}\n{tera}");
    std::fs::write(templates.join("sim.cu.tera"), tera).unwrap();
    let spec = std::fs::read_to_string(repo("tests/fixtures/sim/sim.toml")).unwrap();
    let spec = format!("{spec}\n[defines]\nWAVE = \"NUM_SMS\"\n");
    std::fs::write(templates.join("sim.toml"), spec).unwrap();
    sim.templates = templates;
    sim.run(&["--shape", SHAPE, "--arch", "sm_80"])
        .expect_code(0);
    let first = sim.best().remove(0);
    assert_eq!((first.num_sms, first.arch.as_str()), (Some(114), "sm_80"));
    sim.set_model(&rules(0.9));
    let db = sim.out().join("best.csv");
    let older = |row: BestRow| {
        std::fs::remove_file(&db).unwrap();
        cuda_autotune::store::best::upsert_best(&db, row, Keep::Newest).unwrap();
    };
    // As an older tool wrote it: neither column (the two are written together).
    let mut legacy = first.clone();
    legacy.num_sms = None;
    legacy.arch.clear();
    for (what, stored) in [("as written now", first.clone()), ("legacy", legacy)] {
        older(stored.clone());
        let ran = sim.run(&["--shape", SHAPE, "--arch", "sm_80", "--keep-best"]);
        ran.expect_code(0);
        assert!(
            ran.stderr.contains("kept the stored row"),
            "{what}: {}",
            ran.stderr
        );
        assert_eq!(sim.best(), vec![stored], "{what}");
    }
}

/// A re-run at the same shape into the same folder times again only the last run's leaders
/// (those within `CONFIRM_WITHIN` of its fastest, at most `CONFIRM_TOP`): every other
/// configuration that run measured keeps its time in its reason, and those it never reached
/// stay unmeasured. Its budget was spent by the first run, so it searches no further.
#[test]
fn a_re_run_times_again_only_the_last_runs_leaders() {
    use cuda_autotune::pipeline::options::{CONFIRM_TOP, CONFIRM_WITHIN};
    let sim = Sim::new(json!({
        "baselines": {"copy": 0.04},
        "spread": 0.05,
        "rules": [{"when": "X=5", "factor": 0.5}, {"when": "X=6", "factor": 0.52}],
    }));
    let args = larger_search("model");
    sim.run(&strs(&args)).expect_code(0);
    let first = sim.csv(SHAPE);
    let measured: Vec<&Record> = variants(&first)
        .filter(|r| r.status == Status::Ok)
        .collect();
    let best = median(fastest(&first));
    let mut leaders: Vec<&Record> = measured
        .iter()
        .copied()
        .filter(|r| median(r) <= best * (1.0 + CONFIRM_WITHIN))
        .collect();
    leaders.sort_by(|a, b| median(a).total_cmp(&median(b)));
    leaders.truncate(CONFIRM_TOP);
    let mut leaders: Vec<String> = leaders.iter().map(|r| r.label()).collect();
    assert!(
        (2..measured.len()).contains(&leaders.len()),
        "the model gives some leaders and some measured outside them: {leaders:?}"
    );

    let again = sim.run(&strs(&args));
    again.expect_code(0);
    let second = sim.csv(SHAPE);
    let mut timed: Vec<String> = variants(&second)
        .filter(|r| r.status == Status::Ok)
        .map(|r| r.label())
        .collect();
    leaders.sort();
    timed.sort();
    assert_eq!(timed, leaders, "exactly the leaders are timed again");
    for r in &measured {
        let now = record(&second, &r.label());
        if leaders.contains(&r.label()) {
            continue;
        }
        assert_eq!(now.status, Status::Skipped, "{}", r.label());
        assert!(
            now.error
                .starts_with("not timed again: an earlier run at this shape measured")
                && now.error.contains(&format!("{:.5} ms", median(r))),
            "{}: {}",
            r.label(),
            now.error
        );
    }
    let unmeasured = |rows: &[Record]| {
        variants(rows)
            .filter(|r| r.status == Status::Skipped && r.error.starts_with("not measured"))
            .count()
    };
    assert_eq!(unmeasured(&second), unmeasured(&first));
    assert_eq!(
        sim.journal(SHAPE).len(),
        leaders.len() + 1,
        "the leaders and the copy baseline journaled"
    );
}

/// A re-run over a narrower `--param` set writes a CSV without the other configurations'
/// rows: the earlier CSV is kept as `.bak` first, and says so. A re-run of the same space
/// carries every row forward and keeps no copy.
#[test]
fn a_re_run_that_drops_measured_rows_keeps_the_earlier_csv() {
    let sim = Sim::new(json!({"baselines": {"copy": 0.04}}));
    sim.run(&["--shape", SHAPE]).expect_code(0);
    let full = std::fs::read(sim.csv_path(SHAPE)).unwrap();
    let narrow = sim.run(&["--shape", SHAPE, "-p", "X=1"]);
    narrow.expect_code(0);
    let bak = sim.out().join(format!("sim_{SHAPE}_{GPU_SLUG}.csv.bak"));
    assert_eq!(
        std::fs::read(&bak).unwrap(),
        full,
        "the earlier CSV, byte for byte"
    );
    assert!(
        narrow.stderr.contains(&format!(
            "holds 9 measured row(s) this run does not: kept as {}",
            bak.display()
        )),
        "{}",
        narrow.stderr
    );
    assert_eq!(variants(&sim.csv(SHAPE)).count(), 3);
    let again = sim.run(&["--shape", SHAPE, "-p", "X=1"]);
    again.expect_code(0);
    assert!(!again.stderr.contains("kept as"), "{}", again.stderr);
    let bak1 = sim.out().join(format!("sim_{SHAPE}_{GPU_SLUG}.csv.bak.1"));
    assert!(!bak1.exists());
    // A search that does not read the last run and measures one of the three: the other
    // two rows lose their times (skipped), so the CSV is kept, beside the first copy.
    let fresh = sim.run(&[
        "--shape",
        SHAPE,
        "-p",
        "X=1",
        "--strategy",
        "random",
        "--budget",
        "1",
        "--no-warm-start",
    ]);
    fresh.expect_code(0);
    assert!(
        fresh
            .stderr
            .contains("holds 2 measured row(s) this run does not"),
        "{}",
        fresh.stderr
    );
    assert!(bak1.is_file());
}

/// `tune check` on the simulated device, end to end through its pinned runs: the stored
/// winner timed as stored passes (exit 0); slowed by 30 % it fails (exit 1), naming the row
/// and the stored time, while its runner-up passes as before.
#[test]
fn tune_check_passes_a_winner_timed_as_stored_and_fails_a_slowed_one() {
    let rules = |factor: f64| json!({"baselines": {"copy": 0.04}, "rules": [{"when": "X=3 Y=2", "factor": factor}]});
    let sim = Sim::new(rules(0.5));
    sim.run(&["--shape", SHAPE, "--confirm-rounds", "5"])
        .expect_code(0);
    let db = sim.out().join("best.csv");
    let stored = read_best(&db).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].params, "X=3;Y=2;BROKEN=0");
    let time = |factor: f64| {
        let model: Model = serde_json::from_value(rules(factor)).unwrap();
        model.time_ms("X=3 Y=2 BROKEN=0", false)
    };
    let (stored_ms, slowed_ms) = (time(0.5), time(0.65));
    let ran = sim.check(&db);
    ran.expect_code(0);
    let pass = ran.line("PASS ");
    assert!(
        pass.starts_with(&format!(
            "PASS sim 64x64 X=3 Y=2 BROKEN=0: stored {stored_ms:.4} ms, now {stored_ms:.4} ms"
        )),
        "{pass}"
    );
    assert!(pass.contains("; runner-up"), "{pass}");
    assert!(ran.stdout.contains("1 checked, 0 failed"), "{}", ran.stdout);
    // The pinned runs of the winner and its runner-up each write a scratch run of their own:
    // none is a re-run that drops the other's rows.
    assert!(!ran.stderr.contains("kept as"), "{}", ran.stderr);

    sim.set_model(&rules(0.65));
    let ran = sim.check(&db);
    ran.expect_code(1);
    let fail = ran.line("FAIL ");
    assert!(
        fail.starts_with(&format!(
            "FAIL sim 64x64 X=3 Y=2 BROKEN=0: now {slowed_ms:.4} ms, 30.0% slower than the stored {stored_ms:.4} ms"
        )),
        "{fail}"
    );
    assert!(ran.stdout.contains("1 checked, 1 failed"), "{}", ran.stdout);
}

// ---------------------------------------------------------------------------------------
// Ranking and persisting
// ---------------------------------------------------------------------------------------

/// The planted fastest configuration (half the time of its neighbours) is first in the CSV,
/// the winner of the summary and best.csv's row; its fraction of the roof is the copy
/// baseline's planted time over its own, and its throughput the bytes moved over its time.
#[test]
fn the_planted_fastest_is_ranked_first_and_persisted_against_the_copy_roof() {
    let model = json!({
        "baselines": {"copy": 0.04},
        "rules": [{"when": "X=3 Y=2", "factor": 0.5}],
    });
    let sim = Sim::new(model.clone());
    let ran = sim.run(&["--shape", SHAPE, "--confirm-rounds", "5"]);
    ran.expect_code(0);
    let planted: Model = serde_json::from_value(model).unwrap();
    let winner = "X=3 Y=2 BROKEN=0";
    let t = planted.time_ms(winner, false);
    let roof = planted.time_ms("copy", true);
    assert_eq!(roof, 0.04);
    let frac = roof / t;
    let gbs = BYTES / (t * 1e-3) / 1e9;

    let records = sim.csv(SHAPE);
    let copy = record(&records, "copy");
    assert_eq!(median(copy), roof, "no noise: the planted time");
    assert_eq!(copy.frac_of_roof, Some(1.0));
    let best = fastest(&records);
    assert_eq!(best.label(), winner);
    assert!(close(median(best), t, 1e-12), "{} vs {t}", median(best));
    assert!(
        close(best.frac_of_roof.unwrap(), frac, 1e-9),
        "{:?}",
        best.frac_of_roof
    );
    assert!(
        close(best.throughput.unwrap(), gbs, 1e-9),
        "{:?}",
        best.throughput
    );
    for r in variants(&records) {
        assert!(
            close(median(r), planted.time_ms(&r.label(), false), 1e-12),
            "{}: every time is the model's",
            r.label()
        );
    }
    assert!(best.confirm.expect("the winner was re-timed").winner);
    let others: Vec<&Record> = variants(&records)
        .filter(|r| r.confirm.is_some() && r.label() != winner)
        .collect();
    assert_eq!(others.len(), 1, "the runner-up alone is re-timed with it");
    assert!(!others[0].confirm.unwrap().tied, "half the time is no tie");
    assert_eq!(
        variants(&records)
            .filter(|r| r.confirm.is_some_and(|c| c.winner))
            .count(),
        1
    );

    ran.expect_line(
        "Best: ",
        &format!(
            "Best: {winner}  {gbs:.1} GB/s, {:.1}% of copy ({t:.4} ms median",
            frac * 100.0
        ),
    );
    assert!(ran
        .stdout
        .contains("roof = the fastest verified baseline marked as roof: copy"));

    let rows = sim.best();
    assert_eq!(rows.len(), 1, "one row for the op, shape, dtype and GPU");
    let row = &rows[0];
    assert_eq!(
        (row.op.as_str(), row.shape.as_str(), row.gpu.as_str()),
        ("sim", SHAPE, "Simulated GPU")
    );
    assert_eq!(row.params, "X=3;Y=2;BROKEN=0");
    assert_eq!(row.roof, "copy");
    assert!(close(row.median_ms, t, 1e-12), "{}", row.median_ms);
    assert!(
        close(row.frac_of_roof.unwrap(), frac, 1e-9),
        "{:?}",
        row.frac_of_roof
    );
    assert!(close(row.throughput, gbs, 1e-9), "{}", row.throughput);
    assert!(!row.source_hash.is_empty() && !row.runner_up.is_empty());
}

/// The roof runs in the interleaved rounds too and counts at the faster of its two medians:
/// the re-timed leaders' % of roof (in the CSV, best.csv and the summary) divides it by their
/// median over the rounds, the others' by their first timing. With 20 % launch noise the
/// ways differ, so each record is held to its own.
#[test]
fn the_roof_runs_in_the_interleaved_rounds_and_counts_at_its_faster_median() {
    let sim = Sim::new(json!({
        "baselines": {"copy": 0.04},
        "noise_pct": 20.0,
        "rules": [{"when": "X=3", "factor": 0.7}],
    }));
    let ran = sim.run(&["--shape", SHAPE, "--confirm-rounds", "20"]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    let copy = record(&records, "copy");
    let in_rounds = copy.confirm.expect("the roof ran in the rounds").median_ms;
    let roof = in_rounds.min(median(copy));
    assert!(close(copy.frac_of_roof.unwrap(), 1.0, 1e-12));
    let (mut retimed, mut first_timed) = (0, 0);
    for r in variants(&records).filter(|r| r.status == Status::Ok) {
        let frac = r.frac_of_roof.unwrap();
        match r.confirm {
            Some(c) => {
                retimed += 1;
                assert!(close(frac, roof / c.median_ms, 1e-9), "{}", r.label());
                assert!(!close(frac, roof / median(r), 1e-6), "{}", r.label());
            }
            None => {
                first_timed += 1;
                assert!(close(frac, roof / median(r), 1e-9), "{}", r.label());
            }
        }
    }
    assert!(
        retimed >= 2 && first_timed > 0,
        "{retimed} re-timed, {first_timed} not"
    );
    let best = records
        .iter()
        .find(|r| r.confirm.is_some_and(|c| c.winner))
        .expect("a winner");
    let row = &sim.best()[0];
    assert!(close(
        row.frac_of_roof.unwrap(),
        best.frac_of_roof.unwrap(),
        1e-9
    ));
    let rounds = ran.stdout.split(" interleaved rounds").next().unwrap();
    let rounds = rounds.rsplit(' ').next().unwrap();
    let line = format!(
        "({:.1}% of copy: the winner's median over the {rounds} interleaved rounds, {:.4} ms, \
         against copy's faster median, {:.4} ms first timed or {in_rounds:.4} ms over the rounds)",
        best.frac_of_roof.unwrap() * 100.0,
        best.confirm.unwrap().median_ms,
        median(copy),
    );
    assert!(ran.stdout.contains(&line), "{line}\n{}", ran.stdout);
}

/// Kernels and baselines shorter than a batch are timed alike, in batches: a 30 µs kernel and
/// a 30 µs roof, each paying 8 µs of start-up when launched alone, compare at 100 % of the
/// roof. A roof timed in batches beside kernels timed one by one would put every kernel at
/// 30 / 38 of it; the other way round, above it.
#[test]
fn kernels_and_their_roof_shorter_than_a_batch_are_timed_alike() {
    let sim = Sim::new(json!({
        "base_ms": 0.03,
        "spread": 0.0,
        "baselines": {"copy": 0.03},
        "startup_ms": 0.008
    }));
    let ran = sim.run(&["--shape", SHAPE, "--confirm-rounds", "0"]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    let copy = record(&records, "copy").stats.expect("timed");
    assert!(copy.batch > 1, "{copy:?}");
    assert!(close(copy.median_ms, 0.03, 1e-9), "{copy:?}");
    for r in variants(&records) {
        let st = r.stats.expect("timed");
        assert!(st.batch > 1, "{}: {st:?}", r.label());
        let frac = r.frac_of_roof.expect("a roof");
        assert!(close(frac, 1.0, 1e-6), "{}: {frac} of the roof", r.label());
    }
}

// ---------------------------------------------------------------------------------------
// Settling
// ---------------------------------------------------------------------------------------

/// The reason a result measured at the simulated throttled clock carries.
const THROTTLED: &str =
    "warning: measured while the GPU ran at 1100 MHz (steady 1980 MHz), throttle bits 0x4";

/// One throttled reading of 13 (under 10 %) is flagged in the CSV and the clocks line, and
/// nothing is timed again.
#[test]
fn a_single_throttled_result_is_flagged_not_re_timed() {
    let sim = Sim::new(json!({
        "baselines": {"copy": 0.04},
        "throttle": [{"when": "X=2 Y=1"}],
    }));
    let ran = sim.run(&["--shape", SHAPE, "--confirm-rounds", "0"]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    let flagged = record(&records, "X=2 Y=1 BROKEN=0");
    assert_eq!(
        (flagged.status, flagged.error.as_str()),
        (Status::Ok, THROTTLED)
    );
    assert_eq!(
        records.iter().filter(|r| !r.error.is_empty()).count(),
        1,
        "only the throttled result is flagged"
    );
    ran.expect_line_has(
        "Clocks",
        "SM steady 1980 MHz (min 1100, max 1980), memory 2619 MHz, max 88 °C; \
         1 of 13 readings throttled or >10% below steady (flagged in the CSV)",
    );
    assert!(!ran.stdout.contains("Re-measured"), "{}", ran.stdout);
}

/// Two throttled readings of 13 (over 10 %) are timed again after the pause: the one whose
/// second reading is clean takes the new result and says it was re-measured; the one planted
/// throttled twice keeps its first result, flagged.
#[test]
fn throttled_results_are_re_timed_when_they_are_many() {
    let sim = Sim::new(json!({
        "baselines": {"copy": 0.04},
        "throttle": [{"when": "X=1 Y=2"}, {"when": "X=4 Y=3", "times": 2}],
    }));
    let started = Instant::now();
    let ran = sim.run(&["--shape", SHAPE, "--confirm-rounds", "0"]);
    ran.expect_code(0);
    assert!(started.elapsed() >= REMEASURE_PAUSE, "the GPU rested first");
    let records = sim.csv(SHAPE);
    let again = record(&records, "X=1 Y=2 BROKEN=0");
    assert_eq!(again.status, Status::Ok);
    assert_eq!(
        again.error,
        "re-measured: first timed at 1100 MHz (steady 1980 MHz), throttle bits 0x4"
    );
    // The clean result is journaled after the throttled one, so a resumed run takes it; the
    // one still flagged has its first entry only.
    let entries = sim.journal(SHAPE);
    let of = |r: &Record| -> Vec<&Value> {
        entries
            .iter()
            .filter(|e| e["result"]["id"].as_u64() == Some(task_id(r)))
            .collect()
    };
    let again_entries = of(again);
    assert_eq!(again_entries.len(), 2, "{again_entries:?}");
    assert_eq!(again_entries[1]["result"]["clock"]["sm_mhz"], json!(1980));
    let still = record(&records, "X=4 Y=3 BROKEN=0");
    assert_eq!(of(still).len(), 1);
    assert_eq!(still.status, Status::Ok);
    assert_eq!(
        still.error,
        format!("{THROTTLED}; re-measured once, still flagged")
    );
    assert_eq!(records.iter().filter(|r| !r.error.is_empty()).count(), 2);
    assert!(
        ran.stdout.contains(
            "Re-measured 2 results after throttling (2 of 13 timed results were flagged, over \
             10%; after a 1 s pause): 1 still flagged (their first result stands, flagged in \
             the CSV)."
        ),
        "{}",
        ran.stdout
    );
}

/// A throttled result whose re-measure fails its check (a race) is failed, without its
/// first timing: it is no longer verified.
#[test]
fn a_result_that_fails_its_re_measure_is_failed() {
    let sim = Sim::new(json!({
        "baselines": {"copy": 0.04},
        "throttle": [{"when": "X=1 Y=2"}, {"when": "X=4 Y=3"}],
        "wrong_after": [{"when": "X=1 Y=2", "checks": 1}],
    }));
    let ran = sim.run(&["--shape", SHAPE, "--confirm-rounds", "0"]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    let racy = record(&records, "X=1 Y=2 BROKEN=0");
    assert_eq!(racy.status, Status::Failed, "{}", ran.stdout);
    assert!(
        racy.error
            .starts_with("failed when re-measured: wrong result: 1 of 4096 elements differ"),
        "{}",
        racy.error
    );
    assert!(racy.stats.is_none() && racy.throughput.is_none());
    assert_eq!(record(&records, "X=4 Y=3 BROKEN=0").status, Status::Ok);
}

// ---------------------------------------------------------------------------------------
// Confirmation
// ---------------------------------------------------------------------------------------

/// A model where every configuration takes 0.05 ms (no spread) with noise, and `rules` plant
/// the leaders.
fn flat_model(seed: u64, rules: Value) -> Value {
    json!({
        "spread": 0,
        "noise_pct": 2,
        "seed": seed,
        "baselines": {"copy": 0.04},
        "rules": rules,
    })
}

/// Rules planting two leaders equally fast, at 0.6 of the others' time: X=2 Y=3 (first in the
/// space) with 40 registers and X=3 Y=1 with `registers`; the tie rule tests pick between them.
fn leader_rules(registers: u32) -> Value {
    json!([
        {"when": "X=2 Y=3", "factor": 0.6, "registers": 40},
        {"when": "X=3 Y=1", "factor": 0.6, "registers": registers},
    ])
}

/// [`flat_model`] with the two leaders of [`leader_rules`].
fn two_leaders(seed: u64, registers: u32) -> Value {
    flat_model(seed, leader_rules(registers))
}

/// A model where every configuration takes 0.5 ms (no spread), the copy 0.4 ms, and X=2 Y=3
/// `factor` of that, with the keys of `extra` (its noise, its launch time) added: a contest
/// of one planted leader.
fn one_leader_model(factor: f64, extra: Value) -> Value {
    let mut model = json!({
        "base_ms": 0.5,
        "spread": 0,
        "baselines": {"copy": 0.4},
        "rules": [{"when": "X=2 Y=3", "factor": factor}],
    });
    for (k, v) in extra.as_object().expect("a JSON object") {
        model[k] = v.clone();
    }
    model
}

/// Runs a confirmation with 40 interleaved rounds and returns the run and its CSV.
fn confirm_run(sim: &Sim) -> (Ran, Vec<Record>) {
    let ran = sim.run(&["--shape", SHAPE, "--confirm-rounds", "40"]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    (ran, records)
}

/// Two configurations planted equal (same time, same registers) are reported tied, and the
/// tie rule picks the one that comes first in the space whatever the noise: the same winner
/// under three noise seeds. With fewer registers, the later one wins instead.
#[test]
fn planted_equals_are_tied_and_the_tie_rule_picks_the_same_winner_under_any_noise() {
    let equal = leader_rules(40);
    let (first, second) = ("X=2 Y=3 BROKEN=0", "X=3 Y=1 BROKEN=0");
    let labels = default_labels();
    let at = |l: &str| labels.iter().position(|x| x == l).unwrap();
    assert!(at(first) < at(second), "X=2 Y=3 comes first in the space");
    for seed in [1, 2, 3] {
        let sim = Sim::new(flat_model(seed, equal.clone()));
        let (ran, records) = confirm_run(&sim);
        let (a, b) = (record(&records, first), record(&records, second));
        let (ca, cb) = (a.confirm.expect("re-timed"), b.confirm.expect("re-timed"));
        assert!(ca.tied && cb.tied, "seed {seed}: {ca:?} {cb:?}");
        assert!(ca.winner && !cb.winner, "seed {seed}: {ca:?} {cb:?}");
        assert_eq!(
            variants(&records).filter(|r| r.confirm.is_some()).count(),
            2,
            "seed {seed}: only the two leaders are within 10 % of the fastest"
        );
        assert!(
            ran.line("Best: ").starts_with(&format!("Best: {first} ")),
            "seed {seed}"
        );
        let line = ran.line("Confidence: ");
        assert!(
            line.starts_with("Confidence: tied with 1 other(s) over ")
                && line.contains(&format!(
                    "interleaved rounds (not slower by more than 1.5% at 95% confidence): \
                     {second}; picked by the tie rule (the stored winner unless clearly \
                     beaten, else fewest registers, then first in the space)"
                )),
            "seed {seed}: {}",
            ran.stdout
        );
        let row = &sim.best()[0];
        assert_eq!(row.params, "X=2;Y=3;BROKEN=0");
        assert!(row.tie, "seed {seed}: best.csv records the tie");
        assert_eq!(row.runner_up, "X=3;Y=1;BROKEN=0");
    }
    // Fewer registers come before the place in the space.
    let fewer = leader_rules(32);
    let sim = Sim::new(flat_model(1, fewer));
    let (ran, records) = confirm_run(&sim);
    assert!(record(&records, second).confirm.unwrap().winner);
    assert_eq!(record(&records, second).registers, Some(32));
    assert!(ran.line("Best: ").starts_with(&format!("Best: {second} ")));
    assert_eq!(sim.best()[0].params, "X=3;Y=1;BROKEN=0");
}

/// The tie rule keeps a stored winner that is tied with another leader; `--no-warm-start`
/// drops that preference, and the same tie goes to the first in the space. The stored
/// winner is X=3 Y=1 (it won a first run with fewer registers); with registers equal the
/// two are planted tied.
#[test]
fn a_tied_stored_winner_is_kept_unless_the_run_asks_for_a_fresh_contest() {
    let (first, second) = ("X=2 Y=3 BROKEN=0", "X=3 Y=1 BROKEN=0");
    let sim = Sim::new(two_leaders(1, 32));
    confirm_run(&sim);
    assert_eq!(sim.best()[0].params, "X=3;Y=1;BROKEN=0");
    sim.set_model(&two_leaders(2, 40));
    let kept = sim.run(&["--shape", SHAPE, "--confirm-rounds", "40"]);
    kept.expect_code(0);
    kept.expect_line("Best: ", &format!("Best: {second} "));
    let fresh = sim.run(&[
        "--shape",
        SHAPE,
        "--confirm-rounds",
        "40",
        "--no-warm-start",
    ]);
    fresh.expect_code(0);
    fresh.expect_line("Best: ", &format!("Best: {first} "));
    assert!(fresh
        .line("Confidence: ")
        .starts_with("Confidence: tied with 1 other(s)"));
    assert_eq!(sim.best()[0].params, "X=2;Y=3;BROKEN=0");
}

/// A winner stored under `--cache warm` won another contest: a cold run does not keep it by
/// the tie rule, and the same tie goes to the first in the space.
#[test]
fn a_stored_winner_of_another_cache_state_is_not_kept() {
    let sim = Sim::new(two_leaders(1, 32));
    let warm = sim.run(&[
        "--shape",
        SHAPE,
        "--confirm-rounds",
        "40",
        "--cache",
        "warm",
    ]);
    warm.expect_code(0);
    assert_eq!(sim.best()[0].params, "X=3;Y=1;BROKEN=0");
    sim.set_model(&two_leaders(2, 40));
    let cold = sim.run(&["--shape", SHAPE, "--confirm-rounds", "40"]);
    cold.expect_code(0);
    cold.expect_line("Best: ", "Best: X=2 Y=3 BROKEN=0 ");
    assert_eq!(sim.best()[0].params, "X=2;Y=3;BROKEN=0");
}

/// Leaders 2 % apart in 40 % launch-to-launch noise over 10 rounds cannot be ranked: the
/// report says so, and best.csv names the runner-up but claims no margin.
#[test]
fn a_contest_too_noisy_to_rank_claims_no_margin() {
    let sim = Sim::new(one_leader_model(0.98, json!({"noise_pct": 40})));
    let ran = sim.run(&["--shape", SHAPE, "--confirm-rounds", "10"]);
    ran.expect_code(0);
    ran.expect_line(
        "Confidence: ",
        "Confidence: timings too noisy to rank the leaders",
    );
    let row = &sim.best()[0];
    assert!(!row.runner_up.is_empty());
    assert_eq!(
        (
            row.margin_pct,
            row.margin_ci_low_pct,
            row.margin_ci_high_pct
        ),
        (None, None, None)
    );
}

/// A configuration planted 30 % faster than all others wins its confirmation: "ahead by" the
/// margin the model implies (the others take 1/0.7 - 1 = 42.9 % longer), within the noise.
#[test]
fn a_clearly_faster_configuration_wins_ahead_by_its_margin() {
    let sim = Sim::new(flat_model(1, json!([{"when": "X=2 Y=3", "factor": 0.7}])));
    let (ran, records) = confirm_run(&sim);
    let winner = record(&records, "X=2 Y=3 BROKEN=0");
    assert!(winner.confirm.expect("re-timed").winner);
    assert!(
        variants(&records)
            .filter(|r| r.label() != winner.label())
            .all(|r| r.confirm.is_none_or(|c| !c.tied && !c.winner)),
        "nothing ties with it"
    );
    let margin = (1.0 / 0.7 - 1.0) * 100.0;
    let line = ran.line("Confidence: ");
    // The halving stops after its first stage (a quarter of the 40 rounds): the other leader
    // is out by far more than the tie band, and no one is left undecided.
    assert!(
        line.starts_with("Confidence: re-timed interleaved (10 rounds, 2 leaders): ahead by "),
        "{line}"
    );
    let ahead: f64 = line
        .split("ahead by ")
        .nth(1)
        .and_then(|s| s.split('%').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no margin in: {line}"));
    assert!(
        (ahead - margin).abs() < 4.0,
        "ahead by {ahead} %, planted {margin:.1} %"
    );
    let row = &sim.best()[0];
    assert_eq!(row.params, "X=2;Y=3;BROKEN=0");
    assert!(!row.tie);
    let m = row.margin_pct.expect("a margin");
    assert!((m - ahead).abs() < 0.06, "best.csv {m} vs summary {ahead}");
    assert!(
        row.margin_ci_low_pct.unwrap() > 0.0,
        "the interval excludes a tie"
    );
}

/// The planted fastest passes its first check and fails when the confirmation checks it
/// again: it leaves the contest, its row becomes `failed` with its first timing in the
/// reason, and the winner is the fastest of the others, however few are left to re-time.
#[test]
fn a_leader_that_fails_its_check_in_the_contest_is_failed_not_the_winner() {
    let racy = "X=2 Y=3 BROKEN=0";
    for others in [json!([]), json!([{"when": "X=3 Y=1", "factor": 0.8}])] {
        let mut rules = vec![json!({"when": "X=2 Y=3", "factor": 0.7})];
        rules.extend(others.as_array().unwrap().iter().cloned());
        let mut model = flat_model(1, Value::Array(rules));
        model["wrong_after"] = json!([{"when": "X=2 Y=3", "checks": 1}]);
        let sim = Sim::new(model);
        let (ran, records) = confirm_run(&sim);
        let r = record(&records, racy);
        assert_eq!(r.status, Status::Failed, "{}", ran.stdout);
        assert!(
            r.error
                .starts_with("failed when re-run for the confirmation (first timed at 0.03")
                && r.error.contains("wrong result"),
            "{}",
            r.error
        );
        assert!(r.stats.is_none() && r.confirm.is_none());
        let best = &sim.best()[0];
        assert_ne!(best.params, "X=2;Y=3;BROKEN=0", "{}", ran.stdout);
        assert!(
            !ran.line("Best: ").starts_with(&format!("Best: {racy} ")),
            "{}",
            ran.stdout
        );
        // The failure is journaled: resumed, the run reuses it, not the first timing (the
        // fresh worker's first check of the racy kernel would pass).
        let resumed = sim.run(&["--shape", SHAPE, "--confirm-rounds", "40", "--resume"]);
        resumed.expect_code(0);
        let r = record(&sim.csv(SHAPE), racy).clone();
        assert_eq!(r.status, Status::Failed, "{}", resumed.stdout);
        assert!(
            r.error
                .starts_with("failed when re-run for the confirmation"),
            "{}",
            r.error
        );
        assert_ne!(sim.best()[0].params, "X=2;Y=3;BROKEN=0");
    }
}

/// A contest whose interleaved rounds take longer than `--watchdog` (every launch of this
/// model takes 10 ms of real time: 8 leaders and the roof, each verified, warmed up and
/// launched in 10 rounds, 1.3 s in all): the worker's limit counts every launch of the job,
/// so no leader is taken for hung, and the planted fastest wins.
#[test]
fn a_contest_longer_than_the_watchdog_is_not_taken_for_a_hang() {
    let sim = Sim::new(one_leader_model(0.97, json!({"launch_us": 10000})));
    let ran = sim.run(&[
        "--shape",
        SHAPE,
        "--confirm-rounds",
        "40",
        "--reps",
        "5",
        "--watchdog",
        "1",
    ]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    assert_eq!(count(&records, Status::Failed), 0, "{}", ran.stdout);
    // Every leader within 10 % of the fastest (all twelve are; eight at most) was re-timed.
    ran.expect_line(
        "Confidence: ",
        "Confidence: re-timed interleaved (10 rounds, 8 leaders): ahead by 3.1%",
    );
    ran.expect_line("Best: ", "Best: X=2 Y=3 BROKEN=0 ");
    assert!(record(&records, "X=2 Y=3 BROKEN=0").confirm.unwrap().winner);
}

// ---------------------------------------------------------------------------------------
// Failures
// ---------------------------------------------------------------------------------------

/// A wrong result, a sticky fault (its worker dies and a fresh one takes the rest), a hang
/// (the watchdog kills its worker) and twelve sources that do not compile: each costs its own
/// record with its reason; every other configuration is measured and the planted fastest wins.
#[test]
fn each_planted_failure_costs_only_its_own_record() {
    let sim = Sim::new(json!({
        "noise_pct": 2,
        "baselines": {"copy": 0.04},
        "rules": [{"when": "X=3 Y=2", "factor": 0.5}],
        "wrong": ["X=1 Y=1"],
        "fault": ["X=2 Y=2"],
        "hang": ["X=4 Y=1"],
    }));
    let started = Instant::now();
    let ran = sim.run(&[
        "--shape",
        SHAPE,
        "--param",
        "BROKEN=0,1",
        "--watchdog",
        "1",
        "--confirm-rounds",
        "3",
    ]);
    ran.expect_code(0);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the hang cost about the watchdog: {:?}",
        started.elapsed()
    );
    let records = sim.csv(SHAPE);
    let failed = |label: &str, start: &str| {
        let r = record(&records, label);
        assert_eq!(r.status, Status::Failed, "{label}");
        assert!(r.error.starts_with(start), "{label}: {}", r.error);
    };
    failed(
        "X=1 Y=1 BROKEN=0",
        "wrong result: 4096 of 4096 elements differ",
    );
    failed(
        "X=2 Y=2 BROKEN=0",
        "simulated fault: an illegal memory access was encountered",
    );
    failed("X=4 Y=1 BROKEN=0", "watchdog: no result after ");
    assert!(record(&records, "X=4 Y=1 BROKEN=0")
        .error
        .contains("worker killed"));
    for r in variants(&records).filter(|r| r.label().ends_with("BROKEN=1")) {
        assert_eq!(r.status, Status::Failed, "{}", r.label());
        assert!(
            r.error.starts_with("compile: ")
                && r.error.contains("this_identifier_is_not_declared_anywhere"),
            "{}: {}",
            r.label(),
            r.error
        );
    }
    let good: Vec<&Record> = variants(&records)
        .filter(|r| r.status == Status::Ok)
        .collect();
    assert_eq!(good.len(), 9, "every other configuration measured");
    assert!(good.iter().all(|r| r.label().ends_with("BROKEN=0")));
    assert_eq!(count(&records, Status::Failed), 15);
    // Only what compiled reached the GPU: the copy and the 12 good sources, each journaled
    // once, failures included; results came in after the fault and after the hang (from
    // fresh workers).
    let ids = journal_ids(&sim.journal(SHAPE));
    assert_eq!(ids.len(), 13, "{ids:?}");
    let ok_ids: Vec<u64> = variants(&records)
        .filter(|r| r.status == Status::Ok)
        .map(task_id)
        .collect();
    for planted in ["X=2 Y=2 BROKEN=0", "X=4 Y=1 BROKEN=0"] {
        let id = task_id(record(&records, planted));
        let at = ids.iter().position(|&i| i == id).expect("journaled");
        assert!(
            ids[at + 1..].iter().any(|i| ok_ids.contains(i)),
            "nothing was measured after {planted}: {ids:?}"
        );
    }
    assert_eq!(fastest(&records).label(), "X=3 Y=2 BROKEN=0");
    assert!(ran.line("Best: ").starts_with("Best: X=3 Y=2 BROKEN=0 "));
    assert!(
        ran.stdout
            .contains("CUDA context restarted 2 time(s) after faulting variants."),
        "one restart for the fault, one for the hang:\n{}",
        ran.stdout
    );
    ran.expect_line_has(
        "Top 9 of 9 verified configurations",
        "(24 in the space: 15 failed, 0 pruned)",
    );
    assert!(ran
        .stdout
        .contains("Failed configurations (15; reasons in the CSV):"));
    assert_eq!(sim.best()[0].params, "X=3;Y=2;BROKEN=0");
}

/// In this process (`--in-process`) a fault leaves the device unusable: what ran before it
/// stays measured, the run ends with one error line saying why (exit 1), and every
/// configuration after it is `not_run` with that reason.
#[test]
fn in_process_a_fault_ends_the_run_and_the_rest_say_why() {
    let sim = Sim::new(json!({
        "baselines": {"copy": 0.04},
        "fault": ["X=2 Y=2"],
    }));
    let ran = sim.run(&["--shape", SHAPE, "--in-process", "--confirm-rounds", "0"]);
    ran.expect_code(1);
    let why = "no CUDA GPU is usable: a variant faulted (simulated fault: an illegal memory \
               access was encountered (CUDA_ERROR_ILLEGAL_ADDRESS)) and left this process's \
               CUDA context unusable; without --in-process each variant runs in a worker \
               process that survives this";
    assert!(ran.stderr.contains(why), "{}", ran.stderr);
    let records = sim.csv(SHAPE);
    let labels = default_labels();
    let fault = labels.iter().position(|l| l == "X=2 Y=2 BROKEN=0").unwrap();
    assert_eq!(record(&records, "copy").status, Status::Ok);
    for l in &labels[..fault] {
        assert_eq!(
            record(&records, l).status,
            Status::Ok,
            "{l} ran before the fault"
        );
    }
    assert!(record(&records, &labels[fault])
        .error
        .starts_with("simulated fault: an illegal memory access"));
    for l in &labels[fault + 1..] {
        let r = record(&records, l);
        assert_eq!((r.status, r.error.as_str()), (Status::NotRun, why), "{l}");
        assert!(r.stats.is_none(), "{l} has no time");
    }
    assert_eq!(count(&records, Status::Ok), fault);
}

/// The configurations an in-process fault kept from running never ran: their records say
/// so as `not_run` (the status the CSV keeps for "its GPU path failed first"), nothing is
/// journaled for them, and `--resume` with worker processes measures them.
#[test]
fn configurations_an_in_process_fault_kept_from_running_are_run_on_resume() {
    let sim = Sim::new(json!({
        "baselines": {"copy": 0.04},
        "fault": ["X=2 Y=2"],
    }));
    let args = ["--shape", SHAPE, "--confirm-rounds", "0"];
    let mut first: Vec<&str> = args.to_vec();
    first.push("--in-process");
    let ran = sim.run(&first);
    ran.expect_code(1);
    let records = sim.csv(SHAPE);
    assert_eq!(count(&records, Status::NotRun), 7, "never run");
    assert_eq!(count(&records, Status::Failed), 1, "the fault alone failed");
    assert_eq!(
        sim.journal(SHAPE).len(),
        6,
        "the copy, the 4 measured and the fault"
    );
    let mut again: Vec<&str> = args.to_vec();
    again.push("--resume");
    let ran = sim.run(&again);
    ran.expect_code(0);
    assert_eq!(
        count_before(ran.line("Resumed: "), "results reused"),
        6,
        "the copy, the 4 measured and the fault"
    );
    let records = sim.csv(SHAPE);
    assert_eq!(
        count(&records, Status::Ok),
        11,
        "all but the fault measured"
    );
}

// ---------------------------------------------------------------------------------------
// Ctrl-C and --resume
// ---------------------------------------------------------------------------------------

/// The journal of [`SHAPE`] holds `n` results or more.
fn journaled(sim: &Sim, n: usize) -> impl FnMut() -> bool + '_ {
    move || sim.journal(SHAPE).len() >= n
}

/// The arguments of the runs the stop tests interrupt once results stream in.
const STOPPED_ARGS: [&str; 8] = [
    "--shape",
    SHAPE,
    "--reps",
    "5",
    "--warmup",
    "1",
    "--confirm-rounds",
    "0",
];

/// A run of [`STOPPED_ARGS`] sent `signal` (`kill -<signal>`) once two results are journaled,
/// and what every stop must leave: exit code 130, the resume command printed, the CSV with
/// every journaled result and the reason for the rest, best.csv left alone. Returns the
/// simulated machine and the CSV's records.
fn stopped_after_two_results(signal: &str) -> (Sim, Vec<Record>) {
    // Launches of 0.4 ms and more, longer than a batch: each timed sample is one launch.
    let sim = Sim::new(json!({
        "base_ms": 0.4,
        "baselines": {"copy": 0.4},
        "noise_pct": 2,
        "launch_us": 20000
    }));
    let mut child = sim.spawn(&STOPPED_ARGS);
    // The copy and a first variant (each 6 launches of 20 ms).
    signal_when(
        &mut child,
        Duration::from_secs(60),
        "two results",
        signal,
        journaled(&sim, 2),
    );
    let ran = finish(child);
    ran.expect_code(130);
    assert!(
        ran.stderr
            .contains("interrupted: partial results written; resume with: "),
        "{signal}: {}",
        ran.stderr
    );
    let records = sim.csv(SHAPE);
    let ok = count(&records, Status::Ok);
    assert_eq!(
        ok + 1,
        sim.journal(SHAPE).len(),
        "{signal}: every journaled result is in the CSV"
    );
    assert!(
        (1..12).contains(&ok),
        "{signal}: {ok} of 12 measured before the stop"
    );
    for r in variants(&records).filter(|r| r.status != Status::Ok) {
        assert_eq!(
            (r.status, r.error.as_str()),
            (Status::NotRun, "interrupted (Ctrl-C or SIGTERM)"),
            "{signal}: {}",
            r.label()
        );
    }
    assert!(
        !sim.out().join("best.csv").exists(),
        "{signal}: best.csv left alone"
    );
    (sim, records)
}

/// Ctrl-C once results stream in stops the run ([`stopped_after_two_results`]); `--resume`
/// then reuses every journaled result (the same times, not measured again) and measures only
/// the rest.
#[test]
fn ctrl_c_keeps_what_was_measured_and_resume_finishes_it() {
    let (sim, records) = stopped_after_two_results("INT");
    let entries = sim.journal(SHAPE);
    let first: Vec<(String, f64)> = variants(&records)
        .filter(|r| r.status == Status::Ok)
        .map(|r| (r.label(), median(r)))
        .collect();

    let mut again: Vec<&str> = STOPPED_ARGS.to_vec();
    again.push("--resume");
    let ran = sim.run(&again);
    ran.expect_code(0);
    let reused = count_before(ran.line("Resumed: "), "results reused");
    assert_eq!(reused, entries.len(), "the copy and every measured variant");
    assert!(ran
        .line("Resumed: ")
        .contains(&sim.journal_path(SHAPE).display().to_string()));
    let records = sim.csv(SHAPE);
    assert_eq!(count(&records, Status::Ok), 12);
    for (label, ms) in first {
        assert_eq!(
            median(record(&records, &label)),
            ms,
            "{label}: reused as it was"
        );
    }
    let mut ids = journal_ids(&sim.journal(SHAPE));
    assert_eq!(ids.len(), 13, "the journal gained only what was missing");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 13);
    assert_eq!(sim.best().len(), 1);
}

/// SIGTERM (a Slurm time limit, a Kubernetes pod stop, `timeout`) stops a run as Ctrl-C
/// does ([`stopped_after_two_results`]).
#[test]
fn sigterm_stops_a_run_as_ctrl_c_does() {
    stopped_after_two_results("TERM");
}

/// Ctrl-C while the sources compile (64 of them, into a fresh cubin cache), before any GPU
/// result: the copy baseline already on the GPU finishes and is kept, no variant is measured,
/// the sources not compiled yet never are, and `--resume` reuses the copy.
#[test]
fn ctrl_c_while_compiling_keeps_the_result_in_flight() {
    // The copy takes 8 launches of 400 ms (one by one: 0.2 ms is longer than a batch), on
    // the GPU well before the sources are compiled.
    let mut sim = Sim::new(json!({"baselines": {"copy": 0.2}, "launch_us": 400000}));
    let cache = sim.tmp.path().join("cache");
    sim.cache = cache.clone();
    let args = [
        "--shape",
        SHAPE,
        "--param",
        "X=1,2,3,4,5,6,7,8",
        "--param",
        "Y=1,2,3,4,5,6,7,8",
        "--reps",
        "8",
        "--warmup",
        "0",
        "--jobs",
        "2",
        "--confirm-rounds",
        "0",
    ];
    let mut child = sim.spawn(&args);
    // The journal is opened just before the rounds start: a moment later the copy runs.
    let mut opened: Option<Instant> = None;
    while opened.is_none_or(|t| t.elapsed() < Duration::from_millis(300)) {
        assert!(child.try_wait().unwrap().is_none(), "tune ended early");
        if opened.is_none() && sim.journal_path(SHAPE).exists() {
            opened = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    interrupt_after_first_cubin(&mut child, &cache, Duration::from_secs(120));
    let before = sim.journal(SHAPE).len();
    let ran = finish(child);
    ran.expect_code(130);
    assert_eq!(before, 0, "interrupted before any GPU result");
    let records = sim.csv(SHAPE);
    assert_eq!(
        record(&records, "copy").status,
        Status::Ok,
        "the task in flight finished"
    );
    assert_eq!(
        journal_ids(&sim.journal(SHAPE)),
        vec![0],
        "and was journaled"
    );
    for r in variants(&records) {
        assert_eq!(
            (r.status, r.error.as_str()),
            (Status::NotRun, "interrupted (Ctrl-C or SIGTERM)"),
            "{}",
            r.label()
        );
    }
    let compiled = common::cubin_count(&cache);
    assert!(
        compiled < 64,
        "the stop ended the compiles: {compiled} images"
    );
    assert!(!sim.out().join("best.csv").exists());
    // The rest, measured at once this time (and compiled into the shared cache); the copy
    // is reused.
    sim.set_model(&json!({"baselines": {"copy": 0.04}}));
    sim.cache = shared_cache().to_path_buf();
    let mut again: Vec<&str> = args.to_vec();
    again.push("--resume");
    let ran = sim.run(&again);
    ran.expect_code(0);
    assert_eq!(count_before(ran.line("Resumed: "), "results reused"), 1);
    assert_eq!(count(&sim.csv(SHAPE), Status::Ok), 64);
}

/// Ctrl-C during the interleaved confirmation: every measured row stays in the CSV, and the
/// run is reported as interrupted as the README says of any Ctrl-C: exit code 130, best.csv
/// left alone, the resume command printed.
#[test]
fn ctrl_c_during_confirmation_keeps_every_measured_row_and_reports_the_stop() {
    // 13 tasks of two 20 ms launches (a warm-up and one sample), then 2 leaders x 100 rounds
    // of 20 ms: 4 s of confirming (0.2 ms and more a launch, longer than a batch: one launch a
    // sample).
    let sim = Sim::new(json!({
        "base_ms": 0.4,
        "baselines": {"copy": 0.4},
        "rules": [{"when": "X=3 Y=2", "factor": 0.5}],
        "launch_us": 20000,
    }));
    let mut child = sim.spawn(&[
        "--shape",
        SHAPE,
        "--reps",
        "1",
        "--warmup",
        "0",
        "--confirm-rounds",
        "100",
    ]);
    interrupt_when(
        &mut child,
        Duration::from_secs(60),
        "every result",
        journaled(&sim, 13),
    );
    let ran = finish(child);
    let records = sim.csv(SHAPE);
    assert_eq!(count(&records, Status::Ok), 12, "every measured row kept");
    assert_eq!(record(&records, "copy").status, Status::Ok);
    ran.expect_code(130);
    assert!(ran.stderr.contains("resume with: "), "{}", ran.stderr);
    assert!(!sim.out().join("best.csv").exists(), "best.csv left alone");
}

/// The processes whose parent is `parent` and whose command line holds `arg`.
fn children_running(parent: u32, arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `PID (COMM) STATE PPID ...`: COMM may hold spaces, so read after its last ')'.
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let fields: Vec<&str> = after.split_whitespace().collect();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if fields.get(1) == Some(&parent.to_string().as_str())
            && String::from_utf8_lossy(&cmdline).contains(arg)
        {
            found.push(pid);
        }
    }
    found
}

/// Whether process `pid` still runs (a zombie waiting to be reaped has ended).
fn still_running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    state.is_some_and(|s| !s.starts_with('Z') && !s.starts_with('X'))
}

/// A parent killed outright (`kill -9`, or a second Ctrl-C) while its GPU worker is stuck in
/// a hung kernel: the worker ends within a second or two instead of holding the GPU on.
#[test]
fn a_worker_in_a_hung_kernel_ends_with_its_killed_parent() {
    let sim = Sim::new(json!({"baselines": {"copy": 0.04}, "hang": ["X=1 Y=1"]}));
    let mut child = sim.spawn(&[
        "--shape",
        SHAPE,
        "--param",
        "X=1",
        "--param",
        "Y=1",
        "--watchdog",
        "600",
    ]);
    let parent = child.id();
    let started = Instant::now();
    let workers = loop {
        let found = children_running(parent, "__gpu-worker");
        if !found.is_empty() {
            break found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no GPU worker started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Into the hang: the baselines take well under this.
    std::thread::sleep(Duration::from_secs(2));
    child.kill().expect("the parent is killed");
    child.wait().expect("the parent ends");
    let killed = Instant::now();
    while workers.iter().any(|&w| still_running(w)) && killed.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = workers.into_iter().filter(|&w| still_running(w)).collect();
    for w in &left {
        let _ = Command::new("kill").args(["-9", &w.to_string()]).status();
    }
    assert!(
        left.is_empty(),
        "GPU workers {left:?} outlived their parent by 10 s"
    );
}

// ---------------------------------------------------------------------------------------
// Budgets and limits
// ---------------------------------------------------------------------------------------

/// A time budget (`--budget 1s`) ends the search after the round under way when it ran out:
/// whole rounds of [`SEARCH_BATCH`] were measured, fewer than the 64 configurations, and the
/// rest say the search did not propose them. A budget in an unknown unit is bad input.
#[test]
fn a_time_budget_stops_the_search_and_says_so() {
    // Each variant takes 4 launches of 20 ms (0.4 ms and more a launch, longer than a batch:
    // one launch a sample): a round of SEARCH_BATCH takes longer than the budget.
    let sim = Sim::new(json!({"base_ms": 0.4, "baselines": {"copy": 0.4}, "launch_us": 20000}));
    let ran = sim.run(&[
        "--shape",
        SHAPE,
        "--param",
        "X=1,2,3,4,5,6,7,8",
        "--param",
        "Y=1,2,3,4,5,6,7,8",
        "--strategy",
        "random",
        "--budget",
        "1s",
        "--reps",
        "3",
        "--warmup",
        "1",
        "--confirm-rounds",
        "0",
    ]);
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    let measured = count(&records, Status::Ok);
    assert!(
        measured.is_multiple_of(SEARCH_BATCH) && (SEARCH_BATCH..64).contains(&measured),
        "{measured} measured: whole rounds, not all 64"
    );
    assert_eq!(count(&records, Status::Skipped), 64 - measured);
    for r in variants(&records).filter(|r| r.status == Status::Skipped) {
        assert_eq!(
            r.error,
            "not measured: --strategy random (budget 1 s) did not propose it"
        );
    }
    ran.expect_line(
        "Search: ",
        &format!("Search: random: {measured} of 64 valid configurations measured (budget 1 s, "),
    );
    assert!(
        ran.stderr.contains("searching with random (budget 1 s"),
        "{}",
        ran.stderr
    );

    let bad = sim.run(&["--shape", SHAPE, "--strategy", "random", "--budget", "2x"]);
    bad.expect_code(2);
    assert!(
        bad.stderr
            .contains("invalid budget '2x': unknown time unit"),
        "{}",
        bad.stderr
    );
}

/// A folder holding the fixture op with its spec edited by `spec`, and `sines` dependent
/// sines written out in its kernel where the Tera condition `when` holds: sources NVRTC takes
/// longer over, the more sines the longer.
fn slow_fixture(spec: impl FnOnce(String) -> String, when: &str, sines: usize) -> TempDir {
    let dir = tmp();
    let original = std::fs::read_to_string(repo("tests/fixtures/sim/sim.toml")).unwrap();
    let edited = spec(original.clone());
    assert_ne!(edited, original, "the fixture's spec changed shape");
    std::fs::write(dir.path().join("sim.toml"), edited).unwrap();
    let template = std::fs::read_to_string(repo("tests/fixtures/sim/sim.cu.tera")).unwrap();
    let slow = format!(
        "{{% if {when} %}}    float acc = (float)x;\n{{% for i in range(end={sines}) %}}    acc = sinf(acc * 1.0001f + {{{{ i }}}}.0f);\n{{% endfor %}}    if (acc == 12345.f) out[0] = acc;\n{{% endif %}}"
    );
    let at = "    if (x < cols && y < rows)";
    assert!(
        template.contains(at),
        "the fixture's template changed shape"
    );
    let template = template.replace(at, &format!("{slow}{at}"));
    std::fs::write(dir.path().join("sim.cu.tera"), template).unwrap();
    dir
}

/// A source NVRTC takes far longer over than `--compile-timeout` allows is stopped at the
/// limit and recorded as not compiled; the rest of the space is measured as usual. The slow
/// source is a variant of the sim fixture (in a templates folder written here) whose kernel
/// computes 200 dependent sines, written out, when SLOW=1.
#[test]
fn a_source_past_the_compile_limit_costs_only_its_own_record() {
    // 200 dependent sines: about a minute of NVRTC on a 2-core machine.
    let dir = slow_fixture(
        |spec| {
            spec.replace(
                "[[params]]\nname = \"BROKEN\"",
                "[[params]]\nname = \"SLOW\"\nvalues = [0, 1]\nhelp = \"1: a source NVRTC takes seconds over\"\n\n[[params]]\nname = \"BROKEN\"",
            )
        },
        "SLOW == 1",
        200,
    );

    let mut sim = Sim::new(json!({"baselines": {"copy": 0.04}}));
    sim.templates = dir.path().to_path_buf();
    let started = Instant::now();
    let ran = sim.run(&[
        "--shape",
        SHAPE,
        "--param",
        "X=1,2",
        "--param",
        "Y=1",
        "--compile-timeout",
        "2",
        "--confirm-rounds",
        "0",
    ]);
    let took = started.elapsed();
    ran.expect_code(0);
    let records = sim.csv(SHAPE);
    for label in ["X=1 Y=1 SLOW=1 BROKEN=0", "X=2 Y=1 SLOW=1 BROKEN=0"] {
        let r = record(&records, label);
        let why = r.reason();
        assert_eq!(r.status, Status::NotRun, "{label}: {why}");
        assert!(
            why.starts_with("not compiled: NVRTC ran past the compile time limit (stopped after ")
                && why.ends_with(" s; --compile-timeout sets the limit)"),
            "{label}: {why}"
        );
    }
    for label in ["X=1 Y=1 SLOW=0 BROKEN=0", "X=2 Y=1 SLOW=0 BROKEN=0"] {
        assert_eq!(record(&records, label).status, Status::Ok, "{label}");
    }
    ran.expect_line_has(
        "Top 2 of 2 verified configurations",
        "(4 in the space: 0 failed, 0 pruned, 2 past the compile time limit)",
    );
    assert!(
        took < Duration::from_secs(30),
        "stopped at the limit: {took:?}"
    );
}

/// A search hears each round's heavy compiles (the spec's `compile_cost`) last, and is asked for
/// the next round while they still compile: what it proposes must still not depend on how long
/// they took. The fixture's X=6 sources take NVRTC about ten times the others and are the
/// fastest kernels; the same search run again, every source then read from the cubin cache,
/// measures exactly the same configurations (compiling none) and picks the same winner.
#[test]
fn a_search_proposes_the_same_however_long_its_heavy_compiles_take() {
    // 60 dependent sines: about a second of NVRTC, ten times the plain kernel.
    let dir = slow_fixture(
        |spec| {
            let args_line = "args = [\"out\", \"in\", \"ROWS\", \"COLS\"]\n";
            spec.replacen(
                args_line,
                &format!("{args_line}compile_cost = \"if(X == 6, 100, 1)\"\n"),
                1,
            )
        },
        "X == 6",
        60,
    );

    let model = json!({
        "baselines": {"copy": 0.04},
        "rules": [{"when": "X=6", "factor": 0.6}, {"when": "Y=3", "factor": 0.8}],
    });
    // Both runs share a cubin cache of their own, empty before the first.
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let runs: Vec<Sim> = (0..2)
        .map(|_| {
            let mut sim = Sim::new(model.clone());
            sim.templates = dir.path().to_path_buf();
            sim.cache = cache.clone();
            sim
        })
        .collect();
    let measured = |sim: &Sim| -> Vec<String> {
        let mut ok: Vec<String> = variants(&sim.csv(SHAPE))
            .filter(|r| r.status == Status::Ok)
            .map(|r| r.label())
            .collect();
        ok.sort();
        ok
    };
    // No compile time limit: a heavy source that ran past it in one run and not in the other
    // would differ by its compile speed, not by what the search proposed.
    let mut args = larger_search("model");
    args.extend(["--compile-timeout".to_string(), "0".to_string()]);
    let first = runs[0].run(&strs(&args));
    first.expect_code(0);
    let again = runs[1].run(&strs(&args));
    again.expect_code(0);
    assert_eq!(measured(&runs[0]), measured(&runs[1]));
    assert_eq!(measured(&runs[0]).len(), LARGER_BUDGET);
    assert!(
        measured(&runs[0]).iter().any(|l| l.starts_with("X=6 ")),
        "the heavy configurations were measured"
    );
    let time = again.line("Time: ");
    assert!(
        time.contains(&format!(
            "{LARGER_BUDGET} unique sources, {LARGER_BUDGET} from cache"
        )),
        "{time}"
    );
    let winner = |sim: &Sim| sim.best()[0].params.clone();
    assert_eq!(winner(&runs[0]), winner(&runs[1]));
    assert!(winner(&runs[0]).starts_with("X=6;"), "{}", winner(&runs[0]));
}

// ---------------------------------------------------------------------------------------
// Sweeps over shapes and GPUs
// ---------------------------------------------------------------------------------------

/// The shapes of the sweep tests.
const SHAPES: [&str; 3] = ["64x64", "32x96", "96x32"];

/// A sweep of three shapes (`--shapes FILE`) over both GPUs of a simulated machine: every
/// shape gets its run CSV with every configuration and its best.csv row; both GPUs take work
/// and the summary table names each shape's GPU. `--gpus all` and `--gpus 0,1` alike.
#[test]
fn a_sweep_spreads_its_shapes_over_the_simulated_gpus() {
    for gpus in ["all", "0,1"] {
        let sim = Sim::new(json!({"devices": 2, "baselines": {"copy": 0.04}}));
        let file = sim.tmp.path().join("shapes.txt");
        std::fs::write(
            &file,
            format!(
                "# the sweep\n{}\n\n{}\n{}\n",
                SHAPES[0], SHAPES[1], SHAPES[2]
            ),
        )
        .unwrap();
        let ran = sim.run(&[
            "--shapes",
            file.to_str().unwrap(),
            "--gpus",
            gpus,
            "--confirm-rounds",
            "0",
        ]);
        ran.expect_code(0);
        let mut best: Vec<String> = sim.best().into_iter().map(|r| r.shape).collect();
        best.sort();
        let mut expected: Vec<String> = SHAPES.iter().map(|s| s.to_string()).collect();
        expected.sort();
        assert_eq!(best, expected, "--gpus {gpus}: a best.csv row per shape");
        for shape in SHAPES {
            let records = sim.csv(shape);
            assert_eq!(count(&records, Status::Ok), 12, "--gpus {gpus}: {shape}");
            assert!(
                ran.stdout.contains(&format!("==== {shape} on GPU ")),
                "--gpus {gpus}: {}",
                ran.stdout
            );
        }
        for g in 0..2 {
            assert!(
                ran.stdout.contains(&format!(" on GPU {g}\n")),
                "--gpus {gpus}: GPU {g} took no shape:\n{}",
                ran.stdout
            );
        }
        let table = ran
            .stdout
            .split("\nSummary:\n")
            .nth(1)
            .expect("a summary table");
        for shape in SHAPES {
            assert!(
                table.contains(&format!("{shape} (GPU 0)"))
                    || table.contains(&format!("{shape} (GPU 1)")),
                "--gpus {gpus}: {table}"
            );
        }
    }
}

/// The shards of one sweep merge whatever order each was given its `--param` options in: the
/// same overrides are the same space.
#[test]
fn shards_given_their_params_in_another_order_merge() {
    let sim = Sim::new(json!({"baselines": {"copy": 0.04}}));
    let dir = |k: usize| sim.tmp.path().join(format!("shard-{k}"));
    let orders = [
        ["--param", "X=1,2", "--param", "Y=1,2"],
        ["--param", "Y=1,2", "--param", "X=1,2"],
    ];
    for (k, params) in orders.iter().enumerate() {
        let out = sim
            .tune()
            .arg("--templates")
            .arg(&sim.templates)
            .args(["--op", "sim", "--shape", SHAPE])
            .args(params)
            .args(["--shard", &format!("{k}/2"), "--out"])
            .arg(dir(k))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let out = sim
        .tune()
        .arg("merge")
        .args([dir(0), dir(1)])
        .arg("--out")
        .arg(sim.tmp.path().join("merged"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let merged = read_best(&sim.tmp.path().join("merged/best.csv")).unwrap();
    assert_eq!(merged.len(), 1);
}

/// A compile-only sweep ends the same way on one GPU and spread over two: 0 when every source
/// compiled (a compile-only run has no winner to find), 1 with the count when some did not.
#[test]
fn a_compile_only_sweep_exits_alike_on_one_gpu_and_on_two() {
    let sim = Sim::new(json!({"devices": 2}));
    let shapes = SHAPES.join(",");
    for gpus in ["0", "0,1"] {
        let ok = sim.run(&["--shape", &shapes, "--gpus", gpus, "--compile-only"]);
        ok.expect_code(0);
        let broken = sim.run(&[
            "--shape",
            &shapes,
            "--gpus",
            gpus,
            "--compile-only",
            "--param",
            "BROKEN=0,1",
        ]);
        broken.expect_code(1);
        assert!(
            broken.stderr.contains("variant(s) failed to compile"),
            "--gpus {gpus}: {}",
            broken.stderr
        );
    }
}

/// A sweep on one GPU tunes every shape on one worker process, and so does each GPU of a
/// sweep over several: a throttled reading planted once per process shows in one shape per
/// GPU only, where a worker per shape would show it in every shape.
#[test]
fn a_sweep_keeps_each_gpus_worker_from_shape_to_shape() {
    for devices in [1, 2] {
        let sim = Sim::new(json!({
            "devices": devices,
            "baselines": {"copy": 0.04},
            "throttle": [{"when": "X=2 Y=1"}],
        }));
        let mut args = vec![
            "--shape",
            "64x64,32x96,96x32,48x48",
            "--confirm-rounds",
            "0",
        ];
        if devices > 1 {
            args.extend(["--gpus", "all"]);
        }
        let ran = sim.run(&args);
        ran.expect_code(0);
        let flagged = ["64x64", "32x96", "96x32", "48x48"]
            .iter()
            .filter(|shape| record(&sim.csv(shape), "X=2 Y=1 BROKEN=0").error == THROTTLED)
            .count();
        let used = (0..devices)
            .filter(|g| devices == 1 || ran.stdout.contains(&format!(" on GPU {g}\n")))
            .count();
        assert_eq!(flagged, used, "{devices} GPU(s):\n{}", ran.stdout);
    }
}

/// `--gpus 0,2` on a machine with two GPUs is bad input (exit code 2), said in one line
/// before anything runs.
#[test]
fn gpus_the_simulated_machine_lacks_are_refused() {
    let sim = Sim::new(json!({"devices": 2}));
    let ran = sim.run(&["--shape", SHAPE, "--gpus", "0,2"]);
    ran.expect_code(2);
    assert_eq!(
        ran.stderr.trim(),
        "error: --gpus: device 2 does not exist (this machine has 2: 0..1)"
    );
    assert!(!sim.out().exists(), "nothing was run");
}

/// Runs a `--gpus all` sweep of `failing` and then `others` on `sim`'s two devices, where
/// `failing` fails: asserts that it fails once and alone (exit 1, no GPU taken out, every other
/// shape tuned and stored) and returns that shape's one error line.
fn one_shape_fails_in_a_sweep(sim: &Sim, failing: &str, others: &[&str]) -> (Ran, String) {
    let shapes = format!("{failing},{}", others.join(","));
    let ran = sim.run(&["--shape", &shapes, "--gpus", "all", "--confirm-rounds", "0"]);
    ran.expect_code(1);
    assert!(
        !ran.stderr.contains("takes no more work"),
        "no GPU was taken out:\n{}",
        ran.stderr
    );
    let prefix = format!("error: {failing} on GPU ");
    let errors: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .collect();
    assert_eq!(errors.len(), 1, "{failing} failed once:\n{}", ran.stderr);
    let error = errors[0].to_string();
    for shape in others {
        assert_eq!(count(&sim.csv(shape), Status::Ok), 12, "{shape}");
    }
    let mut best: Vec<String> = sim.best().into_iter().map(|r| r.shape).collect();
    best.sort();
    let mut expected: Vec<String> = others.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(best, expected);
    (ran, error)
}

/// An error of one shape is that shape's: a shape too large for the GPUs' free memory fails
/// once, on the GPU that took it, and that GPU goes on with the next shapes. Only an error of
/// the device (its worker cannot start, the device is lost) takes a GPU out of a sweep.
#[test]
fn a_shape_too_large_for_the_gpu_fails_alone_and_its_gpu_goes_on() {
    // 8192x8192 needs three buffers of 256 MiB; the small shapes fit in 300 MiB.
    let sim = Sim::new(json!({
        "devices": 2,
        "free_mem": 300u64 << 20,
        "baselines": {"copy": 0.04},
    }));
    let small = ["64x64", "128x64", "64x128", "128x128", "96x96"];
    let (ran, error) = one_shape_fails_in_a_sweep(&sim, "8192x8192", &small);
    assert!(
        error.contains("MiB of GPU memory but only 300 MiB are free"),
        "{error}"
    );
    let failed_on = error
        .strip_prefix("error: 8192x8192 on GPU ")
        .and_then(|rest| rest.split(':').next())
        .expect("the GPU of the failure");
    assert!(
        ran.stdout.contains(&format!(" on GPU {failed_on}\n")),
        "GPU {failed_on} tuned no shape after the one that did not fit:\n{}",
        ran.stdout
    );
}

/// A CUDA error in a GPU worker's set-up of one job is that job's, as it is in-process: the
/// worker reports it as the job's failure, not as a device that cannot be used, so the shape
/// fails once and its GPU goes on with the next shapes.
#[test]
fn a_shape_whose_set_up_fails_in_a_worker_fails_alone_and_its_gpu_goes_on() {
    let sim = Sim::new(json!({
        "devices": 2,
        "setup_error": ["96x96"],
        "baselines": {"copy": 0.04},
    }));
    let others = ["64x64", "128x64", "64x128", "128x128"];
    let (_, error) = one_shape_fails_in_a_sweep(&sim, "96x96", &others);
    assert!(
        error.contains("CUDA error during the job's set-up: CUDA_ERROR_OUT_OF_MEMORY"),
        "{error}"
    );
    assert!(!error.contains("no CUDA GPU is usable"), "{error}");
}

/// The compile-only CSVs `--out` holds, by file name.
fn compile_only_csvs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with("-compile-only.csv"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A prebuild (`--compile-only --shard K/N`, run before the GPU shards of the same arguments)
/// records the variants that do not compile, one row each, as the GPU run does, and exits 0,
/// also when one shape's share compiled none of its sources; it exits 1 only when nothing of
/// its share compiled. An unsharded compile-only run fails on any failed compile.
#[test]
fn a_prebuild_records_failed_compiles_and_fails_only_when_nothing_compiled() {
    let sim = Sim::new(json!({}));
    // Shard 1 of 3 holds BROKEN=0 and BROKEN=1 variants of the shape.
    let mixed = sim.run(&[
        "--shape",
        SHAPE,
        "--param",
        "BROKEN=0,1",
        "--compile-only",
        "--shard",
        "1/3",
    ]);
    mixed.expect_code(0);
    let failed = mixed
        .stdout
        .lines()
        .filter(|l| l.starts_with("  FAILED "))
        .count();
    assert!(failed > 0, "{}", mixed.stdout);
    assert!(
        mixed.stdout.contains(" variants compiled ("),
        "{}",
        mixed.stdout
    );
    let warning: Vec<&str> = mixed
        .stderr
        .lines()
        .filter(|l| l.contains("failed to compile"))
        .collect();
    assert_eq!(
        warning,
        [format!(
            "warning: {SHAPE}: {failed} variant(s) failed to compile (recorded in the \
             compile-only CSV, as a GPU run records them)"
        )],
        "{}",
        mixed.stderr
    );
    assert_eq!(
        compile_only_csvs(&sim.out()),
        ["sim_64x64_sm-90-shard-1-of-3-compile-only.csv"]
    );
    // Two shapes split by variants, shard 1 of 2: the first shape's share is every BROKEN=1
    // variant, the second's every BROKEN=0 one. The shard compiled something: exit 0.
    let half = sim.run(&[
        "--shape",
        "64x64,32x96",
        "--param",
        "BROKEN=0,1",
        "--compile-only",
        "--shard",
        "1/2",
    ]);
    half.expect_code(0);
    assert!(
        half.stdout.contains(": 0 variants compiled (") && half.stdout.contains(" 0 failed, "),
        "{}",
        half.stdout
    );
    // Nothing of the share compiled: exit 1, said in one line.
    let none = sim.run(&[
        "--shape",
        SHAPE,
        "--param",
        "BROKEN=1",
        "--compile-only",
        "--shard",
        "1/2",
    ]);
    none.expect_code(1);
    let errors: Vec<&str> = none
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(
        errors,
        ["error: shard 1/2 compiled none of its 6 variant(s) (6 failed to compile)"],
        "{}",
        none.stderr
    );
    // An empty share (one variant, owned by shard 0) compiles nothing and fails nothing.
    sim.run(&[
        "--shape",
        SHAPE,
        "--param",
        "X=1",
        "--param",
        "Y=1",
        "--compile-only",
        "--shard",
        "1/2",
    ])
    .expect_code(0);
    // Unsharded, a failed compile fails the run.
    let whole = sim.run(&["--shape", SHAPE, "--param", "BROKEN=0,1", "--compile-only"]);
    whole.expect_code(1);
    assert!(
        whole
            .stderr
            .contains("error: 64x64: 12 variant(s) failed to compile"),
        "{}",
        whole.stderr
    );
}

/// `--shard 0/1`, one shard holding the whole sweep, tunes as an unsharded run does: its
/// leaders are confirmed in interleaved rounds, so the merged best.csv row has the unsharded
/// run's winner, runner-up and tie.
#[test]
fn a_single_shard_confirms_its_leaders_as_an_unsharded_run_does() {
    let equal = leader_rules(40);
    let sim = Sim::new(flat_model(1, equal));
    confirm_run(&sim);
    let whole = sim.best().remove(0);
    assert!(whole.tie, "the planted equals tie");
    let shard = sim.tmp.path().join("shard-0");
    let out = sim
        .tune()
        .arg("--templates")
        .arg(&sim.templates)
        .args(["--op", "sim", "--shape", SHAPE, "--confirm-rounds", "40"])
        .args(["--shard", "0/1", "--out"])
        .arg(&shard)
        .output()
        .unwrap();
    let ran = ran(out);
    ran.expect_code(0);
    let merged_dir = sim.tmp.path().join("merged");
    let out = sim
        .tune()
        .arg("merge")
        .arg(&shard)
        .arg("--out")
        .arg(&merged_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let merged = read_best(&merged_dir.join("best.csv")).unwrap();
    assert_eq!(merged.len(), 1);
    let row = |r: &BestRow| (r.params.clone(), r.runner_up.clone(), r.tie);
    assert_eq!(row(&merged[0]), row(&whole));
    assert!(ran
        .line("Confidence: ")
        .starts_with("Confidence: tied with 1 other(s)"));
}
