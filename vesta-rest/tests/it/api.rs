//! Every endpoint and every error path, over real HTTP against a real server on an ephemeral
//! loopback port: status codes, content types, JSON shapes, IDs as strings, and that the
//! server keeps serving after each bad request.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::{Client, T0, issuer_config, manual_issuer, rest, sample, spawn, system_issuer};
use hyper::Method;
use vesta_core::{Epoch, GenMethod, IdFields, IdType, ManualClock};
use vesta_embed::Issuer;
use vesta_rest::RestSection;

fn decode(id: u64) -> IdFields {
    IdFields::decode(id)
}

#[tokio::test]
async fn genid_issues_rest_ids_from_the_server_pool() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    let r = c.get("/genid").await;
    assert_eq!(r.header("cache-control"), "no-store");
    let first = r.id();
    let f = decode(first);
    assert_eq!(
        (f.gen_method, f.machine, f.id_type, f.version),
        (GenMethod::Rest, 924, IdType::MaxPeak, 0)
    );
    let second = c.get("/genid").await.id();
    assert!(second > first, "{second} after {first}");
    server.stop().await;
}

#[tokio::test]
async fn genids_returns_distinct_ids_as_json_strings() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    let v = c.get("/genids?count=500").await.json();
    let obj = v.as_object().unwrap();
    assert_eq!(obj.keys().collect::<Vec<_>>(), ["ids"]);
    let ids: Vec<u64> = obj["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().expect("IDs are strings").parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 500);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in issue order");
    assert!(
        ids.iter()
            .all(|&id| decode(id).gen_method == GenMethod::Rest)
    );
    // The cap itself is accepted.
    let v = c.get("/genids?count=10000").await.json();
    assert_eq!(v["ids"].as_array().unwrap().len(), 10_000);
    server.stop().await;
}

/// `?format=` on /genid and /genids: each form's text reads back to an ID of this server (via
/// `/expid`, which takes every form), the fixed-width forms sort as the IDs do, and a bad form
/// is a 400 naming the parameter and the forms.
#[tokio::test]
async fn ids_come_in_the_form_asked_for() {
    use vesta_core::Form;
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    for form in Form::ALL {
        let text = c.get(&format!("/genid?format={form}")).await.body;
        let id = Form::decode(form, &text).unwrap_or_else(|| panic!("{form}: {text:?}"));
        assert_eq!(decode(id).gen_method, GenMethod::Rest, "{form}");
        let explained = c.get(&format!("/expid?id={text}")).await.json();
        if !text.bytes().all(|b| b.is_ascii_digit()) || form == Form::Decimal {
            assert_eq!(explained["id"], id.to_string(), "{form}: {explained}");
        }
        let v = c
            .get(&format!("/genids?count=300&format={form}"))
            .await
            .json();
        let texts: Vec<&str> = v["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        assert_eq!(texts.len(), 300);
        let ids: Vec<u64> = texts.iter().map(|t| form.decode(t).unwrap()).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{form}: in issue order"
        );
        if form.sorts() {
            assert!(texts.windows(2).all(|w| w[0] < w[1]), "{form}: text sorts");
        }
    }
    let r = c.get("/genid?format=b64").await;
    assert_eq!(r.status, 400);
    assert!(
        r.error().contains("format") && r.error().contains("base62"),
        "{r:?}"
    );
    c.get("/genid").await.id();
    server.stop().await;
}

