//! The TCP server's metrics listener against a real server: `/metrics` has the issuer's shared
//! metrics and the server's own (IDs issued, connections, requests by op, errors by code);
//! `/healthz` answers 200 while issuing and 503 with the reason when fenced; the console there
//! asks for the bearer token when one is set and makes no ID with `[server] make = false`.

use crate::common;

use vesta_embed::LeaseState;
use vesta_server::proto::{Request, Response};

use common::{Raw, config, get, get_with_auth, sample};

#[tokio::test]
async fn metrics_and_health_are_served_over_http() {
    let mut c = config(950);
    c.server.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = vesta_server::TcpServer::start(c).await.unwrap();
    let http = server.metrics_addr().expect("a metrics listener");
    let issuer = server.issuer().clone();
    let handle = vesta_server::ServerHandle::spawn(server);

    let mut raw = Raw::hello(handle.addr()).await;
    raw.send(2, &Request::NextIds { count: 10 }).await;
    assert!(matches!(raw.recv().await, Some((2, Response::Ids(_)))));
    raw.send(3, &Request::NextIds { count: 0 }).await;
    assert!(matches!(
        raw.recv().await,
        Some((3, Response::Error { .. }))
    ));

    let (status, m) = get(http, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(sample(&m, "vesta_ids_issued_total"), 10.0);
    assert_eq!(sample(&m, "vesta_connections"), 1.0);
    assert_eq!(sample(&m, "vesta_connections_max"), 1024.0);
    assert_eq!(sample(&m, "vesta_tcp_requests_total{op=\"next_ids\"}"), 2.0);
    assert_eq!(
        sample(&m, "vesta_tcp_errors_total{code=\"INVALID_ARGUMENT\"}"),
        1.0
    );
    // Refusals are exported from the start, so an error rate has a series before the first.
    assert_eq!(
        sample(&m, "vesta_tcp_errors_total{code=\"CLOCK_BEHIND\"}"),
        0.0
    );
    assert_eq!(sample(&m, "vesta_lease_machine_changes_total"), 0.0);
    assert_eq!(sample(&m, "vesta_machine_id"), 950.0);
    assert_eq!(sample(&m, "vesta_lease_state{state=\"static\"}"), 1.0);
    assert!(m.contains("vesta_issuer_info{gen_method=\"server\",type=\"max-peak\""));
    assert!(m.ends_with("# EOF\n"));

    let (status, body) = get(http, "/healthz").await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(v["genMethod"], 1);
    issuer.fence_for_test(LeaseState::Fenced, "lease lost (test)");
    let (status, body) = get(http, "/healthz").await;
    assert_eq!(status, 503);
    assert!(body.contains("not issuing: lease lost (test)"), "{body}");
    assert_eq!(get(http, "/nope").await.0, 404);

    // A closed connection is no longer counted, however it ended.
    drop(raw);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sample(&get(http, "/metrics").await.1, "vesta_connections") != 0.0 {
        assert!(std::time::Instant::now() < deadline, "still counted");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    handle.shutdown().await.unwrap();
}

/// What the connection-limit alert reads: open connections at the limit, and each connection
/// refused beyond it counted as `TOO_MANY_CONNECTIONS`.
#[tokio::test]
async fn connections_at_the_limit_and_refusals_are_counted() {
    let mut c = config(951);
    c.server.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    c.server.max_connections = 1;
    let server = vesta_server::TcpServer::start(c).await.unwrap();
    let http = server.metrics_addr().expect("a metrics listener");
    let handle = vesta_server::ServerHandle::spawn(server);
    let held = Raw::hello(handle.addr()).await;
    let mut refused = Raw::connect(handle.addr()).await;
    assert!(matches!(
        refused.recv().await,
        Some((0, Response::Error { .. }))
    ));
    let (_, m) = get(http, "/metrics").await;
    assert_eq!(sample(&m, "vesta_connections"), 1.0);
    assert_eq!(sample(&m, "vesta_connections_max"), 1.0);
    assert_eq!(
        sample(&m, "vesta_tcp_errors_total{code=\"TOO_MANY_CONNECTIONS\"}"),
        1.0
    );
    drop((held, refused));
    handle.shutdown().await.unwrap();
}

/// `[server] auth_token_file` on the TCP server: the console on the metrics listener asks for
/// the bearer token as the REST server does (401 with `WWW-Authenticate`; the scheme in any
/// case), while `/metrics` and `/healthz` stay open for scrapers and health checks. With
/// `[server] make = false` the console makes no ID: `/ui/make` is a 404 saying why and the
/// explain page has no make form. A token file that cannot be read fails the start.
#[tokio::test]
async fn the_console_asks_for_the_token_and_makes_nothing_with_make_off() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "s3cret-token\n").unwrap();
    let mut c = config(952);
    c.server.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    c.server.console = true;
    c.server.make = false;
    c.server.auth_token_file = Some(file.clone());
    let server = vesta_server::TcpServer::start(c.clone()).await.unwrap();
    let http = server.metrics_addr().expect("a metrics listener");
    let handle = vesta_server::ServerHandle::spawn(server);

    for (path, auth) in [
        ("/ui/status", None),
        ("/ui/explain?id=1", Some("Bearer wrong-token!")),
        ("/ui/make?time=1&seq=1", None),
        ("/ui", Some("Basic s3cret-token")),
        ("/ui/status", Some("Bearer s3cret-token2")),
    ] {
        let (status, head, body) = get_with_auth(http, path, auth).await;
        assert_eq!(status, 401, "{path} {auth:?}: {body}");
        assert!(
            head.to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{head}"
        );
        assert!(
            body.contains(r#"{"error":"this server needs Authorization: Bearer"#),
            "{body}"
        );
    }
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} s3cret-token");
        let (status, _, body) = get_with_auth(http, "/ui/status", Some(&auth)).await;
        assert_eq!(status, 200, "{auth}: {body}");
        assert!(body.contains("<h1>Status · TCP server</h1>"), "{body}");
    }
    for open in ["/metrics", "/healthz"] {
        assert_eq!(get(http, open).await.0, 200, "{open}");
    }

    let good = Some("Bearer s3cret-token");
    let (status, _, body) = get_with_auth(http, "/ui/make?time=1&seq=1&machine=952", good).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("([server] make = false)"), "{body}");
    assert!(!body.contains("id=\"made\""), "{body}");
    let (status, _, body) = get_with_auth(http, "/ui/explain?id=1", good).await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("/ui/make"), "no make form or link: {body}");
    handle.shutdown().await.unwrap();

    std::fs::remove_file(&file).unwrap();
    let err = vesta_server::TcpServer::start(c)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("server.auth_token_file"), "{err}");
}

