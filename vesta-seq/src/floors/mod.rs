//! The restore guard (docs/seq.md, "A restored table"): what this table's sections were raised
//! to, kept where a restore of the table does not reach it — the host's file of the table
//! (`file.rs`, keyed by the table's identity) and, in a cluster coordinated in etcd or
//! ZooKeeper, that store (the [`Coordinator`]'s floors) — so a section found below it is
//! refused, never followed.
//!
//! Every raise is recorded (synced) after the table confirmed it and before its numbers are
//! handed out; a section's load, a raise that finds its row moved, and a start compare the row
//! with the floor. A section found below is **went back**: its keys are refused (typed
//! [`SeqError::WentBack`]) until the table is raised back; the refusal is answered from memory
//! and the row read again at most once a second, so a table raised back is served again
//! without a restart.
//!
//! **Architecture Invariant:** a section's numbers are handed out only below a maximum the
//! table confirmed *and* this guard recorded; a load or raise that finds the table below the
//! guard refuses the section.

mod file;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use self::file::HostFile;
pub(crate) use self::file::Row;
use crate::cluster::Coordinator;
use crate::{SeqError, SeqKey};

/// Where a table's floors are kept on this host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FloorsAt {
    /// The host's hold directory (vesta-embed's: `VESTA_HOLD_DIR`, else
    /// `/var/lib/vesta/holds`, else `/var/tmp/vesta-rs`), shared by every vesta process of the
    /// host.
    #[default]
    Host,
    /// A directory of the caller's (tests, an application with its own state directory).
    Dir(PathBuf),
}

/// How long a went-back section is refused from memory before its row is read again.
const RECHECK: Duration = Duration::from_secs(1);

/// A section found below its floor.
#[derive(Clone, Debug)]
struct WentBack {
    found: i64,
    floor: u64,
    remembered: String,
    checked: Instant,
}

/// The guard of one table.
pub(crate) struct Floors {
    file: Arc<HostFile>,
    /// The highest raise known per section: this file's, this process's, the coordinator's.
    known: Mutex<HashMap<Row, u64>>,
    went_back: Mutex<HashMap<Row, WentBack>>,
    /// The cluster's coordinator, when it keeps floors (etcd, ZooKeeper).
    remote: OnceLock<Arc<dyn Coordinator>>,
    /// The last write's failure, for the status.
    error: Mutex<Option<String>>,
}

impl std::fmt::Debug for Floors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Floors({})", self.file.path().display())
    }
}

/// What the guard is doing, for `/healthz` and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GuardStatus {
    /// The host's file of this table.
    pub file: String,
    /// Sections found below what they were raised to (refused until raised back).
    pub went_back: usize,
    /// Sections whose floor is known.
    pub sections: usize,
    /// The last write's failure, if it failed (raises wait for the next to succeed).
    pub error: Option<String>,
}

fn merge(known: &mut HashMap<Row, u64>, read: impl IntoIterator<Item = (Row, u64)>) {
    for (row, max) in read {
        let m = known.entry(row).or_insert(0);
        *m = (*m).max(max);
    }
}

impl Floors {
    /// The guard of the table named `store`, its host file read.
    pub(crate) async fn open(at: &FloorsAt, store: &str) -> Result<Floors, SeqError> {
        let dir = match at {
            FloorsAt::Dir(d) => d.clone(),
            FloorsAt::Host => {
                vesta_embed::lease::host_hold_dir().map_err(|e| SeqError::Guard(e.to_string()))?
            }
        };
        let store = store.to_owned();
        let (file, read) = blocking(move || HostFile::open(&dir, &store)).await?;
        let mut known = HashMap::new();
        merge(&mut known, read);
        Ok(Floors {
            file: Arc::new(file),
            known: Mutex::new(known),
            went_back: Mutex::default(),
            remote: OnceLock::new(),
            error: Mutex::default(),
        })
    }

    /// Keeps floors in the cluster's coordinator too (etcd, ZooKeeper).
    pub(crate) fn coordinated(&self, coord: Arc<dyn Coordinator>) {
        let _ = self.remote.set(coord);
    }

