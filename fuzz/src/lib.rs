//! The properties the fuzz targets check, one function per target, kept apart from libFuzzer so
//! the same assertions run twice: under `cargo fuzz` (nightly, `fuzz_targets/`) and on stable in
//! the test command, where `tests/tests/it/fuzz_corpus.rs` feeds this library every file of
//! `fuzz/seeds/` and `fuzz/artifacts/`. A finding, once fixed and kept as a seed, stays
//! fixed in CI.
//!
//! Every protocol check runs in every dialect a connection can speak: version 1 (Vesta's
//! layouts), version 2 over each preset layout and a custom one, and version 3 (version 2 but
//! for `INFO`) over Vesta's, so each op is decoded the way each kind of server and client
//! decodes it.
//!
//! This file has the replay, the frame, TCP protocol and ID checks; `rest.rs` the REST query
//! check, `grpc.rs` the gRPC one (each with what only it needs).

mod grpc;
mod rest;

pub use grpc::grpc_request;
pub use rest::rest_query;

use bytes::{Bytes, BytesMut};
use vesta_core::{
    Epoch, Explanation, FieldKind, FieldSpec, FieldValues, Form, GenMethod, IdType, Layout,
    LayoutSpec, PartSpec, Preset, parse_id as parse_id_text,
};
use vesta_rest::fuzzing::{Query, make_from_query, makeid_params, parse_u64};
use vesta_server::frame::{self, Frame};
use vesta_server::proto::{Dialect, ErrorCode, Request, Response, op};

/// A target's check of one input.
pub type Check = fn(&[u8]);

/// A target built without `cargo fuzz`: runs `check` on every file named on the command line
/// (a directory: each file in it), as libFuzzer reruns a crash file. A broken property panics;
/// the panic names the file that broke it. Refuses libFuzzer's own flags and an empty command
/// line in one line.
pub fn replay(name: &str, check: Check) -> std::process::ExitCode {
    use std::path::PathBuf;
    use std::process::ExitCode;
    use std::sync::{Arc, Mutex};

    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    if args.is_empty() || args.iter().any(|a| a.to_string_lossy().starts_with('-')) {
        eprintln!(
            "usage: {name} FILE|DIR... (replays inputs through the {name} check; libFuzzer's \
             flags need `cargo fuzz run {name}`)"
        );
        return ExitCode::from(2);
    }
    let current = Arc::new(Mutex::new(PathBuf::new()));
    let shown = Arc::clone(&current);
    let target = name.to_owned();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Ok(file) = shown.lock() {
            eprintln!("{target}: {} breaks a property", file.display());
        }
        default_hook(info);
    }));
    let mut seen = 0;
    for arg in args {
        let files = match std::fs::read_dir(&arg) {
            Ok(entries) => {
                let mut files: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
                files.retain(|f| f.is_file());
                files.sort();
                files
            }
            Err(_) => vec![arg],
        };
        for file in files {
            let data = match std::fs::read(&file) {
                Ok(data) => data,
                Err(e) => {
                    eprintln!("{name}: cannot read {}: {e}", file.display());
                    return ExitCode::FAILURE;
                }
            };
            if let Ok(mut shown) = current.lock() {
                shown.clone_from(&file);
            }
            check(&data);
            seen += 1;
        }
    }
    println!("{name}: {seen} inputs, every property held");
    ExitCode::SUCCESS
}

/// The targets by name, as `fuzz/seeds/<name>/` and `fuzz_targets/<name>.rs` name them.
pub const TARGETS: [(&str, Check); 6] = [
    ("frame_decoder", frame_decoder),
    ("request_parse", request_parse),
    ("response_parse", response_parse),
    ("rest_query", rest_query),
    ("parse_id", parse_id),
    ("grpc_request", grpc_request),
];

/// Every request op a server knows (protocol v2, segment and sequence ops included).
pub const REQUEST_OPS: [u8; 12] = [
    op::HELLO,
    op::PING,
    op::INFO,
    op::NEXT_ID,
    op::NEXT_IDS,
    op::EXPLAIN,
    op::MAKE,
    op::TRANS_TIME,
    op::SEGMENT,
    op::SEGMENTS,
    op::SEQ_NEXT,
    op::SEQ_CURRENT,
];

