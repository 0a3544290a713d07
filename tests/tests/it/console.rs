//! The web console in a real browser (headless Chromium): the real `vesta serve rest|tcp
//! --console` binary, its pages loaded as a person loads them, the DOM checked for what the
//! server just did (the fields of an ID issued a moment before, the count of IDs issued, a
//! tag's position moving after `/segment` calls, a key's number after `/seq/{key}` calls),
//! hostile input shown as text and answered with the API's own messages, and screenshots at
//! desktop and phone width (1280×800, 390×844) that docs/console.md shows. Off, the console
//! is a 404.

use std::path::{Path, PathBuf};
use std::time::Duration;

use vesta_core::{Explanation, FieldValues, Form, IdFields, IdType};
use vesta_tests::bin::{ServerChild, http, vesta_fails, vesta_ok};
use vesta_tests::chromium::{self, dom, errors, fact, png_size, row};
use vesta_tests::zk::free_ports;

/// The browser, or `None` (the test says SKIPPED) where it is not installed.
fn browser() -> Option<PathBuf> {
    let b = chromium::binary();
    if b.is_none() {
        eprintln!(
            "SKIPPED: chromium is not installed (Debian package chromium; scripts/test installs it)"
        );
    }
    b
}

/// The console's address from the server's `... console at http://ADDR/ui` line.
fn console_addr(server: &ServerChild) -> String {
    loop {
        let line = server
            .stderr
            .recv_timeout(Duration::from_secs(30))
            .expect("a `console at` line from the server");
        if let Some((_, url)) = line.split_once(" console at http://") {
            return url.trim_end_matches("/ui").to_owned();
        }
    }
}

/// Where the screenshots go: `target/tmp/console/` (docs/console/ holds the copies the docs
/// show).
fn shots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Both screenshots of `url`, named `name-desktop.png` and `name-phone.png`, at their sizes.
fn screenshots(b: &Path, url: &str, name: &str) {
    for (suffix, w, h) in [("desktop", 1280, 800), ("phone", 390, 844)] {
        let file = shots().join(format!("{name}-{suffix}.png"));
        chromium::screenshot(b, url, w, h, &file);
        assert_eq!(png_size(&file), (w, h), "{}", file.display());
    }
}

