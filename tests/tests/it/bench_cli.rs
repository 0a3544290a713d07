//! `vesta bench rest` against a real `vesta serve rest` process (closed loop with batches, and a
//! fixed rate), and `vesta bench` settings out of range named by their flags. `vesta bench tcp`
//! against `vesta serve tcp` is in tcp_cli.rs.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

use vesta_tests::bin::{vesta_cmd, vesta_command};

/// A `vesta serve rest` child process, killed on drop if still running.
struct RestServer {
    child: Child,
    addr: String,
    /// Kept open so the server can still write to its stderr.
    _stderr: BufReader<ChildStderr>,
}

impl RestServer {
    fn start(machine: &str) -> RestServer {
        let mut child = vesta_command()
            .args([
                "serve",
                "rest",
                "--listen",
                "127.0.0.1:0",
                "--machine",
                machine,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn vesta serve rest");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        stderr.read_line(&mut line).expect("startup line");
        let addr = line
            .strip_prefix("vesta-rest listening on http://")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("unexpected startup line: {line:?}"))
            .to_owned();
        RestServer {
            child,
            addr,
            _stderr: stderr,
        }
    }

    /// SIGTERM, then the exit status (within 10 s).
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(ok.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "vesta serve rest did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `vesta bench ...`, expecting success; returns the report.
fn bench(args: &[&str]) -> String {
    let out = vesta_cmd(["bench"].iter().chain(args)).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn bench_rest_measures_a_real_rest_server() {
    let server = RestServer::start("1010");
    let report = bench(&[
        "rest",
        "--server",
        &server.addr,
        "-c",
        "2",
        "-d",
        "500ms",
        "-b",
        "10",
    ]);
    assert!(
        report.contains(&format!(
            "target     {} (machine 1010, max-peak, lease static)",
            server.addr
        )),
        "{report}"
    );
    assert!(
        report.contains("GET /genids?count=10, closed loop"),
        "{report}"
    );
    assert!(report.contains("errors     0"), "{report}");
    assert!(
        report.contains("% of the cap 1,048,576/s over the whole run"),
        "{report}"
    );
    let line = report.lines().find(|l| l.starts_with("latency")).unwrap();
    assert!(
        line.contains("p50") && line.contains("p99.9") && line.contains("max"),
        "{line}"
    );

    // 200 requests/s for 0.5 s: exactly 100 requests, timed from the intended send.
    let report = bench(&[
        "rest",
        "--server",
        &server.addr,
        "-c",
        "2",
        "-d",
        "500ms",
        "-r",
        "200",
    ]);
    assert!(report.contains("requests   100 in "), "{report}");
    assert!(report.contains("(from the intended send time)"), "{report}");
    assert!(report.contains("service    p50"), "{report}");

    let status = server.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn bench_settings_out_of_range_name_their_flag() {
    for (args, expected) in [
        (
            &["tcp", "-c", "0"][..],
            "error: --connections 0 is out of range: allowed 1..=1024\n",
        ),
        (
            &["tcp", "-p", "70000"][..],
            "error: --pipeline 70000 is out of range: allowed 1..=65536\n",
        ),
        (
            &["rest", "-d", "10ms"][..],
            "error: --duration 10ms is out of range: allowed 100ms..=1h\n",
        ),
        (
            &["rest", "-b", "0"][..],
            "error: --batch 0 is out of range: allowed 1..=the server's largest batch\n",
        ),
        (
            &["tcp", "--seq-keys", "0"][..],
            "error: --seq-keys 0 is out of range: allowed 1..=18446744073709551615 keys\n",
        ),
        (
            &["rest", "--seq-keys", "0", "-r", "100"][..],
            "error: --seq-keys 0 is out of range: allowed 1..=18446744073709551615 keys\n",
        ),
        (
            &["tcp", "--seq-keys", "100", "--peer", "redis", "-r", "100"][..],
            "error: --peer: the Redis peer runs closed loop only: give no rate\n",
        ),
        (
            &["rest", "--server", ",", "-r", "5"][..],
            "error: --server: at least one HOST:PORT is needed\n",
        ),
    ] {
        let out = vesta_cmd(["bench"].iter().chain(args)).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), expected, "{args:?}");
    }
}
