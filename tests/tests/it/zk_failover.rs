//! ZooKeeper failures under a running issuer: the whole service stopped past the session
//! timeout (fence, then resume with a valid lease), the ensemble leader killed (issuing goes
//! on), and the explicit `start_without_zookeeper` mode.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use vesta_embed::lease::{ZkSettings, inspect};
use vesta_embed::{IssueError, Issuer, IssuerConfig, LeaseState, MachineSource};
use vesta_tests::zk::{ZkEnsemble, ZkServer};

fn config(connect: &str, root: &str, pool_size: u64, session_ms: u64) -> IssuerConfig {
    let mut c = IssuerConfig::default();
    c.machine.source = MachineSource::Zookeeper;
    c.machine.server_pool_start = Some(pool_size);
    c.zookeeper.connect = connect.into();
    c.zookeeper.root = root.into();
    c.zookeeper.session_timeout_ms = session_ms;
    c.zookeeper.connect_timeout_ms = 3000;
    c.zookeeper.report_interval_ms = 300;
    c.machine.start_guard_max_wait_ms = 3000;
    c
}

/// Issues until `pred` holds for a result or `timeout` passes; returns the IDs and whether
/// `pred` matched.
fn issue_until(
    issuer: &Issuer,
    ids: &mut Vec<u64>,
    timeout: Duration,
    mut pred: impl FnMut(&Result<u64, IssueError>) -> bool,
) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        let r = issuer.next_id();
        if let Ok(id) = r {
            ids.push(id);
        }
        if pred(&r) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn zookeeper_stopped_past_the_session_timeout_fences_then_resumes_with_a_valid_lease() {
    let mut zk = ZkServer::start();
    // One ID in the pool: the issuer must get the same one back after its old session expires.
    let issuer = Issuer::start(config(&zk.connect(), "/vesta/outage", 1, 1500)).unwrap();
    let mut ids = Vec::new();
    assert!(
        issue_until(&issuer, &mut ids, Duration::from_millis(300), |_| false) || !ids.is_empty()
    );
    let before = *ids.last().unwrap();

    zk.stop();
    let stopped = Instant::now();
    let fenced = issue_until(&issuer, &mut ids, Duration::from_secs(5), Result::is_err);
    let fenced_after = stopped.elapsed();
    assert!(fenced, "the issuer kept issuing with ZooKeeper gone");
    // Fenced within the window (2/3 of 1.5 s) after the last confirmation, plus one beat.
    assert!(
        fenced_after < Duration::from_millis(1500),
        "fenced only after {fenced_after:?}"
    );
    let err = issuer.next_id().unwrap_err();
    assert!(
        matches!(&err, IssueError::Unavailable(r) if r.contains("not confirmed")),
        "{err}"
    );
    assert_eq!(issuer.status().lease.state, LeaseState::Fenced);
    let issued_while_up = ids.len();

    // Keep it down well past the session timeout: nothing is issued meanwhile.
    let down_until = stopped + Duration::from_millis(3500);
    while Instant::now() < down_until {
        assert!(issuer.next_id().is_err(), "issued while ZooKeeper was down");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ids.len(), issued_while_up);

    zk.restart();
    let resumed = issue_until(&issuer, &mut ids, Duration::from_secs(15), Result::is_ok);
    assert!(resumed, "no resume: {:?}", issuer.status().lease);
    let status = issuer.status();
    assert_eq!(status.lease.state, LeaseState::Held);
    assert_eq!(status.machine, 0);
    assert!(status.lease.fence_events >= 1);
    assert!(
        status.lease.reconnects >= 1,
        "a new session was needed: {:?}",
        status.lease
    );
    let after = *ids.last().unwrap();
    assert!(after > before);
    let unique: HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "duplicates across the outage");

    // The lease it holds now is real: ZooKeeper shows this process's claim on machine 0.
    let rows = inspect(
        &ZkSettings::from_config(&config(&zk.connect(), "/vesta/outage", 1, 1500)).unwrap(),
    )
    .unwrap();
    assert!(rows[0].held);
    assert_eq!(rows[0].claim.as_ref().unwrap().pid, std::process::id());
}

