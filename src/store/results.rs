//! Results on disk: one CSV per run (every configuration, baselines included, with its
//! status and reason) and `best.csv`, one row per op, shape, dtype and GPU. Every file is
//! written to a temporary name and renamed into place, so a crash never leaves a truncated CSV.
//!
//! The parts live in files of their own ([`super::record`], [`super::run_csv`],
//! [`super::best`], [`super::journal`], [`super::files`]); this module gathers them.

pub use super::best::*;
pub use super::files::{slug, write_atomic};
pub use super::journal::{Journal, JournalKey};
pub use super::record::{Confirmed, Kind, Note, Record, RunInfo, Status};
pub use super::run_csv::{open_run_csv, read_run_csv, run_csv, run_csv_path, run_csv_path_of};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::bench::Stats;
    use std::path::{Path, PathBuf};

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
        };
        let records = vec![
            Record {
                kind: Kind::Baseline,
                name: "memcpy".into(),
                params: vec![],
                status: Status::Ok,
                error: String::new(),
                note: None,
                stats: Some(stats),
                throughput: Some(650.5),
                frac_of_roof: Some(1.0),
                compile_ms: None,
                registers: None,
                confirm: None,
            },
            Record {
                kind: Kind::Variant,
                name: "v0001".into(),
                params: vec![
                    ("TILE_DIM".into(), "32".into()),
                    ("BOUNDS".into(), "edge".into()),
                ],
                status: Status::Failed,
                error: "compile: error: expected a \";\", line 3\nsecond line".into(),
                note: None,
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
                name: "v0002".into(),
                params: vec![
                    ("TILE_DIM".into(), "8".into()),
                    ("BOUNDS".into(), "none".into()),
                ],
                status: Status::Pruned,
                error: "BOUNDS=none needs both dimensions to be tile multiples".into(),
                note: None,
                stats: None,
                throughput: None,
                frac_of_roof: None,
                compile_ms: None,
                registers: None,
                confirm: None,
            },
            Record {
                status: Status::NotRun,
                note: Some(Note::PastLimit { seconds: 12.5 }),
                compile_ms: Some(12500.0),
                ..Record::new(
                    Kind::Variant,
                    "v0003",
                    vec![("TILE_DIM".into(), "64".into())],
                )
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = run_csv_path(dir.path(), &info());
        assert!(path.ends_with("transpose_1000x1000_nvidia-h100-80gb-hbm3.csv"));
        write_atomic(&path, &run_csv(&info(), &params, &records).unwrap()).unwrap();
        // A note is written as its text, in the error column.
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(
            "v0003,64,,not_run,not compiled: NVRTC ran past the compile time limit \
             (12.5 s; --compile-timeout sets it),"
        ));
        assert_eq!(read_run_csv(&path).unwrap(), records);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
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
            upsert_best(&path, row("1000x1000", 2.0), false).unwrap(),
            Upserted::Added
        );
        upsert_best(&path, row("1024x1024", 3.0), false).unwrap();
        // The newer run replaces the row, faster or not.
        assert_eq!(
            upsert_best(&path, row("1000x1000", 1.0), false).unwrap(),
            Upserted::Replaced
        );
        upsert_best(&path, row("1024x1024", 4.0), false).unwrap();
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

    #[test]
    fn keep_best_keeps_the_faster_stored_row_at_the_same_cache_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("best.csv");
        upsert_best(&path, best_row("1000x1000", 2.0), true).unwrap();
        // Slower: the stored row stays, and the file is not rewritten.
        let before = std::fs::read(&path).unwrap();
        assert_eq!(
            upsert_best(&path, best_row("1000x1000", 3.0), true).unwrap(),
            Upserted::KeptStored {
                stored_median_ms: 2.0
            }
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
        // As fast: the newer run replaces it (only a strictly faster stored row stays).
        let mut same = best_row("1000x1000", 2.0);
        same.tuned_at = "2026-11-23T00:00:00Z".into();
        assert_eq!(
            upsert_best(&path, same.clone(), true).unwrap(),
            Upserted::Replaced
        );
        assert_eq!(read_best(&path).unwrap(), vec![same]);
        // Faster: replaced.
        upsert_best(&path, best_row("1000x1000", 1.5), true).unwrap();
        assert_eq!(read_best(&path).unwrap(), vec![best_row("1000x1000", 1.5)]);
        // Another cache state does not compare: the newer run replaces it, even slower.
        let mut warm = best_row("1000x1000", 5.0);
        warm.cache = "warm".into();
        assert_eq!(
            upsert_best(&path, warm.clone(), true).unwrap(),
            Upserted::Replaced
        );
        assert_eq!(read_best(&path).unwrap(), vec![warm.clone()]);
        // Without keep_best the newer, slower run replaces the row.
        let mut slower = warm.clone();
        slower.median_ms = 9.0;
        upsert_best(&path, slower.clone(), false).unwrap();
        assert_eq!(read_best(&path).unwrap(), vec![slower]);
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
        upsert_best(&path, best_row("1000x1000", 2.0), false).unwrap();
        upsert_best(&path, best_row("2000x2000", 3.0), false).unwrap();
        std::fs::read_to_string(&path).unwrap()
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
            (7, "25 field(s) where the header has 24"),
            (9, "the same op, shape, dtype and GPU as line 8"),
            (10, "column tie:"),
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
        upsert_best(&path, best_row("3000x3000", 4.0), false).unwrap();
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
            std::fs::read_to_string(best_backup_path(&path)).unwrap(),
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
                        upsert_best(path, best_row(&shape, 1.0), false).unwrap();
                    }
                });
            }
        });
        let file = read_best_checked(&path).unwrap();
        assert!(file.bad.is_empty());
        assert_eq!(file.rows.len(), 100);
    }
}
