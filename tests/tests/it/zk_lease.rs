//! Leasing machine IDs from a real ZooKeeper: distinct IDs under concurrency, pool exhaustion,
//! reuse of released IDs, the start guard on a same-unit takeover and on a clock set back, the
//! digest ACL, what `zk ls` reads, and a lease moved to another machine ID (counted for alerts), and a static ID registered with
//! `--machine N --zk` refusing a second holder.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use vesta_core::{Clock, ManualClock};
use vesta_embed::lease::{ZkSettings, inspect};
use vesta_embed::{IssueError, Issuer, IssuerConfig, LeaseState, MachineSource, StartError};
use vesta_tests::zk::{ZkServer, zk_cli, zk_cli_script};

/// A leased-issuer config with test timings: 1.5 s sessions, 300 ms reports.
fn config(connect: &str, root: &str, pool_size: u64) -> IssuerConfig {
    let mut c = IssuerConfig::default();
    c.machine.source = MachineSource::Zookeeper;
    c.machine.server_pool_start = Some(pool_size);
    c.zookeeper.connect = connect.into();
    c.zookeeper.root = root.into();
    c.zookeeper.session_timeout_ms = 1500;
    c.zookeeper.connect_timeout_ms = 3000;
    c.zookeeper.report_interval_ms = 300;
    c.machine.start_guard_max_wait_ms = 3000;
    c
}

fn machine_of(id: u64) -> u64 {
    vesta_core::IdFields::decode(id).machine
}

#[test]
fn concurrent_leases_are_distinct_the_pool_runs_out_and_a_released_id_is_reused() {
    let zk = ZkServer::start();
    let connect = zk.connect();
    let barrier = Arc::new(Barrier::new(6));
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let (connect, barrier) = (connect.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                Issuer::start(config(&connect, "/vesta/concurrent", 4))
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut issuers = Vec::new();
    let mut exhausted = 0;
    for r in results {
        match r {
            Ok(i) => issuers.push(i),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("pool exhausted"), "{msg}");
                assert!(msg.contains("embed pool 0..=3"), "{msg}");
                exhausted += 1;
            }
        }
    }
    assert_eq!(issuers.len(), 4, "a pool of 4 IDs serves 4 issuers");
    assert_eq!(exhausted, 2);
    let mut machines: Vec<u64> = issuers.iter().map(|i| i.status().machine).collect();
    machines.sort_unstable();
    assert_eq!(machines, vec![0, 1, 2, 3]);
    for i in &issuers {
        assert_eq!(i.status().lease.state, LeaseState::Held);
        let id = i.next_id().unwrap();
        assert_eq!(machine_of(id), i.status().machine);
    }

    // `zk ls` sees four holders, each with a mark.
    let settings = ZkSettings::from_config(&config(&connect, "/vesta/concurrent", 4)).unwrap();
    let rows = inspect(&settings).unwrap();
    assert_eq!(rows.iter().filter(|r| r.held).count(), 4);
    assert!(
        rows.iter()
            .all(|r| r.mark.as_ref().is_some_and(|m| !m.clean))
    );
    let pid = std::process::id();
    assert!(rows.iter().all(|r| r.claim.as_ref().unwrap().pid == pid));

    // Release machine 2: it is free at once (no session timeout) and the next issuer gets it.
    let pos = issuers
        .iter()
        .position(|i| i.status().machine == 2)
        .unwrap();
    let released = issuers.remove(pos);
    released.shutdown().unwrap();
    assert_eq!(released.status().lease.state, LeaseState::Released);
    assert!(matches!(
        released.next_id(),
        Err(IssueError::Unavailable(reason)) if reason.contains("shut down")
    ));
    let rows = inspect(&settings).unwrap();
    let row2 = rows.iter().find(|r| r.machine == 2).unwrap();
    assert!(!row2.held);
    assert!(row2.mark.as_ref().unwrap().clean, "final mark is clean");
    let again = Issuer::start(config(&connect, "/vesta/concurrent", 4)).unwrap();
    assert_eq!(again.status().machine, 2);
    assert_eq!(machine_of(again.next_id().unwrap()), 2);
}

