//! Every key shape at scale, and the memory bound: random `u64` keys of snowflake size and
//! string keys of 16-24 bytes served per key (rows per bucket, not per key; memory within the
//! documented formula), a numeric section turning into a flat array, least-recently-used
//! eviction at the bound with every number above the key's last across reloads, the refusal
//! when every section is in use (naming the setting and a `Retry-After` the test then sees
//! come true), an old table's numeric sections from 5,000,000,000 on carried over into their
//! spread buckets, and property tests of calls, restarts and outages under a tight bound.

use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use vesta_seq::{Owner, SeqError, SeqKey, SeqNext, SeqOptions, Sequences};

use super::{Checker, key, locker, open_as, options, rows};

/// Keys of snowflake size (about 4e17), drawn by splitmix64: distinct, spread over every range.
fn snowflakes(n: u64) -> Vec<SeqKey> {
    (0..n)
        .map(|i| {
            let mut z = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            SeqKey::Num(400_000_000_000_000_000 + (z ^ (z >> 31)) % 100_000_000_000_000_000)
        })
        .collect()
}

/// String keys of 16 to 24 bytes.
fn strings(n: u64) -> Vec<SeqKey> {
    (0..n)
        .map(|i| {
            key(&format!(
                "user:{:0w$}",
                i * 7_919,
                w = 11 + (i % 9) as usize
            ))
        })
        .collect()
}

