//! The journal of a run in progress, which `--resume` reads.

use super::record::RunInfo;
use super::run_csv::run_csv_path;
use crate::error::{Error, Result};
use crate::model::limits::LaunchDims;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// A launch's grid or block size.
type Dim3 = (u32, u32, u32);

/// What identifies a task's result across runs: the key of its journal entry, so a resumed
/// run reuses a result only for the same compiled code launched the same way.
///
/// Its text ([`fmt::Display`], read back by [`JournalKey::parse`]) is what journals hold, the
/// same as they always have:
/// * a variant: `SOURCE (gx, gy, gz) (bx, by, bz)`, then ` shared BYTES` where the launch asks
///   for dynamic shared memory (journals written before it existed keep their keys), then
///   ` after KERNEL (gx, gy, gz) (bx, by, bz)` for each prologue launch;
/// * a baseline: `baseline NAME SOURCE` (`SOURCE` empty for baselines that need no compiled
///   source).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JournalKey {
    Variant {
        /// The compiler's cache key of the variant's source
        /// ([`crate::cuda::compile::Compiler::key`]).
        source: String,
        grid: Dim3,
        block: Dim3,
        /// Bytes of dynamic shared memory (0: none).
        shared: u32,
        /// The prologue launches before it: kernel, grid, block.
        prologue: Vec<(String, Dim3, Dim3)>,
    },
    Baseline {
        name: String,
        /// The cache key of the baselines' source (empty without one).
        source: String,
    },
}

impl JournalKey {
    /// A variant's key: its source's cache key, its launch and its prologue launches.
    pub fn variant(source: String, launch: &LaunchDims, prologue: &[(String, LaunchDims)]) -> Self {
        JournalKey::Variant {
            source,
            grid: launch.grid,
            block: launch.block,
            shared: launch.shared,
            prologue: prologue
                .iter()
                .map(|(kernel, d)| (kernel.clone(), d.grid, d.block))
                .collect(),
        }
    }

    /// The cache key of the compiled source the task ran (best.csv's `source_hash`).
    pub fn source(&self) -> &str {
        match self {
            JournalKey::Variant { source, .. } | JournalKey::Baseline { source, .. } => source,
        }
    }

    /// The key whose text is exactly `text`, if any (the inverse of its `Display`).
    pub fn parse(text: &str) -> Option<JournalKey> {
        let key = match text.strip_prefix("baseline ") {
            Some(rest) => {
                let (name, source) = rest.rsplit_once(' ')?;
                JournalKey::Baseline {
                    name: name.to_string(),
                    source: source.to_string(),
                }
            }
            None => {
                let (source, rest) = text.split_once(' ')?;
                let (grid, rest) = dim3(rest)?;
                let (block, mut rest) = dim3(rest.strip_prefix(' ')?)?;
                let mut shared = 0;
                if let Some(r) = rest.strip_prefix(" shared ") {
                    let end = r.find(' ').unwrap_or(r.len());
                    shared = r[..end].parse().ok()?;
                    rest = &r[end..];
                }
                let mut prologue = Vec::new();
                while let Some(r) = rest.strip_prefix(" after ") {
                    let (kernel, r) = r.split_once(' ')?;
                    let (g, r) = dim3(r)?;
                    let (b, r) = dim3(r.strip_prefix(' ')?)?;
                    prologue.push((kernel.to_string(), g, b));
                    rest = r;
                }
                if !rest.is_empty() {
                    return None;
                }
                JournalKey::Variant {
                    source: source.to_string(),
                    grid,
                    block,
                    shared,
                    prologue,
                }
            }
        };
        // Only the one text of each key: anything else would match no task of a run.
        (key.to_string() == text).then_some(key)
    }
}

/// `(x, y, z)` at the start of `text`, and the rest.
fn dim3(text: &str) -> Option<(Dim3, &str)> {
    let (inside, rest) = text.strip_prefix('(')?.split_once(')')?;
    let mut parts = inside.split(", ").map(|p| p.parse::<u32>().ok());
    let d = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some((d, rest))
}

