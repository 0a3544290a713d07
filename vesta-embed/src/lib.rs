//! The in-process issuer of vesta-rs (Vesta's embedded jar): a lock-free generator with its
//! machine ID from config or leased from ZooKeeper, and the system clock it reads.
//!
//! The TCP and REST servers wrap the same [`Issuer`] with genMethod server or rest, so the
//! genMethod and the machine pool are parameters of [`IssuerConfig`], not constants.
//!
//! The public API: [`Issuer`], its [`config`] sections, [`Status`] and the errors, the
//! [`SystemClock`], and in [`lease`] what `vesta zk ls` reads. Everything else (the lease
//! rules, the lease thread, the state file) is internal.

mod clock;
pub mod config;
mod error;
mod issuer;
pub mod lease;
mod status;
mod waiting;

pub use clock::{ShiftedClock, SystemClock};
pub use config::{IssuerConfig, MachineSource};
pub use error::{IssueError, ShutdownError, StartError};
pub use issuer::Issuer;
pub use lease::LeaseError;
pub use status::{LeaseInfo, LeaseState, Status};
pub use vesta_core;
pub use waiting::{AsyncIssuer, DEFAULT_MAX_WAIT, Flow, Issue, WaitStats};
