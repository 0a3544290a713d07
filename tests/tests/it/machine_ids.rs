//! Servers and embedded issuers of k machine IDs (`[machine] ids`, `--machine-ids`), as an
//! operator runs them:
//!
//! - a server of a static run of k issues from every one, each ID unique, increasing per
//!   machine ID and explaining to one of the k; its startup line, `/healthz`, `/metrics` and
//!   the console's status page show all k (and TCP `INFO`); a clean stop releases all k;
//! - a run past the pool, and a second server on an ID of a running run, are refused in one
//!   line;
//! - a SIGKILLed server of k static IDs with state files restarts above each ID's own mark;
//! - k leases from each leasing source (SQLite, etcd, ZooKeeper): k distinct IDs, each listed
//!   by `vesta machine ls` under a holder of its own; an issuer whose k the pool cannot hold
//!   any more is refused and gives back what it got;
//! - a SIGKILLed server of k leases restarts at once on k other IDs (the dead leases live on);
//! - `vesta gen --machine-ids K`, as a script runs it: every line one new ID of one of the K,
//!   increasing per machine ID, `vesta explain` agreeing; a second run goes on from each ID's
//!   own state file; a K the embed pool cannot hold is refused in one line.

use std::collections::{BTreeMap, HashSet};

use vesta_core::IdFields;
use vesta_embed::{Issuer, IssuerConfig, MachineSource};
use vesta_tests::bin::{ServerChild, fails_in_one_line, http, vesta_cmd, vesta_ok};

fn machine_of(id: u64) -> u64 {
    IdFields::decode(id).machine
}

/// The IDs of a `/genids?count=N` answer.
fn genids(server: &ServerChild, n: u64) -> Vec<u64> {
    let (status, body) = http(&server.addr, "GET", &format!("/genids?count={n}"));
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().parse().unwrap())
        .collect()
}

/// Every ID new, of one of `machines`, above the last one of its machine ID in `last`.
fn check_ids(
    ids: &[u64],
    machines: &[u64],
    seen: &mut HashSet<u64>,
    last: &mut BTreeMap<u64, u64>,
) {
    for &id in ids {
        assert!(seen.insert(id), "{id} issued twice");
        let m = machine_of(id);
        assert!(
            machines.contains(&m),
            "{id} explains to machine {m}, not one of {machines:?}"
        );
        let before = last.insert(m, id).unwrap_or(0);
        assert!(id > before, "machine {m}: {id} after {before}");
    }
}

#[test]
fn a_server_of_k_static_ids_issues_from_each_and_shows_all_k() {
    let server = ServerChild::start(
        "rest",
        &["--machine", "1000", "--machine-ids", "3", "--console"],
        &[],
    );
    assert!(
        server
            .startup
            .contains("(machines 1000..=1002, genMethod rest"),
        "{}",
        server.startup
    );
    let (mut seen, mut last) = (HashSet::new(), BTreeMap::new());
    // A batch larger than one machine ID's unit (1,024 a millisecond) takes from the others.
    for _ in 0..50 {
        check_ids(
            &genids(&server, 3_000),
            &[1000, 1001, 1002],
            &mut seen,
            &mut last,
        );
        if last.len() == 3 {
            break;
        }
    }
    assert_eq!(last.len(), 3, "every machine ID issued: {last:?}");
    let (status, health) = http(&server.addr, "GET", "/healthz");
    assert_eq!(status, 200, "{health}");
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    let listed: Vec<u64> = health["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["machine"].as_u64().unwrap())
        .collect();
    assert_eq!(listed, [1000, 1001, 1002], "{health}");
    let (_, metrics) = http(&server.addr, "GET", "/metrics");
    assert!(metrics.contains("\nvesta_machine_ids 3\n"), "{metrics}");
    for m in [1000, 1001, 1002] {
        let line = format!("vesta_machine_issuing{{machine=\"{m}\"}} 1");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    let (status, page) = http(&server.addr, "GET", "/ui/status");
    assert_eq!(status, 200);
    assert!(
        page.contains("3 (1000 static, 1001 static, 1002 static)"),
        "{page}"
    );
    let rest = server.stop_cleanly();
    assert!(rest.contains("machines 1000..=1002 released"), "{rest}");
}

#[test]
fn a_run_past_the_pool_or_over_a_held_id_is_refused_in_one_line() {
    fails_in_one_line(
        &mut vesta_cmd([
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--machine",
            "1022",
            "--machine-ids",
            "4",
        ]),
        &["machine.ids 4 from machine 1022 needs 1022..=1025, past the server pool 924..=1023"],
    );
    fails_in_one_line(
        &mut vesta_cmd([
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--machine-ids",
            "0",
        ]),
        &["machine.ids 0 is out of range: allowed 1..=100"],
    );
    // Two servers on one host: the second's run overlaps the first's at 932.
    let host = tempfile::tempdir().unwrap();
    let hold_dir = host.path().to_str().unwrap();
    let first = ServerChild::start(
        "tcp",
        &["--machine", "930", "--machine-ids", "4"],
        &[("VESTA_HOLD_DIR", hold_dir)],
    );
    fails_in_one_line(
        vesta_cmd([
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--type",
            "min-granularity",
            "--machine",
            "932",
            "--machine-ids",
            "2",
        ])
        .env("VESTA_HOLD_DIR", hold_dir),
        &["machine 932 of vesta min-granularity", "is held by pid"],
    );
    // Its TCP `INFO` (protocol version 3) names all four, each issuing.
    let info = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let config = vesta_server::ClientConfig::new([first.addr.clone()]);
        let client = vesta_server::Client::connect(config).await.unwrap();
        client.info().await.unwrap()
    });
    let ids: Vec<u32> = info.issuing_machines().collect();
    assert_eq!((info.machine, ids), (930, vec![930, 931, 932, 933]));
    // Beside it, the next run starts.
    let second = ServerChild::start(
        "tcp",
        &["--machine", "934", "--machine-ids", "2"],
        &[("VESTA_HOLD_DIR", hold_dir)],
    );
    assert!(
        second.startup.contains("machines 934..=935"),
        "{}",
        second.startup
    );
    second.stop_cleanly();
    first.stop_cleanly();
}

