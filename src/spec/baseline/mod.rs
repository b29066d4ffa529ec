//! Baseline kinds, in one table ([`KINDS`]): the `kind` a spec's `[[baselines]]` entry names,
//! the fields it reads (checked when the spec is read), and the GPU work it times in a run. A
//! new kind is a file here with its `INFO` and one entry in [`KINDS`]; its fields are its own
//! (the entry's fields beyond `name`, `kind`, `expect` and `roof`). A kind whose work is none
//! of [`Work`]'s variants also needs that variant (src/model/work.rs) and the arm of the
//! worker's session that runs it (src/isolate/session.rs).
//!
//! The kinds see the spec and the run through [`SpecView`] and [`RunContext`], not the op's
//! types: reading a spec checks its baselines here, so this module imports nothing of `spec`.

pub mod cublas_sgemm;
pub mod kernel;
pub mod memcpy;

use crate::error::Result;
use crate::model::limits::LaunchDims;
use crate::model::work::Work;
use serde::Deserialize;
use std::path::Path;

/// A baseline: timed beside the space in every run. Its `kind` says what it runs and which
/// further fields it reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Baseline {
    pub name: String,
    /// The kind's name, one of [`NAMES`] (default: the first, `kernel`).
    #[serde(default = "default_kind", deserialize_with = "registered_kind")]
    pub kind: String,
    /// "reference" (the op's reference output) or the name of an input buffer it must equal.
    pub expect: String,
    /// Marks the baselines whose best time is the roof that variants are compared with.
    #[serde(default)]
    pub roof: bool,
    /// The kind's own fields (`kernel`, `block`, `grid`; `from`, `to`; `operands`), read and
    /// checked by the kind.
    #[serde(flatten)]
    pub fields: toml::Table,
}

fn default_kind() -> String {
    NAMES[0].to_string()
}

/// A registered kind's name; another is refused as an unknown enum variant is.
fn registered_kind<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<String, D::Error> {
    let name = String::deserialize(d)?;
    match lookup(&name) {
        Some(_) => Ok(name),
        None => Err(serde::de::Error::unknown_variant(&name, NAMES)),
    }
}

/// One kind of baseline.
pub struct BaselineKind {
    /// The spec's `kind`.
    pub name: &'static str,
    /// What it times, in one line.
    pub about: &'static str,
    /// Checks the entry's fields against the spec when the spec is read; the problem, naming
    /// the field (`baselines.NAME.from: names no buffer`).
    pub check: fn(&Baseline, &SpecView) -> std::result::Result<(), String>,
    /// The work it times in a run; `Ok(Err(why))` when it cannot run at this shape or on this
    /// device (its record fails with the reason).
    pub work: fn(&Baseline, &RunContext) -> Result<std::result::Result<Work, String>>,
}

/// What a kind's check sees of the spec.
pub struct SpecView<'a> {
    /// The names of the spec's buffers.
    pub buffers: Vec<&'a str>,
    /// The number of dimensions of its shapes.
    pub dims: usize,
    /// Whether it has a baseline template (`[baseline_source]`).
    pub baseline_source: bool,
}

/// A launch triple pair (`block`, `grid`) evaluated at the run's shape and device, the third
/// argument naming it for messages: `Ok(Err(why))` when it is not a launch of this device.
pub type EvalLaunch<'a> = dyn Fn(&[String; 3], &[String; 3], &str) -> Result<std::result::Result<LaunchDims, String>>
    + 'a;

/// What a baseline's work may depend on in a run.
pub struct RunContext<'a> {
    /// The spec's file, for messages.
    pub origin: &'a str,
    /// The shape's dimensions.
    pub dims: &'a [u64],
    /// Evaluates launch expressions at this shape on this device.
    pub eval_launch: &'a EvalLaunch<'a>,
    /// The compiled baseline template (the spec's `[baseline_source]`), when it has one.
    pub cubin: Option<&'a Path>,
}

/// Every baseline kind, by name; the first is the default `kind`.
pub const KINDS: &[BaselineKind] = &[kernel::INFO, memcpy::INFO, cublas_sgemm::INFO];

/// The names of [`KINDS`], in its order (what an unknown `kind` is told).
pub const NAMES: &[&str] = &kind_names();

const fn kind_names() -> [&'static str; KINDS.len()] {
    let mut names = [""; KINDS.len()];
    let mut i = 0;
    while i < KINDS.len() {
        names[i] = KINDS[i].name;
        i += 1;
    }
    names
}

/// The registered kind `name`.
pub fn lookup(name: &str) -> Option<&'static BaselineKind> {
    KINDS.iter().find(|k| k.name == name)
}

/// Checks a baseline's kind-specific fields (when the spec is read).
pub fn check(b: &Baseline, spec: &SpecView) -> std::result::Result<(), String> {
    match lookup(&b.kind) {
        Some(kind) => (kind.check)(b, spec),
        None => Err(unknown(b)),
    }
}

