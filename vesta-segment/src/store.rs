//! The store: every tag's double buffer over one database, shared by all callers (hold it in
//! an `Arc`). Numbers come from [`Store::next`] / [`Store::next_n`] or from a [`Tag`] handle,
//! which skips the name lookup. [`Store::shutdown`] stops issuing and gives unused tails back.
//!
//! Tags are looked up in a copy-on-write map (`ArcSwap<HashMap>`): the warm path reads it
//! without a lock, from a per-thread copy of the `Arc` that is refreshed when the map's
//! generation moves (a tag was added), so a lookup costs one plain atomic load besides the hash. A tag enters the map on first use, after its row is seen in `leaf_alloc`
//! (the names are re-read at most once a second on a miss, so unknown tags cost the database
//! little); its fetcher task starts then.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::buffer::{GiveBackPlan, TagBuffer};
use crate::clock::{Clock, MonotonicClock};
use crate::config::SegmentSection;
use crate::db::Database;
use crate::error::{SegmentError, shown_tag};
use crate::fetcher::{self, FetcherContext};
use crate::floors::Floors;
use crate::pool::AnyPool;
use crate::status::{Health, StoreStatus, TagState, TagStatus};
use crate::tag::validate_tag;

/// The most numbers one [`Store::next_n`] call hands out.
pub const MAX_BATCH: u64 = vesta_core::tag::MAX_SEGMENT_BATCH;

/// A miss re-reads the tag names at most this often.
const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// Keyed with FNV-1a (the `fnv` crate): a few cycles for a short tag, where std's SipHash costs tens of nanoseconds. The
/// keys are the table's own tags (not chosen by callers), so flooding is not a concern; a
/// caller's unknown name only makes one lookup miss.
type TagMap = HashMap<Box<str>, Arc<TagBuffer>, fnv::FnvBuildHasher>;

/// Ids of stores, unique in the process (keys of the per-thread map cache).
static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The tag map this thread read last: its store's id, the map's generation then, the map.
    static MAP: RefCell<(u64, u64, Option<Arc<TagMap>>)> = const { RefCell::new((0, 0, None)) };
}

/// The tag names seen in `leaf_alloc`, and when they were read.
struct Known {
    names: HashSet<String>,
    read_at: Instant,
}

/// Segment numbers for every tag of one `leaf_alloc` table.
pub struct Store {
    db: Arc<Database>,
    db_shown: Arc<str>,
    settings: SegmentSection,
    clock: Arc<dyn Clock>,
    /// The restore guard's file, when `segment.state_file` is set.
    floors: Option<Arc<Floors>>,
    tags: ArcSwap<TagMap>,
    /// Process-unique, for the per-thread map cache.
    id: u64,
    /// Bumped after every change of `tags` (per-thread copies of an older one are refreshed).
    generation: AtomicU64,
    known: tokio::sync::Mutex<Known>,
    closed: AtomicBool,
    shutdown: watch::Sender<bool>,
    fetchers: Mutex<Vec<JoinHandle<()>>>,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.db_shown)
    }
}

/// What shutdown did with one tag's unused numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GiveBack {
    /// The tag.
    pub tag: String,
    /// What happened.
    pub outcome: GiveBackOutcome,
}

/// The outcome of one give-back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum GiveBackOutcome {
    /// `max_id` was lowered to `max_id`: the next fetch starts there.
    Returned {
        /// The new `max_id`.
        max_id: u64,
        /// How many numbers came back.
        numbers: u64,
    },
    /// Every reserved number was issued (or none was ever reserved).
    NothingUnused,
    /// Someone took a segment after ours; `max_id` was left alone and the tail is a gap.
    Moved,
    /// The UPDATE failed (the tail is a gap).
    Failed {
        /// Why.
        error: String,
    },
}

impl Store {
    /// Opens the store on `section.db` with the monotonic clock. The table must exist; nothing
    /// is created. Call from within a tokio runtime: the fetchers run on it.
    pub async fn open(section: &SegmentSection) -> Result<Store, SegmentError> {
        Self::open_with_clock(section, Arc::new(MonotonicClock::default())).await
    }