/// `method path` on the side listener, by hand; the status, the head and the body.
async fn request(addr: std::net::SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let status = out[9..12].parse().unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// The side listener passes the REST port's gate (`vesta_service::gate`): a method a path
/// does not serve is a 405 with `Allow`, a long target a 414, and with the console off its
/// pages are the 404 the REST port gives, in the same words.
#[tokio::test]
async fn the_side_listener_meets_the_rest_ports_gate() {
    let mut c = config(953);
    c.server.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let server = vesta_server::TcpServer::start(c).await.unwrap();
    let http = server.metrics_addr().expect("a metrics listener");
    let handle = vesta_server::ServerHandle::spawn(server);

    for (method, path) in [
        ("POST", "/metrics"),
        ("DELETE", "/healthz"),
        ("QUERY", "/metrics"),
    ] {
        let (status, head, body) = request(http, method, path).await;
        assert_eq!(status, 405, "{method} {path}: {body}");
        assert!(head.contains("\r\nallow: get"), "{head}");
        let want = format!("method {method} is not allowed on {path}: use GET");
        assert_eq!(body, serde_json::json!({ "error": want }).to_string());
    }
    for path in ["/ui", "/ui/status", "/ui/make?time=1&seq=1"] {
        let (status, _, body) = request(http, "GET", path).await;
        assert_eq!(status, 404, "{path}: {body}");
        // No renderer in this process: the remedy in words, no flag.
        let want = "the console is off on this server: turn it on with [server] console = true in its config";
        assert_eq!(body, serde_json::json!({ "error": want }).to_string());
    }
    let long = format!("/metrics?{}", "x".repeat(5000));
    let (status, _, body) = request(http, "GET", &long).await;
    assert_eq!(status, 414, "{body}");
    assert!(body.contains("over the limit of 4096"), "{body}");
    let (status, _, body) = request(http, "GET", "/nope").await;
    assert_eq!(status, 404, "{body}");
    handle.shutdown().await.unwrap();
}
