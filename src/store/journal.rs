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

impl Journal {
    /// `DIR/<op>_<shape>_<gpu>.journal.jsonl`, beside the run CSV.
    pub fn path_for(dir: &Path, info: &RunInfo) -> PathBuf {
        run_csv_path(dir, info).with_extension("journal.jsonl")
    }

    /// Opens the journal: with `resume`, keeps a matching journal and returns its entries;
    /// otherwise (or when the header differs) starts a new one.
    pub fn open<T: serde::de::DeserializeOwned>(
        path: &Path,
        header: &serde_json::Value,
        resume: bool,
    ) -> Result<(Journal, Vec<(String, T)>)> {
        use std::io::{BufRead, Write};
        let header_line = serde_json::to_string(header).expect("serializable");
        let mut entries = Vec::new();
        let mut reused = false;
        if resume {
            if let Ok(f) = std::fs::File::open(path) {
                let mut lines = std::io::BufReader::new(f).lines().map_while(|l| l.ok());
                if lines.next().as_deref() == Some(header_line.as_str()) {
                    reused = true;
                    // A torn last line (killed mid-write) is skipped, never an error.
                    entries.extend(
                        lines
                            .filter_map(|l| serde_json::from_str::<JournalEntry<T>>(&l).ok())
                            .map(|e| (e.key, e.result)),
                    );
                }
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
