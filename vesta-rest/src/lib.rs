//! The vesta-rs REST issuer (Vesta's REST server): Vesta-compatible endpoints (`/genid`,
//! `/expid`, `/makeid`, `/transtime`) plus `/genids`, `/healthz` and `/metrics`, on hyper 1.x
//! with tokio. IDs carry genMethod rest (2) and a machine ID from the server pool.
//!
//! Issuing never blocks a worker thread: when a time unit's sequence is used up the request waits
//! on the shared async issuer (`vesta_embed::AsyncIssuer`), served fairly across connections at
//! the next unit boundary. Every error is a JSON `{"error": "..."}` whose
//! sentence names the parameter at fault; nothing a client sends can make the server panic.
//!
//! ```no_run
//! # async fn run() -> Result<(), vesta_service::ServeError> {
//! use vesta_rest::{RestConfig, RestServer};
//! use vesta_service::shutdown;
//!
//! let server = RestServer::start(RestConfig::default()).await?; // 127.0.0.1:8080, machine 924
//! server.serve(shutdown::signal()).await; // until ctrl-c or SIGTERM; releases the machine ID
//! # Ok(())
//! # }
//! ```

pub mod app;
pub mod body;
pub mod budget;
pub mod config;
pub mod connection;
pub mod endpoints;
pub mod error;
pub mod metrics;
pub mod query;
pub mod response;
pub mod router;
pub mod server;

pub use config::{RestConfig, RestSection};
pub use error::{ApiError, ErrorKind};
pub use router::Endpoint;
pub use server::RestServer;
pub use vesta_service::{ServeError, ServeReport};
