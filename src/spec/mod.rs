//! What an op is and which kernels it can be: the op spec (TOML), its parameter space, and
//! the CUDA source of each configuration (Tera). No I/O beyond reading specs and templates.

pub mod baseline;
pub mod codegen;
pub mod cover;
pub mod describe;
pub mod expr;
pub mod ops;
pub mod reference;
pub mod rule;
pub mod space;
