//! A section's trips to the table: its load (the row read, created a step up when missing, and the
//! section put in memory, the least recently used evicted first at the memory bound) and its
//! raises (a
//! compare-and-set from the maximum this process last saw: a row another process moved fences
//! the section), when a call needs one or a step ahead of need.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::map::{SectionId, read};
use super::memory::set_of;
use super::shape::{NUM, NUMERIC, SPREAD, Shape, TEXT, WIDE};
use super::{Inner, LIMIT, SeqError, TIMEOUT_KEY};
use crate::db::seq::Cas;
use crate::floors::Row;
use crate::key::SeqKey;
use crate::section::{Section, raise_target};
use crate::slots::Slots;

impl Inner {
    /// The section, loaded if it is not in memory.
    pub(super) async fn section<K, S>(
        this: &Arc<Inner>,
        shape: &Shape<K, S>,
        id: K,
        key: &SeqKey,
    ) -> Result<Arc<Section<S>>, SeqError>
    where
        K: SectionId,
        S: Slots,
    {
        let deadline = Instant::now() + this.options.store_timeout;
        loop {
            if let Some(s) = read((shape.map)(this)).get(&id) {
                return Ok(Arc::clone(s));
            }
            Inner::load(this, shape, id, key, deadline).await?;
        }
    }

    /// Reads section `id`'s maximum from the table (its row created a step up when missing) and
    /// puts it in memory, evicting the least recently used sections first if the memory bound
    /// is reached. Loads are batched: a call asks for its section, then takes the one turn to
    /// load; the holder of the turn loads every section asked for meanwhile (served here), and
    /// for a bucket the other buckets of its kind not in memory, up to [`MAX_BATCH`], in one
    /// transaction on SQLite; so a burst of keys of new sections (snowflake or string keys
    /// after a start) costs a write per batch, not per section.
    pub(super) async fn load<K, S>(
        this: &Arc<Inner>,
        shape: &Shape<K, S>,
        id: K,
        key: &SeqKey,
        deadline: Instant,
    ) -> Result<(), SeqError>
    where
        K: SectionId,
        S: Slots,
    {
        let unavailable = |cause: String| SeqError::Unavailable {
            key: key.to_string(),
            cause,
        };
        let own = (shape.kind, id.into());
        lock(&this.wanted).insert(own);
        let _turn = tokio::time::timeout_at(deadline, this.loading.lock())
            .await
            .map_err(|_| unavailable(waited(this.options.store_timeout, "a section load")))?;
        // A set stopped while this load waited its turn is not loaded (stop_set drains loads
        // by taking the same turn).
        this.check_set(set_of(own.1), key)?;
        if read((shape.map)(this)).contains_key(&id) {
            return Ok(());
        }
        // A section that went back is refused from memory, its row read again once a second.
        let own_row = (
            own.0,
            i64::try_from(own.1).expect("section numbers fit in i64"),
        );
        if let Some(refused) = this.floors.refused(own_row, key) {
            return Err(refused);
        }
        let mut batch: Vec<(i16, u64)> = std::mem::take(&mut *lock(&this.wanted))
            .into_iter()
            .filter(|w| *w != own && this.loadable(*w))
            .collect();
        // A bucket's kind has 4,096 rows, each holding keys of any range or text: one key of
        // it asked for is a key of every bucket soon (snowflake IDs, user names). Load them
        // all while at it (those served here): a burst of new keys after a start then waits
        // for a few loads, not one per bucket. Only where a batch is one transaction (SQLite):
        // elsewhere each row is a round trip, and a thousand of them would outlast the load's
        // store timeout.
        let one_transaction = this.db.loads_in_one_transaction();
        if own.0 != NUMERIC && one_transaction {
            let wide = (0..BUCKETS)
                .map(|b| (own.0, b))
                .filter(|w| *w != own && this.loadable(*w));
            batch.extend(wide);
            batch.sort_unstable();
            batch.dedup();
        }
        batch.sort_unstable();
        batch.truncate(if one_transaction {
            MAX_BATCH - 1
        } else {
            MAX_ROW_BY_ROW - 1
        });
        batch.insert(0, own);
        // The others only as far as they fit now (nothing is evicted for them); this one
        // evicts to make room if it must.
        let free = this.budget.bound().saturating_sub(this.budget.used());
        batch.truncate((free / SECTION_ROOM).max(1));
        this.room_for(SECTION_ROOM * batch.len(), key, deadline)
            .await?;
        let rows: Vec<(i16, i64)> = batch
            .iter()
            .map(|(kind, s)| {
                (
                    *kind,
                    i64::try_from(*s).expect("section numbers fit in i64"),
                )
            })
            .collect();
        // A row created here starts a step up, its keys at 0 under it: nothing was ever handed
        // out from a row that did not exist, and the section's first call needs no raise.
        let step = this.options.step;
        let loaded = tokio::time::timeout_at(deadline, this.db.seq_load_batch(&rows, step as i64))
            .await
            .map_err(|_| unavailable(waited(this.options.store_timeout, "a section load")))?
            .map_err(|e| unavailable(e.to_string()))?;
        // The restore guard: a row below its floor went back; a row created here had none, so
        // a floor there means the table lost it (counted as found at 0). The created rows'
        // maxima are recorded (one sync for all) before any of their numbers goes out.
        let found: Vec<(Row, i64)> = rows
            .iter()
            .zip(&loaded)
            .map(|(row, (max, created))| (*row, if *created { 0 } else { *max }))
            .collect();
        let verdicts = this
            .floors
            .check_many(&found, key)
            .await
            .map_err(|e| this.unguarded(key, e))?;
        let mut accepted = Vec::with_capacity(rows.len());
        let mut created_rows = Vec::new();
        for (((kind, row), (max, created)), verdict) in rows.into_iter().zip(loaded).zip(verdicts) {
            let is_own = (kind, row as u64) == own;
            if let Err(e) = verdict {
                if is_own {
                    return Err(e);
                }
                continue;
            }
            let Ok(max) = u64::try_from(max) else {
                if is_own {
                    return Err(SeqError::Fenced {
                        key: key.to_string(),
                        why: format!("section {row} of vesta_seq holds max_seq {max}, below 0"),
                    });
                }
                continue;
            };
            if created {
                created_rows.push(((kind, row), max));
            }
            accepted.push((kind, row, if created { 0 } else { max }, max));
        }
        this.floors
            .record_many(&created_rows)
            .await
            .map_err(|e| this.unguarded(key, e))?;
        for (kind, row, base, max) in accepted {
            match kind {
                NUMERIC => this.put(&NUM, row as u64, row, base, max),
                SPREAD => this.put(&WIDE, row as u32, row, base, max),
                _ => this.put(&TEXT, row as u32, row, base, max),
            }
        }
        Ok(())
    }

