//! The restore guard's memory (`[segment] state_file`): for each tag, the lowest number its next
//! segment may start at — the end of the last segment this process reserved or, once it has
//! stopped issuing, the first number it did not issue (whether or not its give-back lands: a
//! give-back that timed out may still commit later, and every number it returns is unissued).
//!
//! It lives in a small TOML file beside the process, not in the database: a database restored
//! from a backup, or failed over to a replica that lagged, brings every one of its own tables
//! back with it, while this file still knows what was issued since. A fetch whose segment
//! starts below the tag's floor is rolled back and refused ([`crate::SegmentError::MovedBack`]),
//! so no number is issued twice; `vesta segment raise` moves the table past it.
//!
//! The file is rewritten (temporary file, fsync, rename, fsync of the directory) after a fetch
//! commits and before its segment is installed, so a crash can never have issued past what the
//! file says. One process holds a file at a time: an exclusive lock on `PATH.lock`, held while
//! the store is open (two processes writing one file would each drop the other's tags).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::SegmentError;

/// What the file holds.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FloorsFile {
    #[serde(default)]
    floors: BTreeMap<String, u64>,
}

const HEADER: &str = "# vesta-segment restore guard (segment.state_file): per tag, the lowest \
number its next segment\n# may start at. Written by the process that holds PATH.lock; read \
at start. Do not lower a value\n# by hand: it is what stops a restored leaf_alloc from \
issuing numbers twice.\n";

/// The floors of one store, backed by its state file.
#[derive(Debug)]
pub(crate) struct Floors {
    path: PathBuf,
    /// Held (locked) for as long as the store is open.
    _lock: File,
    /// The floors, and the last write's error (cleared by the next good write).
    state: Mutex<(BTreeMap<String, u64>, Option<String>)>,
}

impl Floors {
    /// Locks `path` for this process and reads it; a missing file is empty, an unreadable or
    /// malformed one is an error (a guard that silently forgets is no guard).
    pub(crate) fn open(path: &Path) -> Result<Floors, SegmentError> {
        let failed = |action: &str, cause: String| SegmentError::StateFile {
            path: path.to_owned(),
            action: action.into(),
            cause,
        };
        let lock_path = sibling(path, ".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| failed("opening its lock file", e.to_string()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(failed(
                    "locking it",
                    format!(
                        "{} is held by another process; each server needs its own state file",
                        lock_path.display()
                    ),
                ));
            }
            Err(fs::TryLockError::Error(e)) => return Err(failed("locking it", e.to_string())),
        }
        let floors = match fs::read_to_string(path) {
            Ok(text) => {
                toml::from_str::<FloorsFile>(&text)
                    .map_err(|e| failed("reading it", e.to_string().replace('\n', " ")))?
                    .floors
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(failed("reading it", e.to_string())),
        };
        Ok(Floors {
            path: path.to_owned(),
            _lock: lock,
            state: Mutex::new((floors, None)),
        })
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The floor of `tag` on file (0 when it has none).
    pub(crate) fn get(&self, tag: &str) -> u64 {
        self.lock().0.get(tag).copied().unwrap_or(0)
    }

    /// The last write's error, if it failed.
    pub(crate) fn error(&self) -> Option<String> {
        self.lock().1.clone()
    }

    /// [`Floors::set_all`] for one tag.
    #[cfg(test)]
    pub(crate) fn set(&self, tag: &str, floor: u64) -> Result<(), SegmentError> {
        self.set_all([(tag.to_owned(), floor)])
    }

    /// Sets the floors of tags and rewrites the file durably, once (a stop lowers every tag's
    /// floor together: one fsync, not one per tag). Blocking: call it off the async workers.
    /// On failure the floors are still kept in memory (this process's own guard) and the
    /// error is remembered for the status.
    pub(crate) fn set_all(
        &self,
        floors: impl IntoIterator<Item = (String, u64)>,
    ) -> Result<(), SegmentError> {
        let mut state = self.lock();
        state.0.extend(floors);
        let written = self.write(&state.0);
        state.1 = written.as_ref().err().map(ToString::to_string);
        written
    }

    fn write(&self, floors: &BTreeMap<String, u64>) -> Result<(), SegmentError> {
        let failed = |cause: std::io::Error| SegmentError::StateFile {
            path: self.path.clone(),
            action: "writing it".into(),
            cause: cause.to_string(),
        };
        let body = toml::to_string(&FloorsFile {
            floors: floors.clone(),
        })
        .map_err(|e| SegmentError::StateFile {
            path: self.path.clone(),
            action: "writing it".into(),
            cause: e.to_string(),
        })?;
        let tmp = sibling(&self.path, ".tmp");
        let mut file = File::create(&tmp).map_err(failed)?;
        file.write_all(HEADER.as_bytes()).map_err(failed)?;
        file.write_all(body.as_bytes()).map_err(failed)?;
        file.sync_all().map_err(failed)?;
        fs::rename(&tmp, &self.path).map_err(failed)?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The rename is durable once the directory is; not every platform can open one.
            if let Ok(dir) = File::open(dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (BTreeMap<String, u64>, Option<String>)> {
        // Each update is inserts and a write: a panic cannot leave the map half-changed.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `path` with `suffix` appended to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_survive_a_reopen_and_one_process_holds_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segments.state");
        let floors = Floors::open(&path).unwrap();
        assert_eq!(floors.get("orders"), 0);
        floors.set("orders", 2001).unwrap();
        floors.set("a:b.c-d_e", 7).unwrap();
        let again = Floors::open(&path).unwrap_err().to_string();
        assert!(
            again.contains("held by another process") && again.contains("segments.state"),
            "{again}"
        );
        drop(floors);
        let floors = Floors::open(&path).unwrap();
        assert_eq!((floors.get("orders"), floors.get("a:b.c-d_e")), (2001, 7));
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# vesta-segment restore guard"), "{text}");
    }

    #[test]
    fn a_damaged_file_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segments.state");
        fs::write(&path, "[floors]\norders = \"many\"\n").unwrap();
        let err = Floors::open(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "segment.state_file {}: reading it:",
                path.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn a_failed_write_keeps_the_floor_in_memory_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segments.state");
        let floors = Floors::open(&path).unwrap();
        // The temporary file cannot be created where a directory of that name stands.
        fs::create_dir(sibling(&path, ".tmp")).unwrap();
        assert!(floors.set("orders", 10).is_err());
        assert_eq!(floors.get("orders"), 10);
        assert!(floors.error().unwrap().contains("writing it"));
        fs::remove_dir(sibling(&path, ".tmp")).unwrap();
        floors.set("orders", 11).unwrap();
        assert_eq!(floors.error(), None);
    }
}
