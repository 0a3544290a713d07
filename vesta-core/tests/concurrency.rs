//! Many threads on one generator: no duplicate, and each thread's IDs strictly increase.

use std::sync::Arc;
use std::thread;

use vesta_core::{Generator, GeneratorConfig, IdType, Layout, ManualClock, Preset};

fn hammer(layout: Layout, threads: usize, per_thread: usize, batch: u64) {
    // The manual clock moves forward whenever a unit is used up, so the layout's cap does not
    // slow the test down while the threads still contend on every unit boundary.
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let cfg = GeneratorConfig {
        machine: 3,
        ..GeneratorConfig::for_layout(layout)
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
    hammer(IdType::MinGranularity.layout().clone(), 4, 2_000_000, 1);
}

#[test]
fn two_threads_two_million_ids_each_max_peak() {
    hammer(IdType::MaxPeak.layout().clone(), 2, 2_000_000, 1);
}

#[test]
fn batches_and_singles_mixed_across_threads() {
    hammer(IdType::MinGranularity.layout().clone(), 3, 500_000, 700);
}

#[test]
fn peer_layouts_under_contention_leaf_and_sonyflake() {
    // Leaf's sequence is the lowest field; Sonyflake's units are 10 ms with 256 IDs each.
    hammer(Preset::Leaf.layout(), 2, 1_000_000, 1);
    hammer(Preset::Sonyflake.layout(), 2, 300_000, 37);
}
