#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - [`TcpServer`] (start from a [`TcpConfig`], or serve an [`Issuer`](vesta_embed::Issuer)
//!   you started), [`ServerHandle`] (a server on its own task: stop it gracefully or kill it),
//!   [`ServeReport`], [`ServeError`], [`shutdown_signal`].
//! - [`Client`], [`ClientConfig`], [`ClientStats`], [`ClientError`].
//! - The wire codec: [`frame`] (frames) and [`proto`] (typed requests and answers of protocol
//!   versions 1 to 3; [`ErrorCode`], [`ServerInfo`], [`ServerMachine`]), used by the load tool
//!   in vesta-bench, the fuzzer and this crate's tests.
//!
//! Module shape follows tokio-rs/mini-redis: `frame`, `proto` (the codec: one module per
//! operation, its request and its answer, shared by the client and the server), `server` (the
//! accept loop, the connections, and each op's server side onto `vesta_service`'s ops),
//! `connection`, `config`, `client`.

mod client;
#[cfg(feature = "server")]
mod config;
#[cfg(feature = "server")]
mod connection;
mod error;
pub mod frame;
#[cfg(feature = "server")]
mod metrics;
pub mod proto;
#[cfg(feature = "server")]
mod server;

pub use client::{Client, ClientConfig, ClientStats, ClientTls};
#[cfg(feature = "server")]
pub use config::{TcpConfig, TcpKeys, TcpSection};
pub use error::ClientError;
pub use proto::{ErrorCode, ServerInfo, ServerMachine};
#[cfg(feature = "server")]
pub use server::{ServerHandle, TcpServer};
#[cfg(feature = "server")]
pub use vesta_service::shutdown::signal as shutdown_signal;
#[cfg(feature = "server")]
pub use vesta_service::{ServeError, ServeReport};
