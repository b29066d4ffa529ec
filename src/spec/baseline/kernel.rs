//! `kind = "kernel"` (the default): a kernel of the spec's baseline template
//! (`[baseline_source]`), launched with the op's arguments at `block` and `grid`.

use super::{field, fields, run_fields, Baseline, BaselineKind, RunContext, SpecView};
use crate::error::Result;
use crate::model::work::Work;
use serde::Deserialize;
use std::path::Path;

pub const INFO: BaselineKind = BaselineKind {
    name: "kernel",
    about: "a kernel of the baseline template, launched with the op's arguments",
    check,
    work,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    kernel: Option<String>,
    block: Option<[String; 3]>,
    grid: Option<[String; 3]>,
}

fn check(b: &Baseline, spec: &SpecView) -> std::result::Result<(), String> {
    let f: Fields = fields(b)?;
    if f.kernel.is_none() || f.block.is_none() || f.grid.is_none() {
        return Err(format!(
            "{}: a kernel baseline needs kernel, block and grid",
            field(b)
        ));
    }
    if !spec.baseline_source {
        return Err(format!(
            "{}: kernel baselines need [baseline_source]",
            field(b)
        ));
    }
    Ok(())
}

fn work(b: &Baseline, at: &RunContext) -> Result<std::result::Result<Work, String>> {
    let f: Fields = run_fields(b, at)?;
    let (Some(kernel), Some(block), Some(grid)) = (f.kernel, f.block, f.grid) else {
        return Ok(Err("baseline has no launch geometry".into()));
    };
    let launch = (at.eval_launch)(&block, &grid, &format!("{} {}", at.origin, field(b)))?;
    Ok(launch.map(|launch| Work::Kernel {
        cubin: at.cubin.map(Path::to_path_buf).unwrap_or_default(),
        kernel,
        launch,
        before: Vec::new(),
    }))
}
