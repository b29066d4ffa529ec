//! Writing result files: names made safe for file names, and one way to write a file that
//! never leaves a truncated file and never replaces what the name is (a link, a device).

use crate::error::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

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

/// Where a file about to be replaced or cleared is kept first: `NAME.bak`, or where that
/// exists already `NAME.bak.1`, `NAME.bak.2`, ..., so no earlier copy is ever overwritten.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".bak");
    let mut candidate = path.with_file_name(&name);
    let mut n = 0u32;
    while candidate.symlink_metadata().is_ok() {
        n += 1;
        let mut numbered = name.clone();
        numbered.push(format!(".{n}"));
        candidate = path.with_file_name(numbered);
    }
    candidate
}

/// Checks that `dir`, a folder the command is to write into (given as `flag`), is one or can
/// be made one: bad input, said before any work, when a file stands at it or anywhere along
/// its path, or when it is a link to a folder that is not there.
pub fn check_output_folder(flag: &str, dir: &Path) -> Result<()> {
    if dir
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
        && !dir.exists()
    {
        let target = std::fs::read_link(dir).unwrap_or_default();
        return Err(Error::Usage(format!(
            "{flag} {}: a link to {}, which does not exist",
            dir.display(),
            target.display()
        )));
    }
    // The deepest part of the path that exists must be a folder.
    let existing = dir
        .ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .find(|p| p.exists());
    match existing {
        Some(file) if !file.is_dir() && file == dir => Err(Error::Usage(format!(
            "{flag} {}: is a file, not a folder",
            dir.display()
        ))),
        Some(file) if !file.is_dir() => Err(Error::Usage(format!(
            "{flag} {}: {} is a file, not a folder",
            dir.display(),
            file.display()
        ))),
        // A folder this process may not write into (or create folders in) fails the first
        // write, after the work: said now instead.
        Some(folder) => writable(folder).map_err(|e| {
            Error::Usage(format!(
                "{flag} {}: cannot write into {}: {e}",
                dir.display(),
                folder.display()
            ))
        }),
        None => Ok(()),
    }
}

/// Whether this process may create files in the folder `dir` (the system's own answer, for
/// this user, root included).
fn writable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call; access only reads it.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Refuses `output` (given as `flag`) where it is one of the files the command reads
/// (`inputs`, each with its flag): the same file by any name or link, since writing it would
/// replace what it was made from. Bad input, said before any work.
pub fn check_not_an_input(flag: &str, output: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    // A file's identity is its device and inode, whatever names and links lead to it.
    let id = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| (m.dev(), m.ino()))
    };
    if is_stdout(output) {
        return Ok(());
    }
    let Some(out) = id(output) else {
        return Ok(());
    };
    match inputs.iter().find(|(_, p)| id(p) == Some(out)) {
        Some((input_flag, p)) => Err(Error::Usage(format!(
            "{flag} {} is the file {input_flag} {} reads: writing it would replace it; pick \
             another path",
            output.display(),
            p.display()
        ))),
        None => Ok(()),
    }
}

/// Prints `text` on standard output, where summaries go: a reader that stopped reading
/// (`tune merge ... | head`) or a failing standard output never panics or stops the command,
/// whose results are in files (`print!` panics on both, mid-merge or mid-sweep).
pub fn print_out(text: impl std::fmt::Display) {
    let _ = write!(std::io::stdout().lock(), "{text}");
}

/// The name that means standard output where a command takes an output file (`--output -`).
pub const STDOUT: &str = "-";

/// True when `path` is [`STDOUT`].
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == STDOUT
}

/// Keeps the file at `path` as its next free backup ([`backup_path`]) when a writer is about
/// to replace it with one that lacks `dropped` of its `what` (`Some(0)`: nothing is lost and
/// no copy is kept; `None`: it could not be read back, so whatever it holds is kept), and
/// says so on stderr.
pub fn keep_dropped(path: &Path, dropped: Option<usize>, what: &str) -> Result<()> {
    let why = match dropped {
        Some(0) => return Ok(()),
        Some(n) => format!("holds {n} {what}"),
        None => "could not be read back".to_string(),
    };
    let backup = backup_path(path);
    std::fs::copy(path, &backup).map_err(|e| Error::io("cannot copy", path, e))?;
    eprintln!(
        "note: {} {why}: kept as {}",
        path.display(),
        backup.display()
    );
    Ok(())
}

