//! Segment mode over HTTP against a real SQLite database: `/segment/{tag}`, `/segments/{tag}`
//! and Leaf's `/api/segment/get/{tag}` (numbers increasing and never repeated across the three),
//! every bad input (unknown or bad tag, bad count, segment mode off), the database locked
//! (503 once the buffers are drained, recovery after), `/healthz` and `/metrics` per tag, the
//! unsent-bytes budget for `/segments`, and the unused tail given back at shutdown.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{
    H2Conn, labelled_sample, open_segments, rest, sample, segment_db, spawn, spawn_with_segments,
    system_issuer,
};
use vesta_rest::RestSection;
use vesta_segment::GiveBackOutcome;
use vesta_tests::leaf::SqliteLock;

/// The numbers of a `/segments` answer, checked to be strings of consecutive-or-increasing
/// numbers.
fn numbers(c: &common::Reply) -> Vec<u64> {
    assert_eq!(c.status, 200, "{c:?}");
    let v = c.json();
    let ids: Vec<u64> = v["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().expect("numbers are strings").parse().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "not increasing: {ids:?}"
    );
    ids
}

#[tokio::test]
async fn the_three_paths_hand_out_increasing_numbers_never_twice() {
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 100), ("invoices", 1000)]).await;
    let server =
        spawn_with_segments(system_issuer(), rest(), Some(open_segments(&section).await)).await;
    let c = server.client();
    let mut seen = BTreeSet::new();
    let mut last = 0;
    for round in 0..40 {
        let n = match round % 3 {
            0 => vec![c.get("/segment/orders").await.id()],
            1 => {
                let r = c.get("/api/segment/get/orders").await;
                assert_eq!(r.status, 200, "{r:?}");
                assert!(r.header("content-type").starts_with("text/plain"), "{r:?}");
                vec![r.body.parse().unwrap()]
            }
            _ => numbers(&c.get("/segments/orders?count=37").await),
        };
        assert!(n[0] > last, "{} after {last}", n[0]);
        last = *n.last().unwrap();
        for x in n {
            assert!(seen.insert(x), "{x} twice");
        }
    }
    // The first number is the table's start; steps of 100 were crossed many times.
    assert_eq!(seen.first(), Some(&1));
    assert!(seen.len() > 500, "{}", seen.len());
    // Another tag is its own sequence.
    assert_eq!(c.get("/segment/invoices").await.id(), 1);
    // A percent-encoded tag is the same tag.
    assert_eq!(c.get("/segment/invo%69ces").await.id(), 2);

    // Health and metrics show each tag in use, by name.
    let h = c.get("/healthz").await.json();
    assert_eq!(h["status"], "ok", "{h}");
    assert_eq!(h["segments"]["state"], "ok", "{h}");
    let tags: Vec<&str> = h["segments"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tag"].as_str().unwrap())
        .collect();
    assert_eq!(tags, ["invoices", "orders"]);
    assert!(
        h["segments"]["tags"][1]["buffered"].as_u64().unwrap() > 0,
        "{h}"
    );
    let m = c.get("/metrics").await.body;
    assert_eq!(sample(&m, "vesta_segment_up"), 1.0);
    assert_eq!(
        sample(&m, "vesta_segment_numbers_issued_total"),
        (seen.len() + 2) as f64
    );
    assert_eq!(
        labelled_sample(&m, "vesta_segment_step{tag=\"invoices\"}"),
        1000.0
    );
    assert!(labelled_sample(&m, "vesta_segment_fetches_total{tag=\"orders\"}") >= 3.0);
    assert_eq!(
        labelled_sample(&m, "vesta_segment_degraded{tag=\"orders\"}"),
        0.0
    );
    assert!(labelled_sample(&m, "vesta_segment_buffered{tag=\"orders\"}") > 0.0);
    assert!(
        labelled_sample(
            &m,
            "vesta_segment_last_fetch_latency_seconds{tag=\"orders\"}"
        ) > 0.0
    );
    assert!(
        labelled_sample(
            &m,
            "vesta_http_requests_total{endpoint=\"segments\",status=\"200\"}"
        ) > 10.0
    );

    // Shutdown gives the unused tails back: the next store starts right after the last number.
    let report = server.stop().await;
    let orders = report.give_back.iter().find(|g| g.tag == "orders").unwrap();
    let GiveBackOutcome::Returned { max_id, .. } = orders.outcome else {
        panic!("{report:?}");
    };
    assert_eq!(max_id, last + 1);
    let again = open_segments(&section).await;
    let store = again.store().unwrap();
    assert_eq!(store.next("orders").await.unwrap(), last + 1);
    again.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_tag_or_the_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 100)]).await;
    let limits = RestSection {
        max_batch: 500,
        ..rest()
    };
    let server =
        spawn_with_segments(system_issuer(), limits, Some(open_segments(&section).await)).await;
    let c = server.client();
    let r = c.get("/segment/nope").await;
    assert_eq!(r.status, 404, "{r:?}");
    assert!(
        r.error()
            .starts_with("unknown tag \"nope\": no such biz_tag in leaf_alloc"),
        "{r:?}"
    );
    let r = c.get("/segments/nope?count=2").await;
    assert_eq!(r.status, 404, "{r:?}");
    // Leaf's path answers as Leaf: 500 with Spring's error body and Leaf's code -2.
    let r = c.get("/api/segment/get/nope").await;
    assert_eq!(r.status, 500, "{r:?}");
    assert_eq!(r.header("content-type"), "application/json;charset=UTF-8");
    let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["message"], "Result{id=-2, status=EXCEPTION}");
    assert_eq!(body["status"], 500);
    assert_eq!(body["error"], "Internal Server Error");
    assert_eq!(body["path"], "/api/segment/get/nope");
    assert!(body["timestamp"].as_u64().unwrap() > 1_700_000_000_000);
    let r = c.get("/api/segment/get/bad%20tag").await;
    assert_eq!(r.status, 500);
    assert!(r.body.contains("Result{id=-2, status=EXCEPTION}"), "{r:?}");

    let long = "t".repeat(129);
    for (target, needle) in [
        (
            "/segment/bad%20tag".to_owned(),
            "character ' ' is not allowed",
        ),
        ("/segment/".to_owned(), "a tag cannot be empty"),
        ("/segment/a/b".to_owned(), "character '/' is not allowed"),
        (format!("/segment/{long}"), "129 characters is too long"),
        (
            "/segments/x%2Fy?count=1".to_owned(),
            "character '/' is not allowed",
        ),
    ] {
        let r = c.get(&target).await;
        assert_eq!(r.status, 400, "{target}: {r:?}");
        let e = r.error();
        assert!(e.starts_with("invalid parameter tag: "), "{target}: {e}");
        assert!(e.contains(needle), "{target}: {e}");
    }
    for (query, needle) in [
        ("count=0", "count 0 is out of range: allowed 1..=500"),
        ("count=501", "count 501 is out of range: allowed 1..=500"),
        ("count=x", "`x` is not an integer: expected 1..=500"),
        ("", "missing required parameter count"),
        (
            "count=1&n=2",
            "unknown parameter n: /segments/{tag} accepts count",
        ),
    ] {
        let r = c.get(&format!("/segments/orders?{query}")).await;
        assert_eq!(r.status, 400, "{query}: {r:?}");
        assert!(r.error().contains(needle), "{query}: {}", r.error());
    }
    let r = c.get("/segment/orders?count=2").await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error(),
        "unknown parameter count: /segment/{tag} accepts no parameters"
    );
    let r = c.request(hyper::Method::POST, "/segment/orders").await;
    assert_eq!(r.status, 405);
    assert_eq!(
        r.error(),
        "method POST is not allowed on /segment/{tag}: use GET"
    );
    // Nothing was created implicitly: still only one row, and the server still serves.
    assert_eq!(c.get("/segment/orders").await.id(), 1);
    server.stop().await;

    // Segment mode off: 404 saying so, on all three paths.
    let plain = spawn(system_issuer(), rest()).await;
    let c = plain.client();
    for path in [
        "/segment/orders",
        "/segments/orders?count=2",
        "/api/segment/get/orders",
    ] {
        let r = c.get(path).await;
        assert_eq!(r.status, 404, "{path}");
        assert!(
            r.error().starts_with("segment mode is off"),
            "{path}: {r:?}"
        );
    }
    let h = c.get("/healthz").await.json();
    assert!(h.get("segments").is_none(), "{h}");
    assert!(!c.get("/metrics").await.body.contains("vesta_segment_"));
    plain.stop().await;
}

