//! Where a cluster's members and sets live: the [`Coordinator`] the beat talks to. The beat
//! (`mod.rs`), the hand-off rules (`plan.rs`) and the gate never see the store, only these
//! seven calls, so one set of rules holds whether the leases live in the sequences' SQL
//! database ([`SqlCoordinator`], the default), etcd or ZooKeeper
//! ([`coordination`](crate::coordination)).
//!
//! What every coordinator must keep (docs/seq-cluster.md, "The rules"):
//!
//! - `join` takes the member for an incarnation only when no other incarnation's lease runs;
//! - `renew` succeeds only while the lease has not expired, judged by the store, so an
//!   expired incarnation never comes back; a renewal's lease runs at least `ttl` after the
//!   store confirmed it (the member serves 2/3 of it after *sending* it);
//! - `read` answers the store's judgement of which leases run (a member row is live when
//!   [`is_live`](super::is_live) at `now_ms`) and every set's owner and generation (all
//!   [`SETS`](crate::sets::SETS) of them, those never written as released at generation
//!   0), in one consistent view or with the sets read *before* the members: an owner judged
//!   dead was dead when its set was read, and a member that took a set after that read raised
//!   its generation, so no take planned on the old one succeeds;
//! - `take_sets` and `release_sets` change a set only at the generation given
//!   (compare-and-set), and every change raises it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::Coordination;
use crate::db::seq_cluster::ClusterRows;
use crate::sequences::{Inner, Sequences};
use vesta_segment::SegmentError;

/// A coordinator's answer, boxed so the trait is object-safe.
pub type CoordFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, CoordError>> + Send + 'a>>;

/// What a coordination call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    /// The sequences' SQL database (the default coordinator).
    #[error(transparent)]
    Sql(#[from] SegmentError),
    /// Another coordination service (etcd, ZooKeeper): which, and what failed.
    #[error("{service}: {message}")]
    Service {
        /// The service and where it is, e.g. `etcd http://e1:2379`.
        service: String,
        /// What was being done and what went wrong.
        message: String,
    },
}

/// Who a member is and where clients reach it, as `join` writes it.
#[derive(Clone, Copy, Debug)]
pub struct Joining<'a> {
    /// The member: the server's machine ID.
    pub member: u64,
    /// The incarnation.
    pub holder: &'a str,
    /// Its TCP address (`""`: none).
    pub tcp: &'a str,
    /// Its REST address (`""`: none).
    pub rest: &'a str,
    /// The lease.
    pub ttl: Duration,
}

/// The store of a cluster's member leases and set owners (see the module doc for what each
/// call must keep). One per member process; `Send + Sync` for the beat task.
///
/// A coordinator outside the database (etcd, ZooKeeper) also keeps the restore guard's floors
/// (`floor`, `raise_floor`): what each section was raised to, which a restore of the database
/// does not reach, so a member that takes a set from another host sees its raises.
pub trait Coordinator: Send + Sync + fmt::Debug {
    /// The store, for messages (`postgres://db1/ids`, `etcd http://e1:2379 /vesta/seq/...`).
    fn describe(&self) -> String;
    /// Which coordination it is (recorded as the table's mode, `vesta_seq_store`).
    fn kind(&self) -> Coordination;
    /// The highest raise of section `(kind, section)` this store remembers (`None`: none, or a
    /// store that keeps no floors).
    fn floor(&self, kind: i16, section: i64) -> CoordFuture<'_, Option<u64>> {
        let _ = (kind, section);
        Box::pin(async { Ok(None) })
    }
    /// Remembers a raise of section `(kind, section)` to `max` (never lowering what it has).
    fn raise_floor(&self, kind: i16, section: i64, max: u64) -> CoordFuture<'_, ()> {
        let _ = (kind, section, max);
        Box::pin(async { Ok(()) })
    }
    /// Every floor this store remembers, `((kind, section), max)`.
    fn floors(&self) -> CoordFuture<'_, Vec<((i16, i64), u64)>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// How long after the store confirmed a renewal of `ttl` it may still hold the lease: `ttl`
    /// by default; more in a store that rounds leases up or checks them now and then. A join
    /// waits this long (and a store timeout) for an earlier incarnation's lease to run out.
    fn lease(&self, ttl: Duration) -> Duration {
        ttl
    }
    /// Prepares the store (tables, keys) if needed.
    fn init(&self) -> CoordFuture<'_, ()>;
    /// Takes the member for `j.holder` when it is free, expired or already `j.holder`'s;
    /// `false` while another incarnation's lease runs.
    fn join<'a>(&'a self, j: Joining<'a>) -> CoordFuture<'a, bool>;
    /// Renews `holder`'s lease; `false` once it expired (or another incarnation holds it).
    fn renew<'a>(&'a self, member: u64, holder: &'a str, ttl: Duration) -> CoordFuture<'a, bool>;
    /// Ends `holder`'s lease at once.
    fn leave<'a>(&'a self, member: u64, holder: &'a str) -> CoordFuture<'a, ()>;
    /// The store's judgement of the leases, and every set.
    fn read(&self) -> CoordFuture<'_, ClusterRows>;
    /// Makes `holder` of `member` the owner of each `(set, generation)` still at that
    /// generation; how many were.
    fn take_sets<'a>(
        &'a self,
        member: u64,
        holder: &'a str,
        sets: &'a [(u32, i64)],
    ) -> CoordFuture<'a, u64>;
    /// Releases each `(set, generation)` that `holder` owns at that generation; how many.
    fn release_sets<'a>(&'a self, holder: &'a str, sets: &'a [(u32, i64)]) -> CoordFuture<'a, u64>;
}

