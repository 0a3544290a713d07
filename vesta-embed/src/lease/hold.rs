//! One holder at a time, on one host, whoever runs it.
//!
//! - A machine state file is locked (`PATH.lock`, an exclusive lock held for the life of the
//!   process) as the segment one is: two processes on one file would each overwrite the other's
//!   mark and issue the same IDs.
//! - A static machine ID with a state file is held on its host ([`HostHold`]): a lock file per
//!   [`IdSpace`] and machine ID in a directory every user shares (`/dev/shm` on Linux, `/tmp` on
//!   other Unixes, the temp directory elsewhere; `VESTA_HOLD_DIR` overrides it for a test
//!   harness), so two users' processes with their own state files cannot both issue as it.
//! - The host hold also remembers how its last holder stopped: the token of a clean stop. A
//!   start reads it and clears it before anything is issued; a clean stop writes a fresh one
//!   into its state file and then here. A state file whose clean record carries the token
//!   found here is the last word on the machine ID (no one issued since, on this host), so its
//!   exact position can be continued at once; a copied, restored or stale file cannot carry it.
//!
//! A lock file names its holder (PID, host, since when) for the one-line refusal. Locks are the
//! operating system's (`flock` / `LockFileEx` through `std::fs::File::try_lock`): released when
//! the process dies, however it dies.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use vesta_core::Epoch;

use super::counted_in::{CountedIn, IdSpace};
use crate::error::StartError;

/// How often a waiting start looks at a held lock again.
const POLL: Duration = Duration::from_millis(20);

/// A lock file, held for as long as this value lives.
#[derive(Debug)]
pub(crate) struct Locked {
    file: File,
    path: PathBuf,
}

/// What a lock file refused with names: what is held and what to do about it.
pub(crate) struct Refusal<'a> {
    /// `the state file`, `machine 5 of vesta max-peak (genMethod embed) on this host, hold`.
    pub what: &'a str,
    /// Why it matters and what to do.
    pub hint: &'a str,
}

impl Locked {
    /// Locks `path` (created if missing; `shared` files are made writable by every user),
    /// waiting at most `wait` for another holder to let go, then records this process as the
    /// holder. A lock still held after `wait` is refused naming its holder.
    pub(crate) fn acquire(
        path: &Path,
        shared: bool,
        wait: Duration,
        refusal: Refusal<'_>,
    ) -> Result<Locked, StartError> {
        let mut file = open(path, shared)?;
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(POLL.min(deadline - Instant::now()));
                }
                Err(TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let _ = file.read_to_string(&mut text);
                    return Err(StartError::Held {
                        what: refusal.what.to_owned(),
                        path: path.to_owned(),
                        holder: holder_of(&text),
                        hint: refusal.hint.to_owned(),
                    });
                }
                Err(TryLockError::Error(e)) => {
                    return Err(lock_error(path, format!("cannot lock it: {e}")));
                }
            }
        }
        Ok(Locked {
            file,
            path: path.to_owned(),
        })
    }

    /// What the file holds now (what the last holder left, until this one rewrites it).
    fn contents(&mut self) -> String {
        let mut text = String::new();
        let _ = self.file.seek(SeekFrom::Start(0));
        let _ = self.file.read_to_string(&mut text);
        text
    }

    /// Replaces the file's contents; `durable` syncs them to the disk.
    fn rewrite(&mut self, text: &str, durable: bool) -> Result<(), StartError> {
        let io = |e: std::io::Error| lock_error(&self.path, format!("cannot write it: {e}"));
        self.file.set_len(0).map_err(io)?;
        self.file.seek(SeekFrom::Start(0)).map_err(io)?;
        self.file.write_all(text.as_bytes()).map_err(io)?;
        if durable {
            self.file.sync_all().map_err(io)?;
        }
        Ok(())
    }
}

/// The lock of a state file, `PATH.lock`: held for the life of the process using the file.
pub(crate) fn lock_state_file(path: &Path, wait: Duration) -> Result<Locked, StartError> {
    let mut name = path.file_name().map(|n| n.to_owned()).unwrap_or_default();
    name.push(".lock");
    let mut locked = Locked::acquire(
        &path.with_file_name(name),
        false,
        wait,
        Refusal {
            what: &format!("the state file {}: its lock", path.display()),
            hint: "another process issues with this state file, and two on one file issue the \
                   same IDs; give each process its own state file (and machine ID)",
        },
    )?;
    locked.rewrite(&format!("holder = {:?}\n", holder_line()), false)?;
    Ok(locked)
}

/// What the host hold's file records.
#[derive(Debug, Default, Serialize, Deserialize)]
struct HoldRecord {
    /// Who holds (or last held) the machine ID on this host.
    #[serde(default)]
    holder: String,
    /// What the holders' IDs are counted in (the epoch, with the layout the file is keyed by):
    /// another user's state file of the same machine ID is checked against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    counted_in: Option<String>,
    /// The token of the last holder's clean stop; absent while held, and after a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clean_stop: Option<String>,
}

