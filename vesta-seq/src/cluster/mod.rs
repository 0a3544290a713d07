//! Per-key sequences across servers (issue 34, docs/seq-cluster.md): servers on one sequences
//! database form a cluster, each a **member** under a lease in that database; the 256 sets of
//! sections are dealt among the live members ([`sets::table`](crate::sets::table)) and
//! each is served by one member at a time.
//!
//! - `plan`: what a member does at a beat, pure (unit-tested);
//! - `gate`: the check every call passes (set served here, term running; `coarse`: its
//!   cheap clock);
//! - `coord`: the [`Coordinator`], where leases and set owners live (the sequences' database
//!   by default; etcd or ZooKeeper in [`coordination`](crate::coordination));
//! - here: [`Cluster`], the beat task that renews the lease, reads the rows, stops serving a
//!   set before releasing it and serves a set only after taking it.
//!
//! **Architecture Invariant:** a set is served by a member only between a confirmed take
//! (compare-and-set on the set's generation, from a release or from an incarnation whose lease
//! the coordinator saw expire) and the start of its release (stop serving, drain the calls and
//! raises under way, then write the release); and only within the term of its last confirmed
//! renewal, which ends a third of a lease before the coordinator can see it expire. So no two
//! members ever serve one key at once, and a new owner's first raise starts above the stored
//! maximum of everything the old one handed out.

mod coord;
mod gate;
mod mono;
mod plan;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

pub use self::coord::{CoordError, CoordFuture, Coordinator, Joining, SqlCoordinator};
pub(crate) use self::gate::{Gate, GateOf};
pub use self::plan::Route;
use self::plan::{Action, Plan, plan};
use crate::Coordination;
pub use crate::db::seq_cluster::{ClusterRows, MemberRow, SetRow};
use crate::owner::mode::Mode;
use crate::owner::{self, Role};
use crate::sequences::{Inner, SeqError, Sequences};
use crate::sets::SETS;

/// The lease's default length: a SIGKILLed member's sets wait at most this (plus a beat).
pub const DEFAULT_TTL: Duration = Duration::from_secs(6);

/// Allowed lease lengths, ms: shorter would lapse on a slow database, longer leaves a killed
/// member's keys waiting for minutes.
pub const TTL_MS: (u64, u64) = (300, 600_000);

/// How a server joins the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterOptions {
    /// The member: the server's machine ID (one process per member; a second is refused).
    pub member: u64,
    /// The address clients reach its TCP server on (`""`: it serves none).
    pub tcp: String,
    /// The address clients reach its REST server on (`""`: it serves none).
    pub rest: String,
    /// The lease: renewed every `ttl / 6`; a member serves until `2/3 ttl` after its last
    /// confirmed renewal was sent; others take its sets once `ttl` passed on the database's clock.
    pub ttl: Duration,
}

/// What the cluster is doing, for `/healthz`, metrics and `vesta seq ls`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClusterStatus {
    /// This member.
    pub member: u64,
    /// Live members as of the last beat.
    pub members: usize,
    /// Sets served here.
    pub sets_owned: usize,
    /// Sets taken (from a release or an expired owner).
    pub sets_taken: u64,
    /// Sets handed off (released).
    pub sets_released: u64,
    /// Times this member lost its lease (it expired before a renewal was confirmed): every set
    /// was dropped and it joined again.
    pub leases_lost: u64,
    /// Calls answered with another member (moved).
    pub refused_moved: u64,
    /// Calls refused while their set was between owners.
    pub refused_moving: u64,
    /// Calls refused while this member's term had lapsed.
    pub refused_lapsed: u64,
    /// Renewals or reads of the cluster's rows that failed.
    pub beat_failures: u64,
    /// How long this member may still serve without another confirmed renewal, ms.
    pub term_left_ms: u64,
}

/// This server's membership: the beat task, and the hand-off at [`Cluster::leave`].
pub struct Cluster {
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Member>>,
}

