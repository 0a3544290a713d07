//! HTTP/2 clients, and the bearer token guarding the endpoints (with `/makeid` switched off).

use super::*;

#[tokio::test]
async fn http2_clients_are_served_too() {
    let server = spawn(system_issuer(), rest()).await;
    let c = Client::new(server.addr, true);
    let a = c.get("/genid").await.id();
    let b = c.get("/genid").await.id();
    assert!(b > a);
    assert_eq!(c.request(Method::POST, "/genid").await.status, 405);
    let issuer = Arc::clone(&server.issuer);
    server.stop().await;
    drop(issuer);
}

/// One HTTP/1.1 GET with an optional `Authorization` header: status line, headers and body.
async fn get_with_auth(addr: std::net::SocketAddr, path: &str, auth: Option<&str>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// `[server] auth_token_file`: every endpoint but /healthz and /metrics needs the bearer token
/// (401 with a JSON error and `WWW-Authenticate` otherwise), the console's pages too; the
/// scheme is read in any case (RFC 9110). `[server] make = false` turns /makeid into a 404
/// that says why, and the console's make page too, its form gone from the explain page; a
/// token file that cannot be read fails the start.
#[tokio::test]
async fn a_token_guards_the_endpoints_and_makeid_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "s3cret-token\n").unwrap();
    let server = spawn(
        system_issuer(),
        RestSection {
            auth_token_file: Some(file.clone()),
            make: false,
            console: true,
            ..rest()
        },
    )
    .await;
    let addr = server.addr;
    for (path, auth) in [
        ("/genid", None),
        ("/genid", Some("Bearer wrong-token!")),
        ("/genid", Some("Bearer s3cret-token2")),
        ("/genid", Some("Bearer s3cret-toke")),
        ("/genid", Some("Basic s3cret-token")),
        ("/expid?id=1", None),
        ("/ui/status", None),
        ("/ui/explain?id=1", Some("Bearer wrong-token!")),
    ] {
        let r = get_with_auth(addr, path, auth).await;
        assert!(r.starts_with("HTTP/1.1 401"), "{path} {auth:?}: {r}");
        let lower = r.to_ascii_lowercase();
        assert!(lower.contains("www-authenticate: bearer"), "{r}");
        assert!(
            r.contains(r#"{"error":"this server needs Authorization: Bearer"#),
            "{r}"
        );
    }
    let good = Some("Bearer s3cret-token");
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} s3cret-token");
        let r = get_with_auth(addr, "/genid", Some(&auth)).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{auth}: {r}");
    }
    let r = get_with_auth(addr, "/ui/status", good).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("<h1>Status · REST server</h1>"), "{r}");
    for open in ["/healthz", "/metrics"] {
        let r = get_with_auth(addr, open, None).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{open}: {r}");
    }
    let r = get_with_auth(addr, "/makeid?time=1&seq=1", good).await;
    assert!(r.starts_with("HTTP/1.1 404"), "{r}");
    assert!(r.contains("[server] make = false"), "{r}");
    let r = get_with_auth(addr, "/ui/make?time=1&seq=1&machine=930", good).await;
    assert!(r.starts_with("HTTP/1.1 404"), "{r}");
    assert!(r.contains("([server] make = false)"), "{r}");
    assert!(!r.contains("id=\"made\""), "{r}");
    let r = get_with_auth(addr, "/ui/explain?id=1", good).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(!r.contains("/ui/make"), "no make form or link: {r}");
    server.stop().await;

    std::fs::remove_file(&file).unwrap();
    let issuer = std::sync::Arc::new(Issuer::start(issuer_config()).unwrap());
    let Err(err) = vesta_rest::RestServer::with_issuer(
        issuer,
        RestSection {
            auth_token_file: Some(file),
            ..rest()
        },
    )
    .await
    else {
        panic!("no token file, no server");
    };
    let err = err.to_string();
    assert!(err.contains("server.auth_token_file"), "{err}");
}
