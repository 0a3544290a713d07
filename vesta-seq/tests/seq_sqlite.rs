//! Per-key sequences against a real SQLite file: every answer checked (strictly increasing per
//! key, across restarts, interleaved keys, edge keys and non-ASCII string keys); table writes
//! counted against calls / step + sections; an outage (another connection holding the write
//! lock) failing only the keys that need a raise, within the bound; two processes on one table
//! fenced, not followed; the key layout pinned; a peek that reads without writing or loading;
//! property tests of any order of calls, batches, restarts and outages; every key shape at
//! scale and the memory bound (`shapes`); and members of a cluster on one file (`cluster`).

#[path = "seq_sqlite/cluster.rs"]
mod cluster;
#[path = "seq_sqlite/owner.rs"]
mod owner;
#[path = "seq_sqlite/shapes.rs"]
mod shapes;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use vesta_seq::{DbUrl, Owner, SeqError, SeqKey, SeqOptions, SeqPeek, Sequences};

fn url(dir: &Path) -> DbUrl {
    DbUrl::parse(&format!("sqlite://{}/seq.db", dir.display())).unwrap()
}

/// The sequences on `dir`'s table as its standalone owner, the restore guard's floors kept in
/// `dir` too (a host of the test's own).
async fn open(dir: &Path, options: SeqOptions) -> Result<Sequences, SeqError> {
    open_as(dir, options, Owner::standalone()).await
}

/// [`open`] as `owner` says (the floors in `dir`).
async fn open_as(dir: &Path, options: SeqOptions, owner: Owner) -> Result<Sequences, SeqError> {
    Sequences::open_as(&url(dir), options, owner.floors_in(dir.join("floors"))).await
}

fn options(step: u64) -> SeqOptions {
    SeqOptions {
        step,
        store_timeout: Duration::from_millis(800),
        ..SeqOptions::default()
    }
}

/// Every answer, per key: each must be above the key's last.
#[derive(Default)]
struct Checker {
    last: HashMap<SeqKey, u64>,
    answers: u64,
}

impl Checker {
    fn saw(&mut self, key: &SeqKey, first: u64, last: u64) {
        if let Some(before) = self.last.get(key) {
            assert!(
                first > *before,
                "key {key}: {first} after {before}: not strictly increasing"
            );
        }
        assert!(first <= last);
        self.last.insert(key.clone(), last);
        self.answers += 1;
    }
}

fn key(text: &str) -> SeqKey {
    SeqKey::parse(text.as_bytes()).unwrap()
}

fn edge_keys() -> Vec<SeqKey> {
    let mut keys: Vec<SeqKey> = [0, 1, 99_999, 100_000, 100_001, u64::MAX - 1, u64::MAX]
        .into_iter()
        .map(SeqKey::Num)
        .collect();
    keys.extend(["chat:42", "Zürich", "会话-7", "042", "user/éa"].map(key));
    keys
}

