//! The GPU suite's parts. `scripts/gpu.sh tests` runs the GPU tests in named parts, one device
//! call each, as its part table lists them (lines `PART BINARY TEST`). Every `#[test]` of
//! tests/gpu.rs and tests/faults.rs is named there exactly once, for the binary it is in, and
//! every name there is a test, so a new GPU test cannot be left out of the GPU run.
//!
//! The script itself runs here with stand-in binaries (`$GPU_BIN`) that pass, fail or skip as
//! a test says: each part's counts line and the script's exit status follow the results.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{names, repo, text, tmp};

/// One line of the part table.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    part: String,
    binary: String,
    test: String,
}

/// The part table of scripts/gpu.sh: the lines between `parts_table='` and the closing `'`.
fn table() -> Vec<Row> {
    let script = std::fs::read_to_string(repo("scripts/gpu.sh")).expect("scripts/gpu.sh");
    let open = "\nparts_table='\n";
    let start = script
        .find(open)
        .expect("scripts/gpu.sh has a parts_table='...' block")
        + open.len();
    let len = script[start..]
        .find("\n'\n")
        .expect("the part table of scripts/gpu.sh ends with a line holding only '");
    script[start..start + len]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(fields.len(), 3, "not a PART BINARY TEST line: {l:?}");
            Row {
                part: fields[0].into(),
                binary: fields[1].into(),
                test: fields[2].into(),
            }
        })
        .collect()
}

/// The part names in table order.
fn parts(rows: &[Row]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        if !names.contains(&r.part) {
            names.push(r.part.clone());
        }
    }
    names
}

/// The `#[test]` functions of a test file, as the harness names them (`module::name` inside a
/// module), read with syn so that comments and strings do not count.
fn test_fns(path: &str) -> Vec<String> {
    fn walk(items: &[syn::Item], prefix: &str, out: &mut Vec<String>) {
        for item in items {
            match item {
                syn::Item::Fn(f) if f.attrs.iter().any(|a| a.path().is_ident("test")) => {
                    out.push(format!("{prefix}{}", f.sig.ident));
                }
                syn::Item::Mod(m) => {
                    if let Some((_, inner)) = &m.content {
                        walk(inner, &format!("{prefix}{}::", m.ident), out);
                    }
                }
                _ => {}
            }
        }
    }
    let src = std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let file = syn::parse_file(&src).unwrap_or_else(|e| panic!("{path} does not parse: {e}"));
    let mut out = Vec::new();
    walk(&file.items, "", &mut out);
    out
}

/// The test files whose tests run on the GPU machine, by the table's binary name.
const FILES: [(&str, &str); 2] = [("gpu", "tests/gpu.rs"), ("faults", "tests/faults.rs")];

#[test]
fn the_test_function_reader_finds_tests_inside_modules_and_only_tests() {
    let t = tmp();
    let dir = t.path().join("tests");
    std::fs::create_dir_all(&dir).unwrap();
    // test_fns reads paths relative to the repository; an absolute path replaces it.
    let file = dir.join("sample.rs");
    std::fs::write(
        &file,
        "#[test]\nfn a() {}\n// #[test] fn in_a_comment() {}\nfn helper() {}\n\
         #[test]\n#[ignore]\nfn b() { let _ = \"#[test] fn in_a_string() {}\"; }\n\
         mod inner {\n    #[test]\n    fn c() {}\n}\n",
    )
    .unwrap();
    assert_eq!(test_fns(file.to_str().unwrap()), ["a", "b", "inner::c"]);
}

#[test]
fn every_gpu_and_fault_test_is_in_exactly_one_part() {
    let rows = table();
    for (binary, file) in FILES {
        let tests = test_fns(file);
        assert!(tests.len() >= 4, "{file}: only {tests:?} found");
        for name in tests {
            let found: Vec<&Row> = rows.iter().filter(|r| r.test == name).collect();
            assert!(
                !found.is_empty(),
                "{file}: {name} is in no part of scripts/gpu.sh: add a line \
                 `PART {binary} {name}` to its part table (bash scripts/gpu.sh tests list)"
            );
            assert_eq!(
                found.len(),
                1,
                "{file}: {name} is in more than one part of scripts/gpu.sh: {found:?}"
            );
            assert_eq!(found[0].binary, binary, "{file}: {name}: {:?}", found[0]);
        }
    }
}

