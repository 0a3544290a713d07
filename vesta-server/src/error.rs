//! Errors of the server (why it did not start or stopped) and of the client (why a call got no
//! answer). Each message is the one line a user sees, naming what is wrong and what is allowed.

use std::net::SocketAddr;

use crate::proto::ErrorCode;

/// Why a server did not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is invalid (including a machine ID outside the server pool).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The issuer did not start (lease, state file, clock).
    #[error("starting the issuer: {0}")]
    Start(vesta_embed::StartError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {cause}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        cause: std::io::Error,
    },
    /// The machine ID could not be released cleanly at shutdown.
    #[error("releasing the machine ID: {0}")]
    Release(String),
    /// A background task failed unexpectedly.
    #[error("internal error: {0}")]
    Internal(String),
}

// By hand rather than `#[from]`, so the cause is printed once, not again as a `source`.
impl From<vesta_embed::StartError> for ServerError {
    fn from(e: vesta_embed::StartError) -> Self {
        ServerError::Start(e)
    }
}

/// Why a client call got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The client configuration is unusable.
    #[error("invalid client config: {0}")]
    Config(String),
    /// A server answered with an error that retrying elsewhere would not fix (bad argument,
    /// field out of range, time exhausted).
    #[error("server {endpoint} refused: {message} ({code})")]
    Refused {
        /// The server that answered.
        endpoint: String,
        /// The protocol error code.
        code: ErrorCode,
        /// The server's message.
        message: String,
    },
    /// No server answered within the retry budget, and no fallback is configured.
    #[error(
        "no server answered after {attempts} attempts over {elapsed_ms} ms; last error: {last}"
    )]
    Unavailable {
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed_ms: u64,
        /// The last failure seen.
        last: String,
    },
    /// The embedded fallback issuer failed too.
    #[error("fallback issuer: {0}")]
    Fallback(String),
}

/// Why one attempt on one endpoint got no answer; every kind is retried on the next endpoint.
/// (An `ERROR` answer is an answer: the retry loop decides on its code.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AttemptError {
    /// Connecting or the handshake failed: the endpoint is down.
    #[error("connect: {0}")]
    Connect(String),
    /// The connection broke (or the server said GOAWAY) before the answer came.
    #[error("connection lost: {0}")]
    Lost(String),
    /// No answer within the request timeout.
    #[error("no answer within {0} ms")]
    Timeout(u64),
}
