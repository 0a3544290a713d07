//! Many threads on one generator: no duplicate, and each thread's IDs strictly increase.

use std::sync::Arc;
use std::thread;

use vesta_core::{Generator, GeneratorConfig, IdType, ManualClock};

fn hammer(id_type: IdType, threads: usize, per_thread: usize, batch: u64) {
    // The manual clock moves forward whenever a unit is used up, so the layout's cap does not
    // slow the test down while the threads still contend on every unit boundary.
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let cfg = GeneratorConfig {
        id_type,
        machine: 3,
        ..GeneratorConfig::default()
    };
    let generator = Arc::new(Generator::new(cfg, clock).unwrap());
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let g = Arc::clone(&generator);
            thread::spawn(move || {
                let mut ids = Vec::with_capacity(per_thread);
                while ids.len() < per_thread {
                    if batch == 1 {
                        ids.push(g.next_id().unwrap());
                    } else {
                        ids.extend(g.next_ids(batch).unwrap().iter());
                    }
                }
                assert!(
                    ids.windows(2).all(|w| w[0] < w[1]),
                    "a thread's IDs went backwards"
                );
                ids
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "{} duplicates", total - all.len());
}

#[test]
fn four_threads_two_million_ids_each_min_granularity() {
    hammer(IdType::MinGranularity, 4, 2_000_000, 1);
}

#[test]
fn two_threads_two_million_ids_each_max_peak() {
    hammer(IdType::MaxPeak, 2, 2_000_000, 1);
}

#[test]
fn batches_and_singles_mixed_across_threads() {
    hammer(IdType::MinGranularity, 3, 500_000, 700);
}
