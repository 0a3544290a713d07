//! Keeps docs/openapi.yaml honest against a live server:
//! - the spec's paths are exactly the server's endpoints, each with GET only but Leaf's, which
//!   declare every method; a method a path does not declare is answered 405;
//! - the spec's query parameters of each path are exactly those the server accepts (read from
//!   the server's own "unknown parameter" error) and the required ones are required;
//! - every documented status of every path is produced by a real request (and nothing
//!   undocumented is), with the documented content type, headers and a body that validates
//!   against the documented schema;
//! - every query parameter's schema accepts exactly the values the server accepts (probed at
//!   and beyond its documented range, on a max-peak and a min-granularity server);
//! - every documented framing error (`x-framing-errors`) gets its bare status and a close.
//!
//! The servers have segment mode on (an SQLite database with the tag `orders`), except one
//! that shows the segment paths' "off" answer; path parameters (`{tag}`) are probed like query
//! parameters.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use common::{
    Client, Reply, TestServer, issuer_config, leaf_issuer, open_segments, rest, segment_db, seq_db,
    seq_db_as, spawn, spawn_with_stores, system_issuer,
};
use hyper::Method;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vesta_core::IdType;
use vesta_embed::{Issuer, LeaseState};
use vesta_rest::{Endpoint, RestSection};
use vesta_segment::SegmentSection;
use vesta_service::Segments;
use yaml_rust2::{Yaml, YamlLoader};

