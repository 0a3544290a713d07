//! Per-key sequences, WeChat seqsvr's model: a number per key that strictly increases on every
//! call, at memory speed, with a few writes to the table per thousand calls.
//!
//! Keys ([`SeqKey`]) are grouped into sections (100,000 consecutive numeric keys below
//! 5,000,000,000; a bucket of the numeric keys above, spread by their range; a bucket of string
//! keys); a section shares one stored maximum in the table `vesta_seq`. A call returns
//! its key's number plus one; a number past the section's maximum is handed out only after the
//! maximum is raised by a step **and written**. So nothing above a written maximum is ever
//! handed out, and after a restart every key of a section starts above it: strictly
//! increasing across restarts, gaps allowed. A raise is started ahead of need (when a key comes
//! within half a step of the maximum), so a hot key's caller rarely waits for the table, and a
//! section raised more than once a second doubles its step (Leaf's adaptive step), so a hot
//! key is bound by memory, not by the table's write latency.
//!
//! **Architecture Invariant:** a number is handed out only when the section's in-memory `max`
//! covers it, and `max` is set only from a raise the table confirmed (or read back as this
//! process's own). A raise is a compare-and-set from the value this process last saw: a table
//! moved by another process fences the section (it answers errors, never numbers), so two
//! processes on one table never follow each other's numbers.
//!
//! Memory is per key (`slots/`): a numeric section holds a table of the keys called until a
//! flat array of its 100,000 keys (800 KB, 8 bytes a key) is smaller; a bucket holds a table of
//! its keys. Everything is charged to one bound in bytes (`seq.max_memory_mb`). Sections
//! untouched for a while are evicted (their maximum is in the table, so a reload only costs a
//! raise); at the bound, the least recently used section not in use is evicted to make room,
//! and a call is refused (naming the setting) only when every section is in use.
//!
//! Here: [`Sequences`], its shared state (`Inner`) and its start. A call's fast path and its
//! wait (`call.rs`), the three kinds of rows (`shape.rs`), a section's load and raises
//! (`table.rs`), eviction and a set's drain (`memory.rs`), the section maps (`map.rs`), the
//! layout's meta rows (`layout.rs`), a read without loading (`peek.rs`), the options
//! (`options.rs`) and errors (`error.rs`).

mod call;
pub(crate) mod error;
mod layout;
mod map;
mod memory;
mod options;
mod peek;
pub(crate) mod shape;
mod table;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use vesta_segment::{AnyPool, DbUrl};

use crate::floors::{Floors, GuardStatus};
use crate::owner::{self, Owner, OwnerStatus, Role};

pub use self::call::{PendingNext, SeqNext};
pub use self::error::SeqError;
pub use self::options::SeqOptions;
pub use self::peek::SeqPeek;

use self::map::{Map, read};
use self::shape::on_place;
use crate::cluster;
use crate::config;
use crate::db::Database;
use crate::key::SeqKey;
use crate::slots::{Budget, Numbers, Slots, Strings};

/// The highest number the table can hold (`BIGINT`).
const LIMIT: u64 = i64::MAX as u64;
/// The setting a table round trip is bounded by, named in errors.
const TIMEOUT_KEY: &str = "seq.store_timeout_ms";

/// What the sequences are doing, for `/healthz` and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SeqStatus {
    /// Sections in memory (numeric sections, spread and string buckets).
    pub sections: usize,
    /// Numeric sections in memory as flat arrays (the rest hold tables of their keys).
    pub dense_sections: usize,
    /// Numeric keys in memory in tables (a dense section's are not counted).
    pub numeric_keys: usize,
    /// String keys in memory.
    pub string_keys: usize,
    /// Bytes the sections hold, as charged to `seq.max_memory_mb`.
    pub memory_bytes: usize,
    /// Raises the table confirmed (its writes, besides first loads).
    pub raises: u64,
    /// Raises that failed or ran out of time.
    pub raise_failures: u64,
    /// Total time of confirmed raises, microseconds.
    pub raise_micros: u64,
    /// Sections loaded from the table (first use or after eviction).
    pub loads: u64,
    /// Sections evicted.
    pub evictions: u64,
    /// Sections fenced (another process raised them).
    pub fenced: u64,
    /// Raises ahead of need under way (each holds its section in memory until it ends).
    pub raising_ahead: usize,
}

