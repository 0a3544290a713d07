//! One module per subcommand, plus the arguments they share. A command left out of a build
//! (its cargo feature off) is [`absent::Absent`]: it parses anything and says what it needs.

#[cfg(not(all(feature = "serve", feature = "bench")))]
pub mod absent;
#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "bench")]
pub mod bench_grpc;
#[cfg(feature = "bench")]
pub mod bench_rest;
#[cfg(feature = "bench")]
pub mod bench_tcp;
pub mod common;
pub mod docs;
pub mod explain;
#[cfg(feature = "client")]
pub mod gen_grpc;
#[cfg(feature = "client")]
pub mod gen_server;
pub mod generate;
pub mod layout;
pub mod machine;
#[cfg(feature = "leases")]
pub mod machine_store;
pub mod make;
#[cfg(feature = "segment")]
pub mod segment;
#[cfg(feature = "seq")]
pub mod seq;
#[cfg(feature = "seq")]
pub mod seq_admin;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "serve")]
pub mod serve_log;
#[cfg(feature = "leases")]
pub mod zk;

/// The runtime of the database commands (`vesta segment`, `vesta seq`): two workers, one
/// for the store's background fetch or raise.
#[cfg(any(feature = "segment", feature = "seq"))]
pub fn db_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}
