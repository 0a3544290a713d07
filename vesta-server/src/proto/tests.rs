//! The codec's own tests: every request and answer round-trips through a frame in both
//! versions (version 2 in every preset layout), payloads of the wrong length are refused, and
//! the examples in docs/protocol.md are byte-exact.

use super::*;
use crate::frame;
use proptest::prelude::*;
use vesta_core::{Explanation, FieldValues, GenMethod, IdFields, IdType, Preset};

fn round_trip_request_in(r: &Request, id: u32, dialect: &Dialect) -> Request {
    let mut buf = BytesMut::new();
    r.encode(id, dialect, &mut buf);
    let f = frame::decode(&mut buf, frame::DEFAULT_MAX_FRAME_BYTES)
        .unwrap()
        .unwrap();
    assert_eq!(f.request_id, id);
    assert!(buf.is_empty());
    Request::parse(&f, dialect).unwrap()
}

fn round_trip_request(r: &Request, id: u32) -> Request {
    round_trip_request_in(r, id, &Dialect::v1())
}

fn round_trip_response_in(r: &Response, id: u32, dialect: &Dialect) -> Response {
    let mut buf = BytesMut::new();
    r.encode(id, dialect, &mut buf);
    let f = frame::decode(&mut buf, frame::MAX_MAX_FRAME_BYTES)
        .unwrap()
        .unwrap();
    assert_eq!(f.request_id, id);
    assert!(buf.is_empty());
    Response::parse(&f, dialect).unwrap()
}

fn round_trip_response(r: &Response, id: u32) -> Response {
    round_trip_response_in(r, id, &Dialect::v1())
}

/// Version 2 over one of the presets.
fn v2(which: usize) -> Dialect {
    Dialect::new(2, Preset::ALL[which % Preset::ALL.len()].layout())
}

fn request_strategy() -> impl Strategy<Value = Request> {
    prop_oneof![
        (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Request::Hello {
            min_version: a,
            max_version: b
        }),
        Just(Request::Ping),
        Just(Request::Info),
        Just(Request::NextId),
        any::<u32>().prop_map(|count| Request::NextIds { count }),
        any::<u64>().prop_map(|id| Request::Explain { id }),
        (
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(version, id_type, gen_method, time, seq, machine)| {
                Request::Make(
                    FieldValues::new()
                        .with("version", version.into())
                        .with("type", id_type.into())
                        .with("genMethod", gen_method.into())
                        .with("time", time)
                        .with("seq", seq)
                        .with("machine", machine),
                )
            }),
        any::<u64>().prop_map(|time| Request::TransTime { time }),
        "[A-Za-z0-9._:-]{1,128}".prop_map(|tag| Request::Segment { tag }),
        (any::<u32>(), "[A-Za-z0-9._:-]{1,128}")
            .prop_map(|(count, tag)| Request::Segments { count, tag }),
        (any::<u32>(), proptest::collection::vec(any::<u8>(), 1..200)).prop_map(|(count, key)| {
            Request::SeqNext {
                count,
                key: key.into(),
            }
        }),
        proptest::collection::vec(any::<u8>(), 1..200)
            .prop_map(|key| Request::SeqCurrent { key: key.into() }),
    ]
}

