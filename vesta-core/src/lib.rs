#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - The ID: [`IdFields`] (decode any `u64`, encode with range checks), [`IdType`] and its
//!   [`Layout`], [`GenMethod`], the [`Epoch`], [`Explanation`] and [`parse_id`].
//! - Machine IDs: [`MachinePools`] (embed 0..=923, servers 924..=1023 by default).
//! - Issuing: [`Generator`] with its [`GeneratorConfig`], reading time through a [`Clock`]
//!   ([`ManualClock`] for tests; `vesta_embed::SystemClock` in production); [`IdBatch`] and
//!   [`IdRun`] for batches.
//! - Errors name the field and its allowed range: [`FieldError`], [`GenError`],
//!   [`ConfigError`], [`PoolError`], [`ParseIdError`].

mod clock;
mod epoch;
mod error;
mod explain;
mod fields;
mod generator;
mod layout;
mod parse;
mod pool;

pub use clock::{Clock, ManualClock};
pub use epoch::Epoch;
pub use error::{FieldError, GenError};
pub use explain::Explanation;
pub use fields::{GenMethod, IdFields};
pub use generator::{
    ConfigError, Generator, GeneratorConfig, GeneratorStats, IdBatch, IdRun,
    MAX_ROLLBACK_TOLERANCE_MS, SeqStart,
};
pub use layout::{
    FieldSpan, GEN_METHOD_SHIFT, IdType, Layout, MACHINE_BITS, TYPE_SHIFT, VERSION_SHIFT,
    describe_span, time_left_ms,
};
pub use parse::{ParseIdError, parse_id};
pub use pool::{MAX_MACHINE, MachinePools, PoolError};