/// More IDs than one millisecond holds: the handler sleeps for the next unit (it never blocks
/// a worker) and the response still has every ID, spread over several units.
#[tokio::test]
async fn genids_waits_for_later_units_without_blocking() {
    let (issuer, clock) = manual_issuer(IdType::MinGranularity);
    let server = spawn(
        issuer,
        RestSection {
            max_batch: 3000,
            ..rest()
        },
    )
    .await;
    let c = server.client();
    let req = tokio::spawn({
        let c = c.clone();
        async move { c.get("/genids?count=3000").await }
    });
    // While that request waits, the same workers still answer others.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!req.is_finished(), "the manual clock has not moved yet");
    assert_eq!(c.get("/healthz").await.status, 200);
    while !req.is_finished() {
        clock.advance(1);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let v = req.await.unwrap().json();
    let ids: Vec<u64> = v["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 3000);
    let times: HashSet<u64> = ids.iter().map(|&id| decode(id).time).collect();
    assert!(times.len() >= 3, "3000 IDs need 3 ms units, got {times:?}");
    let m = c.get("/metrics").await.body;
    assert!(sample(&m, "vesta_sequence_waits_total") >= 2.0, "{m}");
    assert_eq!(sample(&m, "vesta_ids_issued_total"), 3000.0);
    server.stop().await;
}

/// `/genid` when the unit's sequence is used up: the request waits (on the async path) for the
/// next unit instead of failing or blocking a worker.
#[tokio::test]
async fn genid_waits_for_the_next_unit_when_the_sequence_is_used_up() {
    let (issuer, clock) = manual_issuer(IdType::MinGranularity);
    let server = spawn(issuer, rest()).await;
    let c = server.client();
    let v = c.get("/genids?count=1024").await.json();
    let last: u64 = v["ids"][1023].as_str().unwrap().parse().unwrap();
    assert_eq!(decode(last).seq, 1023, "the whole unit is used");
    let waiting = tokio::spawn({
        let c = c.clone();
        async move { c.get("/genid").await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished());
    assert_eq!(c.get("/healthz").await.status, 200, "workers stay free");
    clock.advance(1);
    let id = waiting.await.unwrap().id();
    assert_eq!(decode(id).time, decode(last).time + 1);
    assert_eq!(decode(id).seq, 0);
    let m = c.get("/metrics").await.body;
    assert!(sample(&m, "vesta_sequence_waits_total") >= 1.0);
    server.stop().await;
}

#[tokio::test]
async fn expid_explains_with_vestas_keys_in_every_id_form() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    let id = c.get("/genid").await.id();
    let f = decode(id);
    let expected = serde_json::json!({
        "id": id.to_string(),
        "version": 0,
        "type": 0,
        "genMethod": 2,
        "time": f.time,
        "seq": f.seq,
        "machine": 924,
        "timestamp": Epoch::rfc3339(f.unix_ms(Epoch::VESTA)),
        "typeName": "max-peak",
        "genMethodName": "rest",
    });
    assert_eq!(c.get(&format!("/expid?id={id}")).await.json(), expected);
    assert_eq!(c.get(&format!("/expid?id={id:#x}")).await.json(), expected);
    // A version-1 ID written as a negative Java long.
    let v1 = IdFields { version: 1, ..f }.encode().unwrap();
    let r = c.get(&format!("/expid?id={}", v1 as i64)).await.json();
    assert_eq!(r["id"], v1.to_string());
    assert_eq!(r["version"], 1);
    server.stop().await;
}

#[tokio::test]
async fn makeid_defaults_to_the_servers_own_fields() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    let id = c.get("/makeid?time=100&seq=5").await.id();
    assert_eq!(
        decode(id),
        IdFields {
            version: 0,
            id_type: IdType::MaxPeak,
            gen_method: GenMethod::Rest,
            time: 100,
            seq: 5,
            machine: 924,
        }
    );
    let id = c
        .get("/makeid?time=7&seq=3&machine=3&genMethod=embed&type=1&version=1")
        .await
        .id();
    assert_eq!(
        decode(id),
        IdFields {
            version: 1,
            id_type: IdType::MinGranularity,
            gen_method: GenMethod::Embed,
            time: 7,
            seq: 3,
            machine: 3,
        }
    );
    let id = c
        .get("/makeid?time=7&seq=3&genMethod=1&type=min-granularity")
        .await
        .id();
    assert_eq!(decode(id).gen_method, GenMethod::Server);
    // make(explain(x)) == x, through the API.
    let issued = c.get("/genid").await.id();
    let x = c.get(&format!("/expid?id={issued}")).await.json();
    let remade = c
        .get(&format!(
            "/makeid?time={}&seq={}&machine={}&genMethod={}&type={}&version={}",
            x["time"], x["seq"], x["machine"], x["genMethod"], x["type"], x["version"]
        ))
        .await
        .id();
    assert_eq!(remade, issued);
    server.stop().await;
}

#[tokio::test]
async fn transtime_uses_the_servers_unit() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    let r = c.get("/transtime?time=0").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), "text/plain; charset=utf-8");
    assert_eq!(r.body, "2014-12-31T16:00:00.000Z");
    assert_eq!(
        c.get("/transtime?time=86400").await.body,
        "2015-01-01T16:00:00.000Z"
    );
    server.stop().await;
    let (issuer, _clock) = manual_issuer(IdType::MinGranularity);
    let server = spawn(issuer, rest()).await;
    assert_eq!(
        server.client().get("/transtime?time=1500").await.body,
        "2014-12-31T16:00:01.500Z"
    );
    server.stop().await;
}

/// Inside the end-of-life margin the server still issues and answers 200, but says it is
/// degraded and why; the metrics carry the margin for alert rules.
#[tokio::test]
async fn healthz_is_degraded_inside_the_end_of_life_margin() {
    let mut config = issuer_config();
    // With this epoch max-peak IDs end in January 2028, about four years after T0.
    config.id.epoch = Some("1994-01-01T00:00:00Z".parse().unwrap());
    let issuer = Issuer::start_with_clock(config, Arc::new(ManualClock::new(T0))).unwrap();
    let server = spawn(issuer, rest()).await;
    let c = server.client();
    let r = c.get("/healthz").await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["status"], "degraded");
    assert_eq!(v["endOfLife"], "2028-01-10T13:37:03.999Z");
    let warning = v["warning"].as_str().unwrap();
    assert!(warning.contains("1517 days (4.2 years) left"), "{warning}");
    assert!(warning.contains("plan a new epoch"), "{warning}");
    c.get("/genid").await.id();
    let m = c.get("/metrics").await.body;
    assert_eq!(
        sample(&m, "vesta_end_of_life_margin_seconds"),
        1826.0 * 86400.0
    );
    assert!(sample(&m, "vesta_end_of_life_remaining_seconds") < 1826.0 * 86400.0);
    server.stop().await;
}

