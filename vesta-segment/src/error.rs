//! Typed errors. Each message names the tag, key or URL it is about and what is allowed, so the
//! CLI prints it as one line and a server can map it to a status code (see [`SegmentError::leaf_code`]).
//! What the operator can do is data ([`SegmentError::remedy`]), said in words; the `vesta`
//! binary spells it as its command.

use std::path::PathBuf;

use vesta_core::Remedy;

/// A database URL that cannot be used. The URL in the message never shows a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid database URL {url}: {reason}; expected sqlite://PATH, \
     postgres://USER[:PASS]@HOST:PORT/DB or mysql://USER[:PASS]@HOST:PORT/DB"
)]
pub struct UrlError {
    /// The URL as given, password replaced by `***`.
    pub url: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A `[segment]` setting out of range or inconsistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A number outside its allowed range.
    #[error("{key} {value} is out of range: allowed {min}..={max}")]
    OutOfRange {
        /// The key, e.g. `segment.prefetch_percent`.
        key: &'static str,
        /// The value given.
        value: u64,
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
    },
    /// Two settings that contradict each other.
    #[error("{0}")]
    Inconsistent(String),
    /// `segment.db` is not a usable URL.
    #[error("segment.db: {0}")]
    Url(#[from] UrlError),
    /// No database configured where one is needed.
    #[error("segment.db is not set: no database to take segments from")]
    NoDatabase,
}

/// Why a segment call or an admin operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    /// The tag name breaks the naming rule (empty, too long, or a disallowed character).
    #[error("invalid tag {tag:?}: {reason}")]
    InvalidTag {
        /// The tag as given (cut to 64 characters).
        tag: String,
        /// Which rule it breaks and what is allowed.
        reason: String,
    },
    /// No row for the tag in `leaf_alloc`; nothing is created implicitly.
    #[error("unknown tag {tag:?}: no such biz_tag in leaf_alloc at {db}")]
    UnknownTag {
        /// The tag.
        tag: String,
        /// The database (password hidden).
        db: String,
    },
    /// `create` of a tag that already has a row.
    #[error("tag {tag:?} already exists in leaf_alloc at {db}; nothing was written")]
    TagExists {
        /// The tag.
        tag: String,
        /// The database (password hidden).
        db: String,
    },
    /// A numeric argument out of range (count, step, start).
    #[error("{field} {value} is out of range{context}: allowed {min}..={max}")]
    OutOfRange {
        /// The argument, e.g. `count` or `step`.
        field: &'static str,
        /// The value given.
        value: i128,
        /// Smallest allowed value.
        min: i128,
        /// Largest allowed value.
        max: i128,
        /// Extra context, e.g. ` for tag "orders"` (empty when none).
        context: String,
    },
    /// The `leaf_alloc` table is missing.
    #[error("table leaf_alloc does not exist at {db} (to create it: {remedy})")]
    MissingTable {
        /// The database (password hidden).
        db: String,
        /// What creates it ([`Remedy::CreateSegmentTable`]).
        remedy: Remedy,
    },
    /// A `sqlite://` file whose directory does not exist (nothing creates it).
    #[error(
        "SQLite database file {}: the directory {} does not exist (create it first)",
        path.display(),
        dir.display()
    )]
    NoDatabaseDirectory {
        /// The file.
        path: PathBuf,
        /// Its directory, missing.
        dir: PathBuf,
    },
    /// A `sqlite://` file that does not exist (only creating the table creates it).
    #[error(
        "SQLite database file {} does not exist (to create it: {remedy})",
        path.display()
    )]
    NoDatabaseFile {
        /// The file.
        path: PathBuf,
        /// What creates it ([`Remedy::CreateSegmentTable`]).
        remedy: Remedy,
    },
    /// No connection could be made: nothing answered at the address, the connection broke, or
    /// no answer came within `segment.fetch_timeout_ms`. (A server that answered with a
    /// refusal, e.g. bad credentials or no such database, is [`SegmentError::Database`].)
    #[error("database {db}: connecting: {cause}")]
    Unreachable {
        /// The database (password hidden).
        db: String,
        /// The driver's message.
        cause: String,
    },
    /// The database failed the operation (or refused the connection).
    #[error("database {db}: {action}: {cause}")]
    Database {
        /// The database (password hidden).
        db: String,
        /// What was being done, e.g. `taking a segment for tag "orders"`.
        action: String,
        /// The driver's message.
        cause: String,
    },
    /// Both buffers of the tag are empty and the last fetch failed: failing fast, not waiting.
    #[error("tag {tag:?}: no numbers buffered and the database is unavailable: {cause}")]
    Unavailable {
        /// The tag.
        tag: String,
        /// The last fetch error.
        cause: String,
    },
    /// Both buffers of the tag are empty and no segment arrived within the wait limit.
    #[error("tag {tag:?}: no segment arrived within segment.wait_ms = {waited_ms} ms")]
    Timeout {
        /// The tag.
        tag: String,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// Both buffers are empty and a fetch is under way ([`crate::Tag::try_next`] only).
    #[error("tag {tag:?}: both segments are used up; the next one is being fetched")]
    WouldBlock {
        /// The tag.
        tag: String,
    },
    /// The row read back is not a valid segment (or goes back below a segment this process
    /// already holds): refused, so no number can be issued twice.
    #[error("tag {tag:?}: refusing the segment read back from leaf_alloc: {detail}")]
    Inconsistent {
        /// The tag.
        tag: String,
        /// What is wrong.
        detail: String,
    },
    /// The segment read back starts below the tag's floor (the end of this process's last
    /// segment, or the floor in `segment.state_file`): `leaf_alloc` went back — restored from
    /// a backup, failed over to a replica that lagged, or lowered by hand. Refused and rolled
    /// back, so no number is issued twice, until the tag is raised past its floor.
    #[error(
        "tag {tag:?}: leaf_alloc went back: the segment read back starts at {start}, below \
         {floor} where this server's numbers end (restored from a backup, failed over to a \
         lagging replica, or lowered by hand?); refusing it so no number is issued twice. \
         Raise the tag past every number issued: {remedy}"
    )]
    MovedBack {
        /// The tag.
        tag: String,
        /// Where the refused segment started.
        start: u64,
        /// The lowest number a segment of this tag may start at.
        floor: u64,
        /// What lets it issue again ([`Remedy::RaiseTag`] past the floor).
        remedy: Remedy,
    },
    /// The restore guard's state file (`segment.state_file`) could not be locked, read or
    /// written.
    #[error("segment.state_file {}: {action}: {cause}", path.display())]
    StateFile {
        /// The file.
        path: PathBuf,
        /// What was being done.
        action: String,
        /// Why it failed.
        cause: String,
    },
    /// The store was shut down.
    #[error("the segment store is shut down")]
    Closed,
    /// A setting out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A bad database URL.
    #[error(transparent)]
    Url(#[from] UrlError),
}

