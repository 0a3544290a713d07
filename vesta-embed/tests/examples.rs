//! The examples in `examples/` run as a user would run them (their `run`/`serve` functions,
//! compiled in from the example files): the static issuer, the ZooKeeper lease against a real
//! ZooKeeper and against none, the hyper service over real HTTP, and the sqlx example against
//! a real SQLite file.

#[path = "../examples/embed_static.rs"]
#[allow(dead_code)]
mod embed_static;
#[path = "../examples/embed_zookeeper.rs"]
#[allow(dead_code)]
mod embed_zookeeper;
#[path = "../examples/hyper_service.rs"]
#[allow(dead_code)]
mod hyper_service;
#[path = "../examples/sqlx_insert.rs"]
#[allow(dead_code)]
mod sqlx_insert;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vesta_embed::{AsyncIssuer, GenMethod, IdFields, IssuerConfig, LeaseState};
use vesta_tests::zk::ZkServer;

#[test]
fn embed_static_issues_explains_and_makes() {
    let issued = embed_static::run(7, 5).unwrap();
    assert_eq!(issued.ids.len(), 5);
    assert!(issued.ids.windows(2).all(|w| w[0] < w[1]));
    for &id in &issued.ids {
        let f = IdFields::decode(id);
        assert_eq!((f.machine, f.gen_method), (7, GenMethod::Embed));
    }
    assert!(
        issued.explained.contains("machine    7"),
        "{}",
        issued.explained
    );
    let made = IdFields::decode(issued.made);
    assert_eq!(
        (made.time, made.seq, made.machine),
        (issued.made_time, 42, 7)
    );
}

#[test]
fn embed_zookeeper_leases_a_machine_id_and_gives_it_back() {
    let zk = ZkServer::start();
    let first = embed_zookeeper::run(&zk.connect(), 5).unwrap();
    assert!(first.machine <= 923, "embed pool: {}", first.machine);
    assert_eq!(first.ids.len(), 5);
    for &id in &first.ids {
        assert_eq!(IdFields::decode(id).machine, first.machine);
    }
    // Released at the end of `run`: the next run gets the same (lowest free) ID at once, and
    // issues after the first run's IDs (its mark).
    let second = embed_zookeeper::run(&zk.connect(), 1).unwrap();
    assert_eq!(second.machine, first.machine);
    assert!(second.ids[0] > *first.ids.last().unwrap());
}

#[test]
fn embed_zookeeper_without_zookeeper_fails_fast_and_says_so() {
    let port = vesta_tests::zk::free_ports(1)[0]; // nothing listens there
    let began = Instant::now();
    let err = embed_zookeeper::run(&format!("127.0.0.1:{port}"), 1)
        .err()
        .expect("no ZooKeeper, no issuer");
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    assert!(embed_zookeeper::is_unreachable(err.as_ref()), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "cannot reach ZooKeeper at 127.0.0.1:{port} within 2000 ms"
        )),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyper_service_hands_out_ids_over_http() {
    let config = IssuerConfig::builder().machine(3).build().unwrap();
    let ids = AsyncIssuer::start(config).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(hyper_service::serve(listener, ids.clone(), async {
        let _ = stopped.await;
    }));

    let (status, body) = get(addr, "/id").await;
    assert_eq!(status, 200, "{body}");
    let one: u64 = body.trim().parse().unwrap();
    assert_eq!(IdFields::decode(one).machine, 3);

    let (status, body) = get(addr, "/ids?count=1000").await;
    assert_eq!(status, 200);
    let many: Vec<u64> = body.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(many.len(), 1000);
    assert!(many[0] > one && many.windows(2).all(|w| w[0] < w[1]));

    let (status, body) = get(addr, "/ids?count=1001").await;
    assert_eq!(status, 400);
    assert_eq!(body, "count 1001 is out of range: allowed 1..=1000\n");
    assert_eq!(get(addr, "/nope").await.0, 404);

    // An ID as a JSON string, its base32 form in a URL, and back.
    let (status, body) = get(addr, "/order").await;
    assert_eq!(status, 200, "{body}");
    let order: serde_json::Value = serde_json::from_str(&body).unwrap();
    let id: u64 = order["id"].as_str().unwrap().parse().unwrap();
    assert!(id > many[999]);
    let reference = order["ref"].as_str().unwrap();
    assert_eq!(reference.len(), 13, "{reference}");
    let (status, body) = get(addr, &format!("/orders/{reference}")).await;
    assert_eq!(status, 200, "{body}");
    let shown: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(shown["id"], order["id"]);
    assert_eq!(shown["machine"], 3);
    let (status, body) = get(addr, "/orders/<script>").await;
    assert_eq!(status, 400, "{body}");

    stop.send(()).unwrap();
    server.await.unwrap();
    ids.shutdown().await.unwrap();
    assert_eq!(ids.issuer().status().lease.state, LeaseState::Released);
}

/// One HTTP/1.1 GET on its own connection: the status code and the body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

#[tokio::test]
async fn sqlx_insert_keys_rows_by_id_and_reads_them_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let rows = sqlx_insert::run(dir.path(), 9, 4).await.unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows.windows(2).all(|w| w[0].0 < w[1].0), "{rows:?}");
    for (k, (id, item)) in rows.iter().enumerate() {
        assert_eq!(item, &format!("item {k}"));
        let f = IdFields::decode(id.get());
        assert_eq!((f.machine, f.gen_method), (9, GenMethod::Embed));
    }
    // A restart at once adds after the first run (the state file's mark), never on its IDs:
    // the primary key would refuse a duplicate.
    let again = sqlx_insert::run(dir.path(), 9, 2).await.unwrap();
    assert_eq!(again.len(), 6);
    assert!(again.windows(2).all(|w| w[0].0 < w[1].0));
}