struct Shared {
    inner: Arc<Inner>,
    gate: Arc<Gate>,
    coord: Arc<dyn Coordinator>,
}

/// The beat task's state.
struct Member {
    shared: Arc<Shared>,
    options: ClusterOptions,
    holder: String,
    incarnation: u32,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cluster(member {})", self.shared.gate.member)
    }
}

/// Prepares the coordinator's store, trying up to three times: members started together on a
/// fresh PostgreSQL race in `CREATE TABLE IF NOT EXISTS` (one gets a unique violation on the
/// type it creates), and a loaded store may miss one timeout. Bounded: three timeouts and two
/// short pauses.
async fn init_tables(coord: &dyn Coordinator) -> Result<(), SeqError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match coord.init().await {
            Ok(()) => return Ok(()),
            Err(e) if tries >= 3 => return Err(e.into()),
            Err(e) => {
                tracing::warn!("creating the cluster tables (try {tries} of 3): {e}");
                tokio::time::sleep(Duration::from_millis(200 * tries)).await;
            }
        }
    }
}

/// How long after its last confirmed renewal was sent a member (or the table's holder) serves.
pub(crate) fn window(ttl: Duration) -> Duration {
    ttl * 2 / 3
}

/// How often a member renews: six times per lease, four times per window, so one slow or lost
/// renewal never lapses a healthy member's term.
pub(crate) fn beat(ttl: Duration) -> Duration {
    (ttl / 6).max(Duration::from_millis(20))
}

impl From<CoordError> for SeqError {
    fn from(e: CoordError) -> Self {
        match e {
            CoordError::Sql(e) => SeqError::Store(e),
            e @ CoordError::Service { .. } => SeqError::Cluster(e.to_string()),
        }
    }
}

impl Cluster {
    /// Joins the cluster on `seqs`' database as `options.member`: creates the cluster tables if
    /// needed, takes the member's lease (waiting at most a lease's length for an earlier
    /// incarnation's to run out; refused if another process holds it), takes its share of the
    /// sets and starts the beat. From here on `seqs` serves only the keys of its sets.
    ///
    /// The cluster is coordinated in the sequences' own database ([`SqlCoordinator`]); see
    /// [`Cluster::join_with`] for another store.
    pub async fn join(seqs: &Sequences, options: ClusterOptions) -> Result<Cluster, SeqError> {
        Cluster::join_with(seqs, options, Arc::new(SqlCoordinator::new(seqs))).await
    }