    /// The cluster's coordinator, when it keeps floors.
    pub(crate) fn remote(&self) -> Option<&Arc<dyn Coordinator>> {
        self.remote.get()
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<Row, u64>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn went(&self) -> std::sync::MutexGuard<'_, HashMap<Row, WentBack>> {
        self.went_back.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where the floors are remembered, for messages.
    fn remembered(&self, remote: bool) -> String {
        let file = self.file.path().display();
        match (remote, self.remote.get()) {
            (true, Some(c)) => format!("remembered in {}", c.describe()),
            _ => format!("remembered in {file}"),
        }
    }

    /// The floor of `row`: the highest raise this host's file, this process and the
    /// coordinator know of (0: none), and where it is remembered.
    pub(crate) async fn floor(&self, row: Row) -> Result<(u64, String), SeqError> {
        let file = Arc::clone(&self.file);
        let read = blocking(move || file.refresh()).await?;
        let local = {
            let mut known = self.known();
            merge(&mut known, read);
            known.get(&row).copied().unwrap_or(0)
        };
        let Some(coord) = self.remote.get() else {
            return Ok((local, self.remembered(false)));
        };
        let remote = coord.floor(row.0, row.1).await?.unwrap_or(0);
        if remote > local {
            merge(&mut self.known(), [(row, remote)]);
            return Ok((remote, self.remembered(true)));
        }
        Ok((local, self.remembered(false)))
    }

    /// Records a raise of `row` to `max` the table confirmed, before its numbers go out.
    pub(crate) async fn record(&self, row: Row, max: u64) -> Result<(), SeqError> {
        self.record_many(&[(row, max)]).await
    }

    /// Records the maxima `rows` the table confirmed (a batch of loads: one sync for all),
    /// before their numbers go out.
    pub(crate) async fn record_many(&self, rows: &[(Row, u64)]) -> Result<(), SeqError> {
        let new: Vec<(Row, u64)> = {
            let known = self.known();
            rows.iter()
                .filter(|(row, max)| known.get(row).is_none_or(|m| m < max))
                .copied()
                .collect()
        };
        if new.is_empty() {
            return Ok(());
        }
        let mut written = self.append(new.clone()).await;
        if let (Ok(()), Some(coord)) = (&written, self.remote.get()) {
            for ((kind, section), max) in new {
                if let Err(e) = coord.raise_floor(kind, section, max).await {
                    written = Err(SeqError::from(e));
                    break;
                }
            }
        }
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) =
            written.as_ref().err().map(ToString::to_string);
        written
    }

    /// Appends the raises to the host file (compacting it when due), merging what others
    /// appended.
    async fn append(&self, rows: Vec<(Row, u64)>) -> Result<(), SeqError> {
        let file = Arc::clone(&self.file);
        let sections = self.known().len() + rows.len();
        let (read, due, rows) = blocking(move || {
            file.append(&rows, sections)
                .map(|(read, due)| (read, due, rows))
        })
        .await?;
        let all = {
            let mut known = self.known();
            merge(&mut known, read);
            merge(&mut known, rows);
            due.then(|| known.iter().map(|(r, m)| (*r, *m)).collect::<Vec<_>>())
        };
        if let Some(all) = all {
            let file = Arc::clone(&self.file);
            if let Err(e) = blocking(move || file.compact(&all)).await {
                tracing::warn!("compacting the restore guard's file: {e}");
            }
        }
        Ok(())
    }

    /// Every floor known (the host file read again), by row.
    pub(crate) async fn all(&self) -> Result<Vec<(Row, u64)>, SeqError> {
        let file = Arc::clone(&self.file);
        let read = blocking(move || file.refresh()).await?;
        let mut known = self.known();
        merge(&mut known, read);
        let mut all: Vec<(Row, u64)> = known.iter().map(|(r, m)| (*r, *m)).collect();
        all.sort_unstable();
        Ok(all)
    }

    /// Checks `found`, the row of `row` as the table holds it: below its floor, the section is
    /// noted as went back (logged once) and refused for `key`.
    pub(crate) async fn check(&self, row: Row, found: i64, key: &SeqKey) -> Result<(), SeqError> {
        let (floor, remembered) = self.floor(row).await?;
        if found >= 0 && found as u64 >= floor {
            self.went().remove(&row);
            return Ok(());
        }
        Err(self.note(row, found, floor, remembered, key))
    }

    /// Checks a batch of loaded rows, `(row, found)` each, as [`Floors::check`] does, with one
    /// read of the host file (and of the coordinator's floors): a verdict per row, or the error
    /// when the guard cannot be read.
    pub(crate) async fn check_many(
        &self,
        rows: &[(Row, i64)],
        key: &SeqKey,
    ) -> Result<Vec<Result<(), SeqError>>, SeqError> {
        if let [(row, found)] = rows {
            return match self.check(*row, *found, key).await {
                Err(e) if !matches!(e, SeqError::WentBack { .. }) => Err(e),
                verdict => Ok(vec![verdict]),
            };
        }
        let file = Arc::clone(&self.file);
        let read = blocking(move || file.refresh()).await?;
        merge(&mut self.known(), read);
        let remote: HashMap<Row, u64> = match self.remote.get() {
            Some(coord) => coord.floors().await?.into_iter().collect(),
            None => HashMap::new(),
        };
        let mut verdicts = Vec::with_capacity(rows.len());
        for &(row, found) in rows {
            let local = self.known().get(&row).copied().unwrap_or(0);
            let (floor, remembered) = match remote.get(&row) {
                Some(&r) if r > local => {
                    merge(&mut self.known(), [(row, r)]);
                    (r, self.remembered(true))
                }
                _ => (local, self.remembered(false)),
            };
            verdicts.push(if found >= 0 && found as u64 >= floor {
                self.went().remove(&row);
                Ok(())
            } else {
                Err(self.note(row, found, floor, remembered, key))
            });
        }
        Ok(verdicts)
    }

