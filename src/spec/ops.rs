//! Ops as data: a TOML spec (parameters, constraints, launch geometry, buffers, metric,
//! baselines) beside a Tera template. Built-in ops are the files under `templates/`, embedded
//! at build time (build.rs) so the binary works from any directory; `--templates DIR` reads
//! them from disk instead. Adding an op means adding files plus its name in [`BUILTIN_OPS`],
//! and a CPU reference when no registered one fits (docs/extending.md).

use crate::error::{Error, Result};
use crate::model::dtype::Dtype;
use crate::spec::baseline::{self, Baseline};
use crate::spec::expr::Value;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Files of the built-in ops: every file of `templates/`, embedded at build time (build.rs).
const BUILTIN_FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/builtin_files.rs"));

/// Names of the built-in ops, in the order `--help` lists them: each is `templates/<name>.toml`
/// and the templates it names (a test checks that every spec there is listed here).
pub const BUILTIN_OPS: &[&str] = &["transpose", "matmul", "sgemm"];

/// How a variant's output is compared with the expected output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compare {
    /// Bit-for-bit equality (data movement ops).
    Exact,
    /// ||out - ref|| / ||ref|| <= rtol, and no NaN (arithmetic ops).
    Tolerance,
}

/// What the throughput of a variant is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricKind {
    /// Bytes read plus bytes written per second (GB/s).
    Bandwidth,
    /// Floating-point operations per second (GFLOP/s).
    Flops,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    pub kind: MetricKind,
    /// Expression for the bytes moved (bandwidth ops).
    pub bytes: Option<String>,
    /// Expression for the floating-point operations (flops ops).
    pub flops: Option<String>,
}

