//! The generator under a manual clock: rollover, sequence overflow, clock rollback inside and
//! beyond the tolerance, time-field overflow, floors, fencing and machine switches.

use std::collections::HashSet;

use vesta_core::{
    Clock, Epoch, Explanation, GenError, GenMethod, Generator, GeneratorConfig, IdFields, IdType,
    Layout, MachinePools, ManualClock, Preset, SeqStart,
};

/// A wall-clock instant well after the epoch, on a second boundary.
const T0: u64 = 1_700_000_000_000;

fn config(id_type: IdType) -> GeneratorConfig {
    GeneratorConfig {
        layout: id_type.layout().clone(),
        machine: 7,
        ..GeneratorConfig::default()
    }
}

fn generator(id_type: IdType, clock: &ManualClock) -> Generator<&ManualClock> {
    Generator::new(config(id_type), clock).unwrap()
}

fn unit(id_type: IdType, ms: u64) -> u64 {
    id_type.layout().time_at(ms).unwrap()
}

#[test]
fn fields_of_an_issued_id_are_the_configured_ones() {
    let clock = ManualClock::new(T0 + 123);
    let g = generator(IdType::MinGranularity, &clock);
    let f = IdFields::decode(g.next_id().unwrap());
    assert_eq!(
        f,
        IdFields {
            version: 0,
            id_type: IdType::MinGranularity,
            gen_method: GenMethod::Embed,
            time: unit(IdType::MinGranularity, T0 + 123),
            seq: 0,
            machine: 7,
        }
    );
}

#[test]
fn sequence_counts_up_within_a_unit_and_restarts_in_the_next() {
    for id_type in IdType::ALL {
        let clock = ManualClock::new(T0);
        let g = generator(id_type, &clock);
        let a = IdFields::decode(g.next_id().unwrap());
        let b = IdFields::decode(g.next_id().unwrap());
        assert_eq!((b.time, b.seq), (a.time, 1));
        clock.advance(id_type.layout().unit_ms());
        let c = IdFields::decode(g.next_id().unwrap());
        assert_eq!((c.time, c.seq), (a.time + 1, 0), "{id_type}");
    }
}

#[test]
fn overflow_waits_for_the_next_unit_and_advances_the_stored_time() {
    let clock = ManualClock::new(T0);
    let g = generator(IdType::MinGranularity, &clock);
    let t = unit(IdType::MinGranularity, T0);
    for _ in 0..1024 {
        g.next_id().unwrap();
    }
    // Vesta's bug: after an overflow the next two calls must not both be (t+1, 0).
    let a = IdFields::decode(g.next_id().unwrap());
    let b = IdFields::decode(g.next_id().unwrap());
    assert_eq!((a.time, a.seq), (t + 1, 0));
    assert_eq!((b.time, b.seq), (t + 1, 1));
    assert_eq!(clock.waits(), 1);
    assert_eq!(g.stats().overflow_waits, 1);
}

#[test]
fn overflow_across_many_units_never_duplicates() {
    for id_type in IdType::ALL {
        let clock = ManualClock::new(T0);
        let g = generator(id_type, &clock);
        let cap = id_type.layout().capacity_per_unit();
        let units = if id_type == IdType::MaxPeak { 3 } else { 200 };
        let mut seen = HashSet::new();
        let mut last = 0;
        for _ in 0..cap * units {
            let id = g.next_id().unwrap();
            assert!(id > last, "not increasing");
            assert!(seen.insert(id), "duplicate {id}");
            last = id;
        }
        let first = unit(id_type, T0);
        assert_eq!(IdFields::decode(last).time, first + units - 1);
        assert_eq!(clock.waits(), units - 1, "{id_type}");
    }
}

#[test]
fn non_blocking_call_reports_the_wait_instead() {
    let clock = ManualClock::new(T0 + 400);
    let g = generator(IdType::MaxPeak, &clock);
    g.next_ids(1 << 20).unwrap();
    assert_eq!(
        g.try_next_id(),
        Err(GenError::WouldBlock {
            wait_ms: 600,
            unit: "second"
        })
    );
    assert_eq!(clock.waits(), 0);
}

