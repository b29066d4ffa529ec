//! The journal of a run in progress, which `--resume` reads.

use super::record::RunInfo;
use super::run_csv::run_csv_path;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record of a run in progress: one JSON line per finished task, appended and flushed as
/// it finishes, so a crash or `kill -9` loses at most the task in flight. The first line
/// identifies the run; `--resume` reuses entries only from a journal whose first line matches.
pub struct Journal {
    file: std::fs::File,
    path: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct JournalEntry<T> {
    key: String,
    result: T,
}

/// A journal as `--resume` reads it: the entries of every usable line, in file order, and
/// the lines that are not usable.
pub struct JournalRead<T> {
    pub entries: Vec<(String, T)>,
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

impl Journal {
    /// `DIR/<op>_<shape>_<gpu>.journal.jsonl`, beside the run CSV.
    pub fn path_for(dir: &Path, info: &RunInfo) -> PathBuf {
        run_csv_path(dir, info).with_extension("journal.jsonl")
    }

    /// Opens the journal: with `resume`, keeps a matching journal and returns its entries
    /// ([`read_journal`]), with a `warning:` line on stderr for each unusable line (their tasks
    /// run again); otherwise (or when the header differs) starts a new one.
    pub fn open<T: serde::de::DeserializeOwned>(
        path: &Path,
        header: &serde_json::Value,
        resume: bool,
    ) -> Result<(Journal, Vec<(String, T)>)> {
        use std::io::Write;
        let header_line = serde_json::to_string(header).expect("serializable");
        let mut entries = Vec::new();
        let mut reused = false;
        if let Some(read) = resume.then(|| read_journal(path, &header_line)).flatten() {
            reused = true;
            entries = read.entries;
            for (line, why) in read.bad.iter().take(WARNED_LINES) {
                eprintln!(
                    "warning: {}:{line}: {why}; skipped, its task runs again",
                    path.display()
                );
            }
            if let Some((first, _)) = read.bad.get(WARNED_LINES) {
                let rest = read.bad.len() - WARNED_LINES;
                eprintln!(
                    "warning: {}: {rest} more unusable line(s) from line {first} on; skipped, \
                     their tasks run again",
                    path.display()
                );
            }
        }
        if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
        }
        let file = if reused {
            std::fs::OpenOptions::new()
                .append(true)
                .read(true)
                .open(path)
                .and_then(|mut f| {
                    // After a torn last line, start the next entry on a line of its own.
                    use std::io::{Read, Seek, SeekFrom};
                    let mut last = [0u8];
                    if f.seek(SeekFrom::End(-1)).is_ok()
                        && f.read_exact(&mut last).is_ok()
                        && last[0] != b'\n'
                    {
                        writeln!(f)?;
                    }
                    Ok(f)
                })
        } else {
            std::fs::File::create(path).and_then(|mut f| {
                writeln!(f, "{header_line}")?;
                Ok(f)
            })
        }
        .map_err(|e| Error::io("cannot write", path, e))?;
        Ok((
            Journal {
                file,
                path: path.to_path_buf(),
            },
            entries,
        ))
    }

    /// Appends one finished task and flushes it to the OS.
    pub fn append<T: Serialize>(&mut self, key: &str, result: &T) -> Result<()> {
        use std::io::Write;
        let line = serde_json::to_string(&JournalEntry {
            key: key.to_string(),
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

    #[test]
    fn unusable_lines_are_named_and_every_usable_line_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.journal.jsonl");
        let mut bytes = b"{\"h\":1}\n{\"key\":\"a\",\"result\":1}\n".to_vec();
        bytes.extend_from_slice(b"{\"key\":\"\xff\xfe\",\"result\":2}\n");
        bytes.extend_from_slice(b"{\"key\":\"b\",\"result\":3}\n\n");
        bytes.extend_from_slice(b"{\"key\":\"c\",\"result\":\"x\"}\n");
        bytes.extend_from_slice(b"{\"key\":\"d\",\"result\":4}\n{\"key\":\"e\"");
        std::fs::write(&path, &bytes).unwrap();
        let read = read_journal::<u32>(&path, "{\"h\":1}").unwrap();
        let keys: Vec<&str> = read.entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "d"]);
        let lines: Vec<usize> = read.bad.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [3, 6, 8]);
        assert_eq!(read.bad[0].1, "not UTF-8 (at byte 9)");
        assert!(
            read.bad[1].1.starts_with("not a journal entry: "),
            "{}",
            read.bad[1].1
        );
        assert!(!read.bad[1].1.contains("line 1"), "{}", read.bad[1].1);
        assert!(read.bad[2].1.starts_with("cut short"), "{}", read.bad[2].1);
        // Another run's journal is not read at all.
        assert!(read_journal::<u32>(&path, "{\"h\":2}").is_none());
    }

    #[test]
    fn journal_resumes_only_a_matching_run_and_survives_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.journal.jsonl");
        let header = serde_json::json!({"op": "transpose", "shape": "64x64"});
        let (mut j, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert!(old.is_empty());
        j.append("a", &1u32).unwrap();
        j.append("b", &2u32).unwrap();
        drop(j);
        // A process killed mid-write leaves half a line.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"key\":\"c\",\"res"))
            .unwrap();
        let (mut j, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert_eq!(old, vec![("a".to_string(), 1), ("b".to_string(), 2)]);
        j.append("c", &3u32).unwrap();
        drop(j);
        let (_, old) = Journal::open::<u32>(&path, &header, true).unwrap();
        assert_eq!(old.len(), 3, "the entry after a torn line is kept");
        // Another run's header: nothing is reused and the journal starts over.
        let other = serde_json::json!({"op": "transpose", "shape": "128x128"});
        let (_, old) = Journal::open::<u32>(&path, &other, true).unwrap();
        assert!(old.is_empty());
        // Without --resume the journal starts over too.
        let (_, old) = Journal::open::<u32>(&path, &header, false).unwrap();
        assert!(old.is_empty());
    }
}