fn get_ok(addr: &str, path: &str) -> String {
    let (status, body) = http(addr, "GET", path);
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// The JSON `error` sentence of a refused API request.
fn api_error(addr: &str, path: &str) -> String {
    let (status, body) = http(addr, "GET", path);
    assert_eq!(status, 400, "{path}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["error"].as_str().unwrap().to_owned()
}

#[test]
fn rest_console_explains_counts_and_follows_segments_in_a_browser() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("leaf.db").display());
    vesta_ok(&["segment", "init", "--db", &db]);
    vesta_ok(&["segment", "create", "orders", "--step", "100", "--db", &db]);
    let server = ServerChild::start(
        "rest",
        &[
            "--console",
            "--machine",
            "1000",
            "--type",
            "max-peak",
            "--segment-db",
            &db,
        ],
        &[],
    );
    let addr = console_addr(&server);
    let ui = |path: &str| format!("http://{addr}{path}");

    // Ten IDs: one, then nine in a batch.
    let id: u64 = get_ok(&addr, "/genid").parse().unwrap();
    get_ok(&addr, "/genids?count=9");

    // Explain: the fields of the ID just issued, as the layout reads them.
    let page = dom(&b, &ui(&format!("/ui/explain?id={id}")));
    let f = IdFields::decode(id);
    assert_eq!(row(&page, "fields", "machine").unwrap()[1], "1000");
    assert_eq!(row(&page, "fields", "genMethod").unwrap()[1], "2 (rest)");
    assert_eq!(row(&page, "fields", "time").unwrap()[1], f.time.to_string());
    assert_eq!(row(&page, "fields", "seq").unwrap()[1], f.seq.to_string());
    let x = Explanation::new(id, IdType::MaxPeak.layout());
    assert_eq!(fact(&page, "instant", "utc").unwrap(), x.timestamp());
    assert_eq!(
        fact(&page, "instant", "machine").unwrap(),
        "1000 (server pool 924..=1023)"
    );
    for form in Form::ALL {
        let text = form.encode(id);
        assert_eq!(fact(&page, "instant", form.name()).unwrap(), text.as_str());
    }
    assert!(errors(&page).is_empty(), "{:?}", errors(&page));
    screenshots(&b, &ui(&format!("/ui/explain?id={id}")), "explain");

    // Any accepted form reads the same ID; another layout reads it its own way.
    let base32 = Form::Base32.encode(id);
    let page = dom(&b, &ui(&format!("/ui/explain?id={}", base32.as_str())));
    assert_eq!(fact(&page, "instant", "decimal").unwrap(), id.to_string());
    let page = dom(&b, &ui(&format!("/ui/explain?id={id}&layout=leaf")));
    assert!(page.contains(&format!("{id} in the leaf layout")), "{page}");
    assert!(row(&page, "fields", "workerId").is_some(), "{page}");

    // Make: the same ID /makeid makes, and the same message for a bad field.
    let made = dom(
        &b,
        &ui("/ui/make?time=100&seq=5&machine=&genMethod=&type=&version="),
    );
    let api: u64 = get_ok(&addr, "/makeid?time=100&seq=5").parse().unwrap();
    let want = IdType::MaxPeak
        .layout()
        .make(
            &FieldValues::new()
                .with("time", 100)
                .with("seq", 5)
                .with("machine", 1000)
                .with("genMethod", 2),
        )
        .unwrap();
    assert_eq!(api, want);
    assert!(made.contains(&format!("<output>{want}</output>")), "{made}");
    assert_eq!(row(&made, "fields", "time").unwrap()[1], "100");
    for (form, api_path) in [
        ("/ui/make?time=abc&seq=1", "/makeid?time=abc&seq=1"),
        (
            "/ui/make?time=1&seq=99999999",
            "/makeid?time=1&seq=99999999",
        ),
        (
            "/ui/make?time=1&seq=1&machine=5000",
            "/makeid?time=1&seq=1&machine=5000",
        ),
        ("/ui/make?seq=1", "/makeid?seq=1"),
    ] {
        let page = dom(&b, &ui(form));
        assert_eq!(errors(&page), [api_error(&addr, api_path)], "{form}");
    }

    // Hostile input is shown as text, never run, and answered with the API's words.
    let page = dom(
        &b,
        &ui("/ui/explain?id=%3Cscript%3Ealert(1)%3C%2Fscript%3E"),
    );
    assert!(!page.contains("<script"), "{page}");
    assert_eq!(
        errors(&page),
        [api_error(
            &addr,
            "/expid?id=%3Cscript%3Ealert(1)%3C%2Fscript%3E"
        )]
    );
    assert!(errors(&page)[0].contains("`<script>alert(1)</script>` is not an ID"));
    let page = dom(
        &b,
        &ui("/ui/explain?id=1&layout=%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"),
    );
    assert!(!page.contains("<img"), "{page}");
    assert!(errors(&page)[0].starts_with("invalid parameter layout: `\"><img src=x"));
    let page = dom(&b, &ui("/ui/explain?id=1&bogus=%3Cb%3E"));
    assert!(!page.contains("<b>"), "{page}");
    assert_eq!(
        errors(&page),
        ["unknown parameter bogus: /ui/explain accepts id, layout"]
    );
    let long = "9".repeat(1000);
    let page = dom(&b, &ui(&format!("/ui/explain?id={long}")));
    assert!(errors(&page)[0].contains(&format!("`{}...`", "9".repeat(64))));
    assert!(
        !page.contains(&"9".repeat(100)),
        "a long input is echoed whole"
    );
    let (status, body) = http(
        &addr,
        "GET",
        &format!("/ui/explain?id={}", "9".repeat(5000)),
    );
    assert_eq!(status, 414, "{body}");
    let (status, _) = http(&addr, "POST", "/ui/status");
    assert_eq!(status, 405);

    // Status: what this server did, counted.
    let page = dom(&b, &ui("/ui/status"));
    assert_eq!(fact(&page, "issuer", "issuing").unwrap(), "yes");
    assert_eq!(fact(&page, "issuer", "layout").unwrap(), "vesta max-peak");
    assert_eq!(
        fact(&page, "machine", "machine").unwrap(),
        "1000 (server pool 924..=1023)"
    );
    assert_eq!(
        fact(&page, "machine", "source").unwrap(),
        "static, not registered anywhere, held on this host"
    );
    assert_eq!(fact(&page, "machine", "lease").unwrap(), "static");
    assert_eq!(fact(&page, "rates", "issued").unwrap(), "10");
    assert!(fact(&page, "rates", "rate_1m").is_some(), "{page}");
    // The four API refusals above, and the 414 and 405.
    assert_eq!(row(&page, "refusals", "400 Bad Request").unwrap()[1], "5");
    assert_eq!(row(&page, "refusals", "414 URI Too Long").unwrap()[1], "1");
    assert_eq!(
        row(&page, "refusals", "405 Method Not Allowed").unwrap()[1],
        "1"
    );
    assert!(page.contains("<meta http-equiv=\"refresh\" content=\"5\">"));
    screenshots(&b, &ui("/ui/status"), "status");

    // Segments: the tag's position moves with each number handed out; the table's row.
    let first: u64 = get_ok(&addr, "/segment/orders").parse().unwrap();
    let page = dom(&b, &ui("/ui/segments"));
    let position = |page: &str| -> u64 {
        row(page, "cache", "orders").expect("the orders row")[2]
            .parse()
            .unwrap()
    };
    assert_eq!(position(&page), first + 1);
    for _ in 0..5 {
        get_ok(&addr, "/segment/orders");
    }
    let page = dom(&b, &ui("/ui/segments"));
    assert_eq!(position(&page), first + 6);
    let db_row = row(&page, "db", "orders").expect("the leaf_alloc row");
    assert_eq!(db_row[0], "orders");
    assert_eq!(db_row[2], "100");
    assert!(db_row[1].parse::<u64>().unwrap() > first + 6, "{db_row:?}");
    assert_eq!(fact(&page, "store", "issued").unwrap(), "6");
    screenshots(&b, &ui("/ui/segments"), "segments");

    let (status, _) = http(&addr, "GET", "/ui/nothing");
    assert_eq!(status, 404);
    server.stop_cleanly();

    // Off (the default): every console path is a 404.
    let off = ServerChild::start("rest", &["--machine", "1001"], &[]);
    for path in ["/ui", "/ui/status", "/ui/explain?id=1"] {
        let (status, body) = http(&off.addr, "GET", path);
        assert_eq!(status, 404, "{path}: {body}");
        // The `vesta` binary says the remedy as its own: the key and the flag.
        assert!(
            body.contains(
                "the console is off on this server: turn it on with [server] console = true in \
                 its config, or vesta serve rest|tcp --console"
            ),
            "{body}"
        );
    }
    off.stop_cleanly();
}

