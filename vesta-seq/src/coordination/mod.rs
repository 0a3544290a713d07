//! Which store a sequences cluster is coordinated through (`[seq] coordination`,
//! docs/seq-cluster.md): the sequences' own database ([`SqlCoordinator`], the default), etcd
//! (`etcd`, feature `etcd`, through the `[etcd]` section, the one a machine ID is leased from
//! when `machine.source = "etcd"`) or ZooKeeper (`zookeeper`, feature `zookeeper`, through the
//! `[zookeeper]` section likewise), on vesta-embed's etcd client and ZooKeeper session.

#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(any(feature = "etcd", feature = "zookeeper"))]
mod records;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

use std::sync::Arc;

use vesta_embed::config::{EtcdSection, ZooKeeperSection};
use vesta_segment::ConfigError;

use crate::cluster::{Coordinator, SqlCoordinator};
use crate::{Coordination, SeqError, Sequences};

/// The config sections a coordinator outside the database is reached through.
#[derive(Clone, Copy, Debug)]
pub struct Reach<'a> {
    /// `[etcd]`, for `coordination = "etcd"`.
    pub etcd: &'a EtcdSection,
    /// `[zookeeper]`, for `coordination = "zookeeper"`.
    pub zookeeper: &'a ZooKeeperSection,
}

/// Checks that `coordination` can be reached with these sections: etcd needs
/// `etcd.endpoints`, ZooKeeper `zookeeper.connect`, and each this crate's feature of its
/// name. The error names the keys (or the feature).
pub fn check(coordination: Coordination, reach: Reach<'_>) -> Result<(), ConfigError> {
    #[cfg(any(feature = "etcd", feature = "zookeeper"))]
    let refused = |section: &str, e: vesta_embed::ConfigError| {
        ConfigError::Inconsistent(format!(
            "seq.coordination = \"{coordination}\" reaches {section} through the [{}] section: {e}",
            coordination.as_str()
        ))
    };
    #[cfg(not(all(feature = "etcd", feature = "zookeeper")))]
    let left_out = || {
        ConfigError::Inconsistent(format!(
            "seq.coordination = \"{coordination}\" needs vesta-seq built with its feature `{}`",
            coordination.as_str()
        ))
    };
    let _ = reach;
    match coordination {
        Coordination::Sql => Ok(()),
        #[cfg(feature = "etcd")]
        Coordination::Etcd => vesta_embed::lease::EtcdSettings::connection(reach.etcd)
            .map(|_| ())
            .map_err(|e| refused("etcd", e)),
        #[cfg(feature = "zookeeper")]
        Coordination::Zookeeper => vesta_embed::lease::ZkSettings::connection(reach.zookeeper)
            .map(|_| ())
            .map_err(|e| refused("ZooKeeper", e)),
        #[cfg(not(all(feature = "etcd", feature = "zookeeper")))]
        #[allow(unreachable_patterns)]
        _ => Err(left_out()),
    }
}

/// The coordinator of the cluster on `seqs`' database, in the store `coordination` names. A
/// configuration [`check`] refuses is [`SeqError::Config`].
pub async fn coordinator(
    coordination: Coordination,
    reach: Reach<'_>,
    seqs: &Sequences,
) -> Result<Arc<dyn Coordinator>, SeqError> {
    check(coordination, reach)?;
    Ok(match coordination {
        Coordination::Sql => Arc::new(SqlCoordinator::new(seqs)),
        #[cfg(feature = "etcd")]
        Coordination::Etcd => {
            let settings = vesta_embed::lease::EtcdSettings::connection(reach.etcd)
                .map_err(|e| ConfigError::Inconsistent(e.to_string()))?;
            let store = crate::cluster::store_id(seqs).await?;
            Arc::new(etcd::EtcdCoordinator::new(settings, &store))
        }
        #[cfg(feature = "zookeeper")]
        Coordination::Zookeeper => {
            let settings = vesta_embed::lease::ZkSettings::connection(reach.zookeeper)
                .map_err(|e| ConfigError::Inconsistent(e.to_string()))?;
            let store = crate::cluster::store_id(seqs).await?;
            Arc::new(zookeeper::ZkCoordinator::new(settings, &store))
        }
        #[allow(unreachable_patterns)]
        _ => unreachable!("check refuses a coordination this build left out"),
    })
}

/// Refuses a tool about to use `seqs`' table while a cluster coordinated outside the database
/// serves it: the table's recorded mode names the store (`cluster etcd`, `cluster zookeeper`),
/// reached through `reach` (a config without that section is refused, naming the keys). A
/// cluster in the database, a standalone server and another tool are seen by the table's lease
/// itself ([`Owner::tool`](crate::Owner::tool)).
pub async fn refuse_if_served(reach: Reach<'_>, seqs: &Sequences) -> Result<(), SeqError> {
    let served = seqs.served().await?;
    let Some(crate::Mode::Cluster(coordination)) = served.mode else {
        return Ok(());
    };
    if coordination == Coordination::Sql {
        return Ok(());
    }
    let coord = coordinator(coordination, reach, seqs).await?;
    let live = crate::cluster::live_members(coord.as_ref()).await?;
    if live.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = live.iter().map(|m| m.member.to_string()).collect();
    Err(SeqError::Held {
        db: seqs.url().to_string(),
        holder: format!(
            "a cluster (live members {}, coordinated in {})",
            ids.join(", "),
            coord.describe()
        ),
    })
}