/// A server issuing IDs, serving the segments of `section` and per-key sequences (on an
/// SQLite file of their own beside the segments').
async fn with_segments(
    issuer: Issuer,
    limits: RestSection,
    section: &SegmentSection,
) -> TestServer<vesta_embed::SystemClock> {
    let dir = section
        .db_url()
        .unwrap()
        .sqlite_path()
        .unwrap()
        .parent()
        .unwrap()
        .join(format!(
            "seq-{}",
            SEQ_DIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
    std::fs::create_dir_all(&dir).unwrap();
    let seq = seq_db(&dir).await;
    spawn_with_stores(
        issuer,
        limits,
        Some(open_segments(section).await),
        Some(seq),
    )
    .await
}

/// Numbers the sequences' directories of one segment database apart.
static SEQ_DIRS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Per-key sequences whose table can no longer be reached (their pool closed): a call that
/// needs a section's load or raise is a 503.
async fn closed_seq(dir: &std::path::Path) -> vesta_seq::Sequences {
    std::fs::create_dir_all(dir).unwrap();
    let seq = seq_db(dir).await;
    seq.close().await;
    seq
}

/// A server whose sequences are member 940 of a cluster on an SQLite file with member 941 (at
/// `127.0.0.1:1`), once they split the sets; the members, and a key 941 serves.
async fn clustered(
    dir: &std::path::Path,
    limits: RestSection,
) -> (
    TestServer<vesta_embed::SystemClock>,
    Vec<vesta_seq::cluster::Cluster>,
    String,
) {
    use vesta_seq::cluster::{Cluster, ClusterOptions, Route};
    let dir = dir.join("cluster");
    std::fs::create_dir_all(&dir).unwrap();
    let mut members = Vec::new();
    let mut seqs = Vec::new();
    for member in [940, 941] {
        let seq = seq_db_as(&dir, vesta_seq::Owner::member()).await;
        let options = ClusterOptions {
            member,
            tcp: String::new(),
            rest: format!("127.0.0.1:{}", member - 939),
            ttl: Duration::from_millis(3000),
        };
        members.push(Cluster::join(&seq, options).await.unwrap());
        seqs.push(seq);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let moved = loop {
        let routes = members[0].routes();
        let theirs =
            (0..256u64).find(|s| matches!(routes[*s as usize], Route::Owner { member: 941, .. }));
        if let Some(set) = theirs {
            break (set * 100_000).to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the members did not split the sets"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let server = spawn_with_stores(system_issuer(), limits, None, Some(seqs.remove(0))).await;
    (server, members, moved)
}

/// Segments whose database cannot be reached (nothing listens on the port).
async fn unreachable_segments() -> Arc<Segments> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let section = SegmentSection {
        db: Some(format!("postgres://vesta@127.0.0.1:{port}/none")),
        fetch_timeout_ms: 200,
        ..SegmentSection::default()
    };
    Segments::open(&section).await.unwrap().unwrap()
}

/// `path` with its parameter (`{tag}`, `{key}`) replaced by `value`.
fn fill(path: &str, value: &str) -> String {
    path.replace("{tag}", value).replace("{key}", value)
}

fn spec() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let docs = YamlLoader::load_from_str(&text).unwrap();
    assert_eq!(docs.len(), 1);
    to_json(&docs[0])
}

fn to_json(y: &Yaml) -> Value {
    match y {
        Yaml::Real(r) => serde_json::from_str(r).unwrap_or_else(|_| Value::String(r.clone())),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        Yaml::Integer(i) => i.to_string(),
                        other => panic!("unsupported key {other:?}"),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        Yaml::Null => Value::Null,
        other => panic!("unsupported YAML node {other:?}"),
    }
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve<'a>(spec: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("local refs only");
            resolve(
                spec,
                spec.pointer(pointer)
                    .unwrap_or_else(|| panic!("dangling {r}")),
            )
        }
        None => node,
    }
}

/// Validates `v` against `schema`; refuses keywords it does not implement rather than passing
/// them silently.
fn validate(spec: &Value, schema: &Value, v: &Value, at: &str) {
    let schema = resolve(spec, schema);
    let obj = schema.as_object().unwrap();
    for key in obj.keys() {
        assert!(
            [
                "type",
                "required",
                "properties",
                "additionalProperties",
                "items",
                "enum",
                "minimum",
                "maximum",
                "pattern",
                "format",
                "description",
                "example",
            ]
            .contains(&key.as_str()),
            "{at}: schema keyword {key} is not checked by this test"
        );
    }
    if let Some(t) = obj.get("type") {
        let types: Vec<&str> = match t {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().map(|x| x.as_str().unwrap()).collect(),
            other => panic!("{at}: type {other} not supported"),
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_u64() || v.is_i64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            other => panic!("{at}: type {other} not supported"),
        });
        assert!(ok, "{at}: {v} is not {t}");
        if v.is_null() {
            return;
        }
    }
    if let Some(e) = obj.get("enum").and_then(Value::as_array) {
        assert!(e.contains(v), "{at}: {v} not in {e:?}");
    }
    if let Some(min) = obj.get("minimum").and_then(Value::as_u64) {
        assert!(v.as_u64().is_some_and(|x| x >= min), "{at}: {v} < {min}");
    }
    if let Some(max) = obj.get("maximum").and_then(Value::as_u64) {
        assert!(v.as_u64().is_some_and(|x| x <= max), "{at}: {v} > {max}");
    }
    if let Some(p) = obj.get("pattern").and_then(Value::as_str) {
        if p != "^[0-9]{1,20}$" {
            let s = v.as_str().unwrap();
            assert!(
                regex::Regex::new(p).unwrap().is_match(s),
                "{at}: {s:?} !~ {p}"
            );
            return;
        }
        let s = v.as_str().unwrap();
        assert!(
            (1..=20).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()),
            "{at}: {s:?} is not a decimal ID"
        );
        assert!(s.parse::<u64>().is_ok(), "{at}: {s} overflows u64");
    }
    if let Some(f) = obj.get("format").and_then(Value::as_str) {
        assert_eq!(f, "date-time", "{at}: format {f} not supported");
        let s = v.as_str().unwrap();
        let t =
            chrono::DateTime::parse_from_rfc3339(s).unwrap_or_else(|e| panic!("{at}: {s}: {e}"));
        assert_eq!(t.offset().local_minus_utc(), 0, "{at}: {s} is not UTC");
    }
    if let Some(req) = obj.get("required").and_then(Value::as_array) {
        for k in req {
            let k = k.as_str().unwrap();
            assert!(v.get(k).is_some(), "{at}: missing required {k} in {v}");
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let o = v.as_object().unwrap();
        for (k, val) in o {
            match props.get(k) {
                Some(s) => validate(spec, s, val, &format!("{at}.{k}")),
                None => assert_ne!(
                    obj.get("additionalProperties"),
                    Some(&Value::Bool(false)),
                    "{at}: undocumented property {k}"
                ),
            }
        }
    }
    if let Some(items) = obj.get("items") {
        for (i, x) in v.as_array().unwrap().iter().enumerate() {
            validate(spec, items, x, &format!("{at}[{i}]"));
        }
    }
}

