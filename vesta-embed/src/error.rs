//! Errors of the issuer: why it did not start, and why a call did not get an ID.

use vesta_core::{GenError, Remedy};

use crate::config::ConfigError;
#[cfg(feature = "zookeeper")]
use crate::lease::LeaseError;

/// Why an issuer did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The local state file could not be read or written.
    #[error("state file {path}: {message}")]
    StateFile {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A state file, or a static machine ID on this host, is held by another process.
    #[error("{what} is held by {holder}: {hint}")]
    Held {
        /// What is held: `the state file /var/lib/vesta/m5.state`, `machine 5 of vesta
        /// max-peak (node bits 0-9, ...) on this host`.
        what: String,
        /// Who holds it: its process ID, user and command line where the kernel says, else
        /// what its lock file says.
        holder: String,
        /// Why that matters and what to do.
        hint: String,
    },
    /// This host's hold record of a static machine ID does not read: torn by a crash, edited,
    /// or not vesta's.
    #[error(
        "this host's hold record {} does not read ({why}); if no issuer of this machine ID ran \
         on this host in another layout or epoch: {remedy}",
        path.display()
    )]
    HoldRecord {
        /// The record.
        path: std::path::PathBuf,
        /// What is wrong with it.
        why: String,
        /// What lets a start go on ([`Remedy::RetireHostHold`]).
        remedy: Box<Remedy>,
    },
    /// The machine ID's mark was counted in another layout or epoch: IDs of the two can be
    /// equal, so the mark says nothing about this issuer's IDs.
    #[error(
        "machine {machine}'s mark in {held_in} was counted in {theirs}, but this issuer counts \
         in {ours}: IDs of the two can be equal. Use another machine ID, or, if IDs issued \
         under the old mark can never meet the new ones: {remedy}"
    )]
    CountedElsewhere {
        /// The machine ID.
        machine: u64,
        /// Where the mark is (the state file, a ZooKeeper node, a table row, an etcd key).
        held_in: String,
        /// What the mark was counted in.
        theirs: String,
        /// What this issuer counts in.
        ours: String,
        /// What retires the old mark: [`Remedy::RetireStateFile`], [`Remedy::RetireHostHold`]
        /// or [`Remedy::RetireMark`] in its store.
        remedy: Box<Remedy>,
    },
    /// A registry has no machine ID for this issuer: its static one is held by another live
    /// issuer, or every ID of the pool is held.
    #[error("{message} (to see by whom: {remedy})")]
    Taken {
        /// What is held, by whom and where.
        message: String,
        /// Where to see the holders ([`Remedy::ListHolders`]).
        remedy: Box<Remedy>,
    },
    /// The clock is behind the machine ID's high-water mark by more than the start guard waits.
    #[error(
        "the clock reads {now} but machine {machine} promised up to {mark}; \
         refusing to start until the clock is past it"
    )]
    ClockBehindMark {
        /// The machine ID.
        machine: u64,
        /// The clock's reading (RFC 3339).
        now: String,
        /// The high-water mark (RFC 3339).
        mark: String,
    },
    /// The kernel still marks the clock unsynchronised after `clock.sync_wait_ms`
    /// (`clock.require_sync = "wait"`).
    #[error(
        "the kernel reports the system clock unsynchronised (STA_UNSYNC, max error {max_error_ms} \
         ms) after waiting {waited_ms} ms (clock.sync_wait_ms); start the time service \
         (chrony, systemd-timesyncd) or set clock.require_sync = \"warn\""
    )]
    ClockUnsynchronised {
        /// The kernel's bound on the clock error, ms.
        max_error_ms: u64,
        /// How long the start waited.
        waited_ms: u64,
    },
    /// Obtaining a machine ID from the lease authority failed.
    #[error("{0}")]
    Lease(String),
    /// ZooKeeper refused or could not be reached (pool exhausted, unreachable, no auth...).
    #[cfg(feature = "zookeeper")]
    #[error(transparent)]
    ZooKeeper(#[from] LeaseError),
    /// A thread the issuer needs (the async issuer's unit clock) could not be started, or an
    /// async start was cancelled with its runtime.
    #[error("cannot start the {name} thread: {cause}")]
    Thread {
        /// Which thread.
        name: &'static str,
        /// Why.
        cause: std::io::Error,
    },
}

impl StartError {
    /// What the operator can do about it, if anything: retire a mark, a state file or a hold
    /// record, or see who holds the machine IDs. Said in words by `Display` (or as the program's
    /// renderer says it: see [`Remedy`]).
    pub fn remedy(&self) -> Option<&Remedy> {
        match self {
            StartError::HoldRecord { remedy, .. }
            | StartError::CountedElsewhere { remedy, .. }
            | StartError::Taken { remedy, .. } => Some(&**remedy),
            _ => None,
        }
    }
}

/// Why a shutdown was not clean: the final mark or the release did not reach ZooKeeper (the
/// claim then expires with the session; no ID can be duplicated because of it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shutdown was not clean: {0}")]
pub struct ShutdownError(pub String);

/// Why a call did not get an ID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IssueError {
    /// The issuer may not issue now (lease lost, not yet held, start guard, shut down). Retry
    /// later or elsewhere.
    #[error("not issuing: {0}")]
    Unavailable(String),
    /// The generator refused: clock behind beyond tolerance, time field full, would block.
    #[error(transparent)]
    Refused(GenError),
    /// An async call waited the longest allowed for sequence space: the issuer is saturated
    /// (more IDs asked per unit than the layout has). Retry later or elsewhere.
    #[error(
        "waited {waited_ms} ms for sequence space, the longest allowed: the issuer is \
         saturated; retry later"
    )]
    Saturated {
        /// How long the call waited.
        waited_ms: u64,
    },
}

impl IssueError {
    /// True if the same call may succeed later without intervention.
    pub fn is_transient(&self) -> bool {
        match self {
            IssueError::Unavailable(_) | IssueError::Saturated { .. } => true,
            IssueError::Refused(e) => matches!(
                e,
                GenError::ClockBehind { .. } | GenError::WouldBlock { .. }
            ),
        }
    }
}
