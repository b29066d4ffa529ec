//! Files the tool must never damage and data it must never drop: `--output` through a symbolic
//! link, to a device node, a FIFO, `/dev/full` or `-`, onto the file it reads, or into a pipe
//! closed early; a journal with unusable lines in the
//! middle; `export --format cuda` run again into the same folder.

use cuda_autotune::export::cuda::MANIFEST;
use cuda_autotune::store::journal::{read_journal, Journal, JournalKey};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

mod common;
use common::{names, repo, skipped, text, tmp, tune_bin, tune_with_stdout_closed};

/// The database every export here reads.
fn db() -> PathBuf {
    repo("tests/fixtures/export/best.csv")
}

/// A run CSV for `tune report`.
fn run_csv() -> PathBuf {
    repo("tests/fixtures/report/transpose_1000x1000.csv")
}

fn run(args: &[&str]) -> Output {
    tune_bin().args(args).output().expect("tune runs")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// Runs `tune args` and expects success.
fn ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(
        out.status.success(),
        "tune {args:?} failed: {}",
        text(&out.stderr)
    );
    out
}

/// `tune export --format json` of the fixture database, as it prints on stdout.
fn json_export() -> Vec<u8> {
    let db = db();
    ok(&["export", "--format", "json", "--db", path_str(&db)]).stdout
}

/// `tune export --format FORMAT --db DB --output OUTPUT` as arguments: the export every
/// `--output` case here writes.
fn export_args<'a>(format: &'a str, db: &'a Path, output: &'a str) -> Vec<&'a str> {
    vec![
        "export",
        "--format",
        format,
        "--db",
        path_str(db),
        "--output",
        output,
    ]
}

/// `tune report --csv CSV --output OUTPUT` as arguments: the report every `--output` case
/// here writes.
fn report_args<'a>(csv: &'a Path, output: &'a str) -> Vec<&'a str> {
    vec!["report", "--csv", path_str(csv), "--output", output]
}

/// Runs `tune args` from `dir` (where a relative output would land).
fn run_in(dir: &Path, args: &[&str]) -> Output {
    tune_bin()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("tune runs")
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}

#[test]
fn output_through_a_symlink_writes_its_target_and_keeps_the_link() {
    let tmp = tmp();
    let real = tmp.path().join("data/winners.json");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::write(&real, "stale").unwrap();
    let link = tmp.path().join("winners.json");
    std::os::unix::fs::symlink("data/winners.json", &link).unwrap();
    let db = db();
    ok(&export_args("json", &db, path_str(&link)));
    assert!(is_symlink(&link), "the link was replaced by a file");
    assert_eq!(std::fs::read(&real).unwrap(), json_export());

    // `tune report` too, through a link whose target does not exist yet.
    let html = tmp.path().join("site/report.html");
    let link = tmp.path().join("report.html");
    std::os::unix::fs::symlink(&html, &link).unwrap();
    let csv = run_csv();
    ok(&report_args(&csv, path_str(&link)));
    assert!(is_symlink(&link), "the link was replaced by a file");
    let written = std::fs::read_to_string(&html).unwrap();
    assert!(
        written.contains("<html"),
        "{}",
        &written[..written.len().min(200)]
    );
}

/// The device number of `/dev/null` (its metadata only is read).
fn dev_null_rdev() -> u64 {
    std::fs::metadata("/dev/null").unwrap().rdev()
}

