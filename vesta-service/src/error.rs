//! Why a server's configuration is refused and why a server did not start. Each message is the
//! one line an operator sees, naming the key or address at fault.

use std::net::SocketAddr;

/// A server configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or parsed, or an issuer value is invalid.
    #[error(transparent)]
    Load(#[from] vesta_embed::config::ConfigError),
    /// A `[server]` value is out of range.
    #[error("invalid config: {field} {value} is out of range: allowed {min}..={max}")]
    OutOfRange {
        /// The key, with its section (`server.max_batch`).
        field: &'static str,
        /// The rejected value.
        value: u64,
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
    },
    /// Values that do not fit together (the message names them).
    #[error("invalid config: {0}")]
    Inconsistent(String),
    /// A `[segment]` value is invalid (the message names the key).
    #[error("invalid config: {0}")]
    Segment(vesta_segment::ConfigError),
}

// By hand rather than `#[from]`, so the cause is printed once, not again as a `source`.
impl From<vesta_segment::ConfigError> for ConfigError {
    fn from(e: vesta_segment::ConfigError) -> Self {
        ConfigError::Segment(e)
    }
}

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {cause}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        cause: std::io::Error,
    },
    /// The issuer did not start (lease, state file, clock behind its mark).
    #[error("starting the issuer: {0}")]
    Issuer(vesta_embed::StartError),
    /// Segment mode could not start: a missing SQLite file or `leaf_alloc` table, or a database
    /// that refused the connection (an unreachable one does not stop the start).
    #[error("segments: {0}")]
    Segments(vesta_segment::SegmentError),
    /// Per-key sequences could not start: the database unreachable or refusing, the table not
    /// creatable, or a table grouping keys otherwise.
    #[error("seq: {0}")]
    Seq(vesta_seq::SeqError),
    /// The machine ID was not released cleanly at shutdown (a leased ID then expires with its
    /// ZooKeeper session; no duplicate can result).
    #[error("releasing the machine ID: {0}")]
    Release(String),
    /// A background task or thread could not be started or failed unexpectedly.
    #[error("internal error: {0}")]
    Internal(String),
}

// By hand rather than `#[from]`, so the cause is printed once, not again as a `source`.
impl From<vesta_embed::StartError> for ServeError {
    fn from(e: vesta_embed::StartError) -> Self {
        ServeError::Issuer(e)
    }
}

impl ServeError {
    /// A sequences cluster's coordination refused or failed: a configuration it refuses is
    /// [`ServeError::Config`] (as the config's own check says it), the rest [`ServeError::Seq`].
    pub fn from_coordination(e: vesta_seq::SeqError) -> Self {
        match e {
            vesta_seq::SeqError::Config(e) => ServeError::Config(e.into()),
            e => ServeError::Seq(e),
        }
    }
}

impl From<vesta_embed::config::ConfigError> for ServeError {
    fn from(e: vesta_embed::config::ConfigError) -> Self {
        ServeError::Config(e.into())
    }
}
