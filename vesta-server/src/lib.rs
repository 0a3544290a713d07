//! The central vesta-rs issuer over TCP (Vesta's Dubbo service, rebuilt) and its client.
//!
//! - The wire protocol is in `docs/protocol.md`: length-prefixed frames with a request id each,
//!   a version handshake, pipelining with answers matched by id.
//! - [`Server`] wraps an [`Issuer`](vesta_embed::Issuer) with genMethod server and a machine ID
//!   from the server pool; it never blocks a worker thread, enforces its limits per connection
//!   and drains gracefully.
//! - [`Client`] spreads pipelined requests over a few connections, fails over between
//!   endpoints without losing or duplicating a request, and can prefetch or fall back to an
//!   embedded issuer.
//!
//! Module shape follows tokio-rs/mini-redis: [`frame`] (codec of frames), [`proto`] (one module
//! per operation: its request, its answer and its server side), [`connection`], [`shutdown`],
//! [`server`], [`config`].

pub mod client;
pub mod config;
pub mod connection;
pub mod error;
pub mod frame;
mod metrics;
pub mod proto;
pub mod server;

pub use client::{Client, ClientConfig, ClientStats};
pub use config::{TcpConfig, TcpSection};
pub use error::ClientError;
pub use proto::{ErrorCode, ServerInfo};
pub use server::{ServerHandle, TcpServer};
pub use vesta_service::{ServeError, ServeReport};