    /// Whether `row` went back and was checked within the last second (its load would be
    /// refused from memory).
    pub(crate) fn went_back(&self, row: Row) -> bool {
        self.went()
            .get(&row)
            .is_some_and(|w| w.checked.elapsed() < RECHECK)
    }

    /// Notes `row` as went back (found at `found`, raised to `floor`); the refusal for `key`.
    pub(crate) fn note(
        &self,
        row: Row,
        found: i64,
        floor: u64,
        remembered: String,
        key: &SeqKey,
    ) -> SeqError {
        let mut went = self.went();
        if !went.contains_key(&row) {
            tracing::error!(
                section = row.1,
                kind = row.0,
                "{} (docs/seq.md, \"A restored table\")",
                crate::sequences::error::went_back(row.0, row.1, found, floor, &remembered)
            );
        }
        went.insert(
            row,
            WentBack {
                found,
                floor,
                remembered: remembered.clone(),
                checked: Instant::now(),
            },
        );
        SeqError::WentBack {
            key: key.to_string(),
            kind: row.0,
            section: row.1,
            found,
            floor,
            remembered,
        }
    }

    /// The refusal of `key` when its section went back and was checked within the last
    /// second; `None`: read its row again.
    pub(crate) fn refused(&self, row: Row, key: &SeqKey) -> Option<SeqError> {
        let went = self.went();
        let w = went.get(&row).filter(|w| w.checked.elapsed() < RECHECK)?;
        Some(SeqError::WentBack {
            key: key.to_string(),
            kind: row.0,
            section: row.1,
            found: w.found,
            floor: w.floor,
            remembered: w.remembered.clone(),
        })
    }

    /// Compares every row of the table with the floors (a start): the sections below are
    /// noted and returned as `(row, found, floor)`; a section with a floor but no row counts
    /// as found at 0.
    pub(crate) async fn scan(
        &self,
        rows: &[(i16, i64, i64)],
    ) -> Result<Vec<(Row, i64, u64)>, SeqError> {
        let floors = self.all().await?;
        let table: HashMap<Row, i64> = rows.iter().map(|&(k, s, m)| ((k, s), m)).collect();
        let mut below = Vec::new();
        let remembered = self.remembered(false);
        let mut went = self.went();
        for (row, floor) in floors {
            let found = table.get(&row).copied().unwrap_or(0);
            if found < 0 || (found as u64) < floor {
                below.push((row, found, floor));
                went.insert(
                    row,
                    WentBack {
                        found,
                        floor,
                        remembered: remembered.clone(),
                        checked: Instant::now(),
                    },
                );
            }
        }
        Ok(below)
    }

    /// What the guard is doing.
    pub(crate) fn status(&self) -> GuardStatus {
        GuardStatus {
            file: self.file.path().display().to_string(),
            went_back: self.went().len(),
            sections: self.known().len(),
            error: self.error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    /// The host file.
    pub(crate) fn path(&self) -> &std::path::Path {
        self.file.path()
    }
}

/// Runs a blocking file operation off the async workers (inline without a runtime).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, SeqError> {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => rt
            .spawn_blocking(f)
            .await
            .map_err(|e| SeqError::Guard(e.to_string()))?
            .map_err(SeqError::Guard),
        Err(_) => f().map_err(SeqError::Guard),
    }
}

impl crate::sequences::Inner {
    /// Compares every row of the table with the floors at a start (or a member's join): the
    /// sections below are refused from here on and logged in one line.
    pub(crate) async fn scan_floors(&self) -> Result<(), SeqError> {
        let rows = self.db.seq_rows().await?;
        let below = self.floors.scan(&rows).await?;
        if let Some(((kind, section), found, floor)) = below.first() {
            tracing::error!(
                went_back = below.len(),
                "vesta_seq at {} went back: {} section(s) hold less than they were raised to \
                 (remembered in {}), e.g. section {section} (kind {kind}) holds {found}, raised \
                 to {floor}; restored from a backup? Their keys are refused until the table is \
                 raised back above every number handed out (docs/seq.md, \"A restored table\")",
                self.db.url(),
                below.len(),
                self.floors.path().display()
            );
        }
        Ok(())
    }
}
