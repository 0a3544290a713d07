#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - Layouts as data: [`Layout`] (fields, time unit, epoch), the peers' and Vesta's presets
//!   ([`Preset`], [`IdType`]), custom layouts ([`LayoutSpec`]).
//! - The ID in any layout: [`Explanation`] (every field by name), [`FieldValues`] with
//!   [`Layout::make`]; Vesta's typed view [`IdFields`] and [`GenMethod`]; the [`Epoch`] and
//!   [`parse_id`].
//! - Machine IDs: [`MachinePools`] (Vesta: embed 0..=923, servers 924..=1023; the same share for
//!   every node width).
//! - Issuing: [`Generator`] with its [`GeneratorConfig`], reading time through a [`Clock`]
//!   ([`ManualClock`] for tests; `vesta_embed::SystemClock` in production); [`IdBatch`] and
//!   [`IdRun`] for batches.
//! - Errors name the field and its allowed range: [`FieldError`], [`GenError`],
//!   [`ConfigError`], [`PoolError`], [`ParseIdError`].
//! - What an operator can do about a refusal, as data: [`Remedy`] (the libraries' errors carry
//!   one; the `vesta` binary spells it as a command line).

mod clock;
mod epoch;
mod error;
mod explain;
mod fields;
pub mod forms;
mod generator;
pub mod id;
mod layout;
mod make;
mod parse;
mod pool;
pub mod remedy;
pub mod seq_place;
pub mod tag;

pub use clock::{Clock, ClockSync, ManualClock};
pub use epoch::Epoch;
pub use error::{FieldError, GenError};
pub use explain::Explanation;
pub use fields::{GenMethod, IdFields};
pub use forms::{Form, FormBuf, UnknownForm};
pub use generator::{
    BatchIds, ConfigError, Generator, GeneratorConfig, GeneratorStats, IdBatch, IdRun,
    MAX_ROLLBACK_TOLERANCE_MS, Position, SeqStart,
};
pub use id::Id;
#[cfg(feature = "serde")]
pub use layout::LAYOUT_JSON_FORMAT;
pub use layout::{
    Field, FieldKind, FieldSpan, FieldSpec, GEN_METHOD_SHIFT, IdType, Layout, LayoutError,
    LayoutSpec, MACHINE_BITS, NODE_BITS, NodePart, PartSpec, Preset, TYPE_SHIFT, VERSION_SHIFT,
    describe_span, time_left_ms,
};
pub use make::FieldValues;
pub use parse::{ParseIdError, parse_id};
pub use pool::{MAX_MACHINE, MachinePools, PoolError};
pub use remedy::{MarkStore, Remedy};
