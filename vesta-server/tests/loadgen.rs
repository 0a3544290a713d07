//! The load generator against a real server: the closed loop fills its pipeline and counts every
//! ID; the open loop holds its schedule (requests ≈ rate × duration) and times from the intended
//! send; a batch run counts runs per time unit.

mod common;

use std::time::Duration;

use common::{config, start};
use vesta_server::loadgen::{self, LoadConfig};

fn load(addr: std::net::SocketAddr) -> LoadConfig {
    LoadConfig {
        endpoints: vec![addr.to_string()],
        connections: 2,
        pipeline: 16,
        duration: Duration::from_millis(400),
        batch: None,
        rate: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_open_and_batch_runs_measure_what_they_sent() {
    let server = start(config(924)).await;
    let addr = server.addr();

    let mut ticks = 0;
    let closed = tokio::task::spawn_blocking(move || {
        let r = loadgen::run(load(addr), Duration::from_millis(100), |_| ticks += 1);
        (r, ticks)
    })
    .await
    .unwrap();
    let (r, ticks) = (closed.0.unwrap(), closed.1);
    assert!(ticks >= 2, "progress was reported {ticks} times");
    assert!(r.requests > 1000, "{}", r.requests);
    assert_eq!(r.ids, r.requests);
    assert_eq!(r.errors, 0);
    assert_eq!(r.latency.len(), r.requests);
    assert_eq!(r.per_unit.values().sum::<u64>(), r.ids);
    assert!(r.per_unit.keys().all(|&(machine, _)| machine == 924));
    assert!(r.service.is_none());

    let mut open = load(addr);
    open.rate = Some(2000);
    open.duration = Duration::from_secs(1);
    let r = tokio::task::spawn_blocking(move || loadgen::run(open, Duration::from_secs(1), |_| {}))
        .await
        .unwrap()
        .unwrap();
    // 2000/s for 1 s: the schedule, not the server's speed, decides the count.
    assert!((1990..=2000).contains(&r.requests), "{}", r.requests);
    let service = r.service.as_ref().unwrap();
    assert_eq!(service.len(), r.requests);
    assert!(r.latency.value_at_quantile(0.5) >= service.value_at_quantile(0.5));

    let mut batch = load(addr);
    batch.batch = Some(1000);
    let r =
        tokio::task::spawn_blocking(move || loadgen::run(batch, Duration::from_secs(1), |_| {}))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(r.ids, r.requests * 1000);
    assert_eq!(r.per_unit.values().sum::<u64>(), r.ids);

    let mut too_big = load(addr);
    too_big.batch = Some(1 << 20);
    let err =
        tokio::task::spawn_blocking(move || loadgen::run(too_big, Duration::from_secs(1), |_| {}))
            .await
            .unwrap()
            .unwrap_err();
    assert_eq!(
        err.to_string(),
        "--batch 1048576 is out of range: allowed 1..=65536 (the server's max_batch)"
    );
    server.shutdown().await.unwrap();
}
