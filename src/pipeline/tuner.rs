//! The pipeline: space → render → compile → verify → time → record. Every configuration
//! ends as a [`Record`](crate::store::record::Record) (ok, failed with the reason, or pruned
//! with the reason); a failing variant never stops the run. GPU work runs in worker processes
//! (see [`crate::isolate::worker`]), so a kernel that faults or hangs costs only its own
//! record.
//!
//! [`tune`] runs the stages in order, each taking the previous one's value: plan → device →
//! build → job → rounds → settle → confirm → rank → persist.

use super::{build, confirm, job, persist, plan, rounds};
use crate::error::Result;
use crate::isolate::worker::{KeptWorker, Starting};
use crate::spec::ops::Op;
use std::time::Instant;

use super::options::TuneOptions;
use super::outcome::TuneOutcome;

/// Runs the whole pipeline for one op and shape; the op is loaded from what `opts` names.
pub fn tune(opts: &TuneOptions) -> Result<TuneOutcome> {
    tune_keeping(opts, None, &mut KeptWorker::default())
}

/// [`tune`] for one of several runs in a row on one device: the run starts on the GPU worker
/// in `kept` when there is one for its device (else it starts one), and leaves its idle
/// worker there for the next run. `op`: the op `opts` names, when already loaded (a sweep
/// loads it once for all its shapes, [`check_inputs`](super::plan::check_inputs)).
pub fn tune_keeping(
    opts: &TuneOptions,
    op: Option<&Op>,
    kept: &mut KeptWorker,
) -> Result<TuneOutcome> {
    let t0 = Instant::now();
    let starting = plan::first_worker(opts, kept)?;
    // With the architecture known before the device (`--arch`, `--compile-only`), the compile
    // workers start now too, so loading NVRTC overlaps checking the input and the space; bad
    // input drops the pool, which ends them.
    let pool = plan::early_compile_pool(opts);
    let plan = match plan::plan(opts, op) {
        Ok(plan) => plan,
        Err(e) => {
            // Bad input ends the run before the GPU is needed: the worker serves the next.
            kept.keep(starting.map(Starting::into_worker));
            return Err(e);
        }
    };
    let setup = plan::device(opts, plan, starting, pool, t0)?;
    let built = build::build(opts, setup)?;
    let Some(dev) = built.setup.device.clone() else {
        return build::compile_only(opts, built, t0);
    };
    let staged = job::job(opts, built, &dev)?;
    let measured = rounds::settle(rounds::rounds(opts, staged)?);
    let mut confirmed = confirm::confirm(opts, measured)?;
    kept.keep(confirmed.idle.take());
    persist::persist(opts, persist::rank(confirmed), t0)
}
