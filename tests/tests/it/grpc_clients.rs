//! `vesta serve rest`'s gRPC (docs/grpc.md) as other languages' real gRPC libraries call it:
//! Python's grpcio with stubs generated from `proto/vesta/v1/vesta.proto` at test time, and
//! Node's @grpc/grpc-js with proto-loader and `longs: String` (tests/grpc/). A second
//! implementation of HTTP/2 and of gRPC's framing, trailers and status codes meets the server,
//! as users' clients will; and Node shows that uint64 IDs, all above 2^53, arrive exactly.
//!
//! The clients only call and print JSON lines (`vesta_tests::grpc_clients`); every assertion is
//! here: IDs checked against the workspace's own decoder (`IdFields`, `Explanation`), batches
//! and streams increasing, error codes with the field they name, health, reflection, the token
//! and `make = false`; and gRPC over the REST server's TLS (`--tls-cert`, `--tls-key`, HTTP/2
//! by ALPN `h2`) from Python's TLS channel trusting a throwaway CA (`vesta_tests::tls`), where
//! a plaintext channel to the same port is refused.

use std::path::Path;

use serde_json::Value;
use vesta_core::{Epoch, Explanation, GenMethod, IdFields, IdType};
use vesta_tests::bin::{ServerChild, TOKEN, config_with_token};
use vesta_tests::grpc_clients::{Steps, run_node, run_python};
use vesta_tests::tls::TestCa;

/// A uint64 as the clients print it: decimal text (a JSON number could have been rounded).
fn uint(v: &Value) -> u64 {
    v.as_str()
        .unwrap_or_else(|| panic!("not decimal text: {v}"))
        .parse()
        .unwrap_or_else(|e| panic!("not a uint64 ({e}): {v}"))
}

fn uints(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(uint)
        .collect()
}

/// `vesta serve rest ARGS` holding its static machine ID in a directory of its own
/// (`VESTA_HOLD_DIR`), as if on a host of its own; and the machine ID its startup line names.
/// Max-peak unless a config is given: the clients' explanations are checked field by field
/// against that layout.
fn serve(hold: &Path, args: &[&str]) -> (ServerChild, u64) {
    let layout: &[&str] = if args.contains(&"--config") {
        &[]
    } else {
        &["--type", "max-peak"]
    };
    let hold_dir = [("VESTA_HOLD_DIR", hold.to_str().unwrap())];
    let server = ServerChild::start("rest", &[layout, args].concat(), &hold_dir);
    let machine = server
        .startup
        .split_once("(machine ")
        .and_then(|(_, rest)| rest.split_once(','))
        .and_then(|(m, _)| m.parse().ok())
        .unwrap_or_else(|| panic!("no machine in the startup line: {}", server.startup));
    (server, machine)
}

/// A fresh ID of the server: a REST server's (genMethod 2), its machine, max-peak.
fn assert_issued(steps: &Steps, id: u64, machine: u64) {
    let f = IdFields::decode(id);
    assert_eq!(
        (f.machine, f.gen_method, f.id_type),
        (machine, GenMethod::Rest, IdType::MaxPeak),
        "{}: {id} decodes to {f:?}",
        steps.client
    );
}

/// An Explain answer for `id`: what the workspace's own explanation says, field by field.
fn assert_explains(steps: &Steps, step: &str, id: u64) {
    let got = steps.ok(step);
    let want = Explanation::vesta(id, Epoch::default());
    let who = format!("{} {step}", steps.client);
    assert_eq!(uint(&got["id"]), id, "{who}: {got}");
    assert_eq!(got["id_text"], id.to_string(), "{who}: {got}");
    assert_eq!(got["layout"], want.layout().name(), "{who}: {got}");
    let fields: Vec<(String, u64)> = got["fields"]
        .as_array()
        .unwrap_or_else(|| panic!("{who}: no fields: {got}"))
        .iter()
        .map(|f| (f[0].as_str().unwrap().to_owned(), uint(&f[1])))
        .collect();
    let want_fields: Vec<(String, u64)> = want
        .values()
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect();
    assert_eq!(fields, want_fields, "{who}");
    assert_eq!(uint(&got["unix_ms"]), want.unix_ms, "{who}: {got}");
    assert_eq!(got["timestamp"], want.timestamp(), "{who}: {got}");
    assert_eq!(
        got["warning"],
        want.warning().unwrap_or_default(),
        "{who}: {got}"
    );
}