#[test]
fn output_to_a_device_node_writes_through_and_keeps_the_node() {
    let name = "output_to_a_device_node_writes_through_and_keeps_the_node";
    let tmp = tmp();
    let node = tmp.path().join("null");
    // A character device 1:3, the same device as /dev/null.
    let made = std::process::Command::new("mknod")
        .arg(&node)
        .args(["c", "1", "3"])
        .output();
    match made {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            skipped(name, &format!("mknod failed: {}", text(&out.stderr).trim()));
            return;
        }
        Err(e) => {
            skipped(name, &format!("cannot run mknod: {e}"));
            return;
        }
    }
    let db = db();
    let csv = run_csv();
    let runs: [Vec<&str>; 2] = [
        export_args("csv", &db, path_str(&node)),
        report_args(&csv, path_str(&node)),
    ];
    for args in runs {
        let out = run(&args);
        let stderr = text(&out.stderr);
        let meta = std::fs::symlink_metadata(&node).unwrap();
        assert!(
            meta.file_type().is_char_device(),
            "{args:?} replaced the device node: {stderr}"
        );
        assert_eq!(meta.rdev(), dev_null_rdev());
        if stderr.contains("Permission denied") {
            // A temporary folder on a `nodev` mount cannot open devices: refused, not replaced.
            println!("{name}: writing not checked: the temporary folder is on a nodev mount");
            continue;
        }
        assert!(out.status.success(), "{args:?}: {stderr}");
    }
}

#[test]
fn output_to_a_fifo_is_written_through() {
    let tmp = tmp();
    let fifo = tmp.path().join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        skipped("output_to_a_fifo_is_written_through", "mkfifo failed");
        return;
    }
    // A reader on the other end, as `cat pipe > got` in a shell.
    let got = tmp.path().join("got");
    let mut reader = std::process::Command::new("cat")
        .arg(&fifo)
        .stdout(std::fs::File::create(&got).unwrap())
        .spawn()
        .unwrap();
    let db = db();
    let out = run(&export_args("json", &db, path_str(&fifo)));
    // The reader ends when the writer closes; a tool that never opened the FIFO leaves it
    // waiting, so it is stopped after a while instead of hanging the test.
    let start = Instant::now();
    while reader.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if reader.try_wait().unwrap().is_none() {
        let _ = reader.kill();
        let _ = reader.wait();
    }
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(std::fs::read(&got).unwrap(), json_export());
}

#[test]
fn a_full_device_is_an_error_and_stays_a_device() {
    let full = Path::new("/dev/full");
    let before = match std::fs::symlink_metadata(full) {
        Ok(m) if m.file_type().is_char_device() => m,
        _ => {
            skipped(
                "a_full_device_is_an_error_and_stays_a_device",
                "no /dev/full",
            );
            return;
        }
    };
    let db = db();
    let out = run(&export_args("json", &db, "/dev/full"));
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "writing to /dev/full succeeded");
    assert_ne!(out.status.code(), Some(0));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr}");
    assert!(
        lines[0].starts_with("error: cannot write /dev/full: No space left on device"),
        "{stderr}"
    );
    let after = std::fs::symlink_metadata(full).unwrap();
    assert!(after.file_type().is_char_device(), "/dev/full was replaced");
    assert_eq!(after.rdev(), before.rdev());
}

