//! Sections leaving memory. Three ways:
//!
//! - **Idle**: the sweeper marks the untouched sections every `idle / 4` and evicts those
//!   untouched four sweeps in a row.
//! - **On demand**, at the memory bound (`seq.max_memory_mb`): a load or a new key that does
//!   not fit evicts the least recently used section not in use (most sweeps untouched first,
//!   then one untouched since the last sweep, then any), until it fits. A section is in use
//!   while a call waits on it (a raise) or it is being raised ahead of need, at most
//!   `store_timeout`. A call waits (within its `store_timeout`) for a raise ahead to end
//!   rather than be refused for it, so it is refused only when every section in memory is
//!   held by calls, and room frees within `store_timeout` ([`SeqError::Full`] says so in its
//!   `Retry-After`).
//! - **Drained**: a cluster member that stops serving a set waits out its loads and raises and
//!   drops its sections.
//!
//! Evicting is always safe: a section's maximum is in the table, and a section is taken out
//! of its map only under the map's write lock with no call holding it, so no call is between
//! finding it and taking from it; its next load starts every key above that maximum.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use tokio::time::Instant;

use super::map::{Map, SectionId, read};
use super::{Inner, SeqError};
use crate::key::SeqKey;
use crate::section::Section;
use crate::sets;
use crate::slots::Slots;

impl Inner {
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
        let spread = take_out(&self.spread, |id| which(u64::from(*id)));
        let strings = take_out(&self.strings, |id| which(u64::from(*id)));
        for s in &numeric {
            drop(s.raising.lock().await);
        }
        for s in &spread {
            drop(s.raising.lock().await);
        }
        for s in &strings {
            drop(s.raising.lock().await);
        }
    }

    /// Drops section `(kind, id)` from memory (one that went back): its next call loads it
    /// again. Calls holding it finish on it.
    pub(super) fn forget(&self, kind: i16, id: i64) {
        match kind {
            super::shape::NUMERIC => {
                take_out(&self.numeric, |k| i64::try_from(*k) == Ok(id));
            }
            super::shape::SPREAD => {
                take_out(&self.spread, |k| i64::from(*k) == id);
            }
            _ => {
                take_out(&self.strings, |k| i64::from(*k) == id);
            }
        }
    }

    /// Makes `bytes` of room under the bound by `deadline`, evicting least recently used
    /// sections; refuses naming the setting when every section left is in use.
    pub(super) async fn room_for(
        &self,
        bytes: usize,
        key: &SeqKey,
        deadline: Instant,
    ) -> Result<(), SeqError> {
        while !self.budget.fits(bytes) {
            self.evict_one(key, deadline).await?;
        }
        Ok(())
    }

    /// Room for a new key that did not fit: one least recently used section evicted (perhaps
    /// the key's own, which then loads again empty), or the refusal when none can be.
    pub(super) async fn make_room(&self, key: &SeqKey, deadline: Instant) -> Result<(), SeqError> {
        self.evict_one(key, deadline).await?;
        tokio::task::yield_now().await;
        Ok(())
    }

    /// Evicts one least recently used section not in use. When every one is, but raises
    /// ahead of need are under way (this process's own work, which holds their sections and
    /// ends within `store_timeout`), waits for one to end, by `deadline`: a caller is not
    /// refused for what the sequences do in the background (a lone client at the bound would
    /// otherwise be refused for the raises its own calls started). Sections held by calls are
    /// other clients' demand: refused at once, the refusal saying when room frees.
    async fn evict_one(&self, key: &SeqKey, deadline: Instant) -> Result<(), SeqError> {
        loop {
            // Listening before looking: a raise ahead that ends in between is not missed.
            let ended = self.ahead_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if Instant::now() >= deadline {
                return Err(self.full(key));
            }
            if self.evict_lru() {
                return Ok(());
            }
            if self.raising_ahead.load(Ordering::Acquire) == 0 {
                return Err(self.full(key));
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return Err(self.full(key));
            }
        }
    }

    /// The refusal at the bound: the setting, and when room frees.
    fn full(&self, key: &SeqKey) -> SeqError {
        SeqError::Full {
            key: key.to_string(),
            bound_mb: self.budget.bound() >> 20,
            setting: "seq.max_memory_mb",
            retry_after_s: self.options.store_timeout.as_millis().div_ceil(1000) as u64,
        }
    }

    /// Evicts the least recently used section not in use; false if every one is.
    fn evict_lru(&self) -> bool {
        // A section picked may be taken in use before it is removed: pick again (a few
        // times: each miss is a call that just started on it).
        for _ in 0..4 {
            let best = [
                oldest(&self.numeric).map(|(age, id)| (age, Victim::Num(id))),
                oldest(&self.spread).map(|(age, id)| (age, Victim::Spread(id))),
                oldest(&self.strings).map(|(age, id)| (age, Victim::Str(id))),
            ]
            .into_iter()
            .flatten()
            .max_by_key(|(age, _)| *age);
            let removed = match best {
                None => return false,
                Some((_, Victim::Num(id))) => remove_unused(&self.numeric, id),
                Some((_, Victim::Spread(id))) => remove_unused(&self.spread, id),
                Some((_, Victim::Str(id))) => remove_unused(&self.strings, id),
            };
            if removed {
                self.evictions.fetch_add(1, Ordering::Relaxed);
                return true;
            }
        }
        false
    }
}