impl fmt::Display for JournalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalKey::Variant {
                source,
                grid,
                block,
                shared,
                prologue,
            } => {
                write!(f, "{source} {grid:?} {block:?}")?;
                if *shared > 0 {
                    write!(f, " shared {shared}")?;
                }
                for (kernel, g, b) in prologue {
                    write!(f, " after {kernel} {g:?} {b:?}")?;
                }
                Ok(())
            }
            JournalKey::Baseline { name, source } => write!(f, "baseline {name} {source}"),
        }
    }
}

impl Serialize for JournalKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for JournalKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        JournalKey::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("not a task key: '{text}'")))
    }
}

/// The record of a run in progress: one JSON line per finished task, appended and flushed as
/// it finishes, so a crash or `kill -9` loses at most the task in flight. The first line
/// identifies the run; `--resume` reuses entries only from a journal whose first line matches.
pub struct Journal {
    file: std::fs::File,
    path: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct JournalEntry<T> {
    key: JournalKey,
    result: T,
}

/// A journal as `--resume` reads it: the entries of every usable line, in file order, and
/// the lines that are not usable.
pub struct JournalRead<T> {
    pub entries: Vec<(JournalKey, T)>,
    /// `(line number from 1, why)` of each line that is not UTF-8 or not an entry: a line cut
    /// short by a kill during a write, or damaged.
    pub bad: Vec<(usize, String)>,
}

/// At most this many unusable journal lines get a warning line each; the rest are counted on
/// one more line.
const WARNED_LINES: usize = 10;

/// Reads the journal at `path` when its first line is `header_line`: every later line that
/// parses is an entry, whatever lines around it are unusable. `None` when the file cannot be
/// read or belongs to another run.
pub fn read_journal<T: serde::de::DeserializeOwned>(
    path: &Path,
    header_line: &str,
) -> Option<JournalRead<T>> {
    let bytes = std::fs::read(path).ok()?;
    let mut lines = bytes.split(|b| *b == b'\n');
    if lines.next()? != header_line.as_bytes() {
        return None;
    }
    let torn = !bytes.ends_with(b"\n");
    let mut read = JournalRead {
        entries: Vec::new(),
        bad: Vec::new(),
    };
    let mut lines = lines.enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let number = i + 2;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let last = lines.peek().is_none();
        let why = match std::str::from_utf8(line) {
            Err(e) => format!("not UTF-8 (at byte {})", e.valid_up_to() + 1),
            Ok(text) => match serde_json::from_str::<JournalEntry<T>>(text) {
                Ok(e) => {
                    read.entries.push((e.key, e.result));
                    continue;
                }
                Err(_) if last && torn => "cut short (the run stopped while writing it)".into(),
                // Each line is parsed alone, so serde's "line 1" says nothing.
                Err(e) => format!(
                    "not a journal entry: {}",
                    e.to_string().replace(" at line 1 column ", " at column ")
                ),
            },
        };
        read.bad.push((number, why));
    }
    Some(read)
}

/// A `warning:` line on stderr for each of the first [`WARNED_LINES`] unusable lines of a
/// resumed journal, and one for the rest.
fn warn_unusable(path: &Path, bad: &[(usize, String)]) {
    for (line, why) in bad.iter().take(WARNED_LINES) {
        eprintln!(
            "warning: {}:{line}: {why}; skipped, its task runs again",
            path.display()
        );
    }
    if let Some((first, _)) = bad.get(WARNED_LINES) {
        let rest = bad.len() - WARNED_LINES;
        eprintln!(
            "warning: {}: {rest} more unusable line(s) from line {first} on; skipped, their \
             tasks run again",
            path.display()
        );
    }
}

