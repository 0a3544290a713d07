//! An embedded issuer of k machine IDs (`[machine] ids`) saturated: IDs per second over whole
//! time units, by 1 and 2 threads calling `Issuer::next_id` (and `next_ids`) flat out on the
//! system clock, against k times the layout's cap, with the fill of each machine ID's units;
//! beside it, in the same run, the Rust snowflake peers saturated the same way (their own cap:
//! 4,096 IDs a millisecond). UidGenerator's cached generator (Java, 6-7.6M IDs/s in its own
//! benchmark, by borrowing future seconds) is the goal it is set against in docs/BENCHMARKS.md.
//! Run: `cargo bench -p vesta-bench --bench machine_ids`.
//!
//! Every thread starts on a unit boundary and stops at the end of the window; only IDs whose
//! time falls inside the window count, so the rate is of whole units.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use vesta_core::{Clock, IdType, Layout};
use vesta_embed::{Issuer, IssuerConfig};

/// Whole units each run lasts (2 s of min-granularity, 3 s of max-peak).
fn units_of(layout: &Layout) -> u64 {
    match layout.unit_ms() {
        1 => 2_000,
        _ => 3,
    }
}

/// `threads` threads issue from `issuer` flat out for the window; returns the IDs per
/// (machine ID, time unit) inside it and the window's wall time.
fn saturate(
    issuer: &Arc<Issuer>,
    threads: usize,
    batch: u64,
) -> (BTreeMap<(u64, u64), u64>, Duration) {
    let layout = issuer.layout().clone();
    let clock = *issuer.clock();
    let first = layout.time_at(clock.now_ms()).expect("after the epoch") + 2;
    let end = first + units_of(&layout);
    let barrier = Arc::new(Barrier::new(threads));
    let started = Arc::new(Mutex::new(None));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (issuer, barrier, layout) = (issuer.clone(), barrier.clone(), layout.clone());
            let started = started.clone();
            std::thread::spawn(move || {
                let mut counts: BTreeMap<(u64, u64), u64> = BTreeMap::new();
                let (node, time) = (layout.node_span(), layout.time_span());
                barrier.wait();
                clock.wait_until_ms(layout.unix_ms_of(first));
                started.lock().unwrap().get_or_insert_with(Instant::now);
                'run: loop {
                    if batch == 1 {
                        let id = issuer.next_id().expect("issue");
                        let t = time.get(id);
                        if t >= end {
                            break;
                        }
                        if t >= first {
                            *counts.entry((node.get(id), t)).or_default() += 1;
                        }
                    } else {
                        for run in issuer.next_ids(batch).expect("issue").runs() {
                            let t = time.get(run.first);
                            if t >= end {
                                break 'run;
                            }
                            if t >= first {
                                *counts.entry((node.get(run.first), t)).or_default() += run.count;
                            }
                        }
                    }
                }
                counts
            })
        })
        .collect();
    let mut all = BTreeMap::new();
    for h in handles {
        for (k, n) in h.join().expect("thread") {
            *all.entry(k).or_default() += n;
        }
    }
    let wall = started.lock().unwrap().expect("started").elapsed();
    (all, wall)
}

fn vesta(id_type: IdType, k: u64, threads: usize, batch: u64) {
    let mut config = IssuerConfig::default();
    config.id.id_type = Some(id_type);
    config.machine.id = Some(0);
    config.machine.ids = k;
    let issuer = Arc::new(Issuer::start(config).expect("start"));
    let layout = issuer.layout().clone();
    let units = units_of(&layout);
    let (counts, _wall) = saturate(&issuer, threads, batch);
    let ids: u64 = counts.values().sum();
    let seconds = (units * layout.unit_ms()) as f64 / 1000.0;
    let cap = layout.capacity_per_second() * k;
    // The fill of each machine ID's units: its IDs per unit against one unit's capacity.
    let per_unit = layout.capacity_per_unit();
    let fills: Vec<String> = (0..k)
        .map(|m| {
            let n: u64 = counts.range((m, 0)..(m + 1, 0)).map(|(_, n)| n).sum();
            format!("{:.1}", 100.0 * n as f64 / (per_unit * units) as f64)
        })
        .collect();
    println!(
        "vesta {:<15} k={k:<2} {threads} thread{} {:<14} {:>12.0} IDs/s  {:>6.2}% of k x cap {:>10}  fill per machine ID % [{}]",
        id_type.name(),
        if threads == 1 { " " } else { "s" },
        if batch == 1 {
            "next_id".to_owned()
        } else {
            format!("next_ids({batch})")
        },
        ids as f64 / seconds,
        100.0 * ids as f64 / seconds / cap as f64,
        cap,
        fills.join(" "),
    );
    issuer.shutdown().expect("shutdown");
}

/// A peer generator saturated by `threads` threads for 2 s of whole milliseconds (their
/// layout's unit), counting IDs whose timestamp (bits 22 and up) falls inside.
fn peer<G: Send + Sync + 'static>(
    name: &str,
    threads: usize,
    g: G,
    call: impl Fn(&G) -> u64 + Send + Sync + Copy + 'static,
) {
    let g = Arc::new(g);
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (g, barrier) = (g.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                // Each peer's timestamp is ms since its own epoch: read the first, count 2,000 ms.
                let t0 = (call(&g) >> 22) + 2;
                let end = t0 + 2_000;
                let mut n = 0u64;
                loop {
                    let t = call(&g) >> 22;
                    if t >= end {
                        return n;
                    }
                    n += u64::from(t >= t0);
                }
            })
        })
        .collect();
    let ids: u64 = handles.into_iter().map(|h| h.join().expect("thread")).sum();
    println!(
        "peer  {name:<40} {threads} thread{} {:>12.0} IDs/s  (cap 4,096,000/s)",
        if threads == 1 { " " } else { "s" },
        ids as f64 / 2.0,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; anything else is ignored.
    println!("machine_ids: embedded issuer of k machine IDs saturated, system clock, whole units");
    println!(
        "load average: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    for (id_type, k) in [
        (IdType::MaxPeak, 1),
        (IdType::MaxPeak, 8),
        (IdType::MinGranularity, 1),
        (IdType::MinGranularity, 8),
    ] {
        for threads in [1, 2] {
            vesta(id_type, k, threads, 1);
        }
    }
    vesta(IdType::MaxPeak, 8, 2, 1000);
    vesta(IdType::MinGranularity, 8, 2, 256);
    for threads in [1, 2] {
        peer(
            "snowflaked sync::Generator",
            threads,
            snowflaked::sync::Generator::new(1),
            |g| g.generate::<u64>(),
        );
        peer(
            "rs-snowflake real_time_generate (Mutex)",
            threads,
            Mutex::new(snowflake::SnowflakeIdGenerator::new(1, 1)),
            |g| g.lock().expect("lock").real_time_generate() as u64,
        );
    }
}
