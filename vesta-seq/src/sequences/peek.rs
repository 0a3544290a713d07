//! A key's number read without changing anything: [`Sequences::peek`], for pages and tools that
//! must not write (the web console). [`Sequences::current`] loads a section that is not in
//! memory, and a load writes (it creates the section's row when missing), takes memory (perhaps
//! evicting another section) and counts a load. A peek reads the section in memory, or else
//! only the section's stored row: no row created, no maximum raised, nothing loaded.

use super::map::SectionId;
use super::shape::{Shape, on_place};
use super::{Inner, Map, SeqError, SeqKey, Sequences, read};
use crate::slots::Slots;

/// Where a key's number stands, as [`Sequences::peek`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeqPeek {
    /// The key's section is in memory.
    InMemory {
        /// The key's current number: what [`Sequences::current`] answers.
        current: u64,
        /// The section's maximum, as the table confirmed it.
        max: u64,
        /// Why the section serves no more, if another process raised it.
        fenced: Option<String>,
    },
    /// The key's section is not in memory; its row in `vesta_seq` was read, not loaded.
    Stored {
        /// The section's stored maximum: the key's next number will be above it. `None`: the
        /// section has no row, so none of its keys was ever handed a number.
        max: Option<u64>,
    },
}

impl Sequences {
    /// The key's number without moving it and without writing: its section's state in memory,
    /// or else its stored row read from the table (bounded by `store_timeout`). Unlike
    /// [`Sequences::current`], it never loads a section, so it creates no row and raises no
    /// maximum. The answer is as of the read.
    pub async fn peek(&self, key: &SeqKey) -> Result<SeqPeek, SeqError> {
        let i = &*self.inner;
        let (kind, row) = on_place!(key.place(), |shape, id, slot| {
            if let Some(p) = in_memory((shape.map)(i), id, slot) {
                return Ok(p);
            }
            (kind_of(shape), row_of(id))
        });
        stored(i, kind, row, key).await
    }
}

/// The row of section or bucket `id`.
fn row_of(id: impl Into<u64>) -> u64 {
    id.into()
}

/// The row kind of `shape`.
fn kind_of<K, S>(shape: &Shape<K, S>) -> i16 {
    shape.kind
}

/// The key's state if its section is in memory.
fn in_memory<K, S>(map: &Map<K, S>, id: K, slot: &S::Key) -> Option<SeqPeek>
where
    K: SectionId,
    S: Slots,
{
    let map = read(map);
    let s = map.get(&id)?;
    Some(SeqPeek::InMemory {
        current: s.current(slot),
        max: s.max(),
        fenced: s.fenced().map(str::to_owned),
    })
}

/// The section's stored maximum, read (never written).
async fn stored(i: &Inner, kind: i16, row: u64, key: &SeqKey) -> Result<SeqPeek, SeqError> {
    let row = i64::try_from(row).expect("section numbers fit in i64");
    let found =
        i.db.seq_read(kind, row, || {
            format!("reading section {row} (kind {kind}) of vesta_seq")
        })
        .await?;
    let max = match found {
        None => None,
        Some((max, _owner)) => Some(u64::try_from(max).map_err(|_| SeqError::Fenced {
            key: key.to_string(),
            why: format!("section {row} of vesta_seq holds max_seq {max}, below 0"),
        })?),
    };
    Ok(SeqPeek::Stored { max })
}
