//! One owner per table, always (docs/seq.md, "One owner per table"): who may hand out a
//! table's numbers, decided by the table's own database.
//!
//! - A **standalone** server holds the table's lease (the row `member = -1` of
//!   `vesta_seq_member`, by the database's clock, taken and renewed by the statements a
//!   cluster member's lease uses), and serves only within the term of its last confirmed
//!   renewal (2/3 of the lease after it was sent: the gate every call passes, as a member's);
//! - a **`vesta seq` run** on the table (`Role::Tool`) holds the same lease for its run;
//! - a **cluster member** holds its member lease (`crate::cluster`) and never this one.
//!
//! Each writes its own claim, then reads the others' (a standalone server or a run: the lease,
//! then the live members; a member: its row, then the table's lease), so of two started at once
//! at least one sees the other and stops. The table records how it is served (`mode.rs`):
//! a standalone server and members of each coordination are refused on a table recorded
//! otherwise, which also keeps apart holders that cannot see each other's leases (a cluster in
//! etcd or ZooKeeper, a standalone server in the database).
//!
//! Here: [`Owner`] (how a [`Sequences`](crate::Sequences) is opened), the lease's take and
//! the waiting for another holder's (`lease.rs`), its beat, and [`OwnerStatus`].

mod admin;
mod lease;
pub mod mode;

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

pub use self::admin::{RaiseTo, RaisedRow, Served};
pub(crate) use self::lease::{hold, release, until_table_free};
use crate::floors::FloorsAt;

/// How a [`Sequences`](crate::Sequences) owns its table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Standalone server, `vesta seq` run, or cluster member.
    pub role: Role,
    /// The table's lease (standalone and tool): a killed holder's table waits at most this
    /// long for the next. Allowed 300 ms ..= 10 min (`seq.cluster_ttl_ms`, which it shares).
    pub lease: Duration,
    /// Where clients reach this server over TCP (`""`: not at all), for other processes'
    /// refusals.
    pub tcp: String,
    /// Where clients reach it over REST (and gRPC).
    pub rest: String,
    /// Where the restore guard's floors are kept on this host.
    pub floors: FloorsAt,
}

/// Who opens the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A standalone server (the library's default): records the table's mode as
    /// `standalone`, holds the table's lease while open.
    Standalone,
    /// A tool (`vesta seq next|show`): holds the table's lease for its run, records nothing;
    /// refused while a server owns the table (a cluster's members included).
    Tool,
    /// A cluster member: holds nothing and serves nothing until
    /// [`Cluster::join`](crate::cluster::Cluster::join).
    Member,
}

impl Owner {
    /// A standalone server's, with the default lease ([`DEFAULT_TTL`](crate::cluster::DEFAULT_TTL)).
    pub fn standalone() -> Owner {
        Owner::of(Role::Standalone)
    }

    /// A tool's run.
    pub fn tool() -> Owner {
        Owner::of(Role::Tool)
    }

    /// A cluster member's (nothing held until it joins).
    pub fn member() -> Owner {
        Owner::of(Role::Member)
    }

    /// Nothing held, nothing served: for tools that only read the table's state or raise its
    /// rows ([`Sequences::served`](crate::Sequences::served),
    /// [`Sequences::raise_table`](crate::Sequences::raise_table)). A member's role, never
    /// joined.
    pub fn inspect() -> Owner {
        Owner::of(Role::Member)
    }

    fn of(role: Role) -> Owner {
        Owner {
            role,
            lease: crate::cluster::DEFAULT_TTL,
            tcp: String::new(),
            rest: String::new(),
            floors: FloorsAt::Host,
        }
    }

    /// With the lease `lease`.
    pub fn lease(mut self, lease: Duration) -> Owner {
        self.lease = lease;
        self
    }

    /// With the floors kept in `dir` instead of the host's hold directory.
    pub fn floors_in(mut self, dir: impl Into<PathBuf>) -> Owner {
        self.floors = FloorsAt::Dir(dir.into());
        self
    }
}

impl Default for Owner {
    fn default() -> Owner {
        Owner::standalone()
    }
}

/// What the table's lease is doing (a standalone server's or a tool's), for `/healthz` and
/// metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OwnerStatus {
    /// This process's incarnation on the lease.
    pub holder: String,
    /// How long it may still serve without another confirmed renewal, ms (0: lapsed).
    pub term_left_ms: u64,
    /// Times the lease expired before a renewal was confirmed.
    pub leases_lost: u64,
    /// Renewals that failed.
    pub beat_failures: u64,
    /// Who holds the table since this process lost it (`None` while it holds it).
    pub taken_by: Option<String>,
}

/// A held table lease: the incarnation, the counters, the beat task.
pub(crate) struct Held {
    role: Role,
    ttl: Duration,
    tcp: String,
    rest: String,
    holder: Mutex<String>,
    incarnation: AtomicU32,
    leases_lost: AtomicU64,
    beat_failures: AtomicU64,
    taken_by: Mutex<Option<String>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The host's claim on the table (`lease.rs`), held as long as the lease.
    claim: Mutex<Option<vesta_embed::lease::HostClaim>>,
}

impl Held {
    fn new(owner: &Owner, token: i64) -> Held {
        let held = Held {
            role: owner.role,
            ttl: owner.lease,
            tcp: owner.tcp.clone(),
            rest: owner.rest.clone(),
            holder: Mutex::default(),
            incarnation: AtomicU32::new(0),
            leases_lost: AtomicU64::new(0),
            beat_failures: AtomicU64::new(0),
            taken_by: Mutex::default(),
            task: Mutex::default(),
            claim: Mutex::default(),
        };
        held.new_holder(token);
        held
    }

    /// A new incarnation: `server host:pid:token.n` (`vesta-seq` for a tool's run), and the
    /// arbiter of its host's claims (` kNAME`, `lease.rs`).
    fn new_holder(&self, token: i64) {
        let n = self.incarnation.fetch_add(1, Ordering::Relaxed) + 1;
        let what = match self.role {
            Role::Tool => "vesta-seq",
            _ => "server",
        };
        let arbiter = local_mark().unwrap_or_default();
        let mut holder = format!(
            "{what} {}:{}:{token:x}.{n}{arbiter}",
            host(),
            std::process::id()
        );
        if holder.len() > 255 {
            holder = holder.split_off(holder.len() - 255);
        }
        *self.holder.lock().unwrap_or_else(|e| e.into_inner()) = holder;
    }

    fn holder(&self) -> String {
        self.holder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn status(&self, term_left: Duration) -> OwnerStatus {
        OwnerStatus {
            holder: self.holder(),
            term_left_ms: u64::try_from(term_left.as_millis()).unwrap_or(u64::MAX),
            leases_lost: self.leases_lost.load(Ordering::Relaxed),
            beat_failures: self.beat_failures.load(Ordering::Relaxed),
            taken_by: self
                .taken_by
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

impl Drop for Held {
    /// The beat stops with the sequences: the lease runs out as if the process were killed.
    fn drop(&mut self) {
        if let Some(task) = self.task.get_mut().ok().and_then(Option::take) {
            task.abort();
        }
    }
}

/// The mark ending a holder whose claim this host's kernel decides (` k<arbiter>`), where
/// claims are the kernel's.
pub(crate) fn local_mark() -> Option<String> {
    vesta_embed::lease::arbiter_name().map(|a| format!(" k{a}"))
}

/// This host's name, for holders (what people read; the database decides the holder).
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".into())
}
