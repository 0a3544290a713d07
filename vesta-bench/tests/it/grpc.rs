//! The gRPC load engine against real in-process servers: vesta-rest's gRPC service (`NextId`,
//! `NextIds`, `StreamIds`) closed loop and at a fixed rate, error statuses counted by code, a
//! refused call failing before the run, and the bare tonic baseline. Assertions are on counts,
//! never on speed.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{bench, counts_add_up, grpc_baseline_server, rest_server};
use vesta_bench::{BenchError, GrpcLoad, Load, Protocol, Report, grpc};
use vesta_core::IdType;
use vesta_embed::LeaseState;

fn load(addr: std::net::SocketAddr) -> GrpcLoad {
    GrpcLoad {
        load: Load {
            targets: vec![addr.to_string()],
            connections: 2,
            duration: Duration::from_millis(400),
            batch: None,
            rate: None,
        },
        stream: false,
        baseline: false,
    }
}

async fn run(config: GrpcLoad) -> Result<Report, BenchError> {
    bench(move || grpc::run(config, Duration::from_secs(1), |_| {})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_id_closed_and_open_loop_batches_and_streams() {
    let (server, _) = rest_server(1010, IdType::MinGranularity).await;

    let r = run(load(server.addr)).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests, 0));
    assert!(r.per_unit.keys().all(|u| u.machine == 1010));
    assert_eq!(r.cap_per_sec(), Some(1_024_000));
    let text = r.to_string();
    assert!(
        text.contains("(machine 1010, min-granularity, lease static)"),
        "{text}"
    );
    assert!(
        text.contains("grpc, 2 connections (HTTP/2, 1 call in flight each), vesta.v1.Vesta/NextId, closed loop"),
        "{text}"
    );

    let mut open = load(server.addr);
    open.load.rate = Some(1000);
    open.load.duration = Duration::from_secs(1);
    let r = run(open).await.unwrap();
    counts_add_up(&r);
    // 1000/s for 1 s: the schedule decides the count.
    assert_eq!((r.requests, r.ids), (1000, 1000));
    assert_eq!(r.service.as_ref().unwrap().len(), r.requests);

    let mut batch = load(server.addr);
    batch.load.batch = Some(100);
    let r = run(batch.clone()).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!(r.ids, r.requests * 100);
    assert!(r.to_string().contains("vesta.v1.Vesta/NextIds count=100"));

    // A stream of 5,000: three chunks of at most 2,048, every ID counted in its unit.
    let mut stream = batch;
    stream.stream = true;
    stream.load.batch = Some(5000);
    let r = run(stream).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests * 5000, 0));
    assert!(
        r.to_string()
            .contains("vesta.v1.Vesta/StreamIds count=5000")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_statuses_are_counted_by_code() {
    let (server, issuer) = rest_server(1011, IdType::MaxPeak).await;
    let mut config = load(server.addr);
    config.load.duration = Duration::from_millis(800);
    let running = bench(move || grpc::run(config, Duration::from_secs(1), |_| {}));
    let fence = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        issuer.fence_for_test(LeaseState::Fenced, "lease lost (test)");
    };
    let (r, ()) = tokio::join!(running, fence);
    let r = r.unwrap();
    counts_add_up(&r);
    assert!(
        r.ids > 0 && r.errors > 0,
        "{} IDs, {} errors",
        r.ids,
        r.errors
    );
    assert_eq!(
        r.errors_by_kind,
        BTreeMap::from([("Unavailable".to_owned(), r.errors)])
    );
    assert_eq!(
        r.first_error.as_deref(),
        Some("Unavailable: not issuing: lease lost (test)")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_fails_before_the_run_with_the_servers_sentence() {
    let (server, _) = rest_server(1012, IdType::MaxPeak).await;
    let mut config = load(server.addr);
    config.load.batch = Some(2_000_000);
    let err = run(config).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, BenchError::Target { .. }), "{err:?}");
    assert!(
        text.contains("vesta.v1.Vesta/NextIds count=2000000 answered InvalidArgument: count"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bare_tonic_baseline_is_timed_but_not_read_as_ids() {
    let server = grpc_baseline_server().await;
    let mut config = load(server.addr);
    config.baseline = true;
    let r = run(config.clone()).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (0, 0));
    assert_eq!(r.protocol, Protocol::Grpc { baseline: true });
    assert!(r.to_string().contains("(baseline, not vesta"));

    let mut stream = config;
    stream.stream = true;
    stream.load.batch = Some(3000);
    let streamed = run(stream).await.unwrap();
    assert_eq!(streamed.errors, 0);

    // Without the flag the engine asks /healthz, which the bare handler does not answer.
    let err = run(load(server.addr)).await.unwrap_err();
    assert!(err.to_string().contains("/healthz"), "{err}");
    let handed = server.stop().await;
    // Every number of every call the runs counted and of their two preflight calls.
    assert_eq!(handed, r.requests + 1 + (streamed.requests + 1) * 3000);
}
