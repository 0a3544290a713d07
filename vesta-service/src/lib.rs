//! The scaffolding the two vesta-rs servers share, so they behave alike and a change to how a
//! server starts, waits or stops is made once:
//!
//! - [`config`]: one config shape, `[id]`, `[machine]`, `[clock]`, `[zookeeper]` plus the
//!   server's own `[server]` section, with the same key names and units in both servers, the
//!   server-pool check at load time and renamed keys reported as warnings;
//! - [`lifecycle`]: the start order (bind, start the issuer, then listen), the async issuer the
//!   servers issue through, and the release of the machine ID after the drain;
//! - [`shutdown`]: the SIGINT/SIGTERM future and the trigger that tells connections to drain.
//!
//! The wire protocols stay in `vesta-server` (TCP) and `vesta-rest` (HTTP).

pub mod config;
pub mod error;
pub mod health;
pub mod lifecycle;
pub mod metrics;
pub mod metrics_http;
pub mod shutdown;

pub use config::{CommonLimits, ServerSection, ServiceConfig};
pub use error::{ConfigError, ServeError};
pub use lifecycle::{Prepared, ServeReport};