/// Per-key sequences on `vesta serve rest --seq-db` after a few `/seq/{key}` calls: the page
/// shows their state and each key's current number as `/seq/{key}/current` has it, reads a key
/// of a section never loaded without loading it (`/healthz`'s `seq.loads` unchanged), answers a
/// bad key with the API's sentence, and is linked in the nav.
#[test]
fn rest_console_shows_per_key_sequences_in_a_browser() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("seq.db").display());
    let server = ServerChild::start(
        "rest",
        &["--console", "--machine", "1006", "--seq-db", &db],
        &[],
    );
    let addr = console_addr(&server);
    let ui = |path: &str| format!("http://{addr}{path}");

    let mut last = 0;
    for _ in 0..3 {
        last = get_ok(&addr, "/seq/42").parse().unwrap();
    }
    let chat: u64 = get_ok(&addr, "/seq/chat%3A7?count=5").parse().unwrap();
    assert_eq!(get_ok(&addr, "/seq/42/current"), last.to_string());

    let page = dom(&b, &ui("/ui/seq?key=42"));
    assert_eq!(fact(&page, "key", "current").unwrap(), last.to_string());
    assert_eq!(fact(&page, "key", "section").unwrap(), "in memory");
    assert!(
        fact(&page, "seq", "db").unwrap().ends_with("/seq.db"),
        "{page}"
    );
    assert_eq!(fact(&page, "seq", "step").unwrap(), "10000");
    // Three numbers of 42 and a batch of five of chat:7: section 0 and the string buckets
    // (chat:7's load brought the others of its kind on SQLite).
    assert_eq!(fact(&page, "activity", "issued").unwrap(), "8");
    let sections = fact(&page, "activity", "sections").unwrap();
    let count: u64 = sections.trim_end_matches(" (0 dense)").parse().unwrap();
    assert!((2..=1 + 4096).contains(&count), "{sections}");
    assert_eq!(fact(&page, "activity", "string_keys").unwrap(), "1");
    assert!(
        fact(&page, "activity", "memory")
            .unwrap()
            .ends_with(" of 256 MiB"),
        "{page}"
    );
    assert_eq!(fact(&page, "activity", "fenced").unwrap(), "0");
    assert!(errors(&page).is_empty(), "{:?}", errors(&page));
    assert!(
        page.contains("aria-current=\"page\">Sequences</a>"),
        "{page}"
    );
    let page = dom(&b, &ui("/ui/seq?key=chat%3A7"));
    assert_eq!(fact(&page, "key", "current").unwrap(), chat.to_string());
    assert_eq!(fact(&page, "key", "key").unwrap(), "\"chat:7\" (text)");

    // A key of a section not in memory is read from its row, not loaded.
    let loads = || -> u64 {
        let (_, health) = http(&addr, "GET", "/healthz");
        let health: serde_json::Value = serde_json::from_str(&health).unwrap();
        health["seq"]["loads"]
            .as_u64()
            .expect("seq.loads in /healthz")
    };
    let before = loads();
    let page = dom(&b, &ui("/ui/seq?key=7000000"));
    assert_eq!(
        fact(&page, "key", "current").unwrap(),
        "not in memory, and its section has no row in vesta_seq: never handed a number"
    );
    assert_eq!(loads(), before, "the console loaded a section");

    // A bad key: the API's sentence, as text.
    let page = dom(&b, &ui("/ui/seq?key=%3Cb%3E%01"));
    assert!(!page.contains("<b>"), "{page}");
    assert_eq!(errors(&page), [api_error(&addr, "/seq/%3Cb%3E%01")]);
    screenshots(&b, &ui("/ui/seq?key=42"), "seq");

    let page = dom(&b, &ui("/ui/status"));
    assert!(page.contains("href=\"/ui/seq\""), "{page}");
    server.stop_cleanly();
}

