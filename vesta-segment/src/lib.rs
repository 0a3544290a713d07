//! Leaf's segment mode for vesta-rs: dense, increasing numbers per business tag, reserved in
//! ranges ("segments") from Leaf's own `leaf_alloc` table on SQLite, PostgreSQL or
//! MySQL/MariaDB — so a Leaf server and vesta-rs can share one table and never issue the same
//! number.
//!
//! - A segment is taken only by Leaf's `UPDATE leaf_alloc SET max_id = max_id + step WHERE
//!   biz_tag = ?` and the read-back of the row, in one transaction ([`db`]); it is
//!   `[max_id - step, max_id)`.
//! - Each tag has a double buffer: callers take from the current segment with one atomic add
//!   (lock-free, no syscall); a background fetcher fills the next one once the current is
//!   `prefetch_percent` used. Callers wait only when both are empty, at most `wait_ms`.
//! - The step adapts as Leaf's does ([`step`]), read through a clock seam ([`clock`]).
//! - [`Store::shutdown`] gives the unused tail of the last segment back when nobody took a
//!   segment after it.
//! - The restore guard: a segment starting below where this process's numbers end (kept across
//!   restarts in `[segment] state_file`) is refused, so a `leaf_alloc` restored from a backup
//!   or failed over to a lagging replica cannot issue a number twice ([`Database::raise`]
//!   moves a tag past it).
//!
//! ```no_run
//! # async fn demo() -> Result<(), vesta_segment::SegmentError> {
//! use vesta_segment::{SegmentSection, Store};
//! let section = SegmentSection {
//!     db: Some("sqlite://vesta-segments.db".into()),
//!     ..SegmentSection::default()
//! };
//! let store = Store::open(&section).await?;
//! let order_no = store.next("orders").await?;
//! let batch = store.next_n("orders", 100).await?; // increasing ranges
//! store.shutdown().await; // gives the unused tail back
//! # let _ = (order_no, batch); Ok(()) }
//! ```

mod buffer;
pub mod clock;
pub mod config;
pub mod db;
pub mod error;
mod fetcher;
mod floors;
pub mod pool;
mod segment;
pub mod status;
pub mod step;
mod store;
pub mod tag;
pub mod url;

pub use config::{DEFAULT_CLI_DB, SegmentSection};
pub use db::{Database, Raise, Raised, TagRow};
pub use error::{ConfigError, SegmentError, UrlError};
pub use status::{Health, SegmentStatus, StoreStatus, TagState, TagStatus};
pub use store::{GiveBack, GiveBackOutcome, MAX_BATCH, Store, Tag};
pub use url::{DbKind, DbUrl};
