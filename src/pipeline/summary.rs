//! What a run prints on stdout: the baselines table, the top configurations, the best one
//! and where the files went. Progress goes to stderr (indicatif), so stdout can be piped.

use crate::pipeline::outcome::TuneOutcome;
use crate::store::record::{Kind, Note, Record, RunInfo, Status};
use std::fmt::Write;

fn pct(x: Option<f64>) -> String {
    x.map(|f| format!("{:.1}%", f * 100.0))
        .unwrap_or_else(|| "-".into())
}

fn num(x: Option<f64>, digits: usize) -> String {
    x.map(|v| format!("{v:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

fn count(records: &[Record], status: Status) -> usize {
    records
        .iter()
        .filter(|r| r.kind == Kind::Variant && r.status == status)
        .count()
}

/// The full report of a GPU run.
pub fn render(o: &TuneOutcome, top: usize, verbose: bool) -> String {
    let mut s = String::new();
    let Some(info) = &o.info else {
        return render_compile_only(o, verbose);
    };
    write_heading(&mut s, o, info);
    write_baselines(&mut s, o, info);
    write_ranking(&mut s, o, info, top);
    write_failures(&mut s, o, verbose);
    write_winner(&mut s, o, info);
    write_run_notes(&mut s, o);
    s
}

/// What was measured, on what, and how outputs were checked.
fn write_heading(s: &mut String, o: &TuneOutcome, info: &RunInfo) {
    let cc = &info.compute_capability;
    let _ = writeln!(
        s,
        "{} {} {} on {} (cc {cc}), L2 {}, {} reps, median of CUDA-event times",
        info.op,
        info.shape,
        info.dtype,
        info.gpu,
        if info.cache == "cold" {
            "flushed before each launch (cold)"
        } else {
            "not flushed (warm)"
        },
        info.reps
    );
    let _ = writeln!(
        s,
        "Every output verified before timing: {}; outputs poisoned with NaN first.",
        o.verification
    );
}

/// The baselines' table, with the roof.
fn write_baselines(s: &mut String, o: &TuneOutcome, info: &RunInfo) {
    let unit = &info.unit;
    let baselines: Vec<&Record> = o
        .records
        .iter()
        .filter(|r| r.kind == Kind::Baseline)
        .collect();
    if !baselines.is_empty() {
        let _ = writeln!(
            s,
            "\nBaselines (roof = the fastest verified baseline marked as roof: {}):",
            if info.roof.is_empty() {
                "none verified"
            } else {
                &info.roof
            }
        );
        let _ = writeln!(
            s,
            "  {:<20} {:>11} {:>10} {:>9}  status",
            "kernel", "median ms", unit, "% roof"
        );
        for r in baselines {
            let _ = writeln!(
                s,
                "  {:<20} {:>11} {:>10} {:>9}  {}",
                r.name,
                num(r.stats.map(|x| x.median_ms), 4),
                num(r.throughput, 1),
                pct(r.frac_of_roof),
                if r.status == Status::Ok {
                    "verified".to_string()
                } else {
                    format!("FAILED: {}", r.error)
                }
            );
        }
    }
}

/// Variants not compiled because NVRTC ran past the compile time limit.
pub fn past_limit(o: &TuneOutcome) -> usize {
    o.records
        .iter()
        .filter(|r| r.status == Status::NotRun && matches!(r.note, Some(Note::PastLimit { .. })))
        .count()
}

/// The counts of the space and the table of the `top` fastest verified configurations.
fn write_ranking(s: &mut String, o: &TuneOutcome, info: &RunInfo, top: usize) {
    let unit = &info.unit;
    let mut ok: Vec<&Record> = o
        .records
        .iter()
        .filter(|r| r.kind == Kind::Variant && r.status == Status::Ok)
        .collect();
    ok.sort_by(|a, b| {
        let key = |r: &Record| r.stats.map(|x| x.median_ms).unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b))
    });
    let (failed, pruned, skipped, not_run) = (
        count(&o.records, Status::Failed),
        pruned_count(o),
        count(&o.records, Status::Skipped),
        count(&o.records, Status::NotRun),
    );
    let total = ok.len() + failed + pruned + skipped + not_run;
    let mut not_searched = String::new();
    if skipped > 0 {
        not_searched += &format!(", {skipped} not searched");
    }
    let past = past_limit(o);
    if not_run > past {
        not_searched += &format!(", {} not run", not_run - past);
    }
    if past > 0 {
        not_searched += &format!(", {past} past the compile time limit");
    }
    let _ = writeln!(
        s,
        "\nTop {} of {} verified configurations ({total} in the space: {failed} failed, {pruned} pruned{not_searched}):",
        top.min(ok.len()),
        ok.len()
    );
    if let Some(search) = &o.search {
        let rank = match o.model_rank {
            Some((r, n)) => format!("; its model's first fit ranked the winner {r} of {n}"),
            None => String::new(),
        };
        let _ = writeln!(s, "Search: {search}{rank}.");
    }
    let names = &o.param_names;
    let mut header = format!("  {:>4}", "rank");
    for n in names {
        let _ = write!(header, " {:>w$}", n, w = n.len().max(6));
    }
    let _ = writeln!(
        s,
        "{header} {:>10} {:>10} {:>7} {:>9} {:>7} {:>5}",
        "median ms", "min ms", "spread", unit, "% roof", "regs"
    );
    for (rank, r) in ok.iter().take(top).enumerate() {
        let mut line = format!("  {:>4}", rank + 1);
        for n in names {
            let v = r
                .params
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            let _ = write!(line, " {:>w$}", v, w = n.len().max(6));
        }
        let st = r.stats.expect("ok records have stats");
        let _ = writeln!(
            s,
            "{line} {:>10.4} {:>10.4} {:>6.1}% {:>9.1} {:>7} {:>5}",
            st.median_ms,
            st.min_ms,
            st.spread_pct,
            r.throughput.unwrap_or_default(),
            pct(r.frac_of_roof),
            r.registers.map(|x| x.to_string()).unwrap_or_default()
        );
    }
    let batches: Vec<usize> = ok
        .iter()
        .take(top)
        .filter_map(|r| r.stats.map(|st| st.batch))
        .filter(|b| *b > 1)
        .collect();
    if let (Some(lo), Some(hi)) = (batches.iter().min(), batches.iter().max()) {
        let n = if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        };
        let _ = writeln!(
            s,
            "  ({} of these launch in under {} µs: timed in CUDA-graph batches of {n} launches; \
             times and spread are per launch, spread over batches; column batch of the CSV)",
            batches.len(),
            crate::measure::bench::BATCH_BELOW_MS * 1e3
        );
    }
}