#[test]
fn rollback_within_tolerance_continues_the_last_unit_then_waits() {
    let clock = ManualClock::new(T0 + 50);
    let g = generator(IdType::MinGranularity, &clock);
    let a = IdFields::decode(g.next_id().unwrap());
    clock.rewind(3); // within the 5 ms default
    let b = IdFields::decode(g.next_id().unwrap());
    assert_eq!(
        (b.time, b.seq),
        (a.time, 1),
        "keeps issuing from the last unit"
    );
    assert_eq!(g.stats().clock_rollbacks, 1);
    // Exhaust the unit: the generator must wait for the unit after the last issued one.
    let rest = g.next_ids(1022).unwrap();
    assert_eq!(rest.len(), 1022);
    let c = IdFields::decode(g.next_id().unwrap());
    assert_eq!((c.time, c.seq), (a.time + 1, 0));
    assert_eq!(
        clock.now_ms(),
        T0 + 51,
        "waited exactly until the next unit"
    );
    assert_eq!(g.stats().clock_rollbacks, 1, "one episode, counted once");
}

#[test]
fn rollback_beyond_tolerance_is_refused_with_the_distance() {
    let clock = ManualClock::new(T0 + 50);
    let g = generator(IdType::MinGranularity, &clock);
    let a = g.next_id().unwrap();
    clock.rewind(10);
    assert_eq!(
        g.next_id(),
        Err(GenError::ClockBehind {
            behind_ms: 10,
            tolerance_ms: 5
        })
    );
    assert_eq!(
        g.next_ids(5),
        Err(GenError::ClockBehind {
            behind_ms: 10,
            tolerance_ms: 5
        })
    );
    assert_eq!(g.stats().clock_rollback_refusals, 2);
    clock.advance(10);
    assert!(
        g.next_id().unwrap() > a,
        "resumes above the last ID once the clock is back"
    );
}

#[test]
fn max_peak_rides_out_a_sub_second_rollback_across_a_boundary() {
    let clock = ManualClock::new(T0 + 100);
    let g = generator(IdType::MaxPeak, &clock);
    let a = IdFields::decode(g.next_id().unwrap());
    clock.rewind(600); // into the previous second, within the 1000 ms default
    let b = IdFields::decode(g.next_id().unwrap());
    assert_eq!((b.time, b.seq), (a.time, 1));
    clock.rewind(1000); // now 1500 ms behind
    assert!(matches!(
        g.next_id(),
        Err(GenError::ClockBehind {
            behind_ms: 1500,
            ..
        })
    ));
}

#[test]
fn zero_tolerance_refuses_any_rollback_but_not_concurrent_readings() {
    let clock = ManualClock::new(T0 + 5);
    let cfg = GeneratorConfig {
        rollback_tolerance_ms: Some(0),
        ..config(IdType::MinGranularity)
    };
    let g = Generator::new(cfg, &clock).unwrap();
    g.next_id().unwrap();
    g.next_id().unwrap();
    clock.rewind(1);
    assert!(matches!(
        g.next_id(),
        Err(GenError::ClockBehind {
            behind_ms: 1,
            tolerance_ms: 0
        })
    ));
}

#[test]
fn time_field_overflow_is_an_error_never_a_wrap() {
    let layout = IdType::MinGranularity.layout();
    let end = layout.end_of_life_ms();
    let clock = ManualClock::new(end);
    let g = generator(IdType::MinGranularity, &clock);
    let last = IdFields::decode(g.next_id().unwrap());
    assert_eq!(last.time, layout.max_time());
    g.next_ids(1023).unwrap();
    let err = g.next_id().unwrap_err();
    assert_eq!(
        err,
        GenError::TimeOverflow {
            end_of_life_ms: end
        }
    );
    assert!(
        err.to_string().contains("2049-11-03T11:53:47.775Z"),
        "{err}"
    );
    clock.advance(1);
    assert_eq!(
        g.next_id(),
        Err(GenError::TimeOverflow {
            end_of_life_ms: end
        })
    );
}

#[test]
fn a_clock_before_the_epoch_is_refused() {
    let clock = ManualClock::new(Epoch::VESTA.unix_ms() - 1);
    let g = generator(IdType::MaxPeak, &clock);
    assert!(matches!(g.next_id(), Err(GenError::BeforeEpoch { .. })));
}

