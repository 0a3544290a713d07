//! `/genid` and `/genids`: IDs of the server pool, distinct, in every form, waiting for a
//! later unit without blocking, and a clock rollback ridden out then refused.

use super::*;

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
