//! vesta-server's integration tests: real TCP servers on loopback ports, the client and raw frames.
//!
//! One binary: each file a module, so the crate's dependencies are linked and their generic code
//! compiled once, not once per file. `run-tests` (tests/src/bin/run_tests.rs) still runs each
//! module in a process of its own (`--exact` with the module's tests), as separate binaries ran.

mod common;

mod client;
mod examples;
mod fairness;
mod info;
mod metrics;
mod segment;
mod seq;
mod server_raw;
