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
    /// The constraints (with the `--param` values given) prune every configuration. The text
    /// is the summary from [`empty_space_summary`]: a first line, then one indented line per
    /// leading prune reason.
    #[error("no configuration is left after the constraints{0}")]
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
    /// A CSV file that was read cannot be used: it does not parse, or it is not the kind of
    /// file the command reads (a `best.csv` given where a run CSV is expected, an empty file).
    #[error("CSV {path}: {why}")]
    Csv { path: PathBuf, why: String },
    /// A failure that no input or environment explains (serializing in memory); a bug.
    #[error("internal error: {0}")]
    Internal(String),
    #[error("{0}")]
    Usage(String),
}

impl Error {
    /// Exit code for the binary: 2 for input the user can fix (arguments, and the files they
    /// name: specs, templates, CSVs that are not what the command reads), 1 for the
    /// environment or GPU.
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
            | Error::Csv { .. }
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

/// How many prune reasons an [`Error::EmptySpace`] lists; the rest are counted.
pub const EMPTY_SPACE_REASONS: usize = 3;

/// The text of an [`Error::EmptySpace`]: which `--param` values narrowed the space (they are
/// the likeliest cause), how many configurations there were, and the leading prune reasons
/// with their counts, one per line, most frequent first. `reasons` is `(reason, count)` as
/// [`crate::space::prune_summary`] gives it.
pub fn empty_space_summary(total: usize, params: &[String], reasons: &[(String, usize)]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if !params.is_empty() {
        let _ = write!(s, " with --param {}", params.join(" --param "));
    }
    let _ = write!(s, ": all {total} configurations were pruned");
    if reasons.is_empty() {
        return s;
    }
    s.push_str("; most frequent reasons:");
    for (reason, n) in reasons.iter().take(EMPTY_SPACE_REASONS) {
        let _ = write!(s, "\n  {n} × {reason}");
    }
    if reasons.len() > EMPTY_SPACE_REASONS {
        let rest: usize = reasons[EMPTY_SPACE_REASONS..].iter().map(|(_, n)| n).sum();
        let _ = write!(
            s,
            "\n  {rest} more for {} other reason(s)",
            reasons.len() - EMPTY_SPACE_REASONS
        );
    }
    s
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
