#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - [`Issuer`]: the blocking issuer — `next_id`, `next_ids`, the non-blocking `try_` forms,
//!   `explain`, `make`, `trans_time`, `status`, `shutdown`.
//! - [`AsyncIssuer`] and its per-connection [`Flow`]: the same for async code, never blocking a
//!   runtime worker; [`Issue`] is a call's answer, [`WaitStats`] the waiting list's counters.
//! - [`IssuerConfig`] with its TOML sections in [`config`], built with
//!   [`IssuerConfig::builder`] or loaded with [`IssuerConfig::from_toml_file`].
//! - [`Status`], [`LeaseState`], [`LeaseInfo`]: what health checks and metrics read.
//! - Errors: [`StartError`] (why it did not start), [`IssueError`] (why a call got no ID),
//!   [`ShutdownError`], [`ConfigError`], [`LeaseError`] (feature `zookeeper`). Every public
//!   error and status enum is `#[non_exhaustive]`: new variants are not breaking changes.
//! - [`SystemClock`] (the clock issuers read) and [`ShiftedClock`] (a steppable one for
//!   fault-injection tests); in [`lease`], what `vesta zk ls` reads.
//!
//! Everything else (the lease rules, the lease thread, the state file) is internal. The
//! feature `test-util` adds `Issuer::fence_for_test`/`resume_for_test` for other crates' tests.

mod clock;
pub mod config;
mod error;
mod issuer;
pub mod lease;
mod status;
#[cfg(feature = "tokio")]
mod waiting;

pub use clock::{ShiftedClock, SystemClock, kernel_sync};
pub use config::{ConfigError, IssuerConfig, MachineSource, RequireSync};
pub use error::{IssueError, ShutdownError, StartError};
pub use issuer::Issuer;
#[cfg(feature = "zookeeper")]
pub use lease::LeaseError;
pub use status::{LeaseInfo, LeaseState, MachineStatus, Status};
pub use vesta_core;
// The core types in the issuer's own signatures, so one dependency is enough to use it.
pub use vesta_core::{
    Epoch, Explanation, FieldValues, GenMethod, IdBatch, IdFields, IdType, Layout, Preset,
};
#[cfg(feature = "tokio")]
pub use waiting::{AsyncIssuer, DEFAULT_MAX_WAIT, Flow, Issue, WaitStats};
