//! The deployment files, each checked with the real tool that reads it: the /etc/vesta configs
//! with the servers' config loaders, the systemd units with `systemd-analyze` and the real
//! `vesta` CLI, the alert rules with `promtool` (check and unit tests) and against
//! docs/operations.md's runbooks, the dashboard as JSON. (tests/it/prometheus.rs runs them against
//! a real Prometheus scraping real servers.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use vesta_rest::RestConfig;
use vesta_server::TcpConfig;
use vesta_tests::bin::{vesta, vesta_command};
use vesta_tests::deploy::{self, Unit, alert_rules, anchors, dashboard, promtool_cases};
use vesta_tests::prometheus::promtool;

/// The units and the config each one runs with.
const UNITS: [(&str, &str); 2] = [
    ("vesta-rest.service", "deploy/etc/vesta/rest.toml"),
    ("vesta-tcp.service", "deploy/etc/vesta/tcp.toml"),
];

/// The longest a server's release of its machine ID takes after the drain: the final mark and
/// the claim's deletion, each a ZooKeeper call bounded at 3 s (vesta-embed's
/// `SHUTDOWN_CALL_TIMEOUT`), plus a unit boundary the clock thread may be waiting for.
const RELEASE_MS: u64 = 2 * 3_000 + 1_000;

fn unit(name: &str) -> Unit {
    Unit::parse(&deploy::read(&format!("deploy/systemd/{name}")))
}

/// `(shutdown_grace_ms, state_file, zookeeper.session_timeout_ms, segment.fetch_timeout_ms)`
/// of a shipped config, loaded with its server's real loader.
fn load(config: &str) -> (u64, Option<PathBuf>, u64, u64) {
    let path = deploy::path(config);
    if config.ends_with("rest.toml") {
        let c = RestConfig::from_toml_file(&path).unwrap_or_else(|e| panic!("{config}: {e}"));
        assert!(c.warnings.is_empty(), "{config}: {:?}", c.warnings);
        let s = c.server;
        (
            s.shutdown_grace_ms,
            c.machine.state_file,
            c.zookeeper.session_timeout_ms,
            c.segment.fetch_timeout_ms,
        )
    } else {
        let c = TcpConfig::from_toml_file(&path).unwrap_or_else(|e| panic!("{config}: {e}"));
        assert!(c.warnings.is_empty(), "{config}: {:?}", c.warnings);
        assert!(
            c.server.metrics_listen.is_some(),
            "{config}: the TCP server needs metrics_listen for Prometheus"
        );
        let s = c.server;
        (
            s.shutdown_grace_ms,
            c.machine.state_file,
            c.zookeeper.session_timeout_ms,
            c.segment.fetch_timeout_ms,
        )
    }
}

#[test]
fn the_etc_configs_load_with_the_servers_own_loaders_and_ship_no_machine_id() {
    let rest = RestConfig::from_toml_file(deploy::path(UNITS[0].1)).unwrap();
    let tcp = TcpConfig::from_toml_file(deploy::path(UNITS[1].1)).unwrap();
    assert_eq!(
        (rest.machine.id, tcp.machine.id),
        (None, None),
        "a shipped ID would be duplicated by every host that copies the file"
    );
    // Until the operator chooses one, the server refuses to start, naming the key.
    for (kind, config) in [("rest", UNITS[0].1), ("tcp", UNITS[1].1)] {
        let out = vesta_command()
            .args(["serve", kind, "--config"])
            .arg(deploy::path(config))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{config} started without a machine ID"
        );
        assert!(
            err.contains("machine.id is not set") && err.contains("924..=1023"),
            "{config}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    for (name, config) in UNITS {
        let (_, state_file, _, _) = load(config);
        let state_dir = unit(name)
            .get("Service", "StateDirectory")
            .unwrap()
            .to_owned();
        let state_file = state_file.unwrap_or_else(|| panic!("{config}: no state_file"));
        assert_eq!(
            state_file.parent().unwrap(),
            Path::new("/var/lib").join(&state_dir),
            "{config}'s state file must be in {name}'s StateDirectory"
        );
    }
}