#[test]
fn batches_are_contiguous_runs_and_span_units() {
    let clock = ManualClock::new(T0);
    let g = generator(IdType::MinGranularity, &clock);
    for _ in 0..10 {
        g.next_id().unwrap();
    }
    let batch = g.next_ids(3000).unwrap();
    let counts: Vec<u64> = batch.runs().iter().map(|r| r.count).collect();
    assert_eq!(counts, vec![1014, 1024, 962]);
    let ids = batch.to_vec();
    assert_eq!(ids.len(), 3000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let f = IdFields::decode(ids[0]);
    assert_eq!(f.seq, 10);
    let next = IdFields::decode(g.next_id().unwrap());
    assert_eq!(
        next.seq, 962,
        "the batch's last run left the state at its end"
    );
    assert!(g.next_ids(0).unwrap().is_empty());
}

#[test]
fn non_blocking_batch_takes_what_the_unit_has_left() {
    let clock = ManualClock::new(T0);
    let g = generator(IdType::MinGranularity, &clock);
    g.next_ids(1000).unwrap();
    let b = g.try_next_ids(100).unwrap();
    assert_eq!(b.len(), 24);
    assert!(matches!(
        g.try_next_ids(1),
        Err(GenError::WouldBlock { .. })
    ));
}

#[test]
fn floor_holds_issuing_above_a_high_water_mark() {
    let clock = ManualClock::new(T0);
    let t = unit(IdType::MaxPeak, T0);
    let cfg = GeneratorConfig {
        floor: Some(t),
        ..config(IdType::MaxPeak)
    };
    let g = Generator::new(cfg, &clock).unwrap();
    assert_eq!(g.last_issued_time(), t);
    let f = IdFields::decode(g.next_id().unwrap());
    assert_eq!((f.time, f.seq), (t + 1, 0), "waited past the mark");
    assert_eq!(clock.waits(), 1);

    // A mark far ahead of the clock is a refusal, not a wait.
    let clock = ManualClock::new(T0);
    let cfg = GeneratorConfig {
        floor: Some(t + 10),
        ..config(IdType::MaxPeak)
    };
    let g = Generator::new(cfg, &clock).unwrap();
    assert!(matches!(g.next_id(), Err(GenError::ClockBehind { .. })));
}

#[test]
fn raise_floor_and_switch_machine_never_go_back() {
    let clock = ManualClock::new(T0);
    let g = generator(IdType::MinGranularity, &clock);
    let t = unit(IdType::MinGranularity, T0);
    let a = g.next_id().unwrap();
    g.raise_floor(t - 5).unwrap();
    assert!(g.next_id().unwrap() > a, "a lower floor changes nothing");
    g.switch_machine(8, t + 2).unwrap();
    assert_eq!(g.machine(), 8);
    let f = IdFields::decode(g.next_id().unwrap());
    assert_eq!((f.machine, f.time, f.seq), (8, t + 3, 0));
    assert!(
        g.switch_machine(924, 0).is_err(),
        "server pool is off limits to embed"
    );
}

#[test]
fn fencing_stops_issuing_until_lifted() {
    let clock = ManualClock::new(T0);
    let g = generator(IdType::MaxPeak, &clock);
    g.set_deadline_ms(T0 + 10);
    assert!(g.next_id().is_ok());
    clock.advance(10);
    assert_eq!(
        g.next_id(),
        Err(GenError::Fenced {
            deadline_ms: T0 + 10
        })
    );
    g.fence();
    assert_eq!(g.next_ids(3), Err(GenError::Fenced { deadline_ms: 0 }));
    g.set_deadline_ms(u64::MAX);
    assert!(g.next_id().is_ok());
}

#[test]
fn random_sequence_start_stays_below_its_bound_and_varies() {
    let clock = ManualClock::new(T0);
    let cfg = GeneratorConfig {
        seq_start: SeqStart::Random { bound: 64 },
        ..config(IdType::MinGranularity)
    };
    let g = Generator::new(cfg, &clock).unwrap();
    let mut starts = HashSet::new();
    for _ in 0..200 {
        let f = IdFields::decode(g.next_id().unwrap());
        assert!(f.seq < 64);
        starts.insert(f.seq);
        clock.advance(1);
    }
    assert!(starts.len() > 20, "starts barely vary: {starts:?}");
}

#[test]
fn invalid_configs_are_refused_with_the_field_named() {
    let clock = ManualClock::new(T0);
    let cases = [
        (
            GeneratorConfig {
                machine: 924,
                ..GeneratorConfig::default()
            },
            "machine 924",
        ),
        (
            GeneratorConfig {
                pools: Some(MachinePools::for_node_bits(12)),
                ..GeneratorConfig::default()
            },
            "machine pools split a 12-bit node field but the vesta max-peak layout's node field \
             has 10 bits",
        ),
        (
            GeneratorConfig {
                gen_method: GenMethod::Reserved,
                ..GeneratorConfig::default()
            },
            "reserved",
        ),
        (
            GeneratorConfig {
                rollback_tolerance_ms: Some(60_001),
                ..GeneratorConfig::default()
            },
            "rollback_tolerance_ms 60001",
        ),
        (
            GeneratorConfig {
                seq_start: SeqStart::Random { bound: 0 },
                ..GeneratorConfig::default()
            },
            "seq_start_random_bound 0",
        ),
        (
            GeneratorConfig {
                floor: Some(1 << 30),
                ..GeneratorConfig::default()
            },
            "floor",
        ),
    ];
    for (cfg, needle) in cases {
        let err = Generator::new(cfg, &clock).unwrap_err().to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

/// A clock whose waits keep the `Clock` contract the way the system clock does, and which can
/// be stepped back in the middle of its next wait. It counts the real time its waits took.
#[derive(Default)]
struct SteppingClock {
    now: std::sync::atomic::AtomicU64,
    step_back_in_next_wait: std::sync::atomic::AtomicU64,
    waited_ms: std::sync::atomic::AtomicU64,
}

impl SteppingClock {
    fn new(now_ms: u64) -> Self {
        let c = SteppingClock::default();
        c.now.store(now_ms, SeqCst);
        c
    }

    fn step_back_during_next_wait(&self, ms: u64) {
        self.step_back_in_next_wait.store(ms, SeqCst);
    }
}

use std::sync::atomic::Ordering::SeqCst;

impl Clock for SteppingClock {
    fn now_ms(&self) -> u64 {
        self.now.load(SeqCst)
    }

    /// Real time passes for the distance seen at the start; a step back during it leaves the
    /// wall clock that far short of the target when the bounded wait ends.
    fn wait_until_ms(&self, target_ms: u64) {
        let now = self.now.load(SeqCst);
        let distance = target_ms.saturating_sub(now);
        self.waited_ms.fetch_add(distance, SeqCst);
        let step = self.step_back_in_next_wait.swap(0, SeqCst);
        self.now.store(now + distance - step, SeqCst);
    }
}

/// Uses up the unit the clock is in.
fn use_up_unit(g: &Generator<&SteppingClock>) -> u64 {
    let cap = g.layout().capacity_per_unit();
    g.try_next_ids(cap).unwrap().iter().last().unwrap()
}

#[test]
fn a_step_back_during_an_overflow_wait_is_refused_after_one_bounded_wait() {
    for id_type in IdType::ALL {
        let clock = SteppingClock::new(T0 + 10);
        let cfg = config(id_type);
        let g = Generator::new(cfg, &clock).unwrap();
        use_up_unit(&g);
        clock.step_back_during_next_wait(3_600_000);
        let r = g.next_id();
        assert!(
            matches!(r, Err(GenError::ClockBehind { behind_ms, .. }) if behind_ms >= 3_599_000),
            "{id_type}: {r:?}"
        );
        let unit = id_type.layout().unit_ms();
        assert!(
            clock.waited_ms.load(SeqCst) <= unit,
            "{id_type}: waited past one unit"
        );
    }
}

#[test]
fn a_step_back_within_the_tolerance_costs_at_most_the_step_and_a_unit() {
    for (id_type, step) in [(IdType::MaxPeak, 700), (IdType::MinGranularity, 4)] {
        let clock = SteppingClock::new(T0 + 10);
        let g = Generator::new(config(id_type), &clock).unwrap();
        let last = use_up_unit(&g);
        clock.step_back_during_next_wait(step);
        let id = g.next_id().unwrap();
        assert_eq!(IdFields::decode(id).time, IdFields::decode(last).time + 1);
        let bound = id_type.layout().unit_ms() + g.config().rollback_tolerance_ms();
        let waited = clock.waited_ms.load(SeqCst);
        assert!(
            waited <= bound,
            "{id_type}: waited {waited} ms > {bound} ms"
        );
    }
}

#[test]
fn a_batch_spanning_units_survives_a_small_step_and_refuses_a_large_one() {
    let clock = SteppingClock::new(T0 + 10);
    let g = Generator::new(config(IdType::MinGranularity), &clock).unwrap();
    clock.step_back_during_next_wait(3);
    let batch = g.next_ids(5_000).unwrap();
    let ids = batch.to_vec();
    assert_eq!(ids.len(), 5_000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing, no repeat");
    // The same batch with an hour's step in its first wait: an error, not a hang, and nothing
    // issued after it is below what the batch already took.
    let before = g.next_id().unwrap();
    clock.step_back_during_next_wait(3_600_000);
    let r = g.next_ids(5_000);
    assert!(matches!(r, Err(GenError::ClockBehind { .. })), "{r:?}");
    clock.now.fetch_add(3_600_000, SeqCst);
    assert!(g.next_id().unwrap() > before);
}

/// The peers' layouts issue through the same generator: every preset's IDs carry the configured
/// node, count their sequence in the right place and wait for the next unit on overflow.
#[test]
fn every_preset_issues_its_own_layout_and_overflows_into_the_next_unit() {
    for preset in Preset::ALL {
        let layout = preset.layout();
        let machine = layout.default_pools().embed().end() - 1;
        // A day into the layout's epoch at the latest (Sonyflake v2's is 2025).
        let now = T0.max(layout.epoch().unix_ms() + 86_400_000);
        let clock = ManualClock::new(now);
        let cfg = GeneratorConfig {
            machine,
            ..GeneratorConfig::for_layout(layout.clone())
        };
        let g = Generator::new(cfg, &clock).unwrap();
        let first = g.next_id().unwrap();
        let x = Explanation::new(first, &layout);
        assert_eq!(x.node(), machine, "{preset}");
        assert_eq!(x.seq(), 0, "{preset}");
        assert_eq!(x.time(), layout.time_at(now).unwrap(), "{preset}");
        assert_eq!(x.warning(), None, "{preset}");
        if layout.signed() {
            assert!((first as i64) > 0, "{preset}: {first}");
        }
        // Use up the unit: the batch is one run with the layout's step, then the next unit.
        let cap = layout.capacity_per_unit();
        let rest = g.try_next_ids(cap).unwrap();
        assert_eq!(rest.len(), cap - 1, "{preset}");
        assert_eq!(rest.runs()[0].step, layout.seq_step(), "{preset}");
        let last = rest.iter().last().unwrap();
        assert_eq!(Explanation::new(last, &layout).seq(), layout.max_seq());
        let mut seen: HashSet<u64> = rest.iter().collect();
        assert!(seen.insert(first));
        assert!(matches!(g.try_next_id(), Err(GenError::WouldBlock { .. })));
        let next = g.next_id().unwrap();
        assert!(next > last, "{preset}");
        let nx = Explanation::new(next, &layout);
        assert_eq!((nx.time(), nx.seq(), nx.node()), (x.time() + 1, 0, machine));
        assert_eq!(clock.now_ms(), layout.unix_ms_of(x.time() + 1), "{preset}");
    }
}

#[test]
fn leafs_random_start_stays_below_100_in_each_new_millisecond() {
    let layout = Preset::Leaf.layout();
    let clock = ManualClock::new(T0);
    let cfg = GeneratorConfig {
        machine: 5,
        seq_start: SeqStart::Random { bound: 100 },
        ..GeneratorConfig::for_layout(layout.clone())
    };
    let g = Generator::new(cfg, &clock).unwrap();
    let mut starts = HashSet::new();
    for _ in 0..300 {
        let x = Explanation::new(g.next_id().unwrap(), &layout);
        assert!(x.seq() < 100);
        starts.insert(x.seq());
        clock.advance(1);
    }
    assert!(starts.len() > 20, "starts barely vary: {starts:?}");
}

#[test]
fn peer_layouts_ride_out_rollback_within_one_unit_and_refuse_beyond() {
    for preset in [Preset::Leaf, Preset::Sonyflake, Preset::UidGenerator] {
        let layout: Layout = preset.layout();
        let tolerance = layout.default_rollback_tolerance_ms();
        let clock = ManualClock::new(T0 + 50_000);
        let g = Generator::new(GeneratorConfig::for_layout(layout.clone()), &clock).unwrap();
        let a = g.next_id().unwrap();
        clock.set(T0 + 50_000 - tolerance);
        let b = g.next_id().unwrap();
        assert!(b > a, "{preset}");
        clock.set(T0 + 50_000 - tolerance - layout.unit_ms() - 1);
        assert!(
            matches!(g.next_id(), Err(GenError::ClockBehind { .. })),
            "{preset}"
        );
    }
}

#[test]
fn switch_machine_in_a_layout_with_seq_lowest_keeps_ids_apart() {
    let layout = Preset::Twitter.layout();
    let clock = ManualClock::new(T0);
    let cfg = GeneratorConfig {
        machine: 900,
        ..GeneratorConfig::for_layout(layout.clone())
    };
    let g = Generator::new(cfg, &clock).unwrap();
    let before = g.next_ids(10).unwrap();
    g.switch_machine(3, 0).unwrap();
    assert_eq!(g.machine(), 3);
    let after = g.next_id().unwrap();
    let x = Explanation::new(after, &layout);
    assert_eq!(x.node(), 3);
    // A switch moves to the next unit, so nothing of the new machine shares the old unit.
    assert_eq!(
        x.time(),
        Explanation::new(before.iter().last().unwrap(), &layout).time() + 1
    );
    g.raise_floor(x.time() + 5).unwrap();
    assert!(matches!(g.try_next_id(), Err(GenError::WouldBlock { .. })));
}