/// A static machine ID of one [`IdSpace`] held on this host.
#[derive(Debug)]
pub(crate) struct HostHold {
    locked: Locked,
    /// What this holder counts in, recorded for the next one.
    counted_in: CountedIn,
    /// The last holder's clean-stop token, read before this holder cleared it.
    last_clean_stop: Option<String>,
}

impl HostHold {
    /// Holds `machine` of `space` on this host (waiting at most `wait`), refuses a start counted
    /// in another epoch than the last holder's (two users' state files of one machine ID know
    /// nothing of each other; this hold does), reads the last clean stop's token and clears it
    /// before anything is issued.
    pub(crate) fn acquire(
        space: &IdSpace,
        machine: u64,
        counted_in: &CountedIn,
        wait: Duration,
    ) -> Result<HostHold, StartError> {
        Self::acquire_in(&hold_dir(), space, machine, counted_in, wait)
    }

    fn acquire_in(
        dir: &Path,
        space: &IdSpace,
        machine: u64,
        counted_in: &CountedIn,
        wait: Duration,
    ) -> Result<HostHold, StartError> {
        let path = dir.join(format!("vesta-rs.{}.{}.m{machine}", space.name, space.key));
        let what = format!("machine {machine} of {} on this host: its hold", space.name);
        let mut locked = Locked::acquire(
            &path,
            true,
            wait,
            Refusal {
                what: &what,
                hint: "another process issues with this static machine ID and layout on this \
                       host; give each its own machine ID (or one issuer a leasing source)",
            },
        )?;
        let last = toml::from_str::<HoldRecord>(&locked.contents()).unwrap_or_default();
        counted_in.check(
            last.counted_in
                .as_deref()
                .and_then(CountedIn::decode)
                .as_ref(),
            machine,
            &format!("this host's hold {} (its last holder's)", path.display()),
            &format!("vesta machine retire --host-hold {}", path.display()),
        )?;
        let mut hold = HostHold {
            locked,
            counted_in: counted_in.clone(),
            last_clean_stop: last.clean_stop,
        };
        hold.record(None)?;
        Ok(hold)
    }

    /// The token of the clean stop the last holder recorded here, if it stopped cleanly.
    pub(crate) fn last_clean_stop(&self) -> Option<&str> {
        self.last_clean_stop.as_deref()
    }

    /// Records this holder, with the token of its clean stop once it has stopped (written to
    /// its state file first).
    pub(crate) fn record(&mut self, clean_stop: Option<&str>) -> Result<(), StartError> {
        let record = HoldRecord {
            holder: holder_line(),
            counted_in: Some(self.counted_in.encode()),
            clean_stop: clean_stop.map(str::to_owned),
        };
        let text = toml::to_string(&record).unwrap_or_default();
        self.locked.rewrite(
            &format!(
                "# vesta-rs: the host's hold of a static machine ID (locked by its holder)\n{text}"
            ),
            true,
        )
    }
}

/// Retires the host's hold at `path` (`vesta machine retire --host-hold`): what its last holder
/// counted in and its clean-stop token are forgotten, so a start in another epoch is no longer
/// refused (and none continues in place). Refused while a process holds it; `Ok(false)` when
/// there is no such file.
pub fn retire_host_hold(path: &Path) -> Result<bool, StartError> {
    if !path.exists() {
        return Ok(false);
    }
    let mut locked = Locked::acquire(
        path,
        true,
        Duration::ZERO,
        Refusal {
            what: "the host hold",
            hint: "a process issues with this machine ID on this host; stop it first",
        },
    )?;
    let record = HoldRecord {
        holder: format!("retired by {}", holder_line()),
        counted_in: None,
        clean_stop: None,
    };
    let text = toml::to_string(&record).unwrap_or_default();
    locked.rewrite(&text, true)?;
    Ok(true)
}

/// A fresh token for a clean stop: 128 bits from the standard library's randomly keyed hasher
/// (seeded by the operating system), never the same twice.
pub(crate) fn clean_stop_token() -> String {
    use std::hash::{BuildHasher, RandomState};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = (nanos, std::process::id());
    format!(
        "{:016x}{:016x}",
        RandomState::new().hash_one(seed),
        RandomState::new().hash_one(seed)
    )
}

/// Where host holds live: a directory every user of the host shares.
fn hold_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("VESTA_HOLD_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    if cfg!(target_os = "linux") && shm.is_dir() {
        return shm.to_owned();
    }
    if cfg!(unix) {
        return PathBuf::from("/tmp");
    }
    std::env::temp_dir()
}

/// This process, for a lock file: `pid 123 on host h since 2026-11-26T10:00:00.000Z`.
fn holder_line() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    format!(
        "pid {} on host {} since {}",
        std::process::id(),
        super::host_name(),
        Epoch::rfc3339(now)
    )
}

/// The holder a lock file names, for a refusal.
fn holder_of(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("holder = "))
        .map(|h| h.trim().trim_matches('"').to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "another process".into())
}

