//! What can go wrong with a ZooKeeper lease ([`LeaseError`]), each naming the ensemble and
//! the root, and the client's own error kept out of this crate's API ([`ZkCause`]).

use zookeeper_client::Error as ZkError;

/// What the ZooKeeper client said (shown with `Display`; its type is the client crate's, kept
/// out of this crate's API).
#[derive(Debug, Clone)]
pub struct ZkCause(pub(crate) ZkError);

impl std::fmt::Display for ZkCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a lease operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// No session could be established in time.
    #[error(
        "cannot reach ZooKeeper at {connect} within {timeout_ms} ms \
         (zookeeper.connect_timeout_ms): {cause}"
    )]
    Unreachable {
        /// The connect string.
        connect: String,
        /// The timeout that ran out.
        timeout_ms: u128,
        /// The client's last error.
        cause: String,
    },
    /// A ZooKeeper call failed.
    #[error("ZooKeeper {op} {path}: {cause}")]
    Op {
        /// What was attempted.
        op: &'static str,
        /// On which znode.
        path: String,
        /// The client's error.
        cause: ZkCause,
    },
    /// A call got no answer in time.
    #[error("ZooKeeper {op} {path}: no answer within {timeout_ms} ms")]
    Timeout {
        /// What was attempted.
        op: &'static str,
        /// On which znode.
        path: String,
        /// The timeout.
        timeout_ms: u128,
    },
    /// Every machine ID of the pool is claimed.
    #[error(
        "machine-ID pool exhausted: all {count} IDs of the {pool} pool {first}..={last} are held \
         under {root}/machines; stop an issuer or widen the pool (machine.server_pool_start)"
    )]
    PoolExhausted {
        /// `embed` or `server`.
        pool: &'static str,
        /// First ID of the pool.
        first: u64,
        /// Last ID of the pool.
        last: u64,
        /// How many IDs the pool has.
        count: u64,
        /// The lease root.
        root: String,
    },
    /// The static machine ID this issuer registers is claimed by another live issuer.
    #[error(
        "ZooKeeper {connect}: machine {machine} is held by {holder} under {root}/machines: \
         another issuer runs with this static machine ID (each needs its own)"
    )]
    StaticIdHeld {
        /// The connect string.
        connect: String,
        /// The static machine ID.
        machine: u64,
        /// `host:pid` of the claim, as its node says.
        holder: String,
        /// The lease root.
        root: String,
    },
    /// A znode holds something that is not ours.
    #[error("{path}: {message}")]
    Corrupt {
        /// The znode.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl LeaseError {
    /// True if the session (and so any claim made in it) is gone for good.
    pub(crate) fn session_lost(&self) -> bool {
        matches!(
            self,
            LeaseError::Op {
                cause: ZkCause(
                    ZkError::SessionExpired
                        | ZkError::ClientClosed
                        | ZkError::SessionMoved
                        | ZkError::AuthFailed
                ),
                ..
            }
        )
    }

    /// True if the claim or the mark changed under us: someone else holds the ID now.
    pub(crate) fn lease_taken(&self) -> bool {
        matches!(
            self,
            LeaseError::Op {
                cause: ZkCause(ZkError::BadVersion | ZkError::NoNode),
                ..
            }
        )
    }
}
