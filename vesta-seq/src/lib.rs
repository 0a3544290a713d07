#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - [`Sequences`]: [`Sequences::open`] on a URL or [`Sequences::from_pool`] on the
//!   application's pool, then [`Sequences::next`], [`Sequences::next_n`],
//!   [`Sequences::try_next_n`] (never waits), [`Sequences::current`], [`Sequences::peek`].
//! - [`SeqSection`]: the `[seq]` config section, checked with named errors; [`SeqOptions`].
//! - [`cluster`]: servers on one table as a cluster ([`cluster::Cluster`]), each set of keys
//!   served by one member at a time; [`coordination`]: where its leases live (the table's own
//!   database, etcd with the feature `etcd`, ZooKeeper with `zookeeper`).
//! - Errors: [`SeqError`] (the table's are vesta-segment's [`SegmentError`]).

#[cfg(not(any(feature = "sqlite", feature = "postgres", feature = "mysql")))]
compile_error!("vesta-seq needs at least one of its features `sqlite`, `postgres`, `mysql`");

pub mod cluster;
mod config;
pub mod coordination;
mod db;
mod floors;
mod key;
pub mod owner;
mod section;
mod sequences;
pub mod sets;
mod slots;

pub use config::{Coordination, DEFAULT_SEQ_DB, SeqSection};
pub use floors::{FloorsAt, GuardStatus};
pub use key::{
    KeyError, MAX_KEY_BYTES, SECTION_KEYS, SPREAD_BUCKETS, SPREAD_FROM, STRING_BUCKETS, SeqKey,
};
pub use owner::mode::Mode;
pub use owner::{Owner, OwnerStatus, RaiseTo, RaisedRow, Role, Served};
pub use sequences::{PendingNext, SeqError, SeqNext, SeqOptions, SeqPeek, SeqStatus, Sequences};
pub use vesta_segment::{AnyPool, ConfigError, DbUrl, SegmentError, UrlError};
