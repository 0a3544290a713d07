#![doc = include_str!("../README.md")]
//!
//! ## How it measures
//!
//! - [`tcp`], [`rest`] and [`grpc`] are the load engines behind `vesta bench tcp|rest|grpc`.
//!   All measure the same way: C connections for a fixed duration, either **closed loop** (each
//!   connection sends as fast as answers come back: what the server can do) or **open loop** at
//!   a fixed total rate, where request `i` is due at `start + i / rate` and its latency counts
//!   from that *intended* time, so a late sender, a full pipeline or a stalled server shows up
//!   in every request it delayed (no coordinated omission). Latencies go to HDR histograms; the
//!   IDs received are counted per server time unit, and the server's layout (read from the
//!   server itself) gives the cap the run is reported against ([`Report`]).
//! - [`seq`] is the per-key sequence load (`--seq-keys N`: `SEQ_NEXT` and `GET /seq/{key}` of
//!   random keys) and its peers in the same run shape: Redis `INCR` pipelined, PostgreSQL
//!   `UPDATE ... RETURNING` per call ([`Peer`]).
//! - [`baseline`] is the bare hyper server that `/genid` is compared with (binary `bare-hyper`),
//!   and the bare tonic handler that gRPC's `NextId` is compared with (binary `bare-tonic`).
//! - `benches/` holds the criterion benchmarks of the generator against the snowflake peers and
//!   the saturation run; `scripts/` the reproducible benchmark runs (docs/BENCHMARKS.md).
//!
//! The engines run on plain threads, one per connection (two for a pipelined open-loop TCP
//! connection: a sender and a reader), pacing with `thread::sleep`: an async runtime's 1 ms
//! timer wheel would add up to a millisecond of the tool's own lateness to every latency timed
//! from the intended send. This library knows its settings by their field names only; the CLI
//! maps them to its flags ([`Field`]).

pub mod baseline;
mod config;
mod engine;
pub mod grpc;
pub mod report;
pub mod rest;
mod schedule;
pub mod seq;
mod tally;
pub mod tcp;

pub use config::{BenchError, Field, GrpcLoad, Load, Peer, RestLoad, TcpLoad};
pub use engine::Progress;
pub use report::{Protocol, Report, Target};
pub use seq::KeyShape;
