//! How long an issuer takes to start with each machine-ID source on loopback: `Issuer::start`
//! until the first ID can be issued (connect, claim, first promise written), then a clean
//! shutdown (not timed). Each start claims in a fresh scope or root, so no start guard waits
//! for an earlier holder's mark (that wait is the design's, up to one time unit). Run:
//! `cargo bench -p vesta-bench --bench lease_start` (env: `STARTS` per source, default 30).
//!
//! The stores are real servers started by the test harness (`vesta-tests`): ZooKeeper,
//! PostgreSQL, MariaDB, etcd; SQLite is a file in a temporary directory.

use std::time::{Duration, Instant};

use vesta_embed::{Issuer, IssuerConfig, MachineSource};
use vesta_tests::db::{MariaDb, Postgres};
use vesta_tests::etcd::Etcd;
use vesta_tests::zk::ZkServer;

fn starts() -> usize {
    std::env::var("STARTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

/// Times `starts()` starts of the configs `make(i)` gives, and prints median and max.
fn measure(name: &str, make: impl Fn(usize) -> IssuerConfig) {
    let mut times: Vec<Duration> = (0..starts())
        .map(|i| {
            let config = make(i);
            let started = Instant::now();
            let issuer = Issuer::start(config).unwrap_or_else(|e| panic!("{name}: {e}"));
            issuer.next_id().unwrap();
            let took = started.elapsed();
            issuer.shutdown().unwrap();
            took
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    println!(
        "{name:<22} starts {:>3}  median {:>8.2} ms  max {:>8.2} ms",
        times.len(),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    );
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    println!(
        "lease start on loopback: Issuer::start until the first ID (debug of the stores' defaults)"
    );
    measure("static", |_| IssuerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    measure("static + state file", |i| {
        let mut c = IssuerConfig::default();
        c.machine.state_file = Some(dir.path().join(format!("machine{i}.state")));
        c
    });
    let zk = ZkServer::start();
    measure("zookeeper", |i| {
        let mut c = IssuerConfig::default();
        c.machine.source = MachineSource::Zookeeper;
        c.zookeeper.connect = zk.connect();
        c.zookeeper.root = format!("/bench/r{i}");
        c
    });
    let sqlite = format!("sqlite://{}", dir.path().join("lease.db").display());
    let pg = Postgres::start();
    let pg_url = pg.create_database("lease");
    let maria = MariaDb::start();
    let maria_url = maria.create_database("lease");
    for (name, url) in [
        ("sql: sqlite", sqlite),
        ("sql: postgresql", pg_url),
        ("sql: mariadb", maria_url),
    ] {
        measure(name, |i| {
            let mut c = IssuerConfig::default();
            c.machine.source = MachineSource::Sql;
            c.machine.db = Some(url.clone());
            c.machine.scope = format!("bench{i}");
            c
        });
    }
    let etcd = Etcd::start();
    measure("etcd", |i| {
        let mut c = IssuerConfig::default();
        c.machine.source = MachineSource::Etcd;
        c.etcd.endpoints = vec![etcd.url()];
        c.etcd.root = format!("/bench/r{i}");
        c
    });
}
