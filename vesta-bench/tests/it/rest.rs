//! The REST load engine against real in-process servers: vesta-rest's `/genid` and `/genids`
//! closed loop and at a fixed rate, error answers counted by status, a refused request failing
//! before the run, and the bare-hyper baseline. Assertions are on counts, never on speed.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{baseline_server, bench, counts_add_up, rest_segment_server, rest_server};
use vesta_bench::{BenchError, Load, Protocol, Report, RestLoad, rest};
use vesta_core::IdType;
use vesta_embed::LeaseState;

fn load(addr: std::net::SocketAddr) -> RestLoad {
    RestLoad {
        load: Load {
            targets: vec![addr.to_string()],
            connections: 2,
            duration: Duration::from_millis(400),
            batch: None,
            rate: None,
        },
        baseline: false,
        segment: None,
        leaf: false,
        seq_keys: None,
        seq_shape: vesta_bench::KeyShape::Dense,
    }
}

async fn run(config: RestLoad) -> Result<Report, BenchError> {
    bench(move || rest::run(config, Duration::from_secs(1), |_| {})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genid_closed_and_open_loop_and_genids_batches() {
    let (server, _) = rest_server(1000, IdType::MinGranularity).await;

    let r = run(load(server.addr)).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests, 0));
    assert!(r.per_unit.keys().all(|u| u.machine == 1000));
    assert_eq!(r.targets[0].machine, Some(1000));
    assert_eq!(r.targets[0].lease.as_deref(), Some("static"));
    assert_eq!(r.cap_per_sec(), Some(1_024_000));
    assert!(r.service.is_none());
    let text = r.to_string();
    assert!(
        text.contains("(machine 1000, min-granularity, lease static)"),
        "{text}"
    );
    assert!(text.contains("GET /genid, closed loop"), "{text}");
    assert!(
        text.contains("% of the cap 1,024,000/s over the whole run"),
        "{text}"
    );

    let mut open = load(server.addr);
    open.load.rate = Some(1000);
    open.load.duration = Duration::from_secs(1);
    let r = run(open).await.unwrap();
    counts_add_up(&r);
    // 1000/s for 1 s: the schedule decides the count.
    assert_eq!((r.requests, r.ids), (1000, 1000));
    let service = r.service.as_ref().unwrap();
    assert_eq!(service.len(), r.requests);
    assert!(r.latency.value_at_quantile(0.5) >= service.value_at_quantile(0.5));

    let mut batch = load(server.addr);
    batch.load.batch = Some(100);
    let r = run(batch).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!(r.ids, r.requests * 100);
    assert!(r.to_string().contains("GET /genids?count=100"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_answers_are_counted_by_status() {
    let (server, issuer) = rest_server(1001, IdType::MaxPeak).await;
    let mut config = load(server.addr);
    config.load.duration = Duration::from_millis(800);
    let running = bench(move || rest::run(config, Duration::from_secs(1), |_| {}));
    let fence = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        issuer.fence_for_test(LeaseState::Fenced, "lease lost (test)");
    };
    let (r, ()) = tokio::join!(running, fence);
    let r = r.unwrap();
    counts_add_up(&r);
    assert_eq!(r.requests, r.ids + r.errors);
    assert!(
        r.ids > 0 && r.errors > 0,
        "{} IDs, {} errors",
        r.ids,
        r.errors
    );
    assert_eq!(
        r.errors_by_kind,
        BTreeMap::from([("503".to_owned(), r.errors)])
    );
    assert_eq!(
        r.first_error.as_deref(),
        Some("503 Service Unavailable: not issuing: lease lost (test)")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_fails_before_the_run_with_the_servers_sentence() {
    let (server, _) = rest_server(1002, IdType::MaxPeak).await;
    let mut config = load(server.addr);
    config.load.batch = Some(2_000_000);
    let err = run(config).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, BenchError::Target { .. }), "{err:?}");
    assert!(
        text.contains(
            "GET /genids?count=2000000 answered 400 Bad Request: invalid parameter count"
        ),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_baseline_is_timed_but_not_read_as_ids() {
    let server = baseline_server().await;
    let mut config = load(server.addr);
    config.baseline = true;
    let r = run(config).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (0, 0));
    assert_eq!(r.protocol, Protocol::Rest { baseline: true });
    assert_eq!(r.cap_per_sec(), None);
    let text = r.to_string();
    assert!(text.contains("(baseline, not vesta"), "{text}");
    assert!(!text.contains("ids "), "{text}");

    // Without the flag the engine asks /healthz, and a counter is not vesta's answer.
    let err = run(load(server.addr)).await.unwrap_err();
    assert!(err.to_string().contains("/healthz is not vesta's"), "{err}");
    let served = server.stop().await;
    // Every answer the run counted, its preflight request and the second run's /healthz.
    assert_eq!(served, r.requests + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segment_numbers_are_counted_and_checked_to_increase() {
    let dir = tempfile::tempdir().unwrap();
    let server = rest_segment_server(1005, dir.path()).await;
    let mut single = load(server.addr);
    single.segment = Some("orders".into());
    let r = run(single.clone()).await.unwrap();
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests, 0));
    assert!(r.per_unit.is_empty(), "numbers are not read as IDs");
    assert_eq!(r.cap_per_sec(), None);
    let text = r.to_string();
    assert!(text.contains("GET /segment/orders, closed loop"), "{text}");
    assert!(text.contains("segment numbers/s of tag orders"), "{text}");

    let mut batch = single.clone();
    batch.load.batch = Some(50);
    let r = run(batch).await.unwrap();
    assert_eq!((r.ids, r.errors), (r.requests * 50, 0));
    assert!(r.to_string().contains("GET /segments/orders?count=50"));

    // Leaf's path: the same numbers, one per request, counted and checked the same way.
    let mut leaf = single.clone();
    leaf.leaf = true;
    let r = run(leaf).await.unwrap();
    counts_add_up(&r);
    assert_eq!((r.ids, r.errors), (r.requests, 0));
    assert!(
        r.to_string()
            .contains("GET /api/segment/get/orders, closed loop")
    );

    // An unknown tag fails the run before it starts, with the server's sentence.
    let mut unknown = single.clone();
    unknown.segment = Some("nope".into());
    let err = run(unknown).await.unwrap_err().to_string();
    assert!(
        err.contains("404") && err.contains("unknown tag \"nope\""),
        "{err}"
    );
    server.stop().await;

    // A server without segment mode: refused, saying so.
    let (plain, _) = rest_server(1006, IdType::MaxPeak).await;
    single.load.targets = vec![plain.addr.to_string()];
    let err = run(single).await.unwrap_err().to_string();
    assert!(err.contains("no segment mode"), "{err}");
    plain.stop().await;
}
