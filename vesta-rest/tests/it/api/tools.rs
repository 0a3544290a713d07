//! `/expid`, `/makeid` and `/transtime`: an ID explained, made from fields, a time value read.

use super::*;

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
