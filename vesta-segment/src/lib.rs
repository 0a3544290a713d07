#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - [`Store`]: numbers per tag ([`Store::next`], [`Store::next_n`], [`Tag`] handles), opened on
//!   a URL ([`Store::open`]) or on the application's pool ([`Store::from_pool`], [`AnyPool`]).
//! - [`Database`]: the admin operations on `leaf_alloc` (init, create, list, raise).
//! - [`SegmentSection`]: the `[segment]` config section, checked with named errors.
//! - [`Sequences`]: per-key sequences (WeChat seqsvr's model) on the same databases, table
//!   `vesta_seq`: a number per [`SeqKey`] that only goes up.
//! - Errors: [`SegmentError`] (with [`ConfigError`], [`UrlError`]).

#[cfg(not(any(feature = "sqlite", feature = "postgres", feature = "mysql")))]
compile_error!("vesta-segment needs at least one of its features `sqlite`, `postgres`, `mysql`");

mod buffer;
pub mod clock;
pub mod config;
pub mod db;
pub mod error;
mod fetcher;
mod floors;
pub mod pool;
mod segment;
pub mod seq;
pub mod status;
pub mod step;
mod store;
pub mod tag;
pub mod url;

pub use config::{DEFAULT_CLI_DB, SegmentSection};
pub use db::{Database, Raise, Raised, TagRow};
pub use error::{ConfigError, SegmentError, UrlError};
pub use pool::AnyPool;
pub use seq::{
    Coordination, DEFAULT_SEQ_DB, PendingNext, SeqError, SeqKey, SeqNext, SeqOptions, SeqPeek,
    SeqSection, SeqStatus, Sequences,
};
pub use status::{Health, SegmentStatus, StoreStatus, TagState, TagStatus};
pub use store::{GiveBack, GiveBackOutcome, MAX_BATCH, Store, Tag};
pub use url::{DbKind, DbUrl, TlsMode};