fn response_strategy() -> impl Strategy<Value = Response> {
    let code = (1u16..=22).prop_map(ErrorCode::from_u16);
    prop_oneof![
        (0u8..2, any::<u32>(), any::<u32>()).prop_map(|(v, f, b)| Response::HelloOk {
            version: v,
            max_frame_bytes: f,
            max_batch: b,
            layout: None,
        }),
        Just(Response::Pong),
        (any::<[u8; 8]>(), any::<u64>(), ".{0,40}").prop_map(|(s, x, reason)| {
            // Version 1 carries a Vesta layout: type, version bit and epoch.
            let layout = IdType::ALL[usize::from(s[3] & 1)]
                .layout()
                .with_epoch(vesta_core::Epoch::from_unix_ms(x >> 1))
                .with_fixed("version", u64::from(s[4] & 1))
                .unwrap();
            Response::Info(ServerInfo {
                machine: u32::from(s[0] & 3) << 8 | u32::from(s[1]),
                gen_method: s[2],
                lease_state: s[5],
                layout,
                server_pool_start: 924,
                last_issued_time: x >> 3,
                end_of_life_ms: !x,
                max_batch: 7,
                max_frame_bytes: 65536,
                connections: 3,
                reason,
                machines: Vec::new(),
            })
        }),
        any::<u64>().prop_map(Response::Id),
        proptest::collection::vec((any::<u64>(), any::<u32>()), 0..50).prop_map(|v| {
            Response::Ids(
                v.into_iter()
                    .map(|(first, c)| {
                        // A valid run: 1 up to the IDs left in its first ID's unit.
                        let f = IdFields::decode(first);
                        let left = f.id_type.layout().max_seq() - f.seq + 1;
                        IdRun {
                            first,
                            count: 1 + u64::from(c) % left,
                            step: 1024,
                        }
                    })
                    .collect(),
            )
        }),
        any::<u64>().prop_map(Response::Made),
        any::<u64>().prop_map(Response::Time),
        any::<u64>().prop_map(Response::Number),
        proptest::collection::vec((any::<u32>(), any::<u32>()), 0..50).prop_map(|v| {
            Response::Numbers(
                v.into_iter()
                    .map(|(first, c)| u64::from(first)..u64::from(first) + u64::from(c))
                    .collect(),
            )
        }),
        (any::<u64>(), any::<u32>()).prop_map(|(last, count)| {
            // A valid call: 1..=count numbers, none below 1.
            let count = 1 + count % u32::MAX;
            Response::Seq {
                last: last.max(u64::from(count)),
                count,
            }
        }),
        any::<u64>().prop_map(Response::SeqCurrent),
        (code.clone(), ".{0,60}").prop_map(|(code, message)| Response::Error { code, message }),
        (code, ".{0,60}").prop_map(|(code, message)| Response::GoAway { code, message }),
    ]
}

proptest! {
    #[test]
    fn every_request_round_trips(r in request_strategy(), id in any::<u32>()) {
        prop_assert_eq!(round_trip_request(&r, id), r);
    }

    /// Any bytes as a SEGMENT tag: either the tag exactly as sent, or `INVALID_ARGUMENT`;
    /// never a different tag (issue 20).
    #[test]
    fn a_segment_tag_is_taken_as_sent_or_refused(tag in proptest::collection::vec(any::<u8>(), 0..200)) {
        let f = Frame {
            op: op::SEGMENT,
            request_id: 1,
            payload: Bytes::from(tag.clone()),
        };
        match Request::parse(&f, &Dialect::v1()) {
            Ok(Request::Segment { tag: got }) => prop_assert_eq!(got.as_bytes(), &tag[..]),
            Ok(other) => prop_assert!(false, "{:?}", other),
            Err(e) => prop_assert_eq!(e.code(), ErrorCode::InvalidArgument),
        }
    }

    #[test]
    fn every_response_round_trips(r in response_strategy(), id in any::<u32>()) {
        prop_assert_eq!(round_trip_response(&r, id), r);
    }

    /// Explanations round-trip for any ID, in version 1 (Vesta) and 2 (every preset).
    #[test]
    fn explanations_round_trip(id in any::<u64>(), which in 0usize..5) {
        let x = Explanation::vesta(id, vesta_core::Epoch::VESTA);
        let r = Response::Explained(x);
        prop_assert_eq!(round_trip_response(&r, 1), r);
        let d = v2(which);
        let r = Response::Explained(Explanation::new(id, &d.layout));
        prop_assert_eq!(round_trip_response_in(&r, 1, &d), r);
    }

    /// Version 2 carries the layout in `HELLO_OK`, makes IDs from any names and widens `INFO`.
    #[test]
    fn version_2_messages_round_trip(
        which in 0usize..5,
        names in proptest::collection::vec(("[a-zA-Z][a-zA-Z0-9_-]{0,31}", any::<u64>()), 0..8),
        machine in any::<u32>(),
        id in any::<u32>(),
    ) {
        let d = v2(which);
        let hello = Response::HelloOk {
            version: 2, max_frame_bytes: 65536, max_batch: 7, layout: Some(d.layout.clone()),
        };
        prop_assert_eq!(round_trip_response_in(&hello, id, &d), hello);
        let mut values = FieldValues::new();
        for (n, v) in names {
            values.set(n, v);
        }
        let make = Request::Make(values);
        prop_assert_eq!(round_trip_request_in(&make, id, &d), make);
        let info = Response::Info(ServerInfo {
            machine, gen_method: 1, lease_state: 2, server_pool_start: machine / 2,
            last_issued_time: 5, end_of_life_ms: 9, max_batch: 7, max_frame_bytes: 65536,
            connections: 1, reason: "é".into(), layout: d.layout.clone(), machines: Vec::new(),
        });
        prop_assert_eq!(round_trip_response_in(&info, id, &d), info);
        // IDS runs step by the layout's own distance between sequence numbers.
        let first = d.layout.make(&FieldValues::new().with("time", 3).with("seq", 0).with("node", 1)).unwrap();
        let ids = Response::Ids(vec![IdRun { first, count: 2, step: d.layout.seq_step() }]);
        prop_assert_eq!(round_trip_response_in(&ids, id, &d), ids);
    }

    /// A payload of any other length than the op's is refused, never misread.
    #[test]
    fn wrong_payload_lengths_are_refused(
        op in prop::sample::select(vec![op::HELLO, op::PING, op::INFO, op::NEXT_ID,
            op::NEXT_IDS, op::EXPLAIN, op::MAKE, op::TRANS_TIME]),
        len in 0usize..40,
    ) {
        let right = match op { op::HELLO => 6, op::NEXT_IDS => 4, op::EXPLAIN | op::TRANS_TIME => 8,
            op::MAKE => 27, _ => 0 };
        prop_assume!(len != right);
        let f = Frame { op, request_id: 1, payload: Bytes::from(vec![0u8; len]) };
        let is_bad_length =
            matches!(Request::parse(&f, &Dialect::v1()), Err(ParseError::BadLength { .. }));
        prop_assert!(is_bad_length);
    }
}

