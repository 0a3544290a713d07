//! Property tests of the codec: round trips for every field value, ordering, range rejection
//! and the three textual forms of an ID.

use proptest::prelude::*;
use vesta_core::{FieldError, GenMethod, IdFields, IdType, parse_id};

fn id_type() -> impl Strategy<Value = IdType> {
    prop_oneof![Just(IdType::MaxPeak), Just(IdType::MinGranularity)]
}

fn gen_method() -> impl Strategy<Value = GenMethod> {
    (0u64..4).prop_map(|c| GenMethod::from_code(c).unwrap())
}

/// Any valid set of fields.
fn fields() -> impl Strategy<Value = IdFields> {
    (id_type(), gen_method(), 0u8..=1, 0u64..1024).prop_flat_map(|(t, g, v, m)| {
        let l = t.layout();
        (0..=l.max_time(), 0..=l.max_seq()).prop_map(move |(time, seq)| IdFields {
            version: v,
            id_type: t,
            gen_method: g,
            time,
            seq,
            machine: m,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4096,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fields_round_trip(f in fields()) {
        let id = f.encode().unwrap();
        prop_assert_eq!(IdFields::decode(id), f);
    }

    #[test]
    fn every_u64_decodes_and_re_encodes_to_itself(id in any::<u64>()) {
        prop_assert_eq!(IdFields::decode(id).encode(), Ok(id));
    }

    #[test]
    fn later_time_means_larger_id_on_the_same_machine(
        f in fields(), dt in 1u64..1000, seq2 in any::<u64>()
    ) {
        // Same version, type, genMethod and machine: the u64 order is the time order.
        let l = f.layout();
        let early = IdFields { time: f.time.min(l.max_time() - dt), ..f };
        let later = IdFields { time: early.time + dt, seq: seq2 % l.capacity_per_unit(), ..f };
        prop_assert!(later.encode().unwrap() > early.encode().unwrap());
    }

    #[test]
    fn out_of_range_fields_are_rejected_by_name(f in fields(), excess in 1u64..1_000_000) {
        let l = f.layout();
        let cases = [
            ("time", IdFields { time: l.max_time() + excess, ..f }),
            ("seq", IdFields { seq: l.max_seq() + excess, ..f }),
            ("machine", IdFields { machine: 1023 + excess, ..f }),
        ];
        for (name, bad) in cases {
            let err = bad.encode().unwrap_err();
            prop_assert_eq!(err.field(), name);
            let is_range = matches!(err, FieldError::OutOfRange { .. });
            prop_assert!(is_range);
        }
        let bad = IdFields { version: 2 + (excess % 254) as u8, ..f };
        prop_assert_eq!(bad.encode().unwrap_err().field(), "version");
    }

    #[test]
    fn ids_parse_from_decimal_hex_and_java_long(id in any::<u64>()) {
        prop_assert_eq!(parse_id(&id.to_string()), Ok(id));
        prop_assert_eq!(parse_id(&format!("{id:#x}")), Ok(id));
        prop_assert_eq!(parse_id(&(id as i64).to_string()), Ok(id));
    }

    #[test]
    fn parse_never_panics(s in ".{0,40}") {
        let _ = parse_id(&s);
    }
}