/// What differs between the header of the journal at `path` and this run's `header`, for
/// the warning that sets the journal aside: `reps 20 there, 30 here`, each differing field.
fn header_difference(path: &Path, header: &serde_json::Value) -> String {
    let first = std::fs::read(path).ok().and_then(|bytes| {
        let line = bytes.split(|b| *b == b'\n').next()?.to_vec();
        serde_json::from_slice::<serde_json::Value>(&line).ok()
    });
    let (Some(serde_json::Value::Object(there)), serde_json::Value::Object(here)) = (first, header)
    else {
        return "its first line is not a journal header".into();
    };
    let none = serde_json::Value::Null;
    let mut fields: Vec<&String> = here.keys().chain(there.keys()).collect();
    fields.sort();
    fields.dedup();
    let differ: Vec<String> = fields
        .into_iter()
        .filter_map(|k| {
            let (a, b) = (there.get(k).unwrap_or(&none), here.get(k).unwrap_or(&none));
            (a != b).then(|| format!("{k} {a} there, {b} here"))
        })
        .collect();
    if differ.is_empty() {
        "its header is written differently".into()
    } else {
        differ.join("; ")
    }
}

impl Journal {
    /// `DIR/<op>_<shape>_<gpu>.journal.jsonl`, beside the run CSV.
    pub fn path_for(dir: &Path, info: &RunInfo) -> PathBuf {
        run_csv_path(dir, info).with_extension("journal.jsonl")
    }

    /// Opens the journal: with `resume`, keeps a matching journal and returns its entries
    /// ([`read_journal`]), with a `warning:` line on stderr for each unusable line (their tasks
    /// run again); otherwise starts a new one. A journal of a run with other settings is not
    /// thrown away under `--resume`: it is kept as `JOURNAL.bak` (or `.bak.N`) with a warning
    /// that names what differs, and the run starts over.
    ///
    /// The journal stays locked (an advisory lock on the file) while it is open: a second run
    /// of the same op, shape and GPU into the same folder is refused instead of interleaving
    /// its lines with this run's.
    pub fn open<T: serde::de::DeserializeOwned>(
        path: &Path,
        header: &serde_json::Value,
        resume: bool,
    ) -> Result<(Journal, Vec<(JournalKey, T)>)> {
        use std::io::{Read, Seek, SeekFrom, Write};
        let header_line = serde_json::to_string(header).expect("serializable");
        if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
        }
        // Opened without truncating: what is there is only cleared once the lock is held.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("cannot write", path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Usage(format!(
                    "{}: another tune is running the same op, shape and GPU into this folder \
                     (its journal is locked); wait for it to end, or give this run another --out",
                    path.display()
                )))
            }
            // A file system without locks: the journal works as before, unguarded.
            Err(std::fs::TryLockError::Error(_)) => {}
        }
        let mut entries = Vec::new();
        let mut reused = false;
        if resume {
            if let Some(read) = read_journal(path, &header_line) {
                reused = true;
                entries = read.entries;
                warn_unusable(path, &read.bad);
            } else if file.metadata().is_ok_and(|m| m.len() > 0) {
                let backup = super::files::backup_path(path);
                std::fs::copy(path, &backup).map_err(|e| Error::io("cannot copy", path, e))?;
                eprintln!(
                    "warning: {} is the journal of a run with other settings ({}): kept as {}; \
                     this run starts over",
                    path.display(),
                    header_difference(path, header),
                    backup.display()
                );
            }
        }
        let ready = if reused {
            // After a torn last line, start the next entry on a line of its own.
            let mut last = [0u8];
            file.seek(SeekFrom::End(-1))
                .and_then(|_| file.read_exact(&mut last))
                .and_then(|()| {
                    file.seek(SeekFrom::End(0))?;
                    if last[0] != b'\n' {
                        writeln!(file)?;
                    }
                    Ok(())
                })
        } else {
            file.set_len(0)
                .and_then(|()| file.seek(SeekFrom::Start(0)))
                .and_then(|_| writeln!(file, "{header_line}"))
        };
        ready.map_err(|e| Error::io("cannot write", path, e))?;
        Ok((
            Journal {
                file,
                path: path.to_path_buf(),
            },
            entries,
        ))
    }

    /// Appends one finished task and flushes it to the OS.
    pub fn append<T: Serialize>(&mut self, key: &JournalKey, result: &T) -> Result<()> {
        use std::io::Write;
        let line = serde_json::to_string(&JournalEntry {
            key: key.clone(),
            result,
        })
        .expect("serializable");
        writeln!(self.file, "{line}")
            .and_then(|_| self.file.flush())
            .map_err(|e| Error::io("cannot append to", &self.path, e))
    }
}

