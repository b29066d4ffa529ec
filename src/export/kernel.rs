//! Which shapes a tuned kernel may run on (its [`Applicability`]: the tuner's own rule, also
//! written into the CUDA header) and each op's safe default. A row is rendered back into its
//! kernel by [`crate::store::tuned`], re-exported here.

use crate::error::{Error, Result};
use crate::model::limits::DeviceLimits;
use crate::model::shape::{Shape, MAX_DIM};
use crate::spec::codegen::Renderer;
use crate::spec::expr::Value;
use crate::spec::ops::Op;
pub use crate::spec::rule::Rule;
use crate::spec::space::{enumerate, Candidate};
use crate::store::best::BestRow;
pub use crate::store::tuned::{
    candidate_for, renders_as_timed, row_limits, specialize, specialize_op, tuned_source,
    untimed_note, TunedKernel,
};
use std::path::Path;

/// Whether the kernel of `row` may run on shape `dims`, by the tuner's own rule: a kernel is
/// rendered from the parameters and the *defines* only (never the exact shape), so it serves
/// every shape at which the configuration is not pruned, every define has the value it had at
/// the tuned shape and the same first kernels (prologues) run. `false` for a different number
/// of dimensions.
pub fn valid_for(row: &BestRow, dims: &[u64], templates: Option<&Path>) -> Result<bool> {
    let tuned = specialize(row, templates)?;
    Ok(valid_at(&tuned, dims))
}

fn valid_at(tuned: &TunedKernel, dims: &[u64]) -> bool {
    if dims.len() != tuned.shape.dims.len() || dims.iter().any(|&d| d == 0 || d > MAX_DIM) {
        return false;
    }
    let shape = Shape {
        dims: dims.to_vec(),
    };
    let Ok(mut space) = enumerate(
        &tuned.op,
        &shape,
        &tuned.limits,
        &overrides_of(&tuned.candidate),
    ) else {
        return false;
    };
    let at = space.swap_remove(0);
    at.pruned.is_none()
        && tuned
            .candidate
            .define_names
            .iter()
            .all(|d| at.var(d) == tuned.candidate.var(d))
        && first_kernels(tuned, &at, &shape) == first_kernels(tuned, &tuned.candidate, &tuned.shape)
}

/// Which of the op's prologues (by index: two may name one kernel) run first at `shape` for
/// the valid configuration `c` of `tuned`'s op: those whose `when` holds.
fn first_kernels(tuned: &TunedKernel, c: &Candidate, shape: &Shape) -> Vec<usize> {
    let vars = c.vars(&crate::spec::space::base_vars(
        &tuned.op,
        shape,
        &tuned.limits,
    ));
    crate::spec::space::prologues_applying(&tuned.op, &vars)
}

fn overrides_of(c: &Candidate) -> Vec<crate::spec::space::ParamOverride> {
    c.config
        .values()
        .map(|(name, value)| crate::spec::space::ParamOverride {
            name: name.to_string(),
            values: vec![value.clone()],
        })
        .collect()
}

/// Which shapes a tuned kernel may serve: its tuned shape, and every shape at which the tuner
/// would have kept its configuration and rendered the same kernel ([`valid_for`]), as a
/// [`Rule`] over the shape that the header of `tune export --format cuda` carries as one C
/// function per entry, so that a few lines of C check a shape exactly as the tuner would
/// (grid and shared memory limits included). Every dimension is 1 to [`MAX_DIM`]: the
/// kernels take dimensions as int.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applicability {
    pub dims: Vec<u64>,
    /// The rule; `None` where an expression of the spec that depends on the shape is one the
    /// rule cannot follow ([`Rule::of`] says which): the kernel serves its tuned shape only.
    pub rule: Option<Rule>,
}

impl Applicability {
    /// Only the tuned shape itself (no rule).
    pub fn exact_only(&self) -> bool {
        self.rule.is_none()
    }

    /// True when the kernel may serve `dims` by this rule.
    pub fn admits(&self, dims: &[u64]) -> bool {
        if dims == self.dims.as_slice() {
            return true;
        }
        dims.len() == self.dims.len()
            && dims.iter().all(|q| (1..=MAX_DIM).contains(q))
            && self.rule.as_ref().is_some_and(|r| r.admits(dims))
    }
}

/// The [`Applicability`] of a row's kernel.
pub fn applicability(row: &BestRow, templates: Option<&Path>) -> Result<Applicability> {
    Ok(applicability_of(&specialize(row, templates)?))
}

