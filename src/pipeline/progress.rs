//! Progress of the compile and tune phases: an indicatif bar on a terminal, and where stderr
//! is not one (a pipe, a CI or Slurm log, where indicatif draws nothing) one plain line every
//! [`PLAIN_EVERY`]: `compile: 120/996 done in 10s, 12.0/s, about 73s left`. A phase shorter
//! than that prints no line.

use indicatif::{HumanDuration, ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// How often the plain progress line is printed when stderr is not a terminal.
pub const PLAIN_EVERY: Duration = Duration::from_secs(10);

/// How often the plain-line thread looks at the bar (so it ends soon after the bar does).
const POLL: Duration = Duration::from_millis(100);

/// A progress bar of `len` steps named `prefix`; hidden when `show` is false. Where stderr is
/// not a terminal, the bar prints plain lines instead ([`plain_lines`]).
pub fn bar(len: usize, prefix: &'static str, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    // Drawn to stderr; indicatif hides it by itself where stderr is not a terminal.
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>9} [{bar:32}] {pos}/{len} {elapsed_precise} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb.set_prefix(prefix);
    if !std::io::stderr().is_terminal() {
        plain_lines(&pb, PLAIN_EVERY, |line| eprintln!("{line}"));
    }
    pb
}

/// Calls `out` with [`plain_line`] every `every` of the bar's life, from a thread that ends
/// once the bar is finished or dropped; a bar that ends within `every` gets no line.
pub(super) fn plain_lines(
    pb: &ProgressBar,
    every: Duration,
    mut out: impl FnMut(String) + Send + 'static,
) {
    let weak = pb.downgrade();
    std::thread::spawn(move || {
        let mut next = every;
        loop {
            std::thread::sleep(POLL.min(every));
            let Some(pb) = weak.upgrade() else {
                return;
            };
            if pb.is_finished() {
                return;
            }
            if pb.elapsed() >= next {
                out(plain_line(&pb));
                while next <= pb.elapsed() {
                    next += every;
                }
            }
        }
    });
}

/// One line of progress: done of total, time so far, rate and time left (once something is
/// done), and the bar's message (the best so far while tuning).
pub(super) fn plain_line(pb: &ProgressBar) -> String {
    let done = pb.position();
    let total = pb.length().unwrap_or(done).max(done);
    let elapsed = pb.elapsed();
    let mut line = format!(
        "{}: {done}/{total} done in {}",
        pb.prefix().trim(),
        HumanDuration(Duration::from_secs(elapsed.as_secs()))
    );
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
    if done > 0 {
        let left = Duration::from_secs_f64((total - done) as f64 / rate);
        line.push_str(&format!(
            ", {rate:.1}/s, about {} left",
            HumanDuration(Duration::from_secs(left.as_secs()))
        ));
    } else {
        line.push_str(", none done yet");
    }
    let msg = pb.message();
    if !msg.is_empty() {
        line.push_str(&format!(", {msg}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A hidden bar that lives 5 periods prints about 5 lines, each with its counts, rate
    /// and time left; one finished within the first period prints none.
    #[test]
    fn plain_lines_come_every_period_and_not_before() {
        let every = Duration::from_millis(200);
        let (tx, rx) = mpsc::channel();
        let pb = ProgressBar::hidden();
        pb.set_length(100);
        pb.set_prefix("compile");
        plain_lines(&pb, every, move |line| {
            let _ = tx.send(line);
        });
        for _ in 0..10 {
            std::thread::sleep(every / 2);
            pb.inc(5);
        }
        pb.finish_and_clear();
        std::thread::sleep(every * 2);
        let lines: Vec<String> = rx.try_iter().collect();
        assert!((3..=6).contains(&lines.len()), "{lines:?}");
        for l in &lines {
            assert!(l.starts_with("compile: "), "{l}");
            assert!(l.contains("/100 done in "), "{l}");
            assert!(l.contains("/s, about ") && l.ends_with(" left"), "{l}");
        }

        let (tx, rx) = mpsc::channel();
        let pb = ProgressBar::hidden();
        pb.set_length(10);
        plain_lines(&pb, every, move |line| {
            let _ = tx.send(line);
        });
        pb.inc(10);
        pb.finish_and_clear();
        std::thread::sleep(every * 2);
        assert_eq!(rx.try_iter().count(), 0, "a short phase prints no line");
    }

    #[test]
    fn a_line_before_anything_is_done_says_so() {
        let pb = ProgressBar::hidden();
        pb.set_length(7);
        pb.set_prefix("tune");
        pb.set_message("best 812.0 GB/s (TILE_DIM=32)");
        let line = plain_line(&pb);
        assert!(line.starts_with("tune: 0/7 done in "), "{line}");
        assert!(
            line.ends_with(", none done yet, best 812.0 GB/s (TILE_DIM=32)"),
            "{line}"
        );
    }
}
