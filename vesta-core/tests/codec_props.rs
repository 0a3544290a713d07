//! Property tests of the codec: round trips for every field value, ordering, range rejection
//! and the three textual forms of an ID.

use proptest::prelude::*;
use vesta_core::{
    Explanation, FieldError, FieldKind, FieldSpec, FieldValues, GenMethod, IdFields, IdType,
    Layout, LayoutSpec, PartSpec, Preset, parse_id,
};

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
        let err = bad.encode().unwrap_err();
        prop_assert_eq!(err.field(), "version");
    }

    #[test]
    fn ids_parse_from_decimal_hex_and_java_long(id in any::<u64>()) {
        prop_assert_eq!(parse_id(&id.to_string()), Ok(id));
        // A leading `0x` is hex with any count of digits, all 16 or the fewest.
        prop_assert_eq!(parse_id(&format!("{id:#018x}")), Ok(id));
        prop_assert_eq!(parse_id(&format!("{id:#x}")), Ok(id));
        prop_assert_eq!(parse_id(&format!("{:#x}", id >> 28)), Ok(id >> 28));
        prop_assert_eq!(parse_id(&(id as i64).to_string()), Ok(id));
    }

    #[test]
    fn parse_never_panics(s in ".{0,40}") {
        let _ = parse_id(&s);
    }
}

/// Every preset (both Vesta types) and a custom layout with a fixed field between time and a
/// node of two parts, so the codec is tried in every field order the layouts use.
fn layouts() -> Vec<Layout> {
    let custom = LayoutSpec {
        name: "orders".into(),
        unit_ms: 3,
        epoch: vesta_core::Epoch::from_unix_ms(1_600_000_000_000),
        signed: true,
        fields: vec![
            FieldSpec::new("time", FieldKind::Time, 38),
            FieldSpec::new("region", FieldKind::Fixed(5), 3),
            FieldSpec::new("seq", FieldKind::Seq, 10),
            FieldSpec::node_of(
                "node",
                vec![PartSpec::new("idc", 6), PartSpec::new("biz", 6)],
            ),
        ],
    }
    .build()
    .unwrap();
    let mut all: Vec<Layout> = Preset::ALL.iter().map(|p| p.layout()).collect();
    all.push(IdType::MinGranularity.layout().clone());
    all.push(custom);
    all
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2048,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_layout_explains_what_it_makes(
        which in 0usize..7, time in any::<u64>(), seq in any::<u64>(), node in any::<u64>()
    ) {
        let layout = &layouts()[which];
        let (time, seq, node) =
            (time % (layout.max_time() + 1), seq % (layout.max_seq() + 1), node % (layout.max_node() + 1));
        let v = FieldValues::new().with("time", time).with("seq", seq).with("node", node);
        let id = layout.make(&v).unwrap();
        let x = Explanation::new(id, layout);
        prop_assert_eq!((x.time(), x.seq(), x.node()), (time, seq, node));
        prop_assert_eq!(x.warning(), None);
        prop_assert_eq!(x.unix_ms, layout.unix_ms_of(time));
        // Remaking from the explained values gives the same ID.
        let mut again = FieldValues::new();
        for (name, value) in x.values() {
            if !x.layout().fields().iter().any(|f| f.parts.iter().any(|p| p.name == name)) {
                again.set(name, value);
            }
        }
        prop_assert_eq!(layout.make(&again), Ok(id));
        if layout.signed() {
            prop_assert!((id as i64) >= 0);
        }
    }

    #[test]
    fn in_every_layout_a_later_unit_sorts_after(
        which in 0usize..7, time in any::<u64>(), seqs in any::<(u64, u64)>(), node in any::<u64>()
    ) {
        let layout = &layouts()[which];
        let time = time % layout.max_time();
        let node = node % (layout.max_node() + 1);
        let make = |t, s: u64| {
            layout.make(&FieldValues::new().with("time", t).with("seq", s % (layout.max_seq() + 1)).with("node", node)).unwrap()
        };
        prop_assert!(make(time + 1, seqs.1) > make(time, seqs.0));
    }

    #[test]
    fn values_beyond_a_field_are_refused_by_name(which in 0usize..7, excess in 1u64..1_000_000) {
        let layout = &layouts()[which];
        let ok = FieldValues::new().with("time", 0).with("seq", 0).with("node", 0);
        prop_assert!(layout.make(&ok).is_ok());
        for (name, max) in [("time", layout.max_time()), ("seq", layout.max_seq()), ("node", layout.max_node())] {
            let mut v = FieldValues::new();
            for (n, value) in ok.iter() {
                v.set(n, if n == name { max.saturating_add(excess) } else { value });
            }
            let err = layout.make(&v).unwrap_err();
            prop_assert_eq!(err.field(), name);
            let is_range = matches!(err, FieldError::OutOfRange { .. });
            prop_assert!(is_range);
        }
    }
}