#[test]
fn every_name_in_the_part_table_is_a_test() {
    let rows = table();
    let tests: BTreeMap<&str, Vec<String>> = FILES
        .iter()
        .map(|(binary, file)| (*binary, test_fns(file)))
        .collect();
    for r in &rows {
        match r.binary.as_str() {
            "example" => assert!(
                repo(&format!("examples/{}.rs", r.test)).is_file(),
                "the part table names the example {}, which examples/ does not have",
                r.test
            ),
            binary => {
                let names = tests.get(binary).unwrap_or_else(|| {
                    panic!("unknown binary {binary:?} in the part table: {r:?}")
                });
                assert!(
                    names.contains(&r.test),
                    "the part table names {}, which is not a test of tests/{binary}.rs",
                    r.test
                );
            }
        }
        let same = rows
            .iter()
            .filter(|o| o.binary == r.binary && o.test == r.test)
            .count();
        assert_eq!(same, 1, "named {same} times in the part table: {r:?}");
    }
    assert!(
        rows.iter()
            .any(|r| r.binary == "example" && r.test == "tuned_transpose"),
        "the tuned_transpose example is in no part"
    );
}

#[test]
fn each_exhaustive_test_is_a_part_of_its_own() {
    let rows = table();
    let exhaustive: Vec<&Row> = rows
        .iter()
        .filter(|r| r.test.starts_with("every_variant_"))
        .collect();
    assert!(exhaustive.len() >= 2, "{exhaustive:?}");
    for r in exhaustive {
        let mates: Vec<&str> = rows
            .iter()
            .filter(|o| o.part == r.part && o.test != r.test)
            .map(|o| o.test.as_str())
            .collect();
        assert!(
            mates.is_empty(),
            "{} shares the part {} with {mates:?}",
            r.test,
            r.part
        );
    }
}

/// `bash scripts/gpu.sh ARGS` with the stand-ins of `bin` and the logs in `out`.
fn gpu_sh(bin: &Path, out: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(repo("scripts/gpu.sh"))
        .args(args)
        .env("GPU_BIN", bin)
        .env("OUT", out)
        .env("CUDA_AUTOTUNE_CACHE", out.join("cache"))
        .env_remove("GPU_PART_LIMIT_S");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("bash runs")
}

#[test]
fn the_list_names_every_part_and_its_tests_in_table_order() {
    let t = tmp();
    let out = gpu_sh(t.path(), t.path(), &["tests", "list"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rows = table();
    let mut want = String::new();
    for part in parts(&rows) {
        want += &format!("{part}\n");
        for r in rows.iter().filter(|r| r.part == part) {
            want += &format!("  {:<8} {}\n", r.binary, r.test);
        }
    }
    assert_eq!(text(&out.stdout), want);
}

/// A stand-in for a test binary run as `EXE --exact NAME --include-ignored --test-threads=1`:
/// it prints what the harness prints for one test and fails or skips the names listed in
/// `$STAND_IN_FAIL` or `$STAND_IN_SKIP`. Without `--exact` it runs nothing.
const STAND_IN_TESTS: &str = r#"#!/usr/bin/env bash
[ "$1" = --exact ] || { printf 'running 0 tests\n\ntest result: ok. 0 passed; 0 failed\n'; exit 0; }
name=$2
printf 'running 1 test\ntest %s ... ' "$name"
case " ${STAND_IN_FAIL:-} " in *" $name "*)
  printf 'FAILED\n\nfailures:\n\n---- %s stdout ----\n' "$name"
  printf "thread '%s' panicked at tests/gpu.rs:1:1:\nplanted failure of %s\n" "$name" "$name"
  printf '\nfailures:\n    %s\n\ntest result: FAILED. 0 passed; 1 failed\n' "$name"
  exit 101 ;;
esac
case " ${STAND_IN_SKIP:-} " in *" $name "*) echo "SKIPPED $name: no CUDA GPU on this machine" >&2 ;; esac
printf 'ok\n\ntest result: ok. 1 passed; 0 failed\n'
"#;

/// A stand-in `tune` that writes a run file into its `--out` folder, as a real run does, and
/// prints a Best line.
const STAND_IN_TUNE: &str = r#"#!/usr/bin/env bash
out=
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
[ -n "$out" ] && mkdir -p "$out" && echo row > "$out/run.csv"
echo "Best: X=1  1.0 GB/s, 99.0% of copy (0.1000 ms median)"
"#;

/// A folder `bin` under `root` of stand-ins for the binaries `build` copies into .gpu/.
fn stand_ins(root: &Path) -> PathBuf {
    let dir = root.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let example = "#!/usr/bin/env bash\necho 'shape, db GB/s, measured GB/s, ratio'\n\
                   exit \"${STAND_IN_EXAMPLE_EXIT:-0}\"\n";
    for (name, body) in [
        ("gpu-tests", STAND_IN_TESTS),
        ("faults-tests", STAND_IN_TESTS),
        ("tuned_transpose", example),
        ("tune", STAND_IN_TUNE),
    ] {
        executable(&dir.join(name), body);
    }
    dir
}

/// Writes `body` to `path`, executable.
fn executable(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The counts line of `part` in the script's output.
fn counts_line<'a>(stdout: &'a str, part: &str) -> &'a str {
    let head = format!("part {part}: ");
    stdout
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no counts line for {part}:\n{stdout}"))
}

