//! Per-key sequences, WeChat seqsvr's model: a number per key that strictly increases on every
//! call, at memory speed, with a few writes to the table per thousand calls.
//!
//! Keys ([`SeqKey`]) are grouped into sections (100,000 consecutive numeric keys, or a bucket
//! of string keys); a section shares one stored maximum in the table `vesta_seq`. A call returns
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
//! Memory: a numeric section is 800 KB (8 bytes a key, loaded on first use); string keys cost
//! their map entry, about 60 bytes plus the key. Sections untouched for a while are evicted
//! (their maximum is in the table, so a reload only costs a raise); `max_sections` and
//! `max_string_keys` bound the rest, and a call that would pass them is refused, saying which.

mod peek;

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::Duration;

use tokio::time::Instant;
use vesta_segment::{AnyPool, DbUrl, SegmentError};

pub use self::peek::SeqPeek;

use crate::cluster;
use crate::config;
use crate::db::Database;
use crate::db::seq::{Cas, META};
use crate::key::{KeyError, Place, SECTION_KEYS, STRING_BUCKETS, SeqKey};
use crate::section::{Dense, Section, Slots, Sparse, Take, raise_target};
use crate::sets;

/// `kind` of numeric sections' rows.
const NUMERIC: i16 = 0;
/// `kind` of string buckets' rows.
const STRINGS: i16 = 1;
/// The highest number the table can hold (`BIGINT`).
const LIMIT: u64 = i64::MAX as u64;
/// The setting a table round trip is bounded by, named in errors.
const TIMEOUT_KEY: &str = "seq.store_timeout_ms";

/// How the sequences behave; [`SeqOptions::default`] is what a server uses unless told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqOptions {
    /// How far a raise moves a section's maximum at first (seqsvr: 10,000), and the largest
    /// batch. A section raised again within a second doubles its step, up to `max_step`; one
    /// raised a minute or more after halves it, down to `step` (Leaf's adaptive step, per
    /// section). A larger step writes less and loses more numbers at a restart.
    pub step: u64,
    /// The adaptive step's ceiling (at least `step`).
    pub max_step: u64,
    /// Longest wait for one round trip to the table (and a caller's longest wait for a raise).
    pub store_timeout: Duration,
    /// Most sections in memory (numeric: 800 KB each), string buckets included.
    pub max_sections: usize,
    /// Most string keys in memory, every bucket together.
    pub max_string_keys: usize,
    /// A section untouched this long is evicted (checked every quarter of it).
    pub idle: Duration,
}

impl Default for SeqOptions {
    fn default() -> Self {
        SeqOptions {
            step: 10_000,
            max_step: 1_000_000,
            store_timeout: Duration::from_secs(3),
            max_sections: 125,
            max_string_keys: 1_000_000,
            idle: Duration::from_secs(600),
        }
    }
}

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
    /// Memory bound reached: a section or string key more would pass its setting.
    #[error("key {key}: {what} already in memory ({setting}); raise it or spread the load")]
    Full {
        /// The key.
        key: String,
        /// How many of what.
        what: String,
        /// The setting.
        setting: &'static str,
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

/// What the sequences are doing, for `/healthz` and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SeqStatus {
    /// Sections in memory (numeric and string buckets).
    pub sections: usize,
    /// String keys in memory.
    pub string_keys: usize,
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
}

type Map<K, S> = RwLock<HashMap<K, Arc<Section<S>>, BuildHasherDefault<SectionHasher>>>;

/// Hashes a section number with one multiplication (FxHash's): section maps are looked up on
/// every call, and FNV's byte-at-a-time loop cost a third of a call. The keys are small
/// integers bounded by `max_sections`, so a collision costs a probe, never unbounded work.
#[derive(Default)]
struct SectionHasher(u64);

impl std::hash::Hasher for SectionHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
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
    numeric: Map<u64, Dense>,
    strings: Map<u32, Sparse>,
    /// One load at a time (a load is rare; two of one section would be one wasted).
    loading: tokio::sync::Mutex<()>,
    string_keys: Arc<AtomicUsize>,
    raises: AtomicU64,
    raise_failures: AtomicU64,
    raise_micros: AtomicU64,
    loads: AtomicU64,
    evictions: AtomicU64,
    fenced: AtomicU64,
    /// Set when the sequences join a cluster: which sets are served here.
    pub(crate) gate: OnceLock<Arc<cluster::Gate>>,
}

