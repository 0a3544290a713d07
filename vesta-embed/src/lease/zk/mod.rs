//! The ZooKeeper side of the lease, on the async `zookeeper-client`: connect with a bounded
//! timeout, claim a machine ID (EPHEMERAL create), read and write its mark (a multi-op guarded by
//! the claim's and the mark's versions), release, and list everything for `vesta zk ls`.

use std::time::Duration;

mod error;

use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, MultiWriteError};

pub use error::{LeaseError, ZkCause};

use super::ZkSettings;
use super::rules::claim_order;
use super::znode::{Claim, Mark};

/// The outcome of writing a mark.
type Result<T> = std::result::Result<T, LeaseError>;

/// A ZooKeeper session used for leasing under one root.
#[derive(Debug, Clone)]
pub(crate) struct ZkLease {
    pub client: Client,
    root: String,
    acls: Acls<'static>,
    op_timeout: Duration,
}

/// Connects, bounded by `timeout`, with digest auth when configured.
pub(crate) async fn connect(s: &ZkSettings, timeout: Duration) -> Result<ZkLease> {
    let mut connector = Client::connector().with_session_timeout(s.session_timeout);
    if let Some(auth) = &s.auth {
        connector = connector.with_auth("digest", auth.as_bytes());
    }
    let unreachable = |cause: String| LeaseError::Unreachable {
        connect: s.connect.clone(),
        timeout_ms: timeout.as_millis(),
        cause,
    };
    // Fail fast per round (all hosts tried once), retry until the timeout. The client says only
    // "no hosts" or "timeout" when no session came about; other errors are kept as they are.
    let connector = connector.with_fail_eagerly();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last: Option<String> = None;
    let client = loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break None;
        }
        match tokio::time::timeout(left, connector.clone().connect(&s.connect)).await {
            Ok(Ok(c)) => break Some(c),
            Ok(Err(ZkError::NoHosts | ZkError::Timeout | ZkError::ConnectionLoss)) => {}
            Ok(Err(e)) => last = Some(e.to_string()),
            Err(_) => break None,
        }
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
    };
    let Some(client) = client else {
        let cause = match last {
            Some(cause) => cause,
            None => no_session_cause(&s.connect, PROBE_BUDGET.min(timeout)).await,
        };
        return Err(unreachable(cause));
    };
    let acls = if s.auth.is_some() {
        Acls::creator_all()
    } else {
        Acls::anyone_all()
    };
    Ok(ZkLease {
        op_timeout: client.session_timeout(),
        client,
        root: s.root.clone(),
        acls,
    })
}

/// A session on the ensemble of `s` asking `session_timeout` (digest auth when configured),
/// tried for `s.connect_timeout` with the diagnosis of a lease's connect, and the ACL its znodes
/// get (creator-only with auth): the machine-ID lease's connection, for another user of
/// `[zookeeper]` (vesta-service's sequences cluster). The server may grant another timeout:
/// [`Client::session_timeout`] says which.
pub async fn open_session(
    s: &ZkSettings,
    session_timeout: Duration,
) -> Result<(Client, Acls<'static>)> {
    let asked = ZkSettings {
        session_timeout,
        ..s.clone()
    };
    let zk = connect(&asked, s.connect_timeout).await?;
    Ok((zk.client, zk.acls))
}

/// The longest the diagnosis of a failed connect may take on top of the connect timeout (no
/// longer than the timeout itself either, so a lease thread retrying every beat keeps its pace).
const PROBE_BUDGET: Duration = Duration::from_millis(500);

/// Why no session came about, when the client only says "no hosts": a plain TCP connection to
/// each host (within `budget`) tells "nothing listens" from "something accepts but does not
/// speak ZooKeeper" (a hung server, a wrong port, a proxy without a backend).
async fn no_session_cause(connect: &str, budget: Duration) -> String {
    let probe = async {
        for host in hosts(connect) {
            if tokio::net::TcpStream::connect(host.as_str()).await.is_ok() {
                return Some(host);
            }
        }
        None
    };
    match tokio::time::timeout(budget, probe).await {
        Ok(Some(host)) => {
            format!("connected to {host} but ZooKeeper did not answer the session handshake")
        }
        _ => "no server accepted a connection".into(),
    }
}

/// The `host:port` of each server in a connect string (`tcp://` prefixes and a chroot suffix
/// dropped, ZooKeeper's port 2181 when none is given).
fn hosts(connect: &str) -> Vec<String> {
    connect
        .split(',')
        .filter_map(|h| {
            let h = h.trim();
            let h = h.split_once("://").map_or(h, |(_, rest)| rest);
            // A chroot follows the last host: `host:port/chroot`.
            let h = h.split('/').next().unwrap_or_default();
            match h {
                "" => None,
                h if h.contains(':') => Some(h.to_owned()),
                h => Some(format!("{h}:2181")),
            }
        })
        .collect()
}