#[test]
fn the_exit_status_and_the_counts_follow_the_test_results() {
    let t = tmp();
    let bin = stand_ins(t.path());
    let out = t.path().join("out");
    let rows = table();
    let size = |part: &str| rows.iter().filter(|r| r.part == part).count();
    let transpose = size("transpose");
    let first = rows.iter().find(|r| r.part == "transpose").unwrap();

    // Every test passes: exit 0, one counts line a part and a total.
    let run = gpu_sh(&bin, &out, &["tests"], &[]);
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
    for part in parts(&rows) {
        assert!(
            counts_line(&stdout, &part)
                .contains(&format!(": {} passed, 0 failed, 0 skipped (", size(&part))),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains(&format!(
            "all: {} passed, 0 failed, 0 skipped (",
            rows.len()
        )),
        "{stdout}"
    );

    // One failing test and a failing example: exit 1, both counted, the panic shown.
    let sgemm = rows.iter().find(|r| r.part == "sgemm").unwrap();
    let run = gpu_sh(
        &bin,
        &out,
        &["tests"],
        &[
            ("STAND_IN_FAIL", &sgemm.test),
            ("STAND_IN_EXAMPLE_EXIT", "1"),
        ],
    );
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    assert!(
        counts_line(&stdout, "sgemm").contains(&format!(
            ": {} passed, 1 failed, 0 skipped (",
            size("sgemm") - 1
        )),
        "{stdout}"
    );
    assert!(
        counts_line(&stdout, "example").contains(": 0 passed, 1 failed, 0 skipped ("),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("planted failure of {}", sgemm.test)),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "all: {} passed, 2 failed, 0 skipped (",
            rows.len() - 2
        )),
        "{stdout}"
    );
    assert!(stdout.contains("not passed: sgemm example"), "{stdout}");
    assert!(out
        .join(format!("tests/sgemm/{}.log", sgemm.test))
        .is_file());

    // A skipped test did not run: counted as skipped, and the run does not pass.
    let run = gpu_sh(
        &bin,
        &out,
        &["tests", "transpose"],
        &[("STAND_IN_SKIP", &first.test)],
    );
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    assert!(
        counts_line(&stdout, "transpose").contains(&format!(
            ": {} passed, 0 failed, 1 skipped (",
            transpose - 1
        )),
        "{stdout}"
    );

    // One test by name runs alone, under its part.
    let run = gpu_sh(&bin, &out, &["tests", &first.test], &[]);
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}");
    assert!(
        counts_line(&stdout, &format!("transpose ({})", first.test))
            .contains(": 1 passed, 0 failed, 0 skipped ("),
        "{stdout}"
    );

    // An unknown name is bad input: exit 2, one line, nothing run.
    let run = gpu_sh(&bin, &out, &["tests", "no-such-part"], &[]);
    assert_eq!(run.status.code(), Some(2));
    assert!(run.stdout.is_empty());
    assert_eq!(
        text(&run.stderr).trim(),
        "error: no part or test named 'no-such-part' (bash scripts/gpu.sh tests list)"
    );
}

#[test]
fn a_part_stops_at_its_time_limit_and_does_not_pass() {
    let t = tmp();
    let bin = stand_ins(t.path());
    // A test binary that never finishes.
    std::fs::write(bin.join("gpu-tests"), "#!/usr/bin/env bash\nsleep 60\n").unwrap();
    let out = t.path().join("out");
    let start = std::time::Instant::now();
    let run = gpu_sh(
        &bin,
        &out,
        &["tests", "transpose"],
        &[("GPU_PART_LIMIT_S", "1")],
    );
    let stdout = text(&run.stdout);
    assert!(
        start.elapsed().as_secs() < 30,
        "the part ran past its limit: {stdout}"
    );
    assert_eq!(run.status.code(), Some(1), "{stdout}");
    let rows = table();
    let transpose = rows.iter().filter(|r| r.part == "transpose").count();
    assert!(
        counts_line(&stdout, "transpose")
            .contains(&format!(": 0 passed, {transpose} failed, 0 skipped (")),
        "{stdout}"
    );
    assert!(
        stdout.contains("stopped at the part's limit of 1 s"),
        "{stdout}"
    );
    assert!(stdout.contains("NOT RUN"), "{stdout}");
}