/// How to provoke each documented status: (path, status, server, method, target).
#[derive(Clone, Copy, PartialEq)]
enum Setup {
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

/// True for a path Leaf's clients use: any method, unknown query parameters ignored.
fn is_leaf(item: &Value) -> bool {
    item["x-leaf"] == true
}

const CASES: &[(&str, u16, Setup, &str, &str)] = &[
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

fn check_reply(spec: &Value, path: &str, status: u16, r: &Reply) {
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

#[tokio::test]
async fn spec_paths_are_the_servers_endpoints() {
    let spec = spec();
    let documented: BTreeSet<&str> = spec["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let served: BTreeSet<&str> = Endpoint::ALL.iter().filter_map(|e| e.path()).collect();
    assert_eq!(documented, served);
    for (path, item) in spec["paths"].as_object().unwrap() {
        let endpoint = Endpoint::from_path(&fill(path, "t").replace("{key}", "k"));
        assert_eq!(endpoint.any_method(), is_leaf(item), "{path}");
        if is_leaf(item) {
            assert_eq!(
                declared(item),
                METHODS,
                "{path}: Leaf's paths declare every method"
            );
        } else {
            assert_eq!(declared(item), ["get"], "{path}: GET only");
        }
    }
}

/// The methods an OpenAPI path item can declare.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The methods `item` declares, in [`METHODS`]' order.
fn declared(item: &Value) -> Vec<&'static str> {
    METHODS
        .into_iter()
        .filter(|m| item.get(*m).is_some())
        .collect()
}

/// A method a path does not declare is a 405 naming the path, with `Allow: GET` (what
/// schemathesis checks: `TRACE /decodeSnowflakeId` was a 404 while the path only declared
/// GET); one it declares is never a 405 — on a server of either layout, with segments.
#[tokio::test]
async fn a_method_a_path_does_not_declare_is_a_405() {
    let spec = spec();
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 1000)]).await;
    let vesta = with_segments(system_issuer(), rest(), &section).await;
    let leaf = with_segments(leaf_issuer(), rest(), &section).await;
    let mut tried = 0;
    for (template, item) in spec["paths"].as_object().unwrap() {
        let path = fill(template, "orders").replace("{key}", "k");
        let declared = declared(item);
        for server in [&vesta, &leaf] {
            for method in METHODS {
                let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let r = server.client().request(m, &path).await;
                if declared.contains(&method) {
                    assert_ne!(r.status, 405, "{method} {path} is declared: {r:?}");
                    continue;
                }
                assert_eq!(r.status, 405, "{method} {path}: {r:?}");
                assert_eq!(r.header("allow"), "GET", "{method} {path}");
                if method != "head" {
                    let want = format!(
                        "method {} is not allowed on {template}: use GET",
                        method.to_uppercase()
                    );
                    assert_eq!(r.error(), want);
                }
                tried += 1;
            }
        }
    }
    assert!(tried > 100, "{tried}");
    vesta.stop().await;
    leaf.stop().await;
}

