//! vesta-rest's integration tests: real servers on loopback ports, real hyper clients.
//!
//! One binary: each file a module, so the crate's dependencies are linked and their generic code
//! compiled once, not once per file. `run-tests` (tests/src/bin/run_tests.rs) still runs each
//! module in a process of its own (`--exact` with the module's tests), as separate binaries ran.

mod common;

mod api;
mod gate;
mod grpc;
mod grpc_undecodable;
mod hostile;
mod leaf;
mod lifecycle;
mod openapi;
mod segment;
mod seq;
mod zk;
