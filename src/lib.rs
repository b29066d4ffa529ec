//! cuda-autotune: finds the fastest correct CUDA kernel for an op and a shape on this GPU.
//!
//! Layers, lowest first; each imports only from layers below it (tests/layers.rs checks):
//!
//! - [`error`]: the error type every layer returns.
//! - [`model`]: plain data (shapes, element types); no I/O.
//! - [`spec`]: op specs and templates, the configuration space, code generation.
//! - [`cuda`]: the CUDA driver and NVRTC.
//! - [`measure`]: timing, verification, clocks, statistics.
//! - [`isolate`]: worker processes that run GPU work and compilation.
//! - [`store`]: run CSVs, best.csv, journals.
//! - [`search`]: search strategies over the space.
//! - [`pipeline`]: the tuning run that joins the layers above, and its text summary.
//! - [`export`]: exports of best.csv and the HTML report of a run.
//! - [`cluster`]: shards, multi-GPU sweeps, merging shard outputs.
//! - [`check`]: re-timing the stored winners.
//! - [`cli`]: command-line parsing (the only clap user); the `tune` binary sits on top.

pub mod error;

pub mod model;

pub mod spec;

pub mod cuda;
pub mod measure;

pub mod isolate;
pub mod store;

pub mod search;

pub mod pipeline;

pub mod export;

pub mod cluster;

pub mod check;
pub mod cli;
