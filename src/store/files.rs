//! Writing result files: names made safe for file names, and writes that never leave a
//! truncated file.

use crate::error::{Error, Result};
use std::path::Path;

/// `NVIDIA H100 80GB HBM3` → `nvidia-h100-80gb-hbm3`, for file names.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    // Unique per process and per call, so concurrent writers never share a temporary file.
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{serial}.tmp", std::process::id()));
    let written = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        // On disk before the rename: after a power loss the name shows old or new, never short.
        f.sync_all()
    })();
    let result = written
        .map_err(|e| Error::io("cannot write", &tmp, e))
        .and_then(|()| {
            std::fs::rename(&tmp, path).map_err(|e| Error::io("cannot replace", path, e))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