/// Writes `bytes` to `path`: every result file and every file a user names for output
/// (`--output`) is written through here. What happens depends on what `path` is:
///
/// - absent, or a regular file: written to a temporary file in the same folder, synced, and
///   renamed over it, so a reader or a crash sees the old contents or the new, never a part.
///   A replaced file keeps its permissions. Missing folders are created.
/// - a symbolic link (or a chain of them): the file it points to is written the same way, in
///   that file's folder, and the link stays a link.
/// - a character or block device, a FIFO or a socket (`/dev/null`, `/dev/stdout`, a named
///   pipe): opened and written in place, never replaced; a failed write (`/dev/full`) is an
///   error.
/// - [`STDOUT`] (`-`), or a name of this process's standard output (`/dev/stdout`,
///   `/dev/fd/1`, `/proc/self/fd/1`): standard output, as it is open (a file it was redirected
///   to with `>>` is appended to, never replaced or truncated); the same for standard error.
/// - a name of another open file descriptor (`/dev/fd/N`, `/proc/PID/fd/N`): appended to in
///   place, never replaced.
/// - a folder: an error.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let descriptor = if is_stdout(path) {
        Some(Descriptor::Stdout)
    } else {
        descriptor_of(path)
    };
    match descriptor {
        Some(Descriptor::Stdout) => {
            let mut out = std::io::stdout().lock();
            return match out.write_all(bytes).and_then(|_| out.flush()) {
                // The reader stopped reading (`| head`): it has what it wanted.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.map_err(|e| Error::io("cannot write", "<stdout>", e)),
            };
        }
        Some(Descriptor::Stderr) => {
            let mut err = std::io::stderr().lock();
            return err
                .write_all(bytes)
                .and_then(|_| err.flush())
                .map_err(|e| Error::io("cannot write", "<stderr>", e));
        }
        Some(Descriptor::Other) => {
            return std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(bytes).and_then(|_| f.flush()))
                .map_err(|e| Error::io("cannot write", path, e));
        }
        None => {}
    }
    // What the name is after every link, as the system resolves it (the links of /proc and
    // /dev/stdout included).
    match std::fs::metadata(path) {
        // Absent, or a link to nothing yet: created where the links point.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let target = resolve_links(path).map_err(|e| Error::io("cannot write", path, e))?;
            replace(&target, bytes, None)
        }
        Err(e) => Err(Error::io("cannot write", path, e)),
        Ok(m) if m.is_file() => {
            let is_link = std::fs::symlink_metadata(path).is_ok_and(|l| l.file_type().is_symlink());
            let target = match is_link {
                true => {
                    std::fs::canonicalize(path).map_err(|e| Error::io("cannot write", path, e))?
                }
                false => path.to_path_buf(),
            };
            replace(&target, bytes, Some(m.permissions()))
        }
        Ok(m) if m.is_dir() => Err(Error::Usage(format!(
            "cannot write {}: it is a folder, not a file",
            path.display()
        ))),
        // Devices, FIFOs and sockets are written, never renamed over.
        Ok(_) => std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(bytes).and_then(|_| f.flush()))
            .map_err(|e| Error::io("cannot write", path, e)),
    }
}

/// An open file descriptor that a path names.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Descriptor {
    Stdout,
    Stderr,
    Other,
}

