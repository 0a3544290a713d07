//! `vesta serve rest` as a user runs it: the real binary, its startup line, a request, SIGTERM
//! and a clean exit; the one-line startup errors; `vesta gen --grpc` against it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use vesta_core::{GenMethod, IdFields};
use vesta_tests::bin::{
    ServerChild, config_with_token, fails_in_one_line, sigterm_and_wait, vesta_cmd, vesta_ok,
};
use vesta_tests::tls::TestCa;

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_rest_starts_serves_and_stops_on_sigterm() {
    let mut child = vesta_cmd([
        "serve",
        "rest",
        "--listen",
        "127.0.0.1:0",
        "--machine",
        "1000",
    ])
    .stderr(Stdio::piped())
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .strip_prefix("vesta-rest listening on http://")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    assert!(
        line.ends_with("(machine 1000, genMethod rest, type max-peak, lease static)\n"),
        "{line:?}"
    );
    let reply = http_get(&addr, "/genid");
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    let id: u64 = reply.rsplit("\r\n\r\n").next().unwrap().parse().unwrap();
    let f = IdFields::decode(id);
    assert_eq!((f.machine, f.gen_method), (1000, GenMethod::Rest));
    let reply = http_get(&addr, "/expid?id=abc");
    assert!(reply.starts_with("HTTP/1.1 400 Bad Request"), "{reply}");
    assert!(
        reply.contains(r#"{"error":"invalid parameter id: `abc` is not an ID"#),
        "{reply}"
    );

    let status = sigterm_and_wait(&mut child, Duration::from_secs(15));
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "exit {status}: {rest}");
    assert!(rest.contains("machine 1000 released"), "{rest}");
    assert!(
        TcpStream::connect(&addr).is_err(),
        "still listening after exit"
    );
}

