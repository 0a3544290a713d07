//! The monitoring files against the real thing: Debian's Prometheus, started on a loopback port
//! with the shipped scrape example and alert rules, scrapes a real `vesta serve rest` and
//! `vesta serve tcp` (each run with its shipped /etc/vesta config, moved to loopback ports and a
//! temporary state file). Every series the alert rules and the dashboard read must be in
//! Prometheus with the labels they match on, every dashboard query must evaluate, every rule
//! must evaluate without error, and healthy servers must raise no alert. The REST server also
//! serves segment numbers from a SQLite `leaf_alloc` and leases its machine ID from the same
//! database, so the segment-mode and lease-pace series are checked too. A second test runs two
//! REST servers with one copied config and sees `VestaDuplicateMachineId` fire and resolve.
//! Bounded: 1 s scrapes, about ten seconds each; skipped with a note without Prometheus.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vesta_tests::bin::vesta_cmd;
use vesta_tests::deploy::{self, Selector, alert_rules, all_selectors, dashboard_queries};
use vesta_tests::prometheus::{self, Prometheus, encode};
use vesta_tests::zk::free_ports;

/// A `vesta serve` child on loopback; SIGTERM and a wait on drop.
struct Server {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `text` with `from` replaced by `to`, which must be there (so a change to a shipped file
/// that this test depends on is noticed, not silently skipped).
fn replace(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "expected {from:?} in\n{text}");
    text.replace(from, to)
}

/// Runs `vesta serve KIND` with the shipped config `deploy/etc/vesta/FILE`, its addresses
/// moved to `ports` on loopback, its suggested machine ID chosen and its state file moved to a
/// temporary directory.
/// `segment_db`, when given, turns segment mode on (the shipped `[segment]` section, uncommented)
/// and leases the machine ID from it (`source = "sql"`) instead of the static ID.
fn serve(kind: &str, file: &str, swaps: &[(&str, String)], segment_db: Option<&str>) -> Server {
    serve_on(kind, file, swaps, segment_db, false)
}

/// [`serve`], as if on a host of its own when `own_host`: its static machine ID held in a
/// hold directory of its own (`VESTA_HOLD_DIR`, its own kernel names too) instead of this
/// host's, where a second process with the same ID would be refused at start.
fn serve_on(
    kind: &str,
    file: &str,
    swaps: &[(&str, String)],
    segment_db: Option<&str>,
    own_host: bool,
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut text = deploy::read(&format!("deploy/etc/vesta/{file}"));
    for (from, to) in swaps {
        text = replace(&text, from, to);
    }
    if let Some(db) = segment_db {
        text = replace(&text, "# [segment]", "[segment]");
        text = replace(
            &text,
            "# db = \"postgres://vesta@db1.example:5432/ids\"",
            &format!("db = \"{db}\""),
        );
        if kind == "rest" {
            // Per-key sequences on the same database, for the vesta_seq_* series (and the
            // shipped cluster keys, below).
            text = replace(&text, "# [seq]", "[seq]");
            text = replace(
                &text,
                "# db = \"sqlite:///var/lib/vesta-rest/seq.db\"",
                &format!("db = \"{db}\""),
            );
            // A cluster of one, for the vesta_seq_cluster_* series.
            text = replace(&text, "# cluster = true", "cluster = true");
        }
    }
    let state = format!("/var/lib/vesta-{kind}/machine.state");
    if segment_db.is_some() {
        // Leased from the segment database instead, for the lease's pace series.
        text = replace(&text, "source = \"static\"", "source = \"sql\"");
        text = replace(&text, &format!("state_file = \"{state}\""), "");
    } else {
        // The shipped files carry no machine ID (each host chooses one): take the suggested one.
        text = replace(&text, "\n# id = ", "\nid = ");
        let state_here = dir.path().join("machine.state");
        text = replace(&text, &state, state_here.to_str().unwrap());
    }
    let config = dir.path().join(file);
    std::fs::write(&config, text).unwrap();
    let mut command = vesta_cmd(["serve", kind, "--config", config.to_str().unwrap()]);
    if own_host {
        command.env("VESTA_HOLD_DIR", dir.path());
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    stderr.read_line(&mut line).unwrap();
    // Keep reading: later lines (segment mode, shutdown) must not meet a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    assert!(
        line.starts_with(&format!("vesta-{kind} listening on")),
        "{line}"
    );
    Server { child, _dir: dir }
}

/// The shipped scrape example with 1 s scrapes and evaluations, reading the alert rules at
/// `rules`, scraping the REST servers `rest` and the TCP servers' metrics listeners `tcp` (the
/// example's own hosts, unreachable here, when empty).
fn scrape_config(rules: &std::path::Path, rest: &[&str], tcp: &[&str]) -> String {
    let targets = |addrs: &[&str]| {
        let quoted: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
        format!("[{}]", quoted.join(", "))
    };
    let mut config = deploy::read("deploy/prometheus/prometheus.example.yml");
    config = replace(
        &config,
        "/etc/prometheus/vesta.rules.yml",
        rules.to_str().unwrap(),
    );
    config = replace(&config, "scrape_interval: 15s", "scrape_interval: 1s");
    config = replace(
        &config,
        r#"["rest-1.example:8080", "rest-2.example:8080"]"#,
        &targets(rest),
    );
    if !tcp.is_empty() {
        config = replace(
            &config,
            r#"["tcp-1.example:9654", "tcp-2.example:9654"]"#,
            &targets(tcp),
        );
    }
    format!("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\n{config}")
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Polls `check` every 200 ms until it returns `Ok`, or panics with its last error after 20 s.
fn eventually<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match check() {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// The label names of the series of `metric` in Prometheus (empty if there is none).
fn label_names(p: &Prometheus, metric: &str) -> BTreeSet<String> {
    let series = p.api(&format!("/api/v1/series?match%5B%5D={}", encode(metric)));
    series
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s.as_object().unwrap().keys().cloned())
        .collect()
}

fn missing(p: &Prometheus, selectors: &[&Selector]) -> Vec<String> {
    selectors
        .iter()
        .filter_map(|s| {
            let names = label_names(p, &s.metric);
            if names.is_empty() {
                return Some(format!("{} (no series)", s.metric));
            }
            let absent: Vec<_> = s.labels.iter().filter(|l| !names.contains(*l)).collect();
            (!absent.is_empty()).then(|| format!("{} has no label {absent:?}", s.metric))
        })
        .collect()
}

#[test]
fn a_real_prometheus_finds_every_series_the_rules_and_the_dashboard_use() {
    let Some(binary) = prometheus::binary() else {
        eprintln!("SKIPPED: prometheus is not installed (Debian package prometheus)");
        return;
    };
    let ports = free_ports(3);
    let rest_addr = format!("127.0.0.1:{}", ports[0]);
    let (tcp_addr, tcp_metrics) = (
        format!("127.0.0.1:{}", ports[1]),
        format!("127.0.0.1:{}", ports[2]),
    );
    // A SQLite leaf_alloc with one tag, for the segment-mode series.
    let segments = tempfile::tempdir().unwrap();
    let segment_db = format!("sqlite://{}", segments.path().join("segments.db").display());
    for args in [
        vec!["segment", "init", "--db", &segment_db],
        vec![
            "segment",
            "create",
            "orders",
            "--step",
            "1000",
            "--db",
            &segment_db,
        ],
    ] {
        let out = vesta_cmd(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _rest = serve(
        "rest",
        "rest.toml",
        &[(
            "listen = \"0.0.0.0:8080\"",
            format!("listen = \"{rest_addr}\""),
        )],
        Some(&segment_db),
    );
    let _tcp = serve(
        "tcp",
        "tcp.toml",
        &[
            (
                "listen = \"0.0.0.0:7654\"",
                format!("listen = \"{tcp_addr}\""),
            ),
            (
                "metrics_listen = \"0.0.0.0:9654\"",
                format!("metrics_listen = \"{tcp_metrics}\""),
            ),
        ],
        None,
    );
    // Some traffic, so request series have samples beyond their zeros.
    assert!(http_get(&rest_addr, "/genids?count=3").starts_with("HTTP/1.1 200"));
    assert!(http_get(&rest_addr, "/segment/orders").starts_with("HTTP/1.1 200"));
    assert!(http_get(&rest_addr, "/seq/42").starts_with("HTTP/1.1 200"));
    let out = vesta_cmd(["gen", "--server", &tcp_addr, "-n", "3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The shipped scrape example, pointed at these servers and the shipped rules.
    let rules = deploy::path("deploy/prometheus/vesta.rules.yml");
    let config = scrape_config(&rules, &[&rest_addr], &[&tcp_metrics]);
    let p = Prometheus::start(&binary, &config);

    // Both targets up, with a few scrapes each (rates need two samples).
    eventually("three scrapes of both servers", || {
        let data = p.api(&format!(
            "/api/v1/query?query={}",
            encode("count_over_time(up{job=~\"vesta.*\"}[1m]) >= 3 and up == 1")
        ));
        let n = data["result"].as_array().unwrap().len();
        if n == 2 {
            Ok(())
        } else {
            Err(format!("{n} of 2 targets: {}", p.log()))
        }
    });

    let selectors = all_selectors();
    let (segment, core): (Vec<&Selector>, Vec<&Selector>) =
        selectors.iter().partition(|s| s.is_segment());
    assert!(core.len() > 20 && !segment.is_empty(), "{selectors:?}");
    let gaps = missing(&p, &core);
    assert!(gaps.is_empty(), "not in a real scrape: {gaps:#?}");
    let segment_gaps = missing(&p, &segment);
    assert!(
        segment_gaps.is_empty(),
        "segment series missing: {segment_gaps:#?}"
    );

    // Every dashboard query evaluates and has data (a 5xx filter may not).
    for (title, expr) in dashboard_queries() {
        let q = expr
            .replace("$__rate_interval", "1m")
            .replace("$job", "vesta.*")
            .replace("$instance", ".*");
        let data = p.api(&format!("/api/v1/query?query={}", encode(&q)));
        let empty = data["result"].as_array().unwrap().is_empty();
        let may_be_empty = q.contains("vesta_segment_") || q.contains(r#"status=~"5..""#);
        assert!(!empty || may_be_empty, "{title}: no data for {q}");
    }

    // Every rule evaluated without error, and healthy servers raise no alert.
    let names: BTreeSet<String> = alert_rules().into_iter().map(|r| r.name).collect();
    eventually("every rule evaluated", || {
        let groups = p.api("/api/v1/rules");
        let mut seen = BTreeSet::new();
        for g in groups["groups"].as_array().unwrap() {
            for r in g["rules"].as_array().unwrap() {
                let name = r["name"].as_str().unwrap().to_owned();
                assert_eq!(r["health"], "ok", "{name}: {r}");
                if r["lastEvaluation"]
                    .as_str()
                    .is_some_and(|t| !t.starts_with("0001"))
                {
                    seen.insert(name);
                }
            }
        }
        if seen == names {
            Ok(())
        } else {
            Err(format!("evaluated {seen:?} of {names:?}"))
        }
    });
    let alerts = p.api("/api/v1/alerts");
    // The one alert a healthy server may raise here is the truth about this machine: a
    // kernel that marks its clock unsynchronised (no time service in a test VM).
    let host_unsynced = vesta_embed::kernel_sync().is_some_and(|s| !s.synchronised);
    let raised: Vec<&serde_json::Value> = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| !(host_unsynced && a["labels"]["alertname"] == "VestaClockUnsynchronised"))
        .collect();
    assert!(
        raised.is_empty(),
        "healthy servers raised alerts: {raised:?}"
    );
}

/// Two REST servers run with one copied config on two hosts (the same static machine ID, no
/// lease store to refuse the second; on one host the second would be refused at start, so the
/// second holds its ID as on a host of its own): the shipped `VestaDuplicateMachineId` fires
/// in a real Prometheus with
/// their job and the shared ID, and resolves once one of them stops. The rule's `for: 1m` is
/// shortened to 2 s in a copy of the rules (promtool tests the minute).
#[test]
fn two_servers_with_one_machine_id_fire_the_duplicate_alert() {
    let Some(binary) = prometheus::binary() else {
        eprintln!("SKIPPED: prometheus is not installed (Debian package prometheus)");
        return;
    };
    let ports = free_ports(2);
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let listen = |addr: &String| [("listen = \"0.0.0.0:8080\"", format!("listen = \"{addr}\""))];
    let first = serve("rest", "rest.toml", &listen(&addrs[0]), None);
    let second = serve_on("rest", "rest.toml", &listen(&addrs[1]), None, true);

    let rules_dir = tempfile::tempdir().unwrap();
    let rules = rules_dir.path().join("vesta.rules.yml");
    let shipped = deploy::read("deploy/prometheus/vesta.rules.yml");
    let shortened = replace(
        &shipped,
        "count_values by (job) (\"machine_id\", vesta_machine_id) > 1\n        for: 1m",
        "count_values by (job) (\"machine_id\", vesta_machine_id) > 1\n        for: 2s",
    );
    std::fs::write(&rules, shortened).unwrap();
    let config = scrape_config(&rules, &[&addrs[0], &addrs[1]], &[]);
    let p = Prometheus::start(&binary, &config);

    let duplicate = |state: &str| {
        let alerts = p.api("/api/v1/alerts");
        alerts["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["labels"]["alertname"] == "VestaDuplicateMachineId" && a["state"] == state)
            .cloned()
    };
    let alert = eventually("VestaDuplicateMachineId firing", || {
        duplicate("firing").ok_or_else(|| format!("not firing: {}", p.log()))
    });
    assert_eq!(alert["labels"]["job"], "vesta-rest", "{alert}");
    assert_eq!(alert["labels"]["machine_id"], "924", "{alert}");
    assert_eq!(
        alert["annotations"]["summary"], "2 targets of vesta-rest issue as machine ID 924",
        "{alert}"
    );
    assert_eq!(
        alert["annotations"]["runbook_url"], "docs/operations.md#vestaduplicatemachineid",
        "{alert}"
    );

    // One of the two stops: its series go stale at the next failed scrape, and the alert ends.
    drop(second);
    eventually("VestaDuplicateMachineId resolved", || {
        match (duplicate("firing"), duplicate("pending")) {
            (None, None) => Ok(()),
            other => Err(format!("still raised: {other:?}")),
        }
    });
    drop(first);
}