impl Sequences {
    /// Opens the sequences on the database at `url` (an SQLite file is created), creating
    /// `vesta_seq` on first use.
    pub async fn open(url: &DbUrl, options: SeqOptions) -> Result<Sequences, SeqError> {
        let db = Database::open(url, options.store_timeout, true, TIMEOUT_KEY).await?;
        Self::start(db, options).await
    }

    /// On a pool the application already has (it stays the application's to close).
    pub async fn from_pool(pool: AnyPool, options: SeqOptions) -> Result<Sequences, SeqError> {
        let db = Database::from_pool(pool, options.store_timeout, TIMEOUT_KEY)?;
        Self::start(db, options).await
    }

    async fn start(db: Database, options: SeqOptions) -> Result<Sequences, SeqError> {
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
        for (section, what, expected) in [
            (0, "keys per numeric section", SECTION_KEYS),
            (1, "string-key buckets", STRING_BUCKETS),
        ] {
            let found = db.seq_load(META, section, expected as i64).await?;
            if found != expected as i64 {
                return Err(SeqError::Layout {
                    db: db.url().to_string(),
                    what,
                    found,
                    expected,
                });
            }
        }
        let inner = Arc::new(Inner {
            db,
            options,
            token: token(),
            numeric: Map::default(),
            strings: Map::default(),
            loading: tokio::sync::Mutex::new(()),
            string_keys: Arc::default(),
            raises: AtomicU64::new(0),
            raise_failures: AtomicU64::new(0),
            raise_micros: AtomicU64::new(0),
            loads: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            fenced: AtomicU64::new(0),
            gate: OnceLock::new(),
        });
        tokio::spawn(sweeper(Arc::downgrade(&inner)));
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
        match (key.place(), key) {
            (Place::Num { section, slot }, _) => {
                let s = Inner::section(&self.inner, |i| &i.numeric, section, key).await?;
                Ok(s.current(&slot))
            }
            (Place::Str { bucket }, SeqKey::Str(k)) => {
                let s = Inner::section(&self.inner, |i| &i.strings, bucket, key).await?;
                Ok(s.current(k))
            }
            (Place::Str { .. }, SeqKey::Num(_)) => {
                unreachable!("a numeric key has a numeric place")
            }
        }
    }

    /// What the sequences are doing.
    pub fn status(&self) -> SeqStatus {
        let i = &self.inner;
        let sections = read(&i.numeric).len() + read(&i.strings).len();
        SeqStatus {
            sections,
            string_keys: i.string_keys.load(Ordering::Relaxed),
            raises: i.raises.load(Ordering::Relaxed),
            raise_failures: i.raise_failures.load(Ordering::Relaxed),
            raise_micros: i.raise_micros.load(Ordering::Relaxed),
            loads: i.loads.load(Ordering::Relaxed),
            evictions: i.evictions.load(Ordering::Relaxed),
            fenced: i.fenced.load(Ordering::Relaxed),
        }
    }

    /// What this server's membership of a cluster is doing, once it joined one.
    pub fn cluster_status(&self) -> Option<cluster::ClusterStatus> {
        self.inner.gate.get().map(|g| g.status())
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
        self.inner.db.close().await;
    }
}

/// A random token, never 0: this process's mark on the rows it raises.
fn token() -> i64 {
    let h = std::collections::hash_map::RandomState::new()
        .hash_one((std::process::id(), std::time::SystemTime::now()));
    (h >> 1).max(1) as i64
}

fn read<K, S>(
    map: &Map<K, S>,
) -> std::sync::RwLockReadGuard<'_, HashMap<K, Arc<Section<S>>, BuildHasherDefault<SectionHasher>>>
{
    map.read().unwrap_or_else(|e| e.into_inner())
}

/// What the fast path found.
enum Found<S> {
    /// The call's last number may be handed out.
    Ready(u64),
    /// It may once the section is raised to it.
    Wait(Arc<Section<S>>, u64),
    /// The section is not in memory.
    Absent,
}