/// Longest REST error message accepted: the fixed text (under 200 bytes) plus at most 64
/// characters (up to 4 bytes each) of the one echoed name or value, whatever the input's length.
const MAX_MESSAGE_BYTES: usize = 512;

/// A custom layout with a split node and a fixed field, beside the presets (41 ms + 6 IDC + 6
/// business + a 1-bit fixed kind + 9 sequence bits).
fn custom_layout() -> Layout {
    let spec = LayoutSpec {
        name: "custom".into(),
        unit_ms: 1,
        epoch: Epoch::from_unix_ms(1_577_836_800_000),
        signed: true,
        fields: vec![
            FieldSpec::new("time", FieldKind::Time, 41),
            FieldSpec::node_of(
                "node",
                vec![PartSpec::new("idc", 6), PartSpec::new("biz", 6)],
            ),
            FieldSpec::new("kind", FieldKind::Fixed(1), 1),
            FieldSpec::new("seq", FieldKind::Seq, 9),
        ],
    };
    spec.build().expect("the custom layout is valid")
}

/// The layouts the checks run in: Vesta's two, the peers' presets and a custom one.
pub fn layouts() -> Vec<Layout> {
    let mut all: Vec<Layout> = IdType::ALL.iter().map(|t| t.layout().clone()).collect();
    for p in [
        Preset::Leaf,
        Preset::Twitter,
        Preset::Sonyflake,
        Preset::UidGenerator,
    ] {
        all.push(p.layout());
    }
    all.push(custom_layout());
    all
}

/// Every dialect a connection can speak: v1, v2 over each layout, and v3 (which differs from
/// v2 only in `INFO`) over Vesta's.
pub fn dialects() -> Vec<Dialect> {
    let mut all = vec![Dialect::v1()];
    all.extend(layouts().into_iter().map(|l| Dialect::new(2, l)));
    all.push(Dialect::new(3, IdType::MaxPeak.layout().clone()));
    all
}

fn encode_response(r: &Response, id: u32, d: &Dialect) -> BytesMut {
    let mut out = BytesMut::new();
    r.encode(id, d, &mut out);
    out
}

fn reparse_response(bytes: &BytesMut, d: &Dialect) -> Response {
    let mut b = bytes.clone();
    let f = frame::decode(&mut b, frame::MAX_MAX_FRAME_BYTES)
        .expect("own encoding decodes")
        .expect("own encoding is complete");
    Response::parse(&f, d).expect("own encoding parses")
}

/// Encoding an answer normalises it (long messages cut, unknown error codes read as
/// `INTERNAL`); after that, parse and encode are exact inverses.
fn check_answer_round_trip(answer: &Response, request_id: u32, d: &Dialect) {
    let once = encode_response(answer, request_id, d);
    let again = reparse_response(&once, d);
    assert_eq!(
        encode_response(&again, request_id, d),
        once,
        "parse and encode are inverses"
    );
}

/// A request that parses re-encodes to exactly the frame it came from: the server never
/// alters what a client sent (the lossy-tag finding of issue 20).
fn check_request_round_trip(request: &Request, f: &Frame, d: &Dialect) {
    let mut encoded = BytesMut::new();
    request.encode(f.request_id, d, &mut encoded);
    let mut expected = BytesMut::new();
    frame::encode(&mut expected, f);
    assert_eq!(encoded, expected, "a request re-encodes byte for byte");
}