/// The parameters of a path item, `$ref`s resolved.
fn parameters<'a>(spec: &'a Value, item: &'a Value) -> Vec<&'a Value> {
    item["get"]["parameters"]
        .as_array()
        .map(|ps| ps.iter().map(|p| resolve(spec, p)).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn spec_parameters_are_the_servers_parameters() {
    let spec = spec();
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 1000)]).await;
    let server = with_segments(system_issuer(), rest(), &section).await;
    let leaf = with_segments(leaf_issuer(), rest(), &section).await;
    for (template, item) in spec["paths"].as_object().unwrap() {
        let c = if is_leaf(item) {
            leaf.client()
        } else {
            server.client()
        };
        let all = parameters(&spec, item);
        // A path parameter is part of the path: filled with its example, always required.
        let mut path = template.clone();
        for p in all.iter().filter(|p| p["in"] == "path") {
            assert_eq!(
                p["required"], true,
                "{template}: path parameters are required"
            );
            let name = p["name"].as_str().unwrap();
            path = path.replace(&format!("{{{name}}}"), &scalar(&p["example"]));
        }
        assert!(
            !path.contains('{'),
            "{template}: a path parameter is not documented"
        );
        let params: Vec<(String, bool)> = all
            .iter()
            .filter(|p| p["in"] != "path")
            .map(|p| {
                assert_eq!(p["in"], "query");
                (
                    p["name"].as_str().unwrap().to_owned(),
                    p["required"] == true,
                )
            })
            .collect();
        if is_leaf(item) {
            leaf_parameters(&c, &path, &params).await;
            continue;
        }
        // The server lists what it accepts when given an unknown parameter.
        let r = c.get(&format!("{path}?zzz=1")).await;
        assert_eq!(r.status, 400);
        let msg = r.error();
        let accepted = msg
            .split_once(" accepts ")
            .unwrap_or_else(|| panic!("{msg}"))
            .1;
        let served: BTreeSet<&str> = if accepted == "no parameters" {
            BTreeSet::new()
        } else {
            accepted.split(", ").collect()
        };
        let documented: BTreeSet<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(documented, served, "{path}");
        assert!(msg.contains(&format!(": {template} accepts ")), "{msg}");
        // Required means required: leaving one out is a 400 naming it.
        for (name, required) in &params {
            let others: Vec<String> = params
                .iter()
                .filter(|(n, req)| n != name && *req)
                .map(|(n, _)| format!("{n}=1"))
                .collect();
            let r = c.get(&format!("{path}?{}", others.join("&"))).await;
            if *required {
                assert_eq!(r.status, 400, "{path} without {name}");
                assert_eq!(r.error(), format!("missing required parameter {name}"));
            } else {
                assert_eq!(r.status, 200, "{path} without optional {name}: {}", r.body);
            }
        }
    }
    server.stop().await;
    leaf.stop().await;
}

/// A Leaf path ignores unknown parameters (200 with them) and, as Spring does, answers a
/// missing required one with a 400 naming it.
async fn leaf_parameters(c: &Client, path: &str, params: &[(String, bool)]) {
    let given: Vec<String> = params
        .iter()
        .filter(|(_, req)| *req)
        .map(|(n, _)| format!("{n}=1"))
        .collect();
    let r = c.get(&format!("{path}?{}&zzz=1", given.join("&"))).await;
    assert_eq!(
        r.status, 200,
        "{path}: an unknown parameter is ignored: {}",
        r.body
    );
    for (name, required) in params {
        if *required {
            let r = c.get(path).await;
            assert_eq!(r.status, 400, "{path} without {name}");
            assert!(
                r.body.contains(&format!("'{name}' is not present")),
                "{}",
                r.body
            );
        }
    }
}

// Two workers: the cluster members' beats (a lease of 3 s) run beside the test's own work.
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