#[tokio::test]
async fn a_locked_database_degrades_then_refuses_then_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let mut section = segment_db(dir.path(), &[("tiny", 4)]).await;
    section.adaptive_step = false;
    section.fetch_timeout_ms = 100;
    section.wait_ms = 100;
    let server =
        spawn_with_segments(system_issuer(), rest(), Some(open_segments(&section).await)).await;
    let c = server.client();
    assert_eq!(c.get("/segment/tiny").await.id(), 1);
    // Let the prefetch land (the tag shows its next segment; bounded wait), then lock the
    // file: nothing more can be fetched.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while c.get("/healthz").await.json()["segments"]["tags"][0]["next"].is_null() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the next segment was not prefetched within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let path = dir.path().join("segments.db");
    let lock = tokio::task::spawn_blocking(move || SqliteLock::take(&path))
        .await
        .unwrap();
    let mut got = vec![];
    let refused = loop {
        let r = c.get("/segment/tiny").await;
        if r.status != 200 {
            break r;
        }
        got.push(r.id());
        assert!(
            got.len() <= 8,
            "more numbers than two segments hold: {got:?}"
        );
    };
    assert_eq!(
        got,
        (2..=8).collect::<Vec<u64>>(),
        "the buffered numbers, in order"
    );
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), "1");
    let e = refused.error();
    assert!(e.starts_with("tag \"tiny\": "), "{e}");
    let h = c.get("/healthz").await.json();
    assert_eq!(h["status"], "degraded", "{h}");
    assert_eq!(h["segments"]["state"], "degraded", "{h}");
    assert_eq!(h["segments"]["tags"][0]["state"], "down", "{h}");
    let m = c.get("/metrics").await.body;
    assert_eq!(
        labelled_sample(&m, "vesta_segment_degraded{tag=\"tiny\"}"),
        1.0
    );
    assert!(labelled_sample(&m, "vesta_segment_fetch_errors_total{tag=\"tiny\"}") >= 1.0);
    // An outage is not a table that went back: the restore guard's counter stays at 0.
    assert_eq!(
        labelled_sample(&m, "vesta_segment_moved_back_total{tag=\"tiny\"}"),
        0.0
    );
    assert!(labelled_sample(&m, "vesta_segment_floor{tag=\"tiny\"}") >= 9.0);
    // Leaf's path says -3: both segments unavailable.
    let r = c.get("/api/segment/get/tiny").await;
    assert_eq!(r.status, 500);
    assert!(r.body.contains("Result{id=-3, status=EXCEPTION}"), "{r:?}");

    tokio::task::spawn_blocking(move || lock.release())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let next = loop {
        let r = c.get("/segment/tiny").await;
        if r.status == 200 {
            break r.id();
        }
        assert!(tokio::time::Instant::now() < deadline, "no recovery: {r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(next > 8, "{next}");
    assert_eq!(c.get("/healthz").await.json()["status"], "ok");
    server.stop().await;
}

#[tokio::test]
async fn segments_answers_are_charged_to_the_unsent_bytes_budget() {
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 1_000_000)]).await;
    let mut limits = rest();
    limits.max_unsent_bytes = 1 << 20;
    limits.send_timeout_ms = 60_000;
    let server =
        spawn_with_segments(system_issuer(), limits, Some(open_segments(&section).await)).await;
    let polite = server.client();
    // Clients that grant no window pin at most 32 KiB per answer until the budget is used up.
    let hoarder = H2Conn::connect(server.addr, Some(0)).await;
    let mut streams = Vec::new();
    for _ in 0..64 {
        streams.push(hoarder.open("/segments/orders?count=10000").await.unwrap());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let refused = loop {
        let r = polite.get("/segments/orders?count=10000").await;
        if r.status == 503 {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never refused: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        refused.error().contains("server.max_unsent_bytes"),
        "{refused:?}"
    );
    // Single numbers and scrapes still work.
    polite.get("/segment/orders").await.id();
    let m = polite.get("/metrics").await.body;
    assert!(sample(&m, "vesta_http_unsent_bytes") <= (1 << 20) as f64);
    drop(streams);
    drop(hoarder);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let m = polite.get("/metrics").await.body;
        if sample(&m, "vesta_http_unsent_bytes") == 0.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "budget not given back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        numbers(&polite.get("/segments/orders?count=3").await).len(),
        3
    );
    server.stop().await;
}