/// The modes that run `tune` leave their tables and logs in $OUT and nothing else (the runs'
/// own --out folders are temporary): a device call brings back a few files, and the table is
/// among them. retune's database is results/best.csv with its rows re-tuned (here by a
/// stand-in that keeps them).
#[test]
fn the_tuning_modes_leave_only_their_tables_and_logs_in_out() {
    let t = tmp();
    let bin = stand_ins(t.path());
    let cases: [(&[&str], &[&str]); 3] = [
        (&["roof"], &["roof-stderr.log", "roof.log", "roof.md"]),
        (
            &["repeat", "2", "--op transpose --shape 8x8"],
            &["repeat-stderr.log", "repeat.log", "repeat.md"],
        ),
        (&["retune"], &["best.csv", "retune.log"]),
    ];
    for (args, want) in cases {
        let out = t.path().join(format!("out-{}", args[0]));
        let run = gpu_sh(&bin, &out, args, &[]);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&run.stderr)
        );
        assert_eq!(names(&out), want, "{args:?}");
    }
    assert!(
        text(&std::fs::read(t.path().join("out-roof/roof.md")).unwrap())
            .contains("| 99.0% of copy |"),
        "the roof table has the stand-in's rows"
    );
    // repeat: one row a command, the winners counted and the wall time's range last.
    let repeat = text(&std::fs::read(t.path().join("out-repeat/repeat.md")).unwrap());
    let row = repeat
        .lines()
        .find(|l| l.starts_with("| `--op transpose --shape 8x8` |"))
        .unwrap_or_else(|| panic!("no row for the command: {repeat}"));
    let cells: Vec<&str> = row.trim().trim_matches('|').split(" | ").collect();
    assert_eq!(cells.len(), 7, "{row}");
    assert_eq!(cells[1..3], ["2", "1"], "{row}");
    assert!(
        cells[6].trim().split('-').all(|s| s.parse::<f64>().is_ok()),
        "{row}"
    );
    assert_eq!(
        std::fs::read(t.path().join("out-retune/best.csv")).unwrap(),
        std::fs::read(repo("results/best.csv")).unwrap()
    );
}

/// `profile` pins each stored winner whole: every parameter of the op gets one value (those a
/// row predates at the value such rows stand for), so the profiled launch is the stored
/// configuration's, never another variant of a sweep the pins left open. A stored tile that
/// walks its columns (`BLOCK_ORDER=columns`, the H200's 8191² rows) is profiled in the row
/// order too, pinned the same way. A stand-in `ncu` prints the command it was given; `tune` is
/// the real binary (`tune params` lists the values), and a stand-in `nvidia-smi` names the GPU.
#[test]
fn the_profile_pins_every_parameter_of_a_stored_winner() {
    use std::collections::BTreeSet;
    // Four transposes and 4096^3, each against its baseline; on the H200 also its two 8191^2
    // tiles in the row order. 8191^2 runs pinned to the row order: on the H100 all four (its
    // stored tiles predate BLOCK_ORDER), on the H200 only those two.
    for (gpu, runs, rows_order) in [("NVIDIA H100 80GB HBM3", 10, 4), ("NVIDIA H200", 12, 2)] {
        let t = tmp();
        let bin = t.path().join("bin");
        let tools = t.path().join("tools");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&tools).unwrap();
        std::os::unix::fs::symlink(common::tune_exe(), bin.join("tune")).unwrap();
        let smi = format!(
            "case \"$*\" in *driver_version*) echo '{gpu}, 580.0' ;; *) echo '{gpu}' ;; esac"
        );
        for (name, body) in [
            ("nvidia-smi", smi.as_str()),
            ("ncu", "echo \"  stand_in ($*)\""),
        ] {
            executable(&tools.join(name), &format!("#!/usr/bin/env bash\n{body}\n"));
        }
        let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap());
        let run = gpu_sh(
            &bin,
            &t.path().join("out"),
            &["profile"],
            &[("PATH", &path)],
        );
        let stdout = text(&run.stdout);
        assert_eq!(run.status.code(), Some(0), "{stdout}{}", text(&run.stderr));
        let (mut pinned_runs, mut in_rows_order) = (0, 0);
        for line in stdout.lines().filter(|l| l.starts_with("  stand_in (")) {
            let args: Vec<&str> = line.split_whitespace().collect();
            let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
            // 999x777x555 pins the winner of a default run, which needs a GPU.
            if after("--shape") == "999x777x555" {
                continue;
            }
            let op = cuda_autotune::spec::ops::Op::load(after("--op"), None).unwrap();
            let want: BTreeSet<&str> = op.spec.params.iter().map(|p| p.name.as_str()).collect();
            let pinned: BTreeSet<&str> = args
                .windows(2)
                .filter(|w| w[0] == "--param")
                .map(|w| w[1].split('=').next().unwrap())
                .collect();
            assert_eq!(pinned, want, "{gpu}: {line}");
            pinned_runs += 1;
            if after("--shape") == "8191x8191" && line.contains("--param BLOCK_ORDER=rows") {
                in_rows_order += 1;
            }
        }
        assert_eq!(pinned_runs, runs, "{gpu}: {stdout}");
        assert_eq!(in_rows_order, rows_order, "{gpu}: {stdout}");
    }
}
