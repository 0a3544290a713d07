//! What this host remembers of a machine ID's holders: per ID space, what its last holder
//! counted in (fields, unit, epoch), the layout it called it, and the token of its clean stop.
//! A start is refused when a space it meets was last counted in another layout or epoch (two
//! users' state files of one machine ID, or none, know nothing of each other; this record
//! does), and a clean stop is continued in place only while its token is still here. Nothing
//! here decides who holds a machine ID — the kernel's claims do (`arbiter`) — so deleting a
//! record never lets two processes issue at once; it only forgets an epoch (the next start in
//! another epoch is no longer refused by it) and a clean stop (the next start waits out an
//! unknown past instead of continuing in place).
//!
//! Where the records live, on disk, where neither tmpfs cleaning nor systemd's `RemoveIPC`
//! reaches, and shared by every user of the host ([`hold_dir`]):
//! - `VESTA_HOLD_DIR` when set (created if missing, mode 1777), for a harness playing hosts;
//! - else `/var/lib/vesta/holds` when it exists (the Debian package makes it, mode 1777, and
//!   the shipped units may write it) or this process can make it (root does, on first use);
//! - else `/var/tmp/vesta-rs` (made on first use, mode 1777): a login user's, on a host without
//!   the package. systemd-tmpfiles removes files there untouched for 30 days; a record is
//!   rewritten at every start.
//!
//! When both of the last two exist, the other's records are read too, so a host that got the
//! package after its users ran `vesta gen` still remembers their epochs.
//!
//! One file per node field and machine ID (`vesta-rs.node0-9.m5.hold`), locked while it is
//! read and rewritten: spaces that never meet may hold one machine ID at once and share it. It
//! is rewritten in place (another user's file in a sticky directory cannot be renamed over)
//! and ends with a checksum line, so a write torn by a crash is seen, not half-believed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lock_file::{LockFile, file_error};
use crate::error::StartError;
use crate::lease::counted_in::{IdSpace, fnv1a};

/// The system-wide directory of hold records.
const SYSTEM_DIR: &str = "/var/lib/vesta/holds";
/// A login user's, where the system's is neither there nor makeable.
#[cfg(unix)]
const USER_DIR: &str = "/var/tmp/vesta-rs";
/// The longest a record's lock is waited for (held only while a start or stop rewrites it).
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// The last line of a record: the checksum of everything before it.
const SUM: &str = "# sum ";

/// One machine ID's record on this host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Record {
    /// The node field's bits, `12-21`.
    #[serde(default)]
    pub node: String,
    /// The machine ID.
    #[serde(default)]
    pub machine: u64,
    /// One entry per ID space that held the machine ID here.
    #[serde(default, rename = "space", skip_serializing_if = "Vec::is_empty")]
    pub spaces: Vec<SpaceEntry>,
}

/// What the host remembers of one ID space's last holder of a machine ID.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpaceEntry {
    /// The space's key ([`IdSpace::key`]).
    pub key: String,
    /// The bits every ID of the space carries, `0xMASK/0xVALUE`.
    pub fixed: String,
    /// What its last holder called its layout (for people: the space is the same whatever the
    /// name).
    #[serde(default)]
    pub layout: String,
    /// Its last holder: `pid 1 on host h since ...`, or `... stopped` once it has.
    #[serde(default)]
    pub holder: String,
    /// What that holder's IDs were counted in (`CountedIn::encode`); none once retired, or when
    /// it issued nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_in: Option<String>,
    /// The token of its clean stop, also in its state file; none while held, and after a crash
    /// or a holder of a space that meets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_stop: Option<String>,
}

impl SpaceEntry {
    /// The space's fixed bits, if they read.
    pub(crate) fn fixed_bits(&self) -> Option<(u64, u64)> {
        let (m, v) = self.fixed.trim().split_once('/')?;
        let hex = |t: &str| u64::from_str_radix(t.trim().strip_prefix("0x")?, 16).ok();
        Some((hex(m)?, hex(v)?))
    }

    /// True when IDs of this entry's space can be IDs of `space` (an entry whose bits do not
    /// read is taken to meet every space).
    pub(crate) fn meets(&self, space: &IdSpace) -> bool {
        self.fixed_bits().is_none_or(|fixed| {
            space.meets(&IdSpace {
                node: space.node,
                fixed,
            })
        })
    }
}