impl Metric {
    /// The expression that counts the work, and the unit of work per second it yields.
    pub fn amount(&self) -> (&str, &'static str) {
        match self.kind {
            MetricKind::Bandwidth => (self.bytes.as_deref().unwrap_or("0"), "GB/s"),
            MetricKind::Flops => (self.flops.as_deref().unwrap_or("0"), "GFLOP/s"),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    pub name: String,
    pub values: Vec<toml::Value>,
    /// Every value the template accepts, when `values` (the default sweep) is a subset: a
    /// word outside the defaults is still reachable with `--param`.
    #[serde(default)]
    pub choices: Vec<toml::Value>,
    /// Values the default sweep holds but a search tries only on its leaders: each leader
    /// also runs with these in place of its own value. For a choice that costs more to compile
    /// than it gains on most configurations (a two-kernel source), but that can lift the best
    /// few: swept with the rest it would slow every run. `--param` on the parameter sweeps the
    /// values it names like any others.
    #[serde(default)]
    pub finish: Vec<toml::Value>,
    /// The value that configurations recorded before this parameter existed had (a best.csv
    /// row without it still names exactly one configuration); `None` for the op's original
    /// parameters, which every row names.
    #[serde(default)]
    pub missing: Option<toml::Value>,
    /// The value a safe default fixes (the kernel an export falls back to where no tuned one
    /// serves a shape, valid at every shape): e.g. bounds checks in every block. `None`: the
    /// safe default searches the parameter's values.
    #[serde(default)]
    pub safe: Option<toml::Value>,
    #[serde(default)]
    pub help: String,
}

impl ParamSpec {
    /// The default values, typed.
    pub fn default_values(&self) -> Vec<Value> {
        self.values.iter().map(toml_to_value).collect()
    }

    /// The values tried on a search's leaders only ([`ParamSpec::finish`]), typed.
    pub fn finish_values(&self) -> Vec<Value> {
        self.finish.iter().map(toml_to_value).collect()
    }

    /// What a run enumerates without `--param` on it: the default values, then the finishing
    /// ones.
    pub fn sweep_values(&self) -> Vec<Value> {
        self.values
            .iter()
            .chain(&self.finish)
            .map(toml_to_value)
            .collect()
    }

    /// Every accepted value: `choices` when given, else the default sweep.
    pub fn accepted_values(&self) -> Vec<Value> {
        if self.choices.is_empty() {
            self.sweep_values()
        } else {
            self.choices.iter().map(toml_to_value).collect()
        }
    }

    /// True for parameters whose values are words (a closed set), false for numbers.
    pub fn is_text(&self) -> bool {
        self.values.iter().any(|v| v.is_str())
    }

    /// Whether the parameter takes `value` (from `--param`, a stored row or the spec's own
    /// fields). Integer parameters accept any integer (users extend them) and boolean ones
    /// either boolean; word parameters accept only the words the template knows, since an
    /// unknown word would silently render as a default.
    pub fn check(&self, value: &Value) -> std::result::Result<(), String> {
        let accepted = self.accepted_values();
        if self.is_text() {
            if !accepted.contains(value) {
                let known: Vec<String> = accepted.iter().map(Value::to_string).collect();
                return Err(format!(
                    "{}={value} is not one of {}",
                    self.name,
                    known.join(", ")
                ));
            }
        } else if self.values.iter().all(toml::Value::is_bool) {
            if !matches!(value, Value::Bool(_)) {
                return Err(format!("{} takes true or false, got '{value}'", self.name));
            }
        } else if !matches!(value, Value::Int(_)) {
            return Err(format!("{} takes integers, got '{value}'", self.name));
        }
        Ok(())
    }
}

/// Names the templates and expressions see besides an op's own (the element type and the
/// device's limits, set by [`crate::spec::codegen`] and [`crate::spec::space::base_vars`]):
/// a dimension, parameter or define of one of these names would shadow it.
pub const RESERVED_NAMES: [&str; 9] = [
    "T",
    "T_DECL",
    "dtype",
    "ELEM_BYTES",
    "MAX_THREADS_PER_BLOCK",
    "MAX_SHARED_PER_BLOCK",
    "MAX_SHARED_OPTIN",
    "NUM_SMS",
    "COMPUTE_CAPABILITY",
];

/// The names an expression sees, and how an error names them.
type Seen<'a> = (&'a [&'a str], &'static str);

/// Checks that every expression of `spec` parses and names only what it is evaluated with, so
/// that a misspelt name fails when the spec is read (`tune params --spec`), not at the first
/// configuration of a run. Buffer sizes and the metric see the shape and [`RESERVED_NAMES`];
/// the rest also see the parameters and the defines. An error is the expression and why.
fn check_expressions(spec: &OpSpec) -> std::result::Result<(), (String, String)> {
    let shape: Vec<&str> = spec
        .dims
        .iter()
        .map(String::as_str)
        .chain(RESERVED_NAMES)
        .collect();
    let all: Vec<&str> = shape
        .iter()
        .copied()
        .chain(spec.params.iter().map(|p| p.name.as_str()))
        .chain(spec.defines.keys().map(String::as_str))
        .collect();
    // What an expression sees, and how an error names it.
    let (full, dims) = (
        (&all[..], "dimension, parameter or define"),
        (&shape[..], "dimension"),
    );
    let mut exprs: Vec<(String, &str, Seen)> = Vec::new();
    for (name, v) in &spec.defines {
        if let Some(e) = v.as_str() {
            exprs.push((format!("defines.{name}"), e, full));
        }
    }
    for (i, c) in spec.constraints.iter().enumerate() {
        exprs.push((format!("constraints[{i}].expr"), &c.expr, full));
    }
    let launches = std::iter::once(("launch".to_string(), &spec.launch)).chain(
        spec.reference_launch
            .iter()
            .map(|l| ("reference_launch".into(), l)),
    );
    for (field, l) in launches {
        for (axis, e) in ["block", "block", "block", "grid", "grid", "grid"]
            .iter()
            .zip(l.block.iter().chain(&l.grid))
        {
            exprs.push((format!("{field}.{axis}"), e, full));
        }
        if let Some(e) = &l.shared {
            exprs.push((format!("{field}.shared"), e, full));
        }
    }
    if let Some(e) = &spec.compile_cost {
        exprs.push(("compile_cost".into(), e, full));
    }
    for b in &spec.buffers {
        exprs.push((format!("buffers.{}.elements", b.name), &b.elements, dims));
    }
    let (amount, _) = spec.metric.amount();
    exprs.push(("metric".into(), amount, dims));
    for (field, expr, (known, what)) in exprs {
        let names = crate::spec::expr::parse_variables(expr).map_err(|why| {
            (
                expr.to_string(),
                format!("{field}: '{expr}' does not parse: {why}"),
            )
        })?;
        if let Some(name) = names.iter().find(|n| !known.contains(&n.as_str())) {
            return Err((
                expr.to_string(),
                format!(
                    "{field}: '{expr}' names '{name}', which is not a {what} of the op nor a \
                     name every expression has"
                ),
            ));
        }
    }
    Ok(())
}

/// Characters a word value may not hold: a stored configuration is `NAME=value;NAME=value`
/// and `--param` lists values as `NAME=a,b`.
const VALUE_SEPARATORS: [char; 3] = [';', '=', ','];

/// Checks one parameter's lists and single values: typed values only (integers, booleans or
/// words), words that a stored configuration and `--param` can carry, no value listed twice,
/// `choices` holding every value swept, and `missing`, `safe` and `finish` values the
/// parameter takes.
fn check_param(p: &ParamSpec) -> std::result::Result<(), String> {
    let field = |f: &str| format!("params.{}.{f}", p.name);
    if p.values.is_empty() {
        return Err(format!("{}: values is empty", field("values")));
    }
    let lists = [
        ("values", &p.values),
        ("choices", &p.choices),
        ("finish", &p.finish),
    ];
    let singles = [("missing", &p.missing), ("safe", &p.safe)];
    let all = lists
        .iter()
        .flat_map(|(f, l)| l.iter().map(move |v| (*f, v)))
        .chain(
            singles
                .iter()
                .filter_map(|(f, v)| v.as_ref().map(|v| (*f, v))),
        );
    for (f, v) in all {
        match v {
            toml::Value::Integer(_) | toml::Value::Boolean(_) => {}
            toml::Value::String(w) => {
                if w.is_empty()
                    || w.trim() != w
                    || w.chars()
                        .any(|c| c.is_control() || VALUE_SEPARATORS.contains(&c))
                {
                    return Err(format!(
                        "{}: {:?} cannot be a value (not empty, no space at either end, none \
                         of ; = , which separate stored and --param values)",
                        field(f),
                        w
                    ));
                }
            }
            other => {
                return Err(format!(
                    "{}: {other} is not an integer, true, false or a word",
                    field(f)
                ))
            }
        }
    }
    for (f, list) in lists {
        let typed: Vec<Value> = list.iter().map(toml_to_value).collect();
        if let Some(i) = (1..typed.len()).find(|&i| typed[..i].contains(&typed[i])) {
            return Err(format!("{}: {} is listed twice", field(f), typed[i]));
        }
    }
    let values = p.default_values();
    let choices: Vec<Value> = p.choices.iter().map(toml_to_value).collect();
    for f in p.finish_values() {
        let why = if values.contains(&f) {
            "in values already (finish lists the values tried on the leaders only)"
        } else if !choices.is_empty() && !choices.contains(&f) {
            "not a value the parameter accepts (not in choices)"
        } else {
            continue;
        };
        return Err(format!("{}: {f} is {why}", field("finish")));
    }
    if let Some(v) = values
        .iter()
        .find(|v| !choices.is_empty() && !choices.contains(v))
    {
        return Err(format!(
            "{}: lacks {v}, which values sweeps (choices lists every value the parameter \
             takes)",
            field("choices")
        ));
    }
    for (f, v) in singles {
        if let Some(v) = v.as_ref().map(toml_to_value) {
            p.check(&v).map_err(|why| format!("{}: {why}", field(f)))?;
        }
    }
    Ok(())
}

pub(crate) fn toml_to_value(v: &toml::Value) -> Value {
    match v {
        toml::Value::Integer(i) => Value::Int(*i),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::String(s) => Value::Str(s.clone()),
        other => Value::Str(other.to_string()),
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraint {
    pub expr: String,
    /// Shown for configurations the constraint removes; defaults to the expression.
    pub reason: Option<String>,
    /// Parameters whose `--param` lifts the constraint. Set on a prune kept for speed, not
    /// validity: it keeps the default sweep small, and a user who sweeps one of these
    /// parameters by hand gets every value of it.
    #[serde(default)]
    pub lifted_by: Vec<String>,
}

impl Constraint {
    pub fn reason(&self) -> String {
        self.reason
            .clone()
            .unwrap_or_else(|| format!("violates {}", self.expr))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    pub block: [String; 3],
    pub grid: [String; 3],
    /// Bytes of dynamic shared memory per block (an expression); absent: none. Lets a template
    /// use more than the 48 KB of static shared memory, up to the device's opt-in limit
    /// (`MAX_SHARED_OPTIN`); a larger value prunes the configuration.
    #[serde(default)]
    pub shared: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Input,
    Output,
    /// Device memory a variant's kernels may use for themselves (e.g. a repacked copy of an
    /// input): allocated once per run, neither filled nor compared.
    Scratch,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    pub name: String,
    /// Expression for the number of elements (of the run's element type).
    pub elements: String,
    pub role: Role,
    /// Buffers hold the op's element type (the run's `--dtype`). Older specs name it here;
    /// that is accepted when it is the op's only element type (checked when the spec is read).
    #[serde(default)]
    pub dtype: Option<String>,
    /// How an input is filled before the run.
    #[serde(default)]
    pub fill: Fill,
}

/// How an input buffer is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fill {
    /// Uniform in [-1, 1], never exactly zero (the default: hides nothing).
    #[default]
    Uniform,
    /// All ones (e.g. to count with a reduction).
    Ones,
    /// 0, 1, 2, ... modulo 1024 (exactly representable, easy to eyeball).
    Iota,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineSource {
    pub template: String,
    #[serde(default)]
    pub values: toml::Table,
}

/// A kernel of the variant's own source launched before the op's kernel, in the same timed
/// region and with the same arguments, for the configurations where `when` holds: work a
/// variant needs done first (repacking an input into an aligned layout, say) is paid for in
/// its time instead of being left out of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prologue {
    pub kernel: String,
    /// A boolean expression over the parameters, defines and shape; absent: always.
    #[serde(default)]
    pub when: Option<String>,
    pub block: [String; 3],
    pub grid: [String; 3],
}

/// The spec file of one op.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpSpec {
    pub name: String,
    #[serde(default)]
    pub summary: String,
    pub dims: Vec<String>,
    /// The element type a run uses when `--dtype` is not given.
    #[serde(default = "default_dtype")]
    pub dtype: String,
    /// Every element type the templates support (`--dtype` picks one); default `[dtype]`.
    #[serde(default)]
    pub dtypes: Vec<String>,
    pub template: String,
    pub kernel: String,
    pub reference: String,
    /// With `reference = "config"`: the parameter values of the configuration that runs
    /// first and whose output is taken as the answer for every other variant.
    #[serde(default)]
    pub reference_config: Option<toml::Table>,
    /// A kernel of the baseline template that computes the expected output on the GPU (for
    /// shapes too large for a CPU reference); `reference` then names the CPU spot check.
    #[serde(default)]
    pub reference_kernel: Option<String>,
    #[serde(default)]
    pub reference_launch: Option<Launch>,
    pub compare: Compare,
    #[serde(default)]
    pub rtol: Option<f64>,
    pub args: Vec<String>,
    pub metric: Metric,
    pub params: Vec<ParamSpec>,
    #[serde(default)]
    pub defines: toml::Table,
    #[serde(default)]
    pub constraints: Vec<Constraint>,
    pub launch: Launch,
    /// An integer expression, at each configuration, that grows with how long NVRTC takes to
    /// compile it (any unit: only the order matters). A search hears each round's costliest
    /// compiles last, so that the next round, asked for while a round's last few sources
    /// still compile, does not wait for the few that take ten times the rest.
    #[serde(default)]
    pub compile_cost: Option<String>,
    #[serde(default)]
    pub prologue: Vec<Prologue>,
    pub buffers: Vec<BufferSpec>,
    #[serde(default)]
    pub baseline_source: Option<BaselineSource>,
    #[serde(default)]
    pub baselines: Vec<Baseline>,
}

fn default_dtype() -> String {
    "f32".into()
}

impl OpSpec {
    /// The element type used without `--dtype` (checked by [`parse_spec`]).
    pub fn default_dtype(&self) -> Dtype {
        Dtype::parse(&self.dtype).unwrap_or_default()
    }

    /// The element types the op's templates support: `dtypes`, or the default alone.
    pub fn supported_dtypes(&self) -> Vec<Dtype> {
        if self.dtypes.is_empty() {
            vec![self.default_dtype()]
        } else {
            self.dtypes.iter().filter_map(|d| Dtype::parse(d)).collect()
        }
    }
}

/// A loaded op: its spec plus the template texts it names.
#[derive(Debug, Clone)]
pub struct Op {
    pub spec: OpSpec,
    pub template: String,
    /// The template file the variants render from, as errors name it: the spec's
    /// `template`, or the `--template` file that replaces it.
    pub template_name: String,
    pub baseline_template: Option<String>,
    /// Where the spec came from, for error messages.
    pub origin: String,
    /// The spec's text, to point errors at a line.
    pub spec_text: String,
    /// The element type of this run: the spec's default until [`Op::with_dtype`] picks
    /// another. Buffers, templates (`T`, `ELEM_BYTES`) and expressions follow it.
    pub dtype: Dtype,
}

impl Op {
    /// An op of its parts, in the spec's default element type.
    fn assemble(
        spec: OpSpec,
        template: String,
        baseline_template: Option<String>,
        origin: String,
        spec_text: String,
    ) -> Op {
        Op {
            dtype: spec.default_dtype(),
            template_name: spec.template.clone(),
            spec,
            template,
            baseline_template,
            origin,
            spec_text,
        }
    }

    /// Loads a user-written op from its spec file (or a folder holding one `.toml`). The
    /// template is the spec's `template`, relative to the spec's folder, unless `template`
    /// names another file.
    pub fn load_spec(path: &Path, template: Option<&Path>) -> Result<Op> {
        let spec_path = if path.is_dir() {
            let specs: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| Error::io("cannot read", path, e))?
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            match specs.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(Error::Usage(format!(
                        "{} holds no .toml spec",
                        path.display()
                    )))
                }
                _ => {
                    return Err(Error::Usage(format!(
                        "{} holds several .toml specs; name one with --spec FILE",
                        path.display()
                    )))
                }
            }
        } else {
            path.to_path_buf()
        };
        let origin = spec_path.display().to_string();
        let spec_text = crate::error::read_user_text("op spec", &spec_path)?;
        let spec = parse_spec(&spec_text, &origin)?;
        // Rows of best.csv are keyed by op name: this op's winners would replace the built-in
        // op's. An edited copy of a built-in op is tuned with `--templates DIR` instead.
        if BUILTIN_OPS.contains(&spec.name.as_str()) {
            return Err(Error::Spec {
                file: origin,
                why: format!(
                    "name: '{}' is a built-in op's name; rename the op (rows of best.csv are \
                     keyed by op name), or tune an edited copy with --templates DIR --op {}",
                    spec.name, spec.name
                ),
            });
        }
        let dir = spec_path.parent().unwrap_or(Path::new("."));
        let read = |file: &Path| {
            let text = crate::error::read_user_text("template", file)?;
            not_empty(text, &file.display().to_string())
        };
        let override_name = template.map(|f| f.display().to_string());
        let template = read(
            &template
                .map(Path::to_path_buf)
                .unwrap_or_else(|| dir.join(&spec.template)),
        )?;
        let baseline = match &spec.baseline_source {
            Some(src) => Some(read(&dir.join(&src.template))?),
            None => None,
        };
        let mut op = Op::assemble(spec, template, baseline, origin, spec_text);
        if let Some(name) = override_name {
            op.template_name = name;
        }
        Ok(op)
    }

