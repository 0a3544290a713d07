//! The peers' layouts in every mode, each ID read by a reference transcribed from the peer's own
//! code (`vesta_tests::peers`, not vesta-core's layouts): the embedded issuer, `vesta
//! gen|explain|make|layout --layout`, a Sonyflake-layout `serve tcp` with `gen --server` and
//! `explain --server`, and a Leaf-layout `serve rest` answering Leaf's snowflake API.

use std::time::{SystemTime, UNIX_EPOCH};

use vesta_core::{Explanation, FieldValues, Preset};
use vesta_embed::config::LayoutChoice;
use vesta_embed::{Issuer, IssuerConfig};
use vesta_tests::bin::{ServerChild, http, vesta_fails, vesta_ok};
use vesta_tests::peers;

const TWEPOCH: i64 = 1_288_834_974_657;
/// UidGenerator's default layout ran out in 2024 from its default epoch: a team still on it has
/// moved `epochStr`; this is such an epoch.
const UID_EPOCH: &str = "2024-01-01T00:00:00+08:00";
const UID_EPOCH_S: i64 = 1_704_038_400;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// An embedded issuer of `preset` on static machine `machine`.
fn issuer(preset: Preset, machine: u64) -> Issuer {
    let mut c = IssuerConfig::default();
    c.id.layout = LayoutChoice::Preset(preset);
    if preset == Preset::UidGenerator {
        c.id.epoch = Some(UID_EPOCH.parse().unwrap());
    }
    c.machine.id = Some(machine);
    Issuer::start(c).unwrap()
}

/// What a peer's reference reads from `id`: (time in ms, node, sequence, sequence limit).
fn read(preset: Preset, id: u64) -> (i64, i64, i64, i64) {
    match preset {
        Preset::Leaf => {
            let (t, w, s) = peers::leaf(id as i64, TWEPOCH);
            (t, w, s, 4096)
        }
        Preset::Twitter => {
            let (t, dc, w, s) = peers::twitter(id as i64, TWEPOCH);
            (t, dc << 5 | w, s, 4096)
        }
        Preset::Sonyflake => {
            let (msb, t, s, m) = peers::sonyflake(id);
            assert_eq!(msb, 0);
            let start = 1_409_529_600_000 / 10;
            ((start + t as i64) * 10, m as i64, s as i64, 256)
        }
        Preset::UidGenerator => {
            let (t, w, s) = peers::uid_generator(id as i64, UID_EPOCH_S);
            (t * 1000, w, s, 8192)
        }
        Preset::SonyflakeV2 => {
            // v2's defaults: 8 sequence bits, 16 machine bits, 10 ms from 2025-01-01 UTC.
            let (t, s, m) = peers::sonyflake_v2(id as i64, 8, 16);
            let start = 1_735_689_600_000 / 10;
            assert_eq!(
                peers::sonyflake_v2_compose(t, s, m, 8, 16),
                id as i64,
                "Compose gives the ID back"
            );
            ((start + t) * 10, m, s, 256)
        }
        other => panic!("{other} is not a peer"),
    }
}

const PEERS: [(Preset, u64); 5] = [
    (Preset::Leaf, 901),
    (Preset::Twitter, 3 << 5 | 17),
    (Preset::Sonyflake, 40_000),
    (Preset::SonyflakeV2, 41_000),
    (Preset::UidGenerator, 3_000_000),
];

