//! `vesta serve rest --segment-db` end to end against a real PostgreSQL server: the real
//! binary started while the database is down (IDs served, segments refused and reported, then
//! served once the database answers), numbers interleaved with Leaf's own fetch code on the same
//! tag without a duplicate, the unused tail given back on SIGTERM; and the start refused in one
//! line for a bad URL or a missing table.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use vesta_tests::bin::{sigterm_and_wait, vesta_cmd, vesta_fails, vesta_ok};
use vesta_tests::db::Postgres;
use vesta_tests::leaf::LeafAllocator;

/// `GET path`: the status and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    (status, out.split_once("\r\n\r\n").unwrap().1.to_owned())
}

fn number(addr: &str, path: &str) -> u64 {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    body.parse().unwrap()
}

#[test]
fn serve_rest_with_a_segment_database_that_comes_and_goes() {
    let mut pg = Postgres::start();
    let url = pg.create_database("leaf");
    vesta_ok(&["segment", "init", "--db", &url]);
    vesta_ok(&[
        "segment", "create", "orders", "--step", "1000", "--db", &url,
    ]);
    pg.stop();

    // The database is down: the server starts, serves IDs, refuses segments and says why.
    let mut child = vesta_cmd([
        "serve",
        "rest",
        "--listen",
        "127.0.0.1:0",
        "--machine",
        "1001",
        "--segment-db",
        &url,
    ])
    .stderr(Stdio::piped())
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    // Log lines (the warning about the database) come first; then the server's own lines.
    let mut next_line = || {
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        line
    };
    let mut line = next_line();
    while line.contains("WARN") {
        assert!(line.contains("segments unavailable"), "{line:?}");
        line = next_line();
    }
    let addr = line
        .strip_prefix("vesta-rest listening on http://")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected line: {line:?}"))
        .to_owned();
    let line = next_line();
    assert!(
        line.starts_with("vesta-rest serves no segment numbers yet (retrying in the background)"),
        "{line:?}"
    );
    number(&addr, "/genid");
    let (status, body) = get(&addr, "/segment/orders");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains(&format!("database {url}: connecting")),
        "{body}"
    );
    let (status, health) = get(&addr, "/healthz");
    assert_eq!(status, 200);
    assert!(health.contains(r#""state":"connecting""#), "{health}");

    // The database returns: segments are served without a restart.
    pg.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    let first = loop {
        let (status, body) = get(&addr, "/segment/orders");
        if status == 200 {
            break body.parse::<u64>().unwrap();
        }
        assert!(Instant::now() < deadline, "segments never came: {body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(first, 1);

    // Leaf's own code on the same tag, interleaved: no number is issued twice.
    let mut leaf = LeafAllocator::connect(&url);
    let mut ours = BTreeSet::from([first]);
    let mut leafs = Vec::new();
    let mut last = first;
    for round in 0..6 {
        leafs.push(leaf.fetch("orders"));
        let batch = get(&addr, "/segments/orders?count=700").1;
        let v: serde_json::Value = serde_json::from_str(&batch).unwrap();
        for n in v["ids"].as_array().unwrap() {
            let n: u64 = n.as_str().unwrap().parse().unwrap();
            assert!(n > last, "round {round}: {n} after {last}");
            last = n;
            assert!(ours.insert(n));
        }
        let n = number(&addr, "/api/segment/get/orders");
        assert!(n > last);
        last = n;
        ours.insert(n);
    }
    for r in &leafs {
        let hit = ours.range(r.start as u64..r.end as u64).next();
        assert!(hit.is_none(), "Leaf's {r:?} overlaps ours at {hit:?}");
    }
    let (_, metrics) = get(&addr, "/metrics");
    assert!(metrics.contains("vesta_segment_up 1"), "{metrics}");
    assert!(
        metrics.contains("vesta_segment_fetches_total{tag=\"orders\"}"),
        "{metrics}"
    );

    // SIGTERM: the unused tail goes back, unless Leaf took a segment after ours.
    let status = sigterm_and_wait(&mut child, Duration::from_secs(15));
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "exit {status}: {rest}");
    assert!(rest.contains("machine 1001 released"), "{rest}");
    let max_id: u64 = pg
        .psql(
            "leaf",
            "SELECT max_id FROM leaf_alloc WHERE biz_tag = 'orders'",
        )
        .trim()
        .parse()
        .unwrap();
    if rest.contains("gave ") {
        assert!(
            rest.contains(&format!(
                "unused numbers of tag orders back (max_id {max_id})"
            )),
            "{rest}"
        );
        // The tail given back starts right after the last number issued, unless Leaf took a
        // segment between our current one and our prefetched next one: then only the whole
        // next segment goes back (docs/segment.md, give-back step 3) and the current tail is a
        // gap below a Leaf segment.
        let leaf_between = leafs
            .iter()
            .any(|r| r.start as u64 > last && r.end as u64 <= max_id);
        assert!(
            max_id == last + 1 || (max_id > last + 1 && leaf_between),
            "max_id {max_id} after the give-back, last number issued {last}, Leaf's {leafs:?}"
        );
    } else {
        assert!(
            rest.contains("kept the unused numbers of tag orders as a gap"),
            "{rest}"
        );
        assert!(max_id > last);
    }
}

#[test]
fn a_bad_segment_database_refuses_the_start_in_one_line() {
    vesta_fails(
        &[
            "serve",
            "rest",
            "--listen",
            "127.0.0.1:0",
            "--segment-db",
            "mysql://h/db",
        ],
        &["segment.db: invalid database URL mysql://h/db: the user is missing"],
    );
    let pg = Postgres::start();
    let url = pg.create_database("empty");
    vesta_fails(
        &[
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--segment-db",
            &url,
        ],
        &[&format!(
            "segments: table leaf_alloc does not exist at {url} (to create it: vesta segment \
             init --db {url})"
        )],
    );
    let wrong = pg.url("no_such_db");
    vesta_fails(
        &[
            "serve",
            "rest",
            "--listen",
            "127.0.0.1:0",
            "--segment-db",
            &wrong,
        ],
        &["segments: database", "no_such_db"],
    );
}