#[tokio::test]
async fn a_server_whose_database_cannot_be_reached_serves_ids_and_refuses_segments() {
    // A TCP port nothing listens on yet: the store cannot be reached at start.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let section = vesta_segment::SegmentSection {
        db: Some(format!("postgres://vesta@127.0.0.1:{port}/none")),
        fetch_timeout_ms: 200,
        ..Default::default()
    };
    let segments = vesta_service::Segments::open(&section)
        .await
        .unwrap()
        .unwrap();
    let server = spawn_with_segments(system_issuer(), rest(), Some(segments)).await;
    let c = server.client();
    // IDs work; segments are refused at once, naming the database and why.
    c.get("/genid").await.id();
    let r = c.get("/segment/orders").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        r.error().starts_with(&format!(
            "database postgres://vesta@127.0.0.1:{port}/none: connecting"
        )),
        "{r:?}"
    );
    let r = c.get("/api/segment/get/orders").await;
    assert!(r.body.contains("Result{id=-1, status=EXCEPTION}"), "{r:?}");
    let h = c.get("/healthz").await;
    assert_eq!(h.status, 200);
    let h = h.json();
    assert_eq!(
        (h["status"].as_str(), h["segments"]["state"].as_str()),
        (Some("degraded"), Some("connecting"))
    );
    assert!(
        h["segments"]["error"]
            .as_str()
            .unwrap()
            .contains("connecting"),
        "{h}"
    );
    let m = c.get("/metrics").await.body;
    assert_eq!(sample(&m, "vesta_segment_up"), 0.0);
    let report = server.stop().await;
    assert!(report.give_back.is_empty());
}
