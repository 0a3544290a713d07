//! Harnesses for the cross-crate integration tests: the real `vesta` binary (built on demand, so
//! it is never stale), real ZooKeeper servers for the lease tests, real PostgreSQL and MariaDB
//! servers plus a raw Leaf-style allocator for the segment tests, the deployment files as data,
//! a real Prometheus server for the monitoring tests, a throwaway Redis for the per-key
//! sequence load's peer ([`redis`]), Python's and Node's gRPC clients
//! ([`grpc_clients`]: their venv and `node_modules`, installed once under `target/tmp/`),
//! operators' hosts and users for the tests of their mistakes ([`operator`]), the per-key
//! sequences' history checker ([`history`]), and the building blocks of `scripts/soak`
//! ([`soak`]), whose binaries live in `src/bin/`.

pub mod bin;
pub mod chromium;
pub mod client_packages;
pub mod db;
pub mod deploy;
pub mod docs;
pub mod etcd;
pub mod grpc_clients;
pub mod history;
pub mod leaf;
pub mod lease;
pub mod operator;
pub mod peers;
pub mod prometheus;
pub mod proxy;
pub mod redis;
pub mod seq_ops;
pub mod soak;
pub mod tls;
pub mod zk;

/// The README's Rust snippets ("Use it as a library"), compiled and run as doctests so that
/// what a new user copies works.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// docs/grpc.md's Rust block (compiled: it calls a server), as a doctest; the page's other
/// blocks run in `tests/it/docs_run.rs`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/grpc.md")]
pub struct GrpcGuideDoctests;

/// docs/seq.md's Rust block, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../docs/seq.md")]
pub struct SeqGuideDoctests;