#[test]
fn same_unit_takeover_after_a_clean_release_never_duplicates() {
    let zk = ZkServer::start();
    // Pool of one ID: every issuer takes over machine 0 from the previous one.
    let c = config(&zk.connect(), "/vesta/takeover", 1);
    let mut last_id = 0;
    for round in 0..3 {
        let issuer = Issuer::start(c.clone()).unwrap();
        assert_eq!(issuer.status().machine, 0);
        let first = issuer.next_id().unwrap();
        assert!(
            first > last_id,
            "round {round}: first ID {first} not above the previous holder's last {last_id}"
        );
        if last_id != 0 {
            let prev = vesta_core::IdFields::decode(last_id).time;
            let now = vesta_core::IdFields::decode(first).time;
            assert!(now > prev, "the successor starts in a later second");
        }
        // Use up a good part of the current second, then hand over at once.
        let batch = issuer.next_ids(200_000).unwrap();
        last_id = batch.iter().last().unwrap();
        issuer.shutdown().unwrap();
    }
}

#[test]
fn restart_with_the_clock_set_back_waits_or_refuses_never_duplicates() {
    let zk = ZkServer::start();
    let c = config(&zk.connect(), "/vesta/clockback", 1);

    let clock_a = Arc::new(ManualClock::new(
        vesta_embed::SystemClock::precise().now_ms(),
    ));
    let a = Issuer::start_with_clock(c.clone(), clock_a.clone()).unwrap();
    // A fresh ID has no mark: its start waited past now + the rollback tolerance.
    let t0 = clock_a.now_ms();
    let a_ids = a.next_ids(1000).unwrap().to_vec();
    // Within the lease window (1 s) of the last confirmation, which used this clock.
    clock_a.advance(900);
    let a_last = a.next_id().unwrap();
    a.shutdown().unwrap();

    // 1.4 s behind A's last ID: within the 3 s the guard may wait, so it waits, then issues above.
    let clock_b = Arc::new(ManualClock::new(t0 - 500));
    let b = Issuer::start_with_clock(c.clone(), clock_b.clone()).unwrap();
    assert!(clock_b.waits() >= 1, "the start guard waited for the clock");
    assert!(clock_b.now_ms() > t0 + 900, "it waited past A's last unit");
    let b_first = b.next_id().unwrap();
    assert!(b_first > a_last);
    assert!(!a_ids.contains(&b_first));
    let b_last = b.next_ids(10).unwrap().to_vec()[9];
    let b_now = clock_b.now_ms();
    b.shutdown().unwrap();

    // A minute behind: refused, naming both times, and the ID is released again.
    let clock_c = Arc::new(ManualClock::new(b_now - 60_000));
    let err = Issuer::start_with_clock(c.clone(), clock_c.clone()).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, StartError::ClockBehindMark { machine: 0, .. }),
        "{msg}"
    );
    assert!(
        msg.contains(&vesta_core::Epoch::rfc3339(b_now - 60_000)),
        "{msg}"
    );
    assert!(msg.contains("promised up to"), "{msg}");
    assert_eq!(clock_c.waits(), 0, "no waiting when the gap is too large");

    // The refused start left the ID free: a sane clock takes it and issues above B.
    let d = Issuer::start_with_clock(c, Arc::new(ManualClock::new(b_now))).unwrap();
    assert!(d.next_id().unwrap() > b_last);
}

#[test]
fn digest_acl_keeps_other_clients_out() {
    let zk = ZkServer::start();
    let mut c = config(&zk.connect(), "/vesta/acl", 4);
    c.zookeeper.auth = Some("vesta:s3cret".into());
    c.zookeeper.instance = Some("acl-test".into());
    let issuer = Issuer::start(c.clone()).unwrap();
    issuer.next_id().unwrap();

    let with_auth = ZkSettings::from_config(&c).unwrap();
    let rows = inspect(&with_auth).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].claim.as_ref().unwrap().instance.as_deref(),
        Some("acl-test")
    );

    let mut wrong = c.clone();
    wrong.zookeeper.auth = Some("vesta:wrong".into());
    let err = inspect(&ZkSettings::from_config(&wrong).unwrap()).unwrap_err();
    assert!(err.to_string().contains("not authorized"), "{err}");

    // An issuer with the wrong password cannot lease under the protected root.
    let err = Issuer::start(wrong).unwrap_err().to_string();
    assert!(err.contains("not authorized"), "{err}");
}

#[test]
fn zookeeper_down_at_start_fails_closed_within_the_connect_timeout() {
    let mut zk = ZkServer::start();
    let connect = zk.connect();
    zk.stop();
    let mut c = config(&connect, "/vesta/down", 4);
    c.zookeeper.connect_timeout_ms = 1000;
    let start = Instant::now();
    let err = Issuer::start(c).unwrap_err().to_string();
    let took = start.elapsed();
    assert!(err.contains("cannot reach ZooKeeper"), "{err}");
    assert!(err.contains(&connect), "{err}");
    assert!(err.contains("within 1000 ms"), "{err}");
    // The connect timeout (1 s), with 5 s of margin for a busy machine: "within", not "never".
    assert!(took < Duration::from_secs(6), "took {took:?}");
}

