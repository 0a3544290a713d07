//! The client packages' own tests (`clients/python/tests`, `clients/node/test`), run here with
//! what they need in their environment: the explain cases (`vesta_tests::client_packages`:
//! every preset and two custom layouts, 10,000 IDs each as `vesta explain` reads them) and
//! three real `vesta serve rest` servers for the RPCs: an open one (per-key sequences and a
//! segment tag on SQLite), one with a bearer token and `make = false`, and one on TLS
//! (a throwaway CA). Each package's run must pass every test and skip none.

use std::path::Path;

use vesta_tests::bin::{ServerChild, TOKEN, config_with_token, vesta_ok};
use vesta_tests::client_packages::{TestRun, explain_cases, node_tests, python_tests};
use vesta_tests::tls::TestCa;

/// The servers one package's tests call, and their environment for it.
struct Servers {
    open: ServerChild,
    guarded: ServerChild,
    tls: ServerChild,
    _ca: TestCa,
    env: Vec<(&'static str, String)>,
}

/// Three servers with the static machine IDs `first..first + 3`, each holding its ID in a
/// directory of its own under `dir` (as on hosts of their own).
fn servers(dir: &Path, first: u64) -> Servers {
    let hold = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d.display().to_string()
    };
    let segment_db = format!("sqlite://{}/segments.db", dir.display());
    vesta_ok(&["segment", "init", "--db", &segment_db]);
    vesta_ok(&[
        "segment",
        "create",
        "orders",
        "--step",
        "100",
        "--start",
        "1",
        "--db",
        &segment_db,
    ]);
    let seq_db = format!("sqlite://{}/seq.db", dir.display());
    let open_machine = first.to_string();
    let guarded_dir = dir.join("guarded");
    std::fs::create_dir_all(&guarded_dir).unwrap();
    let (config, _) = config_with_token(&guarded_dir, first + 1, "make = false");
    let ca = TestCa::new("vesta client packages CA");
    let cert = ca.issue("rest");
    let tls_machine = (first + 2).to_string();
    let (open_hold, guarded_hold, tls_hold) = (hold("open"), hold("guarded-hold"), hold("tls"));
    // Started side by side: each waits out its start guard (about a second).
    let (open, guarded, tls) = std::thread::scope(|s| {
        let open = s.spawn(|| {
            ServerChild::start(
                "rest",
                &[
                    "--type",
                    "max-peak",
                    "--machine",
                    &open_machine,
                    "--seq-db",
                    &seq_db,
                    "--segment-db",
                    &segment_db,
                ],
                &[("VESTA_HOLD_DIR", &open_hold)],
            )
        });
        let guarded = s.spawn(|| {
            ServerChild::start(
                "rest",
                &["--config", config.to_str().unwrap()],
                &[("VESTA_HOLD_DIR", &guarded_hold)],
            )
        });
        let tls = s.spawn(|| {
            ServerChild::start(
                "rest",
                &[
                    "--type",
                    "max-peak",
                    "--machine",
                    &tls_machine,
                    "--tls-cert",
                    cert.cert.to_str().unwrap(),
                    "--tls-key",
                    cert.key.to_str().unwrap(),
                ],
                &[("VESTA_HOLD_DIR", &tls_hold)],
            )
        });
        (
            open.join().unwrap(),
            guarded.join().unwrap(),
            tls.join().unwrap(),
        )
    });
    let env = vec![
        ("VESTA_EXPLAIN_CASES", explain_cases().display().to_string()),
        ("VESTA_GRPC", open.addr.clone()),
        ("VESTA_GRPC_MACHINE", open_machine),
        ("VESTA_GRPC_GUARDED", guarded.addr.clone()),
        ("VESTA_GRPC_TOKEN", TOKEN.to_owned()),
        ("VESTA_GRPC_TLS", tls.addr.clone()),
        ("VESTA_GRPC_TLS_CA", ca.ca_pem().display().to_string()),
    ];
    Servers {
        open,
        guarded,
        tls,
        _ca: ca,
        env,
    }
}

impl Servers {
    fn stop(self) {
        for server in [self.open, self.guarded, self.tls] {
            server.stop_cleanly();
        }
    }
}

/// The tests that must have run and passed, by a name their line in the output carries.
fn assert_ran(run: &TestRun, names: &[&str], ok: &str) {
    for name in names {
        let passed = run
            .output
            .lines()
            .any(|l| l.contains(name) && l.contains(ok) && !l.contains("skip"));
        assert!(passed, "{name} did not pass:\n{}", run.output);
    }
}

/// `python -m unittest` over clients/python/tests: the offline explanations against the
/// CLI's, the RPCs against the three servers, the generated stubs fresh, and mypy `--strict`
/// over the package and its tests.
#[test]
fn python_package_tests_pass() {
    let dir = tempfile::tempdir().unwrap();
    let servers = servers(dir.path(), 1001);
    let run = python_tests(&servers.env);
    assert!(
        run.output.contains("\nOK\n") && !run.output.contains("skipped"),
        "every test ran and passed:\n{}",
        run.output
    );
    assert_ran(
        &run,
        &[
            "test_every_case_as_the_cli_explains_it",
            "test_ids_batches_and_a_stream",
            "test_token_and_make_off",
            "test_tls",
            "test_stubs_are_fresh",
            "test_mypy_strict_accepts_the_package",
        ],
        "ok",
    );
    servers.stop();
}

/// `node --test` over clients/node/test: the same, plus the TypeScript declarations checked by
/// `tsc` and the package's files as `npm pack` would ship them.
#[test]
fn node_package_tests_pass() {
    let dir = tempfile::tempdir().unwrap();
    let servers = servers(dir.path(), 1004);
    let run = node_tests(&servers.env);
    assert!(
        run.output.contains("skipped 0") && run.output.contains("fail 0"),
        "every test ran and passed:\n{}",
        run.output
    );
    assert_ran(
        &run,
        &[
            "explains every case as the CLI does",
            "ids, batches and a stream",
            "a token and make off",
            "TLS",
            "the proto copy is fresh",
            "the TypeScript declarations compile",
        ],
        "✔",
    );
    servers.stop();
}
