//! Every documented status of every path produced by a real request (and nothing
//! undocumented), with the documented content type, headers and a body that validates.

use super::*;

/// How to provoke each documented status: (path, status, server, method, target).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Setup {
    /// Issuing, with segments (tag `orders`).
    Normal,
    /// Fenced, and its segment database unreachable.
    Fenced,
    /// Issuing, segment mode off.
    Off,
    /// Issuing in Leaf's layout (Leaf's snowflake paths).
    Leaf,
    /// Leaf's layout, fenced.
    LeafFenced,
    /// A member of a sequences cluster whose other member serves the key `MOVED` names.
    Clustered,
}

pub(super) const CASES: &[(&str, u16, Setup, &str, &str)] = &[
    (
        "/api/snowflake/get/{key}",
        200,
        Setup::Leaf,
        "GET",
        "/api/snowflake/get/leaf-snowflake",
    ),
    (
        "/api/snowflake/get/{key}",
        200,
        Setup::Leaf,
        "POST",
        "/api/snowflake/get/any?_=1700000000000",
    ),
    (
        "/api/snowflake/get/{key}",
        404,
        Setup::Normal,
        "GET",
        "/api/snowflake/get/leaf-snowflake",
    ),
    (
        "/api/snowflake/get/{key}",
        414,
        Setup::Leaf,
        "GET",
        "/api/snowflake/get/x?LONG",
    ),
    (
        "/api/snowflake/get/{key}",
        500,
        Setup::LeafFenced,
        "GET",
        "/api/snowflake/get/x",
    ),
    (
        "/decodeSnowflakeId",
        200,
        Setup::Leaf,
        "GET",
        "/decodeSnowflakeId?snowflakeId=1580329587126272000",
    ),
    (
        "/decodeSnowflakeId",
        200,
        Setup::Leaf,
        "PUT",
        "/decodeSnowflakeId?snowflakeId=not-a-number&other=1",
    ),
    (
        "/decodeSnowflakeId",
        400,
        Setup::Leaf,
        "GET",
        "/decodeSnowflakeId",
    ),
    (
        "/decodeSnowflakeId",
        404,
        Setup::Normal,
        "GET",
        "/decodeSnowflakeId?snowflakeId=1",
    ),
    (
        "/decodeSnowflakeId",
        414,
        Setup::Leaf,
        "GET",
        "/decodeSnowflakeId?LONG",
    ),
    // Segments first, so /healthz below shows a tag in use.
    (
        "/segment/{tag}",
        200,
        Setup::Normal,
        "GET",
        "/segment/orders",
    ),
    (
        "/segment/{tag}",
        400,
        Setup::Normal,
        "GET",
        "/segment/bad%20tag",
    ),
    ("/segment/{tag}", 404, Setup::Normal, "GET", "/segment/nope"),
    ("/segment/{tag}", 404, Setup::Off, "GET", "/segment/orders"),
    (
        "/segment/{tag}",
        405,
        Setup::Normal,
        "POST",
        "/segment/orders",
    ),
    (
        "/segment/{tag}",
        414,
        Setup::Normal,
        "GET",
        "/segment/orders?LONG",
    ),
    (
        "/segment/{tag}",
        503,
        Setup::Fenced,
        "GET",
        "/segment/orders",
    ),
    (
        "/segments/{tag}",
        200,
        Setup::Normal,
        "GET",
        "/segments/orders?count=25",
    ),
    (
        "/segments/{tag}",
        400,
        Setup::Normal,
        "GET",
        "/segments/orders?count=0",
    ),
    (
        "/segments/{tag}",
        404,
        Setup::Normal,
        "GET",
        "/segments/nope?count=2",
    ),
    (
        "/segments/{tag}",
        404,
        Setup::Off,
        "GET",
        "/segments/orders?count=2",
    ),
    (
        "/segments/{tag}",
        405,
        Setup::Normal,
        "PUT",
        "/segments/orders?count=2",
    ),
    (
        "/segments/{tag}",
        414,
        Setup::Normal,
        "GET",
        "/segments/orders?LONG",
    ),
    (
        "/segments/{tag}",
        503,
        Setup::Fenced,
        "GET",
        "/segments/orders?count=2",
    ),
    ("/seq/{key}", 200, Setup::Normal, "GET", "/seq/42"),
    (
        "/seq/{key}",
        200,
        Setup::Normal,
        "GET",
        "/seq/chat%3A7?count=5&format=json",
    ),
    ("/seq/{key}", 400, Setup::Normal, "GET", "/seq/"),
    ("/seq/{key}", 400, Setup::Normal, "GET", "/seq/42?count=0"),
    ("/seq/{key}", 400, Setup::Normal, "GET", "/seq/%zz"),
    ("/seq/{key}", 404, Setup::Off, "GET", "/seq/42"),
    ("/seq/{key}", 405, Setup::Normal, "POST", "/seq/42"),
    ("/seq/{key}", 414, Setup::Normal, "GET", "/seq/42?LONG"),
    ("/seq/{key}", 503, Setup::Fenced, "GET", "/seq/42"),
    (
        "/seq/{key}",
        307,
        Setup::Clustered,
        "GET",
        "/seq/MOVED?count=2",
    ),
    (
        "/seq/{key}/current",
        307,
        Setup::Clustered,
        "GET",
        "/seq/MOVED/current",
    ),
    (
        "/seq/{key}/current",
        200,
        Setup::Normal,
        "GET",
        "/seq/42/current",
    ),
    (
        "/seq/{key}/current",
        200,
        Setup::Normal,
        "GET",
        "/seq/42/current?format=json",
    ),
    (
        "/seq/{key}/current",
        400,
        Setup::Normal,
        "GET",
        "/seq/%FF/current",
    ),
    (
        "/seq/{key}/current",
        400,
        Setup::Normal,
        "GET",
        "/seq/%4/current",
    ),
    (
        "/seq/{key}/current",
        404,
        Setup::Off,
        "GET",
        "/seq/42/current",
    ),
    (
        "/seq/{key}/current",
        405,
        Setup::Normal,
        "PUT",
        "/seq/42/current",
    ),
    (
        "/seq/{key}/current",
        414,
        Setup::Normal,
        "GET",
        "/seq/42/current?LONG",
    ),
    (
        "/seq/{key}/current",
        503,
        Setup::Fenced,
        "GET",
        "/seq/42/current",
    ),
    (
        "/api/segment/get/{tag}",
        200,
        Setup::Normal,
        "GET",
        "/api/segment/get/orders",
    ),
    (
        "/api/segment/get/{tag}",
        200,
        Setup::Normal,
        "POST",
        "/api/segment/get/orders?x=1",
    ),
    (
        "/api/segment/get/{tag}",
        404,
        Setup::Off,
        "GET",
        "/api/segment/get/orders",
    ),
    (
        "/api/segment/get/{tag}",
        414,
        Setup::Normal,
        "GET",
        "/api/segment/get/orders?LONG",
    ),
    (
        "/api/segment/get/{tag}",
        500,
        Setup::Normal,
        "GET",
        "/api/segment/get/nope",
    ),
    (
        "/api/segment/get/{tag}",
        500,
        Setup::Fenced,
        "GET",
        "/api/segment/get/orders",
    ),
    ("/genid", 200, Setup::Normal, "GET", "/genid"),
    ("/genid", 400, Setup::Normal, "GET", "/genid?x=1"),
    ("/genid", 405, Setup::Normal, "POST", "/genid"),
    ("/genid", 414, Setup::Normal, "GET", "/genid?LONG"),
    ("/genid", 503, Setup::Fenced, "GET", "/genid"),
    ("/genids", 200, Setup::Normal, "GET", "/genids?count=25"),
    ("/genids", 400, Setup::Normal, "GET", "/genids?count=0"),
    ("/genids", 405, Setup::Normal, "DELETE", "/genids?count=1"),
    ("/genids", 414, Setup::Normal, "GET", "/genids?LONG"),
    ("/genids", 503, Setup::Fenced, "GET", "/genids?count=2"),
    (
        "/expid",
        200,
        Setup::Normal,
        "GET",
        "/expid?id=0x259776244000079c",
    ),
    ("/expid", 200, Setup::Normal, "GET", "/expid?id=-1"),
    ("/expid", 400, Setup::Normal, "GET", "/expid?id=x"),
    ("/expid", 405, Setup::Normal, "PUT", "/expid?id=1"),
    ("/expid", 414, Setup::Normal, "GET", "/expid?LONG"),
    (
        "/makeid",
        200,
        Setup::Normal,
        "GET",
        "/makeid?time=5&seq=6&machine=7&genMethod=rest&type=1&version=1",
    ),
    ("/makeid", 400, Setup::Normal, "GET", "/makeid?time=5"),
    (
        "/makeid",
        405,
        Setup::Normal,
        "PATCH",
        "/makeid?time=5&seq=6",
    ),
    ("/makeid", 414, Setup::Normal, "GET", "/makeid?LONG"),
    (
        "/transtime",
        200,
        Setup::Normal,
        "GET",
        "/transtime?time=1000",
    ),
    (
        "/transtime",
        400,
        Setup::Normal,
        "GET",
        "/transtime?time=1073741824",
    ),
    (
        "/transtime",
        405,
        Setup::Normal,
        "POST",
        "/transtime?time=1",
    ),
    ("/transtime", 414, Setup::Normal, "GET", "/transtime?LONG"),
    ("/healthz", 200, Setup::Normal, "GET", "/healthz"),
    ("/healthz", 400, Setup::Normal, "GET", "/healthz?deep=1"),
    ("/healthz", 405, Setup::Normal, "POST", "/healthz"),
    ("/healthz", 414, Setup::Normal, "GET", "/healthz?LONG"),
    ("/healthz", 503, Setup::Fenced, "GET", "/healthz"),
    ("/metrics", 200, Setup::Normal, "GET", "/metrics"),
    ("/metrics", 200, Setup::Fenced, "GET", "/metrics"),
    (
        "/metrics",
        400,
        Setup::Normal,
        "GET",
        "/metrics?format=json",
    ),
    ("/metrics", 405, Setup::Normal, "POST", "/metrics"),
    ("/metrics", 414, Setup::Normal, "GET", "/metrics?LONG"),
];

