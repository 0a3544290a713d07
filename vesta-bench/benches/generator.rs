//! CPU cost per ID below saturation, in Vesta's layouts and the peers' (Leaf, Sonyflake,
//! UidGenerator) against the Rust snowflake crates, and the cost of a batch of one unit's full
//! capacity. Run: `cargo bench -p vesta-bench --bench generator`.
//!
//! Every contender issues bursts of IDs from a fresh generator, at most `BURST` and never more
//! than a unit holds (Sonyflake's 10 ms unit: 256), so no one's per-unit cap is reached and only
//! the cost per call is timed; building the generator between bursts is not timed.

use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use vesta_core::{Clock, Generator, GeneratorConfig, IdType, Layout, Preset};
use vesta_embed::SystemClock;

/// IDs per burst: below the per-unit capacity of every contender but Sonyflake's layout.
const BURST: u64 = 1000;

fn ours(id_type: IdType, clock: SystemClock) -> Generator<SystemClock> {
    in_layout(id_type.layout().clone(), clock)
}

fn in_layout(layout: Layout, clock: SystemClock) -> Generator<SystemClock> {
    let cfg = GeneratorConfig {
        machine: 1,
        ..GeneratorConfig::for_layout(layout)
    };
    Generator::new(cfg, clock).expect("valid config")
}

/// The burst for a layout: [`BURST`], or fewer when a unit holds fewer.
fn burst_of(layout: &Layout) -> u64 {
    BURST.min(layout.capacity_per_unit())
}

/// Times `iters` calls of `call` in bursts of `burst`, each on a fresh generator made by
/// `fresh`.
fn bursts<G>(iters: u64, burst: u64, fresh: impl Fn() -> G, call: impl Fn(&G)) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(burst);
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
fn bursts_2t<G: Sync>(
    iters: u64,
    burst: u64,
    fresh: impl Fn() -> G,
    call: impl Fn(&G) + Sync,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(burst);
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
    contender_in_bursts(group, threads, name, BURST, fresh, call);
}

/// [`contender`] with bursts of `burst` IDs.
fn contender_in_bursts<G: Sync>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    threads: usize,
    name: &str,
    burst: u64,
    fresh: impl Fn() -> G,
    call: impl Fn(&G) + Sync + Copy,
) {
    group.bench_function(name, |b| {
        b.iter_custom(|n| {
            if threads == 1 {
                bursts(n, burst, &fresh, call)
            } else {
                bursts_2t(n, burst, &fresh, call)
            }
        })
    });
}

/// The peers' layouts on our generator, each on the clock its unit gets by default.
fn layout_contenders(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize) {
    for preset in [Preset::Leaf, Preset::Sonyflake, Preset::UidGenerator] {
        let mut layout = preset.layout();
        if preset == Preset::UidGenerator {
            // Its own epoch ran out in 2024: a team on it has moved the epoch.
            layout = layout.with_epoch("2024-01-01T00:00:00+08:00".parse().expect("epoch"));
        }
        let clock = SystemClock::for_layout(&layout);
        let name = format!("vesta-rs {preset} layout ({} clock, default)", kind(clock));
        let burst = burst_of(&layout);
        contender_in_bursts(
            group,
            threads,
            &name,
            burst,
            move || in_layout(layout.clone(), clock),
            |g| {
                black_box(g.next_id().ok());
            },
        );
    }
}

/// What a clock reads: the coarse clock, lazy readings (the precise clock only when the coarse
/// one has moved on) or the precise clock on every call.
fn kind(clock: SystemClock) -> &'static str {
    if clock.is_coarse() {
        "coarse"
    } else if clock.is_lazy() {
        "lazy"
    } else {
        "precise"
    }
}

/// The contenders that are `Sync` (or wrapped in a lock), for 1 and 2 threads.
fn shared_contenders(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize) {
    let coarse = SystemClock::for_layout(IdType::MaxPeak.layout());
    let precise = SystemClock::precise();
    let millis = SystemClock::for_layout(IdType::MinGranularity.layout());
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
        &format!("vesta min-granularity ({} clock, default)", kind(millis)),
        move || ours(IdType::MinGranularity, millis),
        |g| {
            black_box(g.next_id().ok());
        },
    );
    contender(
        group,
        threads,
        "vesta min-granularity (precise clock, [clock] read = \"precise\")",
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
    layout_contenders(&mut group, 1);
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
    layout_contenders(&mut group, 2);
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
    let lazy = SystemClock::for_layout(IdType::MinGranularity.layout());
    group.bench_function(format!("SystemClock {} (milliseconds)", kind(lazy)), |b| {
        b.iter(|| black_box(lazy.now_ms()))
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