    /// Puts section `id` (row `row`) of `shape` in memory, as loaded.
    fn put<K, S>(&self, shape: &Shape<K, S>, id: K, row: i64, base: u64, max: u64)
    where
        K: SectionId,
        S: Slots,
    {
        let section = Section::new(
            shape.kind,
            row,
            base,
            max,
            self.options.step,
            (shape.fresh)(self),
        );
        (shape.map)(self)
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert_if_absent(id, || Arc::new(section));
        self.loads.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether section `(kind, id)` is in memory.
    fn in_memory(&self, (kind, id): (i16, u64)) -> bool {
        match kind {
            NUMERIC => read(&self.numeric).contains_key(&id),
            SPREAD => read(&self.spread).contains_key(&(id as u32)),
            _ => read(&self.strings).contains_key(&(id as u32)),
        }
    }

    /// Whether section `w` may join another's load: served here, not in memory, not refused
    /// as went back.
    fn loadable(&self, w: (i16, u64)) -> bool {
        self.serves(set_of(w.1))
            && !self.in_memory(w)
            && i64::try_from(w.1).is_ok_and(|row| !self.floors.went_back((w.0, row)))
    }

    /// Whether `set` is served here.
    fn serves(&self, set: u32) -> bool {
        self.gate.get().is_some_and(|g| g.served(set) != 0)
    }

    /// Raises `section` until its maximum covers `need`, by `deadline`.
    pub(super) async fn raise<S: Slots>(
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
            let row = (section.kind, section.id);
            match cas {
                Ok(Ok(Cas::Done)) => {
                    // Remembered where a restore cannot reach it before a number goes out.
                    if let Err(e) = self.floors.record(row, to).await {
                        self.raise_failures.fetch_add(1, Ordering::Relaxed);
                        return Err(self.unguarded(key, e));
                    }
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
                    if let Err(e) = self.floors.record(row, found as u64).await {
                        self.raise_failures.fetch_add(1, Ordering::Relaxed);
                        return Err(self.unguarded(key, e));
                    }
                    section.raised(found as u64);
                }
                // Below what this process last wrote (or this host remembers): the table went
                // back, it was not raised by another.
                Ok(Ok(Cas::Moved(Some((found, _))))) if found < from as i64 => {
                    let (floor, remembered) = match self.floors.floor(row).await {
                        Ok((f, at)) if f >= from => (f, at),
                        _ => (from, "by this server".into()),
                    };
                    // Fenced for the calls holding it; dropped from memory, so the next call
                    // loads it again, refused while the row stays below (the guard's state,
                    // not a fence: served again once the table is raised back).
                    let why = super::error::went_back(row.0, row.1, found, floor, &remembered);
                    let e = self.floors.note(row, found, floor, remembered, key);
                    if section.fenced().is_none() {
                        section.fence(why);
                    }
                    self.forget(section.kind, section.id);
                    return Err(e);
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
                    if section.fence(why.clone()) {
                        tracing::error!(section = section.id, kind = section.kind, "{why}");
                        self.fenced.fetch_add(1, Ordering::Relaxed);
                    }
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
    #[inline(never)]
    pub(super) fn prefetch<S: Slots>(this: &Arc<Inner>, section: Arc<Section<S>>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            section.prefetched();
            return;
        };
        let ahead = Ahead::start(Arc::clone(this), section);
        runtime.spawn(async move {
            let (inner, section) = (&ahead.inner, ahead.section.as_ref().expect("held"));
            let deadline = Instant::now() + inner.options.store_timeout;
            let need = section.max().saturating_add(1);
            // A failure is counted; the call that needs the raise tries again and reports it.
            let _ = inner.raise(section, need, deadline, &SeqKey::Num(0)).await;
        });
    }
}

/// A raise ahead of need under way, counted in `raising_ahead` from before it holds its
/// section until after it let go (ended, or dropped with its runtime): a call waiting for
/// room at the memory bound counts on it to end within `store_timeout`, and is told when it
/// does (`memory.rs`).
struct Ahead<S: Slots> {
    inner: Arc<Inner>,
    section: Option<Arc<Section<S>>>,
}

impl<S: Slots> Ahead<S> {
    fn start(inner: Arc<Inner>, section: Arc<Section<S>>) -> Self {
        inner.raising_ahead.fetch_add(1, Ordering::AcqRel);
        Ahead {
            inner,
            section: Some(section),
        }
    }
}

impl<S: Slots> Drop for Ahead<S> {
    fn drop(&mut self) {
        if let Some(section) = self.section.take() {
            section.prefetched();
        }
        self.inner.raising_ahead.fetch_sub(1, Ordering::AcqRel);
        self.inner.ahead_ended.notify_waiters();
    }
}

impl Inner {
    /// The refusal of `key` when the restore guard could not be read or written (`e`): a
    /// member whose coordinator keeps its floors and is out of reach is about to lapse (its
    /// renewals go there too), so its clients wait and retry as for a lapsed term; anything
    /// else is the table's trouble. A section that went back stays that.
    fn unguarded(&self, key: &SeqKey, e: SeqError) -> SeqError {
        match (e, self.gate.get().map(|g| g.of)) {
            (e @ SeqError::WentBack { .. }, _) => e,
            (SeqError::Cluster(cause), Some(crate::cluster::GateOf::Member(member))) => {
                tracing::warn!("the cluster's coordinator keeps the floors: {cause}");
                SeqError::Lapsed {
                    key: key.to_string(),
                    member,
                }
            }
            (e, _) => SeqError::Unavailable {
                key: key.to_string(),
                cause: e.to_string(),
            },
        }
    }
}

/// Room a load makes before it loads, per section: its own bytes and a first table, with
/// margin.
const SECTION_ROOM: usize = 1024;
/// Most sections one load reads (one transaction of twice as many statements).
const MAX_BATCH: usize = 128;
/// Most sections one load reads where each is a round trip of its own (PostgreSQL, MySQL).
const MAX_ROW_BY_ROW: usize = 32;
/// Buckets of a kind (spread, string): 4,096 each.
const BUCKETS: u64 = 4096;

/// Locks `m`, through a poisoned lock (a set of ids is never left half-changed).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn waited(limit: Duration, what: &str) -> String {
    format!(
        "no answer within {} ms ({TIMEOUT_KEY}) for {what}",
        limit.as_millis()
    )
}