/// Per-key sequences on one table. Cheap to clone; every clone is the same sequences.
#[derive(Clone)]
pub struct Sequences {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Sequences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sequences({})", self.inner.db.url())
    }
}

pub(crate) struct Inner {
    pub(crate) db: Database,
    pub(crate) options: SeqOptions,
    /// This process's mark on the rows it raises (random, never 0).
    pub(crate) token: i64,
    /// Numeric sections (keys below 5,000,000,000) by section.
    pub(crate) numeric: Map<u64, Numbers>,
    /// Spread buckets (numeric keys from 5,000,000,000 on) by bucket.
    pub(crate) spread: Map<u32, Numbers>,
    /// String buckets by bucket.
    pub(crate) strings: Map<u32, Strings>,
    /// The bytes every section holds, under `seq.max_memory_mb`.
    pub(crate) budget: Arc<Budget>,
    /// One load at a time: its holder loads every section asked for meanwhile, in one
    /// transaction (`table.rs`).
    loading: tokio::sync::Mutex<()>,
    /// Sections waiting for a load, `(kind, section)`.
    wanted: std::sync::Mutex<std::collections::HashSet<(i16, u64)>>,
    raises: AtomicU64,
    raise_failures: AtomicU64,
    raise_micros: AtomicU64,
    loads: AtomicU64,
    evictions: AtomicU64,
    fenced: AtomicU64,
    /// Raises ahead of need under way (`table.rs`): each holds its section in memory.
    raising_ahead: AtomicUsize,
    /// Told when a raise ahead of need ends: a call waiting for room at the memory bound
    /// looks again (`memory.rs`).
    ahead_ended: tokio::sync::Notify,
    /// Set when the sequences join a cluster (which sets are served here) or take the table's
    /// lease (every set): nothing is served before.
    pub(crate) gate: OnceLock<Arc<cluster::Gate>>,
    /// The table's identity: the store's name in `vesta_seq_store`.
    pub(crate) store: String,
    /// The restore guard: what each section was raised to, kept where a restore cannot reach.
    pub(crate) floors: Floors,
    /// The table's lease, when a standalone server or a tool holds it.
    pub(crate) held: OnceLock<owner::Held>,
    /// How the table was opened.
    pub(crate) role: Role,
}

impl Sequences {
    /// Opens the sequences on the database at `url` (an SQLite file is created), creating
    /// `vesta_seq` on first use, as its standalone owner ([`Owner::standalone`]: the table's
    /// lease held while open; refused, naming the holder, while another process serves it).
    pub async fn open(url: &DbUrl, options: SeqOptions) -> Result<Sequences, SeqError> {
        Self::open_as(url, options, Owner::standalone()).await
    }

    /// [`Sequences::open`] as `owner` says: a standalone server, a tool's run, or a cluster
    /// member (serving nothing until [`Cluster::join`](cluster::Cluster::join)).
    pub async fn open_as(
        url: &DbUrl,
        options: SeqOptions,
        owner: Owner,
    ) -> Result<Sequences, SeqError> {
        let db = Database::open(url, options.store_timeout, true, TIMEOUT_KEY).await?;
        Self::start(db, options, owner).await
    }

    /// On a pool the application already has (it stays the application's to close), as its
    /// standalone owner.
    pub async fn from_pool(pool: AnyPool, options: SeqOptions) -> Result<Sequences, SeqError> {
        Self::from_pool_as(pool, options, Owner::standalone()).await
    }

    /// [`Sequences::from_pool`] as `owner` says.
    pub async fn from_pool_as(
        pool: AnyPool,
        options: SeqOptions,
        owner: Owner,
    ) -> Result<Sequences, SeqError> {
        let db = Database::from_pool(pool, options.store_timeout, TIMEOUT_KEY)?;
        Self::start(db, options, owner).await
    }

