//! The real `vesta` binary as a TCP server and client: `serve tcp`, `gen --server`, `bench tcp`,
//! a SIGTERM that drains and releases, a SIGKILL under load that `gen --server` rides out with
//! failover (no duplicate, no missing ID), and a server leasing its machine ID from a real
//! ZooKeeper.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use vesta_core::{GenMethod, IdFields};
use vesta_tests::bin::{
    ServerChild, UsersCrate, assert_not_in_tree, run_printing_ids, vesta_cmd, vesta_command,
    vesta_fails, vesta_ok,
};
use vesta_tests::zk::ZkServer;

fn gen_ids(servers: &str, n: u64) -> Vec<u64> {
    let out = vesta_cmd(["gen", "--server", servers, "-n", &n.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

/// `vesta gen --server ... | head -1`: the printer thread meets the closed pipe, the fetching
/// stops, and the command exits 0 without a word, well before its 100M IDs.
fn gen_stops_quietly_when_its_reader_goes(addr: &str) {
    let mut child = vesta_cmd(["gen", "--server", addr, "-n", "100000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.trim().parse::<u64>().is_ok(), "{first:?}");
    let status = vesta_tests::bin::wait_exit(&mut child, Duration::from_secs(20));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success() && stderr.is_empty(), "{status}: {stderr}");
}

#[test]
fn serve_gen_bench_and_a_clean_sigterm() {
    let server = ServerChild::start("tcp", &["--machine", "931"], &[]);
    let ids = gen_ids(&server.addr, 5000);
    assert_eq!(ids.len(), 5000);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 5000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "printed out of order");
    gen_stops_quietly_when_its_reader_goes(&server.addr);
    for &id in &ids {
        let f = IdFields::decode(id);
        assert_eq!((f.machine, f.gen_method), (931, GenMethod::Server));
    }

    let out = vesta_cmd([
        "bench",
        "tcp",
        "--server",
        &server.addr,
        "-c",
        "2",
        "-p",
        "8",
        "-d",
        "500ms",
    ])
    .output()
    .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains("target     ") && report.contains("machine 931"),
        "{report}"
    );
    assert!(report.contains("errors     0"), "{report}");
    let line = report.lines().find(|l| l.starts_with("latency")).unwrap();
    assert!(
        line.contains("p50") && line.contains("p99.9") && line.contains("max"),
        "{line}"
    );

    let (status, rest) = server.terminate();
    assert!(status.success(), "{status:?}: {rest}");
    assert!(
        rest.contains("vesta-tcp stopped after") && rest.contains("; machine 931 released"),
        "{rest}"
    );
}

/// The client on its own (`vesta-server` without its `server` feature, with `tls`), built as
/// a user's service builds it: neither sqlx nor hyper in its tree, and it gets IDs from a real
/// `vesta serve tcp` and explains one.
#[test]
fn the_client_alone_builds_without_the_server_stack_and_gets_ids() {
    // The example's code (`vesta-server/examples/client_alone.rs`) as a user's service builds
    // it: its own crate, depending on the client as the example's doc says, without
    // vesta-server's dev-dependencies (`cargo run --example` would build them, SQLite and
    // proptest among them, and unify their features into the client's).
    let user = UsersCrate::new(
        "client-alone-user",
        r#"vesta-server = { path = "{root}/vesta-server", default-features = false, features = ["tls"] }
tokio = { version = "1", features = ["macros", "rt"] }"#,
        include_str!("../../../vesta-server/examples/client_alone.rs"),
    );
    let crates = user.dependency_tree(&[]);
    assert_not_in_tree(
        &crates,
        &[
            "sqlx",
            "sqlx-core",
            "hyper",
            "vesta-segment",
            "vesta-seq",
            "prometheus-client",
            "zookeeper-client",
        ],
    );

    let server = ServerChild::start("tcp", &[], &[]);
    let (out, ids) = run_printing_ids(user.cargo("run", &["--quiet", "--"]).arg(&server.addr));
    assert_eq!(ids.len(), 4, "{out}");
    for id in &ids {
        let f = IdFields::decode(*id);
        assert_eq!((f.gen_method, f.machine), (GenMethod::Server, 924), "{id}");
    }
    assert!(
        out.contains(&format!(
            "explained {}: machine 924 genMethod Some(Server)",
            ids[0]
        )),
        "{out}"
    );
}

#[test]
fn gen_rides_out_a_killed_server_without_duplicates() {
    let a = ServerChild::start("tcp", &["--machine", "940"], &[]);
    let b = ServerChild::start("tcp", &["--machine", "941"], &[]);
    let servers = format!("{},{}", a.addr, b.addr);
    // 3M IDs take about 3 s at one server's cap (2^20 per second): time to kill A midway.
    let n = 3_000_000u64;
    let mut child = vesta_command()
        .args(["gen", "--server", &servers, "-n", &n.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut ids = Vec::with_capacity(n as usize);
    let mut a = Some(a);
    for line in BufReader::new(stdout).lines() {
        ids.push(line.unwrap().parse::<u64>().unwrap());
        if ids.len() == 500_000
            && let Some(mut a) = a.take()
        {
            a.child.kill().unwrap(); // SIGKILL: no GOAWAY, connections just die
            a.child.wait().unwrap();
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "gen failed after the kill");
    assert_eq!(ids.len() as u64, n);
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len() as u64,
        n,
        "duplicates"
    );
    let machines: HashSet<u64> = ids.iter().map(|&id| IdFields::decode(id).machine).collect();
    assert_eq!(machines, HashSet::from([940, 941]));
    drop(b);
}

#[test]
fn a_server_leases_its_machine_id_from_zookeeper_and_gives_it_back() {
    let zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("server.toml");
    std::fs::write(
        &conf,
        "[machine]\nstart_guard_max_wait_ms = 3000\n\n\
         [zookeeper]\nroot = \"/vesta/tcp-test\"\nsession_timeout_ms = 2000\n\
         report_interval_ms = 300\n",
    )
    .unwrap();
    let server = ServerChild::start(
        "tcp",
        &["--config", conf.to_str().unwrap(), "--zk", &zk.connect()],
        &[],
    );
    // The lease may still be settling (start guard): the client retries UNAVAILABLE answers.
    let ids = gen_ids(&server.addr, 1000);
    let machine = IdFields::decode(ids[0]).machine;
    assert!((924..=1023).contains(&machine), "{machine}");
    assert!(
        ids.iter()
            .all(|&id| IdFields::decode(id).machine == machine)
    );

    let ls = |what: &str| {
        let out = vesta_cmd([
            "zk",
            "ls",
            "--zk",
            &zk.connect(),
            "--root",
            "/vesta/tcp-test",
            "--json",
        ])
        .output()
        .unwrap();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|row| row["machine"] == machine)
            .unwrap_or_else(|| panic!("{what}: machine {machine} not listed"))
    };
    assert_eq!(ls("while serving")["held"], true);
    // `vesta machine ls --zk` is the same list (one command for every leasing source).
    let zk_ls = vesta_ok(&[
        "zk",
        "ls",
        "--zk",
        &zk.connect(),
        "--root",
        "/vesta/tcp-test",
        "--json",
    ]);
    let machine_ls = vesta_ok(&[
        "machine",
        "ls",
        "--zk",
        &zk.connect(),
        "--root",
        "/vesta/tcp-test",
        "--json",
    ]);
    let held = |text: &str| -> Vec<(u64, bool)> {
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|r| (r["machine"].as_u64().unwrap(), r["held"].as_bool().unwrap()))
            .collect()
    };
    assert_eq!(held(&machine_ls), held(&zk_ls));
    vesta_fails(
        &[
            "machine",
            "ls",
            "--machine-db",
            "sqlite://x.db",
            "--root",
            "/v",
        ],
        &["--root applies to --etcd or --zk leases"],
    );
    let (status, rest) = server.terminate();
    assert!(status.success(), "{status:?}: {rest}");
    assert_eq!(
        ls("after SIGTERM")["held"],
        false,
        "the lease was not released"
    );
}
