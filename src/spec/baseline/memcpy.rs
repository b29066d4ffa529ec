//! `kind = "memcpy"`: a device-to-device copy of buffer `from` into buffer `to` (the copy
//! roof of data-movement ops).

use super::{field, fields, run_fields, Baseline, BaselineKind, RunContext, SpecView};
use crate::error::Result;
use crate::model::work::Work;
use serde::Deserialize;

pub const INFO: BaselineKind = BaselineKind {
    name: "memcpy",
    about: "a device-to-device copy from one buffer to another",
    check,
    work,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    from: Option<String>,
    to: Option<String>,
}

fn check(b: &Baseline, spec: &SpecView) -> std::result::Result<(), String> {
    let f: Fields = fields(b)?;
    for (what, name) in [("from", &f.from), ("to", &f.to)] {
        if !name.as_deref().is_some_and(|n| spec.buffers.contains(&n)) {
            return Err(format!("{}.{what}: names no buffer", field(b)));
        }
    }
    Ok(())
}

fn work(b: &Baseline, at: &RunContext) -> Result<std::result::Result<Work, String>> {
    let f: Fields = run_fields(b, at)?;
    Ok(Ok(Work::Memcpy {
        from: f.from.unwrap_or_default(),
        to: f.to.unwrap_or_default(),
    }))
}
