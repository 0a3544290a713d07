//! Fuzzes the frame decoder and the message parsers with arbitrary bytes, as a hostile client
//! or a broken server would send them. Properties: nothing panics; every frame decoded
//! re-encodes to exactly the bytes it came from; every message parsed re-encodes and parses to
//! itself; an incomplete frame consumes nothing. Linear in the input: bytes are compared with
//! the input at the decoder's position, never by copying what is left.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use vesta_server::frame;
use vesta_server::proto::{Request, Response};

fn encode_response(r: &Response, id: u32) -> BytesMut {
    let mut out = BytesMut::new();
    r.encode(id, &mut out);
    out
}

fn parse_response(bytes: &BytesMut) -> Response {
    let mut b = bytes.clone();
    let f = frame::decode(&mut b, frame::MAX_MAX_FRAME_BYTES)
        .expect("own encoding decodes")
        .expect("own encoding is complete");
    Response::parse(&f).expect("own encoding parses")
}

fuzz_target!(|data: &[u8]| {
    // The first two bytes pick the frame limit, so small and large limits are both explored.
    let (max, input) = match data {
        [a, b, rest @ ..] => (5 + u32::from(u16::from_be_bytes([*a, *b])), rest),
        _ => return,
    };
    let mut buf = BytesMut::from(input);
    loop {
        let at = input.len() - buf.len();
        match frame::decode(&mut buf, max) {
            Ok(Some(f)) => {
                let mut re = BytesMut::new();
                frame::encode(&mut re, &f);
                assert_eq!(&input[at..at + re.len()], &re[..]);
                assert_eq!(input.len() - (at + re.len()), buf.len());
                if let Ok(req) = Request::parse(&f) {
                    let mut out = BytesMut::new();
                    req.encode(f.request_id, &mut out);
                    assert_eq!(&out[..], &re[..], "a request re-encodes byte for byte");
                }
                if let Ok(resp) = Response::parse(&f) {
                    // Encoding normalises (long messages are cut, unknown error codes read as
                    // INTERNAL); after that, parse and encode are exact inverses.
                    let once = encode_response(&resp, f.request_id);
                    let again = parse_response(&once);
                    assert_eq!(encode_response(&again, f.request_id), once);
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
});
