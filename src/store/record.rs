//! The records of a run: one per configuration or baseline, with its status and result, and
//! the run's description ([`RunInfo`]).

use crate::measure::bench::Stats;
use serde::{Deserialize, Serialize};

/// Outcome of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Compiled, verified and timed.
    Ok,
    /// Render, compile, launch or verification failed; `error` says which and why.
    Failed,
    /// Removed by a constraint before compiling; `error` holds the reason.
    Pruned,
    /// Valid, but a search strategy did not propose it within its budget.
    Skipped,
    /// Proposed, but never compiled or run: the run was stopped (Ctrl-C) or its GPU path
    /// failed first; `error` says which.
    NotRun,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Pruned => "pruned",
            Status::Skipped => "skipped",
            Status::NotRun => "not_run",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Status> {
        match s {
            "ok" => Some(Status::Ok),
            "failed" => Some(Status::Failed),
            "pruned" => Some(Status::Pruned),
            "skipped" => Some(Status::Skipped),
            "not_run" => Some(Status::NotRun),
            _ => None,
        }
    }
}

/// What a record is about: a configuration of the tuned space, or one of the op's reference
/// kernels. The run CSV's `kind` column holds [`Kind::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Variant,
    Baseline,
}

impl Kind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Kind::Variant => "variant",
            Kind::Baseline => "baseline",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Kind> {
        match s {
            "variant" => Some(Kind::Variant),
            "baseline" => Some(Kind::Baseline),
            _ => None,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The start of the reason a source past the compile time limit has no image.
const PAST_LIMIT: &str = "not compiled: NVRTC ran past the compile time limit";
/// What stands between [`PAST_LIMIT`] and the seconds in [`Note::PastLimit`]'s text: the
/// seconds are how long NVRTC ran before it was stopped, not the limit.
const PAST_LIMIT_AFTER: &str = " (stopped after ";
/// What follows the seconds in [`Note::PastLimit`]'s text.
const PAST_LIMIT_END: &str = " s; --compile-timeout sets the limit)";
/// The older text form around the seconds (`... limit (0.1 s; --compile-timeout sets it)`),
/// which run CSVs may hold: read back as the same note.
const PAST_LIMIT_EARLIER: (&str, &str) = (" (", " s; --compile-timeout sets it)");
/// The reason of a variant whose compile the time budget abandoned.
const BUDGET_SPENT: &str = "not compiled: the --budget time ran out before its compile started";

/// A reason the run itself acts on, typed so that it can be matched; every other reason is
/// text in [`Record::error`]. The run CSV's `error` column holds its text ([`Record::reason`]),
/// and reading a run CSV gives the note back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Note {
    /// Not compiled: NVRTC ran past the compile time limit, after this many seconds. The stop
    /// (Ctrl-C, or a failure that ends the rounds) leaves this reason as it is, and the
    /// summary counts these apart.
    PastLimit { seconds: f64 },
    /// Not compiled: the `--budget` time ran out before its compile started (the summary of a
    /// compile-only run counts these apart).
    BudgetSpent,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::PastLimit { seconds } => {
                write!(
                    f,
                    "{PAST_LIMIT}{PAST_LIMIT_AFTER}{seconds:.1}{PAST_LIMIT_END}"
                )
            }
            Note::BudgetSpent => f.write_str(BUDGET_SPENT),
        }
    }
}

impl Note {
    /// The note whose text is exactly `text`, if any (the inverse of its `Display`; the
    /// older text form of [`Note::PastLimit`] is read too).
    pub fn parse(text: &str) -> Option<Note> {
        if text == BUDGET_SPENT {
            return Some(Note::BudgetSpent);
        }
        let rest = text.strip_prefix(PAST_LIMIT)?;
        [(PAST_LIMIT_AFTER, PAST_LIMIT_END), PAST_LIMIT_EARLIER]
            .into_iter()
            .find_map(|(start, end)| {
                let figure = rest.strip_prefix(start)?.strip_suffix(end)?;
                let seconds = figure.parse::<f64>().ok()?;
                // Only the text the note is written as: one decimal, nothing around it.
                (format!("{seconds:.1}") == figure).then_some(Note::PastLimit { seconds })
            })
    }
}