/// A call under way: taken, waiting for its section.
enum State {
    /// A numeric section's raise to the number.
    Num(Arc<Section<Dense>>, u64),
    /// A string bucket's raise to the number.
    Str(Arc<Section<Sparse>>, u64),
    /// The section's load (nothing taken yet).
    Absent,
}

/// What [`Sequences::try_next_n`] got.
pub enum SeqNext {
    /// The last number of the call, handed out.
    Ready(u64),
    /// The rest of the call: its section's load or raise.
    Pending(PendingNext),
}

/// A call waiting for the table: [`PendingNext::wait`] finishes it within `store_timeout`.
pub struct PendingNext {
    inner: Arc<Inner>,
    key: SeqKey,
    n: u64,
    state: State,
}

impl std::fmt::Debug for PendingNext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingNext({}, {})", self.key, self.n)
    }
}

impl PendingNext {
    /// Waits for the section (at most `store_timeout` in all) and returns the call's last
    /// number, or why it could not be handed out.
    pub async fn wait(self) -> Result<u64, SeqError> {
        let PendingNext {
            inner,
            key,
            n,
            mut state,
        } = self;
        let deadline = Instant::now() + inner.options.store_timeout;
        loop {
            match state {
                State::Num(s, last) => {
                    inner.raise(&s, last, deadline, &key).await?;
                    return Ok(last);
                }
                State::Str(s, last) => {
                    inner.raise(&s, last, deadline, &key).await?;
                    return Ok(last);
                }
                State::Absent => {
                    match key.place() {
                        Place::Num { section, .. } => {
                            Inner::load(&inner, |i| &i.numeric, section, &key, deadline).await?;
                        }
                        Place::Str { bucket } => {
                            Inner::load(&inner, |i| &i.strings, bucket, &key, deadline).await?;
                        }
                    }
                    match Inner::try_take(&inner, &key, n)? {
                        SeqNext::Ready(last) => return Ok(last),
                        SeqNext::Pending(p) => state = p.state,
                    }
                }
            }
        }
    }
}

/// The slots of a new section of kind `S`.
trait Fresh: Slots + Sized {
    const KIND: i16;
    fn fresh(inner: &Inner, max: u64) -> Self;
}

impl Fresh for Dense {
    const KIND: i16 = NUMERIC;
    fn fresh(_: &Inner, max: u64) -> Self {
        Dense::new(max)
    }
}

impl Fresh for Sparse {
    const KIND: i16 = STRINGS;
    fn fresh(inner: &Inner, _: u64) -> Self {
        Sparse::new(
            Arc::clone(&inner.string_keys),
            inner.options.max_string_keys,
        )
    }
}

impl Inner {
    /// The fast part of a call of `n` numbers on `key`: what [`Sequences::try_next_n`] says.
    fn try_take(this: &Arc<Inner>, key: &SeqKey, n: u64) -> Result<SeqNext, SeqError> {
        this.check_gate(key)?;
        let state = match (key.place(), key) {
            (Place::Num { section, slot }, _) => {
                match Inner::find(this, &this.numeric, section, &slot, n, key)? {
                    Found::Ready(last) => return Ok(SeqNext::Ready(last)),
                    Found::Wait(s, last) => State::Num(s, last),
                    Found::Absent => State::Absent,
                }
            }
            (Place::Str { bucket }, SeqKey::Str(k)) => {
                match Inner::find(this, &this.strings, bucket, &**k, n, key)? {
                    Found::Ready(last) => return Ok(SeqNext::Ready(last)),
                    Found::Wait(s, last) => State::Str(s, last),
                    Found::Absent => State::Absent,
                }
            }
            (Place::Str { .. }, SeqKey::Num(_)) => {
                unreachable!("a numeric key has a numeric place")
            }
        };
        Ok(SeqNext::Pending(PendingNext {
            inner: Arc::clone(this),
            key: key.clone(),
            n,
            state,
        }))
    }