#[test]
fn every_preset_issues_ids_its_peer_reads_and_makes_them_back() {
    for (preset, machine) in PEERS {
        let issuer = issuer(preset, machine);
        let layout = issuer.layout().clone();
        let unit = layout.unit_ms() as i64;
        // A reading may lag the clock by less than a kernel tick (lazy or coarse readings,
        // vesta-embed's clock.rs), and lazy ones are used only where a tick is at most the
        // layout's default rollback tolerance.
        let lag = layout.default_rollback_tolerance_ms() as i64;
        let before = now_ms();
        let ids: Vec<u64> = issuer.next_ids(20_000).unwrap().iter().collect();
        let after = now_ms();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{preset}: increasing");
        for &id in &ids {
            assert!((id as i64) > 0, "{preset}: {id} is not a positive long");
            let (t, node, seq, seq_limit) = read(preset, id);
            // The unit's start is at most a unit (and the reading's lag) before the first
            // reading; a batch may reach into later units than the last reading (it waits
            // for them).
            assert!(
                t > before - unit - lag,
                "{preset}: {t} before the run {before}"
            );
            assert!(t <= after + unit, "{preset}: {t} after the run {after}");
            assert_eq!(node, machine as i64, "{preset}");
            assert!((0..seq_limit).contains(&seq), "{preset}: seq {seq}");
            // Explaining reads what the peer reads; making gives the ID back.
            let x = Explanation::new(id, &layout);
            assert_eq!((x.node(), x.seq()), (machine, seq as u64), "{preset}");
            assert_eq!(x.unix_ms as i64, t, "{preset}");
            let again = FieldValues::new()
                .with("time", x.time())
                .with("seq", x.seq())
                .with("node", x.node());
            assert_eq!(layout.make(&again), Ok(id), "{preset}");
        }
        issuer.shutdown().unwrap();
    }
}

#[test]
fn the_cli_speaks_every_layout() {
    // gen: Sonyflake's 16-bit machine ID, read by Sonyflake's Decompose.
    let out = vesta_ok(&[
        "gen",
        "--layout",
        "sonyflake",
        "--machine",
        "40000",
        "-n",
        "3",
    ]);
    let ids: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 3);
    for &id in &ids {
        assert_eq!(read(Preset::Sonyflake, id).1, 40_000);
    }
    // The peers' workers use the whole node field in every mode (Leaf's 1023, Sonyflake's
    // 60000: Vesta's pools are Vesta's); wider is refused by range, as is a configured split.
    let top = vesta_ok(&["gen", "--layout", "leaf", "--machine", "1023", "-n", "1"]);
    assert_eq!(read(Preset::Leaf, top.trim().parse().unwrap()).1, 1023);
    vesta_ok(&[
        "gen",
        "--layout",
        "sonyflake",
        "--machine",
        "60000",
        "-n",
        "1",
    ]);
    vesta_fails(
        &["gen", "--layout", "leaf", "--machine", "1024", "-n", "1"],
        &["machine 1024 is outside the node field 0..=1023"],
    );
    let split = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        split.path(),
        "[id]\nlayout = \"sonyflake\"\n[machine]\nserver_pool_start = 59136\n",
    )
    .unwrap();
    vesta_fails(
        &[
            "gen",
            "--config",
            split.path().to_str().unwrap(),
            "--machine",
            "60000",
            "-n",
            "1",
        ],
        &["machine 60000 is outside the embed pool 0..=59135"],
    );
    // make: Twitter's node by its parts, read back by Twitter's own arithmetic.
    let made: u64 = vesta_ok(&[
        "make",
        "--layout",
        "twitter",
        "--time",
        "2026-11-21T12:00:00Z",
        "--seq",
        "7",
        "--field",
        "datacenterId=3",
        "--field",
        "workerId=17",
    ])
    .trim()
    .parse()
    .unwrap();
    let at = "2026-11-21T12:00:00Z"
        .parse::<chrono::DateTime<chrono::Utc>>()
        .unwrap();
    assert_eq!(
        peers::twitter(made as i64, TWEPOCH),
        (at.timestamp_millis(), 3, 17, 7)
    );
    vesta_fails(
        &["make", "--layout", "leaf", "--time", "1", "--seq", "1"],
        &["workerId is missing: the leaf layout needs it to make an ID"],
    );
    vesta_fails(
        &[
            "make",
            "--layout",
            "leaf",
            "--time",
            "1",
            "--seq",
            "1",
            "--machine",
            "1",
            "--gen-method",
            "server",
        ],
        &["--gen-method and --version are fields of Vesta's layouts, not of leaf"],
    );
    vesta_fails(
        &[
            "make",
            "--layout",
            "leaf",
            "--time",
            "1",
            "--seq",
            "4096",
            "--machine",
            "1",
        ],
        &["seq 4096 is out of range for leaf: allowed 0..=4095"],
    );
    // explain: Leaf's own field names, in the table and in JSON.
    let id = (1_700_000_000_000i64 - TWEPOCH) << 22 | 513 << 12 | 77;
    let table = vesta_ok(&["explain", "--layout", "leaf", &id.to_string()]);
    assert!(table.contains("\nworkerId   513\n"), "{table}");
    assert!(table.contains("\nsequence   77\n"), "{table}");
    assert!(
        table.contains("timestamp  2023-11-14T22:13:20.000Z"),
        "{table}"
    );
    assert!(table.ends_with("layout     leaf: time 22-62, workerId 12-21, sequence 0-11\n"));
    let json: serde_json::Value = serde_json::from_str(&vesta_ok(&[
        "explain",
        "--layout",
        "leaf",
        "--json",
        &id.to_string(),
    ]))
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({"id": id.to_string(), "layout": "leaf", "time": 411_165_025_343u64,
            "workerId": 513, "sequence": 77, "timestamp": "2023-11-14T22:13:20.000Z"})
    );
    // layout: the fields, no pools (the node field is whole), the end of life.
    let l = vesta_ok(&["layout", "--layout", "uid-generator", "--epoch", UID_EPOCH]);
    assert!(
        l.contains("layout uid-generator (time unit: 1 second)"),
        "{l}"
    );
    assert!(
        l.contains("  workerId   bits 13-34 (22 bits, max 4194303)"),
        "{l}"
    );
    assert!(
        l.contains(
            "  pools      none: every mode takes any of 0..=4194303 (a server defaults to 3784704; \
             [machine] server_pool_start splits them)"
        ),
        "{l}"
    );
    // Vesta-only flags with a peer layout are refused by name.
    vesta_fails(
        &[
            "gen",
            "--layout",
            "leaf",
            "--type",
            "min-granularity",
            "-n",
            "1",
        ],
        &["id.type applies to the vesta layout only, not leaf"],
    );
}

