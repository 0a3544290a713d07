//! A member's znode: the directories made, an incarnation's session opened (refused when
//! ZooKeeper grants less than the lease asks), the EPHEMERAL znode created only when absent
//! (or found to be this session's own), and a renewal that goes through the leader.

use std::sync::atomic::Ordering;

use zookeeper_client::{CreateMode, Error as ZkError};

use super::ZkCoordinator;
use super::session::{Failure, Session};
use crate::cluster::Joining;
use crate::coordination::records::Member;

impl ZkCoordinator {
    pub(super) async fn ensure_dirs(&self, s: &Session) -> Result<(), Failure> {
        let options = CreateMode::Persistent.with_acls(s.acls);
        for dir in ["members", "sets", "floors"] {
            let path = format!("{}/{dir}", self.prefix);
            Self::call(s, "mkdir", &path, s.client.mkdir(&path, &options)).await?;
        }
        Ok(())
    }

    /// The session of `j.holder`'s incarnation: the one an earlier try opened, else a new one
    /// asking `j.ttl`, refused when ZooKeeper grants less.
    pub(super) async fn incarnation_session(&self, j: Joining<'_>) -> Result<Session, Failure> {
        if let Some(s) = self.member_session(j.holder) {
            return Ok(s);
        }
        // A new incarnation: the previous session (and any member znode in it) closes.
        self.replace(None);
        let s = self.open(j.ttl, Some(j.holder)).await?;
        let granted = s.client.session_timeout();
        if granted < j.ttl {
            return Err(Failure::ShortSession {
                granted_ms: granted.as_millis(),
                ttl_ms: j.ttl.as_millis(),
            });
        }
        self.granted_ms.store(
            u64::try_from(granted.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        if granted > j.ttl {
            tracing::info!(
                "ZooKeeper granted the cluster session {} ms (asked {} ms, its \
                 minSessionTimeout): a killed member's keys wait that long",
                granted.as_millis(),
                j.ttl.as_millis()
            );
        }
        self.replace(Some(s.clone()));
        Ok(s)
    }

    pub(super) async fn join_inner(&self, j: Joining<'_>) -> Result<bool, Failure> {
        let s = self.incarnation_session(j).await?;
        let path = self.member_path(j.member);
        let data = serde_json::to_vec(&Member {
            holder: j.holder.into(),
            tcp: j.tcp.into(),
            rest: j.rest.into(),
        })?;
        let options = CreateMode::Ephemeral.with_acls(s.acls);
        let version =
            match Self::call(&s, "create", &path, s.client.create(&path, &data, &options)).await {
                Ok((stat, _)) => Some(stat.version),
                Err(Failure::Op {
                    cause: ZkError::NodeExists,
                    ..
                }) => {
                    // Ours if an earlier try's answer was lost; else an earlier incarnation's,
                    // until ZooKeeper expires its session.
                    match Self::call(&s, "get", &path, s.client.get_data(&path)).await {
                        Ok((data, stat)) => serde_json::from_slice::<Member>(&data)
                            .ok()
                            .filter(|m| stat.ephemeral_owner == s.id() && m.holder == j.holder)
                            .map(|_| stat.version),
                        Err(Failure::Op {
                            cause: ZkError::NoNode,
                            ..
                        }) => None,
                        Err(f) => return Err(f),
                    }
                }
                Err(f) => return Err(f),
            };
        let Some(version) = version else {
            return Ok(false);
        };
        let mut current = self.session.lock().unwrap_or_else(|e| e.into_inner());
        match current.as_mut() {
            Some(c) if c.id() == s.id() => {
                c.member_version = version;
                Ok(true)
            }
            // Replaced meanwhile (a leave): not joined.
            _ => Ok(false),
        }
    }

    pub(super) async fn renew_inner(&self, s: &Session, member: u64) -> Result<bool, Failure> {
        let path = self.member_path(member);
        // Through the leader (which refuses an expired session), then this session's znode.
        Self::call(s, "sync", &path, s.client.sync(&path)).await?;
        let stat = Self::call(s, "exists", &path, s.client.check_stat(&path)).await?;
        Ok(stat.is_some_and(|st| st.ephemeral_owner == s.id()))
    }
}
