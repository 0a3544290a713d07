//! One process per state file, keyed by the file itself, never by the path that reached it: a
//! second process reaching the same file through a symlink, `..`, a bind mount or a hard link
//! is refused, and so is one on a copy of a file in use.
//!
//! - The path is resolved first (symlinks followed, `..` taken out): the lock and every rewrite
//!   are on the file it names, so a symlink stays a symlink.
//! - `REAL.lock` beside the file is locked (`flock`): a bind mount reaches the same inode.
//! - On Linux the kernel claims the file's place (its directory's device and inode, and its
//!   name), which no deleted `.lock` file frees (`arbiter`).
//! - A file with two names (a hard link) is refused: the other name would be a second way in,
//!   and the first rewrite would leave it behind as a stale copy.
//! - A state file carries an identity of its own (`file_id`, kept across rewrites), claimed
//!   once read: a copy of a file in use, or a name a rewrite left behind, carries the same one
//!   and is refused while the original runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::arbiter::{self, Claim};
use super::lock_file::{LockFile, file_error, holder_line};
use crate::error::StartError;

/// What a refused second holder of one state file is told to do.
const ONE_PROCESS_EACH: &str = "another process issues with this state file, and two on one \
                                file issue the same IDs; give each process its own state file \
                                (and machine ID)";

/// The lock of one state file, held for as long as this value lives.
#[derive(Debug)]
pub(crate) struct StateLock {
    real: PathBuf,
    _file: LockFile,
    _claims: Vec<Claim>,
}

/// Locks the state file at `path` (see the module doc), waiting at most `wait` for another
/// holder to let go.
pub(crate) fn lock_state_file(path: &Path, wait: Duration) -> Result<StateLock, StartError> {
    let real = resolve(path)?;
    let mut name = real.file_name().map(|n| n.to_owned()).unwrap_or_default();
    name.push(".lock");
    let held = |holder: String| StartError::Held {
        what: format!("the state file {}", shown(path, &real)),
        holder,
        hint: ONE_PROCESS_EACH.into(),
    };
    let mut file = LockFile::acquire(&real.with_file_name(name), false, wait)?.map_err(held)?;
    file.rewrite(&format!("holder = {:?}\n", holder_line()), false)?;
    let claims = match place_name(&real) {
        Some(place) => arbiter::claim_all(&[place], wait)?.map_err(held)?,
        None => Vec::new(),
    };
    refuse_second_names(path, &real)?;
    Ok(StateLock {
        real,
        _file: file,
        _claims: claims,
    })
}

impl StateLock {
    /// The file the path named: where it is read and rewritten.
    pub(crate) fn real_path(&self) -> &Path {
        &self.real
    }

    /// Claims the file's identity (its records' `file_id`): refused while a process runs on a
    /// copy of this file, or on a name of it that a rewrite left behind.
    pub(crate) fn claim_identity(
        &mut self,
        file_id: &str,
        path: &Path,
        wait: Duration,
    ) -> Result<(), StartError> {
        let name = arbiter::on_host(&format!("state-id/{file_id}"));
        let claims = arbiter::claim_all(&[name], wait)?.map_err(|holder| StartError::Held {
            what: format!(
                "the state file {} (or a copy of it: its file_id {file_id})",
                shown(path, &self.real)
            ),
            holder,
            hint: ONE_PROCESS_EACH.into(),
        })?;
        self._claims.extend(claims);
        Ok(())
    }
}

/// A fresh identity for a new state file: 128 random bits.
pub(crate) fn new_file_id() -> String {
    super::clean_stop_token()
}

/// The path as given, and the file it names when that differs.
fn shown(path: &Path, real: &Path) -> String {
    if path == real {
        path.display().to_string()
    } else {
        format!("{} (that is {})", path.display(), real.display())
    }
}

