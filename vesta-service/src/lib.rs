#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - [`config`]: one config shape, `[id]`, `[machine]`, `[clock]`, `[zookeeper]` plus the
//!   server's own `[server]` section ([`ServerSection`], [`ServiceConfig`], [`CommonLimits`]),
//!   with the same key names and units in both servers, every value checked at load time and
//!   renamed keys reported as warnings;
//! - [`ops`]: the one state every transport serves from ([`Service`]: issuer, segments,
//!   limits, counters) and its operations, each written once: IDs, batches, explain, make,
//!   trans-time, segment numbers, health, status; answered now or later ([`Answer`]), refused
//!   with one error type of kinds ([`OpError`], [`ErrorKind`]) that each transport maps in
//!   one place;
//! - [`lifecycle`]: the start order (bind, start the issuer, then listen: [`Prepared`]; with
//!   TLS and the service: [`Started`]), the async issuer the servers issue through, the drain
//!   and the release of the machine ID ([`ServeReport`]);
//! - [`shutdown`]: the SIGINT/SIGTERM future and the trigger that tells connections to drain;
//! - [`segments`]: segment mode (`[segment] db`): the Leaf-compatible number store both
//!   servers serve, its start policy and the give-back at shutdown ([`Segments`]);
//! - [`gate`]: the checks every HTTP request meets on every listener (target length, route,
//!   console, method, token, make), declared as route rows once and refused as data;
//! - [`auth`]: the bearer token of `[server] auth_token_file`, matched alike by both servers
//!   ([`auth::BearerToken`]);
//! - [`metrics`]: the issuer's and the segments' Prometheus metrics and the open-connections
//!   gauge, the same on both servers;
//! - errors: [`ConfigError`] (a refused config), [`ServeError`] (why a server did not start).
//!
//! The wire protocols stay in `vesta-server` (TCP) and `vesta-rest` (HTTP).

#[cfg(feature = "server")]
pub mod auth;
#[cfg(feature = "server")]
pub mod config;
#[cfg(feature = "server")]
pub mod console;
#[cfg(feature = "server")]
mod error;
#[cfg(feature = "server")]
pub mod gate;
#[cfg(feature = "server")]
pub mod health;
#[cfg(feature = "server")]
pub mod lifecycle;
#[cfg(feature = "server")]
pub mod make;
#[cfg(feature = "server")]
pub mod metrics;
#[cfg(feature = "server")]
pub mod metrics_http;
#[cfg(feature = "server")]
pub mod ops;
#[cfg(feature = "server")]
pub mod query;
#[cfg(feature = "server")]
pub mod segments;
#[cfg(feature = "server")]
pub mod server_section;
#[cfg(feature = "server")]
pub mod shutdown;
pub mod tls;

#[cfg(feature = "server")]
pub use config::{CommonLimits, ServerSection, ServiceConfig};
#[cfg(feature = "server")]
pub use error::{ConfigError, ServeError};
#[cfg(feature = "server")]
pub use lifecycle::{Prepared, ServeReport, Started};
#[cfg(feature = "server")]
pub use ops::{Answer, ErrorKind, IdsLater, Later, OpError, SeqOwner, Service, Turn};
#[cfg(feature = "server")]
pub use segments::Segments;
#[cfg(feature = "server")]
pub use server_section::{OwnKeys, Server};
