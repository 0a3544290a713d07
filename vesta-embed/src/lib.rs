//! The in-process issuer of vesta-rs (Vesta's embedded jar): a lock-free generator with its
//! machine ID from config or leased from ZooKeeper, and the system clock it reads.
//!
//! The TCP and REST servers wrap the same [`Issuer`] with genMethod server or rest, so the
//! genMethod and the machine pool are parameters of [`IssuerConfig`], not constants.

pub mod clock;
pub mod config;
pub mod error;
pub mod issuer;
pub mod lease;
pub mod state_file;
mod static_state;
pub mod status;
mod waiting;

pub use clock::{ShiftedClock, SystemClock};
pub use config::{IssuerConfig, MachineSource};
pub use error::{IssueError, ShutdownError, StartError};
pub use issuer::{Issuer, Shared};
pub use lease::zk::LeaseError;
pub use status::{LeaseInfo, LeaseState, Status};
pub use vesta_core;
pub use waiting::{AsyncIssuer, DEFAULT_MAX_WAIT, Flow, Issue, WaitStats};
