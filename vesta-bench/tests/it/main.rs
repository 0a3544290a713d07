//! The load engines against real servers on loopback ports.
//!
//! One binary: each file a module, so the crate's dependencies are linked and their generic code
//! compiled once, not once per file. `run-tests` (tests/src/bin/run_tests.rs) still runs each
//! module in a process of its own (`--exact` with the module's tests), as separate binaries ran.

mod common;

mod grpc;
mod rest;
mod seq;
mod tcp;
