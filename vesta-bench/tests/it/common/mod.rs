//! Real servers for the load-engine tests, in process on ephemeral loopback ports: the TCP
//! server, the REST server and the bare-hyper baseline. The engines are blocking, so tests run
//! them with [`bench`] on a blocking thread while the servers run on the test's runtime.

#![allow(dead_code)] // each test binary uses its own subset

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use vesta_bench::{Protocol, Report};
use vesta_core::IdType;
use vesta_embed::Issuer;
use vesta_rest::{RestConfig, RestServer};
use vesta_server::{ServerHandle, TcpConfig, TcpServer};

/// A TCP server with static machine `machine` and layout `id_type`, and its issuer.
pub async fn tcp_server(machine: u64, id_type: IdType) -> (ServerHandle, Arc<Issuer>) {
    let mut c = TcpConfig::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.machine.id = Some(machine);
    c.id.id_type = Some(id_type);
    let server = TcpServer::start(c).await.unwrap();
    let issuer = server.issuer().clone();
    (ServerHandle::spawn(server), issuer)
}

/// A TCP server (machine `machine`, max-peak) serving per-key sequences from an SQLite file in
/// `dir`, step `step` (fixed: the adaptive step's ceiling is the step too, so raises come
/// often).
pub async fn tcp_seq_server(machine: u64, dir: &std::path::Path, step: u64) -> ServerHandle {
    let mut c = TcpConfig::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.machine.id = Some(machine);
    c.seq.db = Some(format!("sqlite://{}/seq.db", dir.display()));
    (c.seq.step, c.seq.max_step) = (step, step);
    ServerHandle::spawn(TcpServer::start(c).await.unwrap())
}

/// A REST server (machine `machine`, max-peak) serving per-key sequences from an SQLite file in
/// `dir`, step `step` (fixed, as [`tcp_seq_server`]).
pub async fn rest_seq_server(
    machine: u64,
    dir: &std::path::Path,
    step: u64,
) -> Running<vesta_rest::ServeReport> {
    let mut c = RestConfig::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.machine.id = Some(machine);
    c.seq.db = Some(format!("sqlite://{}/seq.db", dir.display()));
    (c.seq.step, c.seq.max_step) = (step, step);
    serve_rest(RestServer::start(c).await.unwrap())
}

/// A server serving on its own task until [`Running::stop`].
pub struct Running<T> {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<T>,
}

/// Serves a started REST server on its own task.
fn serve_rest(server: RestServer) -> Running<vesta_rest::ServeReport> {
    let addr = server.local_addr();
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = rx.await;
    }));
    Running { addr, stop, task }
}

impl<T> Running<T> {
    /// Signals shutdown and waits for the server to return.
    pub async fn stop(self) -> T {
        let _ = self.stop.send(());
        self.task.await.unwrap()
    }
}

/// A REST server with static machine `machine` and layout `id_type`, and its issuer.
pub async fn rest_server(
    machine: u64,
    id_type: IdType,
) -> (Running<vesta_rest::ServeReport>, Arc<Issuer>) {
    let mut c = RestConfig::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.machine.id = Some(machine);
    c.id.id_type = Some(id_type);
    let server = RestServer::start(c).await.unwrap();
    let issuer = server.issuer().clone();
    (serve_rest(server), issuer)
}

/// A REST server (machine `machine`, max-peak) with segment mode on an SQLite database in
/// `dir` holding the tag `orders` (step 1000).
pub async fn rest_segment_server(
    machine: u64,
    dir: &std::path::Path,
) -> Running<vesta_rest::ServeReport> {
    let url = format!("sqlite://{}/segments.db", dir.display());
    let parsed = vesta_segment::DbUrl::parse(&url).unwrap();
    let db = vesta_segment::Database::connect_or_create(&parsed, std::time::Duration::from_secs(5))
        .await
        .unwrap();
    db.init().await.unwrap();
    db.create_tag("orders", 1000, 1, None).await.unwrap();
    db.close().await;
    let mut c = RestConfig::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.machine.id = Some(machine);
    c.segment.db = Some(url);
    serve_rest(RestServer::start(c).await.unwrap())
}

/// The bare-hyper baseline; `stop` returns how many requests it answered.
pub async fn baseline_server() -> Running<u64> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(vesta_bench::baseline::serve(listener, None, async move {
        let _ = rx.await;
    }));
    Running { addr, stop, task }
}

/// The bare tonic baseline; `stop` returns how many numbers it handed out.
pub async fn grpc_baseline_server() -> Running<u64> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(vesta_bench::baseline::grpc::serve(listener, async move {
        let _ = rx.await;
    }));
    Running { addr, stop, task }
}

/// Runs a blocking load engine off the runtime's workers.
pub async fn bench<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// What every report must satisfy, whatever the speed: one latency per answer, every ID in a
/// time unit (segment numbers are in none), errors by kind adding up, no unit over its capacity
/// (no duplicate IDs), and one ID or one error per single-ID request.
pub fn counts_add_up(r: &Report) {
    assert_eq!(r.latency.len(), r.requests, "one latency per answer");
    let in_units = if r.segment.is_some() || r.seq_keys.is_some() {
        0
    } else {
        r.ids
    };
    assert_eq!(
        r.per_unit.values().sum::<u64>(),
        in_units,
        "every ID in a unit"
    );
    assert_eq!(r.errors_by_kind.values().sum::<u64>(), r.errors);
    assert!(
        r.overfull_units().is_empty(),
        "duplicates: {:?}",
        r.overfull_units()
    );
    let baseline = matches!(
        r.protocol,
        Protocol::Rest { baseline: true } | Protocol::Grpc { baseline: true }
    );
    if r.seq_keys.is_some() {
        let count = u64::from(r.load.batch.unwrap_or(1));
        assert_eq!(
            r.ids,
            (r.requests - r.errors) * count,
            "the asked count each"
        );
    }
    if r.load.batch.is_none() && !baseline {
        assert_eq!(r.requests, r.ids + r.errors);
    }
}
