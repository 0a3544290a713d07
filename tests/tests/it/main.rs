//! The workspace's end-to-end tests: real processes (`vesta`), real ZooKeeper, etcd,
//! PostgreSQL, MariaDB, Prometheus and Chromium on loopback, and Python's and Node's gRPC
//! clients.
//!
//! One binary: each file a module, so the crate's dependencies are linked and their generic code
//! compiled once, not once per file. `run-tests` (tests/src/bin/run_tests.rs) still runs each
//! module in a process of its own (`--exact` with the module's tests), as separate binaries ran.

mod architecture_map;
mod bench_cli;
mod cli;
mod cli_configs;
mod cli_smoke;
mod client_packages;
mod console;
mod deploy;
mod docs_run;
mod docs_snippets;
mod etcd_lease;
mod fuzz_corpus;
mod grpc_clients;
mod id_type;
mod import_loops;
mod lean_builds;
mod machine_ids;
mod operator_holds;
mod operator_mistakes;
mod package;
mod peer_layouts;
mod prometheus;
mod rest_cli;
mod segment_dbs;
mod segment_serve;
mod segment_tls;
mod seq_cluster;
mod seq_dbs;
mod seq_owner;
mod seq_restore;
mod seq_shapes;
mod source_sizes;
mod sql_lease;
mod tcp_cli;
mod tls;
mod zk_crash;
mod zk_failover;
mod zk_lease;
mod zk_many;
