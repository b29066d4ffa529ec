//! User-written ops (`--spec`): the shipped example compiles with the real NVRTC in every
//! variant, and every kind of spec error names the file, the line and the field.

use std::path::{Path, PathBuf};

mod common;
use common::tune_text;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/vector_add")
}

/// A copy of the example with `edit` applied to (spec, template).
fn edited(edit: impl Fn(String, String) -> (String, String)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let spec = std::fs::read_to_string(example().join("vector_add.toml")).unwrap();
    let tpl = std::fs::read_to_string(example().join("vector_add.cu.tera")).unwrap();
    let (spec, tpl) = edit(spec, tpl);
    std::fs::write(dir.path().join("vector_add.toml"), spec).unwrap();
    std::fs::write(dir.path().join("vector_add.cu.tera"), tpl).unwrap();
    dir
}

fn nvrtc_or_fail() {
    assert!(
        cuda_autotune::cuda::compile::nvrtc_version().is_ok(),
        "NVRTC cannot be loaded: run the tests with `bash scripts/test.sh`, which installs it"
    );
}

/// Runs a spec expected to be rejected: exit 2, one line naming `file:line` and `field`.
fn rejected(spec_dir: &Path, field: &str) -> String {
    let cache = tempfile::tempdir().unwrap();
    let dir = spec_dir.display().to_string();
    let (code, _, err) = tune_text(
        cache.path(),
        &["--spec", &dir, "--shape", "1000", "--compile-only"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("vector_add.toml"), "names the file: {err}");
    assert!(err.contains(field), "names {field}: {err}");
    err
}

#[test]
fn the_example_compiles_in_every_variant() {
    nvrtc_or_fail();
    let cache = tempfile::tempdir().unwrap();
    let dir = example().display().to_string();
    for shape in ["10000000", "1000003"] {
        let (code, out, err) = tune_text(
            cache.path(),
            &[
                "--spec",
                &dir,
                "--shape",
                shape,
                "--compile-only",
                "--strategy",
                "exhaustive",
                "--no-cache",
            ],
        );
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(
            out.contains("100 variants compiled") && out.contains(" 0 failed"),
            "{out}"
        );
    }
}

#[test]
fn unknown_name_in_a_constraint_points_at_its_line() {
    let dir = edited(|s, t| {
        (
            s.replace("expr = \"BLOCK <= MAX", "expr = \"BLOCKS <= MAX"),
            t,
        )
    });
    let err = rejected(dir.path(), "constraints[0]");
    assert!(err.contains("BLOCKS"), "{err}");
    let line = std::fs::read_to_string(dir.path().join("vector_add.toml"))
        .unwrap()
        .lines()
        .position(|l| l.contains("BLOCKS <="))
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!("vector_add.toml:{line}")),
        "line {line}: {err}"
    );
}

#[test]
fn toml_syntax_errors_point_at_the_line() {
    let dir = edited(|s, t| {
        (
            s.replace("kernel = \"vector_add\"", "kernel == \"vector_add\""),
            t,
        )
    });
    let err = rejected(dir.path(), "line");
    assert!(err.contains("kernel"), "{err}");
}