/// Which open file descriptor `path` names, if its chain of links passes through one
/// (`/dev/stdout` is a link to `/proc/self/fd/1`, which links to whatever standard output is
/// open on: a file renamed over through it would replace the file a shell redirected to,
/// a Slurm job's log among them). `None` for every other path.
fn descriptor_of(path: &Path) -> Option<Descriptor> {
    const MAX_LINKS: usize = 40;
    let own = [
        format!("/proc/{}/fd/", std::process::id()),
        "/proc/self/fd/".to_string(),
        "/proc/thread-self/fd/".to_string(),
        "/dev/fd/".to_string(),
    ];
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let text = at.to_string_lossy();
        let named = match text.as_ref() {
            "/dev/stdout" => Some(Descriptor::Stdout),
            "/dev/stderr" => Some(Descriptor::Stderr),
            t => own
                .iter()
                .find_map(|p| t.strip_prefix(p.as_str()))
                .map(|fd| match fd {
                    "1" => Descriptor::Stdout,
                    "2" => Descriptor::Stderr,
                    _ => Descriptor::Other,
                })
                .or_else(|| {
                    // Another process's descriptor.
                    let rest = t.strip_prefix("/proc/")?;
                    let (_, fd) = rest.split_once("/fd/")?;
                    (!fd.is_empty() && !fd.contains('/')).then_some(Descriptor::Other)
                }),
        };
        if named.is_some() {
            return named;
        }
        let to = std::fs::read_link(&at).ok()?;
        at = match at.parent() {
            Some(dir) if to.is_relative() => dir.join(to),
            _ => to,
        };
    }
    None
}

/// Where a chain of symbolic links at `path` that ends at nothing points (`path` itself when
/// it is not a link). A relative link is read from the link's own folder, as the system does.
fn resolve_links(path: &Path) -> std::io::Result<PathBuf> {
    // The system's own limit on links followed in one lookup (Linux's MAXSYMLINKS).
    const MAX_LINKS: usize = 40;
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at)?;
                at = match at.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// Writes `bytes` to a temporary file in `path`'s folder and renames it over `path` (a
/// regular file or nothing); `keep` is the permissions of the file replaced.
fn replace(path: &Path, bytes: &[u8], keep: Option<std::fs::Permissions>) -> Result<()> {
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
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        if let Some(perm) = keep {
            f.set_permissions(perm)?;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn backups_never_overwrite_an_earlier_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("best.csv");
        assert_eq!(backup_path(&file), dir.path().join("best.csv.bak"));
        std::fs::write(dir.path().join("best.csv.bak"), "1").unwrap();
        assert_eq!(backup_path(&file), dir.path().join("best.csv.bak.1"));
        std::fs::write(dir.path().join("best.csv.bak.1"), "2").unwrap();
        assert_eq!(backup_path(&file), dir.path().join("best.csv.bak.2"));
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn a_regular_file_is_replaced_and_keeps_its_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.json");
        write_atomic(&path, b"one").unwrap();
        assert_eq!(read(&path), "one");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(read(&path), "two");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub")).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn a_chain_of_links_stays_and_its_end_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("data/real.csv");
        std::fs::create_dir_all(real.parent().unwrap()).unwrap();
        std::fs::write(&real, "old").unwrap();
        // out.csv -> hop.csv -> data/real.csv, both links relative to their own folders.
        symlink("data/real.csv", dir.path().join("hop.csv")).unwrap();
        symlink("hop.csv", dir.path().join("out.csv")).unwrap();
        write_atomic(&dir.path().join("out.csv"), b"new").unwrap();
        assert_eq!(read(&real), "new");
        for link in ["out.csv", "hop.csv"] {
            let m = std::fs::symlink_metadata(dir.path().join(link)).unwrap();
            assert!(m.file_type().is_symlink(), "{link} is still a link");
        }
    }

    #[test]
    fn a_dangling_link_gets_its_target_created() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("out.html");
        symlink(dir.path().join("made/report.html"), &link).unwrap();
        write_atomic(&link, b"<html>").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(read(&dir.path().join("made/report.html")), "<html>");
    }

    #[test]
    fn a_loop_of_links_and_a_folder_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        symlink(&b, &a).unwrap();
        symlink(&a, &b).unwrap();
        let e = write_atomic(&a, b"x").unwrap_err().to_string();
        assert!(
            e.to_lowercase()
                .contains("too many levels of symbolic links"),
            "{e}"
        );
        assert!(std::fs::symlink_metadata(&a)
            .unwrap()
            .file_type()
            .is_symlink());
        let e = write_atomic(dir.path(), b"x").unwrap_err();
        assert!(e.to_string().contains("it is a folder"), "{e}");
        assert_eq!(e.exit_code(), 2);
        assert!(dir.path().is_dir());
    }
}
