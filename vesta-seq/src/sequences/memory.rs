//! Sections leaving memory: the sweeper marks the untouched ones every `idle / 4` and evicts
//! those untouched four sweeps in a row; a load at `max_sections` evicts one untouched since
//! the last sweep; a cluster member that stops serving a set drains it (its loads and raises
//! waited out) and drops its sections.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use super::Inner;
use super::map::{Map, read};
use crate::section::{Section, Slots};
use crate::sets;

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
        let strings = take_out(&self.strings, |id| which(u64::from(*id)));
        for s in &numeric {
            drop(s.raising.lock().await);
        }
        for s in &strings {
            drop(s.raising.lock().await);
        }
    }

    /// Drops section `(kind, id)` from memory (one that went back): its next call loads it
    /// again. Calls holding it finish on it.
    pub(super) fn forget(&self, kind: i16, id: i64) {
        if kind == super::NUMERIC {
            take_out(&self.numeric, |k| i64::try_from(*k) == Ok(id));
        } else {
            take_out(&self.strings, |k| i64::from(*k) == id);
        }
    }

    pub(super) fn sections(&self) -> usize {
        read(&self.numeric).len() + read(&self.strings).len()
    }

    /// Evicts one section untouched since the last sweep and not in use; false if none is.
    pub(super) fn evict_one(&self) -> bool {
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
pub(super) fn set_of(id: u64) -> u32 {
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
pub(super) async fn sweeper(inner: Weak<Inner>) {
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
