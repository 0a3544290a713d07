//! The sessions: each incarnation opens one of its own (its member znode's lease), reads and
//! releases use the current one or one that holds no znode; every call is bounded by its
//! session's timeout, and a failure is classified (session lost, compare lost) and named.

use std::time::Duration;

use vesta_embed::lease::{LeaseError, open_zk_session};
use zookeeper_client::{Acls, Client, Error as ZkError};

use super::ZkCoordinator;
use crate::cluster::CoordError;

/// What a ZooKeeper call failed with, and on which znode.
#[derive(Debug, thiserror::Error)]
pub(super) enum Failure {
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
    pub(super) fn session_lost(&self) -> bool {
        matches!(
            self,
            Failure::Op {
                cause: ZkError::SessionExpired | ZkError::ClientClosed | ZkError::AuthFailed,
                ..
            }
        )
    }

    /// True when a compare-and-set lost: the znode changed, exists, or is gone.
    pub(super) fn lost_race(&self) -> bool {
        matches!(
            self,
            Failure::Op {
                cause: ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode,
                ..
            }
        )
    }
}

/// One session and the incarnation it holds the member znode for.
#[derive(Clone)]
pub(super) struct Session {
    pub(super) client: Client,
    pub(super) acls: Acls<'static>,
    /// The incarnation whose member znode lives in this session (`None`: reads and releases).
    pub(super) holder: Option<String>,
    /// The member znode's version as this session created it (the takes' fence).
    pub(super) member_version: i32,
}

impl Session {
    pub(super) fn alive(&self) -> bool {
        !self.client.state().is_terminated()
    }

    pub(super) fn id(&self) -> i64 {
        self.client.session_id().0
    }
}

impl ZkCoordinator {
    pub(super) fn failed(&self, f: Failure) -> CoordError {
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

    pub(super) fn current(&self) -> Option<Session> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the session; the one replaced closes once its last clone is dropped.
    pub(super) fn replace(&self, session: Option<Session>) {
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = session;
    }

    /// The live session holding `holder`'s member znode, if any.
    pub(super) fn member_session(&self, holder: &str) -> Option<Session> {
        self.current()
            .filter(|s| s.holder.as_deref() == Some(holder) && s.alive())
    }

    /// Forgets the session when a call said it is gone.
    pub(super) fn forget_if_lost(&self, s: &Session, f: &Failure) {
        if f.session_lost() || !s.alive() {
            let mut current = self.session.lock().unwrap_or_else(|e| e.into_inner());
            if current.as_ref().is_some_and(|c| c.id() == s.id()) {
                *current = None;
            }
        }
    }

    pub(super) async fn open(
        &self,
        timeout: Duration,
        holder: Option<&str>,
    ) -> Result<Session, Failure> {
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
    pub(super) async fn any_session(&self) -> Result<Session, Failure> {
        if let Some(s) = self.current().filter(Session::alive) {
            return Ok(s);
        }
        let s = self.open(self.settings.session_timeout, None).await?;
        self.replace(Some(s.clone()));
        Ok(s)
    }

    /// `fut` bounded by the session's timeout (a later answer would not extend anything).
    pub(super) async fn bounded<T>(
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
    pub(super) async fn call<T>(
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
}