    /// Takes `n` numbers for `slot` in section `id` of `map`, if it is in memory.
    fn find<K, S>(
        this: &Arc<Inner>,
        map: &Map<K, S>,
        id: K,
        slot: &S::Key,
        n: u64,
        key: &SeqKey,
    ) -> Result<Found<S>, SeqError>
    where
        K: Copy + Eq + std::hash::Hash,
        S: Slots,
    {
        let map = read(map);
        let Some(s) = map.get(&id) else {
            return Ok(Found::Absent);
        };
        if let Some(why) = s.fenced() {
            return Err(SeqError::Fenced {
                key: key.to_string(),
                why: why.to_owned(),
            });
        }
        match s.take(slot, n) {
            Take::Ready(last) => {
                if s.wants_prefetch(last, s.step() / 2) {
                    Inner::prefetch(this, Arc::clone(s));
                }
                Ok(Found::Ready(last))
            }
            Take::Wait(last) => Ok(Found::Wait(Arc::clone(s), last)),
            Take::Full => Err(SeqError::Full {
                key: key.to_string(),
                what: format!("{} string keys", this.options.max_string_keys),
                setting: "seq.max_string_keys",
            }),
        }
    }

    /// The section, loaded if it is not in memory.
    async fn section<K, S>(
        this: &Arc<Inner>,
        which: fn(&Inner) -> &Map<K, S>,
        id: K,
        key: &SeqKey,
    ) -> Result<Arc<Section<S>>, SeqError>
    where
        K: Copy + Eq + std::hash::Hash + Into<u64> + Send + Sync + 'static,
        S: Fresh,
    {
        loop {
            if let Some(s) = read(which(this)).get(&id) {
                return Ok(Arc::clone(s));
            }
            let deadline = Instant::now() + this.options.store_timeout;
            Inner::load(this, which, id, key, deadline).await?;
        }
    }

