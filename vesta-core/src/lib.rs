//! The vesta-rs ID contract: the two bit layouts, the codec between IDs and their fields, machine-ID
//! pools and the lock-free generator.
//!
//! This crate is pure: it does no I/O and never reads the clock itself. Time reaches the
//! [`Generator`] through the [`Clock`] trait, so production code passes a system clock (see
//! `vesta-embed`) and tests pass a [`ManualClock`].
//!
//! ```
//! use vesta_core::{GenMethod, IdFields, IdType};
//!
//! let fields = IdFields {
//!     version: 0,
//!     id_type: IdType::MaxPeak,
//!     gen_method: GenMethod::Embed,
//!     time: 1_000,
//!     seq: 7,
//!     machine: 42,
//! };
//! let id = fields.encode().unwrap();
//! assert_eq!(IdFields::decode(id), fields);
//! ```

pub mod clock;
pub mod epoch;
pub mod error;
pub mod explain;
pub mod fields;
pub mod generator;
pub mod layout;
pub mod parse;
pub mod pool;

pub use clock::{Clock, ManualClock};
pub use epoch::Epoch;
pub use error::{FieldError, GenError};
pub use explain::Explanation;
pub use fields::{GenMethod, IdFields};
pub use generator::{
    ConfigError, Generator, GeneratorConfig, GeneratorStats, IdBatch, IdRun, SeqStart,
};
pub use layout::{FieldSpan, IdType, Layout, MACHINE_BITS, describe_span, time_left_ms};
pub use parse::{ParseIdError, parse_id};
pub use pool::{MachinePools, PoolError};