/// The failed configurations (the first five unless `verbose`) and, when `verbose`, the
/// prune reasons.
fn write_failures(s: &mut String, o: &TuneOutcome, verbose: bool) {
    let failed = count(&o.records, Status::Failed);
    if failed > 0 {
        let _ = writeln!(s, "\nFailed configurations ({failed}; reasons in the CSV):");
        for r in o
            .records
            .iter()
            .filter(|r| r.kind == Kind::Variant && r.status == Status::Failed)
            .take(if verbose { usize::MAX } else { 5 })
        {
            let err: String = crate::spec::ops::one_line(&r.error)
                .chars()
                .take(160)
                .collect();
            let _ = writeln!(s, "  {}: {err}", r.label());
        }
    }
    if verbose && !o.prune_reasons.is_empty() {
        let _ = writeln!(s, "\nPruned by constraints:");
        for (reason, n) in &o.prune_reasons {
            let _ = writeln!(s, "  {n:>5} × {reason}");
        }
    }
}

/// The winner, a noisy roof, and how sure the run is of its winner.
fn write_winner(s: &mut String, o: &TuneOutcome, info: &RunInfo) {
    let unit = &info.unit;
    match o.best.map(|i| &o.records[i]) {
        Some(b) => {
            let st = b.stats.expect("best has stats");
            let _ = writeln!(
                s,
                "\nBest: {}  {:.1} {unit}, {} of {} ({:.4} ms median, {:.4} ms min)",
                b.label(),
                b.throughput.unwrap_or_default(),
                pct(b.frac_of_roof),
                if info.roof.is_empty() {
                    "roof"
                } else {
                    &info.roof
                },
                st.median_ms,
                st.min_ms
            );
            if let Some(line) = roof_in_rounds_line(o, b, &info.roof) {
                let _ = writeln!(s, "{line}");
            }
        }
        None => {
            let _ = writeln!(
                s,
                "\nNo configuration verified: nothing is reported as best."
            );
        }
    }
    if let Some(line) = noisy_roof_line(&o.records, &info.roof) {
        let _ = writeln!(s, "{line}");
    }
    if let Some(line) = o.best.and_then(|at| noisy_winner_line(&o.records, at)) {
        let _ = writeln!(s, "{line}");
    }
    if let Some(c) = &o.confidence {
        let label = |at: usize| o.records[at].label();
        let runner_up = c.runner_up.as_ref().map(|(_, cmp)| cmp);
        if let Some(why) = too_noisy_to_rank(c.winner_iqr_pct, runner_up, c.rounds) {
            let _ = writeln!(s, "Confidence: {why}.");
        } else if c.tied_with.is_empty() {
            if let Some((at, cmp)) = c.runner_up {
                let _ = writeln!(
                    s,
                    "Confidence: re-timed interleaved ({} rounds, {} leaders): ahead by {:.1}% (the runner-up {} takes that much longer; 95% CI {:.1}..{:.1}%)",
                    c.rounds,
                    c.candidates.len(),
                    cmp.slower_pct,
                    label(at),
                    cmp.ci_low_pct,
                    cmp.ci_high_pct
                );
            }
        } else {
            let others: Vec<String> = c.tied_with.iter().map(|&at| label(at)).collect();
            let rule = if c.kept_stored {
                "kept the stored winner (the tie rule keeps it unless it is shown slower than the fastest by more than twice the band)"
            } else {
                "picked by the tie rule (the stored winner unless clearly beaten, else fewest registers, then first in the space)"
            };
            let _ = writeln!(
                s,
                "Confidence: tied with {} other(s) over {} interleaved rounds (not slower by more than {:.1}% at 95% confidence): {}; {rule}",
                c.tied_with.len(),
                c.rounds,
                c.band_pct,
                others.join(" | ")
            );
        }
    }
}