/// The work baseline `b` times in a run (its spec was checked when read).
pub fn work(b: &Baseline, at: &RunContext) -> Result<std::result::Result<Work, String>> {
    match lookup(&b.kind) {
        Some(kind) => (kind.work)(b, at),
        None => Err(spec_error(at, unknown(b))),
    }
}

fn unknown(b: &Baseline) -> String {
    format!(
        "{}.kind: '{}' is not a baseline kind ({})",
        field(b),
        b.kind,
        NAMES.join(", ")
    )
}

fn spec_error(at: &RunContext, why: String) -> crate::error::Error {
    crate::error::Error::Spec {
        file: at.origin.to_string(),
        why,
    }
}

/// `baselines.NAME`, how messages name an entry.
pub fn field(b: &Baseline) -> String {
    format!("baselines.{}", b.name)
}

/// The entry's kind-specific fields as the kind's own type `T` (which rejects fields it does
/// not know).
pub fn fields<T: serde::de::DeserializeOwned>(b: &Baseline) -> std::result::Result<T, String> {
    toml::Value::Table(b.fields.clone())
        .try_into()
        .map_err(|e: toml::de::Error| format!("{}: {}", field(b), e.message()))
}

/// [`fields`] in a run, where the spec was checked when read: a failure is the spec's.
pub fn run_fields<T: serde::de::DeserializeOwned>(b: &Baseline, at: &RunContext) -> Result<T> {
    fields(b).map_err(|why| spec_error(at, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::limits::DeviceLimits;
    use crate::model::shape::Shape;
    use crate::spec::ops::{parse_spec, Op};
    use crate::spec::space::{base_vars, eval_launch};

    #[test]
    fn kinds_are_unique_and_described() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(!k.about.is_empty(), "{}", k.name);
            assert!(KINDS[..i].iter().all(|o| o.name != k.name), "{}", k.name);
        }
        assert_eq!(NAMES, ["kernel", "memcpy", "cublas_sgemm"]);
    }

    /// Each kind checks its own fields when the spec is read, and refuses others.
    #[test]
    fn kinds_check_their_fields() {
        let transpose = include_str!("../../../templates/transpose.toml");
        let err = |text: &str| parse_spec(text, "t.toml").unwrap_err().to_string();
        let e = err(&transpose.replace("from = \"in\"", "from = \"nowhere\""));
        assert!(e.contains("baselines.memcpy.from: names no buffer"), "{e}");
        let e = err(&transpose.replace("from = \"in\"", "from = \"in\"\nkernel = \"copy\""));
        assert!(
            e.contains("baselines.memcpy:") && e.contains("unknown field `kernel`"),
            "{e}"
        );
        let e = err(&transpose.replace("kind = \"memcpy\"", "kind = \"memmove\""));
        assert!(
            e.contains(
                "unknown variant `memmove`, expected one of `kernel`, `memcpy`, `cublas_sgemm`"
            ),
            "{e}"
        );
        let e = err(&transpose.replace("kernel = \"copy_vec4\"\n", ""));
        assert!(
            e.contains("baselines.copy_vec4: a kernel baseline needs kernel, block and grid"),
            "{e}"
        );
        let sgemm = include_str!("../../../templates/sgemm.toml");
        let e = parse_spec(
            &sgemm.replace(
                "operands = [\"A\", \"B\", \"C\"]",
                "operands = [\"A\", \"B\", \"D\"]",
            ),
            "s.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("baselines.cublas_sgemm: cublas_sgemm needs operands"),
            "{e}"
        );
    }

    /// The work of each built-in kind at a shape.
    #[test]
    fn kinds_build_their_work() {
        let limits = DeviceLimits::SM90_DEFAULT;
        let works = |op: &str, dims: Vec<u64>| -> Vec<Work> {
            let op = Op::load(op, None).unwrap();
            let shape = Shape { dims };
            let vars = base_vars(&op, &shape, &limits);
            let launch = |block: &[String; 3], grid: &[String; 3], site: &str| {
                eval_launch(&vars, block, grid, None, &limits, site)
            };
            let at = RunContext {
                origin: &op.origin,
                dims: &shape.dims,
                eval_launch: &launch,
                cubin: Some(Path::new("b.cubin")),
            };
            op.spec
                .baselines
                .iter()
                .map(|b| work(b, &at).unwrap().unwrap())
                .collect()
        };
        let transpose = works("transpose", vec![1000, 3000]);
        assert!(matches!(&transpose[0], Work::Memcpy { from, to } if from == "in" && to == "out"));
        match &transpose[2] {
            Work::Kernel {
                cubin,
                kernel,
                launch,
                before,
            } => {
                assert_eq!((cubin.to_str(), kernel.as_str()), (Some("b.cubin"), "copy"));
                assert_eq!((launch.block, launch.grid), ((32, 8, 1), (94, 32, 1)));
                assert!(before.is_empty());
            }
            other => panic!("{other:?}"),
        }
        let sgemm = works("sgemm", vec![100, 68, 52]);
        assert!(
            matches!(&sgemm[0], Work::Sgemm { a, b, c, m: 100, n: 68, k: 52 }
                if [a, b, c] == ["A", "B", "C"]),
            "{sgemm:?}"
        );
    }
}
