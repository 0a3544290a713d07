//! The local state file: which machine ID this instance held and its high-water mark, so a
//! restart prefers the same ID and never issues below what it issued before.
//!
//! Written atomically (temp file, fsync, rename, fsync of the directory): a crash at any point
//! leaves either the previous record or the new one, never a torn file.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::StartError;

/// What the state file records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateRecord {
    /// The machine ID held.
    pub machine: u64,
    /// `static`, or the ZooKeeper root the ID was leased under (a record from another root or
    /// source is not a preference for this one).
    pub source: String,
    /// The high-water mark as an instant (ms since the Unix epoch): this holder issued, and
    /// promised to issue, only IDs of time units that end at or before it. A successor issues
    /// only in units that start at or after it.
    pub mark_ms: u64,
    /// The time field of the last issued ID (in the writer's layout), for people reading it.
    pub last_time: u64,
    /// True if written at a clean shutdown, after issuing had stopped.
    pub clean: bool,
    /// When the record was written (ms since the Unix epoch).
    pub written_ms: u64,
}

/// Reads the state file; `Ok(None)` if it does not exist yet.
pub fn read(path: &Path) -> Result<Option<StateRecord>, StartError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(state_error(path, format!("cannot read: {e}"))),
    };
    toml::from_str(&text).map(Some).map_err(|e| {
        state_error(
            path,
            format!(
                "not a vesta state file ({}); move it away to start without it",
                e.message()
            ),
        )
    })
}

/// Writes `record` atomically: a temp file beside `path`, fsync, rename over `path`, fsync of
/// the directory so the rename itself survives a power cut.
pub fn write(path: &Path, record: &StateRecord) -> Result<(), StartError> {
    let text = toml::to_string(record)
        .map_err(|e| state_error(path, format!("cannot encode the record: {e}")))?;
    let text = format!(
        "# vesta-rs machine-ID state: written atomically by the issuer, do not edit while it runs\n{text}"
    );
    let tmp = temp_path(path);
    let io = |what: &str, e: std::io::Error| state_error(path, format!("{what}: {e}"));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| io("cannot create the temp file", e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| io("cannot write the temp file", e))?;
    file.sync_all()
        .map_err(|e| io("cannot fsync the temp file", e))?;
    drop(file);
    fs::rename(&tmp, path).map_err(|e| io("cannot rename the temp file over it", e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Best effort: some filesystems cannot fsync a directory; the data itself is synced.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_owned()).unwrap_or_default();
    name.push(format!(".tmp.{}", std::process::id()));
    path.with_file_name(name)
}

fn state_error(path: &Path, message: String) -> StartError {
    StartError::StateFile {
        path: path.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> StateRecord {
        StateRecord {
            machine: 7,
            source: "/vesta/t".into(),
            mark_ms: 1_700_000_001_000,
            last_time: 279_958_400,
            clean: true,
            written_ms: 1_700_000_000_500,
        }
    }

    #[test]
    fn round_trips_and_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vesta.state");
        assert_eq!(read(&path).unwrap(), None);
        write(&path, &record()).unwrap();
        assert_eq!(read(&path).unwrap(), Some(record()));
        let newer = StateRecord {
            mark_ms: record().mark_ms + 5000,
            clean: false,
            ..record()
        };
        write(&path, &newer).unwrap();
        assert_eq!(read(&path).unwrap(), Some(newer));
        // No temp file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn garbage_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vesta.state");
        fs::write(&path, "machine = \"x\"\n").unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("vesta.state"), "{err}");
        assert!(err.contains("not a vesta state file"), "{err}");
    }
}
