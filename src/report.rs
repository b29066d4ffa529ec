//! What a run prints on stdout: the baselines table, the top configurations, the best one
//! and where the files went. Progress goes to stderr (indicatif), so stdout can be piped.

use crate::results::{Record, Status};
use crate::tuner::TuneOutcome;
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
        .filter(|r| r.kind == "variant" && r.status == status)
        .count()
}

/// The full report of a GPU run.
pub fn render(o: &TuneOutcome, top: usize, verbose: bool) -> String {
    let mut s = String::new();
    let Some(info) = &o.info else {
        return render_compile_only(o, verbose);
    };
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
    let unit = &info.unit;
    let baselines: Vec<&Record> = o.records.iter().filter(|r| r.kind == "baseline").collect();
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
    let mut ok: Vec<&Record> = o
        .records
        .iter()
        .filter(|r| r.kind == "variant" && r.status == Status::Ok)
        .collect();
    ok.sort_by(|a, b| {
        let key = |r: &Record| r.stats.map(|x| x.median_ms).unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b))
    });
    let (failed, pruned, skipped) = (
        count(&o.records, Status::Failed),
        count(&o.records, Status::Pruned),
        count(&o.records, Status::Skipped),
    );
    let total = ok.len() + failed + pruned + skipped;
    let not_searched = if skipped > 0 {
        format!(", {skipped} not searched")
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "\nTop {} of {} verified configurations ({total} in the space: {failed} failed, {pruned} pruned{not_searched}):",
        top.min(ok.len()),
        ok.len()
    );
    if let Some(search) = &o.search {
        let _ = writeln!(s, "Search: {search}.");
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
    if failed > 0 {
        let _ = writeln!(s, "\nFailed configurations ({failed}; reasons in the CSV):");
        for r in o
            .records
            .iter()
            .filter(|r| r.kind == "variant" && r.status == Status::Failed)
            .take(if verbose { usize::MAX } else { 5 })
        {
            let err: String = crate::ops::one_line(&r.error).chars().take(160).collect();
            let _ = writeln!(s, "  {}: {err}", r.label());
        }
    }
    if verbose && !o.prune_reasons.is_empty() {
        let _ = writeln!(s, "\nPruned by constraints:");
        for (reason, n) in &o.prune_reasons {
            let _ = writeln!(s, "  {n:>5} × {reason}");
        }
    }
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
        }
        None => {
            let _ = writeln!(
                s,
                "\nNo configuration verified: nothing is reported as best."
            );
        }
    }
    if let Some(c) = &o.confidence {
        let label = |at: usize| o.records[at].label();
        if c.tied_with.is_empty() {
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
            let _ = writeln!(
                s,
                "Confidence: statistically tied with {} other(s) over {} interleaved rounds (95% intervals span zero): {}; picked by the tie rule (fewest registers, then first in the space)",
                c.tied_with.len(),
                c.rounds,
                others.join(" | ")
            );
        }
    }
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
    let _ = writeln!(
        s,
        "Time: {:.2} s total (setup {:.2} s, compile {:.2} s for {} unique sources, {} from cache; verify {:.2} s; timing {:.2} s)",
        p.total_s, p.setup_s, p.compile_s, o.compiled, o.from_cache, p.verify_s, p.timing_s
    );
    s
}

fn render_compile_only(o: &TuneOutcome, verbose: bool) -> String {
    let mut s = String::new();
    let ok = count(&o.records, Status::Ok);
    let failed = count(&o.records, Status::Failed);
    let pruned = count(&o.records, Status::Pruned);
    let _ = writeln!(
        s,
        "compile-only for {}: {ok} variants compiled ({} unique sources, {} from cache), {failed} failed, {pruned} pruned, in {:.2} s",
        o.arch, o.compiled, o.from_cache, o.phases.compile_s
    );
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
            "(no verified configuration)".into(),
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
