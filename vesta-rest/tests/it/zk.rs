//! The REST server with its machine ID leased from a real ZooKeeper (Debian's package, via the
//! vesta-tests harness): 503 while acquiring, 200 once held, and the ID given back on shutdown.

use crate::common;

use std::time::{Duration, Instant};

use common::{Client, Reply};
use vesta_core::{GenMethod, IdFields};
use vesta_embed::MachineSource;
use vesta_rest::{RestConfig, RestServer};
use vesta_tests::zk::ZkServer;

fn config(connect: &str) -> RestConfig {
    let mut c = RestConfig::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.machine.source = MachineSource::Zookeeper;
    c.zookeeper.connect = connect.to_owned();
    c.zookeeper.root = "/vesta/rest-test".into();
    c.zookeeper.session_timeout_ms = 4_000;
    c
}

/// Polls `/healthz` until it answers 200 (the lease is held), within 30 s.
async fn wait_healthy(c: &Client) -> Reply {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = c.get("/healthz").await;
        if r.status == 200 {
            return r;
        }
        assert_eq!(r.status, 503, "{r:?}");
        assert!(r.error().starts_with("not issuing: "), "{r:?}");
        assert!(Instant::now() < deadline, "lease not held in time: {r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_machine_id_is_served_then_given_back_on_shutdown() {
    let zk = ZkServer::start();
    let mut machines = Vec::new();
    for round in 0..2 {
        let server = RestServer::start(config(&zk.connect())).await.unwrap();
        let issuer = std::sync::Arc::clone(server.issuer());
        let c = Client::new(server.local_addr(), false);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async move {
            let _ = rx.await;
        }));
        let health = wait_healthy(&c).await.json();
        assert_eq!(health["lease"], "held", "round {round}: {health}");
        let machine = health["machine"].as_u64().unwrap();
        assert!((924..=1023).contains(&machine), "{machine}");
        let f = IdFields::decode(c.get("/genid").await.id());
        assert_eq!((f.machine, f.gen_method), (machine, GenMethod::Rest));
        let m = c.get("/metrics").await.body;
        assert_eq!(common::sample(&m, "vesta_lease_state{state=\"held\"}"), 1.0);
        tx.send(()).unwrap();
        let report = task.await.unwrap();
        assert_eq!(report.release_error, None, "round {round}");
        assert_eq!(issuer.status().lease.state.name(), "released");
        machines.push(machine);
    }
    // The first server's claim was deleted at shutdown, not left to expire with its session:
    // the second server got the same (lowest free) machine ID at once.
    assert_eq!(machines[0], machines[1]);
}