/// A refusal with `code`, whose message contains `needle`, and with trailing metadata
/// `vesta-field: field` when `field` is given.
fn assert_refused(steps: &Steps, step: &str, code: &str, needle: &str, field: Option<&str>) {
    let e = steps.error(step);
    let who = format!("{} {step}", steps.client);
    assert_eq!(e["code"], code, "{who}: {e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{who}: {needle:?} not in {e}");
    if let Some(field) = field {
        assert_eq!(e["trailing"]["vesta-field"], field, "{who}: {e}");
    }
}

/// Health: the server and vesta.v1.Vesta SERVING, any other name NOT_FOUND.
fn assert_healthy(steps: &Steps, prefix: &str) {
    for service in ["server", "vesta"] {
        let step = format!("{prefix}{service}");
        assert_eq!(
            steps.ok(&step)["status"],
            "SERVING",
            "{} {step}",
            steps.client
        );
    }
    assert_refused(steps, &format!("{prefix}nope"), "NOT_FOUND", "nope", None);
}

/// Reflection lists vesta.v1 and the health service.
fn assert_lists_services(steps: &Steps, step: &str) {
    let listed = &steps.ok(step)["services"];
    for service in ["vesta.v1.Vesta", "grpc.health.v1.Health"] {
        assert!(
            listed
                .as_array()
                .is_some_and(|l| l.iter().any(|s| s == service)),
            "{} {step}: {service} not in {listed}",
            steps.client
        );
    }
}

/// The script both clients run against an open server (no token, `make` on): one ID and its
/// explanation, a made ID and its instant, a batch of 1000, a stream of 20000 in several
/// chunks, a bad count, health.
fn assert_open_script(steps: &Steps, machine: u64) {
    let who = &steps.client;
    let first = steps.ok("next_id");
    let id = uint(&first["id"]);
    assert_eq!(first["id_text"], id.to_string(), "{who}: {first}");
    assert_issued(steps, id, machine);
    assert_explains(steps, "explain", id);

    // `time` and `seq` given; machine, genMethod and type the server's own.
    let made = steps.ok("make");
    let want = IdFields {
        version: 0,
        id_type: IdType::MaxPeak,
        gen_method: GenMethod::Rest,
        time: 1000,
        seq: 7,
        machine,
    }
    .encode()
    .unwrap();
    assert_eq!(uint(&made["id"]), want, "{who}: {made}");
    assert_eq!(made["id_text"], want.to_string(), "{who}: {made}");
    assert_explains(steps, "explain_made", want);
    let at = steps.ok("trans_time");
    let explained = Explanation::vesta(want, Epoch::default());
    assert_eq!(uint(&at["unix_ms"]), explained.unix_ms, "{who}: {at}");
    assert_eq!(at["timestamp"], explained.timestamp(), "{who}: {at}");

    let batch = uints(&steps.ok("next_ids")["ids"]);
    assert_eq!(batch.len(), 1000, "{who}");
    assert!(batch[0] > id, "{who}: batch starts at {} <= {id}", batch[0]);
    assert!(
        batch.windows(2).all(|w| w[0] < w[1]),
        "{who}: batch not increasing"
    );
    for b in &batch {
        assert_issued(steps, *b, machine);
    }

    let stream = steps.ok("stream_ids");
    let chunks = chunk_sizes(&stream["chunks"]);
    let ids = uints(&stream["ids"]);
    assert_eq!(ids.len(), 20000, "{who}: chunks {chunks:?}");
    assert_eq!(chunks.iter().sum::<usize>(), 20000, "{who}: {chunks:?}");
    // At most 8,192 IDs a chunk (the .proto), so 20,000 take at least three.
    assert!(chunks.len() >= 3, "{who}: {chunks:?}");
    assert!(
        chunks.iter().all(|&c| (1..=8192).contains(&c)),
        "{who}: {chunks:?}"
    );
    assert!(
        ids[0] > *batch.last().unwrap(),
        "{who}: the stream starts below the batch"
    );
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "{who}: stream not increasing"
    );
    for s in &ids {
        assert_issued(steps, *s, machine);
    }

    assert_refused(
        steps,
        "next_ids_zero",
        "INVALID_ARGUMENT",
        "count",
        Some("count"),
    );
    assert_healthy(steps, "health_");
}

