//! The host's record of one table's raises: `vesta-rs.seq.<store>.floors` in the host's hold
//! directory (vesta-embed's, where the machine-ID holds keep their records: `VESTA_HOLD_DIR`,
//! else `/var/lib/vesta/holds`, else `/var/tmp/vesta-rs`), named by the table's identity (the
//! store's name in `vesta_seq_store`), never by its URL. A restore of the database never
//! reaches it.
//!
//! An append-only log, one line `kind section max` per confirmed raise, written by every
//! process of this host on the table (`O_APPEND`: a line is one write) and synced before the
//! raise's numbers are handed out. Readers take the highest value per section and follow the
//! file's tail, so a process sees what the others raised when it loads a section. A line
//! without its newline (a crash mid-write) is not read: its raise handed nothing out.
//!
//! It is rewritten compacted (one line per section) when it grows past four lines per section
//! and a few thousand: to a temporary file, synced, renamed over it, under an exclusive lock on
//! `<file>.lock` that every append holds shared, so no line is written to the replaced file;
//! each process then reopens it (its inode changed).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A section's row: `(kind, section)`.
pub(crate) type Row = (i16, i64);

/// Lines beyond four per section and this many: compacted (fewer in the unit tests, whose
/// every append is a sync).
#[cfg(not(test))]
const COMPACT_SLACK: u64 = 4096;
#[cfg(test)]
const COMPACT_SLACK: u64 = 64;

const HEADER: &str = "# vesta-rs: what this host raised each section of one vesta_seq table to \
(kind section max_seq, one line per raise).\n# Read at every section load: a table below it went \
back (restored). Never lower or delete a line while a server runs.\n";

/// The file, open for appending and reading.
pub(crate) struct HostFile {
    path: PathBuf,
    lock_path: PathBuf,
    state: Mutex<State>,
}

struct State {
    file: File,
    /// The inode it was opened at: another process's compaction replaces it.
    ino: u64,
    /// How far it was read (always after a newline).
    offset: u64,
    /// Lines in it.
    lines: u64,
}

impl std::fmt::Debug for HostFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostFile({})", self.path.display())
    }
}

/// Why the file failed, naming it.
pub(crate) fn failed(path: &Path, action: &str, e: impl std::fmt::Display) -> String {
    format!("{}: {action}: {e}", path.display())
}

