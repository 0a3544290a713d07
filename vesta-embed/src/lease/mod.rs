//! The lease on a machine ID: one model, four sources of it (a static ID's state file,
//! ZooKeeper, an SQL table, etcd; the fifth way, a static ID with nothing to keep its mark, needs
//! no lease). A holder may issue only within a term that each confirmed renewal extends, every
//! renewal writes a promise (a mark) covering all the holder issued or may still issue in that
//! term, and a successor starts only after the mark, never trusted backwards. docs/zookeeper.md
//! explains the rules for operators.
//!
//! - `rules`: the rules themselves, pure and unit-tested with a manual clock —
//!   term, promise marks, watchdog, floor from a mark, start guard, final clean mark.
//! - `worker`: the one lease thread (start → beats → watchdog → final mark) and its handle.
//! - Sources: `static_source` (a static ID and its state file), `zk_source` (ZooKeeper),
//!   `sql_source` (a `vesta_machine` table, feature `sql`; the calls in `sql`), `etcd_source`
//!   (etcd v3, feature `etcd`; the calls in `etcd`).
//! - What every source shares: `counted_in` (a mark's layout and epoch; the ID space), `hold`
//!   (one process per state file and per static ID on a host), `state_file` (the local file of
//!   a static ID, and ZooKeeper's second copy of the mark), `leased_generator` (the generator
//!   with the lease state the issuer reports).
//! - Around ZooKeeper: [`ZkSettings`], `zk` (the calls), `znode` (what the znodes hold; etcd's
//!   marks too), and [`inspect`] for `vesta zk ls`.

#[cfg(any(feature = "state-file", feature = "sql", feature = "etcd"))]
pub(crate) mod counted_in;
#[cfg(feature = "etcd")]
mod etcd;
#[cfg(feature = "etcd")]
pub(crate) mod etcd_source;
#[cfg(test)]
mod floor_props;
#[cfg(feature = "state-file")]
pub(crate) mod hold;
pub(crate) mod leased_generator;
// Each leasing source (features zookeeper, sql, etcd) uses its own part of the shared rules and
// the lease thread; dead code is checked in the build with all of them (the workspace's).
#[cfg_attr(
    not(all(feature = "zookeeper", feature = "sql", feature = "etcd")),
    allow(dead_code)
)]
pub(crate) mod rules;
#[cfg(feature = "sql")]
mod sql;
#[cfg(feature = "sql")]
pub(crate) mod sql_source;
#[cfg(feature = "state-file")]
pub(crate) mod state_file;
#[cfg(feature = "state-file")]
pub(crate) mod static_source;
#[cfg(feature = "tokio")]
#[cfg_attr(
    not(all(feature = "zookeeper", feature = "sql", feature = "etcd")),
    allow(dead_code)
)]
pub(crate) mod worker;
#[cfg(feature = "zookeeper")]
mod zk;
mod zk_settings;
#[cfg(feature = "zookeeper")]
pub(crate) mod zk_source;
#[cfg(any(feature = "zookeeper", feature = "etcd"))]
mod znode;

#[cfg(feature = "etcd")]
pub use etcd::{EtcdClient, EtcdKv, EtcdRow, EtcdSettings};
#[cfg(feature = "state-file")]
pub use hold::arbiter::{HostClaim, arbiter_name};
#[cfg(feature = "state-file")]
pub use hold::memory::hold_dir as host_hold_dir;
#[cfg(feature = "state-file")]
pub use hold::retire_host_hold;
#[cfg(feature = "sql")]
pub use sql::{MachineRow, SqlLease, SqlSettings};
#[cfg(feature = "state-file")]
pub use state_file::retire as retire_state_file;
#[cfg(feature = "zookeeper")]
pub use zk::{
    LeaseError, LeaseRow, ZkCause, inspect, open_session as open_zk_session, retire as retire_zk,
};
pub use zk_settings::ZkSettings;
#[cfg(any(feature = "zookeeper", feature = "etcd"))]
pub use znode::{Claim, Mark};

/// The machine's host name, for claim nodes and the ordinal source (best effort).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}
