//! [`SeqError`]: why a call, a start or a cluster's join failed, one variant per refusal, each
//! naming the key (or the table) and what the caller can do.

use vesta_segment::SegmentError;

use crate::key::KeyError;

/// Why a per-key sequence call failed.
#[derive(Debug, thiserror::Error)]
pub enum SeqError {
    /// The key breaks the key rule.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A batch count out of range.
    #[error("count {count} is out of range: allowed 1..={max} (seq.step)")]
    Count {
        /// The count asked for.
        count: u64,
        /// The largest batch: one step.
        max: u64,
    },
    /// The key's section needed a raise the table did not confirm in time; keys whose section
    /// has room are still served. Retry later.
    #[error("key {key}: its section could not be raised: {cause}")]
    Unavailable {
        /// The key.
        key: String,
        /// The table's failure, or the wait that ran out.
        cause: String,
    },
    /// Another process raised the key's section in the same table: this one serves it no more.
    #[error("key {key}: {why}")]
    Fenced {
        /// The key.
        key: String,
        /// What was found.
        why: String,
    },
    /// The key's numbers reached the table's limit (2^63 - 1).
    #[error("key {key}: its section's numbers reached 9223372036854775807, the table's limit")]
    Exhausted {
        /// The key.
        key: String,
    },
    /// Memory bound reached and every section in memory in use by a call under way (a raise
    /// or a load waiting for the table): a section or key more would pass the bound. Each
    /// such call ends within `store_timeout`, and its section can then be evicted.
    #[error(
        "key {key}: the sequences' memory bound ({bound_mb} MiB, {setting}) is reached and \
         every section in memory is in use by a call waiting for the table; room frees within \
         {retry_after_s} s (seq.store_timeout_ms): retry then, or raise {setting}"
    )]
    Full {
        /// The key.
        key: String,
        /// The bound, MiB.
        bound_mb: usize,
        /// The setting.
        setting: &'static str,
        /// When room frees: every call holding a section ends within `store_timeout`.
        retry_after_s: u64,
    },
    /// The table's layout of keys differs from this build's.
    #[error(
        "vesta_seq at {db} groups keys by {found} {what}, this build by {expected}: keys would \
         move to other sections; refusing"
    )]
    Layout {
        /// The database.
        db: String,
        /// Which constant.
        what: &'static str,
        /// In the table.
        found: i64,
        /// Here.
        expected: u64,
    },
    /// The key's set is served by another member of the cluster (docs/seq-cluster.md): ask it.
    #[error("key {key}: set {set} is served by member {member} (tcp {tcp:?}, rest {rest:?})")]
    Moved {
        /// The key.
        key: String,
        /// Its set.
        set: u32,
        /// The member serving it.
        member: u64,
        /// Its TCP address (`""`: it serves no TCP).
        tcp: String,
        /// Its REST address (`""`: it serves no REST).
        rest: String,
    },
    /// The key's set is between owners (handed off, or its owner's lease ran out and nobody
    /// has taken it yet): retry shortly, bounded by a lease's length.
    #[error("key {key}: set {set} is moving between members{}; retry shortly", to.map(|m| format!(" (to member {m})")).unwrap_or_default())]
    Moving {
        /// The key.
        key: String,
        /// Its set.
        set: u32,
        /// The member the set goes to, if one is live.
        to: Option<u64>,
    },
    /// This member's cluster lease is not confirmed within its term (its database slow or out
    /// of reach): it serves nothing until a renewal is, or its sets move once the lease
    /// expires. Retry shortly (here or at the member the others name).
    #[error(
        "key {key}: member {member}'s cluster lease is not confirmed within its term (the \
         sequences' database is slow or out of reach); it serves again once a renewal is, or its \
         sets move to other members once the lease expires; retry shortly"
    )]
    Lapsed {
        /// The key.
        key: String,
        /// This member.
        member: u64,
    },
    /// The table's lease (a standalone server's, or a `vesta seq` run's) is not confirmed
    /// within its term, or was lost to another process: nothing is served until it is held
    /// again. Retry shortly.
    #[error(
        "key {key}: this process's lease on the table is not confirmed within its term (the \
         sequences' database is slow or out of reach, or another process took the table); it \
         serves again once a renewal is; retry shortly"
    )]
    TableLapsed {
        /// The key.
        key: String,
    },
    /// Another process owns the table (docs/seq.md, "One owner per table"): a standalone
    /// server or a `vesta seq` run under the table's lease, or a cluster's live members.
    #[error("vesta_seq at {db} is served by {holder}: one owner per table")]
    Held {
        /// The database.
        db: String,
        /// Who: the holder of the table's lease (its incarnation, addresses, lease left), or
        /// the live members of a cluster.
        holder: String,
    },
    /// The table records another way of serving it than this process's configuration.
    #[error(
        "vesta_seq at {db} is served as {recorded} (recorded in vesta_seq_store), this server as {configured}"
    )]
    Mode {
        /// The database.
        db: String,
        /// How the table is served, as it records it.
        recorded: String,
        /// How this process was configured to serve it.
        configured: String,
    },
    /// A member that could not send every client of the cluster on: its transport differs
    /// from live members' (a TCP client cannot be sent to a REST-only member, nor the reverse).
    #[error(
        "seq cluster: this server serves {ours}, live member(s) {members} serve {theirs}: a \
         client of one could not be sent to the other; every member of a cluster serves the \
         same transport"
    )]
    Transports {
        /// This member's transport.
        ours: String,
        /// The other members'.
        theirs: String,
        /// Which members.
        members: String,
    },
    /// The table holds a section below what this host (or the cluster's coordinator)
    /// remembers raising it to: the table went back (restored from a backup, a replica that
    /// lagged, an edit by hand). Its keys are refused, never followed, until the table is
    /// raised back above every number handed out (docs/seq.md, "A restored table").
    #[error("key {key}: {}", went_back(*kind, *section, *found, *floor, remembered))]
    WentBack {
        /// The key.
        key: String,
        /// The section's row.
        kind: i16,
        /// The section.
        section: i64,
        /// What the row holds.
        found: i64,
        /// What it was raised to.
        floor: u64,
        /// Where that is remembered (a file, a coordinator).
        remembered: String,
    },
    /// The restore guard's record of the table (the host's file, or the coordinator's floors)
    /// could not be read or written: a raise is not handed out until it is.
    #[error("the restore guard (docs/seq.md, \"A restored table\"): {0}")]
    Guard(String),
    /// Joining or running the cluster failed (one process per member, a second join).
    #[error("seq cluster: {0}")]
    Cluster(String),
    /// Opening or reading the table failed.
    #[error(transparent)]
    Store(#[from] SegmentError),
    /// An option out of range.
    #[error(transparent)]
    Config(#[from] vesta_segment::ConfigError),
}

/// Why a section that went back is refused (the text of [`SeqError::WentBack`] after its key).
pub(crate) fn went_back(
    kind: i16,
    section: i64,
    found: i64,
    floor: u64,
    remembered: &str,
) -> String {
    format!(
        "section {section} (kind {kind}) of vesta_seq holds max_seq {found}, below the {floor} it \
         was raised to ({remembered}): the table went back (restored from a backup?); its keys \
         are refused until the table is raised back above every number handed out"
    )
}
