//! The section maps: numeric sections and string buckets by number, each behind a read-write
//! lock that a call holds only for its lookup, hashed with one multiplication.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, RwLock};

use crate::section::Section;

pub(crate) type Map<K, S> = RwLock<HashMap<K, Arc<Section<S>>, BuildHasherDefault<SectionHasher>>>;

/// Hashes a section number with one multiplication (FxHash's): section maps are looked up on
/// every call, and FNV's byte-at-a-time loop cost a third of a call. The keys are small
/// integers (below 50,000, or 4,096), so a collision costs a probe, never unbounded work.
#[derive(Default)]
pub(crate) struct SectionHasher(u64);

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

/// Reads `map`, through a poisoned lock (a section map is never left half-changed).
pub(super) fn read<K, S>(
    map: &Map<K, S>,
) -> std::sync::RwLockReadGuard<'_, HashMap<K, Arc<Section<S>>, BuildHasherDefault<SectionHasher>>>
{
    map.read().unwrap_or_else(|e| e.into_inner())
}
