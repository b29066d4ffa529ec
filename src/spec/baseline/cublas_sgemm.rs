//! `kind = "cublas_sgemm"`: cuBLAS SGEMM, pure FP32 (TF32 off), on the row-major buffers
//! `operands = [A, B, C]` of an M x N x K op.

use super::{field, fields, run_fields, Baseline, BaselineKind, RunContext, SpecView};
use crate::error::Result;
use crate::model::work::Work;
use serde::Deserialize;

pub const INFO: BaselineKind = BaselineKind {
    name: "cublas_sgemm",
    about: "cuBLAS SGEMM (FP32, TF32 off) on the buffers A, B, C of an MxNxK op",
    check,
    work,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    operands: Option<[String; 3]>,
}

fn check(b: &Baseline, spec: &SpecView) -> std::result::Result<(), String> {
    let f: Fields = fields(b)?;
    let ok = f
        .operands
        .as_ref()
        .is_some_and(|ops| ops.iter().all(|o| spec.buffers.contains(&o.as_str())));
    if !ok || spec.dims != 3 {
        return Err(format!(
            "{}: cublas_sgemm needs operands = [A, B, C] naming buffers and an MxNxK op",
            field(b)
        ));
    }
    Ok(())
}

fn work(b: &Baseline, at: &RunContext) -> Result<std::result::Result<Work, String>> {
    let f: Fields = run_fields(b, at)?;
    let [a, b, c] = f.operands.unwrap_or_default();
    let dim = |i: usize| {
        at.dims
            .get(i)
            .map_or(0, |&d| i32::try_from(d).unwrap_or(i32::MAX))
    };
    Ok(Ok(Work::Sgemm {
        a,
        b,
        c,
        m: dim(0),
        n: dim(1),
        k: dim(2),
    }))
}