    async fn start(db: Database, options: SeqOptions, owner: Owner) -> Result<Sequences, SeqError> {
        config::check_options(&options)?;
        // Servers started together on a fresh PostgreSQL race in `CREATE TABLE IF NOT EXISTS`
        // (the loser gets a unique violation on the type it creates): try again, twice.
        let mut tries = 0u64;
        while let Err(e) = db.seq_init().await {
            tries += 1;
            if tries >= 3 {
                return Err(e.into());
            }
            tracing::warn!("creating vesta_seq (try {tries} of 3): {e}");
            tokio::time::sleep(Duration::from_millis(200 * tries)).await;
        }
        let token = token();
        layout::pin(&db, token).await?;
        let store = init_owner(&db, token).await?;
        let floors = Floors::open(&owner.floors, &store, db.url().to_string()).await?;
        let inner = Arc::new(Inner {
            db,
            budget: Arc::new(Budget::new(options.max_memory)),
            options,
            token,
            numeric: Map::default(),
            spread: Map::default(),
            strings: Map::default(),
            loading: tokio::sync::Mutex::new(()),
            wanted: std::sync::Mutex::default(),
            raises: AtomicU64::new(0),
            raise_failures: AtomicU64::new(0),
            raise_micros: AtomicU64::new(0),
            loads: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            fenced: AtomicU64::new(0),
            raising_ahead: AtomicUsize::new(0),
            ahead_ended: tokio::sync::Notify::new(),
            gate: OnceLock::new(),
            store,
            floors,
            held: OnceLock::new(),
            role: owner.role,
        });
        owner::hold(&inner, &owner).await?;
        if owner.role != Role::Member {
            inner.scan_floors().await?;
        }
        tokio::spawn(memory::sweeper(Arc::downgrade(&inner)));
        Ok(Sequences { inner })
    }

    /// The key's next number: strictly above every number it was handed before, here or
    /// in an earlier process on the same table.
    pub async fn next(&self, key: &SeqKey) -> Result<u64, SeqError> {
        self.next_n(key, 1).await
    }

    /// `n` numbers for the key (1..=step): the key's numbers move by `n` and the last is
    /// returned; the batch is `last - n + 1 ..= last`.
    pub async fn next_n(&self, key: &SeqKey, n: u64) -> Result<u64, SeqError> {
        match self.try_next_n(key, n)? {
            SeqNext::Ready(last) => Ok(last),
            SeqNext::Pending(p) => p.wait().await,
        }
    }

    /// [`Sequences::next_n`] without waiting: `Ready` with the last number when the key's
    /// section is in memory and covers it (a map lookup and one atomic add), else `Pending`
    /// with the rest of the call (a load or a raise of the table). The numbers are taken
    /// either way: drop a `Pending` and they are a gap, never handed out.
    pub fn try_next_n(&self, key: &SeqKey, n: u64) -> Result<SeqNext, SeqError> {
        let max = self.inner.options.step;
        if !(1..=max).contains(&n) {
            return Err(SeqError::Count { count: n, max });
        }
        Inner::try_take(&self.inner, key, n)
    }

    /// The key's current number without moving it: the last one handed out in this process,
    /// or, for a key not called since its section was loaded, the section's maximum then
    /// (above anything handed out before). A client that holds a smaller number has missed one.
    /// A section not in memory is loaded first, which writes its row when missing: to read
    /// without writing, [`Sequences::peek`].
    pub async fn current(&self, key: &SeqKey) -> Result<u64, SeqError> {
        self.inner.check_gate(key)?;
        on_place!(key.place(), |shape, id, slot| {
            let s = Inner::section(&self.inner, shape, id, key).await?;
            Ok(s.current(slot))
        })
    }

