//! The local state file: which machine ID this instance held and its high-water mark, so a
//! restart prefers the same ID and never issues below what it issued before.
//!
//! Written atomically (temp file, fsync, rename, fsync of the directory): a crash at any point
//! leaves either the previous record or the new one, never a torn file. A path that is a
//! symlink is written at its target, so it stays a symlink.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use vesta_core::Position;

use super::counted_in::CountedIn;
use super::rules::Promise;
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
    /// A clean stop's exact position: the seq of the last ID issued in `last_time` (the
    /// layout's largest seq when none was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// True if written at a clean shutdown, after issuing had stopped.
    pub clean: bool,
    /// When the record was written (ms since the Unix epoch).
    pub written_ms: u64,
    /// The time, seq and node fields and the unit the mark was counted in (files written
    /// before marks carried it have none, and are rewritten with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,
    /// The epoch the mark was counted from (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_ms: Option<u64>,
    /// The bits every ID of the writer carries, `0xMASK/0xVALUE` (fixed fields, genMethod):
    /// a mark of IDs that differ in one of them never refuses a start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
    /// A clean stop's token, also left in the host's hold of the machine ID: while both agree,
    /// no one issued with the ID since this record (see `hold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_stop: Option<String>,
    /// The file's identity, made with it and kept across rewrites: a process on a copy of a
    /// file in use is refused by it (see `hold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
}

impl StateRecord {
    /// The record of `promise` for `machine` under `source`, counted in `counted_in`; a clean
    /// stop's exact position comes with the promise.
    pub(crate) fn of(
        machine: u64,
        source: &str,
        promise: &Promise,
        counted_in: &CountedIn,
    ) -> StateRecord {
        StateRecord {
            machine,
            source: source.to_owned(),
            mark_ms: promise.mark_ms,
            last_time: promise.last_time,
            last_seq: promise.stopped_at.map(|at| at.seq),
            clean: promise.clean,
            written_ms: promise.sent_ms,
            layout: Some(counted_in.layout.clone()),
            epoch_ms: Some(counted_in.epoch_ms),
            fixed: counted_in.fixed_text(),
            clean_stop: None,
            file_id: None,
        }
    }

    /// The record of a file whose holder issued nothing: no mark, counted in nothing, so the
    /// next start (in any layout or epoch) is neither held back nor refused by it.
    pub(crate) fn unused(machine: u64, source: &str, file_id: &str) -> StateRecord {
        StateRecord {
            machine,
            source: source.to_owned(),
            mark_ms: 0,
            last_time: 0,
            last_seq: None,
            clean: false,
            written_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            layout: None,
            epoch_ms: None,
            fixed: None,
            clean_stop: None,
            file_id: Some(file_id.to_owned()),
        }
    }

    /// What the mark was counted in, if the record says.
    pub(crate) fn counted_in(&self) -> Option<CountedIn> {
        CountedIn::from_record(self.layout.as_deref(), self.epoch_ms, self.fixed.as_deref())
    }

    /// The exact position of a clean stop, if the record has one.
    pub(crate) fn stopped_at(&self) -> Option<Position> {
        match (self.clean, self.last_seq) {
            (true, Some(seq)) => Some(Position {
                time: self.last_time,
                seq,
            }),
            _ => None,
        }
    }
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

/// Retires a state file (`vesta machine retire --state-file`): renamed to
/// `PATH.retired-<ms since 1970>` under its lock (refused while an issuer holds it), so the
/// next start finds no mark and begins after whatever could have been issued. Returns the new
/// name, or `None` when there was no file.
pub fn retire(path: &Path) -> Result<Option<PathBuf>, StartError> {
    let lock = super::hold::lock_state_file(path, std::time::Duration::ZERO)?;
    let path = lock.real_path();
    if !path.exists() {
        return Ok(None);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut name = path.file_name().map(|n| n.to_owned()).unwrap_or_default();
    name.push(format!(".retired-{now}"));
    let retired = path.with_file_name(name);
    fs::rename(path, &retired).map_err(|e| state_error(path, format!("cannot rename it: {e}")))?;
    Ok(Some(retired))
}

/// Writes `record` atomically: a temp file beside `path`, fsync, rename over `path`, fsync of
/// the directory so the rename itself survives a power cut.
pub fn write(path: &Path, record: &StateRecord) -> Result<(), StartError> {
    let path = &super::hold::resolve(path)?;
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
            last_seq: Some(41),
            clean: true,
            written_ms: 1_700_000_000_500,
            layout: Some("time 30-59, seq 10-29, node 0-9, 1000 ms units".into()),
            epoch_ms: Some(1_420_041_600_000),
            fixed: Some("0xf000000000000000/0x0000000000000000".into()),
            clean_stop: Some("0123456789abcdef0123456789abcdef".into()),
            file_id: Some("fedcba9876543210fedcba9876543210".into()),
        }
    }

    /// A file written before marks carried their layout and epoch still reads, as having none.
    #[test]
    fn an_old_file_without_the_new_keys_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.state");
        fs::write(
            &path,
            "machine = 3\nsource = \"static\"\nmark_ms = 1700000001000\nlast_time = 5\n\
             clean = true\nwritten_ms = 1700000000500\n",
        )
        .unwrap();
        let r = read(&path).unwrap().unwrap();
        assert_eq!((r.machine, r.clean, r.last_seq), (3, true, None));
        assert_eq!(r.counted_in(), None);
        assert_eq!(r.stopped_at(), None, "no exact position without its seq");
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

    #[cfg(unix)]
    #[test]
    fn a_symlink_stays_a_symlink_and_its_target_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.state");
        let link = dir.path().join("link.state");
        std::os::unix::fs::symlink("real.state", &link).unwrap();
        write(&link, &record()).unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(read(&target).unwrap(), Some(record()));
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
