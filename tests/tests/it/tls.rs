//! TLS on both servers, end to end with the real `vesta` binary and a throwaway CA (rcgen):
//!
//! - HTTPS: HTTP/1.1 and HTTP/2 (chosen by ALPN) answer; a bearer token guards the ID
//!   endpoints (wrong token: 401 with a JSON error; `/healthz` needs none); plain HTTP to the
//!   TLS port gets no answer;
//! - TLS TCP: `vesta gen --server --tls-ca` gets IDs; a client trusting another CA, or no TLS
//!   at all, is refused in one line;
//! - SIGHUP reloads the certificate for new connections; a file that does not load keeps the
//!   pair in use and says so in the log;
//! - a half-configured or unreadable pair fails the start in one line naming the key;
//! - without TLS, SIGHUP (`systemctl reload`) is ignored, never a stop;
//! - a client that connects and never handshakes is closed after the header read timeout.

use std::time::{Duration, Instant};

use vesta_tests::bin::{ServerChild, vesta_cmd, vesta_fails};
use vesta_tests::tls::{TestCa, https_get, https_get_h2};

fn tls_args(cert: &vesta_tests::tls::Issued) -> Vec<String> {
    vec![
        "--tls-cert".into(),
        cert.cert.display().to_string(),
        "--tls-key".into(),
        cert.key.display().to_string(),
    ]
}

/// SIGHUP to the server (as `systemctl reload` sends).
fn hangup(server: &ServerChild) {
    let pid = server.child.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(status.success());
}

fn start(kind: &str, args: &[String]) -> ServerChild {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ServerChild::start(kind, &args, &[])
}

#[test]
fn https_serves_http1_and_http2_and_the_token_guards_the_ids() {
    let ca = TestCa::new("vesta test CA");
    let cert = ca.issue("rest");
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let conf = dir.path().join("rest.toml");
    std::fs::write(
        &conf,
        format!(
            "[machine]\nid = 930\n[server]\nauth_token_file = \"{}\"\n",
            token.display()
        ),
    )
    .unwrap();
    let mut args = tls_args(&cert);
    args.extend(["--config".into(), conf.display().to_string()]);
    let server = start("rest", &args);
    assert!(
        server.startup.contains("listening on https://127.0.0.1:"),
        "{}",
        server.startup
    );
    let client = ca.client_config(&[b"http/1.1"]);

    let ok = https_get(
        &server.addr,
        client.clone(),
        "/genid",
        "Authorization: Bearer s3cret\r\n",
    )
    .unwrap();
    assert_eq!(ok.status, 200, "{}", ok.body);
    let id: u64 = ok.body.trim().parse().unwrap();
    assert_eq!(vesta_core::IdFields::decode(id).machine, 930);
    assert_eq!(ok.cert, cert.der, "the configured certificate is served");

    let wrong = https_get(
        &server.addr,
        client.clone(),
        "/genid",
        "Authorization: Bearer nope\r\n",
    )
    .unwrap();
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert!(wrong.body.contains("\"error\""), "{}", wrong.body);
    let health = https_get(&server.addr, client, "/healthz", "").unwrap();
    assert_eq!(health.status, 200, "{}", health.body);

    // HTTP/2 by ALPN (the token is required there too: 401 without it).
    let (alpn, status, body) = https_get_h2(&server.addr, ca.client_config(&[b"h2"]), "/genid");
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(status, 401, "{body}");

    // Plain HTTP to the TLS port: no HTTP answer.
    let plain =
        std::panic::catch_unwind(|| vesta_tests::bin::http(&server.addr, "GET", "/healthz"));
    assert!(
        !matches!(plain, Ok((200, _))),
        "plain HTTP was answered on the TLS port: {plain:?}"
    );
    server.stop_cleanly();
}

#[test]
fn tls_tcp_serves_a_client_with_the_ca_and_refuses_others_in_one_line() {
    let ca = TestCa::new("vesta test CA");
    let cert = ca.issue("tcp");
    let server = start("tcp", &tls_args(&cert));
    assert!(
        server.startup.contains("listening on tls://127.0.0.1:"),
        "{}",
        server.startup
    );
    let ca_pem = ca.ca_pem().display().to_string();
    let out = vesta_cmd([
        "gen",
        "--server",
        &server.addr,
        "--tls-ca",
        &ca_pem,
        "-n",
        "5",
    ])
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 5);

    // A client trusting another CA: the handshake fails, named.
    let other = TestCa::new("another CA");
    let other_pem = other.ca_pem().display().to_string();
    let started = Instant::now();
    vesta_fails(
        &[
            "gen",
            "--server",
            &server.addr,
            "--tls-ca",
            &other_pem,
            "-n",
            "1",
        ],
        &["TLS", "certificate"],
    );
    // A client without TLS: the server waits for a handshake that never comes, up to its
    // idle timeout; the client's own connect timeout ends it first.
    vesta_fails(
        &["gen", "--server", &server.addr, "-n", "1"],
        &[&server.addr],
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "refusals took {:?}",
        started.elapsed()
    );
    server.stop_cleanly();
}