/// `sqlite:///var/lib/vesta/seq.db` on a host without /var/lib/vesta: the error names the
/// directory (SQLite's own says only "unable to open database file").
#[tokio::test]
async fn a_missing_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("var/lib/vesta");
    let Err(err) = Sequences::open(&url(&missing), options(10)).await else {
        panic!("no directory, no sequences");
    };
    let err = err.to_string();
    assert!(
        err.contains(&format!(
            "the directory {} does not exist",
            missing.display()
        )),
        "{err}"
    );
    assert!(!missing.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_increase_across_restarts_and_writes_follow_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let keys = edge_keys();
    let mut check = Checker::default();
    let mut calls = 0;
    for run in 0..3 {
        let seqs = open(dir.path(), options(100)).await.unwrap();
        for round in 0..250 {
            for k in &keys {
                let n = seqs.next(k).await.unwrap();
                check.saw(k, n, n);
                calls += 1;
            }
            let k = &keys[round % keys.len()];
            let last = seqs.next_n(k, 7).await.unwrap();
            check.saw(k, last - 6, last);
            calls += 7;
        }
        for k in &keys {
            assert_eq!(
                seqs.current(k).await.unwrap(),
                check.last[k],
                "run {run}: {k}"
            );
        }
        let status = seqs.status();
        // Sections: the numeric ones touched, and buckets of the two kinds touched (a bucket's
        // load loads up to 1,023 others of its kind).
        assert!(status.sections <= keys.len() + 2 * 4096, "{status:?}");
        // Each raise is one step of 100 for the hottest key of a section, plus the raise
        // each section needs after its load (and the prefetch that may run past the end).
        assert!(
            status.raises <= 250 * 8 / 100 * status.sections as u64 + 2 * status.loads,
            "{status:?}"
        );
        seqs.close().await;
        drop(seqs);
    }
    assert_eq!(check.answers, 3 * 250 * (keys.len() as u64 + 1));
    assert!(calls > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_number_after_a_restart_is_above_the_stored_max() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = open(dir.path(), options(1000)).await.unwrap();
    let k = SeqKey::Num(7);
    assert_eq!(seqs.next(&k).await.unwrap(), 1);
    assert_eq!(seqs.next(&k).await.unwrap(), 2);
    // Another key of the same section starts where the section stood at its load.
    assert_eq!(seqs.next(&SeqKey::Num(8)).await.unwrap(), 1);
    // A restart within this process: closed first, so no raise of the old handle's writes
    // after the new one loaded (`Sequences::close`).
    seqs.close().await;
    drop(seqs);
    let seqs = open(dir.path(), options(1000)).await.unwrap();
    // Nothing above the stored max (1000, or 2000 if the prefetch ran) was handed out.
    let n = seqs.next(&k).await.unwrap();
    assert!(n == 1001 || n == 2001, "{n}");
    assert_eq!(seqs.current(&SeqKey::Num(9)).await.unwrap(), n - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_get_distinct_increasing_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = open(dir.path(), options(50)).await.unwrap();
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let seqs = seqs.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for i in 0..500u64 {
                let k = SeqKey::Num((t + i) % 3);
                got.push((k.clone(), seqs.next(&k).await.unwrap()));
            }
            got
        }));
    }
    let mut per_key: HashMap<SeqKey, Vec<u64>> = HashMap::new();
    for t in tasks {
        for (k, n) in t.await.unwrap() {
            per_key.entry(k).or_default().push(n);
        }
    }
    for (k, mut ns) in per_key {
        let len = ns.len();
        ns.sort_unstable();
        ns.dedup();
        assert_eq!(ns.len(), len, "key {k}: a number handed out twice");
    }
}

