//! What the key-value coordinators (etcd, ZooKeeper) store and how it reads back as the beat's
//! rows: one JSON record per member and per set, the same in both, so a member's row and a
//! set's row mean the same whichever store holds them. Each store adds only where a record
//! lives and what its generation is (etcd's `mod_revision`, a znode's version + 1).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::cluster::{ClusterRows, MemberRow, SetRow};
use crate::sets::SETS;
use serde::{Deserialize, Serialize};

/// A member's record: who holds it and where clients reach it.
#[derive(Serialize, Deserialize)]
pub(super) struct Member {
    pub(super) holder: String,
    pub(super) tcp: String,
    pub(super) rest: String,
}

/// A set's record: its owner (`None`: released) and the owning incarnation.
#[derive(Serialize, Deserialize)]
pub(super) struct Set {
    pub(super) owner: Option<u64>,
    pub(super) holder: String,
}

/// Now, ms since the Unix epoch: a read's time, for display only (a member record present is
/// a live lease, judged by the store).
pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The rows of a read at `now_ms`: every set released at generation 0 unless
/// `sets` has its record (set, JSON, generation); the members whose name and JSON record read
/// (others are skipped), live, sorted. An unreadable set record is owned by nobody live: it is
/// taken by compare-and-set like a released set.
pub(super) fn rows<'a>(
    sets: impl IntoIterator<Item = (u32, &'a [u8], i64)>,
    members: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    now_ms: i64,
) -> ClusterRows {
    let mut rows: Vec<SetRow> = (0..SETS)
        .map(|set| SetRow {
            set,
            owner: None,
            holder: String::new(),
            generation: 0,
        })
        .collect();
    for (set, data, generation) in sets {
        let Some(row) = rows.get_mut(set as usize) else {
            continue;
        };
        let s = serde_json::from_slice::<Set>(data).unwrap_or(Set {
            owner: None,
            holder: String::new(),
        });
        row.owner = s.owner;
        row.holder = s.holder;
        row.generation = generation;
    }
    let mut members: Vec<MemberRow> = members
        .into_iter()
        .filter_map(|(name, data)| {
            let member = name.parse::<u64>().ok()?;
            let m = serde_json::from_slice::<Member>(data).ok()?;
            Some(MemberRow {
                member,
                holder: m.holder,
                tcp: m.tcp,
                rest: m.rest,
                expires_ms: now_ms,
            })
        })
        .collect();
    members.sort_by_key(|m| m.member);
    ClusterRows {
        now_ms,
        members,
        sets: rows,
    }
}