/// Opens a lock file, creating it if missing. A `shared` one (in a directory every user
/// writes to) is created writable by all, so the next user can hold it too; it is opened
/// without `O_CREAT` first, which a directory protected against other users' files allows.
fn open(path: &Path, shared: bool) -> Result<File, StartError> {
    let failed = |e: std::io::Error| lock_error(path, format!("cannot open it: {e}"));
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
                return Err(lock_error(
                    path,
                    format!(
                        "cannot open it: {e} (made by another user without write access for \
                         all: `chmod 666` it, or remove it while no issuer runs)"
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
    Err(lock_error(
        path,
        "cannot open it: it keeps appearing and vanishing".into(),
    ))
}

fn lock_error(path: &Path, message: String) -> StartError {
    StartError::StateFile {
        path: path.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vesta_core::{GenMethod, IdType};

    #[test]
    fn a_held_state_file_is_refused_naming_the_holder_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.state");
        let held = lock_state_file(&path, Duration::ZERO).unwrap();
        let err = lock_state_file(&path, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(err.contains("v.state"), "{err}");
        assert!(
            err.contains(&format!("pid {} on host", std::process::id())),
            "{err}"
        );
        assert!(err.contains("each process its own state file"), "{err}");
        drop(held);
        lock_state_file(&path, Duration::ZERO).unwrap();
    }

    #[test]
    fn a_waiting_start_gets_the_lock_once_it_is_freed_and_gives_up_after_its_wait() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.state");
        let held = lock_state_file(&path, Duration::ZERO).unwrap();
        let began = Instant::now();
        assert!(lock_state_file(&path, Duration::from_millis(100)).is_err());
        assert!(began.elapsed() >= Duration::from_millis(100), "waited");
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        lock_state_file(&path, Duration::from_secs(10)).unwrap();
        releaser.join().unwrap();
    }

    #[test]
    fn the_host_hold_hands_a_clean_stop_token_to_the_next_holder_only() {
        let dir = tempfile::tempdir().unwrap();
        let space = IdSpace::of(IdType::MinGranularity.layout(), GenMethod::Embed);
        let counted = CountedIn::of(IdType::MinGranularity.layout(), GenMethod::Embed);
        let hold = |wait| HostHold::acquire_in(dir.path(), &space, 5, &counted, wait);
        let mut first = hold(Duration::ZERO).unwrap();
        assert_eq!(first.last_clean_stop(), None);
        let err = hold(Duration::ZERO).unwrap_err().to_string();
        assert!(
            err.contains("machine 5 of vesta-min-granularity on this host"),
            "{err}"
        );
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        first.record(Some("t1")).unwrap();
        drop(first);

        // The next holder reads the token, and clears it before issuing anything.
        let second = hold(Duration::ZERO).unwrap();
        assert_eq!(second.last_clean_stop(), Some("t1"));
        drop(second);
        let third = hold(Duration::ZERO).unwrap();
        assert_eq!(
            third.last_clean_stop(),
            None,
            "the second did not stop cleanly"
        );
        // Another machine ID, or another space, is another hold.
        HostHold::acquire_in(dir.path(), &space, 6, &counted, Duration::ZERO).unwrap();
        let leaf_layout = vesta_core::Preset::Leaf.layout();
        let leaf = IdSpace::of(&leaf_layout, GenMethod::Embed);
        let leaf_counted = CountedIn::of(&leaf_layout, GenMethod::Embed);
        HostHold::acquire_in(dir.path(), &leaf, 5, &leaf_counted, Duration::ZERO).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let path = std::fs::read_dir(dir.path())
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o666, "every user may hold it next");
        }
    }

    /// Two users' state files of one machine ID know nothing of each other: the host's hold
    /// refuses a start counted from another epoch than its last holder's, until retired.
    #[test]
    fn the_host_hold_refuses_another_epoch_until_retired() {
        let dir = tempfile::tempdir().unwrap();
        let layout = IdType::MaxPeak.layout();
        let space = IdSpace::of(layout, GenMethod::Embed);
        let counted = CountedIn::of(layout, GenMethod::Embed);
        let moved = CountedIn::of(
            &layout.with_epoch(vesta_core::Epoch::from_unix_ms(1_420_041_603_000)),
            GenMethod::Embed,
        );
        drop(HostHold::acquire_in(dir.path(), &space, 7, &counted, Duration::ZERO).unwrap());
        let err = HostHold::acquire_in(dir.path(), &space, 7, &moved, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(err.contains("this host's hold"), "{err}");
        assert!(err.contains("vesta machine retire --host-hold"), "{err}");
        let path = std::fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let held = HostHold::acquire_in(dir.path(), &space, 7, &counted, Duration::ZERO).unwrap();
        assert!(retire_host_hold(&path).is_err(), "refused while held");
        drop(held);
        assert!(retire_host_hold(&path).unwrap());
        HostHold::acquire_in(dir.path(), &space, 7, &moved, Duration::ZERO).unwrap();
    }

    #[test]
    fn tokens_differ() {
        assert_ne!(clean_stop_token(), clean_stop_token());
        assert_eq!(clean_stop_token().len(), 32);
    }
}