#[test]
fn a_sonyflake_layout_server_over_tcp_speaks_its_layout_to_gen_and_explain() {
    let server = ServerChild::start("tcp", &["--layout", "sonyflake", "--machine", "60000"], &[]);
    assert!(
        server
            .startup
            .ends_with("(machine 60000, genMethod server, layout sonyflake, lease static)"),
        "{}",
        server.startup
    );
    let out = vesta_ok(&["gen", "--server", &server.addr, "-n", "3000"]);
    let ids: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 3000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    for &id in &ids {
        let (_, node, seq, limit) = read(Preset::Sonyflake, id);
        assert_eq!(node, 60_000);
        assert!((0..limit).contains(&seq));
    }
    let x = vesta_ok(&[
        "explain",
        "--server",
        &server.addr,
        "--json",
        &ids[7].to_string(),
    ]);
    let x: serde_json::Value = serde_json::from_str(&x).unwrap();
    let (_, t, seq, m) = peers::sonyflake(ids[7]);
    assert_eq!(x["layout"], "sonyflake");
    assert_eq!(
        (x["time"].as_u64(), x["sequence"].as_u64()),
        (Some(t), Some(seq))
    );
    assert_eq!(x["machine-id"].as_u64(), Some(m));
    let (status, rest) = server.terminate();
    assert!(status.success(), "{rest}");
}