    /// [`Cluster::join`] with the leases and set owners in `coord` (etcd, ZooKeeper: one per
    /// sequences database, see [`store_id`]).
    pub async fn join_with(
        seqs: &Sequences,
        options: ClusterOptions,
        coord: Arc<dyn Coordinator>,
    ) -> Result<Cluster, SeqError> {
        let inner = Arc::clone(&seqs.inner);
        vesta_segment::config::check(
            "seq.cluster_ttl_ms",
            u64::try_from(options.ttl.as_millis()).unwrap_or(u64::MAX),
            TTL_MS,
        )?;
        if inner.role != Role::Member {
            return Err(SeqError::Cluster(
                "these sequences hold the table's lease as a standalone owner: open them as a \
                 cluster member (Owner::member) to join a cluster"
                    .into(),
            ));
        }
        owner::mode::claim(&inner.db, Mode::Cluster(coord.kind())).await?;
        init_tables(coord.as_ref()).await?;
        let gate = Arc::new(Gate::new(options.member));
        if inner.gate.set(Arc::clone(&gate)).is_err() {
            return Err(SeqError::Cluster(
                "these sequences already joined a cluster".into(),
            ));
        }
        let shared = Arc::new(Shared { inner, gate, coord });
        let mut member = Member {
            shared: Arc::clone(&shared),
            holder: String::new(),
            options,
            incarnation: 0,
        };
        member.join_waiting().await?;
        // Our row is written; now the others' claims: the table's lease (a standalone server
        // or a tool), and members that could not send our clients on (or we theirs).
        let checked = match owner::until_table_free(&shared.inner, member.options.ttl).await {
            Ok(()) => same_transports(shared.coord.as_ref(), &member.options).await,
            Err(e) => Err(e),
        };
        if let Err(e) = checked {
            let _ = shared
                .coord
                .leave(member.options.member, &member.holder)
                .await;
            shared.gate.lapse();
            return Err(e);
        }
        if shared.coord.kind() != Coordination::Sql {
            shared.inner.floors.coordinated(Arc::clone(&shared.coord));
        }
        shared.inner.scan_floors().await?;
        member.beat_rest().await;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(member.run(stopped));
        Ok(Cluster {
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// What the cluster is doing.
    pub fn status(&self) -> ClusterStatus {
        self.shared.gate.status()
    }

    /// Who serves each set, as of the last beat (index: set).
    pub fn routes(&self) -> Arc<Vec<Route>> {
        self.shared.gate.routes()
    }

    /// Hands every set off and leaves: stops serving each set, releases it, then ends the lease,
    /// so the others take the sets at their next beat instead of after the lease's expiry. Each
    /// write is bounded by `store_timeout`; one that fails leaves that set to the lease's expiry.
    pub async fn leave(mut self) -> Result<(), SeqError> {
        let Some(member) = self.stop_beat().await else {
            return Ok(());
        };
        let s = &member.shared;
        let mut held = Vec::new();
        for set in 0..SETS {
            let generation = s.gate.served(set);
            if generation != 0 {
                s.inner.stop_set(set).await;
                held.push((set, generation));
            }
        }
        s.gate.lapse();
        let released = s.coord.release_sets(&member.holder, &held).await;
        if let Ok(n) = released {
            s.gate.sets_released.fetch_add(n, Ordering::Relaxed);
        }
        let left = s.coord.leave(member.options.member, &member.holder).await;
        released?;
        Ok(left?)
    }

    async fn stop_beat(&mut self) -> Option<Member> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.take()?.await.ok()
    }
}

impl Drop for Cluster {
    /// Without [`Cluster::leave`] the beat stops and the lease runs out (as if the process were
    /// killed): the sets move once the database sees it expire.
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.shared.gate.lapse();
    }
}

impl Member {
    fn new_holder(&mut self) {
        self.incarnation += 1;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "host".into());
        let mut holder = format!(
            "{host}:{}:{:x}.{}",
            std::process::id(),
            self.shared.inner.token,
            self.incarnation
        );
        if holder.len() > 255 {
            holder = holder.split_off(holder.len() - 255);
        }
        self.holder = holder;
    }

