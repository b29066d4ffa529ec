//! Worker processes: GPU work and compilation run in child processes so that a faulting or
//! hanging kernel, or a crashing compiler, costs one task and not the run.

pub mod worker;
