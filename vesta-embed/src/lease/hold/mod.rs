//! One holder at a time, on one host, whoever runs it, keyed by what is held — the ID space's
//! bits, the file itself — never by a name or a path.
//!
//! - **A static machine ID** is held on its host ([`HostHold`]) in its ID space
//!   ([`IdSpace`]: where the node field sits and the bits every ID carries; Leaf and Twitter are
//!   one space, so is a custom layout with Leaf's bits, whatever each calls its layout). The
//!   holder is decided by the kernel (`arbiter`: an abstract Unix socket per machine ID and
//!   class of the top four bits on Linux), released when the process dies and untouched by any
//!   file tidy-up, so deleting a file vesta keeps never lets a second process issue the same
//!   IDs. Two spaces that never meet (Vesta's max-peak and min-granularity; a TCP and a REST
//!   server) hold one machine ID at once.
//! - **What the host remembers** of a machine ID's last holders (`memory`): what each space
//!   counted in, so a start in another layout or epoch is refused (two users' state files, or
//!   none, know nothing of each other), and the token of a clean stop: a state file whose
//!   clean record carries the token found here is the last word on the machine ID (no one
//!   issued since, on this host), so its exact position can be continued at once; a copied,
//!   restored or stale file cannot carry it. A holder that issued nothing puts the record back
//!   as it found it, so a start that failed leaves nothing to retire.
//! - **A state file** is locked by the file itself (`state_lock`): through a symlink, `..`, a
//!   bind mount or a hard link, or as a copy of a file in use, a second process is refused.

pub(crate) mod arbiter;
mod lock_file;
pub(crate) mod memory;
mod state_lock;

use std::path::{Path, PathBuf};
use std::time::Duration;

use vesta_core::{GenMethod, Layout, Remedy};

use self::arbiter::Claim;
use self::lock_file::holder_line;
use self::memory::{RecordFile, SpaceEntry};
pub(crate) use self::state_lock::{StateLock, lock_state_file, new_file_id, resolve};
use super::counted_in::{CountedIn, IdSpace};
use crate::error::StartError;

/// What a refused second holder of a machine ID is told to do.
const ONE_HOLDER: &str = "another process issues with this machine ID in this ID space on this \
                          host, whatever it calls its layout; give each its own machine ID (or \
                          one issuer a leasing source)";

/// Where a host's holds are: the directory of its records (and the other one read too), and
/// the namespace of its claims.
#[derive(Clone, Debug)]
pub(crate) struct HoldPlace {
    dir: PathBuf,
    also: Option<PathBuf>,
    namespace: String,
}

impl HoldPlace {
    /// This host's (`VESTA_HOLD_DIR`, else the defaults: `memory`'s module doc), its directory
    /// made if missing.
    pub(crate) fn host() -> Result<HoldPlace, StartError> {
        let dir = memory::hold_dir()?;
        Ok(HoldPlace {
            also: memory::other_dir(&dir),
            dir,
            namespace: arbiter::hold_namespace(),
        })
    }

    /// The claim names a holder of `machine` in the node field `node` (`node12-21`) takes: one
    /// per class of the ID's top four bits its space can carry.
    fn claim_names(
        &self,
        node: &str,
        machine: u64,
        classes: impl Iterator<Item = u64>,
    ) -> Vec<String> {
        classes
            .map(|c| format!("{}/hold/{node}/m{machine}/c{c:x}", self.namespace))
            .collect()
    }
}

/// A static machine ID of one [`IdSpace`] held on this host.
#[derive(Debug)]
pub(crate) struct HostHold {
    _claims: Vec<Claim>,
    record: RecordFile,
    space: IdSpace,
    machine: u64,
    counted_in: CountedIn,
    /// The layout's name, for people reading the record.
    layout: String,
    /// The record's entries of spaces meeting this one, as found: put back if this holder
    /// issues nothing.
    found: Vec<SpaceEntry>,
    /// The last holder's clean-stop token, read before this holder cleared it.
    last_clean_stop: Option<String>,
}

impl HostHold {
    /// Holds `machine` of `layout`'s space (issued with `gen_method`) on this host, waiting at
    /// most `wait` for another holder, and refuses a start counted in another layout or epoch
    /// than the last holder of a space it meets. Writes nothing yet: [`begin`](Self::begin)
    /// does, before anything is issued.
    pub(crate) fn acquire(
        layout: &Layout,
        gen_method: GenMethod,
        machine: u64,
        wait: Duration,
    ) -> Result<HostHold, StartError> {
        Self::acquire_at(&HoldPlace::host()?, layout, gen_method, machine, wait)
    }

