//! Measuring kernels on the GPU: timing, verification against a reference, GPU clocks and
//! the statistics of a set of timings.

pub mod bench;
pub mod clocks;
pub mod stats;
pub mod verify;