fn chunk_sizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|c| c.as_u64().and_then(|c| usize::try_from(c).ok()).unwrap())
        .collect()
}

/// The RPCs of `service Vesta` as the .proto declares them: (name, request, answer, whether
/// the answer is a stream), the message names in full.
fn proto_rpcs() -> Vec<(String, String, String, bool)> {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/vesta/v1/vesta.proto");
    let text = std::fs::read_to_string(&proto).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("rpc "))
        .map(|l| {
            // `NextId(NextIdRequest) returns (stream IdChunk);`
            let (name, rest) = l.split_once('(').unwrap();
            let (input, rest) = rest.split_once(')').unwrap();
            let output = rest.split_once('(').unwrap().1.split_once(')').unwrap().0;
            let (stream, output) = match output.strip_prefix("stream ") {
                Some(o) => (true, o),
                None => (false, output),
            };
            (
                name.trim().to_owned(),
                format!("vesta.v1.{}", input.trim()),
                format!("vesta.v1.{}", output.trim()),
                stream,
            )
        })
        .collect()
}

/// Python: every method, its stubs generated from the .proto at test time; a bad count on a
/// stream, an unknown make field, segment mode off; reflection (v1alpha) lists the services
/// and serves the .proto's descriptor, method for method.
#[test]
fn python_client_calls_every_method() {
    let hold = tempfile::tempdir().unwrap();
    // A default server (machine 924, the first of the server pool) with per-key sequences.
    let seq_db = format!("sqlite://{}/seq.db", hold.path().display());
    let (server, machine) = serve(hold.path(), &["--seq-db", &seq_db]);
    assert_eq!(machine, 924, "{}", server.startup);
    let steps = run_python(&[&server.addr]);
    assert_open_script(&steps, machine);
    let next = steps.ok("seq_next");
    assert_eq!(
        (&next["first"], &next["last"], &next["last_text"]),
        (&"1".into(), &"3".into(), &"3".into()),
        "{next}"
    );
    assert_eq!(steps.ok("seq_current")["current"], "3");
    assert_refused(
        &steps,
        "seq_next_zero",
        "INVALID_ARGUMENT",
        "count",
        Some("count"),
    );

    assert_refused(
        &steps,
        "stream_ids_zero",
        "INVALID_ARGUMENT",
        "count",
        Some("count"),
    );
    assert_eq!(
        steps.get("stream_ids_zero")["ids"],
        serde_json::json!([]),
        "no IDs before the refusal"
    );
    assert_refused(
        &steps,
        "make_unknown_field",
        "INVALID_ARGUMENT",
        "colour",
        Some("fields"),
    );
    assert_refused(&steps, "segment", "UNIMPLEMENTED", "segment", None);

    assert_lists_services(&steps, "reflection_services");
    let methods: Vec<(String, String, String, bool)> = steps.ok("reflection_methods")["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["input"].as_str().unwrap().to_owned(),
                m["output"].as_str().unwrap().to_owned(),
                m["server_streaming"].as_bool().unwrap(),
            )
        })
        .collect();
    let declared = proto_rpcs();
    assert_eq!(declared.len(), 10, "{declared:?}");
    assert_eq!(methods, declared, "reflection against the .proto");
    server.stop_cleanly();
}