impl ZkLease {
    /// The session timeout the server granted.
    pub fn session_timeout(&self) -> Duration {
        self.client.session_timeout()
    }

    fn claim_path(&self, machine: u64) -> String {
        format!("{}/machines/{machine}", self.root)
    }

    fn mark_path(&self, machine: u64) -> String {
        format!("{}/last/{machine}", self.root)
    }

    async fn call<T>(
        &self,
        op: &'static str,
        path: &str,
        fut: impl Future<Output = std::result::Result<T, ZkError>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.op_timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(cause)) => Err(LeaseError::Op {
                op,
                path: path.to_owned(),
                cause: ZkCause(cause),
            }),
            Err(_) => Err(LeaseError::Timeout {
                op,
                path: path.to_owned(),
                timeout_ms: self.op_timeout.as_millis(),
            }),
        }
    }

    /// Creates `<root>/machines` and `<root>/last` (and their parents) if missing.
    pub async fn ensure_dirs(&self) -> Result<()> {
        let options = CreateMode::Persistent.with_acls(self.acls);
        for dir in ["machines", "last"] {
            let path = format!("{}/{dir}", self.root);
            self.call("mkdir", &path, self.client.mkdir(&path, &options))
                .await?;
        }
        Ok(())
    }

    /// The machine IDs claimed now.
    pub async fn claimed(&self) -> Result<Vec<u64>> {
        let path = format!("{}/machines", self.root);
        let names = self
            .call("list", &path, self.client.list_children(&path))
            .await?;
        Ok(names.iter().filter_map(|n| n.parse().ok()).collect())
    }

    /// Claims `machine`: `Some(version)` of the new EPHEMERAL node, `None` if already taken.
    pub async fn try_claim(&self, machine: u64, claim: &Claim) -> Result<Option<i32>> {
        let path = self.claim_path(machine);
        let options = CreateMode::Ephemeral.with_acls(self.acls);
        let data = claim.to_bytes();
        match self
            .call("create", &path, self.client.create(&path, &data, &options))
            .await
        {
            Ok((stat, _)) => Ok(Some(stat.version)),
            Err(LeaseError::Op {
                cause: ZkCause(ZkError::NodeExists),
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Claims the preferred ID if free, else the lowest free one of `pool`; a static ID
    /// (`s.fixed`) only itself.
    pub async fn claim_any(
        &self,
        s: &ZkSettings,
        preferred: Option<u64>,
        claim: &Claim,
    ) -> Result<(u64, i32)> {
        self.ensure_dirs().await?;
        if let Some(machine) = s.fixed {
            if let Some(version) = self.try_claim(machine, claim).await? {
                return Ok((machine, version));
            }
            return Err(LeaseError::StaticIdHeld {
                connect: s.connect.clone(),
                machine,
                holder: self.claim_holder(machine).await,
                root: s.root.clone(),
            });
        }
        let claimed = self.claimed().await?;
        for machine in claim_order(&s.pool, preferred, &claimed) {
            if let Some(version) = self.try_claim(machine, claim).await? {
                return Ok((machine, version));
            }
        }
        Err(LeaseError::PoolExhausted {
            pool: s.pool_name,
            first: *s.pool.start(),
            last: *s.pool.end(),
            count: s.pool.end() - s.pool.start() + 1,
            root: s.root.clone(),
        })
    }

    /// `host:pid` of the claim on `machine`, for messages (what is known when it cannot be read).
    async fn claim_holder(&self, machine: u64) -> String {
        let path = self.claim_path(machine);
        match self.call("get", &path, self.client.get_data(&path)).await {
            Ok((data, _)) => match Claim::from_bytes(&data) {
                Ok(c) => format!("{}:{}", c.host, c.pid),
                Err(_) => "an unreadable claim".into(),
            },
            Err(_) => "another issuer (its claim is gone now)".into(),
        }
    }

    /// The mark of `machine` and its version, if one was ever written.
    pub async fn read_mark(&self, machine: u64) -> Result<Option<(Mark, i32)>> {
        let path = self.mark_path(machine);
        match self.call("get", &path, self.client.get_data(&path)).await {
            Ok((data, stat)) => Mark::from_bytes(&data)
                .map(|m| Some((m, stat.version)))
                .map_err(|message| LeaseError::Corrupt { path, message }),
            Err(LeaseError::Op {
                cause: ZkCause(ZkError::NoNode),
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes the mark of `machine`: creates it (`mark_version` `None`) or replaces it, in one
    /// multi-op that also checks our claim is still the node we created and nobody else wrote
    /// the mark since. Returns the mark's new version.
    pub async fn write_mark(
        &self,
        machine: u64,
        claim_version: i32,
        mark_version: Option<i32>,
        mark: &Mark,
    ) -> Result<i32> {
        let claim_path = self.claim_path(machine);
        let path = self.mark_path(machine);
        let data = mark.to_bytes();
        let mut multi = self.client.new_multi_writer();
        let built = multi
            .add_check_version(&claim_path, claim_version)
            .and_then(|()| match mark_version {
                Some(v) => multi.add_set_data(&path, &data, Some(v)),
                None => {
                    multi.add_create(&path, &data, &CreateMode::Persistent.with_acls(self.acls))
                }
            });
        if let Err(cause) = built {
            return Err(LeaseError::Op {
                op: "write mark",
                path,
                cause: ZkCause(cause),
            });
        }
        let results = self
            .call("write mark", &path, async {
                multi.commit().await.map_err(|e| match e {
                    MultiWriteError::RequestFailed { source }
                    | MultiWriteError::OperationFailed { source, .. } => source,
                })
            })
            .await?;
        match mark_version {
            Some(v) => Ok(results
                .iter()
                .find_map(|r| match r {
                    zookeeper_client::MultiWriteResult::SetData { stat } => Some(stat.version),
                    _ => None,
                })
                .unwrap_or(v + 1)),
            None => Ok(0),
        }
    }

    /// The session that owns the claim on `machine` (`None` if unclaimed): tells whether a
    /// version conflict on the mark means someone else took the ID or only that a write whose
    /// answer was lost did go through.
    pub async fn claim_owner(&self, machine: u64) -> Result<Option<i64>> {
        let path = self.claim_path(machine);
        match self.call("get", &path, self.client.get_data(&path)).await {
            Ok((_, stat)) => Ok(Some(stat.ephemeral_owner)),
            Err(LeaseError::Op {
                cause: ZkCause(ZkError::NoNode),
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes our claim (only the version we created), so the ID is free at once.
    pub async fn release(&self, machine: u64, claim_version: i32) -> Result<()> {
        let path = self.claim_path(machine);
        match self
            .call(
                "delete",
                &path,
                self.client.delete(&path, Some(claim_version)),
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(LeaseError::Op {
                cause: ZkCause(ZkError::NoNode),
                ..
            }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every claim and mark under the root, by machine ID.
    pub async fn list(&self) -> Result<Vec<LeaseRow>> {
        let mut ids: Vec<u64> = Vec::new();
        for dir in ["machines", "last"] {
            let path = format!("{}/{dir}", self.root);
            match self
                .call("list", &path, self.client.list_children(&path))
                .await
            {
                Ok(names) => ids.extend(names.iter().filter_map(|n| n.parse::<u64>().ok())),
                Err(LeaseError::Op {
                    cause: ZkCause(ZkError::NoNode),
                    ..
                }) => {}
                Err(e) => return Err(e),
            }
        }
        ids.sort_unstable();
        ids.dedup();
        let mut rows = Vec::with_capacity(ids.len());
        for machine in ids {
            let path = self.claim_path(machine);
            let (claim, session, claimed_ms) =
                match self.call("get", &path, self.client.get_data(&path)).await {
                    Ok((data, stat)) => (
                        Claim::from_bytes(&data).ok(),
                        Some(format!("{:#x}", stat.ephemeral_owner)),
                        u64::try_from(stat.ctime).ok(),
                    ),
                    Err(LeaseError::Op {
                        cause: ZkCause(ZkError::NoNode),
                        ..
                    }) => (None, None, None),
                    Err(e) => return Err(e),
                };
            let mark = match self.read_mark(machine).await {
                Ok(m) => m.map(|(m, _)| m),
                Err(LeaseError::Corrupt { .. }) => None,
                Err(e) => return Err(e),
            };
            rows.push(LeaseRow {
                machine,
                held: session.is_some(),
                claim,
                session,
                claimed_ms,
                mark,
            });
        }
        Ok(rows)
    }
}

/// One machine ID as `vesta zk ls` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    /// The machine ID.
    pub machine: u64,
    /// True if a claim node exists (someone holds it now).
    pub held: bool,
    /// Who holds it, if the claim's data could be read.
    pub claim: Option<Claim>,
    /// The holder's ZooKeeper session (hex).
    pub session: Option<String>,
    /// When the claim node was created, by ZooKeeper's clock (ms since the Unix epoch).
    pub claimed_ms: Option<u64>,
    /// Its high-water mark, if one was ever written.
    pub mark: Option<Mark>,
}

/// Retires the mark of `machine` under the root of `settings` (`vesta machine retire --zk`): its
/// next holder starts as if none had been left. Holds the ID's claim meanwhile, so a live
/// holder refuses it (`StaticIdHeld`); `Ok(false)` when there was no mark. Runs its own small
/// runtime, so call it from synchronous code.
pub fn retire(settings: &ZkSettings, machine: u64) -> std::result::Result<bool, LeaseError> {
    runtime(settings)?.block_on(async {
        let zk = connect(settings, settings.connect_timeout).await?;
        zk.ensure_dirs().await?;
        let claim = Claim {
            host: super::host_name(),
            pid: std::process::id(),
            instance: Some("retiring the mark".into()),
            started_ms: 0,
            claimed_ms: 0,
        };
        let Some(version) = zk.try_claim(machine, &claim).await? else {
            return Err(LeaseError::StaticIdHeld {
                connect: settings.connect.clone(),
                machine,
                holder: zk.claim_holder(machine).await,
                root: settings.root.clone(),
            });
        };
        let path = zk.mark_path(machine);
        let deleted = match zk
            .call("delete", &path, zk.client.delete(&path, None))
            .await
        {
            Ok(()) => Ok(true),
            Err(LeaseError::Op {
                cause: ZkCause(ZkError::NoNode),
                ..
            }) => Ok(false),
            Err(e) => Err(e),
        };
        let released = zk.release(machine, version).await;
        let deleted = deleted?;
        released.map(|()| deleted)
    })
}

/// Reads every lease under the root of `settings` (for `vesta zk ls`); runs its own small
/// runtime, so call it from synchronous code.
pub fn inspect(settings: &ZkSettings) -> std::result::Result<Vec<LeaseRow>, LeaseError> {
    runtime(settings)?.block_on(async {
        let zk = connect(settings, settings.connect_timeout).await?;
        zk.list().await
    })
}

/// A small runtime for a command's one ZooKeeper call.
fn runtime(settings: &ZkSettings) -> std::result::Result<tokio::runtime::Runtime, LeaseError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LeaseError::Unreachable {
            connect: settings.connect.clone(),
            timeout_ms: 0,
            cause: format!("cannot start a runtime: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use crate::{Issuer, IssuerConfig, MachineSource};

    #[test]
    fn hosts_of_a_connect_string() {
        assert_eq!(
            hosts("a:1, tcp://b:2,c/chroot/x"),
            vec!["a:1", "b:2", "c:2181"]
        );
        assert_eq!(hosts("127.0.0.1:2181/vesta"), vec!["127.0.0.1:2181"]);
    }

    /// A TCP listener that accepts connections and never answers, until dropped.
    struct SilentServer {
        addr: String,
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<usize>>,
    }

    impl SilentServer {
        fn start() -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let stop = Arc::new(AtomicBool::new(false));
            let flag = stop.clone();
            let thread = std::thread::spawn(move || {
                let mut held = Vec::new();
                while !flag.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => held.push(stream),
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
                held.len()
            });
            SilentServer {
                addr,
                stop,
                thread: Some(thread),
            }
        }

        /// Stops accepting; how many connections it accepted.
        fn stop(&mut self) -> usize {
            self.stop.store(true, Ordering::Relaxed);
            self.thread.take().map_or(0, |t| t.join().unwrap())
        }
    }

    impl Drop for SilentServer {
        fn drop(&mut self) {
            self.stop();
        }
    }

    fn leased_config(connect: &str) -> IssuerConfig {
        let mut c = IssuerConfig::default();
        c.machine.source = MachineSource::Zookeeper;
        c.zookeeper.connect = connect.into();
        c.zookeeper.connect_timeout_ms = 700;
        c
    }

    #[test]
    fn a_server_that_accepts_but_never_answers_is_named_as_such() {
        let mut silent = SilentServer::start();
        let started = std::time::Instant::now();
        let err = Issuer::start(leased_config(&silent.addr))
            .unwrap_err()
            .to_string();
        let took = started.elapsed();
        assert_eq!(
            err,
            format!(
                "cannot reach ZooKeeper at {0} within 700 ms (zookeeper.connect_timeout_ms): \
                 connected to {0} but ZooKeeper did not answer the session handshake",
                silent.addr
            )
        );
        assert!(
            // The connect timeout (700 ms) and the probe; 5 s of margin for a busy machine.
            took < Duration::from_millis(700) + PROBE_BUDGET * 2 + Duration::from_secs(5),
            "{took:?}"
        );
        assert!(silent.stop() >= 1, "the client really connected");
    }

    #[test]
    fn nothing_listening_is_named_as_such() {
        let addr = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let err = Issuer::start(leased_config(&addr)).unwrap_err().to_string();
        assert!(
            err.ends_with(
                "within 700 ms (zookeeper.connect_timeout_ms): no server accepted a connection"
            ),
            "{err}"
        );
    }
}
