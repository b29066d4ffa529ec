//! One error type for the whole tool. Each variant renders as one readable line, because the
//! binary prints exactly that line and exits; the exit code tells scripts whether the input
//! was wrong (2) or the machine could not do the work (1).

use std::path::{Path, PathBuf};

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
    /// is [`empty_space_summary`]'s.
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
    /// An error of one job that a GPU worker process met and sent as its line (a CUDA call
    /// that failed for the job's shape): the job's, not the device's.
    #[error("{0}")]
    Job(String),
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

// The exit codes of `tune`, each written once: the binary and the sweep return these.

/// Success.
pub const EXIT_OK: u8 = 0;
/// The environment or the GPU failed, or the run ended without an answer (nothing verified,
/// a compile-only run with compiles that failed, a `tune check` that failed).
pub const EXIT_FAILED: u8 = 1;
/// Input the user can fix: arguments, and the files they name.
pub const EXIT_USAGE: u8 = 2;
/// Stopped by Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, as shells report it): partial results
/// are written.
pub const EXIT_INTERRUPTED: u8 = 130;

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
            | Error::Usage(_) => EXIT_USAGE.into(),
            _ => EXIT_FAILED.into(),
        }
    }

    /// Whether this is an error of the device a shape ran on, which the next shape on that
    /// GPU would meet too: its worker cannot start, or the device is lost or faulted for good
    /// ([`Error::NoGpu`]). Every other error is the shape's (too large for the GPU's free
    /// memory, a CUDA call that failed for it, input the op refuses) or this machine's (no
    /// NVRTC, a file that cannot be written), which another GPU would meet as well. A `--gpus`
    /// sweep takes a GPU out on the first kind only. Every variant is named, so that a new one
    /// is classified here.
    pub fn is_device(&self) -> bool {
        match self {
            Error::NoGpu(_) => true,
            Error::OutOfMemory { .. }
            | Error::Cuda { .. }
            | Error::Job(_)
            | Error::NoNvrtc(_)
            | Error::Io { .. }
            | Error::Internal(_)
            | Error::Shape { .. }
            | Error::UnknownOp { .. }
            | Error::UnknownParam { .. }
            | Error::ParamSyntax { .. }
            | Error::EmptySpace(_)
            | Error::Spec { .. }
            | Error::Expr { .. }
            | Error::Template { .. }
            | Error::Csv { .. }
            | Error::Usage(_) => false,
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

/// Why `path`, a file the user named, cannot be read as one: it does not exist, or it is a
/// folder. `None` when it opens as a file; devices and pipes do (`--shapes <(...)` is a
/// pipe), and what they hold is judged by the reader like any file's content.
pub fn not_a_file(path: &Path) -> Option<&'static str> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("no such file"),
        Ok(m) if m.is_dir() => Some("is a folder, not a file"),
        _ => None,
    }
}

/// `bytes` read from `path` as UTF-8 text; anything else (a binary file, another encoding)
/// is bad input naming the line of the first byte that is not. `what` names the file's role
/// in the message (`--shapes`, `op spec`).
pub fn utf8_text(what: &str, path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::Usage(format!(
            "{what} {}: not UTF-8 text (line {line}, byte {at}); is it the right file?",
            path.display()
        ))
    })
}

/// Reads a text file the user named. A missing file, a folder or bytes that are not UTF-8
/// are bad input (exit 2), said as `{what} PATH: why`; a file that exists but cannot be read
/// (permissions, I/O) is an [`Error::Io`].
pub fn read_user_text(what: &str, path: &Path) -> Result<String> {
    if let Some(why) = not_a_file(path) {
        return Err(Error::Usage(format!("{what} {}: {why}", path.display())));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io("cannot read", path, e))?;
    utf8_text(what, path, bytes)
}

/// About how many characters of prune reasons an [`Error::EmptySpace`] spells out; the
/// first reason is always given in full, the rest only while they fit, and those left are
/// counted.
pub const EMPTY_SPACE_REASONS_WIDTH: usize = 160;

/// The text of an [`Error::EmptySpace`], one line like every error: which `--param` values
/// narrowed the space (the likeliest cause), how many configurations there were, and the
/// most frequent prune reasons with their counts (as many as fit in
/// [`EMPTY_SPACE_REASONS_WIDTH`], at least one), then the number of configurations pruned for
/// the other reasons. A whole list of reasons would be a line of hundreds of characters.
/// `reasons` is `(reason, count)`, as `space::prune_summary` gives it.
pub fn empty_space_summary(total: usize, params: &[String], reasons: &[(String, usize)]) -> String {
    let mut s = String::new();
    if !params.is_empty() {
        s.push_str(&format!(" with --param {}", params.join(" --param ")));
    }
    s.push_str(&format!(": all {total} configurations were pruned"));
    // Equally frequent reasons come shortest first, so that more of them fit.
    let mut reasons: Vec<&(String, usize)> = reasons.iter().collect();
    reasons.sort_by_key(|(reason, n)| (std::cmp::Reverse(*n), reason.len()));
    let mut shown: Vec<String> = Vec::new();
    let mut width = 0;
    for (reason, n) in &reasons {
        let item = format!("{n} × {reason}");
        if !shown.is_empty() && width + item.len() > EMPTY_SPACE_REASONS_WIDTH {
            break;
        }
        width += item.len();
        shown.push(item);
    }
    if shown.is_empty() {
        return s;
    }
    s.push_str(&format!(": {}", shown.join("; ")));
    let rest = &reasons[shown.len()..];
    if !rest.is_empty() {
        let n: usize = rest.iter().map(|(_, n)| n).sum();
        s.push_str(&format!("; {n} × {} other reason(s)", rest.len()));
    }
    s
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_space_is_summarized_on_one_line_of_readable_length() {
        let long = "x".repeat(300);
        let reasons = vec![
            (long.clone(), 50),
            ("a long reason that ties".to_string(), 10),
            ("short".to_string(), 10),
            ("rare".to_string(), 1),
        ];
        let params = vec!["A=1".to_string(), "B=2".to_string()];
        // The first reason is given however long it is; the others are counted.
        let s = empty_space_summary(61, &params, &reasons);
        assert_eq!(
            s,
            format!(" with --param A=1 --param B=2: all 61 configurations were pruned: 50 × {long}; 21 × 3 other reason(s)")
        );
        // Short reasons are all given, ties shortest first, and nothing is left to count.
        let s = empty_space_summary(21, &[], &reasons[1..]);
        assert_eq!(
            s,
            ": all 21 configurations were pruned: 10 × short; 10 × a long reason that ties; 1 × rare"
        );
        assert!(!s.contains('\n'));
        assert_eq!(
            Error::EmptySpace(s).to_string(),
            "no configuration is left after the constraints: all 21 configurations were pruned: \
             10 × short; 10 × a long reason that ties; 1 × rare"
        );
    }
}
