//! The report's figures and its text on made-up runs: fill per unit, the cap of each layout,
//! quantiles and the number formats.

use super::*;
use crate::tally::histogram;

fn target(machine: u64, id_type: IdType) -> Target {
    Target {
        address: format!("127.0.0.1:{machine}"),
        machine: Some(machine),
        layout: Some(id_type.layout().clone()),
        lease: Some("static".into()),
        machines: Vec::new(),
    }
}

fn report(targets: Vec<Target>, per_unit: &[(u64, IdType, u64, u64)]) -> Report {
    let per_unit: BTreeMap<Unit, u64> = per_unit
        .iter()
        .map(|&(machine, id_type, time, n)| {
            (
                Unit {
                    machine,
                    id_type: Some(id_type),
                    time,
                },
                n,
            )
        })
        .collect();
    Report {
        protocol: Protocol::Tcp { pipeline: 8 },
        load: Load {
            targets: targets.iter().map(|t| t.address.clone()).collect(),
            connections: 2,
            duration: Duration::from_secs(5),
            batch: Some(1000),
            rate: None,
        },
        targets,
        requests: 0,
        ids: per_unit.values().sum(),
        errors: 0,
        errors_by_kind: BTreeMap::new(),
        first_error: None,
        elapsed: Duration::from_secs(5),
        latency: histogram(),
        service: None,
        per_unit,
        segment: None,
        request: None,
        seq_keys: None,
        seq_shape: crate::seq::KeyShape::Dense,
        moves: 0,
        moving: 0,
        served: BTreeMap::new(),
    }
}

const MS: IdType = IdType::MinGranularity;
const S: IdType = IdType::MaxPeak;

#[test]
fn skipped_units_count_as_empty() {
    // Issue 13: IDs in every other millisecond is half the cap, not 100 %.
    let mut units = vec![(924, MS, 100, 7)];
    units.extend((101..=199).step_by(2).map(|t| (924, MS, t, 1024)));
    units.push((924, MS, 200, 3));
    let r = report(vec![target(924, MS)], &units);
    let u = r.unit_fill().unwrap();
    assert_eq!((u.units, u.empty), (99, 49));
    assert!((u.fill - 50.0 / 99.0).abs() < 1e-12, "{}", u.fill);
    assert_eq!(u.layout.as_ref(), Some(MS.layout()));
    let text = r.to_string();
    assert!(
        text.contains(
            "unit fill  50.51 % of 1,024 IDs per millisecond over the 99 whole milliseconds \
             inside the run, 49 of them empty"
        ),
        "{text}"
    );
}

#[test]
fn ids_per_second_are_set_against_the_cap_of_the_whole_run() {
    // 5 s at 1,024,000/s would be 5,120,000 IDs; 2,793,000 is 54.6 % of it.
    let r = report(vec![target(924, MS)], &[(924, MS, 1, 2_793_000)]);
    assert_eq!(r.cap_per_sec(), Some(1_024_000));
    assert!((r.cap_share().unwrap() - 0.545_507_8).abs() < 1e-6);
    let text = r.to_string();
    assert!(
        text.contains(
            "ids        2,793,000 = 558,600 IDs/s = 54.6 % of the cap 1,024,000/s over the \
             whole run"
        ),
        "{text}"
    );
    // Above the cap (a short run of second units): the line says why.
    let r = report(vec![target(924, S)], &[(924, S, 1, 6_000_000)]);
    assert!(
        r.to_string()
            .contains("114.4 % of the cap 1,048,576/s over the whole run (the first unit"),
        "{r}"
    );
    // Two servers: their caps add up; the same machine behind two addresses counts once.
    let mut twice = target(924, MS);
    twice.address = "other:1".into();
    let r = report(vec![target(924, MS), twice, target(925, S)], &[]);
    assert_eq!(r.cap_per_sec(), Some(1_024_000 + 1_048_576));
}

#[test]
fn each_server_spans_its_own_units() {
    let cap = 1 << 20;
    let r = report(
        vec![target(924, S), target(925, S)],
        &[
            (924, S, 10, 5),
            (924, S, 11, cap),
            (924, S, 12, cap / 2),
            (924, S, 13, 7),
            (925, S, 11, 3),
            (925, S, 12, cap),
            (925, S, 13, 9),
            // Two units only: nothing strictly inside.
            (926, S, 1, 1),
            (926, S, 2, 2),
        ],
    );
    let u = r.unit_fill().unwrap();
    assert_eq!((u.units, u.empty), (3, 0));
    assert!((u.fill - 2.5 / 3.0).abs() < 1e-12, "{}", u.fill);
    assert!(r.overfull_units().is_empty());
    let one = report(vec![target(924, S)], &[(924, S, 1, 1), (924, S, 2, 2)]);
    assert_eq!(one.unit_fill(), None);
}