#[test]
fn a_leaf_layout_rest_server_answers_leafs_snowflake_api_as_leaf_does() {
    // Leaf formats the decoded timestamp in its JVM's time zone: fix the server's.
    let server = ServerChild::start(
        "rest",
        &["--layout", "leaf", "--machine", "1000"],
        &[("TZ", "CST-8")],
    );
    let addr = server.addr.clone();
    let (status, body) = http(&addr, "GET", "/api/snowflake/get/leaf-segment-test");
    assert_eq!(status, 200, "{body}");
    let id: i64 = body.parse().unwrap();
    let (t, worker, seq) = peers::leaf(id, TWEPOCH);
    assert_eq!(worker, 1000);
    assert!((0..4096).contains(&seq));
    assert!((t - now_ms()).abs() < 60_000, "{t}");
    // Any method, and a cache buster, as Leaf's @RequestMapping takes them.
    let (status, body) = http(&addr, "POST", "/api/snowflake/get/k?_=1700000000000");
    assert_eq!(status, 200, "{body}");
    assert!(body.parse::<i64>().unwrap() > id);

    // Leaf's decode, every value a string, the date in the server's zone (UTC+8 here).
    let (status, body) = http(
        &addr,
        "GET",
        &format!("/decodeSnowflakeId?snowflakeId={id}"),
    );
    assert_eq!(status, 200, "{body}");
    let local = chrono::DateTime::from_timestamp_millis(t)
        .unwrap()
        .with_timezone(&chrono::FixedOffset::east_opt(8 * 3600).unwrap())
        .format("%Y-%m-%d %H:%M:%S%.3f");
    let want = serde_json::json!({
        "timestamp": format!("{t}({local})"),
        "workerId": worker.to_string(),
        "sequenceId": seq.to_string(),
    });
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        want
    );
    // Java's arithmetic on a negative long, and Leaf's own error message for text.
    let (_, body) = http(&addr, "GET", "/decodeSnowflakeId?snowflakeId=-1&x=2");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (v["workerId"].as_str(), v["sequenceId"].as_str()),
        (Some("1023"), Some("4095"))
    );
    for bad in ["abc", "9223372036854775808", "", "0x10"] {
        let (status, body) = http(
            &addr,
            "GET",
            &format!("/decodeSnowflakeId?snowflakeId={bad}"),
        );
        assert_eq!(status, 200, "{bad}: {body}");
        assert_eq!(
            body, r#"{"errorMsg":"snowflake Id反解析发生异常!"}"#,
            "{bad}"
        );
    }
    let (status, body) = http(&addr, "GET", "/decodeSnowflakeId");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("Required String parameter 'snowflakeId' is not present"),
        "{body}"
    );
    // /expid and /makeid speak Leaf's own field names.
    let (_, body) = http(&addr, "GET", &format!("/expid?id={id}"));
    let x: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(x["workerId"], 1000);
    assert_eq!(x["layout"], "leaf");
    let (status, made) = http(
        &addr,
        "GET",
        &format!("/makeid?time={}&sequence={seq}", (t - TWEPOCH)),
    );
    assert_eq!(status, 200, "{made}");
    assert_eq!(
        made.parse::<i64>().unwrap(),
        id,
        "the server's own workerId by default"
    );
    let (status, body) = http(&addr, "GET", "/makeid?time=1&seq=1&genMethod=1");
    assert_eq!(status, 400);
    assert!(body.contains("unknown parameter genMethod"), "{body}");
    let (status, _) = server.terminate();
    assert!(status.success());

    // A server of another layout: Leaf's paths say which layouts serve them.
    let vesta = ServerChild::start("rest", &["--machine", "1001"], &[]);
    for path in ["/api/snowflake/get/x", "/decodeSnowflakeId?snowflakeId=1"] {
        let (status, body) = http(&vesta.addr, "GET", path);
        assert_eq!(status, 404, "{path}");
        assert!(
            body.contains(r#"served by a server with layout = \"leaf\" or \"twitter\""#),
            "{path}: {body}"
        );
        assert!(
            body.contains("this server issues the vesta min-granularity layout"),
            "{body}"
        );
    }
}