#[cfg(test)]
mod journal_tests {
    use super::*;

    /// The key of a baseline without a compiled source: `baseline NAME ` as text.
    fn key(name: &str) -> JournalKey {
        JournalKey::Baseline {
            name: name.into(),
            source: String::new(),
        }
    }

    const HASH: &str = "1612f007e82c9076adc9614ba55b396a571210dc805c8644b569ece97efb219c";

    fn dims(grid: Dim3, block: Dim3, shared: u32) -> LaunchDims {
        LaunchDims {
            grid,
            block,
            shared,
        }
    }

    /// Keys written by earlier runs read back as the same key, and the key of a task is
    /// written as it always was, so their journals resume.
    #[test]
    fn keys_have_one_text_that_reads_back() {
        let repack = vec![(
            "sgemm_repack".to_string(),
            dims((2, 1113, 1), (128, 1, 1), 0),
        )];
        let cases = [
            (
                JournalKey::variant(HASH.into(), &dims((32, 32, 1), (32, 8, 1), 0), &[]),
                format!("{HASH} (32, 32, 1) (32, 8, 1)"),
            ),
            (
                JournalKey::variant(HASH.into(), &dims((9, 8, 1), (256, 1, 1), 50688), &[]),
                format!("{HASH} (9, 8, 1) (256, 1, 1) shared 50688"),
            ),
            (
                JournalKey::variant(HASH.into(), &dims((9, 11, 1), (128, 1, 1), 0), &repack),
                format!(
                    "{HASH} (9, 11, 1) (128, 1, 1) after sgemm_repack (2, 1113, 1) (128, 1, 1)"
                ),
            ),
            (
                JournalKey::variant(HASH.into(), &dims((5, 11, 1), (256, 1, 1), 61440), &repack),
                format!(
                    "{HASH} (5, 11, 1) (256, 1, 1) shared 61440 after sgemm_repack \
                     (2, 1113, 1) (128, 1, 1)"
                ),
            ),
            (
                JournalKey::Baseline {
                    name: "copy_vec4".into(),
                    source: HASH.into(),
                },
                format!("baseline copy_vec4 {HASH}"),
            ),
            (key("memcpy"), "baseline memcpy ".to_string()),
        ];
        for (key, text) in cases {
            assert_eq!(key.to_string(), text);
            assert_eq!(JournalKey::parse(&text), Some(key.clone()), "{text}");
            let json = serde_json::to_string(&key).unwrap();
            assert_eq!(json, serde_json::to_string(&text).unwrap());
            assert_eq!(serde_json::from_str::<JournalKey>(&json).unwrap(), key);
        }
        assert_eq!(
            JournalKey::variant(HASH.into(), &dims((1, 1, 1), (1, 1, 1), 0), &[]).source(),
            HASH
        );
        // Texts no task has: each would match nothing, so none is a key.
        for text in [
            "",
            "a",
            HASH,
            &format!("{HASH} (32, 32, 1)"),
            &format!("{HASH} (32, 32, 1) (32, 8, 1) "),
            &format!("{HASH} (32,32,1) (32, 8, 1)"),
            &format!("{HASH} (32, 32) (32, 8, 1)"),
            &format!("{HASH} (32, 32, 1, 1) (32, 8, 1)"),
            &format!("{HASH} (32, 32, 1) (32, 8, 1) shared 0"),
            &format!("{HASH} (32, 32, 1) (32, 8, 1) shared 012"),
            &format!("{HASH} (32, 32, 1) (32, 8, 1) shared x"),
            &format!("{HASH} (32, 32, 1) (32, 8, 1) after k (1, 1, 1)"),
            &format!("{HASH} (-1, 32, 1) (32, 8, 1)"),
            "baseline",
            "baseline memcpy",
        ] {
            assert_eq!(JournalKey::parse(text), None, "{text}");
        }
    }