/// What the docs promise a section and a key cost at most (docs/seq.md, "Memory"): a section
/// 400 bytes with its first table, a numeric key in a table 39 bytes, a string key 57 and its
/// text's chunk (32 bytes up to 24 bytes of text).
fn promised(sections: usize, numeric_keys: usize, string_keys: usize) -> usize {
    sections * 400 + numeric_keys * 39 + string_keys * (57 + 32)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparse_and_string_keys_are_served_per_key_in_few_rows() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = open_patiently(dir.path(), patient(1000)).await.unwrap();
    let keys: Vec<SeqKey> = snowflakes(4_000)
        .into_iter()
        .chain(strings(4_000))
        .collect();
    let mut check = Checker::default();
    for round in 0..2 {
        for k in &keys {
            let n = seqs.next(k).await.unwrap();
            check.saw(k, n, n);
        }
        let s = seqs.status();
        assert_eq!(
            (s.numeric_keys, s.string_keys),
            (4_000, 4_000),
            "round {round}"
        );
        assert!(
            s.memory_bytes <= promised(s.sections, s.numeric_keys, s.string_keys),
            "{s:?}"
        );
        assert_eq!(s.evictions, 0, "{s:?}");
    }
    // A row per bucket: 4,096 spread and 4,096 string buckets at most, and the meta rows.
    let pool = locker(dir.path()).await;
    let table = rows(&pool).await;
    assert!(table.len() <= 4096 + 4096 + 4, "{} rows", table.len());
    assert!(
        table.iter().all(|r| r.0 != 0),
        "no numeric section: every key is spread"
    );
    // Across a restart: every key above its last.
    seqs.close().await;
    drop(seqs);
    let seqs = open_patiently(dir.path(), patient(1000)).await.unwrap();
    for k in keys.iter().step_by(97) {
        let n = seqs.next(k).await.unwrap();
        check.saw(k, n, n);
    }
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_numeric_section_turns_into_an_array_and_keeps_every_number() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = open_patiently(dir.path(), patient(100_000)).await.unwrap();
    let mut check = Checker::default();
    // 28,672 keys fit the table; the next turns section 0 into its array.
    for k in (0..28_673u64).map(|k| SeqKey::Num(k * 3 % 100_000)) {
        let n = seqs.next(&k).await.unwrap();
        check.saw(&k, n, n);
    }
    let s = seqs.status();
    assert_eq!(
        (s.dense_sections, s.sections, s.numeric_keys),
        (1, 1, 0),
        "{s:?}"
    );
    assert!(
        s.memory_bytes >= 800_000 && s.memory_bytes < 801_000,
        "{s:?}"
    );
    for k in (0..100_000u64).step_by(7).map(SeqKey::Num) {
        let n = seqs.next(&k).await.unwrap();
        check.saw(&k, n, n);
    }
    seqs.close().await;
    drop(seqs);
    let seqs = open_patiently(dir.path(), patient(100_000)).await.unwrap();
    for k in (0..100_000u64).step_by(3).map(SeqKey::Num) {
        let n = seqs.next(&k).await.unwrap();
        check.saw(&k, n, n);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_bound_the_least_recently_used_sections_make_room() {
    let dir = tempfile::tempdir().unwrap();
    let bound = 64 << 10;
    let opts = SeqOptions {
        max_memory: bound,
        ..patient(100)
    };
    let seqs = open_patiently(dir.path(), opts).await.unwrap();
    let keys: Vec<SeqKey> = strings(400)
        .into_iter()
        .chain(snowflakes(400))
        .chain((0..400).map(|i| SeqKey::Num(i * 100_003)))
        .collect();
    let mut check = Checker::default();
    for round in 0..2 {
        for k in &keys {
            let n = seqs
                .next(k)
                .await
                .unwrap_or_else(|e| panic!("round {round}, {k}: {e}"));
            check.saw(k, n, n);
            assert!(seqs.status().memory_bytes <= bound);
        }
    }
    let s = seqs.status();
    assert!(s.evictions > 0 && s.loads > s.sections as u64, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_caller_at_the_bound_waits_for_a_raise_ahead_rather_than_be_refused() {
    // The scene needs the raise ahead of need to wait on the locked table.
    in_a_few_tries(
        waited_for_the_raise_ahead,
        "the raise ahead never waited on the locked table",
    )
    .await;
}

/// One try of the scene above; false when the raise ahead ended before the call at the bound.
async fn waited_for_the_raise_ahead() -> bool {
    let (dir, seqs) = one_section_in_memory(patient(5)).await;
    let (a, b) = (SeqKey::Num(0), SeqKey::Num(vesta_seq::SECTION_KEYS));
    let mut last = seqs.next(&a).await.unwrap();
    // Hold the table, and call `a` from memory until a call starts its section's raise ahead
    // of need (half a step before the end): that raise waits on the table, holding the
    // section, the only one in memory.
    let lock_pool = locker(dir.path()).await;
    let lock = lock_pool.begin_with("BEGIN EXCLUSIVE").await.unwrap();
    let before = seqs.status();
    while seqs.status().raising_ahead == 0 {
        match seqs.try_next_n(&a, 1).unwrap() {
            SeqNext::Ready(n) => {
                assert!(n > last, "{n} after {last}");
                last = n;
            }
            // The raise ahead ended at once and the step ran out: not this scene.
            SeqNext::Pending(_) => {
                lock.rollback().await.unwrap();
                lock_pool.close().await;
                return false;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let s = seqs.status();
    if s.raise_failures > before.raise_failures || s.raising_ahead == 0 {
        lock.rollback().await.unwrap();
        lock_pool.close().await;
        return false;
    }
    // The table comes back in 300 ms: the raise ahead then ends, and frees its section.
    let asked = Instant::now();
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        lock.rollback().await.unwrap();
    });
    // A new section at the bound: it waits for the raise ahead, evicts `a`'s section, loads.
    let n = seqs
        .next(&b)
        .await
        .unwrap_or_else(|e| panic!("refused for a raise ahead of need: {e}"));
    let waited = asked.elapsed();
    release.await.unwrap();
    assert!(n >= 1);
    // Nothing could end the raise ahead before the table came back.
    assert!(
        waited >= Duration::from_millis(300),
        "answered after {waited:?}, before the raise ahead could end"
    );
    let s = seqs.status();
    assert_eq!(
        (s.raising_ahead, s.raises, s.sections),
        (0, before.raises + 1, 1),
        "the raise ahead went through, then made room: {s:?}"
    );
    assert!(s.evictions > before.evictions, "{s:?}");
    // `a` loads again above everything it handed out.
    let n = seqs.next(&a).await.unwrap();
    assert!(n > last, "{n} after {last}");
    lock_pool.close().await;
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_at_the_bound_names_the_setting_and_room_frees_in_its_retry_after() {
    // The scene needs `a`'s call to hold its bucket (its raise waiting on the locked table)
    // while `b` is called.
    in_a_few_tries(
        refusal_at_the_bound,
        "the raise never waited on the locked table",
    )
    .await;
}

/// One try of the scene above; false when `a`'s call ended before `b` was called.
async fn refusal_at_the_bound() -> bool {
    let (dir, seqs) = one_section_in_memory(options(5)).await;
    let (a, b) = (key("inbox:a"), key("inbox:b-other-bucket"));
    let mut last = seqs.next_n(&a, 5).await.unwrap();
    // That call's raise ahead of need ends first (else it could cover the pending call below
    // as soon as it is made).
    raises_ahead_ended(&seqs).await;
    // Hold the table, and use up what it allows `a`: the next call waits on a raise, holding
    // its bucket in memory.
    let lock_pool = locker(dir.path()).await;
    let lock = lock_pool.begin_with("BEGIN EXCLUSIVE").await.unwrap();
    let pending = loop {
        match seqs.try_next_n(&a, 1).unwrap() {
            SeqNext::Ready(n) => last = n,
            SeqNext::Pending(p) => break p,
        }
    };
    // The calls also started a raise ahead of need, waiting on the table too; a call at the
    // bound waits for such a raise (the sequences' own work) rather than be refused. Let it
    // run out (its store_timeout): then only `a`'s call holds the bucket.
    raises_ahead_ended(&seqs).await;
    let waiting = tokio::spawn(async move {
        let r = pending.wait().await;
        (r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    let e = seqs.next(&b).await.unwrap_err();
    let refused = Instant::now();
    let (r, ended) = waiting.await.unwrap();
    if ended < asked {
        lock.rollback().await.unwrap();
        lock_pool.close().await;
        return false;
    }
    let SeqError::Full {
        retry_after_s,
        setting,
        ..
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(
        (*retry_after_s, *setting),
        (1, "seq.max_memory_mb"),
        "800 ms, rounded up"
    );
    assert!(e.to_string().contains("room frees within 1 s"), "{e}");
    // The call holding the bucket ends within its store_timeout, and room with it.
    assert!(matches!(r, Err(SeqError::Unavailable { .. })), "{r:?}");
    assert!(ended.saturating_duration_since(refused) <= Duration::from_secs(*retry_after_s));
    lock.rollback().await.unwrap();
    let n = seqs.next(&b).await.unwrap();
    assert!(n >= 1);
    let n = seqs.next(&a).await.unwrap();
    assert!(n > last, "{n} after {last}");
    lock_pool.close().await;
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_tables_wide_sections_are_carried_into_their_buckets() {
    let dir = tempfile::tempdir().unwrap();
    drop(open_patiently(dir.path(), patient(10)).await.unwrap());
    // As a build before spread buckets left it: a section per snowflake key, no rows 2 and 3.
    let pool = locker(dir.path()).await;
    let snow: u64 = 412_345_678_901_234_567;
    for (q, section, max) in [
        (
            "DELETE FROM vesta_seq WHERE kind = 2 AND section >= 2",
            0,
            0,
        ),
        (
            "INSERT INTO vesta_seq (kind, section, max_seq) VALUES (0, ?, ?)",
            snow / 100_000,
            90_000,
        ),
        (
            "INSERT INTO vesta_seq (kind, section, max_seq) VALUES (0, ?, ?)",
            49_999,
            7,
        ),
    ] {
        sqlx::query(q)
            .bind(section as i64)
            .bind(max)
            .execute(&pool)
            .await
            .unwrap();
    }
    let seqs = open_patiently(dir.path(), patient(10)).await.unwrap();
    let n = seqs.next(&SeqKey::Num(snow)).await.unwrap();
    assert!(n > 90_000, "{n}: the old section's numbers are below it");
    assert!(seqs.next(&SeqKey::Num(snow + 1)).await.unwrap() > 90_000);
    assert!(
        seqs.next(&SeqKey::Num(4_999_999_999)).await.unwrap() > 7,
        "kept its section"
    );
    let meta: Vec<_> = rows(&pool)
        .await
        .into_iter()
        .filter(|r| r.0 == 2)
        .map(|r| (r.1, r.2))
        .collect();
    assert_eq!(
        meta,
        [(0, 100_000), (1, 4096), (2, 5_000_000_000), (3, 4096)]
    );
    pool.close().await;
}

/// One step of the property test under a tight bound.
#[derive(Clone, Debug)]
enum Op {
    Next(u8),
    Batch(u8, u64),
    Restart,
    Outage,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => any::<u8>().prop_map(Op::Next),
        2 => (any::<u8>(), 1..=5u64).prop_map(|(k, n)| Op::Batch(k, n)),
        1 => Just(Op::Restart),
        1 => Just(Op::Outage),
    ]
}

/// The key an op's byte names: numeric keys in and across sections, snowflake keys sharing a
/// range (one bucket) or not, string keys.
fn key_of(b: u8) -> SeqKey {
    let snow = 412_345_678_901_234_567;
    match b % 10 {
        0 => SeqKey::Num(u64::from(b)),
        1 => SeqKey::Num(4_999_999_999),
        2 => SeqKey::Num(5_000_000_000),
        3 => SeqKey::Num(snow + u64::from(b % 3)),
        4 => SeqKey::Num(snow.wrapping_mul(u64::from(b)) | 1 << 63),
        5 => SeqKey::Num(u64::MAX),
        6 => key(&format!("user:{:016}", b % 5)),
        7 => key(&format!("chat:{b}")),
        8 => SeqKey::Num(100_000 * u64::from(b)),
        _ => key("ключ-Zürich-会话"),
    }
}

/// [`super::open`] with a 20 s lease on the table instead of 6 s: these scenes are about shapes
/// and memory, not the lease, and a loaded host's SQLite once kept the renewals of a 6 s lease
/// out of its term (a call refused as `TableLapsed`) while several suites ran at once.
async fn open_patiently(dir: &Path, options: SeqOptions) -> Result<Sequences, SeqError> {
    open_as(
        dir,
        options,
        Owner::standalone().lease(Duration::from_secs(20)),
    )
    .await
}

/// Sequences on a new table whose memory bound holds one section (a bucket with a key), not
/// two.
async fn one_section_in_memory(options: SeqOptions) -> (tempfile::TempDir, Sequences) {
    let dir = tempfile::tempdir().unwrap();
    let opts = SeqOptions {
        max_memory: 1100,
        ..options
    };
    let seqs = open_patiently(dir.path(), opts).await.unwrap();
    (dir, seqs)
}

/// Sets `scene` up until it was as it needs (it says true), five tries at most: SQLite
/// sometimes answers a statement under another connection's lock at once ("database is
/// locked") instead of waiting, which ends the call the scene needed waiting.
async fn in_a_few_tries<F: std::future::Future<Output = bool>>(scene: fn() -> F, never: &str) {
    for _ in 0..5 {
        if scene().await {
            return;
        }
    }
    panic!("{never} in 5 tries");
}

/// Waits for the raises ahead of need under way to end (within their store_timeout).
async fn raises_ahead_ended(seqs: &Sequences) {
    let gave_up = Instant::now() + Duration::from_secs(15);
    while seqs.status().raising_ahead > 0 {
        assert!(
            Instant::now() < gave_up,
            "a raise ahead outlived its store_timeout"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`options`] with a store timeout that a loaded host's SQLite cannot reach, for the scenes
/// that are about shapes and memory, not about a slow table (CI once took over 800 ms to load
/// a section there).
fn patient(step: u64) -> SeqOptions {
    SeqOptions {
        store_timeout: Duration::from_secs(10),
        ..options(step)
    }
}

fn tight() -> SeqOptions {
    SeqOptions {
        // A few sections: most calls evict one.
        max_memory: 2048,
        ..options(5)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any order of calls on every shape, batches, restarts and outages under a bound that
    /// evicts on most calls: every number handed out for a key is above every earlier one.
    #[test]
    fn every_shape_goes_up_through_evictions(ops in proptest::collection::vec(op(), 1..80)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut seqs = open_patiently(dir.path(), tight()).await.unwrap();
            let mut check = Checker::default();
            for op in ops {
                match op {
                    Op::Next(b) => {
                        let k = key_of(b);
                        let n = seqs.next(&k).await.unwrap();
                        check.saw(&k, n, n);
                    }
                    Op::Batch(b, n) => {
                        let k = key_of(b);
                        let last = seqs.next_n(&k, n).await.unwrap();
                        check.saw(&k, last + 1 - n, last);
                    }
                    Op::Restart => {
                        seqs.close().await;
                        drop(seqs);
                        seqs = open_patiently(dir.path(), tight()).await.unwrap();
                    }
                    Op::Outage => {
                        seqs.close().await;
                        for b in 0..10 {
                            let k = key_of(b);
                            match seqs.next(&k).await {
                                Ok(n) => check.saw(&k, n, n),
                                // Closed: the table's lease ended with the pool.
                                Err(e) => assert!(
                                    matches!(
                                        e,
                                        SeqError::Unavailable { .. }
                                            | SeqError::Full { .. }
                                            | SeqError::TableLapsed { .. }
                                    ),
                                    "{e:?}"
                                ),
                            }
                        }
                        seqs = open_patiently(dir.path(), tight()).await.unwrap();
                    }
                }
            }
        });
    }
}
