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

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::records::{self, Member, Set, now_ms};
use crate::cluster::{ClusterRows, CoordError, CoordFuture, Coordinator, Joining};
use crate::sets::SETS;
use vesta_embed::lease::{LeaseError, ZkSettings, open_zk_session};
use zookeeper_client::{
    Acls, Client, CreateMode, Error as ZkError, MultiReadResult, MultiWriteError,
};

/// Set writes per multi: a chunk that fails is retried set by set.
const PER_MULTI: usize = 64;

/// What a ZooKeeper call failed with, and on which znode.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// No session came about (vesta-embed's message names the connect key and timeout).
    #[error("{0}")]
    Connect(LeaseError),
    /// The server refused the call.
    #[error("{op} {path}: {cause}")]
    Op {
        op: &'static str,
        path: String,
        cause: ZkError,
    },
    /// No answer in time.
    #[error("{op} {path}: no answer within {timeout_ms} ms")]
    Timeout {
        op: &'static str,
        path: String,
        timeout_ms: u128,
    },
    /// The server granted a session shorter than the lease: a renewal could not hold it.
    #[error(
        "ZooKeeper granted a session timeout of {granted_ms} ms, shorter than \
         seq.cluster_ttl_ms {ttl_ms}: raise the servers' maxSessionTimeout (zoo.cfg) to at \
         least {ttl_ms} ms or lower seq.cluster_ttl_ms"
    )]
    ShortSession { granted_ms: u128, ttl_ms: u128 },
    /// A value could not be encoded.
    #[error("encoding {0}")]
    Encode(#[from] serde_json::Error),
}

impl Failure {
    /// True when the call says the session is gone for good (and so any lease in it).
    fn session_lost(&self) -> bool {
        matches!(
            self,
            Failure::Op {
                cause: ZkError::SessionExpired | ZkError::ClientClosed | ZkError::AuthFailed,
                ..
            }
        )
    }

    /// True when a compare-and-set lost: the znode changed, exists, or is gone.
    fn lost_race(&self) -> bool {
        matches!(
            self,
            Failure::Op {
                cause: ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode,
                ..
            }
        )
    }
}

/// How a set is written at a generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Write {
    /// Generation 0: never written, so created.
    Create,
    /// `setData` at this version.
    At(i32),
}

/// A set znode's generation: its version + 1, 0 when absent.
fn generation(version: Option<i32>) -> i64 {
    version.map_or(0, |v| i64::from(v) + 1)
}

/// How to write a set read at `generation` (`None`: no znode has it, so nothing matches).
fn write_at(generation: i64) -> Option<Write> {
    match generation {
        0 => Some(Write::Create),
        g => i32::try_from(g - 1).ok().filter(|v| *v >= 0).map(Write::At),
    }
}

/// One session and the incarnation it holds the member znode for.
#[derive(Clone)]
struct Session {
    client: Client,
    acls: Acls<'static>,
    /// The incarnation whose member znode lives in this session (`None`: reads and releases).
    holder: Option<String>,
    /// The member znode's version as this session created it (the takes' fence).
    member_version: i32,
}

impl Session {
    fn alive(&self) -> bool {
        !self.client.state().is_terminated()
    }

