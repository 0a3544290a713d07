//! Every bad request a JSON error naming its parameter, 405 with `Allow`, 404, 414, and random
//! queries that never break the server.

use super::*;

/// `(path and query, status, substring of the error sentence)`.
const BAD_REQUESTS: &[(&str, u16, &str)] = &[
    ("/expid", 400, "missing required parameter id"),
    ("/expid?id=", 400, "invalid parameter id: `` is not an ID"),
    (
        "/expid?id=abc",
        400,
        "invalid parameter id: `abc` is not an ID",
    ),
    (
        "/expid?id=18446744073709551616",
        400,
        "invalid parameter id",
    ),
    ("/expid?id=0x", 400, "invalid parameter id"),
    (
        "/expid?id=1&id=2",
        400,
        "parameter id is given more than once",
    ),
    (
        "/expid?idd=1",
        400,
        "unknown parameter idd: /expid accepts id",
    ),
    ("/makeid", 400, "missing required parameter time"),
    ("/makeid?time=1", 400, "missing required parameter seq"),
    ("/makeid?seq=1", 400, "missing required parameter time"),
    (
        "/makeid?time=abc&seq=1",
        400,
        "invalid parameter time: `abc` is not an unsigned decimal",
    ),
    ("/makeid?time=-1&seq=1", 400, "invalid parameter time: `-1`"),
    (
        "/makeid?time=1073741824&seq=0",
        400,
        "invalid parameter time: time 1073741824 is out of range for max-peak: allowed 0..=1073741823",
    ),
    (
        "/makeid?time=1&seq=1048576",
        400,
        "invalid parameter seq: seq 1048576 is out of range for max-peak: allowed 0..=1048575",
    ),
    (
        "/makeid?time=1&seq=1024&type=1",
        400,
        "invalid parameter seq: seq 1024 is out of range for min-granularity",
    ),
    (
        "/makeid?time=1&seq=1&machine=1024",
        400,
        "invalid parameter machine: machine 1024 is out of range: allowed 0..=1023",
    ),
    (
        "/makeid?time=1&seq=1&genMethod=4",
        400,
        "invalid parameter genMethod: genMethod `4`",
    ),
    (
        "/makeid?time=1&seq=1&genMethod=rpc",
        400,
        "invalid parameter genMethod",
    ),
    (
        "/makeid?time=1&seq=1&type=2",
        400,
        "invalid parameter type: type `2`",
    ),
    (
        "/makeid?time=1&seq=1&version=2",
        400,
        "invalid parameter version: version 2 is out of range: allowed 0..=1",
    ),
    (
        "/makeid?time=1&seq=1&version=300",
        400,
        "invalid parameter version: version 300",
    ),
    (
        "/makeid?time=1&seq=1&machin=5",
        400,
        "unknown parameter machin: /makeid accepts time, seq, machine, genMethod, type, version",
    ),
    ("/makeid?time=%zz&seq=1", 400, "invalid percent-escape"),
    ("/makeid?time=%ff&seq=1", 400, "not UTF-8"),
    ("/transtime", 400, "missing required parameter time"),
    ("/transtime?time=x", 400, "invalid parameter time"),
    (
        "/transtime?time=1073741824",
        400,
        "invalid parameter time: time 1073741824 is out of range: allowed 0..=1073741823",
    ),
    ("/genids", 400, "missing required parameter count"),
    (
        "/genids?count=0",
        400,
        "invalid parameter count: count 0 is out of range: allowed 1..=10000",
    ),
    (
        "/genids?count=-1",
        400,
        "invalid parameter count: count -1 is out of range",
    ),
    (
        "/genids?count=10001",
        400,
        "invalid parameter count: count 10001 is out of range",
    ),
    (
        "/genids?count=lots",
        400,
        "invalid parameter count: `lots` is not an integer",
    ),
    (
        "/genid?count=2",
        400,
        "unknown parameter count: /genid accepts format",
    ),
    ("/healthz?verbose=1", 400, "unknown parameter verbose"),
    ("/metrics?x", 400, "unknown parameter x"),
    ("/", 404, "no endpoint at /"),
    ("/genid/", 404, "no endpoint at /genid/"),
    ("/GENID", 404, "no endpoint at /GENID"),
    ("/nope?id=1", 404, "no endpoint at /nope"),
];

