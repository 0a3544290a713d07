//! The vesta-rs REST issuer (Vesta's REST server): Vesta-compatible endpoints (`/genid`,
//! `/expid`, `/makeid`, `/transtime`) plus `/genids`, `/healthz` and `/metrics`, on hyper 1.x
//! with tokio. IDs carry genMethod rest (2) and a machine ID from the server pool.
//!
//! Issuing never blocks a worker thread: when a time unit's sequence is used up the handler
//! sleeps on the tokio timer until the next unit. Every error is a JSON `{"error": "..."}` whose
//! sentence names the parameter at fault; nothing a client sends can make the server panic.
//!
//! ```no_run
//! # async fn run() -> Result<(), vesta_rest::RestError> {
//! use vesta_rest::{RestConfig, RestServer, shutdown};
//!
//! let server = RestServer::start(RestConfig::default()).await?; // 127.0.0.1:8080, machine 924
//! server.serve(shutdown::signal()).await; // until ctrl-c or SIGTERM; releases the machine ID
//! # Ok(())
//! # }
//! ```

pub mod app;
pub mod config;
pub mod endpoints;
pub mod error;
pub mod metrics;
pub mod query;
pub mod response;
pub mod router;
pub mod server;
pub mod shutdown;

pub use config::{RestConfig, RestSection};
pub use error::{ApiError, ErrorKind, RestError};
pub use router::Endpoint;
pub use server::{RestServer, ServeReport};