    fn id(&self) -> i64 {
        self.client.session_id().0
    }
}

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

    fn members_dir(&self) -> String {
        format!("{}/members", self.prefix)
    }

    fn member_path(&self, member: u64) -> String {
        format!("{}/members/{member}", self.prefix)
    }

    fn set_path(&self, set: u32) -> String {
        format!("{}/sets/{set:03}", self.prefix)
    }

    fn failed(&self, f: Failure) -> CoordError {
        let path = match &f {
            Failure::Op { path, .. } | Failure::Timeout { path, .. } => path.clone(),
            _ => self.prefix.clone(),
        };
        let message = match f {
            Failure::Op { op, cause, .. } => format!("{op}: {cause}"),
            Failure::Timeout { op, timeout_ms, .. } => {
                format!("{op}: no answer within {timeout_ms} ms")
            }
            f => f.to_string(),
        };
        CoordError::Service {
            service: format!("zookeeper {} {path}", self.settings.connect),
            message,
        }
    }

    fn current(&self) -> Option<Session> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the session; the one replaced closes once its last clone is dropped.
    fn replace(&self, session: Option<Session>) {
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = session;
    }

    /// The live session holding `holder`'s member znode, if any.
    fn member_session(&self, holder: &str) -> Option<Session> {
        self.current()
            .filter(|s| s.holder.as_deref() == Some(holder) && s.alive())
    }

    /// Forgets the session when a call said it is gone.
    fn forget_if_lost(&self, s: &Session, f: &Failure) {
        if f.session_lost() || !s.alive() {
            let mut current = self.session.lock().unwrap_or_else(|e| e.into_inner());
            if current.as_ref().is_some_and(|c| c.id() == s.id()) {
                *current = None;
            }
        }
    }

    async fn open(&self, timeout: Duration, holder: Option<&str>) -> Result<Session, Failure> {
        let (client, acls) = open_zk_session(&self.settings, timeout)
            .await
            .map_err(Failure::Connect)?;
        Ok(Session {
            client,
            acls,
            holder: holder.map(str::to_owned),
            member_version: 0,
        })
    }

    /// A live session for reads and releases: the current one, else a new one of
    /// `zookeeper.session_timeout_ms` that holds no member znode.
    async fn any_session(&self) -> Result<Session, Failure> {
        if let Some(s) = self.current().filter(Session::alive) {
            return Ok(s);
        }
        let s = self.open(self.settings.session_timeout, None).await?;
        self.replace(Some(s.clone()));
        Ok(s)
    }

    /// `fut` bounded by the session's timeout (a later answer would not extend anything).
    async fn bounded<T>(
        s: &Session,
        op: &'static str,
        path: &str,
        fut: impl Future<Output = T>,
    ) -> Result<T, Failure> {
        let timeout = s.client.session_timeout();
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| Failure::Timeout {
                op,
                path: path.to_owned(),
                timeout_ms: timeout.as_millis(),
            })
    }

    /// A single call: bounded, its error named.
    async fn call<T>(
        s: &Session,
        op: &'static str,
        path: &str,
        fut: impl Future<Output = Result<T, ZkError>>,
    ) -> Result<T, Failure> {
        Self::bounded(s, op, path, fut)
            .await?
            .map_err(|cause| Failure::Op {
                op,
                path: path.to_owned(),
                cause,
            })
    }

    async fn ensure_dirs(&self, s: &Session) -> Result<(), Failure> {
        let options = CreateMode::Persistent.with_acls(s.acls);
        for dir in ["members", "sets"] {
            let path = format!("{}/{dir}", self.prefix);
            Self::call(s, "mkdir", &path, s.client.mkdir(&path, &options)).await?;
        }
        Ok(())
    }

    /// The session of `j.holder`'s incarnation: the one an earlier try opened, else a new one
    /// asking `j.ttl`, refused when ZooKeeper grants less.
    async fn incarnation_session(&self, j: Joining<'_>) -> Result<Session, Failure> {
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

    async fn join_inner(&self, j: Joining<'_>) -> Result<bool, Failure> {
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

    async fn renew_inner(&self, s: &Session, member: u64) -> Result<bool, Failure> {
        let path = self.member_path(member);
        // Through the leader (which refuses an expired session), then this session's znode.
        Self::call(s, "sync", &path, s.client.sync(&path)).await?;
        let stat = Self::call(s, "exists", &path, s.client.check_stat(&path)).await?;
        Ok(stat.is_some_and(|st| st.ephemeral_owner == s.id()))
    }

    async fn read_inner(&self) -> Result<ClusterRows, Failure> {
        let s = self.any_session().await?;
        let now_ms = now_ms();
        let prefix = self.prefix.clone();
        Self::call(&s, "sync", &prefix, s.client.sync(&prefix)).await?;
        let members_dir = self.members_dir();
        // Every set and the member list in one request: one view of them.
        let mut multi = s.client.new_multi_reader();
        for set in 0..SETS {
            multi
                .add_get_data(&self.set_path(set))
                .map_err(|cause| Failure::Op {
                    op: "read",
                    path: self.set_path(set),
                    cause,
                })?;
        }
        multi
            .add_get_children(&members_dir)
            .map_err(|cause| Failure::Op {
                op: "read",
                path: members_dir.clone(),
                cause,
            })?;
        let mut results = Self::call(&s, "read", &prefix, multi.commit()).await?;
        let listed = match results.pop() {
            Some(MultiReadResult::Children { children }) => children,
            Some(MultiReadResult::Error {
                err: ZkError::NoNode,
            }) => Vec::new(),
            Some(MultiReadResult::Error { err }) => {
                return Err(Failure::Op {
                    op: "list",
                    path: members_dir,
                    cause: err,
                });
            }
            _ => Vec::new(),
        };
        let mut sets = Vec::with_capacity(results.len());
        for (set, result) in results.into_iter().enumerate() {
            sets.push(match result {
                MultiReadResult::Data { data, stat } => Some((data, stat.version)),
                MultiReadResult::Error {
                    err: ZkError::NoNode,
                } => None,
                MultiReadResult::Error { err } => {
                    return Err(Failure::Op {
                        op: "get",
                        path: self.set_path(set as u32),
                        cause: err,
                    });
                }
                _ => None,
            });
        }
        // The members listed, after the sets: one gone since is dead.
        let mut members = Vec::new();
        if !listed.is_empty() {
            let mut multi = s.client.new_multi_reader();
            for name in &listed {
                let path = format!("{members_dir}/{name}");
                multi.add_get_data(&path).map_err(|cause| Failure::Op {
                    op: "read",
                    path,
                    cause,
                })?;
            }
            let results = Self::call(&s, "read", &members_dir, multi.commit()).await?;
            for (name, result) in listed.into_iter().zip(results) {
                match result {
                    MultiReadResult::Data { data, .. } => members.push((name, data)),
                    MultiReadResult::Error {
                        err: ZkError::NoNode,
                    } => {}
                    MultiReadResult::Error { err } => {
                        return Err(Failure::Op {
                            op: "get",
                            path: format!("{members_dir}/{name}"),
                            cause: err,
                        });
                    }
                    _ => {}
                }
            }
        }
        Ok(rows(&sets, &members, now_ms))
    }

    /// Writes `value` on each `(set, generation)` still at that generation, each multi fenced
    /// by `fence` (a znode and the version it must have): a chunk at a time, a chunk that
    /// failed set by set. How many were written.
    async fn put_sets(
        &self,
        s: &Session,
        fence: Option<(&str, i32)>,
        sets: &[(u32, i64)],
        value: &Set,
    ) -> Result<u64, Failure> {
        let data = serde_json::to_vec(value)?;
        let writes: Vec<(String, Write)> = sets
            .iter()
            .filter_map(|&(set, g)| Some((self.set_path(set), write_at(g)?)))
            .collect();
        let mut done = 0;
        for chunk in writes.chunks(PER_MULTI) {
            if self.commit(s, fence, chunk, &data).await? {
                done += chunk.len() as u64;
                continue;
            }
            if chunk.len() == 1 {
                continue;
            }
            for write in chunk {
                if self
                    .commit(s, fence, std::slice::from_ref(write), &data)
                    .await?
                {
                    done += 1;
                }
            }
        }
        Ok(done)
    }

    /// One multi: the fence's check, then the writes. `false` when a compare lost.
    async fn commit(
        &self,
        s: &Session,
        fence: Option<(&str, i32)>,
        writes: &[(String, Write)],
        data: &[u8],
    ) -> Result<bool, Failure> {
        let path = writes
            .first()
            .map_or(self.prefix.as_str(), |w| w.0.as_str());
        let op_failed = |cause| Failure::Op {
            op: "write",
            path: path.to_owned(),
            cause,
        };
        let options = CreateMode::Persistent.with_acls(s.acls);
        let mut multi = s.client.new_multi_writer();
        if let Some((member, version)) = fence {
            multi
                .add_check_version(member, version)
                .map_err(op_failed)?;
        }
        for (set, write) in writes {
            match *write {
                Write::Create => multi.add_create(set, data, &options),
                Write::At(version) => multi.add_set_data(set, data, Some(version)),
            }
            .map_err(op_failed)?;
        }
        let result = Self::bounded(s, "write", path, multi.commit()).await?;
        let f = match result {
            Ok(_) => return Ok(true),
            Err(MultiWriteError::OperationFailed { source, .. })
            | Err(MultiWriteError::RequestFailed { source }) => op_failed(source),
        };
        if f.lost_race() {
            return Ok(false);
        }
        self.forget_if_lost(s, &f);
        Err(f)
    }
}

/// The cluster's rows from the set znodes (by set: data and version, `None` when absent) and
/// the member znodes present (name, data), at `now_ms`: a set znode's generation is its version
/// + 1.
fn rows(
    sets: &[Option<(Vec<u8>, i32)>],
    members: &[(String, Vec<u8>)],
    now_ms: i64,
) -> ClusterRows {
    let sets = sets.iter().enumerate().filter_map(|(set, read)| {
        let (data, version) = read.as_ref()?;
        Some((
            u32::try_from(set).ok()?,
            data.as_slice(),
            generation(Some(*version)),
        ))
    });
    let members = members
        .iter()
        .map(|(name, data)| (name.as_str(), data.as_slice()));
    records::rows(sets, members, now_ms)
}

impl Coordinator for ZkCoordinator {
    fn describe(&self) -> String {
        format!("zookeeper {} {}", self.settings.connect, self.prefix)
    }

    fn lease(&self, ttl: Duration) -> Duration {
        let granted = match self.granted_ms.load(Ordering::Relaxed) {
            0 => ttl,
            ms => Duration::from_millis(ms),
        };
        // A tick is at most half the granted timeout (see the module doc).
        granted + granted / 2
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
    use crate::cluster::is_live;

    fn coordinator() -> ZkCoordinator {
        let mut section = vesta_embed::config::ZooKeeperSection::default();
        section.connect = "127.0.0.1:1".into();
        section.root = "/r".into();
        ZkCoordinator::new(ZkSettings::connection(&section).expect("settings"), "s")
    }

    #[test]
    fn a_generation_is_the_version_plus_one_and_maps_back_to_the_write() {
        assert_eq!(generation(None), 0);
        assert_eq!(generation(Some(0)), 1);
        assert_eq!(generation(Some(41)), 42);
        assert_eq!(write_at(0), Some(Write::Create));
        assert_eq!(write_at(1), Some(Write::At(0)));
        assert_eq!(write_at(42), Some(Write::At(41)));
        assert_eq!(
            write_at(generation(Some(i32::MAX))),
            Some(Write::At(i32::MAX))
        );
        assert_eq!(write_at(i64::from(i32::MAX) + 2), None);
        assert_eq!(write_at(-1), None);
    }

    #[test]
    fn znodes_read_as_rows_every_set_there_a_present_member_live() {
        let mut sets: Vec<Option<(Vec<u8>, i32)>> = vec![None; SETS as usize];
        sets[7] = Some((br#"{"owner":950,"holder":"h:1:a.3"}"#.to_vec(), 8));
        sets[8] = Some((br#"{"owner":null,"holder":""}"#.to_vec(), 9));
        sets[9] = Some((b"not json".to_vec(), 0));
        let rows = rows(
            &sets,
            &[
                (
                    "951".into(),
                    br#"{"holder":"h:2:b.1","tcp":"127.0.0.1:2","rest":""}"#.to_vec(),
                ),
                (
                    "950".into(),
                    br#"{"holder":"h:1:a.3","tcp":"127.0.0.1:1","rest":""}"#.to_vec(),
                ),
                ("x".into(), b"{}".to_vec()),
            ],
            1_000,
        );
        assert_eq!(
            rows.members.iter().map(|m| m.member).collect::<Vec<_>>(),
            [950, 951]
        );
        assert!(rows.members.iter().all(|m| is_live(m, rows.now_ms)));
        assert_eq!(rows.sets.len(), SETS as usize);
        let set = |s: usize| &rows.sets[s];
        assert_eq!(
            (set(7).owner, set(7).holder.as_str(), set(7).generation),
            (Some(950), "h:1:a.3", 9)
        );
        assert_eq!((set(8).owner, set(8).generation), (None, 10));
        assert_eq!((set(9).owner, set(9).generation), (None, 1));
        assert_eq!((set(0).owner, set(0).generation), (None, 0));
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