    /// Like [`Store::open`], with the clock the adaptive step reads (a
    /// [`ManualClock`](crate::clock::ManualClock) in tests).
    pub async fn open_with_clock(
        section: &SegmentSection,
        clock: Arc<dyn Clock>,
    ) -> Result<Store, SegmentError> {
        section.validate()?;
        let url = section.db_url()?;
        let floors = Self::floors(section)?;
        let db = Database::connect(&url, section.fetch_timeout()).await?;
        Self::on_database(db, section, clock, floors).await
    }

    /// Opens the store on a pool the application already has (`sqlx::PgPool`, `MySqlPool` or
    /// `SqlitePool`, with its own size, TLS and timeouts); `section.db` is not read, messages
    /// name the database as the pool's kind. The table must exist (`Database::init` creates
    /// it). Every round trip is still bounded by `segment.fetch_timeout_ms`.
    pub async fn from_pool(
        pool: impl Into<AnyPool>,
        section: &SegmentSection,
    ) -> Result<Store, SegmentError> {
        Self::from_pool_with_clock(pool, section, Arc::new(MonotonicClock::default())).await
    }

    /// Like [`Store::from_pool`], with the clock the adaptive step reads.
    pub async fn from_pool_with_clock(
        pool: impl Into<AnyPool>,
        section: &SegmentSection,
        clock: Arc<dyn Clock>,
    ) -> Result<Store, SegmentError> {
        let mut section = section.clone();
        // The pool stands in for the URL: validate the rest of the section as it is.
        section.db = None;
        section.validate()?;
        let floors = Self::floors(&section)?;
        let db = Database::from_pool(pool.into(), section.fetch_timeout());
        Self::on_database(db, &section, clock, floors).await
    }

    fn floors(section: &SegmentSection) -> Result<Option<Arc<Floors>>, SegmentError> {
        Ok(match &section.state_file {
            Some(path) => Some(Arc::new(Floors::open(path)?)),
            None => None,
        })
    }