impl HostFile {
    /// The record of the table named `store` in `dir` (made if missing), and every raise read
    /// from it.
    pub(crate) fn open(dir: &Path, store: &str) -> Result<(HostFile, Vec<(Row, u64)>), String> {
        fs::create_dir_all(dir).map_err(|e| failed(dir, "making the directory", e))?;
        let path = dir.join(format!("vesta-rs.seq.{}.floors", file_safe(store)));
        let lock_path = path.with_extension("floors.lock");
        let (file, ino) = open_at(&path)?;
        let hf = HostFile {
            path,
            lock_path,
            state: Mutex::new(State {
                file,
                ino,
                offset: 0,
                lines: 0,
            }),
        };
        let lock = hf.lock_file()?;
        lock.lock_shared()
            .map_err(|e| failed(&hf.lock_path, "locking", e))?;
        let read = {
            let mut s = hf.state();
            read_tail(&hf.path, &mut s)
        };
        drop(lock);
        Ok((hf, read?))
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_file(&self) -> Result<File, String> {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .map_err(|e| failed(&self.lock_path, "opening", e))
    }

    /// What other processes appended since the last read (the whole file again after a
    /// compaction replaced it).
    pub(crate) fn refresh(&self) -> Result<Vec<(Row, u64)>, String> {
        let mut s = self.state();
        reopen_if_replaced(&self.path, &mut s)?;
        read_tail(&self.path, &mut s)
    }

    /// Appends the raises `rows` (each a row and its maximum) and syncs them once; what others
    /// appended meanwhile comes back too, and whether the file is due for compaction (more than
    /// four lines for each of the `sections` the caller knows).
    pub(crate) fn append(
        &self,
        rows: &[(Row, u64)],
        sections: usize,
    ) -> Result<(Vec<(Row, u64)>, bool), String> {
        let lock = self.lock_file()?;
        lock.lock_shared()
            .map_err(|e| failed(&self.lock_path, "locking", e))?;
        let mut s = self.state();
        reopen_if_replaced(&self.path, &mut s)?;
        let read = read_tail(&self.path, &mut s)?;
        let mut lines = String::new();
        for ((kind, section), max) in rows {
            lines.push_str(&format!("{kind} {section} {max}\n"));
        }
        // Appended at the end whatever the cursor; read back (with any line another process
        // appended first) by the next read, never skipped.
        s.file
            .write_all(lines.as_bytes())
            .and_then(|()| s.file.sync_data())
            .map_err(|e| failed(&self.path, "appending a raise", e))?;
        let due = s.lines > 4 * (sections as u64 + 1) + COMPACT_SLACK;
        Ok((read, due))
    }

    /// Rewrites the file with one line per section (`entries`: the caller's maxima, which
    /// include everything it read from the file; lines others appended since are kept), unless
    /// another process is appending (then the next append tries again).
    pub(crate) fn compact(&self, entries: &[(Row, u64)]) -> Result<(), String> {
        let lock = self.lock_file()?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Ok(()),
            Err(fs::TryLockError::Error(e)) => return Err(failed(&self.lock_path, "locking", e)),
        }
        let mut s = self.state();
        reopen_if_replaced(&self.path, &mut s)?;
        let mut latest: HashMap<Row, u64> = entries.iter().copied().collect();
        for (row, max) in read_tail(&self.path, &mut s)? {
            let m = latest.entry(row).or_default();
            *m = (*m).max(max);
        }
        let mut rows: Vec<(Row, u64)> = latest.into_iter().collect();
        rows.sort_unstable();
        let mut body = String::from(HEADER);
        for ((kind, section), max) in &rows {
            body.push_str(&format!("{kind} {section} {max}\n"));
        }
        let tmp = self.path.with_extension("floors.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(body.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent()
                && let Ok(d) = File::open(dir)
            {
                let _ = d.sync_all();
            }
            Ok(())
        };
        write().map_err(|e| failed(&self.path, "compacting", e))?;
        let (file, ino) = open_at(&self.path)?;
        *s = State {
            file,
            ino,
            offset: 0,
            lines: 0,
        };
        read_tail(&self.path, &mut s)?;
        Ok(())
    }
}

/// Opens `path` for appending and reading (made with the header if missing); its inode.
fn open_at(path: &Path) -> Result<(File, u64), String> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| failed(path, "opening", e))?;
    let meta = file.metadata().map_err(|e| failed(path, "reading", e))?;
    if meta.len() == 0 {
        file.write_all(HEADER.as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(|e| failed(path, "writing", e))?;
    }
    Ok((file, inode(&meta)))
}

