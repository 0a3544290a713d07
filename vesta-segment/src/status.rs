//! What health checks and metrics read: each tag's buffers, step, fetch latency and errors,
//! and the store's overall health. Serializable, so `/healthz` can answer with it as is.

use serde::Serialize;

use crate::url::DbKind;

/// The state of one tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TagState {
    /// In use, first segment not fetched yet.
    Starting,
    /// The last fetch succeeded.
    Ok,
    /// The last fetch failed; numbers are still buffered and issued.
    Degraded,
    /// The last fetch failed and nothing is buffered: calls fail fast until a fetch succeeds
    /// (the fetcher keeps retrying by itself).
    Down,
    /// The store was shut down.
    Closed,
}

/// One segment in a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SegmentStatus {
    /// First number of the segment.
    pub start: u64,
    /// One past its last number (the `max_id` its fetch left in the table).
    pub end: u64,
    /// Numbers not yet handed out.
    pub remaining: u64,
}

/// One tag's buffers and fetch history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TagStatus {
    /// The tag.
    pub tag: String,
    /// Overall state.
    pub state: TagState,
    /// The segment numbers are taken from.
    pub current: Option<SegmentStatus>,
    /// The prefetched segment, if any.
    pub next: Option<SegmentStatus>,
    /// Numbers left in both segments.
    pub buffered: u64,
    /// Step of the newest segment.
    pub step: u32,
    /// Numbers left when the next segment is fetched: `step × (100 − prefetch_percent) / 100`.
    /// Healthy tags stay at or above it (the next segment arrives soon after the crossing);
    /// staying below means the prefetch does not arrive (`VestaSegmentBufferLow`).
    pub prefetch_at: u64,
    /// The table's `step` as last read (the adaptive step's floor).
    pub table_step: u32,
    /// A fetch is under way.
    pub fetching: bool,
    /// Successful fetches.
    pub fetches: u64,
    /// Failed fetches.
    pub fetch_errors: u64,
    /// The lowest number the next segment may start at: the end of the last segment taken,
    /// or the restore guard's floor from `segment.state_file`.
    pub floor: u64,
    /// Fetches refused because `leaf_alloc` went back below the floor (a restore, a lagging
    /// replica, a hand edit): `VestaSegmentMovedBack`.
    pub moved_back: u64,
    /// Duration of the last fetch attempt, in microseconds.
    pub last_fetch_latency_us: Option<u64>,
    /// The last fetch error, if any (kept after recovery, for diagnosis).
    pub last_error: Option<String>,
}

/// The store's overall health.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Every tag in use fetched fine last time.
    Ok,
    /// At least one tag's last fetch failed, or the state file could not be written.
    Degraded,
    /// Shut down.
    Closed,
}

/// A snapshot of the whole store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreStatus {
    /// The database (password hidden).
    pub db: String,
    /// Which kind of database.
    pub kind: DbKind,
    /// Overall health.
    pub health: Health,
    /// The restore guard's state file, when one is configured.
    pub state_file: Option<String>,
    /// Why the last write of the state file failed (cleared by the next good write). The
    /// floors are still kept in memory; health is degraded until the file is written again.
    pub state_file_error: Option<String>,
    /// The tags in use, by name.
    pub tags: Vec<TagStatus>,
}