    async fn on_database(
        db: Database,
        section: &SegmentSection,
        clock: Arc<dyn Clock>,
        floors: Option<Arc<Floors>>,
    ) -> Result<Store, SegmentError> {
        let names = db.tags().await?.into_iter().collect();
        Ok(Store {
            db_shown: db.url().redacted().into(),
            db: Arc::new(db),
            settings: section.clone(),
            clock,
            floors,
            tags: ArcSwap::from_pointee(TagMap::default()),
            id: NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(0),
            known: tokio::sync::Mutex::new(Known {
                names,
                read_at: Instant::now(),
            }),
            closed: AtomicBool::new(false),
            shutdown: watch::channel(false).0,
            fetchers: Mutex::new(Vec::new()),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// The database, for admin operations on the same pool.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The next number of `tag`. On a warm buffer this is a map lookup and one atomic add and
    /// completes without awaiting; when both segments are used up it waits for the fetch up to
    /// `segment.wait_ms`, or fails fast if the last fetch failed.
    pub async fn next(&self, tag: &str) -> Result<u64, SegmentError> {
        match self.next_buffered(tag) {
            Some(n) => Ok(n),
            // Boxed: the cold path's future (a lookup, maybe a database round) is large, and
            // the warm path should not carry it.
            None => Box::pin(self.next_cold(tag)).await,
        }
    }

    #[cold]
    async fn next_cold(&self, tag: &str) -> Result<u64, SegmentError> {
        self.tag(tag).await?.next().await
    }

    /// The next number of `tag` if the tag is in use and has one buffered: no waiting, no
    /// database, no allocation (`None` otherwise: then call [`Store::next`]). For servers, whose
    /// workers must not wait; the warm path of [`Store::next`].
    #[inline]
    pub fn next_buffered(&self, tag: &str) -> Option<u64> {
        let generation = self.generation.load(Ordering::Acquire);
        let cached = MAP.try_with(|m| {
            let m = m.borrow();
            match &m.2 {
                Some(map) if m.0 == self.id && m.1 == generation => {
                    Some(map.get(tag).and_then(|b| b.take(1)))
                }
                _ => None,
            }
        });
        match cached {
            Ok(Some(Some(range))) => Some(range.start),
            _ => self.next_buffered_refresh(tag, generation),
        }
    }

    /// The thread's copy of the map is of another store or older: take from the current map
    /// and keep a copy of it.
    #[cold]
    fn next_buffered_refresh(&self, tag: &str, generation: u64) -> Option<u64> {
        // Read after the generation: a map at least as new as `generation` (see `load`).
        let map = self.tags.load_full();
        let hit = map.get(tag).and_then(|b| b.take(1)).map(|r| r.start);
        let _ = MAP.try_with(|m| *m.borrow_mut() = (self.id, generation, Some(map)));
        hit
    }

    /// `n` numbers of `tag` (1 ≤ n ≤ [`MAX_BATCH`]) as increasing ranges (more than one when
    /// the batch spans segments). If it fails part-way, the numbers already taken are a gap.
    pub async fn next_n(&self, tag: &str, n: u64) -> Result<Vec<Range<u64>>, SegmentError> {
        self.tag(tag).await?.next_n(n).await
    }

    /// Like [`Store::next_n`], but may answer fewer numbers (at least one), never more than
    /// `max_ranges` ranges: for a wire answer of bounded size (see [`Tag::next_n_within`]).
    pub async fn next_n_within(
        &self,
        tag: &str,
        n: u64,
        max_ranges: usize,
    ) -> Result<Vec<Range<u64>>, SegmentError> {
        self.tag(tag).await?.next_n_within(n, max_ranges).await
    }

    /// A handle on `tag`, for calls that skip the name lookup. Fails on a bad or unknown tag.
    pub async fn tag(&self, name: &str) -> Result<Tag, SegmentError> {
        if let Some(buffer) = self.tags.load().get(name) {
            return Ok(Tag {
                buffer: Arc::clone(buffer),
            });
        }
        self.load(name).await
    }

    #[cold]
    async fn load(&self, name: &str) -> Result<Tag, SegmentError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SegmentError::Closed);
        }
        validate_tag(name)?;
        let mut known = self.known.lock().await;
        if let Some(buffer) = self.tags.load().get(name) {
            return Ok(Tag {
                buffer: Arc::clone(buffer),
            });
        }
        if !known.names.contains(name) && known.read_at.elapsed() >= RELOAD_EVERY {
            known.names = self.db.tags().await?.into_iter().collect();
            known.read_at = Instant::now();
        }
        if !known.names.contains(name) {
            return Err(SegmentError::UnknownTag {
                tag: shown_tag(name),
                db: self.db_shown.to_string(),
            });
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(SegmentError::Closed);
        }
        let buffer = Arc::new(TagBuffer::new(
            name,
            Arc::clone(&self.db_shown),
            self.settings.prefetch_percent,
            self.settings.wait(),
            self.floors.as_ref().map_or(0, |f| f.get(name)),
        ));
        let ctx = FetcherContext {
            db: Arc::clone(&self.db),
            floors: self.floors.clone(),
            policy: self.settings.step_policy(),
            clock: Arc::clone(&self.clock),
            shutdown: self.shutdown.subscribe(),
        };
        let task = self.runtime.spawn(fetcher::run(Arc::clone(&buffer), ctx));
        self.fetchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
        self.tags.rcu(|map| {
            let mut map = TagMap::clone(map);
            map.insert(name.into(), Arc::clone(&buffer));
            map
        });
        // After the new map is published: a thread that sees this generation reads a map
        // holding the tag.
        self.generation.fetch_add(1, Ordering::Release);
        Ok(Tag { buffer })
    }

    /// Every tag in use, by name.
    pub fn status(&self) -> StoreStatus {
        let mut tags: Vec<TagStatus> = self.tags.load().values().map(|b| b.status()).collect();
        tags.sort_by(|a, b| a.tag.cmp(&b.tag));
        let state_file_error = self.floors.as_ref().and_then(|f| f.error());
        let health = if self.closed.load(Ordering::SeqCst) {
            Health::Closed
        } else if state_file_error.is_some()
            || tags
                .iter()
                .any(|t| matches!(t.state, TagState::Degraded | TagState::Down))
        {
            Health::Degraded
        } else {
            Health::Ok
        };
        StoreStatus {
            db: self.db_shown.to_string(),
            kind: self.db.url().kind(),
            health,
            state_file: self.floors.as_ref().map(|f| f.path().display().to_string()),
            state_file_error,
            tags,
        }
    }