/// Where one machine ID's record is kept on this host.
#[derive(Debug, Clone)]
pub(crate) struct RecordFile {
    path: PathBuf,
    /// The record in the other directory, read but never written (see the module doc).
    also: Option<PathBuf>,
}

impl RecordFile {
    /// The record of `machine` in `space`'s node field, in `dir` (also read in `also`).
    pub(crate) fn of(dir: &Path, also: Option<&Path>, space: &IdSpace, machine: u64) -> RecordFile {
        let name = format!("vesta-rs.{}.m{machine}.hold", space.node_name());
        RecordFile {
            path: dir.join(&name),
            also: also.map(|d| d.join(&name)).filter(|p| p.is_file()),
        }
    }

    /// The record at `path` (a file a refusal named).
    pub(crate) fn at(path: &Path) -> RecordFile {
        RecordFile {
            path: path.to_owned(),
            also: None,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the record (and the other directory's, as `also`), lets `change` edit it, and
    /// writes it back durably if it changed, all under the file's lock.
    pub(crate) fn update<T>(
        &self,
        change: impl FnOnce(&mut Record, &[SpaceEntry]) -> Result<T, StartError>,
    ) -> Result<T, StartError> {
        let mut file = match LockFile::acquire(&self.path, true, LOCK_WAIT)? {
            Ok(file) => file,
            Err(holder) => {
                return Err(file_error(
                    &self.path,
                    format!(
                        "its lock is still held by {holder} after {} s",
                        LOCK_WAIT.as_secs()
                    ),
                ));
            }
        };
        let mut record = parse(&self.path, &file.contents())?;
        let also = match &self.also {
            Some(path) => parse(path, &std::fs::read_to_string(path).unwrap_or_default())?.spaces,
            None => Vec::new(),
        };
        let before = record.clone();
        let out = change(&mut record, &also)?;
        if record != before {
            file.rewrite(&render(&record), true)?;
        }
        Ok(out)
    }
}

/// A record's text: the TOML, then the checksum line.
fn render(record: &Record) -> String {
    let body = format!(
        "# vesta-rs: what this host remembers of machine {}'s holders (node bits {}); the \
         kernel's claims decide who holds it, this only remembers\n{}",
        record.machine,
        record.node,
        toml::to_string(record).unwrap_or_default()
    );
    format!("{body}{SUM}{:016x}\n", fnv1a(body.as_bytes()))
}

/// Reads a record's text; an empty file is an empty record, a torn or foreign one an error.
fn parse(path: &Path, text: &str) -> Result<Record, StartError> {
    if text.trim().is_empty() {
        return Ok(Record::default());
    }
    let unreadable = |why: String| StartError::HoldRecord {
        path: path.to_owned(),
        why,
        remedy: Box::new(vesta_core::Remedy::RetireHostHold {
            path: path.to_owned(),
        }),
    };
    let at = text
        .rfind(SUM)
        .ok_or_else(|| unreadable("no checksum line: torn by a crash, or not vesta's".into()))?;
    let (body, sum) = text.split_at(at);
    let sum = sum[SUM.len()..].trim();
    if sum != format!("{:016x}", fnv1a(body.as_bytes())) {
        return Err(unreadable(
            "its checksum differs: torn by a crash, or edited".into(),
        ));
    }
    toml::from_str(body).map_err(|e| unreadable(e.message().to_owned()))
}

/// The directory of this host's hold records (see the module doc), made if missing: where a
/// host keeps what it must remember beyond a restore of any store (the machine IDs' records
/// here, the per-key sequences' restore guard in vesta-seq).
pub fn hold_dir() -> Result<PathBuf, StartError> {
    if let Some(dir) = std::env::var_os("VESTA_HOLD_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        ensure_dir(&dir).map_err(|e| {
            file_error(
                &dir,
                format!("the hold directory (VESTA_HOLD_DIR) cannot be made: {e}"),
            )
        })?;
        return Ok(dir);
    }
    let system = Path::new(SYSTEM_DIR);
    if system.is_dir() || (cfg!(unix) && ensure_dir(system).is_ok()) {
        return Ok(system.to_owned());
    }
    let user = user_dir();
    ensure_dir(&user).map_err(|e| {
        file_error(
            &user,
            format!(
                "the hold directory cannot be made: {e} (neither {SYSTEM_DIR} nor this one is \
                 writable: make {SYSTEM_DIR} with mode 1777, or set VESTA_HOLD_DIR)"
            ),
        )
    })?;
    Ok(user)
}

/// The login users' directory.
fn user_dir() -> PathBuf {
    #[cfg(unix)]
    return PathBuf::from(USER_DIR);
    #[cfg(not(unix))]
    return std::env::temp_dir().join("vesta-rs");
}

/// The other of the two default directories, when `dir` is one of them.
pub(crate) fn other_dir(dir: &Path) -> Option<PathBuf> {
    if std::env::var_os("VESTA_HOLD_DIR").is_some_and(|d| !d.is_empty()) {
        return None;
    }
    let user = user_dir();
    if dir == Path::new(SYSTEM_DIR) {
        Some(user)
    } else {
        Some(PathBuf::from(SYSTEM_DIR))
    }
}

/// Makes `dir` (and its parents) if missing; a directory this process makes for every user is
/// mode 1777, as `/tmp` is.
fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vesta_core::{GenMethod, IdType, Preset};

