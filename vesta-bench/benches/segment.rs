//! Segment numbers in process, warm buffer: the cost of one number from `vesta-segment`'s store,
//! 1 thread and 2 threads on one tag, next to the same run's peers. Run:
//! `cargo bench -p vesta-bench --bench segment`.
//!
//! The store sits on a real SQLite file whose tag has a step of 2^31 - 1 (the table's largest),
//! so the measured takes come from memory; the prefetch that fires every ~200M numbers runs on
//! the runtime's own thread. Peers, measured here because the published figures (CosId's JMH
//! run: 127M ops/s for its segment chain, 25.8M ops/s for Leaf's segment) are Java on other
//! hardware:
//!
//! - Leaf's hot path written in Rust (`SegmentIDGenImpl.getIdFromSegmentBuffer`): the buffer's
//!   read lock, then `getAndIncrement` on the segment's counter;
//! - a bare `AtomicU64::fetch_add`: the floor any shared counter pays.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, RwLock};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use vesta_segment::{Database, SegmentSection, Store, Tag};

/// The tag's step: the largest `leaf_alloc.step` (an `int`).
const STEP: i64 = i32::MAX as i64;

/// The store on a fresh SQLite file, its runtime (kept alive for the fetcher) and a handle on
/// the warm tag.
struct Warm {
    store: Store,
    tag: Tag,
    _runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

fn warm() -> Warm {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let section = SegmentSection {
        db: Some(format!("sqlite://{}/bench.db", dir.path().display())),
        adaptive_step: false,
        ..SegmentSection::default()
    };
    let (store, tag) = runtime.block_on(async {
        let url = section.db_url().expect("url");
        let db = Database::connect_or_create(&url, section.fetch_timeout())
            .await
            .expect("database");
        db.init().await.expect("init");
        db.create_tag("bench", STEP, 1, None).await.expect("tag");
        db.close().await;
        let store = Store::open(&section).await.expect("store");
        let tag = store.tag("bench").await.expect("tag handle");
        // The first segment is fetched on first use: wait for it, then the buffer is warm.
        tag.next().await.expect("first number");
        (store, tag)
    });
    Warm {
        store,
        tag,
        _runtime: runtime,
        _dir: dir,
    }
}

/// Leaf's `SegmentBuffer` hot path: a read lock around the current segment's counter.
struct LeafSegment {
    buffer: RwLock<AtomicU64>,
}

impl LeafSegment {
    fn next(&self) -> u64 {
        let segment = self.buffer.read().expect("lock");
        segment.fetch_add(1, Ordering::Relaxed)
    }
}

/// Polls a future once: the warm `Store::next` is ready at its first poll.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the warm path waited"),
    }
}

/// Wall time of `n` calls of `call`, split over `threads` threads started together.
fn timed(n: u64, threads: usize, call: impl Fn() + Sync) -> Duration {
    if threads == 1 {
        let start = Instant::now();
        for _ in 0..n {
            call();
        }
        return start.elapsed();
    }
    let barrier = Barrier::new(threads);
    let per = n / threads as u64;
    thread::scope(|s| {
        let run = || {
            barrier.wait();
            let start = Instant::now();
            for _ in 0..per {
                call();
            }
            start.elapsed()
        };
        let others: Vec<_> = (1..threads).map(|_| s.spawn(run)).collect();
        let mine = run();
        others
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .fold(mine, Duration::max)
    })
}

fn contenders(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize, w: &Warm) {
    group.bench_function("vesta Tag::try_next (handle)", |b| {
        b.iter_custom(|n| {
            timed(n, threads, || {
                black_box(w.tag.try_next().ok());
            })
        })
    });
    group.bench_function("vesta Store::next_buffered (tag by name)", |b| {
        b.iter_custom(|n| {
            timed(n, threads, || {
                black_box(w.store.next_buffered(black_box("bench")));
            })
        })
    });
    group.bench_function("vesta Store::next (async, ready at first poll)", |b| {
        b.iter_custom(|n| {
            timed(n, threads, || {
                black_box(ready(w.store.next(black_box("bench"))).ok());
            })
        })
    });
    let leaf = LeafSegment {
        buffer: RwLock::new(AtomicU64::new(0)),
    };
    group.bench_function(
        "peer: Leaf's hot path in Rust (RwLock read + fetch_add)",
        |b| {
            b.iter_custom(|n| {
                timed(n, threads, || {
                    black_box(leaf.next());
                })
            })
        },
    );
    let floor = AtomicU64::new(0);
    group.bench_function("floor: AtomicU64::fetch_add", |b| {
        b.iter_custom(|n| {
            timed(n, threads, || {
                black_box(floor.fetch_add(1, Ordering::Relaxed));
            })
        })
    });
}

fn segment(c: &mut Criterion) {
    let w = warm();
    for threads in [1, 2] {
        let mut group = c.benchmark_group(format!("segment next/{threads}-thread"));
        group.throughput(Throughput::Elements(1));
        contenders(&mut group, threads, &w);
        group.finish();
    }
    let s = w.tag.status();
    assert_eq!(s.fetch_errors, 0, "the store failed a fetch: {s:?}");
}

criterion_group!(benches, segment);
criterion_main!(benches);
