//! The sequences cluster coordinated through ZooKeeper (`[seq] coordination = "zookeeper"`,
//! docs/seq-cluster.md): the [`Coordinator`] on a session vesta-embed opens from the server's
//! `[zookeeper]` section (connect string, root, digest auth and its creator-only ACL), so a
//! deployment whose machine IDs are leased from ZooKeeper keeps the cluster's leases there too.
//!
//! Znodes, under `<zookeeper.root>/seq/<store>` (`<store>`: the sequences database's own name,
//! [`store_id`](crate::cluster::store_id), so servers on one database form one
//! cluster and servers on two never meet):
//!
//! - `members/<member>`: EPHEMERAL, `{"holder", "tcp", "rest"}`, created by a join only when
//!   absent. **Its session is the lease**: ZooKeeper deletes the znode when it expires the
//!   session, so a znode present is a live lease, judged by ZooKeeper. Each incarnation opens a
//!   session of its own (asking `ttl` as its timeout): a rejoin after a lost lease never reuses
//!   the dead one, and an earlier incarnation's znode blocks the join (`false`) until ZooKeeper
//!   expires its session.
//! - `sets/<set>`: PERSISTENT, `{"owner", "holder"}`. **Generation = znode version + 1**, 0 for
//!   a znode never created: a create makes version 0 (generation 1) and every `setData` raises
//!   the version, so every change raises the generation, and a take or release at generation
//!   `g` is `create` (`g = 0`) or `setData` at version `g - 1`, refused by the leader if anyone
//!   wrote it since. (Versions, not `mzxid`, because `setData` compares versions.) Never delete
//!   a set znode: its generation would restart at 0.
//!
//! **Lease arithmetic.** ZooKeeper expires a session no earlier than `negotiated timeout` after
//! it last heard from it, at the next tick boundary after that. A join refuses a negotiated
//! timeout shorter than `ttl` (the server's `maxSessionTimeout` caps it), so a renewal — a
//! round trip on the member's own session, `sync` then `exists` on its znode checking the
//! `ephemeralOwner` is this session — was heard after the beat sent it, and the lease runs at
//! least `ttl` past that send, while the member serves only 2/3 of `ttl` past it. A session
//! that expired or closed answers `false`, never an error that could look live. `lease()` is
//! the negotiated timeout plus half of it for the tick: ZooKeeper's `minSessionTimeout` is two
//! ticks unless an operator lowered it, so a tick is at most half of any granted timeout (the
//! client cannot ask the tick). Were that wrong, a join would only give up waiting for an
//! earlier incarnation's znode too early: it never takes a member whose znode exists.
//!
//! The client library pings the session by itself, so a live process keeps its znode even when
//! its beat is stuck. That only costs availability: the member stops serving at the end of its
//! term, and nobody takes its sets while its znode exists. A SIGKILLed process stops pinging,
//! and its znode goes after the lease.
//!
//! **Reads.** A read may be answered by a follower that lags the leader, so `read` first
//! `sync`s, then reads every set and the member list in one multi-read (one consistent view),
//! then the members' data. Staleness never makes two owners: every take is a compare-and-set
//! decided by the leader, and a take planned on a stale generation fails. A follower cut off
//! from the leader does not confirm a renewal either: the `sync` goes to the leader, which
//! refuses an expired session (in an ensemble the leader learns of a session's pings through
//! its follower every half tick, well inside the third of a `ttl` between a term's end and the
//! lease's).
//!
//! **Fencing.** A take is one multi: a version check of the taker's own member znode (as
//! created in this session) and the set writes, so a member whose znode is gone takes nothing.
//! etcd's takes compare the sets alone (the term already ends before the lease); the check
//! costs nothing here and adds to what ZooKeeper guarantees anyway (a write from an expired
//! session is refused). Releases
//! are compare-and-set on the sets alone: releasing what one owns at that generation is safe
//! whether or not the lease still runs.
//!
//! Here: [`ZkCoordinator`] and its [`Coordinator`] calls; the sessions and bounded calls
//! (`session.rs`), a member's znode (`members.rs`), the read (`read.rs`), set writes at a
//! generation (`sets.rs`).