/// The file `path` names: symlinks followed (at most 40), `..` and `.` taken out, the directory
/// made absolute. Refused when the directory does not exist.
pub(crate) fn resolve(path: &Path) -> Result<PathBuf, StartError> {
    let mut at = std::path::absolute(path)
        .map_err(|e| file_error(path, format!("cannot resolve its path: {e}")))?;
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&at)
                    .map_err(|e| file_error(path, format!("cannot read its link: {e}")))?;
                at = match at.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            _ => break,
        }
    }
    let (Some(dir), Some(name)) = (at.parent(), at.file_name()) else {
        return Err(file_error(path, "is not a file's path".into()));
    };
    let dir = std::fs::canonicalize(dir).map_err(|e| {
        file_error(
            path,
            format!(
                "its directory {} cannot be reached: {e} (make it first)",
                dir.display()
            ),
        )
    })?;
    Ok(dir.join(name))
}

/// The kernel name of the file's place: its directory's device and inode, and its name.
#[cfg(unix)]
fn place_name(real: &Path) -> Option<String> {
    use crate::lease::counted_in::fnv1a;
    use std::os::unix::fs::MetadataExt;
    let dir = std::fs::metadata(real.parent()?).ok()?;
    let name = real.file_name()?.as_encoded_bytes();
    Some(arbiter::on_host(&format!(
        "state/{:x}:{:x}/{:016x}",
        dir.dev(),
        dir.ino(),
        fnv1a(name)
    )))
}

#[cfg(not(unix))]
fn place_name(_real: &Path) -> Option<String> {
    None
}

/// Refuses a state file with more than one name (a hard link).
#[cfg(unix)]
fn refuse_second_names(path: &Path, real: &Path) -> Result<(), StartError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(real) {
        Ok(meta) if meta.nlink() > 1 => Err(file_error(
            path,
            format!(
                "it has {} names (a hard link): another process could reach it under another \
                 one, and a rewrite would leave that one behind as a stale copy; give each \
                 process its own state file and remove the other names",
                meta.nlink()
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(not(unix))]
fn refuse_second_names(_path: &Path, _real: &Path) -> Result<(), StartError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_state_file_is_refused_through_any_path_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.state");
        std::fs::write(&path, "x").unwrap();
        let held = lock_state_file(&path, Duration::ZERO).unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let dotted = sub.join("../v.state");
        #[cfg(unix)]
        let linked = {
            let link = dir.path().join("link.state");
            std::os::unix::fs::symlink(&path, &link).unwrap();
            link
        };
        #[cfg(not(unix))]
        let linked = path.clone();
        for other in [&path, &dotted, &linked] {
            let err = lock_state_file(other, Duration::ZERO)
                .unwrap_err()
                .to_string();
            assert!(err.contains("v.state"), "{err}");
            assert!(err.contains("is held by"), "{err}");
            assert!(err.contains("its own state file"), "{err}");
        }
        assert_eq!(held.real_path(), std::fs::canonicalize(&path).unwrap());
        drop(held);
        lock_state_file(&linked, Duration::ZERO).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_hard_linked_state_file_is_refused_and_a_copy_in_use_by_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.state");
        std::fs::write(&path, "x").unwrap();
        let second = dir.path().join("second.state");
        std::fs::hard_link(&path, &second).unwrap();
        let err = lock_state_file(&second, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 names (a hard link)"), "{err}");
        std::fs::remove_file(&second).unwrap();

        let id = new_file_id();
        let mut first = lock_state_file(&path, Duration::ZERO).unwrap();
        first.claim_identity(&id, &path, Duration::ZERO).unwrap();
        std::fs::copy(&path, &second).unwrap();
        let mut copy = lock_state_file(&second, Duration::ZERO).unwrap();
        let err = copy
            .claim_identity(&id, &second, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(err.contains("or a copy of it"), "{err}");
        drop(first);
        copy.claim_identity(&id, &second, Duration::ZERO).unwrap();
    }

    #[test]
    fn a_missing_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = lock_state_file(&dir.path().join("no/such/v.state"), Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no/such"), "{err}");
        assert!(err.contains("cannot be reached"), "{err}");
    }

    #[test]
    fn a_waiting_start_gets_the_lock_once_it_is_freed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.state");
        let held = lock_state_file(&path, Duration::ZERO).unwrap();
        assert!(lock_state_file(&path, Duration::from_millis(100)).is_err());
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        lock_state_file(&path, Duration::from_secs(10)).unwrap();
        releaser.join().unwrap();
    }
}
