//! A database row back to the kernel it names: the op's template rendered with the row's
//! parameters, exactly as the tuner rendered it for that shape; and which other shapes that
//! same kernel may run on.

use super::db::stored_params;
use crate::codegen::Renderer;
use crate::error::{Error, Result};
use crate::expr::Value;
use crate::ops::Op;
use crate::results::BestRow;
use crate::shape::{Shape, MAX_DIM};
use crate::space::{enumerate, parse_override, Candidate, DeviceLimits};
use std::path::Path;

/// A tuned configuration made concrete: the op, the tuned shape, the configuration (with
/// defines and launch geometry for that shape) and its CUDA source.
#[derive(Debug, Clone)]
pub struct TunedKernel {
    pub op: Op,
    pub shape: Shape,
    pub candidate: Candidate,
    /// The rendered template; the kernel is named [`TunedKernel::kernel_name`].
    pub source: String,
}

impl TunedKernel {
    /// The `extern "C"` name of the kernel in [`TunedKernel::source`] (the spec's `kernel`).
    pub fn kernel_name(&self) -> &str {
        &self.op.spec.kernel
    }
}

/// The configuration `params` (`K=V;K=V`) of `op` at `shape`, evaluated on the sm_90 default
/// limits ([`DeviceLimits::SM90_DEFAULT`]). Every parameter of the op must be given once;
/// values outside the spec's default lists are accepted as `--param` accepts them.
pub fn candidate_for(op: &Op, shape: &Shape, params: &str) -> Result<Candidate> {
    // A row stored before some parameters existed: they take the values it had then.
    let pairs = stored_params(op, params);
    let mut overrides = Vec::new();
    for (name, value) in &pairs {
        overrides.push(parse_override(op, &format!("{name}={value}"))?);
    }
    let missing: Vec<&str> = op
        .spec
        .params
        .iter()
        .filter(|p| !pairs.iter().any(|(n, _)| *n == p.name))
        .map(|p| p.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "{} {shape}: parameters '{params}' lack {}",
            op.name(),
            missing.join(", ")
        )));
    }
    // Each override narrows its axis to one value: the space is exactly this configuration.
    let mut space = enumerate(op, shape, &DeviceLimits::SM90_DEFAULT, &overrides)?;
    let candidate = space.swap_remove(0);
    let same = pairs.iter().all(|(name, value)| {
        candidate
            .config
            .values
            .iter()
            .any(|(n, v)| n == name && *v == Value::parse(value))
    });
    if !same || !space.is_empty() {
        return Err(Error::Usage(format!(
            "{} {shape}: parameters '{params}' name a parameter twice",
            op.name()
        )));
    }
    Ok(candidate)
}

/// The op, shape and configuration of a row, rendered. `templates`: where op specs and
/// templates are read from (`None`: the built-in ones, as `tune` without `--templates`).
pub fn specialize(row: &BestRow, templates: Option<&Path>) -> Result<TunedKernel> {
    let op = Op::load(&row.op, templates)?
        .with_dtype(Some(row.dtype.as_str()).filter(|d| !d.is_empty()))?;
    let shape = Shape::parse(&row.shape, &op.spec.dims)?;
    let candidate = candidate_for(&op, &shape, &row.params)?;
    if let Some(why) = &candidate.pruned {
        return Err(Error::Usage(format!(
            "{} {} {}: not a valid configuration on the sm_90 default limits: {why}",
            row.op, row.shape, row.params
        )));
    }
    let source = Renderer::new(&op)?
        .render(&candidate)
        .map_err(|why| Error::Template {
            template: op.spec.template.clone(),
            why,
        })?;
    Ok(TunedKernel {
        op,
        shape,
        candidate,
        source,
    })
}

/// The CUDA source of a row's kernel, as the tuner compiled it for the row's shape.
pub fn tuned_source(row: &BestRow, templates: Option<&Path>) -> Result<String> {
    Ok(specialize(row, templates)?.source)
}

/// Whether the kernel of `row` may run on shape `dims`, by the tuner's own rule: a kernel is
/// rendered from the parameters and the *defines* only (never the exact shape), so it serves
/// every shape at which the configuration is not pruned and every define has the value it
/// had at the tuned shape. `false` for a different number of dimensions.
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
        &DeviceLimits::SM90_DEFAULT,
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
            .all(|d| at.vars.get(d) == tuned.candidate.vars.get(d))
}

fn overrides_of(c: &Candidate) -> Vec<crate::space::ParamOverride> {
    c.config
        .values
        .iter()
        .map(|(name, value)| crate::space::ParamOverride {
            name: name.clone(),
            values: vec![value.clone()],
        })
        .collect()
}

