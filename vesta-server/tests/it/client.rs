//! The client against real servers on loopback: every operation, failover when a server is
//! killed or shut down under load (no failed call, no duplicate), distinct IDs from servers with
//! different machine IDs, health re-checks, timeouts, prefetch and the embedded fallback.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{config, start, start_with_issuer};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep};
use vesta_core::{FieldValues, GenMethod, IdFields, IdType};
use vesta_embed::{IssuerConfig, LeaseState};
use vesta_server::{Client, ClientConfig, ClientError, ErrorCode};

fn client_config(addrs: &[std::net::SocketAddr]) -> ClientConfig {
    let mut c = ClientConfig::new(addrs.iter().map(|a| a.to_string()));
    c.health_check_interval = Duration::from_millis(100);
    c.retry_budget = Duration::from_secs(5);
    c
}

/// Calls `next_id` / `next_ids` from `tasks` tasks until `stop` is set; returns every ID and
/// the number of calls. Panics on the first failed call.
async fn load(client: Client, tasks: usize, stop: Arc<AtomicBool>) -> (Vec<u64>, u64) {
    let mut set = JoinSet::new();
    for t in 0..tasks {
        let client = client.clone();
        let stop = stop.clone();
        set.spawn(async move {
            let mut ids = Vec::new();
            let mut calls = 0u64;
            while !stop.load(Ordering::Relaxed) {
                calls += 1;
                if t % 2 == 0 {
                    ids.push(client.next_id().await.expect("next_id failed"));
                } else {
                    let b = client.next_ids(37).await.expect("next_ids failed");
                    assert_eq!(b.len(), 37);
                    ids.extend(b.iter());
                }
            }
            (ids, calls)
        });
    }
    let mut all = Vec::new();
    let mut calls = 0;
    while let Some(r) = set.join_next().await {
        let (ids, c) = r.expect("a load task panicked");
        all.extend(ids);
        calls += c;
    }
    (all, calls)
}

fn assert_distinct(ids: &[u64]) {
    let set: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(set.len(), ids.len(), "{} duplicates", ids.len() - set.len());
}

fn machines(ids: &[u64]) -> HashSet<u64> {
    ids.iter().map(|&id| IdFields::decode(id).machine).collect()
}

