//! Errors of the client (why a call got no answer). Each message is the one line a user sees,
//! naming what is wrong and what is allowed. Why a server did not start is the shared
//! `vesta_service::ServeError`.

use crate::proto::ErrorCode;

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