pub(super) fn check_reply(spec: &Value, path: &str, status: u16, r: &Reply) {
    let at = format!("{path} {status}");
    assert_eq!(r.status, status, "{at}: {r:?}");
    let responses = &spec["paths"][path]["get"]["responses"];
    let doc = resolve(spec, &responses[status.to_string()]);
    assert!(doc.is_object(), "{at}: status not documented");
    let content = doc["content"].as_object().expect("content documented");
    let ct = r.header("content-type");
    // The documented media type the answer has (`/seq`'s 200: text, or JSON with format=json).
    let (media, body_doc) = content
        .iter()
        .find(|(media, _)| ct == *media || ct.starts_with(&format!("{media};")))
        .unwrap_or_else(|| panic!("{at}: content-type {ct} is not documented"));
    if let Some(headers) = doc.get("headers").and_then(Value::as_object) {
        for (name, h) in headers {
            let h = resolve(spec, h);
            let value = r.header(name);
            assert!(!value.is_empty(), "{at}: documented header {name} missing");
            let v = match h["schema"]["type"].as_str() {
                Some("integer") => Value::from(value.parse::<u64>().unwrap()),
                _ => Value::String(value.to_owned()),
            };
            validate(spec, &h["schema"], &v, &format!("{at} header {name}"));
        }
    }
    let body = if media == "application/json" {
        serde_json::from_str(&r.body).unwrap()
    } else {
        Value::String(r.body.clone())
    };
    validate(spec, &body_doc["schema"], &body, &at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_response_is_what_the_server_sends() {
    let spec = spec();
    let mut documented: BTreeMap<(String, u16), bool> = BTreeMap::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for status in item["get"]["responses"].as_object().unwrap().keys() {
            documented.insert((path.clone(), status.parse().unwrap()), false);
        }
    }
    let limits = RestSection {
        max_uri_bytes: 256,
        ..rest()
    };
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 1000)]).await;
    let normal = with_segments(system_issuer(), limits.clone(), &section).await;
    let fenced = spawn_with_stores(
        system_issuer(),
        limits.clone(),
        Some(unreachable_segments().await),
        Some(closed_seq(&dir.path().join("closed")).await),
    )
    .await;
    let off = spawn(system_issuer(), limits.clone()).await;
    let (clustered, _members, moved) = clustered(dir.path(), limits.clone()).await;
    let leaf = spawn(leaf_issuer(), limits.clone()).await;
    let leaf_fenced = spawn(leaf_issuer(), limits).await;
    fenced
        .issuer
        .fence_for_test(LeaseState::Fenced, "the machine-ID lease was lost");
    leaf_fenced
        .issuer
        .fence_for_test(LeaseState::Fenced, "the machine-ID lease was lost");
    for &(path, status, setup, method, target) in CASES {
        let covered = documented
            .get_mut(&(path.to_owned(), status))
            .unwrap_or_else(|| panic!("{path} {status} is sent but not documented"));
        *covered = true;
        let target = target
            .replace("LONG", &format!("x={}", "1".repeat(300)))
            .replace("MOVED", &moved);
        let c: Client = match setup {
            Setup::Normal => normal.client(),
            Setup::Fenced => fenced.client(),
            Setup::Off => off.client(),
            Setup::Leaf => leaf.client(),
            Setup::LeafFenced => leaf_fenced.client(),
            Setup::Clustered => clustered.client(),
        };
        let r = c
            .request(Method::from_bytes(method.as_bytes()).unwrap(), &target)
            .await;
        check_reply(&spec, path, status, &r);
    }
    let missing: Vec<_> = documented
        .iter()
        .filter(|(_, c)| !**c)
        .map(|(k, _)| k)
        .collect();
    assert!(
        missing.is_empty(),
        "documented but never provoked: {missing:?}"
    );
    // Unknown paths: the components' NotFound response.
    let r = normal.client().get("/v2/genid").await;
    assert_eq!(r.status, 404);
    let nf = &spec["components"]["responses"]["NotFound"]["content"]["application/json"];
    validate(
        &spec,
        &nf["schema"],
        &serde_json::from_str(&r.body).unwrap(),
        "404",
    );
    // The segment case ran first: /healthz showed the tag, and validated against its schema.
    let h = normal.client().get("/healthz").await.json();
    assert_eq!(h["segments"]["tags"][0]["tag"], "orders", "{h}");
    normal.stop().await;
    fenced.stop().await;
    off.stop().await;
    leaf.stop().await;
    leaf_fenced.stop().await;
}
