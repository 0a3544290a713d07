#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - [`Store`]: numbers per tag ([`Store::next`], [`Store::next_n`], [`Tag`] handles), opened on
//!   a URL ([`Store::open`]) or on the application's pool ([`Store::from_pool`], [`AnyPool`]).
//! - [`Database`]: the admin operations on `leaf_alloc` (init, create, list, raise).
//! - [`SegmentSection`]: the `[segment]` config section, checked with named errors.
//! - The database plumbing other modes share (the SQL machine-ID lease in vesta-embed, the
//!   per-key sequences in vesta-seq): [`DbUrl`] (the URL rules), [`pool`] ([`AnyPool`]) and
//!   [`Database::bounded`] (a round trip within its timeout, its errors named).
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
pub mod status;
pub mod step;
mod store;
pub mod tag;
pub mod url;

pub use config::{DEFAULT_CLI_DB, SegmentSection};
pub use db::{Database, Raise, Raised, TagRow};
pub use error::{ConfigError, SegmentError, UrlError};
pub use pool::AnyPool;
pub use status::{Health, SegmentStatus, StoreStatus, TagState, TagStatus};
pub use store::{GiveBack, GiveBackOutcome, MAX_BATCH, Store, Tag};
pub use url::{DbKind, DbUrl, TlsMode};