    #[test]
    fn unusable_lines_are_named_and_every_usable_line_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.journal.jsonl");
        let mut bytes = b"{\"h\":1}\n{\"key\":\"baseline a \",\"result\":1}\n".to_vec();
        bytes.extend_from_slice(b"{\"key\":\"\xff\xfe\",\"result\":2}\n");
        bytes.extend_from_slice(b"{\"key\":\"baseline b \",\"result\":3}\n\n");
        bytes.extend_from_slice(b"{\"key\":\"baseline c \",\"result\":\"x\"}\n");
        bytes.extend_from_slice(b"{\"key\":\"no task\",\"result\":5}\n");
        bytes.extend_from_slice(b"{\"key\":\"baseline d \",\"result\":4}\n{\"key\":\"e\"");
        std::fs::write(&path, &bytes).unwrap();
        let read = read_journal::<u32>(&path, "{\"h\":1}").unwrap();
        let keys: Vec<JournalKey> = read.entries.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, [key("a"), key("b"), key("d")]);
        let lines: Vec<usize> = read.bad.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [3, 6, 7, 9]);
        assert_eq!(read.bad[0].1, "not UTF-8 (at byte 9)");
        assert!(
            read.bad[1].1.starts_with("not a journal entry: "),
            "{}",
            read.bad[1].1
        );
        assert!(!read.bad[1].1.contains("line 1"), "{}", read.bad[1].1);
        assert!(
            read.bad[2].1.contains("not a task key: 'no task'"),
            "{}",
            read.bad[2].1
        );
        assert!(read.bad[3].1.starts_with("cut short"), "{}", read.bad[3].1);
        // Another run's journal is not read at all.
        assert!(read_journal::<u32>(&path, "{\"h\":2}").is_none());
    }

    /// While one run holds its journal open, a second run of the same key is refused, and
    /// the journal is left as the first run writes it.
    #[test]
    fn a_journal_in_use_is_not_opened_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.journal.jsonl");
        let header = serde_json::json!({"op": "transpose", "shape": "64x64"});
        let (mut first, _) = Journal::open::<u32>(&path, &header, false).unwrap();
        first.append(&key("a"), &1u32).unwrap();
        for resume in [false, true] {
            let Err(e) = Journal::open::<u32>(&path, &header, resume) else {
                panic!("a second open of a journal in use succeeded");
            };
            assert!(matches!(e, Error::Usage(_)), "{e}");
            assert!(e.to_string().contains("another tune is running"), "{e}");
        }
        first.append(&key("b"), &2u32).unwrap();
        drop(first);
        let (_, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert_eq!(old, vec![(key("a"), 1), (key("b"), 2)]);
    }

    #[test]
    fn journal_resumes_only_a_matching_run_and_survives_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.journal.jsonl");
        let header = serde_json::json!({"op": "transpose", "shape": "64x64"});
        let (mut j, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert!(old.is_empty());
        j.append(&key("a"), &1u32).unwrap();
        j.append(&key("b"), &2u32).unwrap();
        drop(j);
        // A process killed mid-write leaves half a line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"key\":\"c\",\"res"))
            .unwrap();
        let (mut j, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert_eq!(old, vec![(key("a"), 1), (key("b"), 2)]);
        j.append(&key("c"), &3u32).unwrap();
        drop(j);
        let (_, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert_eq!(old.len(), 3, "the entry after a torn line is kept");
        // Another run's header: nothing is reused and the journal starts over, but what it
        // held is kept beside it.
        let before = std::fs::read(&path).unwrap();
        let other = serde_json::json!({"op": "transpose", "shape": "128x128"});
        let (_, old) = Journal::open::<u32>(&path, &other, true).unwrap();
        assert!(old.is_empty());
        assert_eq!(
            std::fs::read(dir.path().join("run.journal.jsonl.bak")).unwrap(),
            before
        );
        assert_eq!(
            header_difference(&dir.path().join("run.journal.jsonl.bak"), &other),
            "shape \"64x64\" there, \"128x128\" here"
        );
        // Without --resume the journal starts over too.
        let (_, old) = Journal::open::<u32>(&path, &header, false).unwrap();
        assert!(old.is_empty());
    }
}