/// A section picked for eviction.
enum Victim {
    Num(u64),
    Spread(u32),
    Str(u32),
}

/// How long a section has gone unused, as the sweeps saw it: sweeps untouched, then whether it
/// was untouched since the last one. Larger is older.
fn age<S: Slots>(s: &Section<S>) -> (u32, bool) {
    (s.idle_sweeps.load(Ordering::Relaxed), !s.touched())
}

/// The oldest section of `map` no call holds, and its age.
fn oldest<K: SectionId, S: Slots>(map: &Map<K, S>) -> Option<((u32, bool), K)> {
    read(map)
        .iter()
        .filter(|(_, s)| Arc::strong_count(s) == 1)
        .map(|(k, s)| (age(s), k))
        .max_by_key(|(age, _)| *age)
}

/// Removes section `id` of `map` if no call holds it.
fn remove_unused<K: SectionId, S>(map: &Map<K, S>, id: K) -> bool {
    let mut map = map.write().unwrap_or_else(|e| e.into_inner());
    if map.get(&id).is_some_and(|s| Arc::strong_count(s) == 1) {
        map.remove(&id);
        true
    } else {
        false
    }
}

/// Removes the sections of `map` nobody holds that were idle for [`IDLE_SWEEPS`] sweeps.
fn evict_idle<K: SectionId, S: Slots>(map: &Map<K, S>, evictions: &AtomicU64) {
    let mut map = map.write().unwrap_or_else(|e| e.into_inner());
    let before = map.len();
    map.retain(|s| Arc::strong_count(s) > 1 || s.idle_sweeps.load(Ordering::Relaxed) < IDLE_SWEEPS);
    evictions.fetch_add((before - map.len()) as u64, Ordering::Relaxed);
}

/// The set of numeric section or bucket `id` (a spread or string bucket's number modulo 256 is
/// its set, as a section's is).
pub(super) fn set_of(id: u64) -> u32 {
    (id % u64::from(sets::SETS)) as u32
}

/// Removes the sections whose id `which` picks from `map`, returning them.
fn take_out<K: SectionId, S>(map: &Map<K, S>, which: impl Fn(&K) -> bool) -> Vec<Arc<Section<S>>> {
    let mut map = map.write().unwrap_or_else(|e| e.into_inner());
    let ids: Vec<K> = map.iter().map(|(k, _)| k).filter(|k| which(k)).collect();
    ids.iter().filter_map(|k| map.remove(k)).collect()
}

/// Sweeps in a row a section must be untouched to be evicted; a sweep runs every
/// `idle / IDLE_SWEEPS`.
const IDLE_SWEEPS: u32 = 4;

/// Marks untouched sections idle and evicts those idle long enough, until the sequences are
/// dropped.
pub(super) async fn sweeper(inner: Weak<Inner>) {
    let every = match inner.upgrade() {
        Some(i) => i.options.idle / IDLE_SWEEPS,
        None => return,
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(i) = inner.upgrade() else { return };
        mark(&i.numeric);
        mark(&i.spread);
        mark(&i.strings);
        evict_idle(&i.numeric, &i.evictions);
        evict_idle(&i.spread, &i.evictions);
        evict_idle(&i.strings, &i.evictions);
    }
}

/// One sweep's marks on every section of `map`.
fn mark<K: SectionId, S: Slots>(map: &Map<K, S>) {
    for s in read(map).values() {
        if s.sweep() {
            s.idle_sweeps.store(0, Ordering::Relaxed);
        } else {
            s.idle_sweeps.fetch_add(1, Ordering::Relaxed);
        }
    }
}
