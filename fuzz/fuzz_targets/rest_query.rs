//! Fuzzes the REST server's query decoding (`vesta_rest::fuzzing`, the server's query module) with arbitrary query strings
//! for each endpoint's parameter list, then the parameter parsing the endpoints do with the
//! values (`parse_u64`, `parse_id`, genMethod and type names). Properties: nothing panics; a
//! decoded query gives back only parameters the endpoint accepts; a number accepted is plain
//! decimal; and no error message echoes more than a bounded slice of the input, however long.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vesta_core::{GenMethod, IdType, parse_id};
use vesta_rest::fuzzing::{Query, makeid, parse_u64};

/// Longest error message accepted: the fixed text (under 150 bytes) plus at most 64 characters
/// (up to 4 bytes each) of the one echoed name or value, whatever the input's length.
const MAX_MESSAGE_BYTES: usize = 512;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    let endpoints: [(&str, &[&str]); 5] = [
        ("/genid", &[]),
        ("/genids", &["count"]),
        ("/expid", &["id"]),
        ("/transtime", &["time"]),
        ("/makeid", &makeid::PARAMS),
    ];
    let (endpoint, allowed) = endpoints[pick as usize % endpoints.len()];
    let query = match Query::parse(Some(raw), endpoint, allowed) {
        Ok(q) => q,
        Err(e) => {
            assert!(
                e.message.len() <= MAX_MESSAGE_BYTES,
                "{} bytes: {}",
                e.message.len(),
                e.message
            );
            return;
        }
    };
    for name in allowed {
        let Some(value) = query.get(name) else {
            continue;
        };
        match parse_u64(name, value) {
            Ok(n) => {
                assert!(!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()));
                assert_eq!(value.trim_start_matches('0').parse::<u64>().unwrap_or(0), n);
            }
            Err(e) => assert!(e.message.len() <= MAX_MESSAGE_BYTES, "{}", e.message),
        }
        match *name {
            "id" => {
                let _ = parse_id(value);
            }
            "genMethod" => {
                let _ = value.parse::<GenMethod>();
            }
            "type" => {
                let _ = value.parse::<IdType>();
            }
            _ => {}
        }
    }
    // Names not in the endpoint's list are never handed out.
    for name in makeid::PARAMS.iter().chain(&["count", "id"]) {
        if !allowed.contains(name) {
            assert_eq!(query.get(name), None);
        }
    }
});