#[test]
fn a_claim_deleted_by_hand_fences_and_re_leases() {
    let zk = ZkServer::start();
    let issuer = Issuer::start(config(&zk.connect(), "/vesta/manual", 4)).unwrap();
    assert_eq!(issuer.status().machine, 0);
    let before = issuer.next_id().unwrap();
    let out = zk_cli(&zk.connect(), "delete /vesta/manual/machines/0");
    assert!(!out.contains("Node does not exist"), "{out}");
    let start = Instant::now();
    while issuer.status().lease.reconnects == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            issuer.status().lease
        );
        thread::sleep(Duration::from_millis(20));
    }
    let status = issuer.status();
    assert_eq!(status.lease.state, LeaseState::Held);
    assert_eq!(
        status.lease.fence_events, 1,
        "it stopped issuing while re-leasing"
    );
    let after = issuer.next_id().unwrap();
    assert!(after > before);
    // It holds a real claim again, in a new session.
    let rows =
        inspect(&ZkSettings::from_config(&config(&zk.connect(), "/vesta/manual", 4)).unwrap())
            .unwrap();
    let row = rows.iter().find(|r| r.machine == status.machine).unwrap();
    assert!(row.held);
}

/// A beat whose answer was lost still moved the mark's version: the clean shutdown finds its
/// own claim and writes the final mark over it, instead of reporting an unclean release (found
/// by the soak when ZooKeeper's leader was killed just before a stop).
#[test]
fn the_final_mark_is_written_over_a_mark_version_moved_behind_the_holders_back() {
    let zk = ZkServer::start();
    let mut c = config(&zk.connect(), "/vesta/finalmark", 4);
    // Long beats, so nothing but the shutdown writes the mark after the tampering.
    c.zookeeper.session_timeout_ms = 30_000;
    c.zookeeper.report_interval_ms = 20_000;
    let settings = ZkSettings::from_config(&c).unwrap();
    let issuer = Issuer::start(c).unwrap();
    let machine = issuer.status().machine;
    let last = issuer.next_id().unwrap();
    // Rewrite the mark with its own contents: same data, next version.
    let path = format!("/vesta/finalmark/last/{machine}");
    let rows = inspect(&settings).unwrap();
    let mark = rows
        .iter()
        .find(|r| r.machine == machine)
        .unwrap()
        .mark
        .clone()
        .unwrap();
    let json = serde_json::to_string(&mark).unwrap();
    // Quoted: the mark names its layout in words, spaces included.
    let out = zk_cli_script(&zk.connect(), &[&format!("set {path} '{json}'")]);
    assert!(!out.contains("Exception"), "{out}");
    issuer.shutdown().expect("a clean release");
    let rows = inspect(&settings).unwrap();
    let row = rows.iter().find(|r| r.machine == machine).unwrap();
    assert!(!row.held, "the claim is deleted");
    let mark = row.mark.as_ref().unwrap();
    assert!(mark.clean, "the final mark is the clean one: {mark:?}");
    assert_eq!(mark.last_time, vesta_core::IdFields::decode(last).time);
}

/// Someone else takes machine 0's claim (deleted and re-created, then written, within
/// milliseconds, as another holder would): the issuer's next beat finds the claim is not its
/// own, it fences, re-leases under another machine ID, and counts the move
/// (`vesta_lease_machine_changes_total`, alerted on); its IDs carry the new machine.
#[test]
fn a_claim_taken_while_away_moves_the_lease_to_another_id_and_counts_it() {
    let zk = ZkServer::start();
    let issuer = Issuer::start(config(&zk.connect(), "/vesta/moved", 4)).unwrap();
    assert_eq!(issuer.status().machine, 0);
    let before = issuer.next_id().unwrap();
    let out = zk_cli_script(
        &zk.connect(),
        &[
            "delete /vesta/moved/machines/0",
            "create /vesta/moved/machines/0 someone-else",
            "set /vesta/moved/machines/0 someone-else",
        ],
    );
    assert!(out.contains("Created /vesta/moved/machines/0"), "{out}");
    let start = Instant::now();
    // The move is counted while taking the new ID over, the reconnect once that is done.
    while issuer.status().lease.machine_changes == 0 || issuer.status().lease.reconnects == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            issuer.status().lease
        );
        thread::sleep(Duration::from_millis(20));
    }
    let status = issuer.status();
    assert_eq!(status.lease.machine_changes, 1, "{:?}", status.lease);
    assert_eq!(status.machine, 1, "the lowest free ID");
    assert_eq!(status.lease.state, LeaseState::Held);
    let after = issuer.next_id().unwrap();
    assert_eq!(machine_of(after), 1);
    assert!(after > before);
}