#[test]
fn startup_errors_are_one_line() {
    let out = vesta_cmd(["serve", "rest", "--listen", "127.0.0.1:0", "--machine", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("machine 5 is outside the server pool 924..=1023 (genMethod rest)"),
        "{err}"
    );

    let out = vesta_cmd([
        "serve",
        "rest",
        "--machine-db",
        "sqlite://m.db",
        "--zk",
        "127.0.0.1:2181",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--machine-db") && err.contains("--zk"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rest.toml");
    std::fs::write(&path, "[rest]\nmax_conections = 5\n").unwrap();
    let out = vesta_cmd(["serve", "rest", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: --config: invalid config"), "{err}");
    assert!(err.contains("max_conections"), "{err}");
}

/// A `vesta serve rest ARGS` with `envs` and `NOTIFY_SOCKET` set, as systemd runs it, and the
/// notify socket it reports to (reads time out after 30 s) in a directory to keep until the end.
fn serve_under_systemd(
    args: &[&str],
    envs: &[(&str, &str)],
) -> (
    tempfile::TempDir,
    std::os::unix::net::UnixDatagram,
    vesta_tests::bin::ServerChild,
) {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let envs = [&[("NOTIFY_SOCKET", socket_path.to_str().unwrap())], envs].concat();
    let server = vesta_tests::bin::ServerChild::start("rest", args, &envs);
    (dir, socket, server)
}

/// Under systemd (`Type=notify`): `READY=1` once listening with the machine ID held,
/// `STOPPING=1` when SIGTERM starts the drain; `--log-format json` makes every stderr line one
/// JSON object; never an ANSI escape when stderr is not a terminal.
#[test]
fn serve_notifies_the_service_manager_and_logs_json() {
    let (_dir, socket, server) =
        serve_under_systemd(&["--machine", "1001", "--log-format", "json"], &[]);
    let startup: serde_json::Value = serde_json::from_str(&server.startup).unwrap();
    assert_eq!(startup["level"], "INFO", "{startup}");
    let message = startup["fields"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("vesta-rest listening on http://"),
        "{message}"
    );
    let mut buf = [0u8; 256];
    let n = socket.recv(&mut buf).expect("READY=1 within 30 s");
    let ready = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        ready.starts_with("READY=1\nSTATUS=listening on "),
        "{ready:?}"
    );
    assert!(ready.ends_with("machine 1001"), "{ready:?}");

    let (status, rest) = server.terminate();
    assert!(status.success(), "{status}: {rest}");
    let n = socket.recv(&mut buf).expect("STOPPING=1 within 30 s");
    assert_eq!(&buf[..n], b"STOPPING=1");
    for line in rest.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
    assert!(rest.contains("machine 1001 released"), "{rest}");
    assert!(
        !rest.contains('\u{1b}'),
        "ANSI escapes off a terminal: {rest:?}"
    );
}

/// With `WatchdogSec=` (`WATCHDOG_USEC`), the server pings `WATCHDOG=1` after `READY=1`, at
/// half the timeout.
#[test]
fn serve_pings_the_watchdog_when_asked() {
    let (_dir, socket, server) =
        serve_under_systemd(&["--machine", "1002"], &[("WATCHDOG_USEC", "400000")]);
    let mut buf = [0u8; 256];
    let n = socket.recv(&mut buf).expect("READY=1 within 30 s");
    assert!(buf[..n].starts_with(b"READY=1"));
    for _ in 0..2 {
        let n = socket.recv(&mut buf).expect("WATCHDOG=1 within 30 s");
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }
    let (status, rest) = server.terminate();
    assert!(status.success(), "{status}: {rest}");
}

/// `vesta gen --grpc URL` streams IDs from a real `vesta serve rest` over gRPC: all of them,
/// distinct and increasing, from the server's machine; with the server's token from
/// `--token-file`; a bad URL or a missing token fails in one line.
#[test]
fn gen_streams_ids_over_grpc_from_serve_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (config, token) = config_with_token(dir.path(), 977, "");
    let server = ServerChild::start("rest", &["--config", config.to_str().unwrap()], &[]);
    let url = format!("http://{}", server.addr);
    let token_arg = token.to_str().unwrap();
    let out = vesta_ok(&[
        "gen",
        "--grpc",
        &url,
        "--token-file",
        token_arg,
        "-n",
        "50000",
    ]);
    let ids: Vec<u64> = out.lines().map(|l| l.parse().expect("an ID")).collect();
    assert_eq!(ids.len(), 50_000);
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "increasing, so distinct"
    );
    for id in [ids[0], ids[49_999]] {
        let f = IdFields::decode(id);
        assert_eq!((f.machine, f.gen_method), (977, GenMethod::Rest), "{id}");
    }
    fails_in_one_line(
        &mut vesta_cmd(["gen", "--grpc", url.as_str(), "-n", "1"]),
        &["Unauthenticated", "auth_token_file"],
    );
    fails_in_one_line(
        &mut vesta_cmd(["gen", "--grpc", server.addr.as_str(), "-n", "1"]),
        &["--grpc", "http://HOST:PORT"],
    );
}

/// `vesta gen --grpc https://...` over the REST server's TLS (HTTP/2 by ALPN), trusting a
/// throwaway CA with `--tls-ca`, with the token: every ID, from the server's machine. TLS
/// without `--tls-ca`, `--tls-ca` with a plaintext URL, and a CA that did not sign the server's
/// certificate each fail in one line.
#[test]
fn gen_streams_ids_over_grpc_with_tls() {
    let ca = TestCa::new("vesta gen --grpc test CA");
    let cert = ca.issue("rest");
    let dir = tempfile::tempdir().unwrap();
    let (config, token) = config_with_token(dir.path(), 978, "");
    let server = ServerChild::start(
        "rest",
        &[
            "--config",
            config.to_str().unwrap(),
            "--tls-cert",
            cert.cert.to_str().unwrap(),
            "--tls-key",
            cert.key.to_str().unwrap(),
        ],
        &[],
    );
    let url = format!("https://{}", server.addr);
    let ca_pem = ca.ca_pem();
    let (ca_arg, token_arg) = (ca_pem.to_str().unwrap(), token.to_str().unwrap());
    let out = vesta_ok(&[
        "gen",
        "--grpc",
        &url,
        "--tls-ca",
        ca_arg,
        "--token-file",
        token_arg,
        "-n",
        "5000",
    ]);
    let ids: Vec<u64> = out.lines().map(|l| l.parse().expect("an ID")).collect();
    assert_eq!(ids.len(), 5000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing");
    let f = IdFields::decode(ids[0]);
    assert_eq!((f.machine, f.gen_method), (978, GenMethod::Rest));

    fails_in_one_line(
        &mut vesta_cmd(["gen", "--grpc", url.as_str(), "-n", "1"]),
        &["--grpc", "--tls-ca FILE"],
    );
    let plain = format!("http://{}", server.addr);
    fails_in_one_line(
        &mut vesta_cmd([
            "gen",
            "--grpc",
            plain.as_str(),
            "--tls-ca",
            ca_arg,
            "-n",
            "1",
        ]),
        &["--tls-ca", "plaintext", "https://"],
    );
    let stranger = TestCa::new("a CA that signed nothing here");
    let stranger_pem = stranger.ca_pem();
    fails_in_one_line(
        &mut vesta_cmd([
            "gen",
            "--grpc",
            url.as_str(),
            "--tls-ca",
            stranger_pem.to_str().unwrap(),
            "--token-file",
            token_arg,
            "-n",
            "1",
        ]),
        &["cannot connect", "certificate"],
    );
}