    fn acquire_at(
        place: &HoldPlace,
        layout: &Layout,
        gen_method: GenMethod,
        machine: u64,
        wait: Duration,
    ) -> Result<HostHold, StartError> {
        let space = IdSpace::of(layout, gen_method);
        let counted_in = CountedIn::of(layout, gen_method);
        let names = place.claim_names(&space.node_name(), machine, space.classes());
        let claims = arbiter::claim_all(&names, wait)?.map_err(|holder| StartError::Held {
            what: format!(
                "machine {machine} of {} ({}) on this host",
                layout.full_name(),
                space.describe()
            ),
            holder,
            hint: ONE_HOLDER.into(),
        })?;
        let record = RecordFile::of(&place.dir, place.also.as_deref(), &space, machine);
        let path = record.path().to_owned();
        let (found, last_clean_stop) = record.update(|rec, also| {
            for entry in rec.spaces.iter().chain(also).filter(|e| e.meets(&space)) {
                let theirs = entry.counted_in.as_deref().and_then(CountedIn::decode);
                counted_in.check(
                    theirs.as_ref(),
                    machine,
                    &format!(
                        "this host's hold record {} (its last holder's, {})",
                        path.display(),
                        entry.layout
                    ),
                    Remedy::RetireHostHold { path: path.clone() },
                )?;
            }
            let found: Vec<SpaceEntry> = rec
                .spaces
                .iter()
                .filter(|e| e.meets(&space))
                .cloned()
                .collect();
            let key = space.key();
            let token = found
                .iter()
                .find(|e| e.key == key)
                .and_then(|e| e.clean_stop.clone());
            Ok((found, token))
        })?;
        Ok(HostHold {
            _claims: claims,
            record,
            space,
            machine,
            counted_in,
            layout: layout.full_name(),
            found,
            last_clean_stop,
        })
    }

    /// The token of the clean stop the last holder of this very space recorded, if it stopped
    /// cleanly and no holder of a space meeting it started since.
    pub(crate) fn last_clean_stop(&self) -> Option<&str> {
        self.last_clean_stop.as_deref()
    }

    /// Before anything is issued: records this holder and what it counts in, durably, and
    /// forgets the clean stops of every space meeting this one (their positions are no longer
    /// the last word once this holder issues).
    pub(crate) fn begin(&mut self) -> Result<(), StartError> {
        let entry = SpaceEntry {
            key: self.space.key(),
            fixed: format!("{:#018x}/{:#018x}", self.space.fixed.0, self.space.fixed.1),
            layout: self.layout.clone(),
            holder: holder_line(),
            counted_in: Some(self.counted_in.encode()),
            clean_stop: None,
        };
        let (node, machine) = (self.node(), self.machine);
        self.record.update(|rec, _| {
            rec.node = node;
            rec.machine = machine;
            for other in rec.spaces.iter_mut().filter(|e| e.meets(&self.space)) {
                other.clean_stop = None;
            }
            match rec.spaces.iter_mut().find(|e| e.key == entry.key) {
                Some(mine) => *mine = entry,
                None => rec.spaces.push(entry),
            }
            Ok(())
        })
    }

    /// A clean stop: this holder's entry says so, with the token its state file's clean record
    /// carries (written first), for the next holder to find.
    pub(crate) fn stopped(&mut self, clean_stop: &str) -> Result<(), StartError> {
        let key = self.space.key();
        self.record.update(|rec, _| {
            if let Some(mine) = rec.spaces.iter_mut().find(|e| e.key == key) {
                mine.holder = format!("{}, stopped cleanly", holder_line());
                mine.clean_stop = Some(clean_stop.to_owned());
            }
            Ok(())
        })
    }

    /// This holder issued nothing: the entries of the spaces meeting it go back to what it
    /// found, so a start that issued nothing (a layout already full, a refused epoch) leaves
    /// nothing to retire.
    pub(crate) fn unused(&mut self) -> Result<(), StartError> {
        let found = self.found.clone();
        self.record.update(|rec, _| {
            rec.spaces.retain(|e| !e.meets(&self.space));
            rec.spaces.extend(found);
            Ok(())
        })
    }

    fn node(&self) -> String {
        format!("{}-{}", self.space.node.low_bit, self.space.node.high_bit())
    }
}

/// Retires the host's hold record at `path` (`vesta machine retire --host-hold`): what its
/// holders counted in and their clean-stop tokens are forgotten, so a start in another epoch
/// is no longer refused by it (and none continues in place). Refused while a process holds the
/// machine ID in any space on this host; `Ok(false)` when there is no such file.
pub fn retire_host_hold(path: &Path) -> Result<bool, StartError> {
    let place = HoldPlace {
        dir: PathBuf::new(),
        also: None,
        namespace: arbiter::hold_namespace(),
    };
    retire_at(&place, path)
}

fn retire_at(place: &HoldPlace, path: &Path) -> Result<bool, StartError> {
    if !path.exists() {
        return Ok(false);
    }
    let record = RecordFile::at(path);
    let (node, machine) = record.update(|rec, _| Ok((rec.node.clone(), rec.machine)))?;
    let _claims = arbiter::claim_all(
        &place.claim_names(&format!("node{node}"), machine, 0..16),
        Duration::ZERO,
    )?
    .map_err(|holder| StartError::Held {
        what: format!("machine {machine} (node bits {node}) on this host"),
        holder,
        hint: "a process issues with this machine ID on this host; stop it first".into(),
    })?;
    record.update(|rec, _| {
        for entry in &mut rec.spaces {
            entry.holder = format!("retired by {}", holder_line());
            entry.counted_in = None;
            entry.clean_stop = None;
        }
        Ok(())
    })?;
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

#[cfg(test)]
mod tests;