/// Whether a query parameter's documented schema accepts `text` (the value as sent, decoded).
/// Integers are written in decimal digits with an optional minus sign.
fn doc_accepts(spec: &Value, schema: &Value, text: &str) -> bool {
    let schema = resolve(spec, schema);
    let obj = schema.as_object().unwrap();
    for key in obj.keys() {
        assert!(
            [
                "anyOf",
                "type",
                "minimum",
                "maximum",
                "enum",
                "pattern",
                "description"
            ]
            .contains(&key.as_str()),
            "parameter schema keyword {key} is not checked by this test"
        );
    }
    if let Some(any) = obj.get("anyOf") {
        return any
            .as_array()
            .unwrap()
            .iter()
            .any(|s| doc_accepts(spec, s, text));
    }
    match obj["type"].as_str().unwrap() {
        "integer" => {
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            let Ok(v) = text.parse::<i128>() else {
                return false;
            };
            let bound = |k: &str| {
                obj.get(k).map(|b| {
                    b.as_i64()
                        .map_or_else(|| i128::from(b.as_u64().unwrap()), i128::from)
                })
            };
            bound("minimum").is_none_or(|min| v >= min)
                && bound("maximum").is_none_or(|max| v <= max)
        }
        "string" => {
            if let Some(e) = obj.get("enum").and_then(Value::as_array) {
                return e.iter().any(|x| x.as_str() == Some(text));
            }
            let pattern = obj["pattern"]
                .as_str()
                .expect("a string parameter needs a pattern or enum");
            regex::Regex::new(pattern).unwrap().is_match(text)
        }
        other => panic!("parameter type {other} is not supported"),
    }
}