#[test]
fn dash_and_dev_stdout_mean_stdout_and_create_no_file() {
    let tmp = tmp();
    let db = db();
    let csv = run_csv();
    let export = run_in(tmp.path(), &export_args("json", &db, "-"));
    assert!(export.status.success(), "{}", text(&export.stderr));
    assert_eq!(export.stdout, json_export());
    let report = run_in(tmp.path(), &report_args(&csv, "-"));
    assert!(report.status.success(), "{}", text(&report.stderr));
    let html = text(&report.stdout);
    assert!(
        html.trim_end().ends_with("</html>"),
        "only the HTML on stdout"
    );
    assert!(
        !tmp.path().join("-").exists(),
        "a file named '-' was written"
    );
    // The CUDA export writes a folder: `-` is no folder.
    let out = run_in(tmp.path(), &export_args("cuda", &db, "-"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--output DIR"));
}

/// `--output /dev/stdout` (or `/proc/self/fd/1`, `/dev/fd/1`) writes to standard output as
/// it is open: where a shell appended it to a log (`>> log`, a Slurm job's output), the export
/// is appended there, and the log is neither replaced nor truncated. `/dev/stderr` likewise.
#[test]
fn dev_stdout_redirected_to_a_file_is_appended_to_never_replaced() {
    let tmp = tmp();
    let db = db();
    for name in ["/dev/stdout", "/proc/self/fd/1", "/dev/fd/1", "/dev/stderr"] {
        let log = tmp.path().join("job.log");
        std::fs::write(&log, "earlier output\n").unwrap();
        let inode = std::fs::metadata(&log).unwrap().ino();
        let appended = || std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("tune"));
        cmd.args(export_args("json", &db, name));
        let out = if name == "/dev/stderr" {
            cmd.stderr(appended()).output().unwrap()
        } else {
            cmd.stdout(appended()).output().unwrap()
        };
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let mut want = b"earlier output\n".to_vec();
        want.extend(json_export());
        assert_eq!(
            text(&std::fs::read(&log).unwrap()),
            text(&want),
            "{name}: the log holds what it held, then the export"
        );
        assert_eq!(
            std::fs::metadata(&log).unwrap().ino(),
            inode,
            "{name}: the log was replaced"
        );
    }
}

#[test]
fn an_output_that_is_the_input_itself_is_refused_and_the_input_kept() {
    let tmp = tmp();
    let db = tmp.path().join("best.csv");
    std::fs::copy(self::db(), &db).unwrap();
    let csv = tmp.path().join("run.csv");
    std::fs::copy(run_csv(), &csv).unwrap();
    let link = tmp.path().join("link.csv");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let (db_before, csv_before) = (std::fs::read(&db).unwrap(), std::fs::read(&csv).unwrap());
    for (args, input) in [
        (export_args("json", &db, path_str(&db)), "--db"),
        (export_args("csv", &db, path_str(&link)), "--db"),
        (report_args(&csv, path_str(&csv)), "--csv"),
    ] {
        let out = run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("is the file {input}")),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
    assert_eq!(
        std::fs::read(&db).unwrap(),
        db_before,
        "the database is untouched"
    );
    assert_eq!(
        std::fs::read(&csv).unwrap(),
        csv_before,
        "the run CSV is untouched"
    );
    assert!(is_symlink(&link));
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    // `tune export ... | head -c 10`: the pipe closes before the output is written.
    let db = db();
    let out = tune_with_stdout_closed(["export", "--format", "json", "--db", path_str(&db)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn a_journal_with_bad_lines_in_the_middle_keeps_every_good_entry() {
    let tmp = tmp();
    let path = tmp.path().join("run.journal.jsonl");
    let header = serde_json::json!({"op": "transpose", "shape": "1000x1000"});
    // Baseline keys without a source: `baseline v0 ` and so on.
    let key = |name: &str| JournalKey::Baseline {
        name: name.into(),
        source: String::new(),
    };
    let (mut journal, earlier) = Journal::open::<u32>(&path, &header, true).unwrap();
    assert!(earlier.is_empty());
    journal.append(&key("v0"), &10).unwrap();
    journal.append(&key("v1"), &11).unwrap();
    drop(journal);
    // Damage in the middle: a line that is not UTF-8 and one that is not an entry.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"key\":\"v\xc3\x28\",\"result\":1}\n");
    bytes.extend_from_slice(b"not json at all\n");
    std::fs::write(&path, &bytes).unwrap();
    let (mut journal, earlier) = Journal::open::<u32>(&path, &header, true).unwrap();
    assert_eq!(earlier, [(key("v0"), 10), (key("v1"), 11)]);
    journal.append(&key("v2"), &12).unwrap();
    journal.append(&key("v3"), &13).unwrap();
    drop(journal);
    let (_, earlier) = Journal::open::<u32>(&path, &header, true).unwrap();
    let keys: Vec<JournalKey> = earlier.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        keys,
        [key("v0"), key("v1"), key("v2"), key("v3")],
        "entries after the bad lines are kept"
    );
    // The bad lines are named by their line numbers (the header is line 1).
    let header_line = serde_json::to_string(&header).unwrap();
    let read = read_journal::<u32>(&path, &header_line).unwrap();
    let bad: Vec<usize> = read.bad.iter().map(|(n, _)| *n).collect();
    assert_eq!(bad, [4, 5]);
    assert!(read.bad[0].1.contains("not UTF-8"), "{:?}", read.bad);
    assert!(
        read.bad[1].1.contains("not a journal entry"),
        "{:?}",
        read.bad
    );
}

/// `tune export --format cuda --db DB --op OP --output DIR`.
fn cuda_export(db: &Path, op: &str, dir: &Path) -> Output {
    run(&[
        "export",
        "--format",
        "cuda",
        "--db",
        path_str(db),
        "--op",
        op,
        "--output",
        path_str(dir),
    ])
}

#[test]
fn a_cuda_export_again_into_its_folder_leaves_no_stale_file_and_keeps_the_users() {
    let tmp = tmp();
    let db = db();
    let dir = tmp.path().join("tuned");
    let first = cuda_export(&db, "transpose", &dir);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let transpose: Vec<String> = names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("transpose_"))
        .collect();
    assert!(transpose.len() > 1, "{:?}", names(&dir));
    // The user's own files beside the export.
    std::fs::write(dir.join("CMakeLists.txt"), "add_library(k *.cu)\n").unwrap();
    std::fs::write(dir.join("my_kernel.cu"), "__global__ void mine() {}\n").unwrap();
    let second = cuda_export(&db, "matmul", &dir);
    assert!(second.status.success(), "{}", text(&second.stderr));
    let stdout = text(&second.stdout);
    assert!(
        stdout.contains(&format!(
            "removed {} file(s) of the previous export",
            transpose.len()
        )),
        "{stdout}"
    );
    let now = names(&dir);
    assert!(
        !now.iter().any(|n| n.starts_with("transpose_")),
        "stale transpose files: {now:?}"
    );
    assert!(now.iter().any(|n| n.starts_with("matmul_")), "{now:?}");
    assert!(now.contains(&"CMakeLists.txt".to_string()), "{now:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("my_kernel.cu")).unwrap(),
        "__global__ void mine() {}\n"
    );
    // The manifest lists exactly what this export wrote: every file but the user's two.
    let manifest = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    let listed: Vec<&str> = manifest.lines().filter(|l| !l.starts_with('#')).collect();
    let written: Vec<&str> = now
        .iter()
        .map(String::as_str)
        .filter(|n| !["CMakeLists.txt", "my_kernel.cu", MANIFEST].contains(n))
        .collect();
    assert_eq!(listed, written);
    assert!(listed.contains(&"cuda_autotune_tuned.h"));
}

#[test]
fn a_cuda_export_never_overwrites_a_file_no_export_wrote() {
    let tmp = tmp();
    let db = db();
    let dir = tmp.path().join("src");
    std::fs::create_dir_all(&dir).unwrap();
    // A folder holding a header of the same name, not written by an export (no manifest).
    let own = dir.join("cuda_autotune_tuned.h");
    std::fs::write(&own, "// mine\n").unwrap();
    let out = cuda_export(&db, "transpose", &dir);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no earlier export"), "{stderr}");
    assert!(stderr.contains("cuda_autotune_tuned.h"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&own).unwrap(), "// mine\n");
    assert_eq!(
        names(&dir),
        ["cuda_autotune_tuned.h"],
        "nothing was written"
    );
    // A manifest line naming a file outside the folder never removes it.
    let outside = tmp.path().join("keep.cu");
    std::fs::write(&outside, "x").unwrap();
    std::fs::remove_file(&own).unwrap();
    std::fs::write(dir.join(MANIFEST), "../keep.cu\n").unwrap();
    let out = cuda_export(&db, "transpose", &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("'../keep.cu' is not the name of a file"));
    assert!(outside.exists());
}
