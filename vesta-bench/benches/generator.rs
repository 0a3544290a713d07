//! CPU cost per ID below saturation, against the Rust snowflake peers, and the cost of a batch
//! of one unit's full capacity. Run: `cargo bench -p vesta-bench --bench generator`.
//!
//! Every contender issues bursts of `BURST` IDs from a fresh generator, so no one's per-unit cap
//! (ours 2^20/s or 1024/ms, the peers' 4096/ms) is reached and only the cost per call is timed;
//! building the generator between bursts is not timed.

use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use vesta_core::{Clock, Generator, GeneratorConfig, IdType};
use vesta_embed::SystemClock;

/// IDs per burst: below every contender's per-unit capacity (1024/ms is the smallest).
const BURST: u64 = 1000;

fn ours(id_type: IdType, clock: SystemClock) -> Generator<SystemClock> {
    let cfg = GeneratorConfig {
        id_type,
        machine: 1,
        ..GeneratorConfig::default()
    };
    Generator::new(cfg, clock).expect("valid config")
}

/// Times `iters` calls of `call` in bursts, each on a fresh generator made by `fresh`.
fn bursts<G>(iters: u64, fresh: impl Fn() -> G, call: impl Fn(&G)) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BURST);
        let g = fresh();
        let start = Instant::now();
        for _ in 0..n {
            call(&g);
        }
        total += start.elapsed();
        left -= n;
    }
    total
}

/// Like [`bursts`] with two threads sharing each fresh generator; returns the wall time for
/// `iters` IDs in all (each thread issues half of every burst).
fn bursts_2t<G: Sync>(iters: u64, fresh: impl Fn() -> G, call: impl Fn(&G) + Sync) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BURST);
        let g = fresh();
        let barrier = Barrier::new(2);
        let elapsed = thread::scope(|s| {
            let run = || {
                barrier.wait();
                let start = Instant::now();
                for _ in 0..n / 2 {
                    call(&g);
                }
                start.elapsed()
            };
            let a = s.spawn(run);
            let b = run();
            a.join().expect("bench thread").max(b)
        });
        total += elapsed;
        left -= n;
    }
    total
}

/// Registers one contender, timed with one thread or two sharing each fresh generator.
fn contender<G: Sync>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    threads: usize,
    name: &str,
    fresh: impl Fn() -> G + Copy,
    call: impl Fn(&G) + Sync + Copy,
) {
    group.bench_function(name, |b| {
        b.iter_custom(|n| {
            if threads == 1 {
                bursts(n, fresh, call)
            } else {
                bursts_2t(n, fresh, call)
            }
        })
    });
}

/// The contenders that are `Sync` (or wrapped in a lock), for 1 and 2 threads.
fn shared_contenders(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize) {
    let coarse = SystemClock::for_layout(IdType::MaxPeak.layout());
    let precise = SystemClock::precise();
    contender(
        group,
        threads,
        "vesta max-peak (coarse clock, default)",
        move || ours(IdType::MaxPeak, coarse),
        |g| {
            black_box(g.next_id().ok());
        },
    );
    contender(
        group,
        threads,
        "vesta max-peak (precise clock)",
        move || ours(IdType::MaxPeak, precise),
        |g| {
            black_box(g.next_id().ok());
        },
    );
    contender(
        group,
        threads,
        "vesta min-granularity (precise clock, default)",
        move || ours(IdType::MinGranularity, precise),
        |g| {
            black_box(g.next_id().ok());
        },
    );
    contender(
        group,
        threads,
        "snowflaked sync::Generator",
        || snowflaked::sync::Generator::new(1),
        |g| {
            black_box(g.generate::<u64>());
        },
    );
    contender(
        group,
        threads,
        "rs-snowflake real_time_generate (Mutex)",
        || Mutex::new(snowflake::SnowflakeIdGenerator::new(1, 1)),
        |g| {
            black_box(g.lock().expect("lock").real_time_generate());
        },
    );
}

/// Times `n` calls of an `&mut self` generator in fresh bursts (single thread only).
fn bursts_mut<G>(n: u64, fresh: impl Fn() -> G, call: impl Fn(&mut G)) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = n;
    while left > 0 {
        let k = left.min(BURST);
        let mut g = fresh();
        let start = Instant::now();
        for _ in 0..k {
            call(&mut g);
        }
        total += start.elapsed();
        left -= k;
    }
    total
}

fn single_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("next_id/1-thread");
    group.throughput(Throughput::Elements(1));
    shared_contenders(&mut group, 1);
    let fresh = || snowflake::SnowflakeIdGenerator::new(1, 1);
    group.bench_function("rs-snowflake real_time_generate (no lock, &mut)", |b| {
        b.iter_custom(|n| {
            bursts_mut(n, fresh, |g| {
                black_box(g.real_time_generate());
            })
        })
    });
    group.bench_function(
        "rs-snowflake generate (clock every 4096 IDs: not equal conditions)",
        |b| {
            b.iter_custom(|n| {
                bursts_mut(n, fresh, |g| {
                    black_box(g.generate());
                })
            })
        },
    );
    group.finish();
}

fn two_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("next_id/2-threads");
    group.throughput(Throughput::Elements(1));
    shared_contenders(&mut group, 2);
    group.finish();
}

fn clocks(c: &mut Criterion) {
    let mut group = c.benchmark_group("clock read");
    let coarse = SystemClock::for_layout(IdType::MaxPeak.layout());
    group.bench_function("SystemClock coarse", |b| {
        b.iter(|| black_box(coarse.now_ms()))
    });
    let precise = SystemClock::precise();
    group.bench_function("SystemClock precise", |b| {
        b.iter(|| black_box(precise.now_ms()))
    });
    group.bench_function("std SystemTime::now (the peers' clock)", |b| {
        b.iter(|| black_box(std::time::SystemTime::now()))
    });
    group.finish();
}

fn batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("next_ids/one unit's capacity");
    for id_type in IdType::ALL {
        let cap = id_type.layout().capacity_per_unit();
        group.throughput(Throughput::Elements(cap));
        let clock = SystemClock::for_layout(id_type.layout());
        group.bench_with_input(BenchmarkId::new("reserve", id_type), &cap, |b, &cap| {
            b.iter_batched(
                || ours(id_type, clock),
                |g| black_box(g.next_ids(cap)),
                criterion::BatchSize::SmallInput,
            )
        });
        group.bench_with_input(
            BenchmarkId::new("reserve+to_vec", id_type),
            &cap,
            |b, &cap| {
                b.iter_batched(
                    || ours(id_type, clock),
                    |g| black_box(g.next_ids(cap).map(|batch| batch.to_vec())),
                    criterion::BatchSize::SmallInput,
                )
            },
        );
    }
    group.finish();
}

criterion_group!(benches, single_thread, two_threads, clocks, batch);
criterion_main!(benches);
