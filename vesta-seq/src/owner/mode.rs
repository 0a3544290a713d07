//! How a table is served, as the table records it (`vesta_seq_store`, item `mode`): by one
//! standalone server, or by a cluster coordinated in the database, etcd or ZooKeeper. The first
//! server records it; a server configured otherwise is refused naming both, and only an
//! explicit change ([`Sequences::set_mode`](crate::Sequences::set_mode)) while nothing serves
//! the table moves it. So members of two coordinations, or a standalone server beside a
//! cluster (each invisible to the other's leases), never serve one table at once.

use std::fmt;

use crate::db::Database;
use crate::{Coordination, SeqError};

/// How a table is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One server at a time, under the table's lease.
    Standalone,
    /// Members of a cluster, their leases and sets in the coordination named.
    Cluster(Coordination),
}

impl Mode {
    /// The value recorded (`standalone`, `cluster sql`, `cluster etcd`, `cluster zookeeper`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Standalone => "standalone",
            Mode::Cluster(Coordination::Sql) => "cluster sql",
            Mode::Cluster(Coordination::Etcd) => "cluster etcd",
            Mode::Cluster(Coordination::Zookeeper) => "cluster zookeeper",
        }
    }

    /// Parses a recorded value (or the words of `vesta seq mode --set`).
    pub fn parse(text: &str) -> Option<Mode> {
        match text.trim() {
            "standalone" => Some(Mode::Standalone),
            "cluster sql" | "cluster" => Some(Mode::Cluster(Coordination::Sql)),
            "cluster etcd" => Some(Mode::Cluster(Coordination::Etcd)),
            "cluster zookeeper" => Some(Mode::Cluster(Coordination::Zookeeper)),
            _ => None,
        }
    }

    /// Every value, for messages.
    pub const NAMES: &'static str =
        "\"standalone\", \"cluster sql\", \"cluster etcd\", \"cluster zookeeper\"";
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Standalone => f.write_str("standalone"),
            Mode::Cluster(c) => write!(f, "a cluster coordinated in {}", where_of(*c)),
        }
    }
}

fn where_of(c: Coordination) -> &'static str {
    match c {
        Coordination::Sql => "the database (sql)",
        Coordination::Etcd => "etcd",
        Coordination::Zookeeper => "ZooKeeper",
    }
}

/// What the table recorded, or `None` before any server did (a value this build does not
/// know is refused: a newer build's mode is not guessed at).
pub(crate) async fn recorded(db: &Database) -> Result<Option<Mode>, SeqError> {
    match db.store_item_read("mode").await? {
        None => Ok(None),
        Some(text) => Mode::parse(&text).map(Some).ok_or_else(|| SeqError::Mode {
            db: db.url().to_string(),
            recorded: text,
            configured: "a mode this build knows".into(),
        }),
    }
}

/// Records `mode` unless the table has one; refuses, naming both, a table recorded otherwise.
pub(crate) async fn claim(db: &Database, mode: Mode) -> Result<(), SeqError> {
    let found = db.store_item("mode", mode.as_str()).await?;
    if Mode::parse(&found) == Some(mode) {
        return Ok(());
    }
    Err(SeqError::Mode {
        db: db.url().to_string(),
        recorded: Mode::parse(&found).map_or(found, |m| m.to_string()),
        configured: mode.to_string(),
    })
}

/// Changes the recorded mode from `from` (as read) to `to`; false when another change came
/// first. The caller holds the table's lease and saw no member live.
pub(crate) async fn set_mode(
    db: &Database,
    from: Option<Mode>,
    to: Mode,
) -> Result<bool, SeqError> {
    Ok(db
        .store_item_swap("mode", from.map(Mode::as_str), to.as_str())
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_round_trips_and_reads_in_words() {
        for m in [
            Mode::Standalone,
            Mode::Cluster(Coordination::Sql),
            Mode::Cluster(Coordination::Etcd),
            Mode::Cluster(Coordination::Zookeeper),
        ] {
            assert_eq!(Mode::parse(m.as_str()), Some(m));
        }
        assert_eq!(
            Mode::parse("cluster"),
            Some(Mode::Cluster(Coordination::Sql))
        );
        assert_eq!(Mode::parse("cluster consul"), None);
        assert_eq!(
            Mode::Cluster(Coordination::Etcd).to_string(),
            "a cluster coordinated in etcd"
        );
    }
}