#[test]
fn unknown_ops_and_answer_ops_are_not_requests() {
    for op in [0x00, 0x04, 0x7f, 0x90, 0xfe, 0xff] {
        let f = Frame {
            op,
            request_id: 1,
            payload: Bytes::new(),
        };
        assert_eq!(
            Request::parse(&f, &Dialect::v1()),
            Err(ParseError::UnknownOp { op })
        );
    }
    let f = Frame {
        op: op::HELLO,
        request_id: 1,
        payload: Bytes::from_static(b"VSTB\x01\x01"),
    };
    assert_eq!(
        Request::parse(&f, &Dialect::v1()),
        Err(ParseError::BadMagic)
    );
}

/// Found by the `response_parse` fuzz target: an `IDS` run that leaves its time unit (or holds
/// no ID) was accepted, and its "k-th ID is first + k * 1024" ran into the time field, so a
/// client would have handed out IDs the server never issued. Such an answer is refused now.
#[test]
fn ids_runs_that_leave_their_unit_or_are_empty_are_refused() {
    let base = IdFields {
        version: 0,
        id_type: vesta_core::IdType::MaxPeak,
        gen_method: GenMethod::Server,
        time: 358_000_000,
        seq: (1 << 20) - 2,
        machine: 931,
    };
    let first = base.encode().unwrap();
    let parse = |runs: Vec<IdRun>| {
        let mut out = BytesMut::new();
        Response::Ids(runs).encode(5, &Dialect::v1(), &mut out);
        let f = frame::decode(&mut out, frame::MAX_MAX_FRAME_BYTES)
            .unwrap()
            .unwrap();
        Response::parse(&f, &Dialect::v1())
    };
    // The last two IDs of the unit: fine.
    let ok = vec![IdRun {
        first,
        count: 2,
        step: 1024,
    }];
    assert_eq!(parse(ok.clone()), Ok(Response::Ids(ok)));
    // One more would be sequence 2^20, i.e. the next second's sequence 0.
    let err = parse(vec![IdRun {
        first,
        count: 3,
        step: 1024,
    }])
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::BadPayload);
    assert_eq!(
        err.to_string(),
        format!(
            "IDS is not valid: run 0 (first {first}, count 3) must hold 1..=2 IDs: its first \
             has sequence 1048574 of 0..=1048575, and a run never leaves its time unit"
        )
    );
    let ms = IdFields {
        id_type: vesta_core::IdType::MinGranularity,
        seq: 0,
        ..base
    }
    .encode()
    .unwrap();
    let full = IdRun {
        first: ms,
        count: 1024,
        step: 1024,
    };
    assert!(parse(vec![full]).is_ok());
    let over = IdRun {
        first: ms,
        count: 1025,
        step: 1024,
    };
    assert!(matches!(
        parse(vec![full, over]),
        Err(ParseError::BadValue { name: "IDS", .. })
    ));
    let empty = IdRun {
        first,
        count: 0,
        step: 1024,
    };
    assert!(parse(vec![empty]).is_err());
    let top = IdRun {
        first: u64::MAX,
        count: 2,
        step: 1024,
    };
    assert!(
        parse(vec![top]).is_err(),
        "no overflow past u64::MAX either"
    );
}

