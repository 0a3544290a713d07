//! Leaf's paths answer as Leaf's controllers map them (`@RequestMapping` without a method):
//! any method, and the query string ignored (a cache buster, a parameter Leaf does not read),
//! on `/api/segment/get/{key}`, `/api/snowflake/get/{key}` and `/decodeSnowflakeId`, with
//! Leaf's bodies for failures whatever the method. vesta's own paths stay `GET` only.

use crate::common;

use common::{leaf_issuer, rest, segment_db, spawn_with_segments};
use hyper::Method;

/// A JSON body as Spring Boot labels it (`application/json;charset=UTF-8`).
fn leaf_json(r: &common::Reply) -> serde_json::Value {
    assert_eq!(r.header("content-type"), "application/json;charset=UTF-8");
    serde_json::from_str(&r.body).unwrap()
}

const METHODS: [Method; 4] = [Method::GET, Method::POST, Method::PUT, Method::DELETE];

#[tokio::test]
async fn leafs_paths_answer_any_method_and_ignore_the_query_string() {
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 1000)]).await;
    let segments = common::open_segments(&section).await;
    let server = spawn_with_segments(leaf_issuer(), rest(), Some(segments)).await;
    let c = server.client();
    let (mut last_number, mut last_id) = (0, 0);
    for method in METHODS {
        for query in ["", "?x=1", "?_=1700000000000&x=%zz"] {
            let target = format!("/api/segment/get/orders{query}");
            let r = c.request(method.clone(), &target).await;
            assert_eq!(r.status, 200, "{method} {target}: {r:?}");
            assert_eq!(r.header("content-type"), "text/plain; charset=utf-8");
            let n = r.id();
            assert!(
                n > last_number,
                "{method} {target}: {n} after {last_number}"
            );
            last_number = n;

            let target = format!("/api/snowflake/get/any-key{query}");
            let r = c.request(method.clone(), &target).await;
            assert_eq!(r.status, 200, "{method} {target}: {r:?}");
            let id = r.id();
            assert!(id > last_id, "{method} {target}: {id} after {last_id}");
            assert_eq!(
                (id >> 12) & 0x3ff,
                924,
                "{method} {target}: Leaf's workerId"
            );
            last_id = id;

            let target = format!(
                "/decodeSnowflakeId?snowflakeId={id}{}",
                query.replace('?', "&")
            );
            let r = c.request(method.clone(), &target).await;
            assert_eq!(r.status, 200, "{method} {target}: {r:?}");
            assert_eq!(leaf_json(&r)["workerId"], "924", "{method} {target}");
        }
        // Failures are Leaf's whatever the method: an unknown tag is -2.
        let r = c.request(method.clone(), "/api/segment/get/nope?x=1").await;
        assert_eq!(r.status, 500, "{method}: {r:?}");
        assert_eq!(leaf_json(&r)["message"], "Result{id=-2, status=EXCEPTION}");
        assert_eq!(leaf_json(&r)["path"], "/api/segment/get/nope");
    }
    // vesta's own segment path keeps its strictness.
    let r = c.request(Method::POST, "/segment/orders").await;
    assert_eq!((r.status, r.header("allow")), (405, "GET"));
    let r = c.get("/segment/orders?x=1").await;
    assert_eq!(r.status, 400, "{r:?}");
    server.stop().await;
}