    /// Stops issuing, lets fetches under way finish, and gives back each tag's unused tail:
    /// `UPDATE leaf_alloc SET max_id = <first unused> WHERE biz_tag = ? AND max_id = <our
    /// end>`, so a restart does not burn a step. The give-backs of all tags together take at
    /// most `segment.fetch_timeout_ms`; what is not given back by then stays a gap (or, for
    /// the one under way when the time ran out, may still land later: either way no number
    /// is issued twice, and the state file's floors were lowered first to allow both). Only
    /// the first call does anything; later calls, and every other call on the store, get
    /// [`SegmentError::Closed`] or an empty list.
    pub async fn shutdown(&self) -> Vec<GiveBack> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Vec::new();
        }
        let _ = self.shutdown.send(true);
        let tasks = std::mem::take(&mut *self.fetchers.lock().unwrap_or_else(|p| p.into_inner()));
        for task in tasks {
            let _ = task.await;
        }
        let tags = self.tags.load_full();
        let mut names: Vec<&str> = tags.keys().map(AsRef::as_ref).collect();
        names.sort_unstable();
        let plans: Vec<(&str, Option<GiveBackPlan>)> =
            names.into_iter().map(|n| (n, tags[n].freeze())).collect();
        // Nothing is issued any more: every tag's floor comes down to its first unissued
        // number now, before its give-back, in one rewrite. A give-back that times out may
        // still commit later (the statement was already with the database); a floor lowered
        // only on a give-back's answer would then stand above the table and refuse the next
        // start for a restore that never happened.
        if let Some(floors) = &self.floors {
            let lowered = plans
                .iter()
                .filter_map(|(n, p)| p.map(|p| (n.to_string(), p.first_unused)));
            save_floors(floors, lowered.collect()).await;
        }
        // One bound for all the give-backs together, not one per tag: with the database down
        // and many tags, a stop must still end within segment.fetch_timeout_ms (and so within a
        // unit's TimeoutStopSec), leaving the rest as gaps.
        let budget = self.settings.fetch_timeout();
        let deadline = tokio::time::Instant::now() + budget;
        let time_up = || GiveBackOutcome::Failed {
            error: format!(
                "not given back: the give-backs of all tags together may take \
                 segment.fetch_timeout_ms ({} ms), and that time was up",
                budget.as_millis()
            ),
        };
        let mut done = Vec::with_capacity(plans.len());
        for (name, plan) in plans {
            let outcome = match plan {
                None => GiveBackOutcome::NothingUnused,
                // Once the time is up none is started: it would reach the database and might
                // land after the stop reported it as a gap.
                Some(_) if tokio::time::Instant::now() >= deadline => time_up(),
                Some(plan) => {
                    let giving = self
                        .db
                        .give_back(name, plan.first_unused, plan.reserved_end);
                    match tokio::time::timeout_at(deadline, giving).await {
                        Ok(Ok(true)) => GiveBackOutcome::Returned {
                            max_id: plan.first_unused,
                            numbers: plan.reserved_end - plan.first_unused,
                        },
                        Ok(Ok(false)) => GiveBackOutcome::Moved,
                        Ok(Err(e)) => GiveBackOutcome::Failed {
                            error: e.to_string(),
                        },
                        Err(_) => time_up(),
                    }
                }
            };
            done.push(GiveBack {
                tag: name.to_string(),
                outcome,
            });
        }
        self.db.close().await;
        done
    }
}

/// Writes a tag's floor to the state file off the async workers; a failure is logged and shown
/// in the status (the floor is still kept in memory).
pub(crate) async fn save_floor(floors: &Arc<Floors>, tag: &str, floor: u64) {
    save_floors(floors, vec![(tag.to_owned(), floor)]).await;
}

/// [`save_floor`] for several tags, in one rewrite of the file.
async fn save_floors(floors: &Arc<Floors>, set: Vec<(String, u64)>) {
    if set.is_empty() {
        return;
    }
    let floors = Arc::clone(floors);
    let written = tokio::task::spawn_blocking(move || floors.set_all(set)).await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "the restore guard's floors were not saved"),
        Err(error) => tracing::warn!(%error, "the restore guard's floors were not saved"),
    }
}

