//! docs/extending.md, followed with a tiny op: `copy` (y = x for N elements) is added as the
//! page says for an op of one's own, its spec and template in a templates folder used with
//! `--templates`, its reference the registered CPU reference `copy` (src/spec/reference/copy.rs,
//! one line in `REFERENCES`) and its baseline the registered kind `memcpy`. The op is listed, its
//! space renders in every dtype, every variant compiles with NVRTC (`--compile-only`, no GPU
//! needed), and the expected output of its runs is what its reference computes.
//!
//! The compile test needs NVRTC and fails (it does not skip) when it cannot be loaded: run it
//! through scripts/test.sh, or with `export LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)`.

use cuda_autotune::measure::verify;
use cuda_autotune::model::dtype::{self, Dtype};
use cuda_autotune::model::limits::DeviceLimits;
use cuda_autotune::model::shape::Shape;
use cuda_autotune::spec::codegen::Renderer;
use cuda_autotune::spec::ops::{Op, Role};
use cuda_autotune::spec::reference::{self, REFERENCES};
use cuda_autotune::spec::space::enumerate;
use std::path::Path;
use tempfile::TempDir;

mod common;
use common::{count_before, repo, text, tmp, tune_cmd};

/// Step 1: the spec. Every dtype (the `copy` reference moves elements of any type); a memcpy
/// of the same bytes is the roof.
const SPEC: &str = r#"
name = "copy"
summary = "y = x for N elements"
dims = ["N"]
dtypes = ["f32", "f64", "f16", "bf16"]
template = "copy.cu.tera"
kernel = "copy"
reference = "copy"
compare = "exact"
args = ["y", "x", "N"]

[metric]
kind = "bandwidth"
bytes = "2 * N * ELEM_BYTES"

[[params]]
name = "BLOCK"
values = [128, 256]
help = "threads per block"

[[params]]
name = "ITEMS"
values = [1, 4]
help = "elements per thread, a block's width apart"

[launch]
block = ["BLOCK", "1", "1"]
grid = ["max(1, ceil_div(N, BLOCK * ITEMS))", "1", "1"]

[[buffers]]
name = "x"
elements = "N"
role = "input"

[[buffers]]
name = "y"
elements = "N"
role = "output"

[[baselines]]
name = "memcpy"
kind = "memcpy"
from = "x"
to = "y"
expect = "x"
roof = true
"#;

/// Step 2: the template the spec names.
const TEMPLATE: &str = r#"// copy variant: BLOCK={{ BLOCK }} ITEMS={{ ITEMS }} ({{ dtype }})
{{ T_DECL }}
extern "C" __global__ void __launch_bounds__({{ BLOCK }})
copy({{ T }}* __restrict__ y, const {{ T }}* __restrict__ x, int n)
{
    const long long first = (long long)blockIdx.x * ({{ BLOCK }} * {{ ITEMS }}) + threadIdx.x;
#pragma unroll
    for (int j = 0; j < {{ ITEMS }}; ++j) {
        const long long i = first + (long long)j * {{ BLOCK }};
        if (i < n) y[i] = x[i];
    }
}
"#;

/// A templates folder holding the op (its spec edited by `edit`).
fn templates(edit: impl Fn(&str) -> String) -> TempDir {
    let dir = tmp();
    std::fs::write(dir.path().join("copy.toml"), edit(SPEC)).unwrap();
    std::fs::write(dir.path().join("copy.cu.tera"), TEMPLATE).unwrap();
    dir
}

fn load(dir: &Path, dtype: Dtype) -> Op {
    Op::load("copy", Some(dir))
        .unwrap()
        .with_dtype(Some(dtype.name()))
        .unwrap()
}

/// The page says what this test does: the files of an op, the folder option, the registry of
/// CPU references and the references it holds.
#[test]
fn the_page_names_the_steps_this_test_takes() {
    let page = std::fs::read_to_string(repo("docs/extending.md")).unwrap();
    for step in [
        "`<op>.toml`",
        "`<op>.cu.tera`",
        "`--templates DIR --op <op>`",
        "src/spec/reference/",
        "`REFERENCES`",
        "`BUILTIN_OPS`",
        "src/spec/baseline/",
        "`KINDS`",
        "`FORMATS`",
        "`safe`",
    ] {
        assert!(
            page.contains(step),
            "docs/extending.md does not name {step}"
        );
    }
    for r in REFERENCES {
        assert!(
            page.contains(&format!("`{}`", r.name)),
            "docs/extending.md does not list the reference {}",
            r.name
        );
    }
}