/// Clocks, warm-ups, re-measuring, resuming, context restarts, the files written and the
/// time each phase took.
fn write_run_notes(s: &mut String, o: &TuneOutcome) {
    match &o.clocks {
        Some(c) => {
            let _ = writeln!(
                s,
                "Clocks (NVML, after each variant): SM steady {} MHz (min {}, max {}), memory {} MHz, max {} °C; {} of {} readings throttled or >10% below steady{}",
                c.steady_sm_mhz,
                c.min_sm_mhz,
                c.max_sm_mhz,
                c.mem_mhz,
                c.max_temp_c,
                c.flagged,
                c.samples,
                if c.flagged > 0 { " (flagged in the CSV)" } else { "" }
            );
        }
        None if o.info.is_some() => {
            let _ = writeln!(s, "Clocks: not read (NVML could not be loaded).");
        }
        None => {}
    }
    if let Some(line) = warmup_line(&o.warmups) {
        let _ = writeln!(s, "{line}");
    }
    if let Some(r) = &o.remeasured {
        let _ = writeln!(
            s,
            "Re-measured {} results after throttling ({} of {} timed results were flagged, over {:.0}%; after a {} s pause): {} still flagged{}.",
            r.retimed,
            r.flagged,
            r.readings,
            crate::measure::clocks::REMEASURE_ABOVE * 100.0,
            crate::pipeline::options::REMEASURE_PAUSE.as_secs_f64(),
            r.still_flagged,
            if r.still_flagged > 0 { " (their first result stands, flagged in the CSV)" } else { "" }
        );
    }
    if o.reused > 0 {
        let _ = writeln!(
            s,
            "Resumed: {} results reused from {}.",
            o.reused,
            o.journal_path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
    }
    if o.context_restarts > 0 {
        let _ = writeln!(
            s,
            "CUDA context restarted {} time(s) after faulting variants.",
            o.context_restarts
        );
    }
    if let Some(p) = &o.csv_path {
        let _ = write!(s, "Results: {}", p.display());
        if let Some(b) = &o.best_path {
            let _ = write!(s, " and {}", b.display());
        }
        let _ = writeln!(s);
    }
    let p = o.phases;
    // The rest: starting the search, compiling the checker and the baselines, the journal.
    let other =
        p.total_s - p.setup_s - p.search_s - p.compile_s - p.gpu_s - p.confirm_s - p.write_s;
    let _ = writeln!(
        s,
        "Time: {:.2} s total (setup {:.2} s, search {:.2} s, waiting for the compiler {:.2} s for {} unique sources, {} from cache; GPU {:.2} s: verify {:.2} s, timing {:.2} s, worker, data and launches {:.2} s; confirming {:.2} s; writing {:.2} s; other {:.2} s)",
        p.total_s,
        p.setup_s,
        p.search_s,
        p.compile_s,
        o.compiled,
        o.from_cache,
        p.gpu_s,
        p.verify_s,
        p.timing_s,
        (p.gpu_s - p.verify_s - p.timing_s).max(0.0),
        p.confirm_s,
        p.write_s,
        other.max(0.0)
    );
}

/// Above this, in percent, the leaders' timings are too noisy to rank them: the winner's own
/// IQR / median over the interleaved rounds, or the half-width of the 95 % interval of the
/// runner-up comparison. A winner picked from such data is a coin toss the report must not
/// present as a result.
pub const NOISY_RANK_PCT: f64 = 10.0;

/// Why the confirmed leaders cannot be ranked (the whole sentence, with what to do), or
/// `None` when the data can rank them. `winner_iqr_pct` is the winner's IQR / median over
/// `rounds` interleaved rounds; `runner_up` its comparison with the fastest other leader.
pub fn too_noisy_to_rank(
    winner_iqr_pct: f64,
    runner_up: Option<&crate::measure::stats::Comparison>,
    rounds: usize,
) -> Option<String> {
    let mut why = Vec::new();
    // NaN (no usable samples) counts as too noisy.
    let over = |x: f64| x.is_nan() || x > NOISY_RANK_PCT;
    // With a runner-up, its paired interval already carries the winner's own noise (a 7 µs
    // kernel can vary by 20 % launch to launch and still rank clearly); the winner's IQR alone
    // decides only when there is nothing to compare it with.
    if runner_up.is_none() && over(winner_iqr_pct) {
        why.push(format!(
            "the winner's own times vary by {winner_iqr_pct:.1}% (IQR/median over {rounds} rounds)"
        ));
    }
    if let Some(c) = runner_up {
        let half = (c.ci_high_pct - c.ci_low_pct) / 2.0;
        if over(half) {
            why.push(format!(
                "the runner-up is {:.1}% slower with a 95% CI of {:.1}..{:.1}%, wider than ±{NOISY_RANK_PCT:.0}%",
                c.slower_pct, c.ci_low_pct, c.ci_high_pct
            ));
        }
    }
    if why.is_empty() {
        return None;
    }
    Some(format!(
        "timings too noisy to rank the leaders: {}; re-run with more --reps or --confirm-rounds",
        why.join("; ")
    ))
}

/// The roof baseline's launches count as noisy when their spread ((p90 - p10) / median, in
/// percent) is over this and over `NOISY_ROOF_VS_VARIANTS` times the verified variants' median
/// spread. Why: every "% of roof" divides by the roof's median, and nothing else in the report
/// shows when that one number is off: a cuBLAS timing whose launches spread by half its
/// median can double the median and the "% of roof" with it, while the kernels' own spreads
/// stay at a few percent. The relative part is there because a run whose kernels all spread
/// widely (launch jitter against kernels of a few microseconds) has steady medians even so,
/// baselines and variants alike.
pub const NOISY_ROOF_PCT: f64 = 10.0;
pub const NOISY_ROOF_VS_VARIANTS: f64 = 3.0;

/// Where the roof also ran in the interleaved rounds: the winner's median there and the
/// roof's two medians (the faster counts; the Best line's median is the winner's first
/// timing).
fn roof_in_rounds_line(o: &TuneOutcome, best: &Record, roof: &str) -> Option<String> {
    let mine = best.confirm?;
    let r = o
        .records
        .iter()
        .find(|r| r.kind == Kind::Baseline && r.name == roof)?;
    let (first, theirs) = (r.stats?.median_ms, r.confirm?.median_ms);
    let rounds = o.confidence.as_ref()?.rounds;
    Some(format!(
        "      ({} of {roof}: the winner's median over the {rounds} interleaved rounds, {:.4} ms, against {roof}'s faster median, {:.4} ms first timed or {:.4} ms over the rounds)",
        pct(best.frac_of_roof),
        mine.median_ms,
        first,
        theirs
    ))
}

/// A warning when the roof baseline (named `roof`) timed much more noisily than the run's
/// verified variants, or `None`. Where the roof also ran in the interleaved rounds, the
/// leaders re-timed there are compared with its median over them, and the warning says so.
pub fn noisy_roof_line(records: &[Record], roof: &str) -> Option<String> {
    let r = records
        .iter()
        .find(|r| r.kind == Kind::Baseline && r.name == roof && r.status == Status::Ok)?;
    let (st, typical) = noisy(records, r)?;
    let which = if r.confirm.is_some() {
        "the % of it of every configuration not re-timed in the interleaved rounds above is \
         uncertain (the re-timed leaders are compared with its faster median, first timed or \
         over those rounds)"
    } else {
        "every % of it above is uncertain"
    };
    Some(format!(
        "Warning: the roof {roof} timed noisily (spread {:.1}% over {} launches against the kernels' typical {typical:.1}%; median {:.4} ms, min {:.4} ms), so {which}; run again to compare",
        st.spread_pct, st.samples, st.median_ms, st.min_ms
    ))
}

/// A warning when the winner (`records[at]`) timed much more noisily than the run's verified
/// variants, by the rule of the roof's: its median and % of roof are then uncertain, whatever
/// the confirmation made of its rank (which re-timed it interleaved, and says so).
pub fn noisy_winner_line(records: &[Record], at: usize) -> Option<String> {
    let (st, typical) = noisy(records, &records[at])?;
    let confirmed = records[at]
        .confirm
        .as_ref()
        .map(|c| {
            format!(
                "; over the interleaved rounds its median was {:.4} ms",
                c.median_ms
            )
        })
        .unwrap_or_default();
    Some(format!(
        "Warning: the winner timed noisily (spread {:.1}% over {} samples against the kernels' typical {typical:.1}%; median {:.4} ms, min {:.4} ms{confirmed}), so its throughput and % of roof above are uncertain; run again to compare",
        st.spread_pct, st.samples, st.median_ms, st.min_ms
    ))
}

/// The stats of `r` and the verified variants' typical spread when `r` timed noisily by the
/// rule of [`NOISY_ROOF_PCT`] and [`NOISY_ROOF_VS_VARIANTS`], else `None`.
fn noisy(records: &[Record], r: &Record) -> Option<(crate::measure::bench::Stats, f64)> {
    let st = r.stats?;
    let spreads: Vec<f64> = records
        .iter()
        .filter(|r| r.kind == Kind::Variant && r.status == Status::Ok)
        .filter_map(|r| r.stats.map(|s| s.spread_pct))
        .filter(|x| x.is_finite())
        .collect();
    // No verified kernel to compare with: the absolute rule alone.
    let typical = if spreads.is_empty() {
        0.0
    } else {
        crate::measure::stats::median(&spreads)
    };
    let noisy = st.spread_pct.is_nan()
        || (st.spread_pct > NOISY_ROOF_PCT && st.spread_pct > NOISY_ROOF_VS_VARIANTS * typical);
    noisy.then_some((st, typical))
}

/// The warm-up line: the run's first warm-up in full, the later jobs' ones summed (those only
/// ran when the GPU had cooled down between jobs).
fn warmup_line(warmups: &[(String, crate::measure::clocks::Warmup)]) -> Option<String> {
    use crate::measure::clocks::WarmupEnd;
    let ((load, w), later) = warmups.split_first()?;
    let max = w
        .max_mhz
        .map(|m| format!("{m} MHz"))
        .unwrap_or_else(|| "unknown".into());
    let mut line = match w.end {
        WarmupEnd::AlreadyWarm => format!(
            "Warm-up: not needed, the SM clock was already at {} MHz (max {max}); checked in {:.3} s",
            w.before_mhz, w.seconds
        ),
        WarmupEnd::AtMax => format!(
            "Warm-up: SM clock {} -> {} MHz (max {max}) in {:.3} s, {} launches of {load} before timing it",
            w.before_mhz, w.after_mhz, w.seconds, w.launches
        ),
        WarmupEnd::Stable => format!(
            "Warm-up: SM clock {} -> {} MHz in {:.3} s, {} launches of {load}; steady below its max {max} (locked or power-capped clocks?)",
            w.before_mhz, w.after_mhz, w.seconds, w.launches
        ),
        WarmupEnd::Cap => format!(
            "Warm-up: no steady SM clock after {:.3} s ({} -> {} MHz, max {max}; {} launches of {load}); timing started anyway, results at a low clock are flagged",
            w.seconds, w.before_mhz, w.after_mhz, w.launches
        ),
    };
    let again: Vec<&crate::measure::clocks::Warmup> = later
        .iter()
        .map(|(_, w)| w)
        .filter(|w| w.end != WarmupEnd::AlreadyWarm)
        .collect();
    if !again.is_empty() {
        let _ = write!(
            line,
            "; warmed up again before {} of {} later jobs ({:.3} s in all)",
            again.len(),
            later.len(),
            again.iter().map(|w| w.seconds).sum::<f64>()
        );
    }
    line.push('.');
    Some(line)
}

/// How many configurations constraints pruned (counted by reason, with or without records).
fn pruned_count(o: &TuneOutcome) -> usize {
    o.prune_reasons.iter().map(|(_, n)| n).sum()
}

/// The report of a compile-only run. Its counts are those of the records, as the run's CSV
/// holds them: `ok` rows are the variants compiled; the `not_run` rows are split by their
/// reason (past the compile time limit, abandoned when the time budget ran out, or stopped by
/// Ctrl-C).
fn render_compile_only(o: &TuneOutcome, verbose: bool) -> String {
    let mut s = String::new();
    let ok = count(&o.records, Status::Ok);
    let failed = count(&o.records, Status::Failed);
    let pruned = pruned_count(o);
    let mut rest = String::new();
    let past = past_limit(o);
    let budget = o
        .records
        .iter()
        .filter(|r| r.status == Status::NotRun && r.note == Some(Note::BudgetSpent))
        .count();
    for (n, what) in [
        (count(&o.records, Status::Skipped), "not proposed"),
        (
            count(&o.records, Status::NotRun) - past - budget,
            "not compiled (interrupted)",
        ),
        (past, "past the compile time limit"),
        (budget, "not started within the time budget"),
    ] {
        if n > 0 {
            rest += &format!(", {n} {what}");
        }
    }
    let _ = writeln!(
        s,
        "compile-only for {}: {ok} variants compiled ({} unique sources, {} from cache), {failed} failed, {pruned} pruned{rest}, in {:.2} s",
        o.arch, o.compiled, o.from_cache, o.phases.compile_s
    );
    if let Some(search) = &o.search {
        let _ = writeln!(s, "Search: {search}.");
    }
    if let Some(p) = &o.csv_path {
        let _ = writeln!(s, "Results: {}", p.display());
    }
    for r in o.records.iter().filter(|r| r.status == Status::Failed) {
        let err: String = r
            .error
            .chars()
            .take(if verbose { 4000 } else { 300 })
            .collect();
        let _ = writeln!(s, "  FAILED {}: {err}", r.label());
    }
    if verbose {
        for (reason, n) in &o.prune_reasons {
            let _ = writeln!(s, "  pruned {n:>5} × {reason}");
        }
    }
    s
}

/// One line of a sweep's summary: shape, best configuration, throughput, fraction of roof.
pub fn summary_row(shape: &str, o: Option<&TuneOutcome>) -> [String; 4] {
    let best = o.and_then(|o| o.best.map(|i| (o, &o.records[i])));
    match best {
        Some((o, r)) => [
            shape.to_string(),
            r.label(),
            format!(
                "{:.1} {}",
                r.throughput.unwrap_or_default(),
                o.info.as_ref().map(|i| i.unit.as_str()).unwrap_or("")
            ),
            pct(r.frac_of_roof),
        ],
        None => [
            shape.to_string(),
            match o {
                // Compile-only: nothing ran, so nothing was to be verified.
                Some(o) if o.device.is_none() => {
                    use crate::store::record::Status;
                    let count = |s: Status| o.records.iter().filter(|r| r.status == s).count();
                    format!(
                        "(compile-only: {} compiled, {} failed)",
                        count(Status::Ok),
                        count(Status::Failed)
                    )
                }
                _ => "(no verified configuration)".into(),
            },
            "-".into(),
            "-".into(),
        ],
    }
}

/// The summary table of a sweep over several shapes.
pub fn summary_table(rows: &[[String; 4]]) -> String {
    let mut s = String::from("\nSummary:\n");
    let w = rows.iter().map(|r| r[1].len()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        s,
        "  {:<16} {:<w$} {:>16} {:>8}",
        "shape", "best", "throughput", "% roof"
    );
    for r in rows {
        let _ = writeln!(s, "  {:<16} {:<w$} {:>16} {:>8}", r[0], r[1], r[2], r[3]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::Comparison;

    fn cmp(slower: f64, low: f64, high: f64) -> Comparison {
        Comparison {
            slower_pct: slower,
            ci_low_pct: low,
            ci_high_pct: high,
        }
    }

    #[test]
    fn a_roof_noisier_than_the_kernels_is_named() {
        let timed = |kind: Kind, name: &str, spread_pct: f64| Record {
            kind,
            name: name.into(),
            params: vec![],
            status: Status::Ok,
            error: String::new(),
            note: None,
            stats: Some(crate::measure::bench::Stats {
                median_ms: 0.15,
                min_ms: 0.1305,
                max_ms: 0.239,
                spread_pct,
                samples: 30,
                batch: 1,
            }),
            throughput: None,
            frac_of_roof: None,
            compile_ms: None,
            registers: None,
            confirm: None,
        };
        let kernels =
            |spread: f64| (0..5).map(move |i| timed(Kind::Variant, &format!("v{i}"), spread));
        // The H100 cuBLAS timing at 1000^3 that made a kernel read 237.6 % of it.
        let mut records = vec![
            timed(Kind::Baseline, "cublas_sgemm", 45.8),
            timed(Kind::Baseline, "other", 1.0),
        ];
        records.extend(kernels(2.0));
        let line = noisy_roof_line(&records, "cublas_sgemm").expect("a warning");
        assert!(
            line.contains("cublas_sgemm")
                && line.contains("45.8%")
                && line.contains("typical 2.0%"),
            "{line}"
        );
        // Only the roof counts: another baseline divides nothing.
        assert_eq!(noisy_roof_line(&records, "other"), None);
        // A steady roof.
        let mut steady = vec![timed(Kind::Baseline, "cublas_sgemm", 2.0)];
        steady.extend(kernels(2.0));
        assert_eq!(noisy_roof_line(&steady, "cublas_sgemm"), None);
        assert_eq!(noisy_roof_line(&steady, ""), None);
        // A 7 us copy at 1000x1000 f16 (17 % spread) among kernels that spread 10-13 %: the
        // usual jitter of microsecond kernels, not a warning.
        let mut short = vec![timed(Kind::Baseline, "copy_vec4", 16.9)];
        short.extend(kernels(11.0));
        assert_eq!(noisy_roof_line(&short, "copy_vec4"), None);
        // No verified kernel to compare with: the 10 % rule alone.
        assert!(
            noisy_roof_line(&[timed(Kind::Baseline, "copy_vec4", 16.9)], "copy_vec4").is_some()
        );
        // The winner by the same rule: one that spread 48 % among kernels that spread 2 %.
        let mut run = vec![timed(Kind::Variant, "winner", 48.0)];
        run.extend(kernels(2.0));
        let line = noisy_winner_line(&run, 0).expect("a warning");
        assert!(
            line.contains("winner timed noisily") && line.contains("48.0%"),
            "{line}"
        );
        assert_eq!(noisy_winner_line(&run, 1), None, "a steady winner");
    }

    #[test]
    fn a_clear_ranking_is_not_noisy() {
        // The H100 1000x1000 transpose: 2.2 % ahead of the runner-up, CI 1.3..4.0 %.
        assert_eq!(too_noisy_to_rank(1.5, Some(&cmp(2.2, 1.3, 4.0)), 50), None);
        // A tie with a tight interval is a tie, not noise.
        assert_eq!(too_noisy_to_rank(3.0, Some(&cmp(0.1, -0.6, 0.9)), 50), None);
        assert_eq!(too_noisy_to_rank(9.9, None, 50), None);
        // Noisy launches, clear ranking: the interval decides.
        assert_eq!(too_noisy_to_rank(14.2, Some(&cmp(3.0, 1.0, 5.0)), 50), None);
    }

    #[test]
    fn a_noisy_winner_is_reported_as_such() {
        let why = too_noisy_to_rank(14.2, None, 50).unwrap();
        assert!(
            why.starts_with("timings too noisy to rank the leaders: "),
            "{why}"
        );
        assert!(
            why.contains("vary by 14.2% (IQR/median over 50 rounds)"),
            "{why}"
        );
        assert!(
            why.contains("re-run with more --reps or --confirm-rounds"),
            "{why}"
        );
        assert!(too_noisy_to_rank(f64::NAN, None, 0).is_some());
    }

    #[test]
    fn a_wide_runner_up_interval_is_reported() {
        // Half-width 12.25 % > 10 %.
        let why = too_noisy_to_rank(4.0, Some(&cmp(3.0, -8.0, 16.5)), 20).unwrap();
        assert!(
            why.contains("95% CI of -8.0..16.5%, wider than ±10%"),
            "{why}"
        );
        assert!(!why.contains("vary by"), "{why}");
        // A comparison made from fewer than two rounds has an infinite interval.
        let inf = cmp(1.0, f64::NEG_INFINITY, f64::INFINITY);
        assert!(too_noisy_to_rank(1.0, Some(&inf), 1).is_some());
    }

    fn warm(
        end: crate::measure::clocks::WarmupEnd,
        before: u32,
        after: u32,
        s: f64,
    ) -> crate::measure::clocks::Warmup {
        crate::measure::clocks::Warmup {
            end,
            seconds: s,
            before_mhz: before,
            after_mhz: after,
            max_mhz: Some(1980),
            launches: 4095,
        }
    }

    #[test]
    fn the_warm_up_line() {
        use crate::measure::clocks::WarmupEnd::*;
        assert_eq!(warmup_line(&[]), None);
        let first = ("memcpy".to_string(), warm(AtMax, 345, 1980, 0.2134));
        assert_eq!(
            warmup_line(std::slice::from_ref(&first)).unwrap(),
            "Warm-up: SM clock 345 -> 1980 MHz (max 1980 MHz) in 0.213 s, 4095 launches of memcpy before timing it."
        );
        let later = [
            first.clone(),
            ("v0001".to_string(), warm(AlreadyWarm, 1980, 1980, 0.001)),
            ("v0017".to_string(), warm(AtMax, 1200, 1980, 0.05)),
        ];
        assert!(warmup_line(&later)
            .unwrap()
            .ends_with("; warmed up again before 1 of 2 later jobs (0.050 s in all)."));
        let warm_already = [("memcpy".to_string(), warm(AlreadyWarm, 1980, 1980, 0.0004))];
        assert!(warmup_line(&warm_already).unwrap().starts_with(
            "Warm-up: not needed, the SM clock was already at 1980 MHz (max 1980 MHz)"
        ));
        let capped = [("copy".to_string(), warm(Cap, 345, 1200, 2.01))];
        assert!(warmup_line(&capped)
            .unwrap()
            .starts_with("Warm-up: no steady SM clock after 2.010 s (345 -> 1200 MHz"));
    }
}