    fn file(dir: &Path) -> RecordFile {
        RecordFile::at(&dir.join("vesta-rs.node0-9.m5.hold"))
    }

    #[test]
    fn a_record_round_trips_and_is_rewritten_only_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let f = file(dir.path());
        let space = IdSpace::of(IdType::MaxPeak.layout(), GenMethod::Embed);
        f.update(|r, also| {
            assert_eq!(*r, Record::default());
            assert!(also.is_empty());
            r.node = "0-9".into();
            r.machine = 5;
            r.spaces.push(SpaceEntry {
                key: space.key(),
                fixed: format!("{:#018x}/{:#018x}", space.fixed.0, space.fixed.1),
                layout: "vesta max-peak".into(),
                holder: "pid 1".into(),
                counted_in: Some("x; epoch 1".into()),
                clean_stop: None,
            });
            Ok(())
        })
        .unwrap();
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert!(text.contains("[[space]]"), "{text}");
        let modified = std::fs::metadata(f.path()).unwrap().modified().unwrap();
        let read = f.update(|r, _| Ok(r.clone())).unwrap();
        assert_eq!(read.spaces.len(), 1);
        assert!(read.spaces[0].meets(&space));
        let leaf = IdSpace::of(&Preset::Leaf.layout(), GenMethod::Embed);
        let rest = IdSpace::of(IdType::MaxPeak.layout(), GenMethod::Rest);
        assert!(!read.spaces[0].meets(&rest));
        assert!(read.spaces[0].meets(&IdSpace {
            node: space.node,
            ..leaf
        }));
        assert_eq!(
            std::fs::metadata(f.path()).unwrap().modified().unwrap(),
            modified,
            "not rewritten"
        );
    }

    #[test]
    fn a_torn_or_edited_record_is_refused_naming_the_retire() {
        let dir = tempfile::tempdir().unwrap();
        let f = file(dir.path());
        f.update(|r, _| {
            r.machine = 5;
            Ok(())
        })
        .unwrap();
        let text = std::fs::read_to_string(f.path()).unwrap();
        // A shorter record written over a longer one, cut off before its length was set.
        std::fs::write(f.path(), format!("machine = 6\n{text}")).unwrap();
        let refused = f.update(|_, _| Ok(())).unwrap_err();
        assert_eq!(
            refused.remedy(),
            Some(&vesta_core::Remedy::RetireHostHold {
                path: f.path().to_owned()
            })
        );
        let err = refused.to_string();
        assert!(err.contains("does not read"), "{err}");
        assert!(
            err.ends_with(&format!(
                "in another layout or epoch: retire this host's hold record {}",
                f.path().display()
            )),
            "{err}"
        );
        std::fs::write(f.path(), "machine = 5\n").unwrap();
        assert!(f.update(|_, _| Ok(())).is_err(), "no checksum line");
    }

    #[test]
    fn a_missing_hold_dir_is_made_for_every_user() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("a/b");
        ensure_dir(&made).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&made).unwrap().permissions().mode();
            assert_eq!(mode & 0o7777, 0o1777);
        }
    }
}