/// The op is listed: `tune params` shows it, and the folder's ops are what an unknown op is
/// told.
#[test]
fn the_op_is_listed() {
    let dir = templates(str::to_string);
    let t = tmp();
    let out = tune_cmd(&t)
        .args(["params", "--op", "copy", "--templates"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("copy: y = x for N elements\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("--shape N; --dtype f32 (default), f64, f16, bf16"),
        "{stdout}"
    );
    assert!(
        stdout.contains("BLOCK\n    default sweep: 128, 256"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ITEMS\n    default sweep: 1, 4"),
        "{stdout}"
    );
    let out = tune_cmd(&t)
        .args(["--op", "fft", "--shape", "1000", "--templates"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown op 'fft' (known ops: copy)"),
        "{}",
        text(&out.stderr)
    );
}

/// Its space renders: four configurations at any shape, each its own source of the op's
/// kernel in the run's element type; its baseline is the registered memcpy kind.
#[test]
fn its_space_renders_in_every_dtype() {
    let dir = templates(str::to_string);
    for dtype in dtype::ALL {
        let op = load(dir.path(), dtype);
        assert_eq!(op.spec.baselines[0].kind, "memcpy");
        let renderer = Renderer::new(&op).unwrap();
        let shape = Shape {
            dims: vec![1_000_003],
        };
        let space = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        assert_eq!(space.len(), 4, "{dtype}");
        let mut sources: Vec<String> = space
            .iter()
            .map(|c| {
                assert!(c.pruned.is_none(), "{dtype} {}", c.config.label());
                renderer.render(c).unwrap()
            })
            .collect();
        for s in &sources {
            assert!(s.contains("__global__ void __launch_bounds__"), "{s}");
            let t = dtype.c_type();
            assert!(
                s.contains(&format!(
                    "\ncopy({t}* __restrict__ y, const {t}* __restrict__ x, int n)"
                )),
                "{s}"
            );
            assert!(s.contains(&format!("({})", dtype.name())), "{s}");
        }
        sources.sort();
        sources.dedup();
        assert_eq!(sources.len(), 4, "{dtype}: configurations share a source");
    }
}

/// Every variant compiles with NVRTC, in a compile-only run of the whole space.
#[test]
fn every_variant_compiles() {
    assert!(
        cuda_autotune::cuda::compile::nvrtc_version().is_ok(),
        "NVRTC cannot be loaded: run the tests with scripts/test.sh (or `export \
         LD_LIBRARY_PATH=$(scripts/nvrtc-env.sh)` first)"
    );
    let dir = templates(str::to_string);
    let t = tmp();
    for dtype in dtype::ALL.map(Dtype::name) {
        let out = tune_cmd(&t)
            .args(["--op", "copy", "--shape", "1000003", "--dtype", dtype])
            .arg("--templates")
            .arg(dir.path())
            .args([
                "--compile-only",
                "--arch",
                "sm_90",
                "--strategy",
                "exhaustive",
            ])
            .args(["--out", &format!("results-{dtype}")])
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
        let summary = stdout
            .lines()
            .find(|l| l.starts_with("compile-only for "))
            .unwrap_or_else(|| panic!("no compile-only summary:\n{stdout}"));
        assert_eq!(
            count_before(summary, " variants compiled"),
            4,
            "{dtype}: {summary}"
        );
        assert_eq!(count_before(summary, " failed"), 0, "{dtype}: {summary}");
    }
}

/// Its reference is used: the spec's `reference` is the registry's `copy` entry, the expected
/// output of a run (computed from the inputs as a run fills them, by the call the GPU session
/// makes) is the input, and the entry's dtypes are the ones the op may list: with a reference
/// that computes f32 only, the same spec is refused.
#[test]
fn its_reference_is_used() {
    let dir = templates(str::to_string);
    for dtype in dtype::ALL {
        let op = load(dir.path(), dtype);
        let entry = reference::lookup(&op.spec.reference).expect("a registered reference");
        assert_eq!(entry.name, "copy");
        assert!(entry.supports(dtype));
        let n = 1000;
        let inputs: Vec<Vec<u8>> = op
            .spec
            .buffers
            .iter()
            .filter(|b| b.role == Role::Input)
            .enumerate()
            .map(|(i, b)| verify::fill_input(b.fill, dtype, n, 7 + i as u64))
            .collect();
        assert_eq!(inputs.len(), 1);
        let shape = Shape {
            dims: vec![n as u64],
        };
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let expected =
            cuda_autotune::spec::reference::compute(&op.spec.reference, &shape, dtype, &refs)
                .unwrap();
        assert_eq!(expected, inputs[0], "{dtype}");
        assert_eq!(expected.len(), n * dtype.bytes());
    }
    let f32_only = templates(|s| s.replace("reference = \"copy\"", "reference = \"matmul\""));
    let e = Op::load("copy", Some(f32_only.path()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dtypes: the CPU reference 'matmul' computes f32 only, not f64"),
        "{e}"
    );
}
