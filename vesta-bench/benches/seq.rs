//! Per-key sequences in process: the cost of one `try_next_n` from `vesta-seq`'s
//! [`Sequences`] on one thread, next to the same run's peers. Run:
//! `cargo bench -p vesta-bench --bench seq`.
//!
//! Two loads. **Dense keys**: a key drawn at random (xorshift) from the 100,000 keys of one
//! numeric section, every one called before (so the section is its flat array), against the
//! peers holding the same 100,000 keys. **One warm key** of each shape: a numeric key alone in
//! its section (the section a table of one key), a snowflake-sized key (a spread bucket's
//! table), a string key (a string bucket's table).
//!
//! The sequences sit on a real SQLite file with the default options: the key's section is
//! raised every step (10,000 at first, doubling while raises come more than once a second, up
//! to 1,000,000), ahead of need by the prefetch on the runtime's own thread; a call that finds
//! the raise not yet done waits for it, and that wait is in the figure. Peers:
//!
//! - a bare `AtomicU64::fetch_add`: the floor of any shared counter;
//! - a `Mutex<HashMap<u64, u64>>` increment: the per-key counter an application writes first
//!   (std's SipHash, as a `HashMap` has by default);
//! - the same behind FNV (the hasher vesta's section map uses).
//!
//! And the dense load on sequences that joined a cluster (alone, so every set is its own): the
//! cost of the gate every clustered call passes (one atomic load and a coarse clock read).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::hint::black_box;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vesta_seq::cluster::{Cluster, ClusterOptions};
use vesta_seq::{DbUrl, Owner, SeqKey, SeqNext, SeqOptions, Sequences};