impl SegmentError {
    /// No `leaf_alloc` at `db` (shown with its password hidden): create it.
    pub(crate) fn missing_table(db: &impl std::fmt::Display) -> Self {
        let db = db.to_string();
        SegmentError::MissingTable {
            remedy: Remedy::CreateSegmentTable { db: db.clone() },
            db,
        }
    }

    /// What the operator can do about it, if anything: create the table, raise the tag.
    pub fn remedy(&self) -> Option<&Remedy> {
        match self {
            SegmentError::MissingTable { remedy, .. }
            | SegmentError::NoDatabaseFile { remedy, .. }
            | SegmentError::MovedBack { remedy, .. } => Some(remedy),
            _ => None,
        }
    }

    /// Leaf's own error code for this failure, as its `Result{id=CODE, status=EXCEPTION}`
    /// shows it: -2 for an unknown tag, -3 when both segments are unavailable, -1 otherwise
    /// (Leaf's "not initialised"). For servers answering on Leaf's paths.
    pub fn leaf_code(&self) -> i64 {
        match self {
            SegmentError::UnknownTag { .. } | SegmentError::InvalidTag { .. } => -2,
            SegmentError::Unavailable { .. }
            | SegmentError::Timeout { .. }
            | SegmentError::WouldBlock { .. }
            | SegmentError::Inconsistent { .. }
            | SegmentError::MovedBack { .. } => -3,
            _ => -1,
        }
    }

    /// True when the database could not be reached at all (as opposed to a refusal or a
    /// missing table): a server may start without its segments and keep trying.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, SegmentError::Unreachable { .. })
    }

    /// True when the caller's input is at fault (a 4xx for a server), false when the database
    /// or the store is (a 5xx).
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            SegmentError::InvalidTag { .. }
                | SegmentError::UnknownTag { .. }
                | SegmentError::TagExists { .. }
                | SegmentError::OutOfRange { .. }
        )
    }
}

pub use vesta_core::tag::shown_tag;
