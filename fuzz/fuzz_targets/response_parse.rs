//! Fuzzes `Response::parse`, which the client runs on whatever bytes a server sends, with
//! arbitrary frames: the first byte is the op, the next four the request id, the rest the
//! payload. Properties: nothing panics; an answer that parses re-encodes (normalised: long
//! messages cut, unknown error codes read as INTERNAL) to bytes that parse back to the same
//! answer; every run of an `IDS` answer describes real IDs (its last ID exists: no overflow into
//! other fields); an `INFO` answer's names are total functions of its codes.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use vesta_core::IdFields;
use vesta_server::frame::{self, Frame};
use vesta_server::proto::Response;

fn encode(r: &Response, id: u32) -> BytesMut {
    let mut out = BytesMut::new();
    r.encode(id, &mut out);
    out
}

fn reparse(bytes: &BytesMut) -> Response {
    let mut b = bytes.clone();
    let f = frame::decode(&mut b, frame::MAX_MAX_FRAME_BYTES)
        .expect("own encoding decodes")
        .expect("own encoding is complete");
    Response::parse(&f).expect("own encoding parses")
}

fuzz_target!(|data: &[u8]| {
    let Some((&op_code, rest)) = data.split_first() else {
        return;
    };
    let (request_id, payload) = match rest.split_first_chunk::<4>() {
        Some((id, payload)) => (u32::from_be_bytes(*id), payload),
        None => (0, rest),
    };
    let f = Frame {
        op: op_code,
        request_id,
        payload: Bytes::copy_from_slice(payload),
    };
    let Ok(answer) = Response::parse(&f) else {
        return;
    };
    let once = encode(&answer, request_id);
    let again = reparse(&once);
    assert_eq!(
        encode(&again, request_id),
        once,
        "parse and encode are inverses"
    );
    match &answer {
        Response::Ids(runs) => {
            for run in runs {
                assert!(run.count > 0, "an accepted run is not empty");
                let last = run.get(run.count - 1).expect("the last ID of a run exists");
                let (a, b) = (IdFields::decode(run.first), IdFields::decode(last));
                assert_eq!(
                    (a.version, a.id_type, a.gen_method, a.time, a.machine),
                    (b.version, b.id_type, b.gen_method, b.time, b.machine),
                    "a run stays in one time unit of one machine"
                );
            }
        }
        Response::Info(info) => {
            let _ = info.lease_state_name();
            let _ = info.layout_type();
        }
        _ => {}
    }
});