/// One row of a run's CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub kind: Kind,
    /// `v0042` (index in the space) or the baseline's name.
    pub name: String,
    pub params: Vec<(String, String)>,
    pub status: Status,
    /// Why the record has no result (or a warning about it), as text; empty when `note` says
    /// why instead.
    pub error: String,
    /// Why the record has no result, where the run acts on it; `error` is empty then.
    pub note: Option<Note>,
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

/// A baseline's time as a roof: the faster of its first timing's median and its median over
/// the interleaved rounds (when it ran in them). A cuBLAS call times slower between other
/// kernels than back to back, and a first timing taken launch by launch (start-up included)
/// slower than the batched rounds: neither way of timing a roof may make a kernel look closer
/// to it than it is.
pub fn roof_median(r: &Record) -> Option<f64> {
    let first = r.stats?.median_ms;
    Some(r.confirm.map_or(first, |c| c.median_ms.min(first)))
}

/// The roof of a run: which baseline, its time ([`roof_median`]), and whether it ran in the
/// interleaved rounds (so that a leader re-timed there is compared over the same rounds).
#[derive(Debug, Clone, PartialEq)]
pub struct Roof {
    pub name: String,
    pub ms: f64,
    pub in_rounds: bool,
}

/// The fastest verified record of `eligible` (the baselines that may be the roof), each taken
/// at its [`roof_median`]: one rule for a run and for a merge of shards.
pub fn fastest_roof<'a>(eligible: impl IntoIterator<Item = &'a Record>) -> Option<Roof> {
    eligible
        .into_iter()
        .filter(|r| r.status == Status::Ok)
        .filter_map(|r| {
            roof_median(r).map(|ms| Roof {
                name: r.name.clone(),
                ms,
                in_rounds: r.confirm.is_some(),
            })
        })
        .min_by(|a, b| a.ms.total_cmp(&b.ms))
}

/// Every record's fraction of `roof`: when the roof ran in the interleaved rounds, a variant
/// re-timed in those rounds is taken at its median there; a baseline is taken by
/// [`roof_median`], any other record at its first timing. Unverified records get none.
pub fn set_fracs_of_roof(records: &mut [Record], roof: &Roof) {
    for r in records {
        let ms = match (r.kind, r.confirm) {
            (Kind::Variant, Some(c)) if roof.in_rounds => Some(c.median_ms),
            (Kind::Baseline, _) => roof_median(r),
            _ => r.stats.map(|s| s.median_ms),
        };
        r.frac_of_roof = ms.filter(|_| r.status == Status::Ok).map(|ms| roof.ms / ms);
    }
}

impl Record {
    /// A record with no outcome yet (status `pruned`, no error): callers fill in the rest.
    pub fn new(kind: Kind, name: &str, params: Vec<(String, String)>) -> Record {
        Record {
            kind,
            name: name.into(),
            params,
            status: Status::Pruned,
            error: String::new(),
            note: None,
            stats: None,
            throughput: None,
            frac_of_roof: None,
            compile_ms: None,
            registers: None,
            confirm: None,
        }
    }