/// The default coordinator: the tables `vesta_seq_member` and `vesta_seq_set` in the
/// sequences' own database, every time by the database's clock (`db/seq_cluster.rs`).
#[derive(Clone)]
pub struct SqlCoordinator {
    inner: Arc<Inner>,
}

impl SqlCoordinator {
    /// The coordinator in `seqs`' database.
    pub fn new(seqs: &Sequences) -> Self {
        SqlCoordinator::of(Arc::clone(&seqs.inner))
    }

    pub(crate) fn of(inner: Arc<Inner>) -> Self {
        SqlCoordinator { inner }
    }
}

impl fmt::Debug for SqlCoordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SqlCoordinator({})", self.inner.db.url())
    }
}

fn boxed<'a, T>(
    f: impl Future<Output = Result<T, SegmentError>> + Send + 'a,
) -> CoordFuture<'a, T> {
    Box::pin(async move { Ok(f.await?) })
}

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

impl Coordinator for SqlCoordinator {
    fn describe(&self) -> String {
        self.inner.db.url().to_string()
    }

    fn kind(&self) -> Coordination {
        Coordination::Sql
    }

    fn init(&self) -> CoordFuture<'_, ()> {
        boxed(self.inner.db.cluster_init())
    }

    fn join<'a>(&'a self, j: Joining<'a>) -> CoordFuture<'a, bool> {
        boxed(
            self.inner
                .db
                .cluster_join(j.member, j.holder, j.tcp, j.rest, ttl_ms(j.ttl)),
        )
    }

    fn renew<'a>(&'a self, member: u64, holder: &'a str, ttl: Duration) -> CoordFuture<'a, bool> {
        boxed(self.inner.db.cluster_renew(member, holder, ttl_ms(ttl)))
    }

    fn leave<'a>(&'a self, member: u64, holder: &'a str) -> CoordFuture<'a, ()> {
        boxed(self.inner.db.cluster_leave(member, holder))
    }

    fn read(&self) -> CoordFuture<'_, ClusterRows> {
        boxed(self.inner.db.cluster_read())
    }

    fn take_sets<'a>(
        &'a self,
        member: u64,
        holder: &'a str,
        sets: &'a [(u32, i64)],
    ) -> CoordFuture<'a, u64> {
        boxed(self.inner.db.cluster_take_sets(member, holder, sets))
    }

    fn release_sets<'a>(&'a self, holder: &'a str, sets: &'a [(u32, i64)]) -> CoordFuture<'a, u64> {
        boxed(self.inner.db.cluster_release_sets(holder, sets))
    }
}