/// Leases work for every node width the layouts allow: a custom 5-bit node (pool exhaustion at
/// its small embed pool) and UidGenerator's 22-bit worker (a server's lease above the 10 bits
/// Vesta's layouts have), each ID carrying the leased machine in its own node field.
#[test]
fn leases_work_for_node_fields_from_5_to_22_bits() {
    use vesta_core::{Explanation, FieldKind, FieldSpec, LayoutSpec, Preset};
    use vesta_embed::config::LayoutChoice;

    let zk = ZkServer::start();
    let five = LayoutSpec {
        name: "five".into(),
        unit_ms: 1,
        epoch: vesta_core::Epoch::from_unix_ms(1_600_000_000_000),
        signed: true,
        fields: vec![
            FieldSpec::new("time", FieldKind::Time, 45),
            FieldSpec::new("node", FieldKind::Node, 5),
            FieldSpec::new("seq", FieldKind::Seq, 13),
        ],
    };
    let mut c = config(&zk.connect(), "/vesta/five", 2);
    c.id.layout = LayoutChoice::Custom(five.clone());
    let a = Issuer::start(c.clone()).unwrap();
    let b = Issuer::start(c.clone()).unwrap();
    let err = Issuer::start(c.clone()).unwrap_err().to_string();
    assert!(
        err.contains("pool exhausted") && err.contains("embed pool 0..=1"),
        "{err}"
    );
    let layout = five.build().unwrap();
    for i in [&a, &b] {
        let id = i.next_id().unwrap();
        assert_eq!(Explanation::new(id, &layout).node(), i.status().machine);
    }
    assert_ne!(a.status().machine, b.status().machine);

    // A server (genMethod server) in UidGenerator's layout leases from its 22-bit server pool.
    // UidGenerator's pool is the whole field; split here so the server leases above 10 bits.
    let mut c = config(&zk.connect(), "/vesta/uid", 0);
    c.machine.server_pool_start = Some(3_784_704);
    c.id.layout = LayoutChoice::Preset(Preset::UidGenerator);
    c.id.epoch = Some("2024-01-01T00:00:00+08:00".parse().unwrap());
    c.gen_method = vesta_core::GenMethod::Server;
    let server = Issuer::start(c.clone()).unwrap();
    assert_eq!(
        server.status().machine,
        3_784_704,
        "the first of the 22-bit server pool"
    );
    let id = server.next_id().unwrap();
    let x = Explanation::new(id, server.layout());
    assert_eq!(x.value("workerId"), Some(3_784_704));
    let settings = ZkSettings::from_config(&c).unwrap();
    let rows = inspect(&settings).unwrap();
    assert!(
        rows.iter().any(|r| r.machine == 3_784_704 && r.held),
        "{rows:?}"
    );
    server.shutdown().unwrap();
}

#[test]
fn a_duplicated_static_id_is_refused() {
    // `--machine N --zk CONNECT` registers the static ID: a copied config is refused at start.
    let zk = ZkServer::start();
    vesta_tests::lease::a_duplicated_static_id_is_refused(
        &["--zk", &zk.connect()],
        &["under /vesta/default/machines"],
    );
}

#[test]
fn a_mark_of_another_epoch_is_refused_until_retired() {
    let zk = ZkServer::start();
    let connect = zk.connect();
    // `config(&connect, "/vesta/epochs", 1)` as a file, which `vesta gen --config` reads too.
    let toml = format!(
        "[machine]\nsource = \"zookeeper\"\nserver_pool_start = 1\n\
         start_guard_max_wait_ms = 3000\n[zookeeper]\nconnect = \"{connect}\"\n\
         root = \"/vesta/epochs\"\nsession_timeout_ms = 1500\nconnect_timeout_ms = 3000\n\
         report_interval_ms = 300\n"
    );
    assert_eq!(
        IssuerConfig::from_toml_str(&toml).unwrap(),
        config(&connect, "/vesta/epochs", 1)
    );
    vesta_tests::lease::a_mark_of_another_epoch_is_refused_until_retired(
        &toml,
        0,
        vesta_core::MarkStore::ZooKeeper {
            connect: connect.clone(),
            root: "/vesta/epochs".into(),
        },
        &["--zk", &connect, "--root", "/vesta/epochs"],
        "ZooKeeper /vesta/epochs/last/0",
    );
}