mod floors;
mod members;
mod read;
mod session;
mod sets;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use vesta_embed::lease::ZkSettings;
use zookeeper_client::Error as ZkError;

use self::session::{Failure, Session};
use super::records::Set;
use crate::cluster::{ClusterRows, CoordFuture, Coordinator, Joining};

/// The cluster's leases and sets in ZooKeeper.
pub struct ZkCoordinator {
    settings: ZkSettings,
    /// `<root>/seq/<store>`.
    prefix: String,
    session: Mutex<Option<Session>>,
    /// The session timeout ZooKeeper granted the last member session, ms (0: none yet).
    granted_ms: AtomicU64,
}

impl std::fmt::Debug for ZkCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ZkCoordinator({})", self.describe())
    }
}

impl ZkCoordinator {
    /// The coordinator of the cluster on the sequences database named `store`, in the
    /// ZooKeeper of `settings` (see [`ZkSettings::connection`]).
    pub fn new(settings: ZkSettings, store: &str) -> Self {
        let prefix = format!("{}/seq/{store}", settings.root);
        ZkCoordinator {
            settings,
            prefix,
            session: Mutex::new(None),
            granted_ms: AtomicU64::new(0),
        }
    }

    pub(super) fn members_dir(&self) -> String {
        format!("{}/members", self.prefix)
    }

    pub(super) fn member_path(&self, member: u64) -> String {
        format!("{}/members/{member}", self.prefix)
    }

    pub(super) fn set_path(&self, set: u32) -> String {
        format!("{}/sets/{set:03}", self.prefix)
    }

    pub(super) fn floors_dir(&self) -> String {
        format!("{}/floors", self.prefix)
    }
}

impl Coordinator for ZkCoordinator {
    fn describe(&self) -> String {
        format!("zookeeper {} {}", self.settings.connect, self.prefix)
    }

    fn kind(&self) -> crate::Coordination {
        crate::Coordination::Zookeeper
    }

    fn lease(&self, ttl: Duration) -> Duration {
        let granted = match self.granted_ms.load(Ordering::Relaxed) {
            0 => ttl,
            ms => Duration::from_millis(ms),
        };
        // A tick is at most half the granted timeout (see the module doc).
        granted + granted / 2
    }

