//! cuda-autotune: finds the fastest correct CUDA kernel for an op and a shape on this GPU.
//!
//! Data flows one way: [`ops`] (spec + template) → [`space`] (configurations, pruned with
//! reasons) → [`codegen`] (Tera → CUDA) → [`compile`] (NVRTC → cubin, cached) → [`gpu`]
//! (load, launch) → [`verify`] and [`bench`](mod@bench) → [`results`] (CSV) and [`report`] (stdout).
//! [`tuner`] runs that pipeline; nothing else touches more than one stage.

pub mod bench;
pub mod check;
pub mod cli;
pub mod clocks;
pub mod codegen;
pub mod compile;
pub mod cover;
pub mod dtype;
pub mod error;
pub mod export;
pub mod expr;
pub mod gpu;
pub mod merge;
pub mod ops;
pub mod report;
pub mod results;
pub mod search;
pub mod shape;
pub mod shard;
pub mod space;
pub mod stats;
pub mod tuner;
pub mod verify;
pub mod worker;