/// Which shapes a tuned kernel may serve, in a form a few lines of C can check (the header of
/// `tune export --format cuda` carries it): every dimension must be a multiple of each of
/// `moduli` exactly where the tuned shape's is. The moduli are the kernel's integer
/// parameters above 1 (tile sizes and the like), which is how shape-dependent defines such as
/// `EVEN_TILES = ROWS % TILE_DIM == 0 && ...` look at a shape.
///
/// The rule is checked against [`valid_for`] at shapes it admits (near, small and large ones,
/// up to 65536 per dimension or 4x the tuned one); if any of those is not valid the kernel
/// is marked `exact_only`. So it is conservative: it may refuse a shape the kernel could
/// serve, and it assumes that defines look at the shape only through such divisibility.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applicability {
    pub dims: Vec<u64>,
    /// Only the tuned shape itself.
    pub exact_only: bool,
    pub moduli: Vec<u64>,
}

impl Applicability {
    /// True when the kernel may serve `dims` by this rule.
    pub fn admits(&self, dims: &[u64]) -> bool {
        if dims == self.dims.as_slice() {
            return true;
        }
        !self.exact_only && dims.len() == self.dims.len() && self.same_facts(dims)
    }

    fn same_facts(&self, dims: &[u64]) -> bool {
        dims.iter().zip(&self.dims).all(|(&q, &t)| {
            q > 0
                && self
                    .moduli
                    .iter()
                    .all(|&m| q.is_multiple_of(m) == t.is_multiple_of(m))
        })
    }
}

/// The [`Applicability`] of a row's kernel.
pub fn applicability(row: &BestRow, templates: Option<&Path>) -> Result<Applicability> {
    Ok(applicability_of(&specialize(row, templates)?))
}

/// The [`Applicability`] of a kernel already specialized.
pub fn applicability_of(tuned: &TunedKernel) -> Applicability {
    let dims = tuned.shape.dims.clone();
    let mut moduli: Vec<u64> = tuned
        .candidate
        .config
        .values
        .iter()
        .filter_map(|(_, v)| match v {
            Value::Int(i) if *i > 1 => Some(*i as u64),
            _ => None,
        })
        .collect();
    moduli.sort_unstable();
    moduli.dedup();
    let mut rule = Applicability {
        dims,
        exact_only: false,
        moduli,
    };
    let ok = match probe_values(&rule) {
        Some(per_dim) => cartesian(&per_dim).iter().all(|q| valid_at(tuned, q)),
        None => false,
    };
    rule.exact_only = !ok;
    rule
}

/// Per dimension, values with the same divisibility facts as the tuned one: the tuned value,
/// the two smallest, two nearby (± the lcm of the moduli) and a large one.
fn probe_values(rule: &Applicability) -> Option<Vec<Vec<u64>>> {
    let lcm = rule.moduli.iter().try_fold(1u64, |acc, &m| {
        let l = acc / gcd(acc, m) * m;
        (l <= MAX_DIM).then_some(l)
    })?;
    let mut out = Vec::new();
    for &t in &rule.dims {
        let facts = |q: u64| {
            rule.moduli
                .iter()
                .all(|&m| q.is_multiple_of(m) == t.is_multiple_of(m))
        };
        let mut values = vec![t];
        values.extend((1..=t.min(1 << 20)).filter(|&q| facts(q)).take(2));
        if t > lcm {
            values.push(t - lcm);
        }
        values.push(t + lcm);
        values.push(t + 3 * lcm);
        let far = (4 * t).max(1 << 16);
        values.push(t + (far.saturating_sub(t) / lcm) * lcm);
        values.retain(|&q| (1..=MAX_DIM).contains(&q) && facts(q));
        values.sort_unstable();
        values.dedup();
        out.push(values);
    }
    Some(out)
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

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Replaces every occurrence of the identifier `from` in `source` by `to`: only where it is a
/// whole word (not part of a longer identifier such as `tile_transpose` or `transpose2`).
pub fn rename_identifier(source: &str, from: &str, to: &str) -> String {
    if from.is_empty() {
        return source.to_string();
    }
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(source.len() + 64);
    let mut rest = source;
    while let Some(at) = rest.find(from) {
        let before = if at > 0 {
            rest[..at].chars().next_back()
        } else {
            out.chars().next_back()
        };
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            // Part of a longer identifier: keep its first character and search on after it.
            let c = rest[at..].chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[at + c.len_utf8()..];
        } else {
            out.push_str(to);
            rest = &rest[at + from.len()..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_touches_whole_words_only() {
        let src = "void tile_transpose();\nextern \"C\" __global__ void transpose(int transpose2)\n// transpose: x\n{ transpose_(); transpose(); }";
        let out = rename_identifier(src, "transpose", "transpose_1000x1000");
        assert_eq!(
            out,
            "void tile_transpose();\nextern \"C\" __global__ void transpose_1000x1000(int transpose2)\n// transpose_1000x1000: x\n{ transpose_(); transpose_1000x1000(); }"
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
}