#[test]
fn long_messages_are_cut_on_a_char_boundary() {
    let msg = "é".repeat(MAX_MESSAGE_BYTES);
    let r = Response::Error {
        code: ErrorCode::Internal,
        message: msg,
    };
    let Response::Error { message, .. } = round_trip_response(&r, 9) else {
        panic!("not an error");
    };
    assert_eq!(message.len(), MAX_MESSAGE_BYTES);
}

#[test]
fn the_example_in_the_doc_is_byte_exact() {
    let mut buf = BytesMut::new();
    Request::NextId.encode(7, &Dialect::v1(), &mut buf);
    assert_eq!(&buf[..], &[0, 0, 0, 5, 0x10, 0, 0, 0, 7]);
    let id = 0x155a_14a0_0000_039c;
    buf.clear();
    Response::Id(id).encode(7, &Dialect::v1(), &mut buf);
    assert_eq!(
        &buf[..],
        &[
            0, 0, 0, 0x0d, 0x90, 0, 0, 0, 7, 0x15, 0x5a, 0x14, 0xa0, 0x00, 0x00, 0x03, 0x9c
        ]
    );
    let f = IdFields::decode(id);
    assert_eq!(f.machine, 924);
    assert_eq!(f.gen_method, GenMethod::Server);
    assert_eq!(f.seq, 0);
    assert_eq!(f.time, 359_158_400);
}