#[tokio::test]
async fn every_operation_through_the_client() {
    let server = start(config(950)).await;
    let client = Client::connect(client_config(&[server.addr()]))
        .await
        .unwrap();
    let id = client.next_id().await.unwrap();
    let f = IdFields::decode(id);
    assert_eq!((f.machine, f.gen_method), (950, GenMethod::Server));
    // More than max_batch: fetched in chunks, still contiguous runs in increasing order.
    let batch = client.next_ids(200_000).await.unwrap();
    assert_eq!(batch.len(), 200_000);
    let ids = batch.to_vec();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(ids[0] > id);
    let x = client.explain(id).await.unwrap();
    assert_eq!(x.vesta_fields(), Some(f));
    assert_eq!(client.layout().as_ref(), Some(IdType::MaxPeak.layout()));
    let values = |machine: u64| {
        FieldValues::new()
            .with("time", f.time)
            .with("seq", f.seq)
            .with("machine", machine)
            .with("genMethod", f.gen_method.code())
    };
    assert_eq!(client.make(&values(950)).await.unwrap(), id);
    match client.make(&values(4096)).await {
        Err(ClientError::Refused { code, message, .. }) => {
            assert_eq!(code, ErrorCode::FieldOutOfRange);
            assert_eq!(message, "machine 4096 is out of range: allowed 0..=1023");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(client.trans_time(f.time).await.unwrap(), x.unix_ms);
    let info = client.info().await.unwrap();
    assert_eq!((info.machine, info.lease_state_name()), (950, "static"));
    assert!(info.connections >= 1);
    let each = client.info_each().await;
    assert_eq!(each.len(), 1);
    assert_eq!(each[0].0, server.addr().to_string());
    assert_eq!(each[0].1.as_ref().unwrap().machine, 950);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_with_a_smaller_batch_cap_is_asked_in_smaller_chunks() {
    let mut cfg = config(951);
    cfg.server.max_batch = 1000;
    let server = start(cfg).await;
    let client = Client::connect(client_config(&[server.addr()]))
        .await
        .unwrap();
    let batch = client.next_ids(5500).await.unwrap();
    assert_eq!(batch.len(), 5500);
    assert_distinct(&batch.to_vec());
    assert!(batch.runs().iter().all(|r| r.count <= 1000));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn two_servers_with_different_machines_issue_distinct_ids() {
    let a = start(config(924)).await;
    let b = start(config(925)).await;
    let ca = Client::connect(client_config(&[a.addr()])).await.unwrap();
    let cb = Client::connect(client_config(&[b.addr()])).await.unwrap();
    let (x, y) = tokio::join!(ca.next_ids(300_000), cb.next_ids(300_000));
    let mut ids = x.unwrap().to_vec();
    ids.extend(y.unwrap().iter());
    assert_eq!(ids.len(), 600_000);
    assert_distinct(&ids);
    assert_eq!(machines(&ids), HashSet::from([924, 925]));
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_server_under_load_fails_no_call_and_duplicates_nothing() {
    let a = start(config(924)).await;
    let b = start(config(925)).await;
    let client = Client::connect(client_config(&[a.addr(), b.addr()]))
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(load(client.clone(), 16, stop.clone()));
    sleep(Duration::from_millis(400)).await;
    a.kill().await;
    sleep(Duration::from_millis(600)).await;
    stop.store(true, Ordering::Relaxed);
    let (ids, calls) = load.await.unwrap();
    assert!(calls > 1000, "only {calls} calls");
    assert_distinct(&ids);
    assert_eq!(machines(&ids), HashSet::from([924, 925]), "served by both");
    let stats = client.stats();
    eprintln!("{calls} calls, {} IDs, {stats:?}", ids.len());
    assert!(stats.endpoints_marked_dead >= 1, "{stats:?}");
    assert!(
        stats.retries >= 1,
        "requests in flight on A were retried: {stats:?}"
    );
    assert_eq!(stats.fallback_calls, 0);
    // After the kill, the last IDs all come from B.
    assert!(!client.endpoint_health()[0].1, "marked dead");
    let after = client.next_ids(10).await.unwrap();
    assert!(after.iter().all(|id| IdFields::decode(id).machine == 925));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_under_load_fails_no_call_either() {
    let a = start(config(924)).await;
    let b = start(config(925)).await;
    let client = Client::connect(client_config(&[a.addr(), b.addr()]))
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(load(client.clone(), 16, stop.clone()));
    sleep(Duration::from_millis(400)).await;
    a.shutdown().await.unwrap();
    sleep(Duration::from_millis(400)).await;
    stop.store(true, Ordering::Relaxed);
    let (ids, calls) = load.await.unwrap();
    assert!(calls > 1000, "only {calls} calls");
    assert_distinct(&ids);
    assert_eq!(machines(&ids), HashSet::from([924, 925]));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_is_rechecked_and_preferred_again() {
    let a = start(config(924)).await;
    let addr_a = a.addr();
    let b = start(config(925)).await;
    let client = Client::connect(client_config(&[addr_a, b.addr()]))
        .await
        .unwrap();
    assert_eq!(
        IdFields::decode(client.next_id().await.unwrap()).machine,
        924
    );
    a.kill().await;
    assert_eq!(
        IdFields::decode(client.next_id().await.unwrap()).machine,
        925
    );
    // A replacement on the same address, with another machine ID.
    let mut cfg = config(926);
    cfg.server.listen = addr_a;
    let a2 = start(cfg).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m = IdFields::decode(client.next_id().await.unwrap()).machine;
        if m == 926 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never went back to the first endpoint"
        );
        sleep(Duration::from_millis(20)).await;
    }
    assert!(client.stats().endpoints_revived >= 1);
    a2.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_that_is_not_issuing_is_skipped() {
    let (a, issuer_a) = start_with_issuer(config(924)).await;
    let b = start(config(925)).await;
    issuer_a.fence_for_test(LeaseState::Fenced, "lease lost (test)");
    let client = Client::connect(client_config(&[a.addr(), b.addr()]))
        .await
        .unwrap();
    for _ in 0..20 {
        assert_eq!(
            IdFields::decode(client.next_id().await.unwrap()).machine,
            925
        );
    }
    // The health check asks INFO, so a fenced server stays out of rotation.
    sleep(Duration::from_millis(300)).await;
    assert!(!client.endpoint_health()[0].1, "marked dead");
    issuer_a.resume_for_test(LeaseState::Held);
    let deadline = Instant::now() + Duration::from_secs(3);
    while IdFields::decode(client.next_id().await.unwrap()).machine != 924 {
        assert!(Instant::now() < deadline, "never came back");
        sleep(Duration::from_millis(20)).await;
    }
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_server_that_hangs_times_out_and_fails_over() {
    // Answers the handshake, then never anything else.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut s, _)) = listener.accept().await {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut hello = [0u8; 15];
            if s.read_exact(&mut hello).await.is_ok() {
                let mut out = bytes::BytesMut::new();
                vesta_server::proto::Response::HelloOk {
                    version: 1,
                    max_frame_bytes: 65536,
                    max_batch: 65536,
                    layout: None,
                }
                .encode(1, &vesta_server::proto::Dialect::v1(), &mut out);
                let _ = s.write_all(&out).await;
            }
            held.push(s);
        }
    });
    let b = start(config(925)).await;
    let mut cfg = client_config(&[hung, b.addr()]);
    cfg.request_timeout = Duration::from_millis(200);
    let client = Client::connect(cfg).await.unwrap();
    let t = Instant::now();
    let id = client.next_id().await.unwrap();
    assert_eq!(IdFields::decode(id).machine, 925);
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    assert!(client.stats().retries >= 1);
    b.shutdown().await.unwrap();
}

#[tokio::test]
async fn with_every_server_down_the_fallback_issues_embed_ids() {
    let a = start(config(924)).await;
    let addr = a.addr();
    a.kill().await;
    let mut cfg = client_config(&[addr]);
    let mut fallback = IssuerConfig::default();
    fallback.machine.id = Some(17);
    cfg.fallback = Some(fallback);
    let client = Client::connect(cfg).await.unwrap();
    let id = client.next_id().await.unwrap();
    let f = IdFields::decode(id);
    assert_eq!((f.machine, f.gen_method), (17, GenMethod::Embed));
    let b = client.next_ids(3000).await.unwrap();
    assert_eq!(b.len(), 3000);
    assert!(b.iter().all(|id| IdFields::decode(id).machine == 17));
    assert!(client.stats().fallback_calls >= 2);
    // Explain needs a server: no fallback for it.
    assert!(client.explain(id).await.is_err());
}

#[tokio::test]
async fn with_every_server_down_and_no_fallback_the_call_fails_in_budget() {
    let a = start(config(924)).await;
    let addr = a.addr();
    a.kill().await;
    let mut cfg = client_config(&[addr]);
    cfg.retry_budget = Duration::from_millis(300);
    let client = Client::connect(cfg).await.unwrap();
    let t = Instant::now();
    match client.next_id().await {
        Err(ClientError::Unavailable { attempts, last, .. }) => {
            assert!(attempts >= 2, "{attempts}");
            assert!(last.contains(&addr.to_string()), "{last}");
        }
        other => panic!("{other:?}"),
    }
    // Bounded by the request timeout and retry budget (200 + 300 ms); 10 s tells "never"
    // from "late" on a busy machine.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[tokio::test]
async fn prefetch_serves_ids_from_a_local_buffer() {
    let server = start(config(924)).await;
    let mut cfg = client_config(&[server.addr()]);
    cfg.prefetch = 1000;
    let client = Client::connect(cfg).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..2500 {
        ids.push(client.next_id().await.unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    // Three batches were fetched: three requests served, not 2500.
    assert_eq!(client.stats().served, 3);
    server.shutdown().await.unwrap();
}
