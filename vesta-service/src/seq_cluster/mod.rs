//! Which store a sequences cluster is coordinated through (`[seq] coordination`,
//! docs/seq-cluster.md): the sequences' own database (vesta-segment's `SqlCoordinator`, the
//! default) or etcd ([`etcd`], through the server's `[etcd]` section, the one its machine ID
//! is leased from when `machine.source = "etcd"`). Here because this crate sees both
//! vesta-segment (the beat and its [`Coordinator`] trait) and vesta-embed (the etcd client).

pub mod etcd;

use std::sync::Arc;

use vesta_embed::config::EtcdSection;
use vesta_embed::lease::EtcdSettings;
use vesta_segment::seq::cluster::{Coordinator, SqlCoordinator, store_id};
use vesta_segment::{Coordination, Sequences};

use crate::error::{ConfigError, ServeError};

/// Checks that `coordination` can be reached with these sections: etcd needs
/// `etcd.endpoints`. The error names the keys.
pub fn check(coordination: Coordination, etcd: &EtcdSection) -> Result<(), ConfigError> {
    match coordination {
        Coordination::Sql => Ok(()),
        Coordination::Etcd => EtcdSettings::connection(etcd).map(|_| ()).map_err(|e| {
            ConfigError::Inconsistent(format!(
                "seq.coordination = \"etcd\" reaches etcd through the [etcd] section: {e}"
            ))
        }),
    }
}

/// The coordinator of the cluster on `seqs`' database, in the store `coordination` names.
pub async fn coordinator(
    coordination: Coordination,
    etcd: &EtcdSection,
    seqs: &Sequences,
) -> Result<Arc<dyn Coordinator>, ServeError> {
    check(coordination, etcd)?;
    Ok(match coordination {
        Coordination::Sql => Arc::new(SqlCoordinator::new(seqs)),
        Coordination::Etcd => {
            let settings = EtcdSettings::connection(etcd).map_err(ConfigError::from)?;
            let store = store_id(seqs).await.map_err(ServeError::Seq)?;
            Arc::new(etcd::EtcdCoordinator::new(settings, &store))
        }
    })
}

/// Refuses a server or tool about to use `seqs`' table outside a cluster while members are
/// live: those coordinated in the sequences' database, and, when `coordination` names another
/// store, those coordinated there (a cluster on etcd is invisible from the database alone).
pub async fn refuse_if_clustered(
    coordination: Coordination,
    etcd: &EtcdSection,
    seqs: &Sequences,
    how: &str,
) -> Result<(), ServeError> {
    use vesta_segment::seq::cluster::refuse_if_clustered as refuse;
    refuse(seqs, &SqlCoordinator::new(seqs), how)
        .await
        .map_err(ServeError::Seq)?;
    if coordination != Coordination::Sql {
        let coord = coordinator(coordination, etcd, seqs).await?;
        refuse(seqs, coord.as_ref(), how)
            .await
            .map_err(ServeError::Seq)?;
    }
    Ok(())
}
