//! The section maps: numeric sections and string and spread buckets by number, each behind a
//! read-write lock that a call holds only for its lookup.
//!
//! Section numbers are small and bounded (below 50,000 numeric sections, 4,096 buckets of
//! each kind), so a map is a flat array indexed by the number: a call's lookup is one bounds
//! check and one load, no hash and no probe (the lookup runs on every call, where a hashed
//! probe cost a sixth of it). The arrays cost 8 bytes a possible section, allocated once
//! (436 KB for the three), against 40 bytes a section in memory that a hash map's entry cost.

use std::sync::{Arc, RwLock, RwLockReadGuard};

use crate::key::{SECTION_KEYS, SPREAD_BUCKETS, SPREAD_FROM, STRING_BUCKETS};
use crate::section::Section;

pub(crate) type Map<K, S> = RwLock<SectionMap<K, S>>;

/// A section's or a bucket's number: its index in its map.
pub(crate) trait SectionId: Copy + Eq + Send + Sync + Into<u64> + 'static {
    /// How many of them there are: the map's length.
    const COUNT: usize;
    /// The number at `index` (below [`SectionId::COUNT`]).
    fn at(index: usize) -> Self;
}

impl SectionId for u64 {
    /// Numeric sections: keys below [`SPREAD_FROM`], [`SECTION_KEYS`] a section.
    const COUNT: usize = (SPREAD_FROM / SECTION_KEYS) as usize;
    fn at(index: usize) -> Self {
        index as u64
    }
}

impl SectionId for u32 {
    /// Buckets: as many spread as string buckets.
    const COUNT: usize = {
        assert!(SPREAD_BUCKETS == STRING_BUCKETS);
        SPREAD_BUCKETS as usize
    };
    fn at(index: usize) -> Self {
        index as u32
    }
}

/// The sections of one kind in memory, by number.
pub(crate) struct SectionMap<K, S> {
    slots: Box<[Option<Arc<Section<S>>>]>,
    len: usize,
    _id: std::marker::PhantomData<K>,
}

impl<K: SectionId, S> Default for SectionMap<K, S> {
    fn default() -> Self {
        SectionMap {
            slots: std::iter::repeat_with(|| None).take(K::COUNT).collect(),
            len: 0,
            _id: std::marker::PhantomData,
        }
    }
}

/// The index of `id` (every number a key maps to is below its kind's count).
#[inline]
fn index<K: SectionId>(id: K) -> usize {
    let i: u64 = id.into();
    i as usize
}

impl<K: SectionId, S> SectionMap<K, S> {
    #[inline]
    pub(crate) fn get(&self, id: &K) -> Option<&Arc<Section<S>>> {
        self.slots.get(index(*id)).and_then(Option::as_ref)
    }

    pub(crate) fn contains_key(&self, id: &K) -> bool {
        self.get(id).is_some()
    }

    /// Puts the section `make` gives at `id` unless one is there already.
    pub(crate) fn insert_if_absent(&mut self, id: K, make: impl FnOnce() -> Arc<Section<S>>) {
        let slot = &mut self.slots[index(id)];
        if slot.is_none() {
            *slot = Some(make());
            self.len += 1;
        }
    }

    pub(crate) fn remove(&mut self, id: &K) -> Option<Arc<Section<S>>> {
        let taken = self.slots.get_mut(index(*id))?.take();
        self.len -= usize::from(taken.is_some());
        taken
    }

    /// Keeps the sections `keep` says yes to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Arc<Section<S>>) -> bool) {
        for slot in self.slots.iter_mut() {
            if slot.as_ref().is_some_and(|s| !keep(s)) {
                *slot = None;
                self.len -= 1;
            }
        }
    }

    /// The sections and their numbers.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, &Arc<Section<S>>)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (K::at(i), s)))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<Section<S>>> {
        self.slots.iter().flatten()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Reads `map`, through a poisoned lock (a section map is never left half-changed).
#[inline]
pub(super) fn read<K, S>(map: &Map<K, S>) -> RwLockReadGuard<'_, SectionMap<K, S>> {
    map.read().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_a_key_maps_to_has_its_place() {
        use crate::key::{Place, SeqKey};
        let last_numeric = SeqKey::Num(SPREAD_FROM - 1);
        assert!(
            matches!(last_numeric.place(), Place::Num { section, .. } if (section as usize) < <u64 as SectionId>::COUNT)
        );
        for k in [SPREAD_FROM, u64::MAX, 412_345_678_901_234_567] {
            assert!(
                matches!(SeqKey::Num(k).place(), Place::Spread { bucket, .. } if (bucket as usize) < <u32 as SectionId>::COUNT)
            );
        }
    }
}