#[test]
fn sighup_reloads_the_certificate_and_a_bad_file_keeps_the_old_one() {
    let ca = TestCa::new("vesta test CA");
    let first = ca.issue("first");
    let server = start("rest", &tls_args(&first));
    // A fresh client config per connection: a resumed session would not show the new
    // certificate.
    let seen = || {
        https_get(
            &server.addr,
            ca.client_config(&[b"http/1.1"]),
            "/healthz",
            "",
        )
        .unwrap()
        .cert
    };
    assert_eq!(seen(), first.der);

    // New files in place, then SIGHUP: new connections get the new certificate.
    let second = ca.issue("second");
    std::fs::copy(&second.cert, &first.cert).unwrap();
    std::fs::copy(&second.key, &first.key).unwrap();
    assert_eq!(seen(), first.der, "nothing changes before SIGHUP");
    hangup(&server);
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen() != second.der {
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A broken certificate file: the reload fails, the pair in use stays.
    std::fs::write(&first.cert, "not a certificate").unwrap();
    hangup(&server);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match server.stderr.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if line.contains("TLS reload failed") => {
                assert!(line.contains("server.tls_cert"), "{line}");
                break;
            }
            _ => assert!(
                Instant::now() < deadline,
                "no log line for the failed reload"
            ),
        }
    }
    assert_eq!(
        seen(),
        second.der,
        "the old pair stays after a failed reload"
    );
    server.stop_cleanly();
}

#[test]
fn a_half_or_unreadable_pair_fails_the_start_in_one_line() {
    let ca = TestCa::new("vesta test CA");
    let cert = ca.issue("rest");
    let cert_path = cert.cert.display().to_string();
    vesta_fails(
        &[
            "serve",
            "rest",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &cert_path,
        ],
        &["server.tls_cert is set but server.tls_key is not"],
    );
    vesta_fails(
        &[
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--tls-key",
            &cert.key.display().to_string(),
        ],
        &["server.tls_cert /nonexistent/cert.pem"],
    );
    // A key that is not the certificate's.
    let other = ca.issue("other");
    vesta_fails(
        &[
            "serve",
            "rest",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &cert_path,
            "--tls-key",
            &other.key.display().to_string(),
        ],
        &["server.tls_key", "does not match the certificate"],
    );
}

#[test]
fn a_sighup_without_tls_is_ignored() {
    let server = ServerChild::start("rest", &["--machine", "931"], &[]);
    for _ in 0..3 {
        hangup(&server);
        let (status, body) = vesta_tests::bin::http(&server.addr, "GET", "/healthz");
        assert_eq!(status, 200, "{body}");
    }
    let (status, rest) = server.terminate();
    assert!(
        status.success(),
        "SIGHUP stopped the server: {status}: {rest}"
    );
}

/// A client that connects to the HTTPS port and never starts its handshake gives its slot
/// back: closed after `header_read_timeout_ms`, counted as a handshake failure.
#[test]
fn a_silent_client_is_closed_by_the_handshake_bound() {
    use std::io::Read;
    let ca = TestCa::new("vesta test CA");
    let cert = ca.issue("rest");
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rest.toml");
    std::fs::write(
        &conf,
        "[machine]\nid = 932\n[server]\nheader_read_timeout_ms = 300\n",
    )
    .unwrap();
    let mut args = tls_args(&cert);
    args.extend(["--config".into(), conf.display().to_string()]);
    let server = start("rest", &args);
    let mut silent = std::net::TcpStream::connect(&server.addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let connected = Instant::now();
    let mut buf = [0u8; 64];
    let n = silent.read(&mut buf).unwrap_or(0);
    let waited = connected.elapsed();
    assert_eq!(n, 0, "the server closes without a word");
    // Never before the configured bound; the upper margin tells "closed" from "never".
    assert!(
        waited >= Duration::from_millis(300),
        "closed after {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "closed after {waited:?}");
    let metrics = https_get(
        &server.addr,
        ca.client_config(&[b"http/1.1"]),
        "/metrics",
        "",
    )
    .unwrap()
    .body;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("vesta_http_connections_closed_total{reason=\"handshake\"} 1")),
        "{metrics}"
    );
    server.stop_cleanly();
}