#[test]
fn segment_requests_carry_their_tag_as_the_rest_of_the_payload() {
    let f = Frame {
        op: op::SEGMENTS,
        request_id: 1,
        payload: Bytes::from_static(b"\0\0\0"),
    };
    assert!(matches!(
        Request::parse(&f, &Dialect::v1()),
        Err(ParseError::BadLength {
            name: "SEGMENTS",
            ..
        })
    ));
    let f = Frame {
        op: op::SEGMENT,
        request_id: 1,
        payload: Bytes::from_static(b"or\xffders"),
    };
    // Not UTF-8: refused as sent (INVALID_ARGUMENT), never read with a replacement character
    // into a different tag (issue 20's fuzz finding).
    let e = Request::parse(&f, &Dialect::v1()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert!(e.to_string().contains("not valid UTF-8"), "{e}");
    // The finding itself: SEGMENTS, count 0x66666666, tag of 22 bytes ending in 0xCF.
    let f = Frame {
        op: op::SEGMENTS,
        request_id: 0x1166_6666,
        payload: Bytes::from_static(b"ffffffffffffffffffffffffff \x01\xcf"),
    };
    let e = Request::parse(&f, &Dialect::v1()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    // A tag that breaks the rule is refused at parse too, naming the rule.
    for bad in [&b""[..], b"a b", b"a/b", &[b't'; 129]] {
        let f = Frame {
            op: op::SEGMENT,
            request_id: 1,
            payload: Bytes::copy_from_slice(bad),
        };
        let e = Request::parse(&f, &Dialect::v1()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    }
    // A good tag is carried exactly.
    let f = Frame {
        op: op::SEGMENT,
        request_id: 1,
        payload: Bytes::from_static(b"orders.eu:1"),
    };
    assert_eq!(
        Request::parse(&f, &Dialect::v1()),
        Ok(Request::Segment {
            tag: "orders.eu:1".into()
        })
    );
}

#[test]
fn the_segment_examples_in_the_doc_are_byte_exact() {
    let mut buf = BytesMut::new();
    Request::Segment {
        tag: "orders".into(),
    }
    .encode(8, &Dialect::v1(), &mut buf);
    assert_eq!(
        &buf[..],
        &[
            0, 0, 0, 0x0b, 0x20, 0, 0, 0, 8, b'o', b'r', b'd', b'e', b'r', b's'
        ]
    );
    buf.clear();
    Response::Number(1001).encode(8, &Dialect::v1(), &mut buf);
    assert_eq!(
        &buf[..],
        &[
            0, 0, 0, 0x0d, 0xa0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0x03, 0xe9
        ]
    );
    buf.clear();
    Request::Segments {
        count: 2500,
        tag: "orders".into(),
    }
    .encode(9, &Dialect::v1(), &mut buf);
    assert_eq!(
        &buf[..],
        &[
            0, 0, 0, 0x0f, 0x21, 0, 0, 0, 9, 0, 0, 0x09, 0xc4, b'o', b'r', b'd', b'e', b'r', b's'
        ]
    );
    buf.clear();
    Response::Numbers(vec![1002..2001, 5001..6502]).encode(9, &Dialect::v1(), &mut buf);
    assert_eq!(
        &buf[..],
        &[
            0, 0, 0, 0x1f, 0xa1, 0, 0, 0, 9, 0, 2, // two ranges
            0, 0, 0, 0, 0, 0, 0x03, 0xea, 0, 0, 0x03, 0xe7, // 1002, 999 numbers
            0, 0, 0, 0, 0, 0, 0x13, 0x89, 0, 0, 0x05, 0xdd, // 5001, 1501 numbers
        ]
    );
}

#[test]
fn seq_requests_carry_their_key_as_sent_and_answers_their_count() {
    // Any bytes are carried (the server's op checks the key rule and names it); an empty key
    // is a cut frame.
    for (op, payload) in [(op::SEQ_NEXT, &b"\0\0\0\x01"[..]), (op::SEQ_CURRENT, b"")] {
        let f = Frame {
            op,
            request_id: 1,
            payload: Bytes::copy_from_slice(payload),
        };
        let e = Request::parse(&f, &Dialect::v1()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::BadPayload, "{e}");
        assert!(e.to_string().contains("at least 1"), "{e}");
    }
    let f = Frame {
        op: op::SEQ_NEXT,
        request_id: 1,
        payload: Bytes::from_static(b"\0\0\0\x03\xff\xfe"),
    };
    assert_eq!(
        Request::parse(&f, &Dialect::v1()),
        Ok(Request::SeqNext {
            count: 3,
            key: Bytes::from_static(b"\xff\xfe")
        })
    );
    // An answer of no numbers, or of numbers below 1, is no answer a server gives.
    for (last, count) in [(5u64, 0u32), (2, 3), (0, 1)] {
        let mut buf = BytesMut::new();
        Response::Seq { last, count }.encode(1, &Dialect::v1(), &mut buf);
        let f = frame::decode(&mut buf, frame::DEFAULT_MAX_FRAME_BYTES)
            .unwrap()
            .unwrap();
        let e = Response::parse(&f, &Dialect::v1()).unwrap_err();
        assert!(e.to_string().contains("numbers start at 1"), "{e}");
    }
}

#[test]
fn the_seq_examples_in_the_doc_are_byte_exact() {
    let mut buf = BytesMut::new();
    Request::SeqNext {
        count: 3,
        key: Bytes::from_static(b"42"),
    }
    .encode(5, &Dialect::v1(), &mut buf);
    assert_eq!(
        &buf[..],
        &[0, 0, 0, 0x0b, 0x30, 0, 0, 0, 5, 0, 0, 0, 3, b'4', b'2']
    );
    buf.clear();
    Response::Seq {
        last: 10_003,
        count: 3,
    }
    .encode(5, &Dialect::v1(), &mut buf);
    assert_eq!(
        &buf[..],
        &[
            0, 0, 0, 0x11, 0xb0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0x27, 0x13, 0, 0, 0, 3
        ]
    );
    buf.clear();
    Request::SeqCurrent {
        key: Bytes::from_static(b"42"),
    }
    .encode(6, &Dialect::v1(), &mut buf);
    assert_eq!(&buf[..], &[0, 0, 0, 0x07, 0x31, 0, 0, 0, 6, b'4', b'2']);
    buf.clear();
    Response::SeqCurrent(10_003).encode(6, &Dialect::v1(), &mut buf);
    assert_eq!(
        &buf[..],
        &[
            0, 0, 0, 0x0d, 0xb1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0x27, 0x13
        ]
    );
}