    /// `file:line` of the first line of the spec that contains `needle` (an expression), or
    /// the file alone: where an error in that expression should send the user.
    pub fn at(&self, needle: &str) -> String {
        located(
            &self.origin,
            self.spec_text.lines().position(|l| l.contains(needle)),
        )
    }

    /// Loads an op by name: built-in, or from `dir` when given.
    pub fn load(name: &str, dir: Option<&Path>) -> Result<Op> {
        let read = |file: &str| -> Result<Option<String>> {
            match dir {
                Some(d) => {
                    let path = d.join(file);
                    match std::fs::read(&path) {
                        Ok(bytes) => crate::error::utf8_text("op file", &path, bytes).map(Some),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                        Err(e) => Err(Error::io("cannot read", path, e)),
                    }
                }
                None => Ok(BUILTIN_FILES
                    .iter()
                    .find(|(f, _)| *f == file)
                    .map(|(_, text)| text.to_string())),
            }
        };
        let spec_file = format!("{name}.toml");
        // A name that is not a plain word (`../x`, from --op or a row of best.csv) names no
        // op: it is never joined onto the templates folder.
        let found = if is_op_name(name) {
            read(&spec_file)?
        } else {
            None
        };
        let Some(spec_text) = found else {
            let known = match dir {
                Some(d) => list_ops_in(d).join(", "),
                None => BUILTIN_OPS.join(", "),
            };
            if let (Some(d), true) = (dir, known.is_empty()) {
                return Err(Error::Usage(format!(
                    "unknown op '{name}': --templates {} holds no op spec (an OP.toml beside \
                     its template); leave --templates out for the built-in ops ({})",
                    d.display(),
                    BUILTIN_OPS.join(", ")
                )));
            }
            return Err(Error::UnknownOp {
                name: name.into(),
                known,
            });
        };
        let origin = match dir {
            Some(d) => d.join(&spec_file).display().to_string(),
            None => format!("templates/{spec_file} (built in)"),
        };
        let missing = |file: &str| Error::Spec {
            file: origin.clone(),
            why: format!("template file {file} not found"),
        };
        let spec = parse_spec(&spec_text, &origin)?;
        let template = read(&spec.template)?.ok_or_else(|| missing(&spec.template))?;
        let template = not_empty(template, &spec.template)?;
        let baseline = match &spec.baseline_source {
            Some(src) => Some(read(&src.template)?.ok_or_else(|| missing(&src.template))?),
            None => None,
        };
        Ok(Op::assemble(spec, template, baseline, origin, spec_text))
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether this is a built-in op as shipped (its spec is the built-in one), so the
    /// shipped winners are configurations of its space.
    pub fn is_builtin(&self) -> bool {
        let file = format!("{}.toml", self.name());
        BUILTIN_FILES
            .iter()
            .any(|(f, text)| *f == file && *text == self.spec_text)
    }

    /// `NAME=value` for each parameter that `given` (parameter names) lacks and whose spec
    /// says what configurations recorded before it existed had (`missing`): what completes a
    /// stored configuration of an older version of the op.
    pub fn assumed_params(&self, given: &[&str]) -> Vec<String> {
        self.spec
            .params
            .iter()
            .filter(|p| !given.contains(&p.name.as_str()))
            .filter_map(|p| {
                let v = toml_to_value(p.missing.as_ref()?);
                Some(format!("{}={v}", p.name))
            })
            .collect()
    }

    /// The op for element type `name` (`None`: its default). An element type the spec does
    /// not list is bad input, with the supported ones named, before anything is compiled.
    pub fn with_dtype(mut self, name: Option<&str>) -> Result<Op> {
        let Some(name) = name else {
            return Ok(self);
        };
        let supported = self.spec.supported_dtypes();
        match Dtype::parse(name) {
            Some(d) if supported.contains(&d) => {
                self.dtype = d;
                Ok(self)
            }
            known => Err(Error::Usage(format!(
                "--dtype {name}: op {} supports {} only{}",
                self.name(),
                crate::model::dtype::names(&supported),
                if known.is_none() {
                    format!(
                        " ('{name}' is not an element type: {})",
                        crate::model::dtype::names(&crate::model::dtype::ALL)
                    )
                } else {
                    String::new()
                }
            ))),
        }
    }
}

/// A template's text, unless it holds nothing but white space (`--template /dev/null`):
/// rendered, that would be a source without the kernel.
fn not_empty(text: String, name: &str) -> Result<String> {
    if text.trim().is_empty() {
        return Err(Error::Usage(format!(
            "template {name}: is empty; a template holds the kernel's source"
        )));
    }
    Ok(text)
}

fn list_ops_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_suffix(".toml").map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// Whether `name` can name an op: it is part of the file names of a run (its CSV and journal)
/// and of a templates folder's spec (`NAME.toml`), so a plain word of ASCII letters, digits,
/// `_` and `-`, never a path.
pub fn is_op_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The buffers and the kernel arguments, checked as a launch will use them: buffer names are
/// unique (an argument names one buffer), every argument is a buffer or an integer expression
/// over the dimensions and the names every expression has (arguments are evaluated once per
/// shape, before any configuration), and the output buffer is an argument (a kernel that is not
/// given its output writes nothing the run could verify). An error is the start of the line to
/// point at (`args=`, or `name="X"` of a buffer named twice: its last line) and the message.
fn check_buffers_and_args(spec: &OpSpec) -> std::result::Result<(), (String, String)> {
    let mut names = std::collections::BTreeSet::new();
    for b in &spec.buffers {
        if !names.insert(b.name.as_str()) {
            return Err((
                format!("name=\"{}\"", b.name),
                format!("buffers: two buffers are named '{}'", b.name),
            ));
        }
    }
    let known: Vec<&str> = spec
        .dims
        .iter()
        .map(String::as_str)
        .chain(RESERVED_NAMES)
        .collect();
    for a in &spec.args {
        if a.is_empty() {
            return Err(("args=".to_string(), "args: an argument is empty".into()));
        }
        if names.contains(a.as_str()) {
            continue;
        }
        let not_known = |detail: String| {
            (
                "args=".to_string(),
                format!(
                    "args: '{a}' is neither a buffer ({}) nor an integer expression over the \
                     dimensions and the device limits{detail}",
                    names.iter().copied().collect::<Vec<_>>().join(", ")
                ),
            )
        };
        let vars = crate::spec::expr::parse_variables(a)
            .map_err(|why| not_known(format!(" (it does not parse: {why})")))?;
        if let Some(name) = vars.iter().find(|n| !known.contains(&n.as_str())) {
            return Err(not_known(if name == a {
                String::new()
            } else {
                format!(" ('{name}' is neither)")
            }));
        }
    }
    if let Some(out) = spec
        .buffers
        .iter()
        .find(|b| b.role == Role::Output && !spec.args.contains(&b.name))
    {
        return Err((
            "args=".to_string(),
            format!(
                "args: the output buffer '{}' is not an argument, so the kernel cannot write it",
                out.name
            ),
        ));
    }
    Ok(())
}

/// `origin:N` for the 0-based line `line` of the spec, or `origin` where no line is known.
fn located(origin: &str, line: Option<usize>) -> String {
    match line {
        Some(i) => format!("{origin}:{}", i + 1),
        None => origin.to_string(),
    }
}

/// Parses and checks a spec; every problem names the file and the field.
pub fn parse_spec(text: &str, origin: &str) -> Result<OpSpec> {
    let err = |why: String| Error::Spec {
        file: origin.to_string(),
        why,
    };
    let spec: OpSpec = toml::from_str(text).map_err(|e| err(one_line(&e.to_string())))?;
    if !is_op_name(&spec.name) {
        return Err(err(format!(
            "name: '{}' is not an op name (use ASCII letters, digits, '_' and '-', at least one)",
            spec.name.escape_debug()
        )));
    }
    if spec.dims.is_empty() {
        return Err(err("dims: at least one dimension is needed".into()));
    }
    let mut seen = std::collections::BTreeSet::new();
    let names = spec
        .dims
        .iter()
        .chain(spec.params.iter().map(|p| &p.name))
        .chain(spec.defines.keys());
    for name in names {
        if RESERVED_NAMES.contains(&name.as_str()) {
            return Err(err(format!(
                "'{name}' is a name the template and expressions already have (reserved: {})",
                RESERVED_NAMES.join(", ")
            )));
        }
        if !seen.insert(name.clone()) {
            return Err(err(format!(
                "'{name}' is declared twice (dims, params and defines share one namespace)"
            )));
        }
    }
    for p in &spec.params {
        check_param(p).map_err(err)?;
    }
    check_expressions(&spec).map_err(|(expr, why)| {
        // Pointed at the expression's line, as a run's evaluation errors are.
        let line = text.lines().position(|l| l.contains(expr.as_str()));
        Error::Spec {
            file: located(origin, line),
            why,
        }
    })?;
    for (i, c) in spec.constraints.iter().enumerate() {
        if let Some(name) = c
            .lifted_by
            .iter()
            .find(|n| !spec.params.iter().any(|p| &p.name == *n))
        {
            return Err(err(format!(
                "constraints[{i}].lifted_by: '{name}' is not a parameter of the op"
            )));
        }
    }
    let buffer = |name: &str| spec.buffers.iter().find(|b| b.name == name);
    if spec
        .buffers
        .iter()
        .filter(|b| b.role == Role::Output)
        .count()
        != 1
    {
        return Err(err(
            "buffers: exactly one buffer must have role = \"output\"".into(),
        ));
    }
    check_buffers_and_args(&spec).map_err(|(needle, why)| {
        // Pointed at the field's line (the last one, for a buffer named twice), as the
        // expression errors are; spaces do not count (`name="c"` is `name = "c"`).
        let at = |l: &str| l.replace([' ', '\t'], "").starts_with(&needle);
        let line = text
            .lines()
            .enumerate()
            .filter(|(_, l)| at(l))
            .map(|(i, _)| i)
            .last();
        Error::Spec {
            file: located(origin, line),
            why,
        }
    })?;
    for (i, p) in spec.prologue.iter().enumerate() {
        if p.kernel.trim().is_empty() || p.kernel == spec.kernel {
            return Err(err(format!(
                "prologue[{i}].kernel: must name a kernel of the template other than '{}'",
                spec.kernel
            )));
        }
    }
    let view = baseline::SpecView {
        buffers: spec.buffers.iter().map(|b| b.name.as_str()).collect(),
        dims: spec.dims.len(),
        baseline_source: spec.baseline_source.is_some(),
    };
    for b in &spec.baselines {
        let field = baseline::field(b);
        if b.expect != "reference" && buffer(&b.expect).map(|x| x.role) != Some(Role::Input) {
            return Err(err(format!(
                "{field}.expect: '{}' is neither \"reference\" nor an input buffer",
                b.expect
            )));
        }
        baseline::check(b, &view).map_err(err)?;
    }
    if spec.reference_kernel.is_some()
        && (spec.reference_launch.is_none() || spec.baseline_source.is_none())
    {
        return Err(err(
            "reference_kernel needs reference_launch and [baseline_source]".into(),
        ));
    }
    let known = crate::model::dtype::names(&crate::model::dtype::ALL);
    let Some(default) = Dtype::parse(&spec.dtype) else {
        return Err(err(format!(
            "dtype: '{}' is not an element type ({known})",
            spec.dtype
        )));
    };
    for d in &spec.dtypes {
        if Dtype::parse(d).is_none() {
            return Err(err(format!(
                "dtypes: '{d}' is not an element type ({known})"
            )));
        }
    }
    let supported = spec.supported_dtypes();
    if !supported.contains(&default) {
        return Err(err(format!(
            "dtypes: the default dtype '{default}' is not in the list"
        )));
    }
    if let Some(reference) = crate::spec::reference::lookup(&spec.reference) {
        if let Some(d) = supported.iter().find(|d| !reference.supports(**d)) {
            return Err(err(format!(
                "dtypes: the CPU reference '{}' computes {} only, not {d}",
                spec.reference,
                crate::model::dtype::names(reference.dtypes)
            )));
        }
    }
    // The GPU comparison decodes 16-bit elements as IEEE halves for the relative error, so a
    // bf16 output can only be compared bit for bit.
    if supported.contains(&Dtype::Bf16) && spec.compare != Compare::Exact {
        return Err(err(
            "dtypes: bf16 outputs are compared bit for bit only (compare = \"exact\")".into(),
        ));
    }
    for b in &spec.buffers {
        match &b.dtype {
            None => {}
            Some(d) if supported == [default] && *d == spec.dtype => {}
            Some(d) => {
                return Err(err(format!(
                    "buffers.{}.dtype: '{d}' (buffers hold the op's element type: drop this \
                     field and list the types in `dtypes`)",
                    b.name
                )))
            }
        }
    }
    if spec.reference != "config" && crate::spec::reference::lookup(&spec.reference).is_none() {
        let known: Vec<&str> = crate::spec::reference::REFERENCES
            .iter()
            .map(|r| r.name)
            .collect();
        return Err(err(format!(
            "reference: '{}' is not a reference (\"config\", or a CPU reference: {})",
            spec.reference,
            known.join(", ")
        )));
    }
    match (spec.reference.as_str(), &spec.reference_config) {
        ("config", None) => {
            return Err(err(
                "reference = \"config\" needs reference_config = { NAME = value, ... }".into(),
            ))
        }
        ("config", Some(cfg)) => {
            for key in cfg.keys() {
                if !spec.params.iter().any(|p| &p.name == key) {
                    return Err(err(format!(
                        "reference_config.{key}: not a parameter of this op"
                    )));
                }
            }
            for p in &spec.params {
                let Some(v) = cfg.get(&p.name) else {
                    return Err(err(format!(
                        "reference_config: no value for parameter {}",
                        p.name
                    )));
                };
                p.check(&toml_to_value(v))
                    .map_err(|why| err(format!("reference_config.{}: {why}", p.name)))?;
            }
        }
        (_, Some(_)) => {
            return Err(err(
                "reference_config is only used with reference = \"config\"".into(),
            ))
        }
        _ => {}
    }
    let (amount, _) = spec.metric.amount();
    if amount == "0" {
        return Err(err(
            "metric: bandwidth needs `bytes`, flops needs `flops`".into()
        ));
    }
    if spec.compare == Compare::Tolerance && spec.rtol.is_none() {
        return Err(err(
            "rtol: compare = \"tolerance\" needs a default rtol".into()
        ));
    }
    Ok(spec)
}

/// Collapses a multi-line library message into one line for the terminal and CSV.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_ops_load() {
        for name in BUILTIN_OPS {
            let op = Op::load(name, None).unwrap();
            assert_eq!(op.name(), *name);
            assert!(op.template.contains("__global__"));
            assert!(op.is_builtin(), "{name}");
        }
    }

    /// The embedded files are exactly `templates/`, and its specs are the built-in ops.
    #[test]
    fn builtin_files_are_the_templates_folder_and_its_specs_the_builtin_ops() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/templates");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = BUILTIN_FILES.iter().map(|(f, _)| *f).collect();
        assert_eq!(embedded, on_disk);
        for (file, text) in BUILTIN_FILES {
            let on_disk = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
            assert_eq!(*text, on_disk, "{file}");
        }
        let mut specs: Vec<&str> = embedded
            .iter()
            .filter_map(|f| f.strip_suffix(".toml"))
            .collect();
        specs.sort_unstable();
        let mut listed = BUILTIN_OPS.to_vec();
        listed.sort_unstable();
        assert_eq!(specs, listed, "templates/*.toml and BUILTIN_OPS differ");
    }

    /// Only the shipped spec is built in: the same op from a folder with an edited spec is
    /// not (the shipped winners need not be configurations of its space).
    #[test]
    fn an_edited_copy_of_a_builtin_op_is_not_builtin() {
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in BUILTIN_FILES {
            std::fs::write(dir.path().join(file), text).unwrap();
        }
        assert!(Op::load("transpose", Some(dir.path()))
            .unwrap()
            .is_builtin());
        let spec = dir.path().join("transpose.toml");
        let edited = std::fs::read_to_string(&spec).unwrap() + "\n# edited\n";
        std::fs::write(&spec, edited).unwrap();
        assert!(!Op::load("transpose", Some(dir.path()))
            .unwrap()
            .is_builtin());
    }

    #[test]
    fn unknown_op_lists_known_ones() {
        let e = Op::load("fft", None).unwrap_err().to_string();
        assert!(
            e.contains("unknown op 'fft'") && e.contains("transpose"),
            "{e}"
        );
    }

    /// An op name that is a path (from --op or a row of best.csv) is never joined onto the
    /// templates folder: a spec outside it is not read.
    #[test]
    fn an_op_name_never_reaches_outside_the_templates_folder() {
        let root = tempfile::tempdir().unwrap();
        let inside = root.path().join("templates");
        std::fs::create_dir(&inside).unwrap();
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/vector_add");
        for file in ["vector_add.toml", "vector_add.cu.tera"] {
            std::fs::copy(format!("{example}/{file}"), root.path().join(file)).unwrap();
        }
        let e = Op::load("../vector_add", Some(&inside)).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains("unknown op '../vector_add'"), "{e}");
        assert!(Op::load("vector_add", Some(root.path())).is_ok());
    }

    /// The name becomes part of file names: one that could leave the output folder, or make
    /// an empty or odd name, is refused with what is allowed.
    #[test]
    fn a_spec_name_is_a_plain_word() {
        // Read at run time: the image's build context holds src/ and templates/, not examples/.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/vector_add/vector_add.toml"
        );
        let text = &std::fs::read_to_string(path).unwrap();
        assert!(parse_spec(text, "v.toml").is_ok());
        let named =
            |name: &str| text.replacen("name = \"vector_add\"", &format!("name = {name:?}"), 1);
        for bad in ["../../evil", "", "a b", "a.b", "a/b", "caf\u{e9}", "a\nb"] {
            let e = parse_spec(&named(bad), "v.toml").unwrap_err();
            let msg = e.to_string();
            assert_eq!(e.exit_code(), 2, "{msg}");
            assert!(
                msg.starts_with("op spec v.toml: name: '")
                    && msg.contains("use ASCII letters, digits, '_' and '-'")
                    && !msg.contains('\n'),
                "{msg}"
            );
        }
        for good in ["my-op_2", "X"] {
            assert!(parse_spec(&named(good), "v.toml").is_ok(), "{good}");
        }
    }

    /// A `--spec` op named like a built-in one would store its winners under that op in
    /// best.csv; the same spec from a templates folder is an edited copy, which is allowed.
    #[test]
    fn a_spec_file_may_not_take_a_builtin_op_name() {
        let dir = tempfile::tempdir().unwrap();
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/vector_add");
        let text = std::fs::read_to_string(format!("{example}/vector_add.toml")).unwrap();
        std::fs::write(
            dir.path().join("transpose.toml"),
            text.replacen("name = \"vector_add\"", "name = \"transpose\"", 1),
        )
        .unwrap();
        std::fs::copy(
            format!("{example}/vector_add.cu.tera"),
            dir.path().join("vector_add.cu.tera"),
        )
        .unwrap();
        let e = Op::load_spec(dir.path(), None).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.exit_code(), 2, "{msg}");
        assert!(
            msg.contains("name: 'transpose' is a built-in op's name; rename the op"),
            "{msg}"
        );
        assert_eq!(
            Op::load("transpose", Some(dir.path())).unwrap().name(),
            "transpose"
        );
    }

    #[test]
    fn spec_errors_name_the_field() {
        let text = include_str!("../../templates/transpose.toml")
            .replace("role = \"output\"", "role = \"input\"");
        let e = parse_spec(&text, "x.toml").unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("output"), "{e}");
        let e = parse_spec("name = 3", "y.toml").unwrap_err().to_string();
        assert!(e.contains("y.toml"), "{e}");
        // A prologue must be another kernel of the template.
        let text = include_str!("../../templates/sgemm.toml")
            .replace("kernel = \"sgemm_repack\"", "kernel = \"sgemm\"");
        let e = parse_spec(&text, "z.toml").unwrap_err().to_string();
        assert!(e.contains("prologue[0].kernel"), "{e}");
        // The dtypes an op lists must be ones its registered reference computes.
        let text = include_str!("../../templates/matmul.toml").replace(
            "dtype = \"f32\"",
            "dtype = \"f32\"\ndtypes = [\"f32\", \"f64\"]",
        );
        let e = parse_spec(&text, "m.toml").unwrap_err().to_string();
        assert!(
            e.contains("dtypes: the CPU reference 'matmul' computes f32 only, not f64"),
            "{e}"
        );
        let text = text.replace("reference = \"matmul\"", "reference = \"copy\"");
        assert!(parse_spec(&text, "m.toml").is_ok());
        // An unknown reference is named as such, with or without a reference_config.
        for extra in ["", "\nreference_config = { BLOCK_SIZE = 16 }"] {
            let text = text.replace(
                "reference = \"copy\"",
                &format!("reference = \"nope\"{extra}"),
            );
            let e = parse_spec(&text, "m.toml").unwrap_err().to_string();
            assert!(
                e.contains("reference: 'nope' is not a reference (\"config\", or a CPU reference: transpose, matmul, copy)"),
                "{e}"
            );
        }
        // A safe value must be one the parameter accepts (sgemm's BOUNDS accepts `always`
        // beyond its default sweep).
        let text = include_str!("../../templates/sgemm.toml");
        let spec = parse_spec(text, "s.toml").unwrap();
        let bounds = spec.params.iter().find(|p| p.name == "BOUNDS").unwrap();
        assert_eq!(bounds.safe, Some(toml::Value::String("always".into())));
        assert!(!bounds
            .values
            .contains(&toml::Value::String("always".into())));
        let text = text.replace("safe = \"always\"", "safe = \"sometimes\"");
        let e = parse_spec(&text, "s.toml").unwrap_err().to_string();
        assert!(
            e.contains("params.BOUNDS.safe: BOUNDS=sometimes is not one of"),
            "{e}"
        );
        // A finishing value is one the parameter accepts and not one of its default values.
        let text = include_str!("../../templates/sgemm.toml");
        let e = parse_spec(&text.replace("finish = [1]", "finish = [0]"), "s.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("params.TAIL.finish: 0 is in values already"),
            "{e}"
        );
        let text = text.replace(
            "values = [\"scalar\"]",
            "values = [\"scalar\"]\nfinish = [\"wide\"]",
        );
        let e = parse_spec(&text, "s.toml").unwrap_err().to_string();
        assert!(
            e.contains("params.CSTORE.finish: wide is not a value the parameter accepts"),
            "{e}"
        );
        // Every value is typed, carried whole by a stored row and --param, and listed once;
        // single values are ones the parameter takes; no name shadows one every template and
        // expression has; every expression parses and names only what it will see.
        let text = include_str!("../../templates/transpose.toml");
        for (from, to, want) in [
            ("values = [16, 32, 64]", "values = [16, 32, 32]", "params.TILE_DIM.values: 32 is listed twice"),
            ("values = [16, 32, 64]", "values = [16, 32.5]", "params.TILE_DIM.values: 32.5 is not an integer, true, false or a word"),
            ("values = [\"tile\", \"slab\"]", "values = [\"tile\", \"sl;ab\"]", "params.LAYOUT.values: \"sl;ab\" cannot be a value"),
            ("values = [\"tile\", \"slab\"]", "values = [\"tile\", \"a,b\"]", "params.LAYOUT.values: \"a,b\" cannot be a value"),
            ("values = [\"tile\", \"slab\"]", "values = [\"tile\", \" slab\"]", "cannot be a value"),
            ("missing = \"tile\"", "missing = \"nope\"", "params.RUNS.missing: RUNS=nope is not one of tile, sector, chunk"),
            ("name = \"TILE_DIM\"", "name = \"T\"", "'T' is a name the template and expressions already have"),
            ("name = \"TILE_DIM\"", "name = \"dtype\"", "'dtype' is a name the template and expressions already have"),
            ("expr = \"VEC * ELEM_BYTES <= 16\"", "expr = \"VEC * ELEM_BYTE <= 16\"", "names 'ELEM_BYTE', which is not a dimension, parameter or define of the op nor a name every expression has"),
            ("expr = \"VEC * ELEM_BYTES <= 16\"", "expr = \"VEC * (ELEM_BYTES <= 16\"", "'VEC * (ELEM_BYTES <= 16' does not parse"),
        ] {
            assert!(text.contains(from), "{from}");
            let e = parse_spec(&text.replacen(from, to, 1), "t.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{to}: {e}\nlacks: {want}");
        }
        let text = include_str!("../../templates/matmul.toml");
        let cfg = text.replace(
            "reference = \"matmul\"",
            "reference = \"config\"\nreference_config = { BLOCK_SIZE = 16, UNROLL = \"nope\", PREFETCH = \"off\", BOUNDS = \"always\" }",
        );
        let e = parse_spec(&cfg, "m.toml").unwrap_err().to_string();
        assert!(
            e.contains("reference_config.UNROLL: UNROLL=nope is not one of"),
            "{e}"
        );
        // A constraint can be lifted only by a parameter of the op.
        let text = include_str!("../../templates/sgemm.toml")
            .replace("lifted_by = [\"ORDER\"]", "lifted_by = [\"ORDR\"]");
        let e = parse_spec(&text, "s.toml").unwrap_err().to_string();
        assert!(
            e.contains("lifted_by: 'ORDR' is not a parameter of the op"),
            "{e}"
        );
        let spec = parse_spec(include_str!("../../templates/sgemm.toml"), "sgemm.toml").unwrap();
        assert_eq!(spec.prologue[0].when.as_deref(), Some("REPACK == 1"));
        let scratch: Vec<&str> = spec
            .buffers
            .iter()
            .filter(|b| b.role == Role::Scratch)
            .map(|b| b.name.as_str())
            .collect();
        assert_eq!(scratch, ["AP", "BP"]);
    }
}
