//! A stored row back to the kernel it names: the op's template rendered with the row's
//! parameters, for the row's shape and the limits of the GPU that tuned it, exactly as the
//! tuner rendered it; and whether that is still the source the row's figures are of.

use crate::cuda::compile::source_key;
use crate::error::{Error, Result};
use crate::model::limits::DeviceLimits;
use crate::model::shape::Shape;
use crate::spec::codegen::Renderer;
use crate::spec::expr::Value;
use crate::spec::ops::Op;
use crate::spec::space::{enumerate, parse_override, Candidate};
use crate::store::best::{stored_params, BestRow};
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
    /// The limits it was rendered for ([`row_limits`]): specs read them (`NUM_SMS`,
    /// `COMPUTE_CAPABILITY`), so another GPU's limits may render another kernel.
    pub limits: DeviceLimits,
}

impl TunedKernel {
    /// The `extern "C"` name of the kernel in [`TunedKernel::source`] (the spec's `kernel`).
    pub fn kernel_name(&self) -> &str {
        &self.op.spec.kernel
    }
}

/// The configuration `params` (`K=V;K=V`) of `op` at `shape`, evaluated on `limits`. Every
/// parameter of the op must be given once; values outside the spec's default lists are
/// accepted as `--param` accepts them.
pub fn candidate_for(
    op: &Op,
    shape: &Shape,
    params: &str,
    limits: &DeviceLimits,
) -> Result<Candidate> {
    // A row stored before some parameters existed: they take the values it had then.
    let pairs = stored_params(op, params);
    let mut overrides = Vec::new();
    for (name, value) in &pairs {
        // Said of the stored row, not of a `--param` the user never passed.
        let stored = format!("{name}={value}");
        overrides.push(parse_override(op, &stored).map_err(|e| match e {
            Error::ParamSyntax { why, .. } => {
                Error::Usage(format!("stored parameter {stored}: {why}"))
            }
            e => e,
        })?);
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
    let mut space = enumerate(op, shape, limits, &overrides)?;
    let candidate = space.swap_remove(0);
    let same = pairs.iter().all(|(name, value)| {
        candidate
            .config
            .values()
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

/// The limits `row`'s space was built on, as a tuning run builds them: those of the GPU's
/// compute capability ([`DeviceLimits::for_arch`]: threads, shared memory) with its number of
/// SMs, and the compute capability of the architecture compiled for (an `--arch` older than
/// the GPU rules out what it lacks). A row without a readable compute capability reads as
/// sm_90, one without `num_sms` as 132 SMs ([`recorded_sms`]), one without `arch` as the GPU's.
pub fn row_limits(row: &BestRow) -> DeviceLimits {
    let base = gpu_arch(row)
        .as_deref()
        .and_then(DeviceLimits::for_arch)
        .unwrap_or(DeviceLimits::SM90_DEFAULT);
    DeviceLimits {
        num_sms: recorded_sms(row).unwrap_or(base.num_sms),
        compute_capability: crate::model::limits::arch_compute_capability(&row.arch)
            .unwrap_or(base.compute_capability),
        ..base
    }
}

/// The SM count `row` records (a positive `num_sms`), if it records one.
pub fn recorded_sms(row: &BestRow) -> Option<i64> {
    row.num_sms.filter(|&n| n > 0)
}

/// `132 SMs` for a row that records its SM count, `132 SMs assumed` for one that does not: the
/// SM count its kernel is rendered for ([`row_limits`]).
pub fn sms_text(row: &BestRow) -> String {
    match recorded_sms(row) {
        Some(n) => format!("{n} SMs"),
        None => format!("{} SMs assumed", row_limits(row).num_sms),
    }
}

/// `sm_XY` of the row's `compute_capability` (`X.Y`): the GPU's own architecture.
fn gpu_arch(row: &BestRow) -> Option<String> {
    let (major, minor) = version(&row.compute_capability)?;
    Some(format!("sm_{major}{minor}"))
}

/// `(X, Y)` of a version column (`X.Y`: `compute_capability`, `nvrtc`).
fn version(text: &str) -> Option<(i32, i32)> {
    let (major, minor) = text.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The op, shape and configuration of a row, rendered on the limits of the GPU that tuned it
/// ([`row_limits`]). `templates`: where op specs and templates are read from (`None`: the
/// built-in ones, as `tune` without `--templates`).
pub fn specialize(row: &BestRow, templates: Option<&Path>) -> Result<TunedKernel> {
    let op = Op::load(&row.op, templates)?
        .with_dtype(Some(row.dtype.as_str()).filter(|d| !d.is_empty()))?;
    specialize_op(op, row)
}

/// [`specialize`] with the row's op already loaded, in the row's element type: how a run
/// renders a stored row of its own op, which may come from a spec file (`--spec`).
pub fn specialize_op(op: Op, row: &BestRow) -> Result<TunedKernel> {
    let shape = Shape::parse(&row.shape, &op.spec.dims)?;
    let limits = row_limits(row);
    let candidate = candidate_for(&op, &shape, &row.params, &limits)?;
    if let Some(why) = &candidate.pruned {
        return Err(Error::Usage(format!(
            "{} {} {}: not a valid configuration on the limits of sm_{} with {} SMs: {why}",
            row.op, row.shape, row.params, limits.compute_capability, limits.num_sms
        )));
    }
    let source = Renderer::new(&op)?
        .render(&candidate)
        .map_err(|why| Error::Template {
            template: op.template_name.clone(),
            why,
        })?;
    Ok(TunedKernel {
        op,
        shape,
        candidate,
        source,
        limits,
    })
}

/// The CUDA source of a row's kernel, as the tuner compiled it for the row's shape.
pub fn tuned_source(row: &BestRow, templates: Option<&Path>) -> Result<String> {
    Ok(specialize(row, templates)?.source)
}

/// Whether `tuned`, rendered from `row` with today's template, is the very source the row was
/// timed with: its compile key ([`source_key`]) under the row's NVRTC version and architecture
/// (`arch`; in a row without it, the GPU's `sm_XY` or `sm_XYa`) is the row's `source_hash`. A
/// template edited since the row was tuned renders another source, whose speed the row's
/// figures do not state (even a comment changes the key, though not the machine code).
/// `None` where the row records no hash or no readable versions (nothing to compare).
pub fn renders_as_timed(row: &BestRow, tuned: &TunedKernel) -> Option<bool> {
    if row.source_hash.is_empty() {
        return None;
    }
    let nvrtc = version(&row.nvrtc)?;
    let arches = if row.arch.trim().is_empty() {
        let own = gpu_arch(row)?;
        vec![format!("{own}a"), own]
    } else {
        vec![row.arch.trim().to_string()]
    };
    Some(
        arches
            .iter()
            .any(|a| source_key(&tuned.source, a, nvrtc) == row.source_hash),
    )
}

/// One line saying that `row`'s figures are of an earlier source than `tuned` (see
/// [`renders_as_timed`]), or `None` when they are of this one or there is nothing to compare.
pub fn untimed_note(row: &BestRow, tuned: &TunedKernel) -> Option<String> {
    (renders_as_timed(row, tuned) == Some(false)).then(|| {
        format!(
            "the template changed since it was tuned at {}: the stored figures are of the \
             source it rendered then, not of today's; re-tune the shape to time today's",
            row.tuned_at
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row of a built-in transpose whose `source_hash` is `hash`, tuned on a GPU of
    /// compute capability `cc` with NVRTC `nvrtc`.
    fn transpose_row(hash: &str, cc: &str, nvrtc: &str) -> BestRow {
        let params = "TILE_DIM=32;BLOCK_ROWS=8;PAD=1;UNROLL=on;BOUNDS=edge";
        BestRow {
            op: "transpose".into(),
            shape: "1000x1000".into(),
            dtype: "f32".into(),
            compute_capability: cc.into(),
            nvrtc: nvrtc.into(),
            params: params.into(),
            source_hash: hash.into(),
            tuned_at: "2026-01-01T00:00:00Z".into(),
            ..BestRow::default()
        }
    }

    #[test]
    fn a_row_renders_as_timed_when_its_hash_is_the_source_of_today() {
        let probe = transpose_row("", "9.0", "13.0");
        let tuned = specialize(&probe, None).unwrap();
        // As the tuner keys it: the GPU's own sm_90, or an sm_90a that --arch named.
        for arch in ["sm_90", "sm_90a"] {
            let row = transpose_row(&source_key(&tuned.source, arch, (13, 0)), "9.0", "13.0");
            assert_eq!(renders_as_timed(&row, &tuned), Some(true), "{arch}");
            assert_eq!(untimed_note(&row, &tuned), None);
        }
        // Another source, another NVRTC or another GPU: not what the row timed.
        for (hash, cc, nvrtc) in [
            (
                source_key("an earlier source", "sm_90", (13, 0)),
                "9.0",
                "13.0",
            ),
            (source_key(&tuned.source, "sm_90", (12, 8)), "9.0", "13.0"),
            (source_key(&tuned.source, "sm_80", (13, 0)), "9.0", "13.0"),
        ] {
            let row = transpose_row(&hash, cc, nvrtc);
            assert_eq!(renders_as_timed(&row, &tuned), Some(false));
            let note = untimed_note(&row, &tuned).unwrap();
            assert!(note.contains("tuned at 2026-01-01T00:00:00Z"), "{note}");
        }
        // A row that records its architecture (`--arch sm_80` on this GPU) is keyed with it.
        let mut row = transpose_row(&source_key(&tuned.source, "sm_80", (13, 0)), "9.0", "13.0");
        assert_eq!(renders_as_timed(&row, &tuned), Some(false));
        row.arch = "sm_80".into();
        assert_eq!(renders_as_timed(&row, &tuned), Some(true));
        row.arch = "sm_90".into();
        assert_eq!(renders_as_timed(&row, &tuned), Some(false));
        // Nothing to compare: no hash, or versions that do not read.
        for (hash, cc, nvrtc) in [
            ("", "9.0", "13.0"),
            ("abc", "", "13.0"),
            ("abc", "9.0", "x"),
        ] {
            let row = transpose_row(hash, cc, nvrtc);
            assert_eq!(renders_as_timed(&row, &tuned), None, "{cc} {nvrtc}");
            assert_eq!(untimed_note(&row, &tuned), None);
        }
    }

    /// A row is rendered on the limits of the GPU that tuned it: its SM count enters the
    /// defines (`TAIL=1`'s `WAVE`), its compute capability what the spec admits, so the source
    /// that timed it is found again on a GPU that is not an H100.
    #[test]
    fn a_row_renders_for_the_sm_count_and_architecture_that_tuned_it() {
        let row = |cc: &str, num_sms: Option<i64>| BestRow {
            op: "sgemm".into(),
            shape: "4096x4096x4096".into(),
            dtype: "f32".into(),
            compute_capability: cc.into(),
            params: "BM=64;BN=128;BK=16;TM=8;TN=8;WARP_N=8;VEC=4;PAD=0;STAGES=2;GROUP_M=8;\
                     OCCUPANCY=0;LOAD=async;BOUNDS=specialized;REPACK=0;WINDOWS=0;ORDER=snakek;\
                     CSTORE=scalar;KSPLIT=1;B_ELEMS=0;SPLITK=1;TAIL=1"
                .into(),
            num_sms,
            ..BestRow::default()
        };
        let wave = |t: &TunedKernel| t.candidate.var("WAVE").cloned();
        let h100 = specialize(&row("9.0", Some(132)), None).unwrap();
        assert_eq!(h100.limits, DeviceLimits::SM90_DEFAULT);
        // A row written before the column existed: an H100's 132 SMs.
        let unknown = specialize(&row("9.0", None), None).unwrap();
        assert_eq!(unknown.source, h100.source);
        let fewer = specialize(&row("9.0", Some(108)), None).unwrap();
        assert_eq!(fewer.limits.num_sms, 108);
        assert_ne!(wave(&fewer), wave(&h100));
        assert_ne!(fewer.source, h100.source);
        // At 114 SMs (3 blocks an SM) 2048 tiles leave 338 past the last whole wave of 342,
        // more than the half wave TAIL=1 takes: not a configuration that GPU's tuner keeps.
        let err = specialize(&row("9.0", Some(114)), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sm_90 with 114 SMs: TAIL=1"), "{err}");
        // TAIL=1 splits over thread block clusters, which need sm_90: an sm_80 row of it
        // cannot be the kernel that was timed, and the error names the limits it was judged on.
        let ampere = row("8.0", Some(108));
        assert_eq!(row_limits(&ampere).compute_capability, 80);
        assert_eq!(row_limits(&ampere).max_shared_optin, 163 * 1024);
        let err = specialize(&ampere, None).unwrap_err().to_string();
        assert!(err.contains("sm_80 with 108 SMs"), "{err}");
        // Unreadable columns fall back to the sm_90 defaults.
        assert_eq!(row_limits(&row("", Some(0))), DeviceLimits::SM90_DEFAULT);
        // Compiled for an older architecture on this GPU: its compute capability rules, and the
        // GPU's shared memory stays (as a tuning run builds the limits).
        let mut older = row("9.0", Some(132));
        older.arch = "sm_80".into();
        let limits = row_limits(&older);
        assert_eq!(limits.compute_capability, 80);
        assert_eq!(limits.max_shared_optin, 227 * 1024);
        // The SM count shown is the one rendered for, said to be assumed where not recorded.
        assert_eq!(sms_text(&row("9.0", Some(114))), "114 SMs");
        assert_eq!(sms_text(&row("9.0", None)), "132 SMs assumed");
        assert_eq!(sms_text(&row("9.0", Some(-3))), "132 SMs assumed");
    }
}