/// Node: every uint64 read with `longs: String` arrives as exact text, IDs above 2^53
/// included, and goes back exactly (2^64 - 1 explained field by field); the same script as
/// Python's; reflection v1 lists the services.
#[test]
fn node_client_reads_uint64_ids_exactly() {
    let hold = tempfile::tempdir().unwrap();
    let (server, machine) = serve(hold.path(), &["--machine", "1011"]);
    assert_eq!(machine, 1011, "{}", server.startup);
    let steps = run_node(&[&server.addr]);
    assert_open_script(&steps, machine);
    assert_explains(&steps, "explain_max", u64::MAX);
    assert_lists_services(&steps, "reflection_services");
    server.stop_cleanly();
}

/// A server with a token file and `make = false`, from both clients: vesta.v1 without the
/// token (or with a wrong one) is UNAUTHENTICATED, with `authorization: Bearer TOKEN` it
/// issues; Make is PERMISSION_DENIED even with the token; health and reflection need none.
#[test]
fn token_and_make_off_hold_for_python_and_node() {
    let dir = tempfile::tempdir().unwrap();
    let (config, _) = config_with_token(dir.path(), 1012, "make = false");
    let (server, machine) = serve(dir.path(), &["--config", config.to_str().unwrap()]);
    assert_eq!(machine, 1012, "{}", server.startup);

    let python = run_python(&[&server.addr, "--token", TOKEN]);
    let node = run_node(&[&server.addr, "--token", TOKEN]);
    for steps in [&python, &node] {
        assert_refused(
            steps,
            "next_id_without_token",
            "UNAUTHENTICATED",
            "auth_token_file",
            None,
        );
        let issued = steps.ok("next_id_with_token");
        let id = uint(&issued["id"]);
        assert_eq!(issued["id_text"], id.to_string(), "{}", steps.client);
        assert_issued(steps, id, machine);
        assert_refused(
            steps,
            "make_with_token",
            "PERMISSION_DENIED",
            "make = false",
            None,
        );
        assert_healthy(steps, "health_without_token_");
    }
    assert_refused(
        &python,
        "next_id_wrong_token",
        "UNAUTHENTICATED",
        "auth_token_file",
        None,
    );
    let batch = uints(&python.ok("next_ids_with_token")["ids"]);
    assert_eq!(batch.len(), 10);
    assert_lists_services(&python, "reflection_without_token");
    server.stop_cleanly();
}

/// gRPC over TLS on the REST port: Python's `grpc.secure_channel`, trusting only a throwaway
/// CA whose certificate names 127.0.0.1, runs the open script (IDs, a batch, a stream, health
/// SERVING, errors) and lists the services by reflection; an insecure channel to the same port
/// gets no answer, only UNAVAILABLE.
#[test]
fn python_client_over_tls() {
    let ca = TestCa::new("vesta gRPC test CA");
    let cert = ca.issue("rest");
    let hold = tempfile::tempdir().unwrap();
    let (server, machine) = serve(
        hold.path(),
        &[
            "--machine",
            "1013",
            "--tls-cert",
            cert.cert.to_str().unwrap(),
            "--tls-key",
            cert.key.to_str().unwrap(),
        ],
    );
    assert_eq!(machine, 1013, "{}", server.startup);
    assert!(
        server.startup.contains("listening on https://127.0.0.1:"),
        "{}",
        server.startup
    );
    let steps = run_python(&[&server.addr, "--ca", ca.ca_pem().to_str().unwrap()]);
    assert_open_script(&steps, machine);
    assert_lists_services(&steps, "reflection_services");

    // Plaintext HTTP/2 to the TLS port: the handshake fails, so does the call; no ID.
    let plain = steps.error("plaintext_next_id");
    assert_eq!(plain["code"], "UNAVAILABLE", "{}: {plain}", steps.client);
    server.stop_cleanly();
}