#[test]
fn ensemble_leader_killed_issuing_continues() {
    let mut ensemble = ZkEnsemble::start();
    let issuer = Issuer::start(config(&ensemble.connect(), "/vesta/ensemble", 4, 6000)).unwrap();
    let leader = ensemble
        .wait_leader(Duration::from_secs(20))
        .expect("a leader");
    let mut ids = Vec::new();
    let mut failures = 0;
    let start = Instant::now();
    let mut killed = false;
    while start.elapsed() < Duration::from_secs(6) {
        if !killed && start.elapsed() > Duration::from_millis(500) {
            ensemble.kill(leader);
            killed = true;
        }
        match issuer.next_id() {
            Ok(id) => ids.push(id),
            Err(_) => failures += 1,
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let new_leader = ensemble
        .wait_leader(Duration::from_secs(20))
        .expect("no new leader");
    assert_ne!(new_leader, leader);
    assert_eq!(failures, 0, "issuing stopped: {:?}", issuer.status().lease);
    let status = issuer.status();
    assert_eq!(status.lease.state, LeaseState::Held);
    assert_eq!(status.lease.fence_events, 0);
    assert_eq!(
        status.lease.reconnects, 0,
        "the session survived the election"
    );
    // Marks are still being written through the new leader.
    let confirmed = status.lease.confirmed_ms.unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert!(issuer.status().lease.confirmed_ms.unwrap() > confirmed);
    let unique: HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len());
}

#[test]
fn start_without_zookeeper_issues_from_a_recent_state_file_and_registers_later() {
    let mut zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(&zk.connect(), "/vesta/offline", 4, 1500);
    c.machine.state_file = Some(dir.path().join("issuer.state"));

    // A first run records machine 0 and its mark in the state file.
    let first = Issuer::start(c.clone()).unwrap();
    let first_ids = first.next_ids(1000).unwrap().to_vec();
    first.shutdown().unwrap();
    drop(first);

    zk.stop();
    // Fail closed by default...
    let err = Issuer::start(c.clone()).unwrap_err().to_string();
    assert!(err.contains("cannot reach ZooKeeper"), "{err}");
    // ...and start from the state file when asked to.
    c.zookeeper.start_without_zookeeper = true;
    c.zookeeper.connect_timeout_ms = 500;
    let offline = Issuer::start(c.clone()).unwrap();
    let status = offline.status();
    assert_eq!(status.machine, 0);
    assert_eq!(status.lease.state, LeaseState::Held);
    assert!(
        status
            .lease
            .note
            .as_deref()
            .unwrap()
            .contains("not registered")
    );
    let id = offline.next_id().unwrap();
    assert!(id > *first_ids.last().unwrap());
    assert!(!first_ids.contains(&id));

    // Without a state file the mode has nothing to start from, and says so.
    let mut no_file = c.clone();
    no_file.machine.state_file = Some(dir.path().join("missing.state"));
    let err = Issuer::start(no_file).unwrap_err().to_string();
    assert!(err.contains("holds no record yet"), "{err}");

    // ZooKeeper back: the issuer registers machine 0 and carries on.
    zk.restart();
    let start = Instant::now();
    while offline.status().lease.note.is_some() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = offline.status();
    assert_eq!(status.lease.note, None, "{:?}", status.lease);
    assert_eq!(status.lease.state, LeaseState::Held);
    assert!(offline.next_id().unwrap() > id);
    let rows = inspect(&ZkSettings::from_config(&c).unwrap()).unwrap();
    let row = rows.iter().find(|r| r.machine == 0).unwrap();
    assert!(row.held);
    assert_eq!(row.claim.as_ref().unwrap().pid, std::process::id());
}
