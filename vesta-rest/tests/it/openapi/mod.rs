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

mod framing;
mod paths;
mod responses;
mod schemas;

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

/// True for a path Leaf's clients use: any method, unknown query parameters ignored.
fn is_leaf(item: &Value) -> bool {
    item["x-leaf"] == true
}

/// The parameters of a path item, `$ref`s resolved.
fn parameters<'a>(spec: &'a Value, item: &'a Value) -> Vec<&'a Value> {
    item["get"]["parameters"]
        .as_array()
        .map(|ps| ps.iter().map(|p| resolve(spec, p)).collect())
        .unwrap_or_default()
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