/// The IDs `vesta gen ARGS` printed, one a line, in its own state and hold directories.
fn gen_ids(args: &[&str], host: &std::path::Path, state: &std::path::Path) -> Vec<u64> {
    let out = vesta_cmd(["gen"].iter().chain(args))
        .env("VESTA_HOLD_DIR", host)
        .env("XDG_STATE_HOME", state)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{stderr}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

#[test]
fn vesta_gen_issues_from_k_machine_ids_as_a_script_sees_it() {
    let (host, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // 1024 IDs a millisecond per machine ID: 20,000 take several units of each of the three.
    let args = ["-n", "20000", "--machine", "500", "--machine-ids", "3"];
    let args = [&args[..], &["--type", "min-granularity"]].concat();
    let (mut seen, mut last) = (HashSet::new(), BTreeMap::new());
    for run in 0..2 {
        let ids = gen_ids(&args, host.path(), state.path());
        assert_eq!(ids.len(), 20_000, "run {run}");
        let before = last.clone();
        check_ids(&ids, &[500, 501, 502], &mut seen, &mut last);
        assert_eq!(last.len(), 3, "run {run}: all three issued: {last:?}");
        assert!(
            before.iter().all(|(m, id)| *id < last[m]),
            "run {run} went on above the last: {before:?} {last:?}"
        );
    }
    // Each machine ID kept its own state file beside the first's.
    let files: Vec<String> = std::fs::read_dir(state.path().join("vesta"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".state"))
        .collect();
    for m in ["m500", "m501", "m502"] {
        assert!(files.iter().any(|f| f.contains(m)), "{m}: {files:?}");
    }
    // `vesta explain` reads each machine ID's last ID as the library does.
    for (m, id) in &last {
        let x = vesta_ok(&["explain", &id.to_string()]);
        assert!(x.contains("min-granularity") && x.contains("embed"), "{x}");
        let line = x.lines().find(|l| l.starts_with("machine")).unwrap();
        assert_eq!(
            line.split_whitespace().nth(1),
            Some(m.to_string().as_str()),
            "{x}"
        );
    }
    for (args, needle) in [
        (
            &["--machine-ids", "925"][..],
            "machine.ids 925 is more than the embed pool 0..=923 holds (924 machine IDs): \
             allowed 1..=256",
        ),
        (
            &["--machine", "922", "--machine-ids", "3"],
            "machine.ids 3 from machine 922 needs 922..=924, past the embed pool 0..=923",
        ),
    ] {
        fails_in_one_line(
            vesta_cmd(["gen"].iter().chain(args)).env("VESTA_HOLD_DIR", host.path()),
            &[needle],
        );
    }
}

#[test]
fn a_killed_server_of_k_ids_restarts_above_each_ids_own_mark() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rest.toml");
    let state = dir.path().join("vesta.state");
    std::fs::write(
        &conf,
        format!(
            "[machine]\nid = 1000\nids = 2\nstate_file = \"{}\"\nstate_file_interval_ms = 200\n\
             [id]\ntype = \"min-granularity\"\n",
            state.display()
        ),
    )
    .unwrap();
    let host = tempfile::tempdir().unwrap();
    let envs = [("VESTA_HOLD_DIR", host.path().to_str().unwrap())];
    let args = ["--config", conf.to_str().unwrap()];
    let (mut seen, mut last) = (HashSet::new(), BTreeMap::new());
    let mut first = ServerChild::start("rest", &args, &envs);
    for _ in 0..50 {
        check_ids(&genids(&first, 2_000), &[1000, 1001], &mut seen, &mut last);
        if last.len() == 2 {
            break;
        }
    }
    assert_eq!(last.len(), 2, "both issued: {last:?}");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(state.exists() && dir.path().join("vesta.m1001.state").exists());
    // Restarted at once: each machine ID starts above everything it issued before the kill.
    let second = ServerChild::start("rest", &args, &envs);
    let before = last.clone();
    for _ in 0..50 {
        check_ids(&genids(&second, 2_000), &[1000, 1001], &mut seen, &mut last);
        if last.iter().all(|(m, id)| before[m] < *id) {
            break;
        }
    }
    assert!(
        last.iter().all(|(m, id)| before[m] < *id),
        "{before:?} {last:?}"
    );
    second.stop_cleanly();
}

/// An embedded issuer of `k` (3) leases from a pool of four (0..=3) of `config`: k distinct
/// IDs, each listed by `vesta machine ls LS --json` under a holder of its own; a second issuer
/// of k finds too few left and is refused, giving back what it claimed (a third of `4 - k`
/// then starts); every ID unique and of one of its issuer's machine IDs.
fn k_leases(mut config: IssuerConfig, k: u64, ls: &[&str], full: &str) {
    config.machine.server_pool_start = Some(4);
    config.machine.start_guard_max_wait_ms = 3_000;
    config.machine.ids = k;
    let first = Issuer::start(config.clone()).unwrap();
    let mine: Vec<u64> = first.status().machines.iter().map(|m| m.machine).collect();
    assert_eq!(
        mine.iter().collect::<HashSet<_>>().len(),
        k as usize,
        "{mine:?}"
    );
    let listed = vesta_ok(&[&["machine", "ls"], ls, &["--json"]].concat());
    let holders: HashSet<&str> = listed
        .lines()
        .filter(|l| {
            mine.iter()
                .any(|m| l.contains(&format!("\"machine\":{m},")))
        })
        .filter_map(|l| l.split("\"holder\":\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(
        holders.len(),
        k as usize,
        "a holder per machine ID: {listed}"
    );
    let err = Issuer::start(config.clone()).unwrap_err().to_string();
    assert!(err.contains(full), "{err}");
    config.machine.ids = 4 - k;
    let third = Issuer::start(config).expect("what the refused one claimed was given back");
    let theirs: Vec<u64> = third.status().machines.iter().map(|m| m.machine).collect();
    let mut seen = HashSet::new();
    for (issuer, machines) in [(&first, &mine), (&third, &theirs)] {
        for id in issuer.next_ids(5_000).unwrap().iter() {
            assert!(seen.insert(id), "{id} issued twice");
            assert!(machines.contains(&machine_of(id)), "{id} of {machines:?}");
        }
    }
    first.shutdown().unwrap();
    third.shutdown().unwrap();
}

#[test]
fn k_leases_from_sqlite_and_a_killed_server_restarts_on_k_others() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("m.db").display());
    let mut c = IssuerConfig::default();
    c.machine.source = MachineSource::Sql;
    c.machine.db = Some(url.clone());
    c.machine.lease_ms = 6_000;
    k_leases(
        c,
        3,
        &["--machine-db", &url],
        "every machine ID of the embed pool 0..=3 in scope \"default\" is held",
    );
    // A server of 2 leases, SIGKILLed: its leases live on, so a restart takes 2 others.
    let args = ["--machine-db", url.as_str(), "--machine-ids", "2"];
    let mut dead = ServerChild::start("rest", &args, &[]);
    let (mut seen, mut last) = (HashSet::new(), BTreeMap::new());
    let ids = genids(&dead, 3_000);
    let dead_machines: HashSet<u64> = ids.iter().map(|&id| machine_of(id)).collect();
    check_ids(&ids, &[924, 925], &mut seen, &mut last);
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let second = ServerChild::start("rest", &args, &[]);
    assert!(
        second.startup.contains("machines 926..=927"),
        "{}",
        second.startup
    );
    check_ids(&genids(&second, 3_000), &[926, 927], &mut seen, &mut last);
    assert!(dead_machines.iter().all(|m| [924, 925].contains(m)));
    let listed = vesta_ok(&["machine", "ls", "--machine-db", &url]);
    // The embedded issuers' four, released, and the servers' four, leased.
    assert!(listed.contains(": 8 machine IDs, 4 leased"), "{listed}");
    second.stop_cleanly();
}

#[test]
fn k_leases_from_etcd() {
    let etcd = vesta_tests::etcd::Etcd::start();
    let url = etcd.url();
    let mut c = IssuerConfig::default();
    c.machine.source = MachineSource::Etcd;
    c.etcd.endpoints = vec![url.clone()];
    c.etcd.root = "/vesta/k".into();
    c.etcd.ttl_ms = 6_000;
    c.etcd.timeout_ms = 3_000;
    k_leases(
        c,
        3,
        &["--etcd", &url, "--root", "/vesta/k"],
        "every machine ID of the embed pool 0..=3 under /vesta/k is held",
    );
}

#[test]
fn k_leases_from_zookeeper() {
    let zk = vesta_tests::zk::ZkServer::start();
    let connect = zk.connect();
    let mut c = IssuerConfig::default();
    c.machine.source = MachineSource::Zookeeper;
    c.zookeeper.connect = connect.clone();
    c.zookeeper.root = "/vesta/k".into();
    c.zookeeper.session_timeout_ms = 3_000;
    c.zookeeper.connect_timeout_ms = 3_000;
    k_leases(c, 3, &["--zk", &connect, "--root", "/vesta/k"], "0..=3");
}