    /// What the sequences are doing.
    pub fn status(&self) -> SeqStatus {
        let i = &self.inner;
        let (numeric, spread, strings) = (read(&i.numeric), read(&i.spread), read(&i.strings));
        let dense_sections = numeric.values().filter(|s| s.slots().is_dense()).count();
        let keys = |m: &mut dyn Iterator<Item = usize>| m.sum::<usize>();
        SeqStatus {
            sections: numeric.len() + spread.len() + strings.len(),
            dense_sections,
            numeric_keys: keys(
                &mut numeric
                    .values()
                    .chain(spread.values())
                    .filter(|s| !s.slots().is_dense())
                    .map(|s| s.slots().keys()),
            ),
            string_keys: keys(&mut strings.values().map(|s| s.slots().keys())),
            memory_bytes: i.budget.used(),
            raises: i.raises.load(Ordering::Relaxed),
            raise_failures: i.raise_failures.load(Ordering::Relaxed),
            raise_micros: i.raise_micros.load(Ordering::Relaxed),
            loads: i.loads.load(Ordering::Relaxed),
            evictions: i.evictions.load(Ordering::Relaxed),
            fenced: i.fenced.load(Ordering::Relaxed),
            raising_ahead: i.raising_ahead.load(Ordering::Relaxed),
        }
    }

    /// What this server's membership of a cluster is doing, once it joined one.
    pub fn cluster_status(&self) -> Option<cluster::ClusterStatus> {
        self.inner
            .gate
            .get()
            .filter(|g| g.of != cluster::GateOf::Table)
            .map(|g| g.status())
    }

    /// What the table's lease is doing, when these sequences hold it (standalone, tool).
    pub fn owner_status(&self) -> Option<OwnerStatus> {
        let held = self.inner.held.get()?;
        let term = self
            .inner
            .gate
            .get()
            .map(|g| g.term_left())
            .unwrap_or_default();
        Some(held.status(term))
    }

    /// What the restore guard is doing (docs/seq.md, "A restored table").
    pub fn guard_status(&self) -> GuardStatus {
        self.inner.floors.status()
    }

    /// The table's identity: the store's name kept in `vesta_seq_store`.
    pub fn store_id(&self) -> &str {
        &self.inner.store
    }

    /// The options in force.
    pub fn options(&self) -> &SeqOptions {
        &self.inner.options
    }

    /// The database (its `Display` hides the password).
    pub fn url(&self) -> &DbUrl {
        self.inner.db.url()
    }

    /// Closes the table's connections (bounded by `store_timeout`). Numbers handed out stay
    /// covered by the table; nothing needs writing at a stop.
    ///
    /// To open the same table again in this process, close first: a raise ahead of need
    /// (started in the background) outlives a dropped handle, and one that writes after a new
    /// `Sequences` loaded the section looks to it like a second process on the table, so the new
    /// one fences the section (refuses its keys, naming why). Closing waits for a raise under
    /// way (within the bound) and none starts after it, when the pool is the one this opened;
    /// a pool the application handed in stays open, and is the application's to close.
    pub async fn close(&self) {
        owner::release(&self.inner).await;
        self.inner.db.close().await;
    }
}

/// Creates the owner's tables (`vesta_seq_store`, `vesta_seq_member`) and reads the store's
/// name (drawn now if the table has none), trying three times as `vesta_seq`'s creation does.
async fn init_owner(db: &Database, token: i64) -> Result<String, SeqError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let candidate = format!("{token:016x}{:08x}", nanos & 0xffff_ffff);
    let mut tries = 0u64;
    loop {
        match db.owner_init(&candidate).await {
            Ok(store) => return Ok(store),
            Err(e) if tries >= 2 => return Err(e.into()),
            Err(e) => {
                tries += 1;
                tracing::warn!("creating the owner's tables (try {tries} of 3): {e}");
                tokio::time::sleep(Duration::from_millis(200 * tries)).await;
            }
        }
    }
}

/// A random token, never 0: this process's mark on the rows it raises.
fn token() -> i64 {
    let h = std::collections::hash_map::RandomState::new()
        .hash_one((std::process::id(), std::time::SystemTime::now()));
    (h >> 1).max(1) as i64
}