#[tokio::test]
async fn healthz_and_metrics_report_the_issuer() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    let r = c.get("/healthz").await;
    assert_eq!(r.status, 200);
    let mut health = r.json();
    let left = health["endOfLifeSecondsLeft"].take().as_u64().unwrap();
    assert!(left > 5 * 365 * 86400 && left < 35 * 365 * 86400, "{left}");
    // The kernel's view of the clock, where it tells (this machine's own state, either way).
    if let Some(kernel) = vesta_embed::kernel_sync() {
        let clock = health.as_object_mut().unwrap().remove("clock").unwrap();
        assert_eq!(clock["synchronised"], kernel.synchronised, "{clock}");
        assert!(clock["maxErrorMs"].is_u64(), "{clock}");
    }
    assert_eq!(
        health,
        serde_json::json!({"status": "ok", "lease": "static", "machine": 924, "genMethod": 2,
            "layout": "vesta", "type": 0, "endOfLife": "2049-01-09T05:37:03.999Z",
            "endOfLifeSecondsLeft": null})
    );
    for _ in 0..3 {
        c.get("/genid").await.id();
    }
    c.get("/genids?count=10").await.json();
    assert_eq!(c.get("/nope").await.status, 404);
    let r = c.get("/metrics").await;
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .starts_with("application/openmetrics-text")
    );
    let m = &r.body;
    assert_eq!(sample(m, "vesta_ids_issued_total"), 13.0);
    assert_eq!(
        sample(
            m,
            "vesta_http_requests_total{endpoint=\"genid\",status=\"200\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(
            m,
            "vesta_http_requests_total{endpoint=\"other\",status=\"404\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            m,
            "vesta_http_request_duration_seconds_count{endpoint=\"genid\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(
            m,
            "vesta_http_request_duration_seconds_bucket{le=\"+Inf\",endpoint=\"genid\"}"
        ),
        3.0
    );
    assert_eq!(sample(m, "vesta_lease_state{state=\"static\"}"), 1.0);
    assert_eq!(sample(m, "vesta_lease_state{state=\"fenced\"}"), 0.0);
    assert_eq!(sample(m, "vesta_issuing"), 1.0);
    assert_eq!(sample(m, "vesta_machine_id"), 924.0);
    // This client's one keep-alive connection, beside the limit (shared with the TCP server).
    assert_eq!(sample(m, "vesta_connections"), 1.0);
    assert_eq!(sample(m, "vesta_connections_max"), 1024.0);
    assert_eq!(sample(m, "vesta_lease_machine_changes_total"), 0.0);
    assert_eq!(sample(m, "vesta_layout_capacity_per_second"), 1_048_576.0);
    assert_eq!(sample(m, "vesta_clock_rollbacks_total"), 0.0);
    assert_eq!(sample(m, "vesta_lease_fence_events_total"), 0.0);
    // Max-peak with Vesta's epoch ends in January 2049.
    let eol = sample(m, "vesta_end_of_life_remaining_seconds");
    assert!(
        eol > 5.0 * 365.0 * 86400.0 && eol < 35.0 * 365.0 * 86400.0,
        "{eol}"
    );
    assert!(m.contains("vesta_issuer_info{gen_method=\"rest\",type=\"max-peak\""));
    for line in m.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        assert!(line.starts_with("vesta_"), "unprefixed metric: {line}");
    }
    assert!(m.ends_with("# EOF\n"));
    server.stop().await;
}

#[tokio::test]
async fn clock_rollbacks_are_ridden_out_then_refused_and_counted() {
    let (issuer, clock) = manual_issuer(IdType::MaxPeak);
    let server = spawn(issuer, rest()).await;
    let c = server.client();
    clock.set(T0 + 2_000);
    let a = c.get("/genid").await.id();
    clock.set(T0 + 1_500); // back 500 ms, within max-peak's 1000 ms tolerance
    let b = c.get("/genid").await.id();
    assert!(b > a);
    clock.set(T0 - 5_000); // back 7 s: refused
    let r = c.get("/genid").await;
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), "1");
    let msg = r.error();
    assert!(msg.contains("behind the last issued time"), "{msg}");
    let m = c.get("/metrics").await.body;
    assert_eq!(sample(&m, "vesta_clock_rollbacks_total"), 1.0);
    assert_eq!(sample(&m, "vesta_clock_rollback_refusals_total"), 1.0);
    clock.set(T0 + 3_000);
    assert!(c.get("/genid").await.id() > b);
    server.stop().await;
}

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