    fn floor(&self, kind: i16, section: i64) -> CoordFuture<'_, Option<u64>> {
        Box::pin(async move {
            self.floor_inner(kind, section)
                .await
                .map_err(|f| self.failed(f))
        })
    }

    fn raise_floor(&self, kind: i16, section: i64, max: u64) -> CoordFuture<'_, ()> {
        Box::pin(async move {
            self.raise_floor_inner(kind, section, max)
                .await
                .map_err(|f| self.failed(f))
        })
    }

    fn floors(&self) -> CoordFuture<'_, Vec<((i16, i64), u64)>> {
        Box::pin(async move { self.floors_inner().await.map_err(|f| self.failed(f)) })
    }

    fn init(&self) -> CoordFuture<'_, ()> {
        Box::pin(async move {
            let s = self.any_session().await.map_err(|f| self.failed(f))?;
            self.ensure_dirs(&s).await.map_err(|f| {
                self.forget_if_lost(&s, &f);
                self.failed(f)
            })
        })
    }

    fn join<'a>(&'a self, j: Joining<'a>) -> CoordFuture<'a, bool> {
        Box::pin(async move { self.join_inner(j).await.map_err(|f| self.failed(f)) })
    }

    fn renew<'a>(&'a self, member: u64, holder: &'a str, _ttl: Duration) -> CoordFuture<'a, bool> {
        Box::pin(async move {
            let Some(s) = self.member_session(holder) else {
                return Ok(false);
            };
            match self.renew_inner(&s, member).await {
                Ok(true) => Ok(true),
                Ok(false) => {
                    // The znode is gone or another session's: this incarnation is over, and
                    // the next one gets a session of its own.
                    self.replace(None);
                    Ok(false)
                }
                Err(f) if f.session_lost() || !s.alive() => {
                    self.forget_if_lost(&s, &f);
                    Ok(false)
                }
                Err(f) => Err(self.failed(f)),
            }
        })
    }

    fn leave<'a>(&'a self, member: u64, holder: &'a str) -> CoordFuture<'a, ()> {
        Box::pin(async move {
            let Some(s) = self.member_session(holder) else {
                return Ok(());
            };
            self.replace(None);
            // Deleting the znode frees the member at once (closing the session would too, but
            // a process exiting may not wait for it): the others take the sets, released first.
            let path = self.member_path(member);
            match Self::call(
                &s,
                "delete",
                &path,
                s.client.delete(&path, Some(s.member_version)),
            )
            .await
            {
                Ok(())
                | Err(Failure::Op {
                    cause: ZkError::NoNode | ZkError::BadVersion,
                    ..
                }) => Ok(()),
                Err(f) => Err(self.failed(f)),
            }
        })
    }

    fn read(&self) -> CoordFuture<'_, ClusterRows> {
        Box::pin(async move {
            self.read_inner().await.map_err(|f| {
                if let Some(s) = self.current() {
                    self.forget_if_lost(&s, &f);
                }
                self.failed(f)
            })
        })
    }

    fn take_sets<'a>(
        &'a self,
        member: u64,
        holder: &'a str,
        sets: &'a [(u32, i64)],
    ) -> CoordFuture<'a, u64> {
        Box::pin(async move {
            if sets.is_empty() {
                return Ok(0);
            }
            let Some(s) = self.member_session(holder) else {
                return Ok(0);
            };
            let owned = Set {
                owner: Some(member),
                holder: holder.into(),
            };
            let member_path = self.member_path(member);
            self.put_sets(&s, Some((&member_path, s.member_version)), sets, &owned)
                .await
                .map_err(|f| self.failed(f))
        })
    }

    fn release_sets<'a>(
        &'a self,
        _holder: &'a str,
        sets: &'a [(u32, i64)],
    ) -> CoordFuture<'a, u64> {
        // The generations were read with this incarnation as owner: a write at them releases
        // only what is still ours, from any session.
        Box::pin(async move {
            if sets.is_empty() {
                return Ok(0);
            }
            let released = Set {
                owner: None,
                holder: String::new(),
            };
            let s = self.any_session().await.map_err(|f| self.failed(f))?;
            self.put_sets(&s, None, sets, &released)
                .await
                .map_err(|f| self.failed(f))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::CoordError;

    fn coordinator() -> ZkCoordinator {
        let mut section = vesta_embed::config::ZooKeeperSection::default();
        section.connect = "127.0.0.1:1".into();
        section.root = "/r".into();
        ZkCoordinator::new(ZkSettings::connection(&section).expect("settings"), "s")
    }

    #[test]
    fn paths_and_the_lease_of_a_granted_session() {
        let c = coordinator();
        assert_eq!(c.set_path(7), "/r/seq/s/sets/007");
        assert_eq!(c.member_path(950), "/r/seq/s/members/950");
        assert_eq!(c.describe(), "zookeeper 127.0.0.1:1 /r/seq/s");
        assert_eq!(
            c.lease(Duration::from_millis(1500)),
            Duration::from_millis(2250)
        );
        c.granted_ms.store(4000, Ordering::Relaxed);
        assert_eq!(
            c.lease(Duration::from_millis(1500)),
            Duration::from_millis(6000)
        );
    }

    #[test]
    fn errors_name_the_service_the_znode_and_the_call() {
        let c = coordinator();
        let e = c.failed(Failure::Op {
            op: "create",
            path: c.member_path(950),
            cause: ZkError::NodeExists,
        });
        let CoordError::Service { service, message } = e else {
            panic!("not a service error");
        };
        assert_eq!(service, "zookeeper 127.0.0.1:1 /r/seq/s/members/950");
        assert!(message.starts_with("create: "), "{message}");
        let short = c
            .failed(Failure::ShortSession {
                granted_ms: 1000,
                ttl_ms: 6000,
            })
            .to_string();
        assert!(
            short.contains("seq.cluster_ttl_ms 6000") && short.contains("maxSessionTimeout"),
            "{short}"
        );
        assert!(
            Failure::Op {
                op: "x",
                path: String::new(),
                cause: ZkError::SessionExpired,
            }
            .session_lost()
        );
        assert!(
            Failure::Op {
                op: "x",
                path: String::new(),
                cause: ZkError::BadVersion,
            }
            .lost_race()
        );
    }
}