impl Drop for Store {
    /// Without [`Store::shutdown`] nothing is given back (as after a crash): the fetchers stop
    /// and the unused numbers are a gap.
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for task in self
            .fetchers
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

/// A handle on one tag of a [`Store`]: cheap to clone, and its calls skip the name lookup.
#[derive(Clone, Debug)]
pub struct Tag {
    buffer: Arc<TagBuffer>,
}

impl Tag {
    /// The tag's name.
    pub fn name(&self) -> &str {
        &self.buffer.name
    }

    /// The next number without waiting: [`SegmentError::WouldBlock`] when both segments are
    /// used up and a fetch is under way (for servers that must not wait).
    #[inline]
    pub fn try_next(&self) -> Result<u64, SegmentError> {
        match self.buffer.take(1) {
            Some(range) => Ok(range.start),
            None => {
                self.buffer.empty_error()?;
                Err(SegmentError::WouldBlock {
                    tag: self.buffer.name.to_string(),
                })
            }
        }
    }

    /// The next number; waits for a fetch up to `segment.wait_ms` when both segments are used
    /// up, and fails fast when the last fetch failed.
    #[inline]
    pub async fn next(&self) -> Result<u64, SegmentError> {
        match self.buffer.take(1) {
            Some(range) => Ok(range.start),
            None => self.next_cold().await,
        }
    }

    #[cold]
    async fn next_cold(&self) -> Result<u64, SegmentError> {
        let deadline = tokio::time::Instant::now() + self.buffer.wait();
        self.buffer.take_until(1, deadline).await.map(|r| r.start)
    }

    /// `n` numbers (1 ≤ n ≤ [`MAX_BATCH`]) as increasing ranges, waiting up to `segment.wait_ms`
    /// in all. If it fails part-way, the numbers already taken are a gap.
    pub async fn next_n(&self, n: u64) -> Result<Vec<Range<u64>>, SegmentError> {
        self.take_ranges(n, usize::MAX, false).await
    }

    /// Like [`Tag::next_n`], but may answer fewer than `n` numbers (at least one): it stops once
    /// the answer has `max_ranges` ranges, and answers what it has instead of an error when
    /// the rest cannot be had (both segments used up and the database slow or down). Nothing
    /// beyond what is returned is taken, so a bounded wire answer leaves no gap.
    pub async fn next_n_within(
        &self,
        n: u64,
        max_ranges: usize,
    ) -> Result<Vec<Range<u64>>, SegmentError> {
        self.take_ranges(n, max_ranges.max(1), true).await
    }

    async fn take_ranges(
        &self,
        n: u64,
        max_ranges: usize,
        partial: bool,
    ) -> Result<Vec<Range<u64>>, SegmentError> {
        if !(1..=MAX_BATCH).contains(&n) {
            return Err(SegmentError::OutOfRange {
                field: "count",
                value: n.into(),
                min: 1,
                max: MAX_BATCH.into(),
                context: format!(" for tag {:?}", self.name()),
            });
        }
        let deadline = tokio::time::Instant::now() + self.buffer.wait();
        let mut ranges: Vec<Range<u64>> = Vec::new();
        let mut left = n;
        while left > 0 && ranges.len() < max_ranges {
            let range = match self.buffer.take_until(left, deadline).await {
                Ok(range) => range,
                Err(_) if partial && !ranges.is_empty() => break,
                Err(e) => return Err(e),
            };
            left -= range.end - range.start;
            match ranges.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => ranges.push(range),
            }
        }
        Ok(ranges)
    }

    /// This tag's buffers and fetch history.
    pub fn status(&self) -> TagStatus {
        self.buffer.status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Servers hold the store in an `Arc` and call it from spawned tasks: the store, its
    /// handles and every future it returns must be `Send` (and the first two `Sync`).
    #[test]
    fn store_handles_and_futures_can_cross_threads() {
        fn shared<T: Send + Sync>() {}
        fn send<T: Send>(_: &T) {}
        #[allow(dead_code)]
        fn futures(store: &Store, tag: &Tag) {
            send(&store.next("t"));
            send(&store.next_n("t", 2));
            send(&store.tag("t"));
            send(&store.shutdown());
            send(&tag.next());
            send(&tag.next_n(2));
        }
        shared::<Store>();
        shared::<Tag>();
        shared::<StoreStatus>();
    }
}
