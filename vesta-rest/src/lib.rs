#![doc = include_str!("../README.md")]
//!
//! ## The API
//!
//! - [`RestServer`]: start from a [`RestConfig`] (or serve an
//!   [`Issuer`](vesta_embed::Issuer) you started), then [`serve`](RestServer::serve) until a
//!   shutdown future resolves ([`shutdown_signal`]: SIGINT or SIGTERM); [`ServeReport`],
//!   [`ServeError`].
//! - [`RestConfig`] and its `[server]` section [`RestSection`] (`conf/rest.toml`): the keys
//!   both servers share, and the HTTP keys of its own, [`RestKeys`].
//! - [`Endpoint`]: the paths served, for API documentation checks.
//!
//! Everything else (routing, query decoding, handlers, responses, metrics) is internal.
//!
//! Issuing never blocks a worker thread: when a time unit's sequence is used up the request
//! waits on the shared [`AsyncIssuer`](vesta_embed::AsyncIssuer), served fairly across
//! connections at the next unit boundary. Every error is a JSON `{"error": "..."}` whose
//! sentence names the parameter at fault; nothing a client sends can make the server panic.

mod activity;
mod body;
mod budget;
mod config;
mod connection;
mod ctx;
mod endpoints;
mod error;
mod metrics;
mod query;
mod response;
mod rest;
mod router;
mod routes;
mod server;

pub use body::{SMALL_BODY_BYTES, STREAM_WINDOW_BYTES};
pub use config::{RestConfig, RestKeys, RestSection};
pub use routes::Endpoint;
pub use server::RestServer;
pub use vesta_service::shutdown::signal as shutdown_signal;
pub use vesta_service::{ServeError, ServeReport};

/// The decoders the fuzz targets drive (`fuzz/`, feature `fuzzing`); not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use vesta_service::make::{make_from_query, params as makeid_params};
    pub use vesta_service::query::{Query, parse_u64};
}
