//! Which store a sequences cluster is coordinated through (`[seq] coordination`,
//! docs/seq-cluster.md): the sequences' own database (vesta-segment's `SqlCoordinator`, the
//! default), etcd ([`etcd`], through the server's `[etcd]` section, the one its machine ID is
//! leased from when `machine.source = "etcd"`) or ZooKeeper ([`zookeeper`], through the
//! `[zookeeper]` section likewise). Here because this crate sees both vesta-segment (the beat
//! and its [`Coordinator`] trait) and vesta-embed (the etcd and ZooKeeper clients).

pub mod etcd;
mod records;
pub mod zookeeper;

use std::sync::Arc;

use vesta_embed::config::{EtcdSection, ZooKeeperSection};
use vesta_embed::lease::{EtcdSettings, ZkSettings};
use vesta_segment::seq::cluster::{Coordinator, SqlCoordinator, store_id};
use vesta_segment::{Coordination, Sequences};

use crate::error::{ConfigError, ServeError};

/// The config sections a coordinator outside the database is reached through.
#[derive(Clone, Copy, Debug)]
pub struct Reach<'a> {
    /// `[etcd]`, for `coordination = "etcd"`.
    pub etcd: &'a EtcdSection,
    /// `[zookeeper]`, for `coordination = "zookeeper"`.
    pub zookeeper: &'a ZooKeeperSection,
}

/// Checks that `coordination` can be reached with these sections: etcd needs
/// `etcd.endpoints`, ZooKeeper `zookeeper.connect`. The error names the keys.
pub fn check(coordination: Coordination, reach: Reach<'_>) -> Result<(), ConfigError> {
    let refused = |section: &str, e: vesta_embed::ConfigError| {
        ConfigError::Inconsistent(format!(
            "seq.coordination = \"{coordination}\" reaches {section} through the [{}] section: {e}",
            coordination.as_str()
        ))
    };
    match coordination {
        Coordination::Sql => Ok(()),
        Coordination::Etcd => EtcdSettings::connection(reach.etcd)
            .map(|_| ())
            .map_err(|e| refused("etcd", e)),
        Coordination::Zookeeper => ZkSettings::connection(reach.zookeeper)
            .map(|_| ())
            .map_err(|e| refused("ZooKeeper", e)),
    }
}

/// The coordinator of the cluster on `seqs`' database, in the store `coordination` names.
pub async fn coordinator(
    coordination: Coordination,
    reach: Reach<'_>,
    seqs: &Sequences,
) -> Result<Arc<dyn Coordinator>, ServeError> {
    check(coordination, reach)?;
    Ok(match coordination {
        Coordination::Sql => Arc::new(SqlCoordinator::new(seqs)),
        Coordination::Etcd => {
            let settings = EtcdSettings::connection(reach.etcd).map_err(ConfigError::from)?;
            let store = store_id(seqs).await.map_err(ServeError::Seq)?;
            Arc::new(etcd::EtcdCoordinator::new(settings, &store))
        }
        Coordination::Zookeeper => {
            let settings = ZkSettings::connection(reach.zookeeper).map_err(ConfigError::from)?;
            let store = store_id(seqs).await.map_err(ServeError::Seq)?;
            Arc::new(zookeeper::ZkCoordinator::new(settings, &store))
        }
    })
}

/// Refuses a server or tool about to use `seqs`' table outside a cluster while members are
/// live: those coordinated in the sequences' database, and, when `coordination` names another
/// store, those coordinated there (a cluster on etcd or ZooKeeper is invisible from the
/// database alone).
pub async fn refuse_if_clustered(
    coordination: Coordination,
    reach: Reach<'_>,
    seqs: &Sequences,
    how: &str,
) -> Result<(), ServeError> {
    use vesta_segment::seq::cluster::refuse_if_clustered as refuse;
    refuse(seqs, &SqlCoordinator::new(seqs), how)
        .await
        .map_err(ServeError::Seq)?;
    if coordination != Coordination::Sql {
        let coord = coordinator(coordination, reach, seqs).await?;
        refuse(seqs, coord.as_ref(), how)
            .await
            .map_err(ServeError::Seq)?;
    }
    Ok(())
}