/// ExecStart as argv; the program and the config path it names.
fn exec_start(u: &Unit) -> Vec<String> {
    u.get("Service", "ExecStart")
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_units_run_the_real_cli_with_shipped_configs_and_the_promised_settings() {
    let readme = deploy::read("README.md");
    for (name, config) in UNITS {
        let u = unit(name);
        let argv = exec_start(&u);
        // The binary where the README's Install section puts it.
        assert_eq!(argv[0], "/usr/local/bin/vesta", "{name}");
        assert!(
            readme.contains("/usr/local/bin/vesta"),
            "README: no /usr/local/bin/vesta"
        );
        // The subcommand and every flag parse with the real CLI.
        let out = vesta_command()
            .args(&argv[1..])
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: `vesta {}` does not parse: {}",
            argv[1..].join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        // --config points at the shipped file's place under ConfigurationDirectory.
        let at = argv.iter().position(|a| a == "--config").expect("--config");
        let etc = &argv[at + 1];
        assert_eq!(
            Path::new(etc),
            Path::new("/").join(config.strip_prefix("deploy/").unwrap()),
            "{name}"
        );
        let conf_dir = u.get("Service", "ConfigurationDirectory").unwrap();
        assert!(
            etc.starts_with(&format!("/etc/{conf_dir}/")),
            "{name}: {etc}"
        );

        for (key, want) in [
            ("DynamicUser", "yes"),
            ("NoNewPrivileges", "yes"),
            ("ProtectSystem", "strict"),
            ("PrivateTmp", "yes"),
            ("ProtectClock", "yes"),
            ("CapabilityBoundingSet", ""),
            ("AmbientCapabilities", ""),
            ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
            ("Restart", "on-failure"),
            ("KillSignal", "SIGTERM"),
        ] {
            assert_eq!(u.get("Service", key), Some(want), "{name}: {key}");
        }
        // SIGKILL comes only after the drain, the segment give-back and the release had their
        // time. The give-back: fetches under way finish within one fetch_timeout_ms, the
        // give-backs of all tags together within another (vesta-segment's Store::shutdown).
        let (grace_ms, _, session_ms, fetch_ms) = load(config);
        let give_back_ms = 2 * fetch_ms;
        let stop = u.get("Service", "TimeoutStopSec").unwrap();
        let stop_ms = 1000
            * stop
                .strip_suffix('s')
                .unwrap_or(stop)
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{name}: TimeoutStopSec={stop}: write it in s"));
        assert!(
            stop_ms > grace_ms + give_back_ms + RELEASE_MS + session_ms,
            "{name}: TimeoutStopSec {stop_ms} ms <= drain {grace_ms} + give-back \
             {give_back_ms} + release {RELEASE_MS} + a session timeout {session_ms}"
        );
    }
}

/// Runs `systemd-analyze` on a copy of each unit whose ExecStart names the freshly built
/// binary (verify checks that the program exists), with the generated man pages on MANPATH
/// (verify also checks `Documentation=man:...`).
#[test]
fn systemd_analyze_verifies_each_unit_and_rates_its_exposure_ok() {
    let Ok(analyze) = which("systemd-analyze") else {
        eprintln!("SKIPPED: systemd-analyze is not installed (Debian package systemd)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man");
    let out = vesta_command()
        .arg("man")
        .arg(man.join("man1"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (name, _) in UNITS {
        let text = deploy::read(&format!("deploy/systemd/{name}"));
        let copy = dir.path().join(name);
        let built = vesta().to_str().unwrap();
        std::fs::write(&copy, text.replace("/usr/local/bin/vesta", built)).unwrap();
        let out = Command::new(&analyze)
            .arg("verify")
            .arg(&copy)
            .env("MANPATH", &man)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{name}: {said}"
        );

        let out = Command::new(&analyze)
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(&copy)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        let score: f64 = said
            .lines()
            .find_map(|l| {
                l.split_once("Overall exposure level for ")?
                    .1
                    .split_once(": ")
            })
            .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no exposure level in {said}"));
        // systemd rates 0-10; under 2 is its best band ("OK") below which little is left to
        // lock down for a network service.
        assert!(score < 2.0, "{name}: exposure {score}\n{said}");
    }
}

fn which(tool: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn every_alert_has_a_severity_a_summary_and_a_runbook_that_exists() {
    let ops = deploy::read("docs/operations.md");
    let anchors: BTreeSet<String> = anchors(&ops).into_iter().collect();
    let rules = alert_rules();
    assert!(rules.len() >= 15, "{} rules", rules.len());
    let mut names = BTreeSet::new();
    for r in &rules {
        assert!(names.insert(r.name.clone()), "{} twice", r.name);
        let severity = r.labels.get("severity").map(String::as_str);
        assert!(
            matches!(severity, Some("critical" | "warning")),
            "{}: severity {severity:?}",
            r.name
        );
        assert!(
            r.annotations.get("summary").is_some_and(|s| s.len() > 20),
            "{}: no summary",
            r.name
        );
        let runbook = r.annotations.get("runbook_url").map(String::as_str);
        let anchor = runbook
            .and_then(|u| u.strip_prefix("docs/operations.md#"))
            .unwrap_or_else(|| panic!("{}: runbook_url {runbook:?}", r.name));
        assert_eq!(
            anchor,
            r.name.to_lowercase(),
            "{}: one runbook per alert",
            r.name
        );
        assert!(
            anchors.contains(anchor),
            "{}: docs/operations.md has no section #{anchor}",
            r.name
        );
        assert_eq!(
            r.group == "vesta-segment",
            r.name.starts_with("VestaSegment")
        );
    }
    // And no runbook for an alert that does not exist.
    for a in anchors
        .iter()
        .filter(|a| a.starts_with("vesta") && a.len() > 8)
    {
        assert!(
            rules.iter().any(|r| r.name.to_lowercase() == *a),
            "docs/operations.md has a runbook #{a} for no alert"
        );
    }
}

#[test]
fn promtool_checks_the_rules_and_unit_tests_every_alert_firing_and_not() {
    let cases = promtool_cases();
    for r in alert_rules() {
        for firing in [true, false] {
            assert!(
                cases.iter().any(|(n, f)| *n == r.name && *f == firing),
                "{}: no promtool test where it is {}",
                r.name,
                if firing { "firing" } else { "not firing" }
            );
        }
    }
    let Some(promtool) = promtool() else {
        eprintln!("SKIPPED: promtool is not installed (Debian package prometheus)");
        return;
    };
    let dir = deploy::path("deploy/prometheus");
    for args in [
        &["check", "rules", "vesta.rules.yml"][..],
        &["test", "rules", "vesta.rules.test.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_dashboard_has_unique_panels_and_every_query_reads_vesta_metrics() {
    let d = dashboard();
    assert_eq!(d["uid"], "vesta-rs");
    let mut ids = BTreeSet::new();
    for panel in d["panels"].as_array().unwrap() {
        assert!(ids.insert(panel["id"].as_u64().unwrap()), "panel id twice");
        for target in panel["targets"].as_array().into_iter().flatten() {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{panel}");
        }
    }
    let queries = deploy::dashboard_queries();
    for (title, expr) in &queries {
        let selectors = deploy::selectors(expr);
        assert!(
            !selectors.is_empty() && selectors.iter().all(|s| s.metric.starts_with("vesta_")),
            "{title}: {expr}"
        );
    }
    // What the issue asks the dashboard to show.
    let all: String = queries.iter().map(|(_, e)| e.as_str()).collect();
    for metric in [
        "vesta_ids_issued_total",
        "vesta_layout_capacity_per_second",
        "vesta_machine_id",
        "vesta_machine_ids",
        "vesta_machine_issuing",
        "vesta_lease_state",
        "vesta_sequence_waits_total",
        "vesta_clock_rollback_refusals_total",
        "vesta_http_request_duration_seconds_bucket",
        "vesta_connections",
        "vesta_end_of_life_remaining_seconds",
    ] {
        assert!(all.contains(metric), "the dashboard does not show {metric}");
    }
}

/// A PromQL expression docs/operations.md gives an operator to run by hand ("... must be
/// empty: the expression of the `NAME` alert") is the alert's own, character for character
/// (a query by a label the series lacks fired for any two servers).
#[test]
fn the_guides_promql_is_the_alerts() {
    let ops = deploy::read("docs/operations.md");
    let rules = alert_rules();
    let marker = "the expression of the `";
    let mut checked = 0;
    for (at, _) in ops.match_indices(marker) {
        let name = ops[at + marker.len()..].split('`').next().unwrap();
        let before = &ops[..at];
        let end = before.rfind('`').expect("a quoted expression before it");
        let start = before[..end].rfind('`').expect("its opening quote") + 1;
        let quoted = before[start..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let rule = rules
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("docs/operations.md names no alert {name}"));
        let expr = rule.expr.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(quoted, expr, "docs/operations.md's query for {name}");
        checked += 1;
    }
    assert!(
        checked >= 1,
        "docs/operations.md quotes no alert's expression"
    );
}

/// The license Cargo.toml and the client packages declare, Apache-2.0, is in LICENSE in full
/// (its terms to the end and the appendix), not a pointer to it.
#[test]
fn the_license_is_apache_2_in_full() {
    let license = deploy::read("LICENSE");
    for part in [
        "Apache License",
        "Version 2.0, January 2004",
        "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
        "9. Accepting Warranty or Additional Liability.",
        "END OF TERMS AND CONDITIONS",
        "APPENDIX: How to apply the Apache License to your work.",
    ] {
        assert!(license.contains(part), "LICENSE lacks {part:?}");
    }
    assert!(license.lines().count() > 190, "the whole text");
    assert!(deploy::read("Cargo.toml").contains("license = \"Apache-2.0\""));
    assert!(deploy::read("clients/python/pyproject.toml").contains("license = \"Apache-2.0\""));
    assert!(deploy::read("clients/node/package.json").contains("\"license\": \"Apache-2.0\""));
}