/// The frame decoder and both message parsers on a stream of arbitrary bytes, as a hostile
/// client or a broken server sends them. The first two bytes pick the frame limit. Nothing
/// panics; every frame decoded re-encodes to exactly the bytes it came from; an incomplete frame
/// consumes nothing; requests and answers round-trip in every dialect.
pub fn frame_decoder(data: &[u8]) {
    let (max, input) = match data {
        [a, b, rest @ ..] => (5 + u32::from(u16::from_be_bytes([*a, *b])), rest),
        _ => return,
    };
    let dialects = dialects();
    let mut buf = BytesMut::from(input);
    loop {
        let at = input.len() - buf.len();
        match frame::decode(&mut buf, max) {
            Ok(Some(f)) => {
                let mut re = BytesMut::new();
                frame::encode(&mut re, &f);
                assert_eq!(&input[at..at + re.len()], &re[..]);
                assert_eq!(input.len() - (at + re.len()), buf.len());
                for d in &dialects {
                    if let Ok(req) = Request::parse(&f, d) {
                        check_request_round_trip(&req, &f, d);
                    }
                    if let Ok(resp) = Response::parse(&f, d) {
                        check_answer_round_trip(&resp, f.request_id, d);
                    }
                }
            }
            Ok(None) => {
                assert_eq!(
                    &buf[..],
                    &input[at..],
                    "an incomplete frame consumes nothing"
                );
                break;
            }
            Err(_) => break,
        }
    }
}

/// A frame from fuzz bytes: the first byte is the op, the next four the request id, the rest
/// the payload.
fn frame_of(data: &[u8]) -> Option<Frame> {
    let (&op_code, rest) = data.split_first()?;
    let (request_id, payload) = match rest.split_first_chunk::<4>() {
        Some((id, payload)) => (u32::from_be_bytes(*id), payload),
        None => (0, rest),
    };
    Some(Frame {
        op: op_code,
        request_id,
        payload: Bytes::copy_from_slice(payload),
    })
}

/// `Request::parse`, the server's decoder of every request op, in every dialect. A request that
/// parses has the frame's op and re-encodes byte for byte; a refusal is `UNKNOWN_OP` exactly
/// when the op is not a request op; the pure steps the server takes next (make, explain,
/// convert a time) never panic and agree with each other.
pub fn request_parse(data: &[u8]) {
    let Some(f) = frame_of(data) else {
        return;
    };
    for d in dialects() {
        match Request::parse(&f, &d) {
            Ok(request) => {
                assert_eq!(request.op(), f.op);
                check_request_round_trip(&request, &f, &d);
                follow_on(&request, &d);
            }
            Err(e) => {
                let unknown = !REQUEST_OPS.contains(&f.op);
                assert_eq!(e.code() == ErrorCode::UnknownOp, unknown, "{e}");
                assert!(!e.to_string().is_empty());
            }
        }
    }
}

/// The pure steps a server of `d`'s layout takes with a parsed request.
fn follow_on(request: &Request, d: &Dialect) {
    let layout = &d.layout;
    match request {
        Request::Make(values) => match layout.make(values) {
            // An ID made explains back to the values asked for.
            Ok(id) => {
                let x = Explanation::new(id, layout);
                for (name, v) in values.iter() {
                    if let Some(got) = x.value(name) {
                        assert_eq!(got, v, "{name} of a made ID");
                    }
                }
            }
            Err(e) => assert!(!e.field().is_empty()),
        },
        Request::Explain { id } => {
            let x = Explanation::new(*id, layout);
            let answer = Response::Explained(x);
            check_answer_round_trip(&answer, 1, d);
            if x_is_clean(*id, layout) {
                let x = Explanation::new(*id, layout);
                let mut values = FieldValues::new();
                for f in layout.fields() {
                    values.set(f.name.as_str(), x.value(&f.name).expect("a field's value"));
                }
                assert_eq!(layout.make(&values), Ok(*id), "explain then make");
            }
        }
        Request::TransTime { time } => {
            let _ = layout.unix_ms_of(*time);
        }
        // A key is carried as sent: the server's op checks the key rule.
        Request::SeqNext { key, .. } | Request::SeqCurrent { key } => {
            assert!(!key.is_empty(), "a parsed key is at least one byte");
        }
        Request::Segment { tag } | Request::Segments { tag, .. } => {
            assert!(
                vesta_segment_tag_ok(tag),
                "a parsed tag keeps the tag rule: {tag:?}"
            );
        }
        _ => {}
    }
}