/// The sequences on a fresh SQLite file and their runtime (kept alive for the prefetch).
struct Warm {
    seqs: Sequences,
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

fn warm(keys: &[&SeqKey]) -> Warm {
    warm_as(keys, false)
}

/// [`warm`], the sequences a member of a cluster of one when `clustered` (its lease kept by
/// the runtime's beat).
fn warm_as(keys: &[&SeqKey], clustered: bool) -> Warm {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let url = DbUrl::parse(&format!("sqlite://{}/bench.db", dir.path().display())).expect("url");
    let seqs = runtime.block_on(async {
        let owner = if clustered {
            Owner::member()
        } else {
            Owner::standalone()
        };
        let seqs = Sequences::open_as(&url, SeqOptions::default(), owner.floors_in(dir.path()))
            .await
            .expect("sequences");
        if clustered {
            let options = ClusterOptions {
                member: 930,
                tcp: "127.0.0.1:1".into(),
                rest: String::new(),
                ttl: std::time::Duration::from_secs(6),
            };
            // Leaked: the membership lives as long as the bench.
            std::mem::forget(Cluster::join(&seqs, options).await.expect("join"));
        }
        for k in keys {
            seqs.next(k).await.expect("first number");
        }
        seqs
    });
    Warm {
        seqs,
        runtime,
        _dir: dir,
    }
}

impl Warm {
    /// One call: from memory, or (rarely) waiting for the raise.
    fn next(&self, key: &SeqKey) -> u64 {
        match self.seqs.try_next_n(key, 1).expect("a number") {
            SeqNext::Ready(n) => n,
            SeqNext::Pending(p) => self.runtime.block_on(p.wait()).expect("a raise"),
        }
    }
}

/// Keys of the dense load: one numeric section's 100,000 (section 1: keys 100,000..200,000).
const DENSE_FROM: u64 = 100_000;
const DENSE_KEYS: u64 = 100_000;

/// A random key of the dense load: xorshift64, then Lemire's multiply-shift onto the section.
#[inline]
fn next_dense(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    DENSE_FROM + ((u128::from(*state) * u128::from(DENSE_KEYS)) >> 64) as u64
}

fn dense(c: &mut Criterion) {
    let keys: Vec<SeqKey> = (DENSE_FROM..DENSE_FROM + DENSE_KEYS)
        .map(SeqKey::Num)
        .collect();
    let refs: Vec<&SeqKey> = keys.iter().collect();
    let w = warm(&refs);
    assert_eq!(
        w.seqs.status().dense_sections,
        1,
        "the section is its array"
    );
    let _entered = w.runtime.enter();
    let mut g = c.benchmark_group("seq/dense keys (one section of 100,000, random key), 1 thread");
    g.throughput(Throughput::Elements(1));
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    g.bench_function("vesta Sequences", |b| {
        b.iter(|| black_box(w.next(&SeqKey::Num(next_dense(&mut state)))));
    });
    let fnv_map: Mutex<HashMap<u64, u64, BuildHasherDefault<fnv::FnvHasher>>> = Mutex::new(
        (DENSE_FROM..DENSE_FROM + DENSE_KEYS)
            .map(|k| (k, 0))
            .collect(),
    );
    g.bench_function("peer: Mutex<HashMap<u64, u64>> (FNV)", |b| {
        b.iter(|| {
            let mut m = fnv_map.lock().expect("lock");
            let v = m.entry(next_dense(&mut state)).or_insert(0);
            *v += 1;
            black_box(*v)
        });
    });
    let std_map: Mutex<HashMap<u64, u64>> = Mutex::new(
        (DENSE_FROM..DENSE_FROM + DENSE_KEYS)
            .map(|k| (k, 0))
            .collect(),
    );
    g.bench_function("peer: Mutex<HashMap<u64, u64>> (SipHash)", |b| {
        b.iter(|| {
            let mut m = std_map.lock().expect("lock");
            let v = m.entry(next_dense(&mut state)).or_insert(0);
            *v += 1;
            black_box(*v)
        });
    });
    let member = warm_as(&refs, true);
    g.bench_function("vesta Sequences in a cluster (alone)", |b| {
        let _entered = member.runtime.enter();
        b.iter(|| black_box(member.next(&SeqKey::Num(next_dense(&mut state)))));
    });
    g.finish();
}

fn seq(c: &mut Criterion) {
    let num = SeqKey::Num(123_456);
    let snow = SeqKey::Num(412_345_678_901_234_567);
    let text = SeqKey::parse("chat:4711:inbox".as_bytes()).expect("key");
    let w = warm(&[&num, &snow, &text]);
    // The prefetch is spawned on the runtime from the calling thread.
    let _entered = w.runtime.enter();
    let mut g = c.benchmark_group("seq/warm key, 1 thread");
    g.throughput(Throughput::Elements(1));
    g.bench_function("vesta Sequences, numeric key alone in its section", |b| {
        b.iter(|| black_box(w.next(black_box(&num))));
    });
    g.bench_function(
        "vesta Sequences, snowflake-sized key (spread bucket)",
        |b| {
            b.iter(|| black_box(w.next(black_box(&snow))));
        },
    );
    g.bench_function("vesta Sequences, string key (15 bytes)", |b| {
        b.iter(|| black_box(w.next(black_box(&text))));
    });
    let counter = AtomicU64::new(0);
    g.bench_function("peer: AtomicU64::fetch_add", |b| {
        b.iter(|| black_box(counter.fetch_add(1, Ordering::Relaxed)));
    });
    let std_map: Mutex<HashMap<u64, u64>> = Mutex::new(HashMap::new());
    g.bench_function("peer: Mutex<HashMap<u64, u64>> (SipHash)", |b| {
        b.iter(|| {
            let mut m = std_map.lock().expect("lock");
            let v = m.entry(black_box(123_456)).or_insert(0);
            *v += 1;
            black_box(*v)
        });
    });
    let fnv_map: Mutex<HashMap<u64, u64, BuildHasherDefault<fnv::FnvHasher>>> =
        Mutex::new(HashMap::default());
    g.bench_function("peer: Mutex<HashMap<u64, u64>> (FNV)", |b| {
        b.iter(|| {
            let mut m = fnv_map.lock().expect("lock");
            let v = m.entry(black_box(123_456)).or_insert(0);
            *v += 1;
            black_box(*v)
        });
    });
    g.finish();
    let status = w.seqs.status();
    eprintln!(
        "table writes: {} raises, {} loads (sections), for every call above",
        status.raises, status.loads
    );
}

criterion_group!(benches, dense, seq);
criterion_main!(benches);
