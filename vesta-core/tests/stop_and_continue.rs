//! `Generator::stop` and `Generator::continue_after`: a clean stop knows exactly which ID was
//! issued last, even with callers racing the stop, and a successor that is told that position
//! continues right after it, in the same unit, without waiting and without repeating an ID.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use vesta_core::{
    Clock, Explanation, GenError, Generator, GeneratorConfig, IdType, Layout, ManualClock,
    Position, Preset,
};

const T0: u64 = 1_700_000_000_500;

fn layouts() -> Vec<Layout> {
    vec![
        IdType::MaxPeak.layout().clone(),
        IdType::MinGranularity.layout().clone(),
        Preset::Leaf.layout(),
        Preset::Sonyflake.layout(),
        Preset::Twitter.layout(),
    ]
}

fn position(id: u64, layout: &Layout) -> Position {
    let x = Explanation::new(id, layout);
    Position {
        time: x.time(),
        seq: x.seq(),
    }
}

#[test]
fn a_successor_continues_right_after_the_stop_in_the_same_unit() {
    for layout in layouts() {
        let config = GeneratorConfig {
            machine: 3,
            ..GeneratorConfig::for_layout(layout.clone())
        };
        let clock = Arc::new(ManualClock::new(T0));
        let first = Generator::new(config.clone(), clock.clone()).unwrap();
        let issued = first.next_ids(5).unwrap().to_vec();
        let stopped = first.stop();
        assert_eq!(
            stopped,
            position(*issued.last().unwrap(), &layout),
            "{layout}"
        );
        assert!(
            matches!(first.next_id(), Err(GenError::Fenced { .. })),
            "{layout}: issued after the stop"
        );

        let next = Generator::new(config, clock.clone()).unwrap();
        next.continue_after(stopped, 0).unwrap();
        let id = next.next_id().unwrap();
        let at = position(id, &layout);
        assert_eq!(
            at,
            Position {
                time: stopped.time,
                seq: stopped.seq + 1
            },
            "{layout}: the same unit, the next seq"
        );
        assert_eq!(clock.waits(), 0, "{layout}: nothing waited");
        // Never back: a second, older position changes nothing.
        next.continue_after(Position { time: 1, seq: 0 }, 0)
            .unwrap();
        assert!(next.next_id().unwrap() > id);
    }
}

#[test]
fn a_stop_with_nothing_issued_reports_the_floor_and_a_full_unit() {
    let layout = IdType::MaxPeak.layout().clone();
    let config = GeneratorConfig {
        floor: Some(100),
        ..GeneratorConfig::for_layout(layout.clone())
    };
    let g = Generator::new(config, ManualClock::new(T0)).unwrap();
    assert_eq!(
        g.stop(),
        Position {
            time: 100,
            seq: layout.max_seq()
        }
    );
}

#[test]
fn a_stop_after_a_full_unit_still_stops() {
    let layout = IdType::MinGranularity.layout().clone();
    let clock = Arc::new(ManualClock::new(T0));
    let g = Generator::new(GeneratorConfig::for_layout(layout.clone()), clock.clone()).unwrap();
    let ids = g.try_next_ids(layout.capacity_per_unit()).unwrap().to_vec();
    assert_eq!(ids.len() as u64, layout.capacity_per_unit());
    let stopped = g.stop();
    assert_eq!(stopped, position(*ids.last().unwrap(), &layout));
    clock.advance(5);
    assert!(matches!(g.next_id(), Err(GenError::Fenced { .. })));
}

#[test]
fn continue_after_refuses_a_seq_beyond_the_layout() {
    let layout = IdType::MinGranularity.layout().clone();
    let g = Generator::new(
        GeneratorConfig::for_layout(layout.clone()),
        ManualClock::new(T0),
    )
    .unwrap();
    let err = g
        .continue_after(
            Position {
                time: 5,
                seq: layout.max_seq() + 1,
            },
            0,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("seq") && err.contains("1023"), "{err}");
}

/// Threads issue as fast as they can while another stops the generator: the position `stop`
/// returns is the highest ID any of them got, every time, so a successor continuing after it
/// repeats nothing.
#[test]
fn the_stop_position_is_exact_against_racing_callers() {
    for round in 0..50 {
        let layout = if round % 2 == 0 {
            IdType::MinGranularity.layout().clone()
        } else {
            Preset::Leaf.layout()
        };
        let clock = Arc::new(ManualClock::new(T0));
        let g = Arc::new(
            Generator::new(GeneratorConfig::for_layout(layout.clone()), clock.clone()).unwrap(),
        );
        let go = Arc::new(AtomicBool::new(false));
        let issued = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (g, go, clock) = (g.clone(), go.clone(), clock.clone());
                let issued = issued.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    while !go.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    loop {
                        match g.try_next_id() {
                            Ok(id) => {
                                got.push(id);
                                issued.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(GenError::WouldBlock { .. }) => clock.advance(1),
                            Err(_) => return got,
                        }
                    }
                })
            })
            .collect();
        go.store(true, Ordering::Release);
        // Stop while they issue: after a varying number of IDs, however the threads are
        // scheduled.
        while issued.load(Ordering::Relaxed) < 100 + round * 41 {
            std::thread::yield_now();
        }
        let stopped = g.stop();
        let ids: Vec<u64> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        let highest = ids.iter().copied().max().expect("the workers issued");
        assert_eq!(stopped, position(highest, &layout), "round {round}");

        let next = Generator::new(GeneratorConfig::for_layout(layout.clone()), clock).unwrap();
        next.continue_after(stopped, 0).unwrap();
        let seen: HashSet<u64> = ids.into_iter().collect();
        for id in next.next_ids(2_000).unwrap().iter() {
            assert!(!seen.contains(&id), "round {round}: {id} issued twice");
        }
    }
}

/// After the stopped unit, issuing waits for the unit after `then_beyond`: a copy of the state
/// file used on another host since the stop issued only in units up to it.
#[test]
fn after_the_stopped_unit_issuing_waits_beyond_the_bound() {
    let layout = IdType::MaxPeak.layout().clone();
    let clock = Arc::new(ManualClock::new(T0));
    let first = Generator::new(GeneratorConfig::for_layout(layout.clone()), clock.clone()).unwrap();
    first.next_ids(3).unwrap();
    let stopped = first.stop();
    let beyond = stopped.time + 2;
    let next = Generator::new(GeneratorConfig::for_layout(layout.clone()), clock.clone()).unwrap();
    next.continue_after(stopped, beyond).unwrap();
    assert_eq!(
        position(next.next_id().unwrap(), &layout).time,
        stopped.time
    );
    assert_eq!(next.next_unit_start_ms(), layout.unix_ms_of(beyond + 1));
    clock.advance(1_000);
    assert!(matches!(
        next.try_next_id(),
        Err(GenError::WouldBlock { .. })
    ));
    let id = next.next_id().unwrap();
    assert_eq!(
        position(id, &layout),
        Position {
            time: beyond + 1,
            seq: 0
        }
    );
    assert_eq!(
        clock.now_ms(),
        layout.unix_ms_of(beyond + 1),
        "waited for it"
    );
}