/// A pool of the test's own on the file, to lock it as an outage.
async fn locker(dir: &Path) -> SqlitePool {
    SqlitePool::connect_with(
        SqliteConnectOptions::new()
            .filename(dir.join("seq.db"))
            .busy_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_only_the_keys_that_need_a_raise_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = open(dir.path(), options(1000)).await.unwrap();
    let (cold, hot) = (SeqKey::Num(1), SeqKey::Num(2));
    let first = seqs.next(&cold).await.unwrap();
    let mut check = Checker::default();
    check.saw(&cold, first, first);
    let before = seqs.next_n(&hot, 1000).await.unwrap();
    check.saw(&hot, before - 999, before);
    let lock_pool = locker(dir.path()).await;
    let lock = lock_pool.begin_with("BEGIN EXCLUSIVE").await.unwrap();
    let started = Instant::now();
    let mut failed = None;
    for _ in 0..3000 {
        match seqs.next(&hot).await {
            Ok(n) => check.saw(&hot, n, n),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let err = failed.expect("the table is locked: a raise must fail");
    assert!(matches!(err, SeqError::Unavailable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("key 2: its section could not be raised:"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    // `cold` has room under the section's max: still served during the outage.
    let n = seqs.next(&cold).await.unwrap();
    check.saw(&cold, n, n);
    assert!(seqs.status().raise_failures >= 1);
    lock.rollback().await.unwrap();
    // Back: the numbers go on above everything handed out, the failed one lost, not reused.
    let n = seqs.next(&hot).await.unwrap();
    check.saw(&hot, n, n);
    lock_pool.close().await;
}

/// A row moved by a writer that holds no lease (an operator's `UPDATE`, a process of an older
/// build): the holder's next raise of that section finds it and is fenced, never follows it;
/// a row moved *down* is named as the table going back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_moved_under_the_holder_is_fenced_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), options(10)).await.unwrap();
    let (k, other) = (SeqKey::Num(5), SeqKey::Num(100_005));
    let mut check = Checker::default();
    for k in [&k, &other] {
        let n = a.next(k).await.unwrap();
        check.saw(k, n, n);
    }
    let pool = locker(dir.path()).await;
    sqlx::query("UPDATE vesta_seq SET max_seq = max_seq + 1000, owner = 12345 WHERE kind = 0 AND section = 0")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE vesta_seq SET max_seq = 3 WHERE kind = 0 AND section = 1")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let err = loop {
        match a.next(&k).await {
            Ok(n) => check.saw(&k, n, n),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SeqError::Fenced { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("another process raised it") && text.contains("section 0 (kind 0)"),
        "{text}"
    );
    assert!(
        a.next(&SeqKey::Num(6)).await.is_err(),
        "fenced: its keys stay refused"
    );
    let err = loop {
        match a.next(&other).await {
            Ok(n) => check.saw(&other, n, n),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SeqError::WentBack { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("the table went back") && text.contains("max_seq 3"),
        "{text}"
    );
    assert!(!text.contains("another process"), "{text}");
    assert!(a.status().fenced >= 1, "{:?}", a.status());
    assert_eq!(a.guard_status().went_back, 1, "{:?}", a.guard_status());
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_another_key_layout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path(), options(10)).await.unwrap().close().await;
    let pool = locker(dir.path()).await;
    sqlx::query("UPDATE vesta_seq SET max_seq = 1000 WHERE kind = 2 AND section = 0")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let err = open(dir.path(), options(10)).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("groups keys by 1000 keys per numeric section, this build by 100000"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_counts_and_options_name_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = open(dir.path(), options(10)).await.unwrap();
    let e = seqs.next_n(&SeqKey::Num(1), 11).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "count 11 is out of range: allowed 1..=10 (seq.step)"
    );
    let e = open(dir.path(), options(0)).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "seq.step 0 is out of range: allowed 1..=1000000000"
    );
}

/// Every row of `vesta_seq` as the test's own connection reads it.
async fn rows(pool: &SqlitePool) -> Vec<(i64, i64, i64, i64, String)> {
    sqlx::query_as(
        "SELECT kind, section, max_seq, owner, CAST(update_time AS TEXT) FROM vesta_seq \
         ORDER BY kind, section",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peek_reads_without_writing_or_loading() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = open(dir.path(), options(10)).await.unwrap();
    let (k, chat) = (SeqKey::Num(7), key("chat:1"));
    for want in 1..=3 {
        assert_eq!(seqs.next(&k).await.unwrap(), want);
    }
    assert_eq!(seqs.next(&chat).await.unwrap(), 1);
    let reader = locker(dir.path()).await;
    let (table, status) = (rows(&reader).await, seqs.status());

    // In memory: the current number, as `current` has it; a key of the section never called
    // stands at the section's maximum at its load (0).
    let SeqPeek::InMemory {
        current,
        max,
        fenced,
    } = seqs.peek(&k).await.unwrap()
    else {
        panic!("section 0 is in memory");
    };
    assert_eq!((current, fenced), (3, None));
    assert!(max >= 3, "{max}");
    assert!(matches!(
        seqs.peek(&SeqKey::Num(8)).await.unwrap(),
        SeqPeek::InMemory { current: 0, .. }
    ));
    assert!(matches!(
        seqs.peek(&chat).await.unwrap(),
        SeqPeek::InMemory { current: 1, .. }
    ));
    // Not in memory and never used: no row, and the peek creates none (a second one still
    // finds none).
    for _ in 0..2 {
        for never in [SeqKey::Num(500_000), key("inbox:2")] {
            assert_eq!(
                seqs.peek(&never).await.unwrap(),
                SeqPeek::Stored { max: None },
                "{never}"
            );
        }
    }
    assert_eq!(rows(&reader).await, table, "a peek wrote the table");
    assert_eq!(seqs.status(), status, "a peek loaded or raised");
    seqs.close().await;
    drop(seqs);

    // After a restart: section 0 is read, not loaded; its stored maximum is what a load then
    // starts the key at.
    let seqs = open(dir.path(), options(10)).await.unwrap();
    let stored = match seqs.peek(&k).await.unwrap() {
        SeqPeek::Stored { max: Some(m) } => m,
        other => panic!("{other:?}"),
    };
    assert!(stored >= 3, "{stored}");
    assert_eq!(rows(&reader).await, table, "a peek wrote the table");
    assert_eq!(seqs.status().loads, 0);
    assert_eq!(seqs.current(&k).await.unwrap(), stored);
    assert_eq!(seqs.status().loads, 1);
    assert_eq!(
        seqs.peek(&k).await.unwrap(),
        SeqPeek::InMemory {
            current: stored,
            max: stored,
            fenced: None
        }
    );
    reader.close().await;
}

/// One step of a property test.
#[derive(Clone, Debug)]
enum Op {
    Next(u8),
    Batch(u8, u64),
    Restart,
    Outage,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<u8>().prop_map(Op::Next),
        2 => (any::<u8>(), 1..=5u64).prop_map(|(k, n)| Op::Batch(k, n)),
        1 => Just(Op::Restart),
        1 => Just(Op::Outage),
    ]
}

/// The key an op's byte names: a few numeric keys around section edges and a few strings.
fn key_of(b: u8) -> SeqKey {
    match b % 8 {
        0 => SeqKey::Num(0),
        1 => SeqKey::Num(99_999),
        2 => SeqKey::Num(100_000),
        3 => SeqKey::Num(u64::MAX),
        4 => SeqKey::Num(u64::from(b)),
        5 => key("ключ"),
        6 => key(&format!("k{}", b % 3)),
        _ => SeqKey::Num(1),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any order of calls, batches, restarts and outages (the pool closed under the
    /// sequences: a call needing a raise fails, one with room succeeds): every number handed
    /// out for a key is above every earlier one.
    #[test]
    fn every_answer_is_above_the_keys_last(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut seqs = open(dir.path(), options(5)).await.unwrap();
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
                        // Within this process: closed first, or a raise ahead of need the old
                        // handle started could write after the new one loaded, and fence it
                        // (`Sequences::close`).
                        seqs.close().await;
                        drop(seqs);
                        seqs = open(dir.path(), options(5)).await.unwrap();
                    }
                    Op::Outage => {
                        seqs.close().await;
                        for b in 0..8 {
                            let k = key_of(b);
                            match seqs.next(&k).await {
                                Ok(n) => check.saw(&k, n, n),
                                // Closed: the table's lease ended with the pool.
                                Err(e) => assert!(
                                    matches!(
                                        e,
                                        SeqError::Unavailable { .. } | SeqError::TableLapsed { .. }
                                    ),
                                    "{e:?}"
                                ),
                            }
                        }
                        seqs = open(dir.path(), options(5)).await.unwrap();
                    }
                }
            }
        });
    }
}

/// A call's future stays small: the table's waits are boxed inside it. Inline they made it
/// ~10 KB, which a caller blocking on the rare `Pending` beside its fast path reserved and
/// probed on every call (2× the in-process cost), and a server's task held per connection.
#[tokio::test]
async fn a_call_does_not_carry_the_table_wait_in_its_future() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = open(dir.path(), options(10)).await.unwrap();
    let key = SeqKey::Num(5);
    let bound = 1024;
    assert!(std::mem::size_of_val(&seqs.next(&key)) <= bound);
    assert!(std::mem::size_of_val(&seqs.next_n(&key, 1)) <= bound);
    seqs.next(&key).await.unwrap();
    let pending = loop {
        if let vesta_seq::SeqNext::Pending(p) = seqs.try_next_n(&key, 1).unwrap() {
            break p;
        }
    };
    let wait = pending.wait();
    assert!(std::mem::size_of_val(&wait) <= bound);
    assert!(wait.await.unwrap() > 10, "the raise's number");
}