#[test]
fn a_unit_over_its_capacity_is_reported_as_duplicates() {
    let r = report(vec![target(924, MS)], &[(924, MS, 5, 1025)]);
    assert_eq!(r.overfull_units().len(), 1);
    assert!(r.to_string().contains("DUPLICATES 1 units"), "{r}");
}

#[test]
fn a_baseline_has_no_cap_and_errors_are_listed_by_kind() {
    let mut r = report(
        vec![Target {
            address: "127.0.0.1:18081".into(),
            machine: None,
            layout: None,
            lease: None,
            machines: Vec::new(),
        }],
        &[],
    );
    r.protocol = Protocol::Rest { baseline: true };
    r.requests = 10;
    r.errors = 3;
    r.errors_by_kind = BTreeMap::from([("503".into(), 2), ("429".into(), 1)]);
    r.first_error = Some("503: not issuing".into());
    assert_eq!(r.cap_per_sec(), None);
    let text = r.to_string();
    assert!(!text.contains("ids "), "{text}");
    assert!(
        text.contains("errors     3: 429 1, 503 2 (first: 503: not issuing)"),
        "{text}"
    );
    assert!(text.contains("GET /genids?count=1000"), "{text}");
}

#[test]
fn a_seq_run_counts_numbers_over_its_keys() {
    let mut r = report(vec![target(924, S)], &[]);
    r.seq_keys = Some(1000);
    r.ids = 5_000;
    r.requests = 5_000;
    r.load.batch = None;
    assert_eq!(r.cap_per_sec(), None);
    let text = r.to_string();
    assert!(
        text.contains("x pipeline 8, SEQ_NEXT, random keys 0..1,000,"),
        "{text}"
    );
    assert!(
        text.contains(
            "numbers    5,000 = 1,000 numbers/s over 1,000 keys (1 per answer, every \
             answer checked)"
        ),
        "{text}"
    );
    assert!(!text.contains("ids "), "{text}");
    r.protocol = Protocol::Redis { pipeline: 8 };
    r.load.batch = Some(10);
    r.targets = vec![Target::unknown("127.0.0.1:6379")];
    let text = r.to_string();
    assert!(
        text.contains("127.0.0.1:6379 (peer: Redis, not vesta)"),
        "{text}"
    );
    assert!(
        text.contains("redis, 2 connections x pipeline 8, INCRBY key 10, random keys"),
        "{text}"
    );
    r.protocol = Protocol::Postgres;
    let text = r.to_string();
    assert!(
        text.contains(
            "postgres, 2 connections (1 query in flight each), UPDATE seq SET cur = cur + 10 \
             WHERE key = $1 RETURNING cur, random keys 0..1,000"
        ),
        "{text}"
    );
}

#[test]
fn numbers_are_grouped_and_latencies_scaled() {
    assert_eq!(group(1_048_576.0), "1,048,576");
    assert_eq!(group(999.4), "999");
    assert_eq!(group(0.0), "0");
    assert_eq!(micros(850.2), "850 µs");
    assert_eq!(micros(1250.0), "1.25 ms");
}

#[test]
fn a_server_of_several_machine_ids_is_named_by_all_of_them() {
    let mut several = target(930, IdType::MaxPeak);
    several.machines = (930..=937).collect();
    let r = report(vec![several], &[]);
    assert!(
        r.to_string()
            .contains("(machines 930..=937, max-peak, lease static)"),
        "{r}"
    );
    let mut scattered = target(5, IdType::MaxPeak);
    scattered.machines = vec![5, 9, 12, 13, 20, 21, 22];
    let r = report(vec![scattered], &[]);
    assert!(
        r.to_string().contains("(machines 5, 9, 12, 13, 20..=22,"),
        "{r}"
    );
    let r = report(vec![target(924, IdType::MaxPeak)], &[]);
    assert!(r.to_string().contains("(machine 924, max-peak"), "{r}");
}
