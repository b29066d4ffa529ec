//! One error type for the whole tool. Each variant renders as one readable line, because the
//! binary prints exactly that line and exits; the exit code tells scripts whether the input
//! was wrong (2) or the machine could not do the work (1).

use std::path::PathBuf;

/// Everything that can stop a tuning run before it produces results.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid shape '{input}': {why}")]
    Shape { input: String, why: String },
    #[error("unknown op '{name}' (known ops: {known})")]
    UnknownOp { name: String, known: String },
    #[error("unknown parameter '{name}' for op {op} (known parameters: {known})")]
    UnknownParam {
        op: String,
        name: String,
        known: String,
    },
    #[error("invalid --param '{input}': {why}")]
    ParamSyntax { input: String, why: String },
    #[error("no configuration is left after the constraints: {0}")]
    EmptySpace(String),
    #[error("op spec {file}: {why}")]
    Spec { file: String, why: String },
    #[error("expression '{expr}' in {context}: {why}")]
    Expr {
        expr: String,
        context: String,
        why: String,
    },
    #[error("template {template}: {why}")]
    Template { template: String, why: String },
    #[error("NVRTC is not available: {0}")]
    NoNvrtc(String),
    #[error("no CUDA GPU is usable: {0}")]
    NoGpu(String),
    #[error("the shape needs {need_mib} MiB of GPU memory but only {free_mib} MiB are free")]
    OutOfMemory { need_mib: u64, free_mib: u64 },
    #[error("CUDA error during {during}: {why}")]
    Cuda { during: String, why: String },
    #[error("{action} {path}: {why}")]
    Io {
        action: &'static str,
        path: PathBuf,
        why: String,
    },
    #[error("CSV {path}: {why}")]
    Csv { path: PathBuf, why: String },
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// Exit code for the binary: 2 for input the user can fix, 1 for the environment or GPU.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Shape { .. }
            | Error::UnknownOp { .. }
            | Error::UnknownParam { .. }
            | Error::ParamSyntax { .. }
            | Error::EmptySpace(_)
            | Error::Spec { .. }
            | Error::Expr { .. }
            | Error::Template { .. }
            | Error::Usage(_) => 2,
            _ => 1,
        }
    }

    /// Shorthand for I/O failures that name the file involved.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, err: impl std::fmt::Display) -> Self {
        Error::Io {
            action,
            path: path.into(),
            why: err.to_string(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
