//! The three kinds of rows a key can live in, each with its map of sections in memory and its
//! shape of slots ([`Shape`]), and [`on_place!`], which runs one piece of code for whichever a
//! key's [`Place`](crate::key::Place) names: the call, the read, the peek and the load are
//! written once for all three.

use std::sync::Arc;

use super::Inner;
use super::map::Map;
use crate::section::Section;
use crate::slots::{Numbers, Strings};

pub(crate) use crate::key::kind::{NUMERIC, SPREAD, STRINGS};

/// One kind of row: its `kind` in the table, its map in memory, its slots when loaded.
pub(crate) struct Shape<K: 'static, S: 'static> {
    pub(crate) kind: i16,
    pub(crate) map: fn(&Inner) -> &Map<K, S>,
    pub(crate) fresh: fn(&Inner) -> S,
}

/// Bytes a section costs besides its slots: itself, its `Arc` and its entry in a map.
fn overhead<S>() -> usize {
    std::mem::size_of::<Section<S>>() + 2 * std::mem::size_of::<usize>() + 24
}

fn numeric_map(i: &Inner) -> &Map<u64, Numbers> {
    &i.numeric
}
fn spread_map(i: &Inner) -> &Map<u32, Numbers> {
    &i.spread
}
fn string_map(i: &Inner) -> &Map<u32, Strings> {
    &i.strings
}

/// Numeric sections: keys below 5,000,000,000, 100,000 consecutive a section.
pub(crate) const NUM: Shape<u64, Numbers> = Shape {
    kind: NUMERIC,
    map: numeric_map,
    fresh: |i| Numbers::new(Arc::clone(&i.budget), true, overhead::<Numbers>()),
};
/// Spread buckets: numeric keys from 5,000,000,000 on.
pub(crate) const WIDE: Shape<u32, Numbers> = Shape {
    kind: SPREAD,
    map: spread_map,
    fresh: |i| Numbers::new(Arc::clone(&i.budget), false, overhead::<Numbers>()),
};
/// String buckets.
pub(crate) const TEXT: Shape<u32, Strings> = Shape {
    kind: STRINGS,
    map: string_map,
    fresh: |i| Strings::new(Arc::clone(&i.budget), overhead::<Strings>()),
};

/// Runs `$body` with `$shape` (the key's [`Shape`]), `$id` (its section or bucket in its map)
/// and `$slot` (how the key is named there) bound for the place `$place`.
macro_rules! on_place {
    ($place:expr, |$shape:ident, $id:ident, $slot:ident| $body:expr) => {
        match $place {
            $crate::key::Place::Num { section, slot } => {
                let ($shape, $id, $slot) =
                    (&$crate::sequences::shape::NUM, section, &u64::from(slot));
                $body
            }
            $crate::key::Place::Spread { bucket, key } => {
                let ($shape, $id, $slot) = (&$crate::sequences::shape::WIDE, bucket, &key);
                $body
            }
            $crate::key::Place::Str { bucket, key } => {
                let ($shape, $id, $slot) = (&$crate::sequences::shape::TEXT, bucket, key);
                $body
            }
        }
    };
}
pub(crate) use on_place;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slots::table_bytes;

    /// docs/seq.md, "Memory": a section costs at most 400 bytes with its first table of keys.
    #[test]
    fn a_section_with_its_first_table_is_within_the_documented_bound() {
        let numbers = overhead::<Numbers>() + table_bytes(3, 16);
        let strings = overhead::<Strings>() + table_bytes(3, 24);
        eprintln!("numbers {numbers}, strings {strings}");
        assert!(numbers <= 400 && strings <= 400, "{numbers}, {strings}");
    }
}