#[test]
fn a_twitter_layout_rest_server_makes_ids_from_datacenter_and_worker() {
    let server = ServerChild::start("rest", &["--layout", "twitter", "--machine", "1000"], &[]);
    let (status, body) = http(&server.addr, "GET", "/api/snowflake/get/x");
    assert_eq!(status, 200, "{body}");
    let id: i64 = body.parse().unwrap();
    let (t, dc, worker, seq) = peers::twitter(id, TWEPOCH);
    assert_eq!(dc << 5 | worker, 1000);
    let path = format!(
        "/makeid?time={}&sequence={seq}&datacenterId={dc}&workerId={worker}",
        t - TWEPOCH
    );
    let (status, made) = http(&server.addr, "GET", &path);
    assert_eq!((status, made.parse::<i64>().unwrap()), (200, id), "{made}");
    let (status, body) = http(&server.addr, "GET", "/makeid?time=1&seq=1&datacenterId=32");
    assert_eq!(status, 400);
    assert!(
        body.contains("datacenterId 32 is out of range for twitter: allowed 0..=31"),
        "{body}"
    );
}

/// The longest kernel tick millisecond units read the clock lazily under: the default rollback
/// tolerance (a lazy reading is behind the clock by less than a tick).
const LAZY_TICK_MAX_MS: i64 = 5;

/// Sonyflake v2 with settings (12 sequence bits, 10 machine bits, 1 ms, from 2025-06-01), as
/// docs/migrate.md writes it: the IDs read by v2's own `Decompose` with those bits, and made
/// back by its `Compose`.
#[test]
fn sonyflake_v2_settings_as_the_guide_writes_them() {
    let toml = vesta_tests::docs::snippet_with("docs/migrate.md", "toml", "sonyflake-v2-custom");
    let config = IssuerConfig::from_toml_str(&toml).unwrap();
    let issuer = Issuer::start(config).unwrap();
    let start_ms = 1_748_736_000_000_i64; // 2025-06-01T00:00:00Z, on a whole ms
    let before = now_ms();
    let ids: Vec<u64> = issuer.next_ids(10_000).unwrap().iter().collect();
    let after = now_ms();
    for id in ids {
        let (t, s, m) = peers::sonyflake_v2(id as i64, 12, 10);
        assert_eq!(m, 3);
        assert!((0..4096).contains(&s));
        let at = start_ms + t;
        // Never ahead of the clock; behind it by less than a kernel tick at most (millisecond
        // units read the clock lazily, `[clock] read = "auto"`; a tick is at most the 5 ms
        // rollback tolerance where they do).
        assert!(
            at + 1 + LAZY_TICK_MAX_MS >= before && at <= after + 1,
            "{at} not in {before}..={after} (less a tick)"
        );
        assert_eq!(peers::sonyflake_v2_compose(t, s, m, 12, 10), id as i64);
    }
    issuer.shutdown().unwrap();
}

/// The .proto's `ExplainResponse.layout` names the layouts an answer can carry: every preset
/// by its own name, and nothing that is not one (it once said `snowflake`).
#[test]
fn the_protos_layout_names_are_the_presets() {
    let proto = vesta_tests::deploy::read("proto/vesta/v1/vesta.proto");
    let message = proto
        .split("message ExplainResponse {")
        .nth(1)
        .and_then(|m| m.split("string layout = 3;").next())
        .expect("ExplainResponse.layout");
    let mut lines: Vec<&str> = message
        .lines()
        .rev()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.trim_start().starts_with("//"))
        .collect();
    lines.reverse();
    let comment = lines.join(" ");
    let named: Vec<&str> = comment
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.contains(' '))
        .collect();
    let presets: Vec<&str> = vesta_core::Preset::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(named, presets, "{comment}");
}
