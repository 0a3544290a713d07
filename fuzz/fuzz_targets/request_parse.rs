//! Fuzzes `Request::parse`, the server's decoder of every request op, with arbitrary frames as a
//! hostile client would send them: the first byte is the op, the next four the request id, the
//! rest the payload. Properties: nothing panics; a request that parses has the frame's op and
//! re-encodes to exactly the frame's bytes; a refusal maps to `UNKNOWN_OP` exactly when the op
//! is not a request op; and what the server does next with the pure ops (range-check `MAKE`
//! fields, explain an ID, convert a time) never panics either.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use vesta_core::{Epoch, Explanation, IdFields, IdType};
use vesta_server::frame::{self, Frame};
use vesta_server::proto::{ErrorCode, Request, WireExplanation, op};

/// The request ops of protocol v1.
const REQUEST_OPS: [u8; 8] = [
    op::HELLO,
    op::PING,
    op::INFO,
    op::NEXT_ID,
    op::NEXT_IDS,
    op::EXPLAIN,
    op::MAKE,
    op::TRANS_TIME,
];

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
    match Request::parse(&f) {
        Ok(request) => {
            assert_eq!(request.op(), op_code);
            let mut encoded = BytesMut::new();
            request.encode(request_id, &mut encoded);
            let mut expected = BytesMut::new();
            frame::encode(&mut expected, &f);
            assert_eq!(encoded, expected, "a request re-encodes byte for byte");
            follow_on(&request);
        }
        Err(e) => {
            let unknown = !REQUEST_OPS.contains(&op_code);
            assert_eq!(e.code() == ErrorCode::UnknownOp, unknown, "{e}");
            assert!(!e.to_string().is_empty());
        }
    }
});

/// The pure steps the server takes with a parsed request.
fn follow_on(request: &Request) {
    match request {
        Request::Make(raw) => {
            // Every field is range-checked: either an encodable ID or an error naming a field.
            match raw.to_fields() {
                Ok(fields) => {
                    let id = fields.encode().expect("checked fields encode");
                    assert_eq!(IdFields::decode(id), fields);
                }
                Err(e) => assert!(!e.field().is_empty()),
            }
        }
        Request::Explain { id } => {
            let explained = Explanation::new(*id, Epoch::VESTA);
            let wire = WireExplanation::from(explained);
            let back = Explanation::try_from(wire).expect("an explanation's fields convert back");
            assert_eq!(back, explained);
            assert_eq!(back.fields.encode(), Ok(*id));
        }
        Request::TransTime { time } => {
            for t in IdType::ALL {
                let layout = t.layout();
                if *time <= layout.max_time() {
                    let _ = Epoch::VESTA.datetime_of(layout, *time);
                }
            }
        }
        _ => {}
    }
}