#[test]
fn a_buffer_size_that_overflows_is_rejected() {
    let dir = edited(|s, t| {
        (
            s.replacen(
                "elements = \"N\"",
                "elements = \"N * N * N * 1000000000\"",
                1,
            ),
            t,
        )
    });
    let cache = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let (code, _, err) = tune_text(
        cache.path(),
        &["--spec", &d, "--shape", "2000000000", "--compile-only"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("vector_add.toml:") && err.contains("buffers.a.elements"),
        "{err}"
    );
}

#[test]
fn unknown_fields_and_bad_reference_configs_are_rejected() {
    let dir = edited(|s, t| (s.replace("summary =", "sumary ="), t));
    rejected(dir.path(), "sumary");
    let dir = edited(|s, t| {
        (
            s.replace(
                "reference_config = { BLOCK = 256,",
                "reference_config = { BLOCKZ = 256,",
            ),
            t,
        )
    });
    rejected(dir.path(), "reference_config.BLOCKZ");
    let dir = edited(|s, t| {
        (
            s.replacen("role = \"input\"", "role = \"input\"\ndtype = \"f64\"", 1),
            t,
        )
    });
    rejected(dir.path(), "buffers.a.dtype");
    // A registered CPU reference takes no reference_config.
    let dir = edited(|s, t| {
        (
            s.replace("reference = \"config\"", "reference = \"copy\""),
            t,
        )
    });
    rejected(
        dir.path(),
        "reference_config is only used with reference = \"config\"",
    );
    // A name that is neither `config` nor a registered reference is named as such.
    let dir = edited(|s, t| {
        (
            s.replace("reference = \"config\"", "reference = \"vector_add\""),
            t,
        )
    });
    rejected(dir.path(), "reference: 'vector_add' is not a reference");
}

#[test]
fn a_template_with_an_undefined_variable_fails_per_variant_with_its_line() {
    nvrtc_or_fail();
    let dir = edited(|s, t| (s, t.replace("{{ ITEMS }}", "{{ ITEMZ }}")));
    let cache = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let (code, out, _) = tune_text(
        cache.path(),
        &[
            "--spec",
            &d,
            "--shape",
            "1000",
            "--compile-only",
            "--param",
            "BLOCK=64",
            "--param",
            "ITEMS=1",
        ],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("ITEMZ") && out.contains("vector_add.cu.tera:1"),
        "{out}"
    );
}

#[test]
fn a_missing_spec_or_template_is_a_clear_error() {
    let cache = tempfile::tempdir().unwrap();
    let (code, _, err) = tune_text(
        cache.path(),
        &[
            "--spec",
            "/nonexistent/x.toml",
            "--shape",
            "10",
            "--compile-only",
        ],
    );
    // A missing file is bad input, like any other argument that names nothing.
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent/x.toml"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let d = empty.path().display().to_string();
    let (code, _, err) = tune_text(
        cache.path(),
        &["--spec", &d, "--shape", "10", "--compile-only"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no .toml spec"), "{err}");
}

#[test]
fn errors_in_a_template_override_name_the_override_file() {
    let dir = edited(|s, t| (s, t));
    let other = tempfile::tempdir().unwrap();
    let over = other.path().join("mine.cu.tera");
    std::fs::write(&over, "{% if %}\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let o = over.display().to_string();
    let (code, _, err) = tune_text(
        cache.path(),
        &[
            "--spec",
            &d,
            "--template",
            &o,
            "--shape",
            "1000",
            "--compile-only",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("mine.cu.tera"), "names the override: {err}");
    assert!(!err.contains("vector_add.cu.tera"), "{err}");
}

/// The line `needle` is on in the example spec after `edit`, as `vector_add.toml:LINE`.
fn line_of(spec: &str, needle: &str, last: bool) -> String {
    let mut lines = spec
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with(needle));
    let found = if last { lines.last() } else { lines.next() };
    format!(
        "vector_add.toml:{}",
        found.expect("the needle is in the spec").0 + 1
    )
}

#[test]
fn bad_args_and_buffers_are_refused_at_load_with_their_line() {
    let spec = |edit: &dyn Fn(String) -> String| {
        let s = std::fs::read_to_string(example().join("vector_add.toml")).unwrap();
        edit(s)
    };
    // An argument that is neither a buffer nor an expression over the dimensions.
    let typo = |s: String| {
        s.replace(
            r#"args = ["c", "a", "b", "N"]"#,
            r#"args = ["c", "a", "bb", "N"]"#,
        )
    };
    let dir = edited(|s, t| (typo(s), t));
    let err = rejected(dir.path(), "args: 'bb' is neither a buffer (a, b, c)");
    assert!(err.contains(&line_of(&spec(&typo), "args", false)), "{err}");
    let per_config = |s: String| s.replace(r#""b", "N"]"#, r#""b", "N / BLOCK"]"#);
    let dir = edited(|s, t| (per_config(s), t));
    rejected(dir.path(), "args: 'N / BLOCK' is neither a buffer");
    // The output buffer left out of the arguments.
    let no_out = |s: String| {
        s.replace(
            r#"args = ["c", "a", "b", "N"]"#,
            r#"args = ["a", "b", "N"]"#,
        )
    };
    let dir = edited(|s, t| (no_out(s), t));
    let err = rejected(dir.path(), "args: the output buffer 'c' is not an argument");
    assert!(
        err.contains(&line_of(&spec(&no_out), "args", false)),
        "{err}"
    );
    // Two buffers of one name: pointed at the second.
    let twice = |s: String| s.replace("name = \"b\"", "name = \"a\"");
    let dir = edited(|s, t| (twice(s), t));
    let err = rejected(dir.path(), "buffers: two buffers are named 'a'");
    assert!(
        err.contains(&line_of(&spec(&twice), "name = \"a\"", true)),
        "{err}"
    );
}