/// The [`Applicability`] of a kernel already specialized: every define must keep its value.
pub fn applicability_of(tuned: &TunedKernel) -> Applicability {
    applicability_comparing(tuned, &|_| true)
}

/// The [`Applicability`] of a [`safe_default`]: only the defines its kernel reads must keep
/// their values ([`reads_define`]); a bounds-checked kernel computes the rest but never looks
/// at them.
pub fn default_applicability(tuned: &TunedKernel) -> Result<Applicability> {
    let renderer = Renderer::new(&tuned.op)?;
    let mut unread: Vec<String> = Vec::new();
    for d in tuned.candidate.define_names.iter() {
        if !reads_define(tuned, &renderer, d) {
            unread.push(d.clone());
        }
    }
    Ok(applicability_comparing(tuned, &|d| {
        !unread.iter().any(|u| u == d)
    }))
}

/// Whether `tuned`'s kernel depends on define `name`: it names it other than in the define's
/// own `#define` line, or, rendered with the other value of a boolean define, the source
/// differs elsewhere. An integer or text define counts as read: a template may branch on any
/// of its values.
fn reads_define(tuned: &TunedKernel, renderer: &Renderer, name: &str) -> bool {
    let Some(k) = tuned.candidate.define_names.iter().position(|d| d == name) else {
        return false;
    };
    let without = |source: &str| -> String {
        source
            .lines()
            .filter(|l| {
                l.trim_start()
                    .strip_prefix("#define")
                    .and_then(|rest| rest.split_whitespace().next())
                    != Some(name)
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let own = without(&tuned.source);
    if rename_identifier(&own, name, "") != own {
        return true;
    }
    let Value::Bool(b) = tuned.candidate.defines[k] else {
        return true;
    };
    let mut c = tuned.candidate.clone();
    let mut defines = c.defines.to_vec();
    defines[k] = Value::Bool(!b);
    c.defines = defines.into_boxed_slice();
    // A template that cannot render the other value reads it (it fails on it).
    !matches!(renderer.render(&c), Ok(source) if without(&source) == own)
}

fn applicability_comparing(tuned: &TunedKernel, compare: &dyn Fn(&str) -> bool) -> Applicability {
    let dims = tuned.shape.dims.clone();
    let rule = Rule::of(
        &tuned.op,
        &tuned.candidate,
        &tuned.shape,
        &tuned.limits,
        compare,
    )
    .ok();
    Applicability { dims, rule }
}

fn cartesian(per_dim: &[Vec<u64>]) -> Vec<Vec<u64>> {
    per_dim.iter().fold(vec![Vec::new()], |acc, values| {
        acc.iter()
            .flat_map(|prefix| {
                values.iter().map(move |&v| {
                    let mut p = prefix.clone();
                    p.push(v);
                    p
                })
            })
            .collect()
    })
}

/// Renames the identifier `from` to `to` in C/C++/CUDA `source`: only whole identifier tokens
/// of the code are renamed (not part of a longer identifier such as `tile_transpose` or
/// `transpose2`, nor a number's suffix), never text inside comments or string and character
/// literals, where the word is prose ("a transpose does no arithmetic") or data.
pub fn rename_identifier(source: &str, from: &str, to: &str) -> String {
    if from.is_empty() {
        return source.to_string();
    }
    let b = source.as_bytes();
    let ident_start = |c: u8| c.is_ascii_alphabetic() || c == b'_';
    let ident_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // Copied byte ranges always start and end at ASCII bytes (or the ends), so `out` stays
    // valid UTF-8: multi-byte characters are copied whole.
    let mut out: Vec<u8> = Vec::with_capacity(source.len() + 64);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        let start = i;
        if c == b'/' && next == Some(b'/') {
            // Line comment, up to the line break (a trailing backslash continues it).
            while i < b.len() && !(b[i] == b'\n' && b[i - 1] != b'\\') {
                i += 1;
            }
        } else if c == b'/' && next == Some(b'*') {
            i += 2;
            while i < b.len() && !(b[i - 1] == b'*' && b[i] == b'/' && i >= start + 3) {
                i += 1;
            }
            i = (i + 1).min(b.len());
        } else if c == b'"' || c == b'\'' {
            // String or character literal, up to its unescaped closing quote or the line's end.
            i += 1;
            while i < b.len() && b[i] != c && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else if c.is_ascii_digit() || (c == b'.' && next.is_some_and(|d| d.is_ascii_digit())) {
            // A number with its suffixes and exponents (1.5e-3f, 0x1Fu): no identifier in it.
            i += 1;
            while i < b.len() {
                let d = b[i];
                let sign =
                    (d == b'+' || d == b'-') && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P');
                if ident_char(d) || d == b'.' || sign {
                    i += 1;
                } else {
                    break;
                }
            }
        } else if ident_start(c) {
            while i < b.len() && ident_char(b[i]) {
                i += 1;
            }
            if &source[start..i] == from {
                out.extend_from_slice(to.as_bytes());
                continue;
            }
        } else {
            i += 1;
            while i < b.len() && !b[i].is_ascii() {
                i += 1;
            }
        }
        out.extend_from_slice(&b[start..i.min(b.len())]);
    }
    String::from_utf8(out).expect("copied whole characters")
}

/// The element count of every dimension at which [`safe_default`] renders its kernel (the
/// defines of a safe default are the same at every shape, so any would do).
pub const SAFE_DEFAULT_DIM: u64 = 1000;

/// Per dimension, the sizes at which [`safe_default`] checks its configuration: one, odd and
/// prime sizes, tile multiples, and sizes past the largest tile and block counts.
const SAFE_DEFAULT_PROBES: [u64; 7] = [1, 3, 31, 64, 1000, 4099, 70_001];

/// The safe default of `op` on `dtype` elements: a configuration of the op's own spec that
/// is valid at every shape, for callers to run where no tuned kernel serves a shape
/// ([`TunedDb::select`](super::db::TunedDb::select) and `ca_select` return none).
///
/// It is derived from the spec, not stored: every parameter the spec gives a `safe` value
/// takes it (e.g. `BOUNDS = always`, bounds checks in every block), else its `missing` value
/// when it has one (the op's behaviour before that parameter existed), and each other
/// parameter prefers the middle of its default values (neither the smallest tiles nor the largest), moving away
/// from it only as far as needed. The first such configuration that is not pruned and
/// renders the same kernel (the same defines) at every probe shape (sizes 1 to 70001 in
/// every dimension, odd, prime and tile multiples) is the default. An error when the spec
/// has no such configuration.
pub fn safe_default(op: &str, dtype: &str, templates: Option<&Path>) -> Result<TunedKernel> {
    let op = Op::load(op, templates)?.with_dtype(Some(dtype))?;
    let ndims = op.spec.dims.len();
    let shape = Shape {
        dims: vec![SAFE_DEFAULT_DIM; ndims],
    };
    // Per parameter: the values to try and the index of the preferred one.
    let mut axes: Vec<crate::spec::space::ParamOverride> = Vec::new();
    let mut preferred: Vec<usize> = Vec::new();
    for p in &op.spec.params {
        let fixed = p
            .safe
            .as_ref()
            .or(p.missing.as_ref())
            .map(crate::spec::ops::toml_to_value);
        let values = match fixed {
            Some(v) => vec![v],
            None => p.default_values(),
        };
        preferred.push(values.len() / 2);
        axes.push(crate::spec::space::ParamOverride {
            name: p.name.clone(),
            values,
        });
    }
    let space = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &axes)?;
    // How far a configuration is from the preferred values, in steps along each axis.
    let distance = |c: &Candidate| -> usize {
        axes.iter()
            .zip(&preferred)
            .map(|(axis, &want)| {
                let v = c.config.values().find(|(n, _)| *n == axis.name);
                let at = v
                    .and_then(|(_, v)| axis.values.iter().position(|x| x == v))
                    .unwrap_or(want);
                at.abs_diff(want)
            })
            .sum()
    };
    let mut ranked: Vec<(usize, Candidate)> = space
        .into_iter()
        .filter(|c| c.pruned.is_none())
        .map(|c| (distance(&c), c))
        .collect();
    ranked.sort_by_key(|(d, c)| (*d, c.index));
    let probes = cartesian(&vec![SAFE_DEFAULT_PROBES.to_vec(); ndims]);
    let renderer = Renderer::new(&op)?;
    let render = |c: &Candidate| {
        renderer.render(c).map_err(|why| Error::Template {
            template: op.template_name.clone(),
            why,
        })
    };
    for (_, candidate) in ranked {
        if same_kernel_everywhere(&op, &candidate, &probes, &render)? {
            let source = render(&candidate)?;
            return Ok(TunedKernel {
                op: op.clone(),
                shape: shape.clone(),
                candidate,
                source,
                limits: DeviceLimits::SM90_DEFAULT,
            });
        }
    }
    Err(Error::Usage(format!(
        "op {} ({dtype}): no configuration of its spec with bounds checks is valid at every \
         shape, so there is no safe default to export",
        op.name()
    )))
}

/// True when `candidate`'s configuration is valid at every shape of `probes` and the kernel
/// rendered at any of them is the kernel rendered at every other: not pruned anywhere, and the
/// sources differ at most in the `#define` lines of defines that the code never uses (such as
/// `EVEN_TILES` in a kernel that checks bounds in every block), which compile to nothing.
fn same_kernel_everywhere(
    op: &Op,
    candidate: &Candidate,
    probes: &[Vec<u64>],
    render: &dyn Fn(&Candidate) -> Result<String>,
) -> Result<bool> {
    let define_values = |c: &Candidate| -> Vec<Option<Value>> {
        candidate
            .define_names
            .iter()
            .map(|d| c.var(d).cloned())
            .collect()
    };
    let overrides = overrides_of(candidate);
    // One representative configuration per distinct set of define values.
    let mut kinds: Vec<(Vec<Option<Value>>, Candidate)> = Vec::new();
    for q in probes {
        let shape = Shape { dims: q.clone() };
        let Ok(mut space) = enumerate(op, &shape, &DeviceLimits::SM90_DEFAULT, &overrides) else {
            return Ok(false);
        };
        let at = space.swap_remove(0);
        if at.pruned.is_some() {
            return Ok(false);
        }
        let values = define_values(&at);
        if !kinds.iter().any(|(v, _)| *v == values) {
            kinds.push((values, at));
        }
    }
    if kinds.len() <= 1 {
        return Ok(true);
    }
    let differing: Vec<&str> = candidate
        .define_names
        .iter()
        .enumerate()
        .filter(|(i, _)| kinds.iter().any(|(v, _)| v[*i] != kinds[0].0[*i]))
        .map(|(_, d)| d.as_str())
        .collect();
    let mut first: Option<String> = None;
    for (_, c) in &kinds {
        let source = render(c)?;
        let mut kept = String::new();
        for line in source.lines() {
            let defines = line
                .trim_start()
                .strip_prefix("#define")
                .map(|rest| rest.split_whitespace().next().unwrap_or(""));
            if defines.is_some_and(|d| differing.contains(&d)) {
                continue;
            }
            kept.push_str(line);
            kept.push('\n');
        }
        // A define the code uses (as a token, not in a comment) changes the kernel.
        if differing
            .iter()
            .any(|d| rename_identifier(&kept, d, "") != kept)
        {
            return Ok(false);
        }
        match &first {
            None => first = Some(kept),
            Some(f) if *f != kept => return Ok(false),
            Some(_) => {}
        }
    }
    Ok(true)
}

/// `K=V;K=V` of a kernel's configuration, in the spec's order.
pub fn params_text(tuned: &TunedKernel) -> String {
    tuned
        .candidate
        .config
        .values()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel of a two-dimensional op `probe` of this spec text (defines, constraints,
    /// launch, prologues) and template, with its one parameter `P` at `p`, tuned at `shape`.
    fn probe(spec: &str, template: &str, p: i64, shape: &str) -> (tempfile::TempDir, TunedKernel) {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "name = \"probe\"\ndims = [\"M\", \"N\"]\ntemplate = \"probe.cu.tera\"\n\
             kernel = \"probe\"\nreference = \"transpose\"\ncompare = \"exact\"\n\
             args = [\"out\", \"in\", \"M\", \"N\"]\n[metric]\nkind = \"bandwidth\"\n\
             bytes = \"M * N\"\n[[params]]\nname = \"P\"\nvalues = [{p}]\n{spec}\n\
             [[buffers]]\nname = \"in\"\nelements = \"M * N\"\nrole = \"input\"\n\
             [[buffers]]\nname = \"out\"\nelements = \"M * N\"\nrole = \"output\"\n"
        );
        std::fs::write(dir.path().join("probe.toml"), text).unwrap();
        std::fs::write(dir.path().join("probe.cu.tera"), template).unwrap();
        let op = Op::load_spec(&dir.path().join("probe.toml"), None).unwrap();
        let shape = Shape::parse(shape, &op.spec.dims).unwrap();
        let limits = DeviceLimits::SM90_DEFAULT;
        let candidate = candidate_for(&op, &shape, &format!("P={p}"), &limits).unwrap();
        assert_eq!(candidate.pruned, None);
        let source = Renderer::new(&op).unwrap().render(&candidate).unwrap();
        let tuned = TunedKernel {
            op,
            shape,
            candidate,
            source,
            limits,
        };
        (dir, tuned)
    }

    /// Pairs of 1, small, power-of-two, overflow-edge and largest dimensions.
    fn edge_shapes() -> Vec<Vec<u64>> {
        let values = [
            1,
            2,
            3,
            7,
            32,
            33,
            50,
            100,
            101,
            200,
            300,
            4096,
            65_535,
            65_536,
            1 << 21,
            2_097_152,
            46_341,
            3_000_000,
            MAX_DIM - 1,
            MAX_DIM,
            MAX_DIM + 1,
        ];
        values
            .iter()
            .flat_map(|&a| values.iter().map(move |&b| vec![a, b]))
            .collect()
    }

    const KERNEL: &str = "extern \"C\" __global__ void probe() {}\n";

    /// Two first kernels of one name, each under its own `when`: the rule follows the one
    /// that ran at the tuned shape, and so does the launch.
    #[test]
    fn first_kernels_of_one_name_are_told_apart_by_their_when() {
        let spec = "[launch]\nblock = ['P', '1', '1']\ngrid = ['ceil_div(M, P)', 'min(N, 65535)', '1']\n\
                    [[prologue]]\nkernel = \"zero\"\nwhen = 'M > 100'\nblock = ['32', '1', '1']\ngrid = ['1', '1', '1']\n\
                    [[prologue]]\nkernel = \"zero\"\nwhen = 'M <= 100'\nblock = ['64', '1', '1']\ngrid = ['2', '1', '1']\n";
        let (_dir, tuned) = probe(spec, KERNEL, 32, "200x4");
        let a = applicability_of(&tuned);
        for q in edge_shapes() {
            assert_eq!(a.admits(&q), valid_at(&tuned, &q), "{q:?}");
        }
        assert!(a.admits(&[300, 4]) && !a.admits(&[50, 4]));
        let (_, first) = a.rule.as_ref().unwrap().launch_at(&[300, 4]);
        assert_eq!(first.map(|l| (l.block.0, l.grid.0)), Some((32, 1)));
    }

    /// A product of five dimensions leaves 64 bits at large shapes: those are refused, as the
    /// space prunes them, and working out the rule's bounds does not overflow.
    #[test]
    fn a_product_past_64_bits_is_refused_as_the_space_refuses_it() {
        let spec = "[[constraints]]\nexpr = 'M * M * M * M * N > 0'\n\
                    [launch]\nblock = ['P', '1', '1']\ngrid = ['1', '1', '1']\n";
        let (_dir, tuned) = probe(spec, KERNEL, 32, "4x4");
        let a = applicability_of(&tuned);
        let (mut yes, mut no) = (0, 0);
        for q in edge_shapes() {
            let want = valid_at(&tuned, &q);
            assert_eq!(a.admits(&q), want, "{q:?}");
            if want {
                yes += 1;
            } else {
                no += 1;
            }
        }
        assert!(yes > 0 && no > 0, "{yes} admitted, {no} refused");
    }

    /// A safe default whose template branches on an integer define of the shape serves only
    /// where that define keeps its value: another value may render another kernel.
    #[test]
    fn a_default_keeps_every_integer_define_its_template_may_branch_on() {
        let spec =
            "[defines]\nX = 'M'\n[launch]\nblock = ['P', '1', '1']\ngrid = ['1', '1', '1']\n";
        let template =
            "{% if X > 1000000 %}int big;{% endif %}\nextern \"C\" __global__ void probe() {}\n";
        let (_dir, tuned) = probe(spec, template, 32, "4096x4");
        let a = default_applicability(&tuned).unwrap();
        assert!(a.admits(&[4096, 7]));
        assert!(!a.admits(&[2_000_000, 4]));
    }

    /// Shapes near, at residues of and far from `t`, per dimension, mixed at random.
    fn shapes_around(t: &[u64], rng: &mut impl rand::Rng, n: usize) -> Vec<Vec<u64>> {
        let per_dim: Vec<Vec<u64>> = t
            .iter()
            .map(|&t| {
                let mut v: Vec<u64> = vec![1, 2, 3, 4, 7, 8, 31, 32, 33, 64, 96, 127, 128, 1000];
                v.extend((0..8).map(|k| t.saturating_sub(k).max(1)));
                v.extend((1..8).map(|k| t + k));
                v.extend([
                    t + 64,
                    t + 128,
                    t.saturating_sub(64).max(1),
                    2 * t,
                    4 * t + 3,
                ]);
                v.extend((0..6).map(|_| rng.random_range(1..70_000u64)));
                v.extend((0..3).map(|_| rng.random_range(1..8u64) * 1024));
                v
            })
            .collect();
        (0..n)
            .map(|_| {
                per_dim
                    .iter()
                    .map(|v| v[rng.random_range(0..v.len())])
                    .collect()
            })
            .collect()
    }

    /// The rule of every shipped kind of row (sgemm with split-K, tails, repacks and
    /// windows; transposes with slabs, chunks and vectors; matmul) admits exactly the shapes
    /// at which the space keeps the configuration and renders the same kernel: the very
    /// source the export ships, character for character.
    #[test]
    fn each_rule_admits_exactly_where_the_tuner_keeps_the_kernel() {
        use rand::SeedableRng;
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/export/rules.csv");
        let rows = crate::store::best::read_best(&path).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (mut yes, mut no) = (0, 0);
        for row in &rows {
            let tuned = specialize(row, None).unwrap();
            let a = applicability_of(&tuned);
            let no_rule = || format!("{} {} {}: no rule", row.op, row.shape, row.params);
            assert!(a.rule.is_some(), "{}", no_rule());
            for q in shapes_around(&tuned.shape.dims, &mut rng, 40) {
                let want = valid_at(&tuned, &q);
                assert_eq!(
                    a.admits(&q),
                    want,
                    "{} {} {} at {q:?}",
                    row.op,
                    row.shape,
                    row.params
                );
                if want {
                    yes += 1;
                    if yes % 8 == 0 {
                        let shape = Shape { dims: q.clone() };
                        let c =
                            candidate_for(&tuned.op, &shape, &row.params, &tuned.limits).unwrap();
                        let source = Renderer::new(&tuned.op).unwrap().render(&c).unwrap();
                        assert!(source == tuned.source, "{} {} at {q:?}", row.op, row.params);
                    }
                } else {
                    no += 1;
                }
            }
        }
        assert!(yes > 500 && no > 500, "{yes} admitted, {no} refused");
    }

    #[test]
    fn rename_touches_whole_words_only() {
        let src = "void tile_transpose();\nextern \"C\" __global__ void transpose(int transpose2)\n// transpose: x\n{ transpose_(); transpose(); }";
        let out = rename_identifier(src, "transpose", "transpose_1000x1000");
        assert_eq!(
            out,
            "void tile_transpose();\nextern \"C\" __global__ void transpose_1000x1000(int transpose2)\n// transpose: x\n{ transpose_(); transpose_1000x1000(); }"
        );
        assert_eq!(rename_identifier("transpose", "transpose", "t"), "t");
        assert_eq!(rename_identifier("a transpose", "transpose", "t"), "a t");
        assert_eq!(
            rename_identifier("xtranspose", "transpose", "t"),
            "xtranspose"
        );
        assert_eq!(rename_identifier("µtranspose", "transpose", "t"), "µt");
        assert_eq!(rename_identifier("abc", "", "t"), "abc");
    }

    #[test]
    fn rename_leaves_comments_strings_and_numbers_alone() {
        let src = "/* a transpose does\n no arithmetic */ transpose(); // transpose\n\
                   printf(\"transpose \\\" transpose\"); char c = 't'; transpose();\n\
                   float x = 1e5f + 0x1transpose; /*/ transpose */ transpose";
        let out = rename_identifier(src, "transpose", "T");
        assert_eq!(
            out,
            "/* a transpose does\n no arithmetic */ T(); // transpose\n\
             printf(\"transpose \\\" transpose\"); char c = 't'; T();\n\
             float x = 1e5f + 0x1transpose; /*/ transpose */ T"
        );
        // An unterminated comment or literal at the end is copied as it is.
        assert_eq!(
            rename_identifier("x /* transpose", "transpose", "T"),
            "x /* transpose"
        );
        assert_eq!(
            rename_identifier("\"transpose", "transpose", "T"),
            "\"transpose"
        );
    }
}
