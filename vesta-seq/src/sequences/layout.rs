//! The layout of keys over rows, pinned in the table's meta rows (kind 2): keys per numeric
//! section (0), string buckets (1), the first spread key (2) and the spread buckets (3). A
//! table whose rows say otherwise is refused at open, naming both values: its keys would
//! fall in rows with other maxima.
//!
//! A table from before the spread buckets has no rows 2 and 3, and may hold numeric sections
//! from 5,000,000,000 on (one row per key, the old way) whose keys now live in spread
//! buckets. Before it pins rows 2 and 3, the open raises each such key's bucket to at least
//! its old section's maximum, so no key goes back; an open cut short pins nothing and the
//! next one does it again (raising is idempotent).

use std::collections::BTreeMap;

use super::SeqError;
use super::shape::SPREAD;
use crate::db::Database;
use crate::db::seq::{Cas, META};
use crate::key::{SECTION_KEYS, SPREAD_BUCKETS, SPREAD_FROM, STRING_BUCKETS, spread_bucket};

/// Checks (and on a new table pins) the layout; carries an old table's numeric sections from
/// [`SPREAD_FROM`] on over into their spread buckets first. `token` marks the rows it raises.
pub(super) async fn pin(db: &Database, token: i64) -> Result<(), SeqError> {
    if db
        .seq_read(META, 2, || "reading the layout of vesta_seq".into())
        .await?
        .is_none()
    {
        carry_over(db, token).await?;
    }
    for (section, what, expected) in [
        (0, "keys per numeric section", SECTION_KEYS),
        (1, "string-key buckets", STRING_BUCKETS),
        (2, "as its first spread numeric key", SPREAD_FROM),
        (3, "spread numeric buckets", SPREAD_BUCKETS),
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
    Ok(())
}

/// Raises each spread bucket to at least the maximum of every old numeric section whose keys
/// it now holds.
async fn carry_over(db: &Database, token: i64) -> Result<(), SeqError> {
    let first = (SPREAD_FROM / SECTION_KEYS) as i64;
    let mut need: BTreeMap<u32, i64> = BTreeMap::new();
    for (section, max) in db.seq_rows_from(super::shape::NUMERIC, first).await? {
        let bucket = spread_bucket(section as u64 * SECTION_KEYS);
        let at_least = need.entry(bucket).or_insert(0);
        *at_least = (*at_least).max(max);
    }
    if !need.is_empty() {
        tracing::warn!(
            buckets = need.len(),
            "vesta_seq: carrying numeric sections from 5,000,000,000 on over into spread buckets"
        );
    }
    for (bucket, max) in need {
        let bucket = i64::from(bucket);
        let mut found = db.seq_load(SPREAD, bucket, max).await?;
        while found < max {
            match db.seq_raise(SPREAD, bucket, found, max, token).await? {
                Cas::Done => break,
                Cas::Moved(Some((now, _))) => found = now,
                Cas::Moved(None) => found = db.seq_load(SPREAD, bucket, max).await?,
            }
        }
    }
    Ok(())
}