    /// The record's reason as the run CSV's `error` column holds it: its note's text, else
    /// `error`.
    pub fn reason(&self) -> std::borrow::Cow<'_, str> {
        match &self.note {
            Some(note) => note.to_string().into(),
            None => self.error.as_str().into(),
        }
    }

    /// Sets the reason to `note` (and clears any text).
    pub fn set_note(&mut self, note: Note) {
        self.note = Some(note);
        self.error.clear();
    }

    /// Sets the reason to the text `why` (and clears any note).
    pub fn set_error(&mut self, why: impl Into<String>) {
        self.error = why.into();
        self.note = None;
    }

    /// Fails a record that had verified and been timed, when a later check of it failed
    /// (the confirmation's, a re-measure's): a timing of a kernel that is not verified is no
    /// result, so it goes with the status.
    pub fn fail_after_timing(&mut self, why: impl Into<String>) {
        self.status = Status::Failed;
        self.set_error(why);
        self.stats = None;
        self.throughput = None;
        self.frac_of_roof = None;
        self.confirm = None;
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The CUDA version the driver supports (`13.0`), as `best.csv`'s `driver` column.
    pub driver: String,
    pub nvrtc: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::bench::Stats;

    fn timed(kind: Kind, name: &str, ms: f64, in_rounds: Option<f64>) -> Record {
        let mut r = Record::new(kind, name, Vec::new());
        r.status = Status::Ok;
        r.stats = Stats::from_samples(&[ms, ms, ms]);
        r.confirm = in_rounds.map(|median_ms| Confirmed {
            median_ms,
            vs_winner_pct: 0.0,
            ci_low_pct: 0.0,
            ci_high_pct: 0.0,
            tied: false,
            winner: false,
        });
        r
    }

    /// A note's text reads back as the note; a past-limit note says the seconds are how long
    /// NVRTC ran, and the text earlier run CSVs hold reads back as the same note.
    #[test]
    fn notes_read_back_from_their_text() {
        let note = Note::PastLimit { seconds: 0.1 };
        let text = note.to_string();
        assert_eq!(
            text,
            "not compiled: NVRTC ran past the compile time limit (stopped after 0.1 s; \
             --compile-timeout sets the limit)"
        );
        assert_eq!(Note::parse(&text), Some(note));
        let earlier =
            "not compiled: NVRTC ran past the compile time limit (0.1 s; --compile-timeout sets it)";
        assert_eq!(Note::parse(earlier), Some(note));
        assert_eq!(Note::parse(BUDGET_SPENT), Some(Note::BudgetSpent));
        for other in [
            "not compiled: NVRTC ran past the compile time limit (0.10 s; --compile-timeout sets it)",
            "not compiled: NVRTC ran past the compile time limit (stopped after x s; \
             --compile-timeout sets the limit)",
            "compile: error",
        ] {
            assert_eq!(Note::parse(other), None, "{other}");
        }
    }

    /// The roof counts at the faster of its two medians; a re-timed variant is taken at its
    /// median over the rounds, any other variant at its first timing; a roof that did not run
    /// in the rounds leaves every variant on first timings; an unverified record has none.
    #[test]
    fn each_fraction_of_the_roof_takes_the_roof_at_its_faster_median() {
        let mut records = vec![
            timed(Kind::Baseline, "cublas_sgemm", 1.0, Some(1.1)),
            timed(Kind::Variant, "v1", 2.0, Some(2.5)),
            timed(Kind::Variant, "v2", 4.0, None),
            Record::new(Kind::Variant, "v3", Vec::new()),
        ];
        // Slower over the rounds: the first timing counts.
        let roof = fastest_roof(&records[..1]).unwrap();
        assert_eq!((roof.ms, roof.in_rounds), (1.0, true));
        set_fracs_of_roof(&mut records, &roof);
        let fracs: Vec<Option<f64>> = records.iter().map(|r| r.frac_of_roof).collect();
        assert_eq!(fracs, [Some(1.0), Some(0.4), Some(0.25), None]);
        // Faster over the rounds (its first timing was taken launch by launch): those count.
        records[0].stats = Stats::from_samples(&[1.25, 1.25, 1.25]);
        records[0].confirm.as_mut().unwrap().median_ms = 1.0;
        assert_eq!(fastest_roof(&records[..1]).unwrap().ms, 1.0);
        set_fracs_of_roof(&mut records, &roof);
        let fracs: Vec<Option<f64>> = records.iter().map(|r| r.frac_of_roof).collect();
        assert_eq!(fracs, [Some(1.0), Some(0.4), Some(0.25), None]);
        // The roof did not run in the rounds: first timings throughout.
        let first_only = Roof {
            in_rounds: false,
            ..roof
        };
        set_fracs_of_roof(&mut records, &first_only);
        assert_eq!(records[1].frac_of_roof, Some(0.5));
    }

    /// Of several eligible baselines the roof is the one with the fastest of their faster
    /// medians; an unverified one is never the roof, however fast it was timed.
    #[test]
    fn the_roof_is_the_eligible_baseline_with_the_fastest_faster_median() {
        let mut broken = timed(Kind::Baseline, "copy", 0.5, None);
        broken.status = Status::Failed;
        let records = [
            timed(Kind::Baseline, "memcpy", 1.0, None),
            // Slower first timed, faster over the rounds: 0.9 stands.
            timed(Kind::Baseline, "copy_vec4", 1.2, Some(0.9)),
            broken,
        ];
        let roof = fastest_roof(&records).unwrap();
        assert_eq!(roof.name, "copy_vec4");
        assert_eq!((roof.ms, roof.in_rounds), (0.9, true));
        assert_eq!(fastest_roof(&records[2..]), None);
    }
}