#[tokio::test]
async fn every_bad_request_is_a_json_error_naming_the_parameter() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    for &(path, status, needle) in BAD_REQUESTS {
        let r = c.get(path).await;
        assert_eq!(r.status, status, "{path}: {r:?}");
        let msg = r.error();
        assert!(msg.contains(needle), "{path}: {msg:?} lacks {needle:?}");
        assert_eq!(r.header("cache-control"), "no-store");
    }
    // Still serving.
    c.get("/genid").await.id();
    let m = c.get("/metrics").await.body;
    assert_eq!(
        sample(
            &m,
            "vesta_http_requests_total{endpoint=\"makeid\",status=\"400\"}"
        ),
        BAD_REQUESTS
            .iter()
            .filter(|(p, _, _)| p.starts_with("/makeid"))
            .count() as f64
    );
    server.stop().await;
}

#[tokio::test]
async fn other_methods_get_405_with_allow_and_unknown_paths_404() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    for path in [
        "/genid",
        "/genids?count=1",
        "/expid?id=1",
        "/makeid?time=1&seq=1",
        "/transtime?time=1",
        "/healthz",
        "/metrics",
    ] {
        for method in [
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
            Method::OPTIONS,
        ] {
            let r = c.request(method.clone(), path).await;
            assert_eq!(r.status, 405, "{method} {path}");
            assert_eq!(r.header("allow"), "GET", "{method} {path}");
            let msg = r.error();
            let bare = path.split('?').next().unwrap();
            assert_eq!(
                msg,
                format!("method {method} is not allowed on {bare}: use GET")
            );
        }
        // HEAD: same status and Allow, and (as HTTP requires) no body.
        let r = c.request(Method::HEAD, path).await;
        assert_eq!(
            (r.status, r.header("allow"), r.body.as_str()),
            (405, "GET", "")
        );
    }
    // An unknown path is 404 whatever the method.
    let r = c.request(Method::POST, "/nope").await;
    assert_eq!(r.status, 404);
    assert!(r.error().starts_with("no endpoint at /nope"));
    server.stop().await;
}

#[tokio::test]
async fn long_uris_get_414() {
    let server = spawn(
        system_issuer(),
        RestSection {
            max_uri_bytes: 300,
            ..rest()
        },
    )
    .await;
    let c = server.client();
    let path = format!("/expid?id={}", "1".repeat(300));
    let r = c.get(&path).await;
    assert_eq!(r.status, 414);
    assert_eq!(
        r.error(),
        format!(
            "the request target is {} bytes, over the limit of 300 (server.max_uri_bytes)",
            path.len()
        )
    );
    // Exactly at the limit is fine (and then a 400, the ID being too large).
    let path = format!("/expid?id={}", "1".repeat(300 - "/expid?id=".len()));
    assert_eq!(c.get(&path).await.status, 400);
    server.stop().await;
}

/// Arbitrary query strings never crash a handler: each answer is 200 or a JSON 4xx.
#[tokio::test]
async fn random_queries_never_break_the_server() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    let alphabet: Vec<char> = "0123456789abcxyz-+%=&?#.,;:_~!$'()*[]@ FfEe/\\\u{e9}"
        .chars()
        .collect();
    let names = [
        "id",
        "time",
        "seq",
        "machine",
        "genMethod",
        "type",
        "version",
        "count",
    ];
    let paths = [
        "/genid",
        "/genids",
        "/expid",
        "/makeid",
        "/transtime",
        "/healthz",
    ];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..600 {
        let path = paths[(next() % paths.len() as u64) as usize];
        let mut q = String::new();
        for _ in 0..(next() % 4) {
            if !q.is_empty() {
                q.push('&');
            }
            q.push_str(names[(next() % names.len() as u64) as usize]);
            q.push('=');
            for _ in 0..(next() % 12) {
                let ch = alphabet[(next() % alphabet.len() as u64) as usize];
                // Only URI-legal bytes on the wire; the rest percent-encoded.
                if ch.is_ascii_alphanumeric() || "-._~%=&+".contains(ch) {
                    q.push(ch);
                } else {
                    for b in ch.to_string().bytes() {
                        q.push_str(&format!("%{b:02X}"));
                    }
                }
            }
        }
        let target = if q.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{q}")
        };
        let r = c.get(&target).await;
        match r.status {
            200 => {}
            400 => {
                r.error();
            }
            s => panic!("{target}: status {s}: {}", r.body),
        }
    }
    c.get("/genid").await.id();
    server.stop().await;
}