#[test]
fn tcp_console_is_served_on_the_metrics_listener() {
    let Some(b) = browser() else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    let metrics = format!("127.0.0.1:{}", free_ports(1)[0]);
    std::fs::write(
        &config,
        format!("[machine]\nid = 1002\n[server]\nmetrics_listen = \"{metrics}\"\n"),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let server = ServerChild::start("tcp", &["--config", config, "--console"], &[]);
    assert_eq!(console_addr(&server), metrics);
    let ids = vesta_ok(&["gen", "--server", &server.addr, "--count", "3"]);
    let id: u64 = ids.lines().next().unwrap().parse().unwrap();

    let page = dom(&b, &format!("http://{metrics}/ui/explain?id={id}"));
    assert_eq!(row(&page, "fields", "genMethod").unwrap()[1], "1 (server)");
    assert_eq!(row(&page, "fields", "machine").unwrap()[1], "1002");
    let page = dom(&b, &format!("http://{metrics}/ui/status"));
    assert!(page.contains("Status · TCP server"), "{page}");
    assert_eq!(fact(&page, "rates", "issued").unwrap(), "3");
    assert_eq!(row(&page, "refusals", "UNAVAILABLE").unwrap()[1], "0");
    let page = dom(&b, &format!("http://{metrics}/ui/make?time=abc&seq=1"));
    assert_eq!(
        errors(&page),
        [
            "invalid parameter time: `abc` is not an unsigned decimal integer up to 18446744073709551615"
        ]
    );
    let (status, _) = http(&metrics, "GET", "/metrics");
    assert_eq!(status, 200);
    let (status, _) = http(
        &metrics,
        "GET",
        &format!("/ui/explain?id={}", "9".repeat(5000)),
    );
    assert_eq!(status, 414);
    let (status, _) = http(&metrics, "POST", "/ui/status");
    assert_eq!(status, 405);
    server.stop_cleanly();

    // Without the console the listener answers /ui with a 404; and the console needs the
    // listener.
    let off = ServerChild::start("tcp", &["--config", config], &[]);
    let (status, body) = http(&metrics, "GET", "/ui/status");
    assert_eq!(status, 404, "{body}");
    off.stop_cleanly();
    vesta_fails(
        &[
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--machine",
            "1003",
            "--console",
        ],
        &["server.console = true needs server.metrics_listen"],
    );
}

/// `GET path` with an `Authorization` header, if any: the status and the body.
fn get_with_auth(addr: &str, path: &str, auth: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().expect("an HTTP status");
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

/// Both real servers with `[server] make = false` and a token (no browser needed): the console
/// asks for the token (the TCP server's on its metrics listener too, its /metrics and /healthz
/// staying open), makes no ID (`/ui/make` a 404 saying why, no make form), and `/makeid` is a
/// 404 on REST as before.
#[test]
fn make_off_and_a_token_hold_on_both_servers_consoles() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let metrics = format!("127.0.0.1:{}", free_ports(1)[0]);
    let rest = dir.path().join("rest.toml");
    let tcp = dir.path().join("tcp.toml");
    let server = format!(
        "make = false\nconsole = true\nauth_token_file = \"{}\"\n",
        token.display()
    );
    std::fs::write(&rest, format!("[machine]\nid = 1004\n[server]\n{server}")).unwrap();
    std::fs::write(
        &tcp,
        format!("[machine]\nid = 1005\n[server]\n{server}metrics_listen = \"{metrics}\"\n"),
    )
    .unwrap();
    let rest = ServerChild::start("rest", &["--config", rest.to_str().unwrap()], &[]);
    let tcp = ServerChild::start("tcp", &["--config", tcp.to_str().unwrap()], &[]);
    for console in [rest.addr.as_str(), metrics.as_str()] {
        let (status, body) = get_with_auth(console, "/ui/status", None);
        assert_eq!(status, 401, "{console}: {body}");
        assert!(body.contains("Authorization: Bearer"), "{body}");
        let good = Some("bearer s3cret-token");
        assert_eq!(
            get_with_auth(console, "/ui/status", good).0,
            200,
            "{console}"
        );
        let (status, body) = get_with_auth(console, "/ui/make?time=1&seq=1", good);
        assert_eq!(status, 404, "{console}: {body}");
        assert!(body.contains("[server] make = false"), "{body}");
        let (status, body) = get_with_auth(console, "/ui/explain?id=1", good);
        assert_eq!(status, 200, "{console}: {body}");
        assert!(!body.contains("/ui/make"), "{console}: {body}");
    }
    for open in ["/metrics", "/healthz"] {
        assert_eq!(http(&metrics, "GET", open).0, 200, "{open}");
    }
    let (status, body) = get_with_auth(
        &rest.addr,
        "/makeid?time=1&seq=1",
        Some("Bearer s3cret-token"),
    );
    assert_eq!(status, 404, "{body}");
    rest.stop_cleanly();
    tcp.stop_cleanly();
}
