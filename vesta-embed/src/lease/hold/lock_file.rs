//! A file locked with the operating system's exclusive lock (`flock` / `LockFileEx` through
//! `std::fs::File::try_lock`): released by the kernel when its process dies, however it dies.
//! What a lock file can only do by its path: a second name for the file (a bind mount) locks the
//! same inode and is refused; a deleted and recreated file is a new lock, so what must survive a
//! tidy-up is claimed in the kernel's own names too (`arbiter`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vesta_core::Epoch;

use crate::error::StartError;

/// How often a waiting start looks at a held lock again.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// A locked file, held for as long as this value lives.
#[derive(Debug)]
pub(crate) struct LockFile {
    file: File,
    path: PathBuf,
}

impl LockFile {
    /// Locks `path` (created if missing; `shared` files are made writable by every user),
    /// waiting at most `wait` for another holder to let go. Still held after `wait`: `Ok(Err)`
    /// with the holder the file names.
    pub(crate) fn acquire(
        path: &Path,
        shared: bool,
        wait: Duration,
    ) -> Result<Result<LockFile, String>, StartError> {
        let mut file = open(path, shared)?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => {
                    return Ok(Ok(LockFile {
                        file,
                        path: path.to_owned(),
                    }));
                }
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(POLL.min(deadline - Instant::now()));
                }
                Err(TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let _ = file.read_to_string(&mut text);
                    return Ok(Err(holder_of(&text)));
                }
                Err(TryLockError::Error(e)) => {
                    return Err(file_error(path, format!("cannot lock it: {e}")));
                }
            }
        }
    }

    /// What the file holds now.
    pub(crate) fn contents(&mut self) -> String {
        let mut text = String::new();
        let _ = self.file.seek(SeekFrom::Start(0));
        let _ = self.file.read_to_string(&mut text);
        text
    }

    /// Replaces the file's contents in place (written over the old ones, then cut to length:
    /// a file in a sticky directory cannot be renamed over by another user); `durable` syncs
    /// them to the disk.
    pub(crate) fn rewrite(&mut self, text: &str, durable: bool) -> Result<(), StartError> {
        let io = |e: std::io::Error| file_error(&self.path, format!("cannot write it: {e}"));
        self.file.seek(SeekFrom::Start(0)).map_err(io)?;
        self.file.write_all(text.as_bytes()).map_err(io)?;
        self.file.set_len(text.len() as u64).map_err(io)?;
        if durable {
            self.file.sync_all().map_err(io)?;
        }
        Ok(())
    }
}

/// This process, for a lock file or a record: `pid 123 on host h since 2026-11-26T10:00:00.000Z`.
pub(crate) fn holder_line() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    format!(
        "pid {} on host {} since {}",
        std::process::id(),
        super::super::host_name(),
        Epoch::rfc3339(now)
    )
}

/// The holder a lock file names, for a refusal.
pub(crate) fn holder_of(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("holder = "))
        .map(|h| h.trim().trim_matches('"').to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "another process".into())
}

/// Opens a lock file, creating it if missing. A `shared` one (in a directory every user
/// writes to) is created writable by all, so the next user can hold it too; it is opened
/// without `O_CREAT` first, which a directory protected against other users' files allows.
pub(crate) fn open(path: &Path, shared: bool) -> Result<File, StartError> {
    let failed = |e: std::io::Error| file_error(path, format!("cannot open it: {e}"));
    let mut create = OpenOptions::new();
    create.read(true).write(true).create_new(true);
    #[cfg(unix)]
    if shared {
        use std::os::unix::fs::OpenOptionsExt;
        create.mode(0o666);
    }
    // Elsewhere files are made with the directory's default access.
    #[cfg(not(unix))]
    let _ = shared;
    for _ in 0..3 {
        match OpenOptions::new().read(true).write(true).open(path) {
            Ok(file) => return Ok(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(file_error(
                    path,
                    format!(
                        "cannot open it: {e} (made by another user without write access for \
                         all: `chmod 666` it)"
                    ),
                ));
            }
            Err(e) => return Err(failed(e)),
        }
        match create.open(path) {
            Ok(file) => {
                #[cfg(unix)]
                if shared {
                    use std::os::unix::fs::PermissionsExt;
                    // The umask may have taken write access from the others.
                    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
                }
                return Ok(file);
            }
            // Another process created it meanwhile: open that one.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(failed(e)),
        }
    }
    Err(file_error(
        path,
        "cannot open it: it keeps appearing and vanishing".into(),
    ))
}

pub(crate) fn file_error(path: &Path, message: String) -> StartError {
    StartError::StateFile {
        path: path.to_owned(),
        message,
    }
}
