//! The TCP load engine against real in-process servers: the closed loop fills its pipeline and
//! counts every ID; the open loop sends exactly its schedule and times from the intended send; a
//! batch run counts runs per time unit; error answers are counted by code; two servers add up
//! their caps. Assertions are on counts, never on speed.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{bench, counts_add_up, tcp_server};
use vesta_bench::{BenchError, Field, Load, Report, TcpLoad, tcp};
use vesta_core::IdType;
use vesta_embed::LeaseState;

fn load(targets: &[std::net::SocketAddr]) -> TcpLoad {
    TcpLoad {
        load: Load {
            targets: targets.iter().map(ToString::to_string).collect(),
            connections: 2,
            duration: Duration::from_millis(400),
            batch: None,
            rate: None,
        },
        pipeline: 16,
        seq_keys: None,
        seq_shape: vesta_bench::KeyShape::Dense,
        peer: None,
    }
}

async fn run(config: TcpLoad) -> Result<Report, BenchError> {
    bench(move || tcp::run(config, Duration::from_secs(1), |_| {})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_open_and_batch_runs_measure_what_they_sent() {
    let (server, _) = tcp_server(924, IdType::MaxPeak).await;
    let addr = server.addr();

    let config = load(&[addr]);
    let (r, ticks) = bench(move || {
        let mut ticks = 0;
        let r = tcp::run(config, Duration::from_millis(100), |_| ticks += 1);
        (r, ticks)
    })
    .await;
    let r = r.unwrap();
    assert!(ticks >= 2, "progress was reported {ticks} times");
    counts_add_up(&r);
    assert!(r.requests > 0);
    assert_eq!((r.ids, r.errors), (r.requests, 0));
    assert!(r.per_unit.keys().all(|u| u.machine == 924));
    assert!(r.service.is_none());
    assert_eq!(r.targets[0].machine, Some(924));
    assert_eq!(r.cap_per_sec(), Some(1 << 20));
    let text = r.to_string();
    assert!(text.contains("target     127.0.0.1:"), "{text}");
    assert!(
        text.contains("(machine 924, max-peak, lease static)"),
        "{text}"
    );
    assert!(text.contains("errors     0"), "{text}");

    let mut open = load(&[addr]);
    open.load.rate = Some(2000);
    open.load.duration = Duration::from_secs(1);
    let r = run(open).await.unwrap();
    counts_add_up(&r);
    // 2000/s for 1 s: the schedule, not the server's speed, decides the count.
    assert_eq!(r.requests, 2000);
    let service = r.service.as_ref().unwrap();
    assert_eq!(service.len(), r.requests);
    assert!(r.latency.value_at_quantile(0.5) >= service.value_at_quantile(0.5));
    assert!(r.to_string().contains("from the intended send time"));

    let mut batch = load(&[addr]);
    batch.load.batch = Some(1000);
    let r = run(batch).await.unwrap();
    counts_add_up(&r);
    assert_eq!(r.ids, r.requests * 1000);

    let mut too_big = load(&[addr]);
    too_big.load.batch = Some(1 << 20);
    let err = run(too_big).await.unwrap_err();
    assert!(
        matches!(
            err,
            BenchError::OutOfRange {
                field: Field::Batch,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "batch 1048576 is out of range: allowed 1..=65536 (the server's max_batch)"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_answers_are_counted_by_code() {
    let (server, issuer) = tcp_server(926, IdType::MaxPeak).await;
    let mut config = load(&[server.addr()]);
    config.load.duration = Duration::from_millis(800);
    let running = bench(move || tcp::run(config, Duration::from_secs(1), |_| {}));
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
        BTreeMap::from([("UNAVAILABLE".to_owned(), r.errors)])
    );
    let first = r.first_error.as_deref().unwrap();
    assert!(first.starts_with("UNAVAILABLE: "), "{first}");
    assert!(first.contains("lease lost (test)"), "{first}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_the_load_and_add_their_caps() {
    let (a, _) = tcp_server(927, IdType::MinGranularity).await;
    let (b, _) = tcp_server(928, IdType::MinGranularity).await;
    let mut config = load(&[a.addr(), b.addr()]);
    config.load.batch = Some(100);
    let r = run(config).await.unwrap();
    counts_add_up(&r);
    let machines: BTreeSet<u64> = r.per_unit.keys().map(|u| u.machine).collect();
    assert_eq!(machines, BTreeSet::from([927, 928]));
    assert!(
        r.per_unit
            .keys()
            .all(|u| u.id_type == Some(IdType::MinGranularity))
    );
    assert_eq!(r.cap_per_sec(), Some(2 * 1_024_000));
    let text = r.to_string();
    assert!(
        text.contains("of the cap 2,048,000/s over the whole run"),
        "{text}"
    );
    // 400 ms of millisecond units: the fill line counts every unit between each server's first
    // and last, empty ones included.
    let fill = r.unit_fill().unwrap();
    assert!(fill.units > 0 && fill.fill <= 1.0, "{fill:?}");
    assert!(text.contains("whole milliseconds inside the run"), "{text}");
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_there_fails_before_the_run() {
    // Bind and drop: a loopback port nothing listens on.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = run(load(&[addr])).await.unwrap_err();
    assert!(
        matches!(&err, BenchError::Target { target, .. } if *target == addr.to_string()),
        "{err:?}"
    );
    assert!(err.to_string().contains("connect"), "{err}");
}