#[cfg(unix)]
fn inode(meta: &fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

#[cfg(not(unix))]
fn inode(_: &fs::Metadata) -> u64 {
    0
}

/// Reopens the file when another process's compaction replaced it (read from the start).
fn reopen_if_replaced(path: &Path, s: &mut State) -> Result<(), String> {
    let now = match fs::metadata(path) {
        Ok(m) => inode(&m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => u64::MAX,
        Err(e) => return Err(failed(path, "reading", e)),
    };
    if now != s.ino {
        let (file, ino) = open_at(path)?;
        *s = State {
            file,
            ino,
            offset: 0,
            lines: 0,
        };
    }
    Ok(())
}

/// Reads the complete lines after `s.offset`.
fn read_tail(path: &Path, s: &mut State) -> Result<Vec<(Row, u64)>, String> {
    let mut text = Vec::new();
    s.file
        .seek(SeekFrom::Start(s.offset))
        .and_then(|_| s.file.read_to_end(&mut text))
        .map_err(|e| failed(path, "reading", e))?;
    let Some(end) = text.iter().rposition(|&b| b == b'\n') else {
        return Ok(Vec::new());
    };
    let complete = &text[..=end];
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(complete).lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        s.lines += 1;
        out.push(parse(line).ok_or_else(|| {
            failed(
                path,
                "reading",
                format!("the line {line:?} is not `kind section max_seq`: edited by hand?"),
            )
        })?);
    }
    s.offset += complete.len() as u64;
    Ok(out)
}

fn parse(line: &str) -> Option<(Row, u64)> {
    let mut words = line.split_whitespace();
    let kind = words.next()?.parse().ok()?;
    let section = words.next()?.parse().ok()?;
    let max = words.next()?.parse().ok()?;
    words.next().is_none().then_some(((kind, section), max))
}

/// A store's name as a file name: what the table drew (hex) stays, anything else is replaced.
fn file_safe(store: &str) -> String {
    store
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maxima(read: &[(Row, u64)]) -> HashMap<Row, u64> {
        let mut m = HashMap::new();
        for &(row, max) in read {
            let e = m.entry(row).or_insert(0);
            *e = max.max(*e);
        }
        m
    }

    #[test]
    fn raises_are_read_back_by_another_process_and_a_torn_line_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (a, read) = HostFile::open(dir.path(), "abc").unwrap();
        assert!(read.is_empty());
        let (b, _) = HostFile::open(dir.path(), "abc").unwrap();
        a.append(&[((0, 5), 1000)], 1).unwrap();
        a.append(&[((0, 5), 2000)], 1).unwrap();
        a.append(&[((1, 7), 10)], 2).unwrap();
        let seen = maxima(&b.refresh().unwrap());
        assert_eq!(seen[&(0, 5)], 2000);
        assert_eq!(seen[&(1, 7)], 10);
        // A crash mid-write: a line without its newline is not read.
        let mut f = OpenOptions::new().append(true).open(a.path()).unwrap();
        f.write_all(b"0 5 99999").unwrap();
        assert!(b.refresh().unwrap().is_empty());
        let (c, read) = HostFile::open(dir.path(), "abc").unwrap();
        assert_eq!(maxima(&read)[&(0, 5)], 2000);
        // Another table's file is another file.
        let (_, other) = HostFile::open(dir.path(), "xyz").unwrap();
        assert!(other.is_empty());
        drop(c);
        std::fs::write(a.path(), "0 5 ten\n").unwrap();
        let err = HostFile::open(dir.path(), "abc").err().unwrap();
        assert!(err.contains("is not `kind section max_seq`"), "{err}");
    }

    #[test]
    fn a_long_log_is_compacted_and_others_follow_the_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = HostFile::open(dir.path(), "s").unwrap();
        let (b, _) = HostFile::open(dir.path(), "s").unwrap();
        let mut known: HashMap<Row, u64> = HashMap::new();
        for i in 1..=(COMPACT_SLACK + 50) {
            let row = (0, (i % 3) as i64);
            known.insert(row, i);
            let (_, due) = a.append(&[(row, i)], known.len()).unwrap();
            if due {
                let all: Vec<(Row, u64)> = known.iter().map(|(r, m)| (*r, *m)).collect();
                a.compact(&all).unwrap();
            }
        }
        let text = std::fs::read_to_string(a.path()).unwrap();
        assert!(
            text.lines().count() < 100,
            "not compacted: {} lines",
            text.lines().count()
        );
        b.append(&[((1, 9), 5)], 1).unwrap();
        let seen = maxima(&HostFile::open(dir.path(), "s").unwrap().1);
        assert_eq!(
            seen[&(1, 9)],
            5,
            "an append after another's compaction was lost"
        );
        assert_eq!(seen[&(0, 0)], COMPACT_SLACK + 50 - (COMPACT_SLACK + 50) % 3);
    }
}
