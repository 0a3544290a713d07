//! What operators do to a table's ownership and its restore guard (`vesta seq mode`, `vesta seq
//! raise`): read how it is served and by whom, change the recorded mode while nothing serves
//! it, and raise its rows back above what was handed out — never lowering one.

use std::sync::Arc;

use super::Role;
use super::lease::describe;
use super::mode::{self, Mode};
use crate::cluster::{Coordinator, MemberRow, SqlCoordinator, live_members};
use crate::db::owner::LeaseRow;
use crate::{SeqError, SeqKey, Sequences};

/// How a table is served now, as its database says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The recorded mode (`None`: no server ever recorded one).
    pub mode: Option<Mode>,
    /// The table's lease while it runs: its holder, addresses and time left.
    pub lease: Option<String>,
    /// Members with a live lease in the database (a cluster coordinated there).
    pub members: Vec<MemberRow>,
}

/// How `vesta seq raise` moves the rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaiseTo {
    /// Each row below what it was raised to, as this host (and the coordinator given)
    /// remembers it, up to that.
    Floors,
    /// Every row up by this much (a restore nothing remembers: the numbers handed out since
    /// the backup, with room to spare).
    By(u64),
    /// Every row below this, up to it.
    To(u64),
}

/// A row `vesta seq raise` moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RaisedRow {
    /// The row's kind (0 numeric sections, 1 string buckets, 3 spread buckets).
    pub kind: i16,
    /// The section (or bucket).
    pub section: i64,
    /// Its `max_seq` before (`None`: no row).
    pub from: Option<i64>,
    /// After.
    pub to: i64,
}

impl Sequences {
    /// How the table is served now: its recorded mode, the table's lease, the live members
    /// in the database (a cluster coordinated in etcd or ZooKeeper is seen only there).
    pub async fn served(&self) -> Result<Served, SeqError> {
        let db = &self.inner.db;
        let lease = db.owner_read().await?.filter(LeaseRow::live);
        // This process's own lease is not someone else's.
        let own = self.owner_status().map(|s| s.holder);
        let lease = lease
            .filter(|l| own.as_deref() != Some(l.holder.as_str()))
            .map(|l| describe(&l));
        Ok(Served {
            mode: mode::recorded(db).await?,
            lease,
            members: live_members(&SqlCoordinator::of(Arc::clone(&self.inner))).await?,
        })
    }

    /// Records `mode` as how the table is served unless it records one; refuses, naming
    /// both, a table recorded otherwise. A member calls it before its server starts (its join
    /// checks it again); a standalone owner's open does.
    pub async fn record_mode(&self, mode: Mode) -> Result<(), SeqError> {
        mode::claim(&self.inner.db, mode).await
    }

    /// Changes the recorded mode to `to` (`vesta seq mode --set`); the previous one. Only from
    /// sequences opened as a tool ([`Owner::tool`](super::Owner::tool)), which hold the table's
    /// lease and saw no member live in the database; a cluster coordinated in etcd or
    /// ZooKeeper is the caller's to check first
    /// ([`refuse_if_served`](crate::coordination::refuse_if_served)).
    pub async fn set_mode(&self, to: Mode) -> Result<Option<Mode>, SeqError> {
        if self.inner.role != Role::Tool || self.inner.held.get().is_none() {
            return Err(SeqError::Cluster(
                "the mode is changed by a tool holding the table's lease (Owner::tool)".into(),
            ));
        }
        let db = &self.inner.db;
        let from = mode::recorded(db).await?;
        if from == Some(to) {
            return Ok(from);
        }
        if !mode::set_mode(db, from, to).await? {
            return Err(SeqError::Cluster(format!(
                "the mode of vesta_seq at {} changed while it was being set: read it again",
                db.url()
            )));
        }
        Ok(from)
    }

    /// Remembers the floors `coord` keeps (a cluster coordinated in etcd or ZooKeeper) beside
    /// this host's, for [`Sequences::raise_table`] and every check.
    pub fn with_floors_of(&self, coord: Arc<dyn Coordinator>) {
        self.inner.floors.coordinated(coord);
    }

    /// Raises the table's rows as `how` says, every row or only `key`'s section, never
    /// lowering one; the rows it moved. Safe beside a running server: a server that refused a
    /// section that went back reads it again within a second and serves it once raised.
    pub async fn raise_table(
        &self,
        how: RaiseTo,
        key: Option<&SeqKey>,
    ) -> Result<Vec<RaisedRow>, SeqError> {
        let db = &self.inner.db;
        let only = key.map(row_of);
        let rows = db.seq_rows().await?;
        let found = |row: (i16, i64)| rows.iter().find(|r| (r.0, r.1) == row).map(|r| r.2);
        let mut targets: Vec<((i16, i64), i64)> = Vec::new();
        match how {
            RaiseTo::Floors => {
                let mut floors = self.inner.floors.all().await?;
                if let Some(coord) = self.inner.floors.remote() {
                    floors.extend(coord.floors().await?);
                }
                for (row, floor) in floors {
                    let to = i64::try_from(floor).unwrap_or(i64::MAX);
                    if found(row).is_none_or(|f| f < to) {
                        targets.push((row, to));
                    }
                }
            }
            RaiseTo::By(n) => {
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                for &(kind, section, max) in &rows {
                    targets.push(((kind, section), max.saturating_add(n)));
                }
                if let Some(row) = only.filter(|r| found(*r).is_none()) {
                    targets.push((row, n));
                }
            }
            RaiseTo::To(n) => {
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                for &(kind, section, max) in &rows {
                    if max < n {
                        targets.push(((kind, section), n));
                    }
                }
                if let Some(row) = only.filter(|r| found(*r).is_none()) {
                    targets.push((row, n));
                }
            }
        }
        targets.sort_unstable();
        // The highest target per row (the host's floors and the coordinator's may both name it).
        targets.reverse();
        targets.dedup_by_key(|(row, _)| *row);
        targets.reverse();
        let mut raised = Vec::new();
        for (row, to) in targets {
            if only.is_some_and(|o| o != row) {
                continue;
            }
            if db.seq_raise_to(row.0, row.1, to).await? {
                raised.push(RaisedRow {
                    kind: row.0,
                    section: row.1,
                    from: found(row),
                    to,
                });
            }
        }
        Ok(raised)
    }
}

/// The row of `key`'s section.
fn row_of(key: &SeqKey) -> (i16, i64) {
    key.place().row()
}