    /// Reads section `id`'s maximum from the table (its row created at 0 when missing) and puts
    /// it in memory, evicting an idle section first if the cap is reached.
    async fn load<K, S>(
        this: &Arc<Inner>,
        which: fn(&Inner) -> &Map<K, S>,
        id: K,
        key: &SeqKey,
        deadline: Instant,
    ) -> Result<(), SeqError>
    where
        K: Copy + Eq + std::hash::Hash + Into<u64> + Send + Sync + 'static,
        S: Fresh,
    {
        let unavailable = |cause: String| SeqError::Unavailable {
            key: key.to_string(),
            cause,
        };
        let _turn = tokio::time::timeout_at(deadline, this.loading.lock())
            .await
            .map_err(|_| unavailable(waited(this.options.store_timeout, "a section load")))?;
        // A set stopped while this load waited its turn is not loaded (stop_set drains loads
        // by taking the same turn).
        this.check_set(set_of(id.into()), key)?;
        if read(which(this)).contains_key(&id) {
            return Ok(());
        }
        if this.sections() >= this.options.max_sections && !this.evict_one() {
            return Err(SeqError::Full {
                key: key.to_string(),
                what: format!("{} sections", this.options.max_sections),
                setting: "seq.max_sections",
            });
        }
        let row = i64::try_from(id.into()).expect("section numbers fit in i64");
        let max = tokio::time::timeout_at(deadline, this.db.seq_load(S::KIND, row, 0))
            .await
            .map_err(|_| unavailable(waited(this.options.store_timeout, "a section load")))?
            .map_err(|e| unavailable(e.to_string()))?;
        let max = u64::try_from(max).map_err(|_| SeqError::Fenced {
            key: key.to_string(),
            why: format!("section {row} of vesta_seq holds max_seq {max}, below 0"),
        })?;
        let section = Section::new(S::KIND, row, max, this.options.step, S::fresh(this, max));
        which(this)
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, Arc::new(section));
        this.loads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Raises `section` until its maximum covers `need`, by `deadline`.
    async fn raise<S: Slots>(
        &self,
        section: &Section<S>,
        need: u64,
        deadline: Instant,
        key: &SeqKey,
    ) -> Result<(), SeqError> {
        let unavailable = |cause: String| SeqError::Unavailable {
            key: key.to_string(),
            cause,
        };
        loop {
            if section.max() >= need {
                return Ok(());
            }
            if let Some(why) = section.fenced() {
                return Err(SeqError::Fenced {
                    key: key.to_string(),
                    why: why.to_owned(),
                });
            }
            let Ok(_turn) = tokio::time::timeout_at(deadline, section.raising.lock()).await else {
                self.raise_failures.fetch_add(1, Ordering::Relaxed);
                return Err(unavailable(waited(self.options.store_timeout, "a raise")));
            };
            // A set stopped while this raise waited its turn is raised no more (stop_set drains
            // raises by taking the same turn).
            self.check_set(set_of(section.id as u64), key)?;
            let from = section.max();
            if from >= need {
                return Ok(());
            }
            let Some(to) = raise_target(from, need, section.step(), LIMIT) else {
                return Err(SeqError::Exhausted {
                    key: key.to_string(),
                });
            };
            let started = Instant::now();
            let cas = tokio::time::timeout_at(
                deadline,
                self.db
                    .seq_raise(section.kind, section.id, from as i64, to as i64, self.token),
            )
            .await;
            match cas {
                Ok(Ok(Cas::Done)) => {
                    section.raised(to);
                    section.adapt(
                        std::time::Instant::now(),
                        self.options.step,
                        self.options.max_step,
                    );
                    self.raises.fetch_add(1, Ordering::Relaxed);
                    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    self.raise_micros.fetch_add(micros, Ordering::Relaxed);
                }
                // Our own raise whose answer was lost did commit: the row is ours.
                Ok(Ok(Cas::Moved(Some((found, owner)))))
                    if owner == self.token && found >= from as i64 =>
                {
                    section.raised(found as u64);
                }
                Ok(Ok(Cas::Moved(found))) => {
                    let why = match found {
                        Some((v, _)) => format!(
                            "section {} (kind {}) of vesta_seq holds max_seq {v}, not the {from} \
                             this server last wrote: another process raised it (two servers on \
                             one table?); this server serves its keys no more",
                            section.id, section.kind
                        ),
                        None => format!(
                            "section {} (kind {}) of vesta_seq is gone from the table; this \
                             server serves its keys no more",
                            section.id, section.kind
                        ),
                    };
                    // Once per section: its keys are refused from here on, and the log says why.
                    tracing::error!(section = section.id, kind = section.kind, "{why}");
                    section.fence(why.clone());
                    self.fenced.fetch_add(1, Ordering::Relaxed);
                    return Err(SeqError::Fenced {
                        key: key.to_string(),
                        why,
                    });
                }
                Ok(Err(e)) => {
                    self.raise_failures.fetch_add(1, Ordering::Relaxed);
                    return Err(unavailable(e.to_string()));
                }
                Err(_) => {
                    self.raise_failures.fetch_add(1, Ordering::Relaxed);
                    return Err(unavailable(waited(self.options.store_timeout, "a raise")));
                }
            }
        }
    }

    /// Raises `section` one step ahead of need, in the background.
    fn prefetch<S: Slots>(this: &Arc<Inner>, section: Arc<Section<S>>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            section.prefetched();
            return;
        };
        let inner = Arc::clone(this);
        runtime.spawn(async move {
            let deadline = Instant::now() + inner.options.store_timeout;
            let need = section.max().saturating_add(1);
            // A failure is counted; the call that needs the raise tries again and reports it.
            let _ = inner.raise(&section, need, deadline, &SeqKey::Num(0)).await;
            section.prefetched();
        });
    }

    /// In a cluster, refuses a key whose set is not served here (see [`cluster`]).
    fn check_gate(&self, key: &SeqKey) -> Result<(), SeqError> {
        match self.gate.get() {
            Some(gate) => gate.check(key.set().get(), key),
            None => Ok(()),
        }
    }

    /// [`Inner::check_gate`] for a set known already.
    fn check_set(&self, set: u32, key: &SeqKey) -> Result<(), SeqError> {
        match self.gate.get() {
            Some(gate) => gate.check(set, key),
            None => Ok(()),
        }
    }

    /// Stops serving `set`: no call starts on it from here on, and once this returns no load
    /// or raise of its sections is under way and none is in memory. Calls that passed the check
    /// before may still finish from memory, below the stored maximum.
    pub(crate) async fn stop_set(&self, set: u32) {
        if let Some(gate) = self.gate.get() {
            gate.stop(set);
        }
        self.drain(|id| set_of(id) == set).await;
    }

    /// Stops serving every set (the lease was lost).
    pub(crate) async fn stop_all(&self) {
        if let Some(gate) = self.gate.get() {
            for set in 0..sets::SETS {
                gate.stop(set);
            }
        }
        self.drain(|_| true).await;
    }

    /// Waits out the loads and raises under way of the sections `which` picks, and drops them.
    async fn drain(&self, which: impl Fn(u64) -> bool) {
        let _turn = self.loading.lock().await;
        let numeric = take_out(&self.numeric, |id| which(*id));
        let strings = take_out(&self.strings, |id| which(u64::from(*id)));
        for s in &numeric {
            drop(s.raising.lock().await);
        }
        for s in &strings {
            drop(s.raising.lock().await);
        }
    }

    fn sections(&self) -> usize {
        read(&self.numeric).len() + read(&self.strings).len()
    }

    /// Evicts one section untouched since the last sweep and not in use; false if none is.
    fn evict_one(&self) -> bool {
        evict(&self.numeric, &self.evictions, true) || evict(&self.strings, &self.evictions, true)
    }
}