/// Values worth trying on a parameter: its schema's edges, enum members and example, plus
/// forms a client might send by mistake.
fn probes(spec: &Value, param: &Value) -> Vec<String> {
    let mut out: Vec<String> = [
        "",
        " ",
        "0",
        "1",
        "-1",
        "2",
        "3",
        "4",
        "+1",
        " 1",
        "1 ",
        "1.5",
        "1e3",
        "abc",
        "0x10",
        "0X1f",
        "0x",
        "0x-1",
        "0x10000000000000000",
        "0x00000000000000001",
        "1023",
        "1024",
        "1048575",
        "1048576",
        "1073741823",
        "1073741824",
        "1099511627775",
        "1099511627776",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "REST",
        " rest",
        "Max-Peak",
        "min_granularity",
    ]
    .map(String::from)
    .to_vec();
    let mut schemas = vec![resolve(spec, &param["schema"])];
    if let Some(any) = schemas[0].get("anyOf").and_then(Value::as_array) {
        schemas = any.iter().map(|s| resolve(spec, s)).collect();
    }
    for s in schemas {
        for k in ["minimum", "maximum"] {
            if let Some(b) = s.get(k) {
                let b = b
                    .as_i64()
                    .map_or_else(|| i128::from(b.as_u64().unwrap()), i128::from);
                out.extend([b - 1, b, b + 1].map(|v| v.to_string()));
            }
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array) {
            out.extend(e.iter().map(|v| v.as_str().unwrap().to_owned()));
        }
    }
    if let Some(ex) = param.get("example") {
        out.push(scalar(ex));
    }
    if let Some(exs) = param.get("examples").and_then(Value::as_object) {
        out.extend(exs.values().map(|e| scalar(&e["value"])));
    }
    out
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Percent-encodes everything but unreserved characters, so the server decodes `text` exactly.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn spec_parameter_schemas_accept_exactly_what_the_server_accepts() {
    let spec = spec();
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 100_000)]).await;
    let peak = with_segments(system_issuer(), rest(), &section).await;
    let mut config = issuer_config();
    config.id.id_type = Some(IdType::MinGranularity);
    config.machine.id = Some(925);
    let gran = with_segments(Issuer::start(config).unwrap(), rest(), &section).await;
    let leaf_server = with_segments(leaf_issuer(), rest(), &section).await;
    let vesta_clients = [peak.client(), gran.client()];
    let leaf_clients = [leaf_server.client()];
    let mut tried = 0;
    for (template, item) in spec["paths"].as_object().unwrap() {
        let params = parameters(&spec, item);
        if params.is_empty() {
            continue;
        }
        let clients: &[Client] = if is_leaf(item) {
            &leaf_clients
        } else {
            &vesta_clients
        };
        // Leaf's path answers a tag it does not know (whatever it looks like) as Leaf does.
        let leaf = template.starts_with("/api/");
        for p in &params {
            let name = p["name"].as_str().unwrap();
            let in_path = p["in"] == "path";
            let others: Vec<String> = params
                .iter()
                .filter(|o| o["name"] != p["name"] && o["required"] == true && o["in"] == "query")
                .map(|o| {
                    format!(
                        "{}={}",
                        o["name"].as_str().unwrap(),
                        encode(&scalar(&o["example"]))
                    )
                })
                .collect();
            let tag = params
                .iter()
                .find(|o| o["in"] == "path" && o["name"] != p["name"])
                .map_or_else(String::new, |o| encode(&scalar(&o["example"])));
            for v in probes(&spec, p) {
                if in_path && v.is_empty() && leaf {
                    continue; // `/api/segment/get/` is no path of Leaf's either (404)
                }
                let mut query = others.clone();
                let path = if in_path {
                    fill(template, &encode(&v))
                } else {
                    query.push(format!("{name}={}", encode(&v)));
                    fill(template, &tag)
                };
                let target = format!("{path}?{}", query.join("&"));
                let mut accepted = false;
                for c in clients {
                    let r = c.get(&target).await;
                    match r.status {
                        200 => accepted = true,
                        // A well-formed tag that has no row; Leaf's answer for any unknown key.
                        404 if in_path && r.error().starts_with("unknown tag") => accepted = true,
                        500 if in_path && leaf && r.body.contains("status=EXCEPTION") => {
                            accepted = true
                        }
                        400 => assert!(
                            r.error().contains(name),
                            "{target}: the 400 does not name {name}: {}",
                            r.body
                        ),
                        other => panic!("{target}: {other} {}", r.body),
                    }
                }
                let documented = doc_accepts(&spec, &p["schema"], &v);
                assert_eq!(
                    documented,
                    accepted,
                    "{template} {name}={v:?}: the schema {} it, the server {} it",
                    if documented { "accepts" } else { "refuses" },
                    if accepted { "accepts" } else { "refuses" },
                );
                tried += 1;
            }
        }
    }
    assert!(tried > 400, "{tried}");
    peak.stop().await;
    gran.stop().await;
    leaf_server.stop().await;
}

#[tokio::test]
async fn framing_errors_get_the_documented_bare_status_and_a_close() {
    let spec = spec();
    let server = spawn(system_issuer(), rest()).await;
    let cases = spec["x-framing-errors"]["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let mut request = case["request"].as_str().unwrap().to_owned();
        if let Some(at) = request.find("PAD") {
            let digits: String = request[at + 3..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let pad = "a".repeat(digits.parse().unwrap());
            request.replace_range(at..at + 3 + digits.len(), &pad);
        }
        let status = case["status"].as_u64().unwrap();
        let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(3), s.read_to_end(&mut got)).await;
        let why = case["why"].as_str().unwrap();
        assert!(read.is_ok(), "{why}: the connection was not closed");
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{why}: {text:?}"));
        assert!(
            head.starts_with(&format!("http/1.1 {status} ")),
            "{why}: {head}"
        );
        assert!(head.contains("\r\ncontent-length: 0"), "{why}: {head}");
        assert!(head.contains("\r\nconnection: close"), "{why}: {head}");
        assert!(body.is_empty(), "{why}: body {body:?}");
    }
    // The server still serves.
    server.client().get("/genid").await.id();
    server.stop().await;
}