/// An ID with no stray bits and the layout's fixed values, which `make` rebuilds exactly.
fn x_is_clean(id: u64, layout: &Layout) -> bool {
    let x = Explanation::new(id, layout);
    x.stray_bits() == 0 && x.unexpected_fixed().is_empty()
}

/// The tag rule (1 to 128 characters of `A-Z a-z 0-9 . _ : -`), restated here so the check
/// does not trust the code it checks.
fn vesta_segment_tag_ok(tag: &str) -> bool {
    (1..=128).contains(&tag.len())
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

/// `Response::parse`, which a client runs on whatever a server sends, in every dialect. An
/// answer that parses round-trips; every run of an `IDS` answer holds real IDs of one time unit
/// of one node; an `INFO` answer's names are total functions of its codes.
pub fn response_parse(data: &[u8]) {
    let Some(f) = frame_of(data) else {
        return;
    };
    for d in dialects() {
        let Ok(answer) = Response::parse(&f, &d) else {
            continue;
        };
        check_answer_round_trip(&answer, f.request_id, &d);
        match &answer {
            Response::Ids(runs) => {
                for run in runs {
                    assert!(run.count > 0, "an accepted run is not empty");
                    let last = run.get(run.count - 1).expect("the last ID of a run exists");
                    let (a, b) = (
                        Explanation::new(run.first, &d.layout),
                        Explanation::new(last, &d.layout),
                    );
                    assert_eq!(
                        (a.time(), a.node(), a.gen_method()),
                        (b.time(), b.node(), b.gen_method()),
                        "a run stays in one time unit of one node"
                    );
                }
            }
            Response::Info(info) => {
                let _ = info.lease_state_name();
                let _ = info.layout_type();
            }
            Response::Numbers(ranges) => {
                for r in ranges {
                    assert!(r.start <= r.end);
                }
            }
            Response::Seq { last, count } => {
                assert!(
                    *count >= 1 && u64::from(*count) <= *last,
                    "numbers start at 1"
                );
            }
            _ => {}
        }
    }
}

/// `vesta_core::parse_id`, which reads IDs typed by people and other systems (`vesta explain`,
/// `/expid`), with arbitrary text. An accepted ID reads back the same from each of its
/// spellings (decimal, Java `long`, `0x` hex, base32, base62); a text with a leading `0x` is
/// read as hex only, one with `0X` as hex where no string form fits; a refusal quotes the
/// trimmed text it refused.
pub fn parse_id(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let trimmed = text.trim();
    let fits_a_form = [Form::Base32, Form::Base62]
        .iter()
        .any(|f| f.decode(trimmed).is_some());
    if trimmed.starts_with("0x") || (trimmed.starts_with("0X") && !fits_a_form) {
        match parse_id_text(text) {
            Ok(id) => assert_eq!(Form::Hex.decode(trimmed), Some(id)),
            Err(e) => assert!(e.hex && Form::Hex.decode(trimmed).is_none(), "{e}"),
        }
    }
    match parse_id_text(text) {
        Ok(id) => {
            assert_eq!(parse_id_text(&id.to_string()), Ok(id));
            assert_eq!(parse_id_text(&(id as i64).to_string()), Ok(id));
            assert_eq!(parse_id_text(&format!("{id:#018x}")), Ok(id));
            assert_eq!(parse_id_text(&format!("  {id:#018X}\n")), Ok(id));
            // Every string form reads back in its form, and by detection unless it is digits
            // only (digits alone are decimal) or starts with `0x` (always hex).
            for form in Form::ALL {
                let written = form.encode(id);
                let w = written.as_str();
                assert_eq!(form.decode(w), Some(id), "{form}");
                let hex_like = form != Form::Hex && w.starts_with("0x");
                if !w.bytes().all(|b| b.is_ascii_digit()) && !hex_like {
                    assert_eq!(parse_id_text(w), Ok(id), "{form}");
                }
            }
        }
        Err(e) => assert_eq!(e.text, text.trim()),
    }
}