/// Removes sections of `map` nobody holds that were idle (`one`: the first untouched one;
/// else every one idle for [`IDLE_SWEEPS`] sweeps). Returns whether any was removed.
fn evict<K: Copy + Eq + std::hash::Hash, S: Slots>(
    map: &Map<K, S>,
    evictions: &AtomicU64,
    one: bool,
) -> bool {
    let mut map = map.write().unwrap_or_else(|e| e.into_inner());
    let idle = |s: &Arc<Section<S>>| {
        Arc::strong_count(s) == 1 && s.idle_sweeps.load(Ordering::Relaxed) >= IDLE_SWEEPS
    };
    let victims: Vec<K> = if one {
        map.iter()
            .filter(|(_, s)| Arc::strong_count(s) == 1 && s.idle_sweeps.load(Ordering::Relaxed) > 0)
            .map(|(k, _)| *k)
            .take(1)
            .collect()
    } else {
        map.iter()
            .filter(|(_, s)| idle(s))
            .map(|(k, _)| *k)
            .collect()
    };
    for k in &victims {
        map.remove(k);
    }
    evictions.fetch_add(victims.len() as u64, Ordering::Relaxed);
    !victims.is_empty()
}

/// The set of numeric section or string bucket `id`.
fn set_of(id: u64) -> u32 {
    (id % u64::from(sets::SETS)) as u32
}

/// Removes the sections whose id `which` picks from `map`, returning them.
fn take_out<K: Copy + Eq + std::hash::Hash, S>(
    map: &Map<K, S>,
    which: impl Fn(&K) -> bool,
) -> Vec<Arc<Section<S>>> {
    let mut map = map.write().unwrap_or_else(|e| e.into_inner());
    let ids: Vec<K> = map.keys().filter(|k| which(k)).copied().collect();
    ids.iter().filter_map(|k| map.remove(k)).collect()
}

/// Sweeps in a row a section must be untouched to be evicted; a sweep runs every
/// `idle / IDLE_SWEEPS`.
const IDLE_SWEEPS: u32 = 4;

/// Marks untouched sections idle and evicts those idle long enough, until the sequences are
/// dropped.
async fn sweeper(inner: Weak<Inner>) {
    let every = match inner.upgrade() {
        Some(i) => i.options.idle / IDLE_SWEEPS,
        None => return,
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(i) = inner.upgrade() else { return };
        for s in read(&i.numeric).values() {
            mark(s);
        }
        for s in read(&i.strings).values() {
            mark(s);
        }
        evict(&i.numeric, &i.evictions, false);
        evict(&i.strings, &i.evictions, false);
    }
}

fn mark<S: Slots>(s: &Section<S>) {
    if s.sweep() {
        s.idle_sweeps.store(0, Ordering::Relaxed);
    } else {
        s.idle_sweeps.fetch_add(1, Ordering::Relaxed);
    }
}

fn waited(limit: Duration, what: &str) -> String {
    format!(
        "no answer within {} ms ({TIMEOUT_KEY}) for {what}",
        limit.as_millis()
    )
}