    fn joining(&self) -> Joining<'_> {
        let o = &self.options;
        Joining {
            member: o.member,
            holder: &self.holder,
            tcp: &o.tcp,
            rest: &o.rest,
            ttl: o.ttl,
        }
    }

    /// Takes the member's lease as a new incarnation, waiting at most a lease's length (and a
    /// store timeout) for another incarnation's to run out.
    async fn join_waiting(&mut self) -> Result<(), SeqError> {
        self.new_holder();
        let s = Arc::clone(&self.shared);
        let o = &self.options;
        let started = Instant::now();
        loop {
            let sent = Instant::now();
            if s.coord.join(self.joining()).await? {
                s.gate.extend(sent + window(o.ttl));
                return Ok(());
            }
            // After a try: a store that rounds or raises the lease knows by how much now.
            let waited = s.coord.lease(o.ttl) + s.inner.options.store_timeout;
            if Instant::now() >= started + waited {
                let rows = s.coord.read().await?;
                let held = rows
                    .members
                    .iter()
                    .find(|m| m.member == o.member)
                    .map(|m| match m.expires_ms.saturating_sub(rows.now_ms) {
                        // etcd and ZooKeeper judge a lease live without saying for how long.
                        left if left > 0 => format!("{} (lease ends in {left} ms)", m.holder),
                        _ => format!("{} (its lease runs)", m.holder),
                    })
                    .unwrap_or_else(|| "another process".into());
                return Err(SeqError::Cluster(format!(
                    "member {} (this server's machine ID) is held by {held} in {}: one process \
                     per machine ID; waited {} ms",
                    o.member,
                    s.coord.describe(),
                    waited.as_millis()
                )));
            }
            tokio::time::sleep(beat(o.ttl)).await;
        }
    }

    async fn run(mut self, mut stop: oneshot::Receiver<()>) -> Member {
        let every = beat(self.options.ttl);
        loop {
            tokio::select! {
                _ = &mut stop => return self,
                () = tokio::time::sleep(every) => {}
            }
            self.beat().await;
        }
    }

    /// One beat: renew (or, once the lease is lost, drop everything and join again), then act on
    /// the rows.
    async fn beat(&mut self) {
        let s = Arc::clone(&self.shared);
        let o = self.options.clone();
        let sent = Instant::now();
        match s.coord.renew(o.member, &self.holder, o.ttl).await {
            Ok(true) => s.gate.extend(sent + window(o.ttl)),
            Ok(false) => {
                s.gate.leases_lost.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    member = o.member,
                    "the cluster lease expired before a renewal was confirmed: every set is \
                     dropped here, and the member joins again"
                );
                s.gate.lapse();
                s.inner.stop_all().await;
                self.new_holder();
                let sent = Instant::now();
                match s.coord.join(self.joining()).await {
                    // A tool may have taken the table while no member's lease ran: wait for it.
                    Ok(true) if table_held(&s.inner).await => {
                        let _ = s.coord.leave(o.member, &self.holder).await;
                        s.gate.beat_failures.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Ok(true) => s.gate.extend(sent + window(o.ttl)),
                    Ok(false) | Err(_) => {
                        s.gate.beat_failures.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
            Err(e) => {
                s.gate.beat_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(member = o.member, "renewing the cluster lease: {e}");
                return;
            }
        }
        self.beat_rest().await;
    }

    /// The part of a beat after a confirmed renewal: read the rows, stop serving and release
    /// the sets the table moves away, take the sets it gives here, then serve what the rows read
    /// back say is this incarnation's. Four round trips whatever the number of sets moved.
    async fn beat_rest(&mut self) {
        let s = Arc::clone(&self.shared);
        let Some(rows) = self.read().await else {
            return;
        };
        let Plan { actions, live, .. } = plan(&rows, self.options.member, &self.holder);
        s.gate.members.store(live.len() as u64, Ordering::Relaxed);
        let mut releases = Vec::new();
        let mut takes = Vec::new();
        for action in actions {
            match action {
                Action::Release { set, generation } => releases.push((set, generation)),
                Action::Take { set, generation } => takes.push((set, generation)),
                Action::Keep { .. } => {}
            }
        }
        for &(set, _) in &releases {
            s.inner.stop_set(set).await;
        }
        match s.coord.release_sets(&self.holder, &releases).await {
            Ok(n) => {
                s.gate.sets_released.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                s.gate.beat_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(member = self.options.member, "releasing sets: {e}");
            }
        }
        let member = self.options.member;
        match s.coord.take_sets(member, &self.holder, &takes).await {
            Ok(n) => {
                s.gate.sets_taken.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                s.gate.beat_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(member, "taking sets: {e}");
            }
        }
        let rows = if releases.is_empty() && takes.is_empty() {
            rows
        } else {
            match self.read().await {
                Some(rows) => rows,
                None => return,
            }
        };
        for row in &rows.sets {
            let mine = row.owner == Some(member) && row.holder == self.holder;
            let served = s.gate.served(row.set);
            if mine && served != row.generation {
                s.gate.serve(row.set, row.generation);
            } else if !mine && served != 0 {
                // Only an expired incarnation's sets are taken, and this one renewed: should it
                // ever happen, stop at once.
                tracing::error!(
                    set = row.set,
                    "a set served here is owned by {:?}",
                    row.holder
                );
                s.inner.stop_set(row.set).await;
            }
        }
        s.gate.set_routes(plan(&rows, member, &self.holder).routes);
    }

    /// The cluster's rows, or `None` (counted, logged) when the read failed.
    async fn read(&self) -> Option<ClusterRows> {
        match self.shared.coord.read().await {
            Ok(rows) => Some(rows),
            Err(e) => {
                self.shared
                    .gate
                    .beat_failures
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(member = self.options.member, "reading the cluster: {e}");
                None
            }
        }
    }
}

/// Whether the table's lease runs (a tool or standalone server holds it), or cannot be read.
async fn table_held(inner: &Inner) -> bool {
    match inner.db.owner_read().await {
        Ok(row) => row.as_ref().is_some_and(crate::db::owner::LeaseRow::live),
        Err(_) => true,
    }
}

/// What a member serves, for the transport check: TCP, or REST (with gRPC on its port).
fn transport(tcp: &str, rest: &str) -> &'static str {
    match (tcp.is_empty(), rest.is_empty()) {
        (false, true) => "TCP",
        (true, false) => "REST and gRPC",
        (false, false) => "TCP, REST and gRPC",
        (true, true) => "nothing",
    }
}

/// Refuses a member whose transport differs from a live member's: a client of one could not
/// be sent on to the other (a REST client to a TCP address), so every member serves the same.
async fn same_transports(coord: &dyn Coordinator, o: &ClusterOptions) -> Result<(), SeqError> {
    let rows = coord.read().await?;
    let ours = transport(&o.tcp, &o.rest);
    let others: Vec<&MemberRow> = rows
        .members
        .iter()
        .filter(|m| m.member != o.member && plan::is_live(m, rows.now_ms))
        .filter(|m| transport(&m.tcp, &m.rest) != ours)
        .collect();
    let Some(first) = others.first() else {
        return Ok(());
    };
    Err(SeqError::Transports {
        ours: ours.into(),
        theirs: transport(&first.tcp, &first.rest).into(),
        members: others
            .iter()
            .map(|m| m.member.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// The cluster's rows as `coord` holds them (for `vesta seq ls`): no lease taken, nothing
/// written but the store's tables or keys when missing.
pub async fn read_rows(coord: &dyn Coordinator) -> Result<ClusterRows, SeqError> {
    coord.init().await?;
    Ok(coord.read().await?)
}

/// The members holding a live lease in `coord` (none when an SQL store has no cluster
/// tables): a standalone server or tool about to use the table *outside* the cluster checks
/// this after taking the table's lease, since its numbers would interleave with the members'.
pub async fn live_members(coord: &dyn Coordinator) -> Result<Vec<MemberRow>, SeqError> {
    match coord.read().await {
        Ok(rows) => Ok(rows
            .members
            .iter()
            .filter(|m| plan::is_live(m, rows.now_ms))
            .cloned()
            .collect()),
        Err(CoordError::Sql(vesta_segment::SegmentError::MissingTable { .. })) => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// The name of `seqs`' store, drawn at random on first use and kept in its table
/// `vesta_seq_store` (the table's identity): a coordinator outside the database keeps the
/// cluster's keys under it, so servers on one sequences database form one cluster, and servers
/// on two never meet (were they to, a set moving between them would restart below numbers
/// handed out).
pub async fn store_id(seqs: &Sequences) -> Result<String, SeqError> {
    Ok(seqs.inner.store.clone())
}

/// Whether a member row holds a live lease at the rows' clock.
pub fn is_live(row: &MemberRow, now_ms: i64) -> bool {
    plan::is_live(row, now_ms)
}
