//! The store against a real SQLite file: opening and admin errors, prefetch timing and step
//! adaptation with a manual clock, give-back (contiguous, not contiguous, moved by another
//! allocator), an outage simulated by another connection holding the write lock, and many
//! callers on two stores sharing the file.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use vesta_segment::clock::ManualClock;
use vesta_segment::{
    Database, DbUrl, GiveBackOutcome, Health, SegmentError, SegmentSection, Store, TagState,
};

fn section(path: &Path) -> SegmentSection {
    SegmentSection {
        db: Some(format!("sqlite://{}", path.display())),
        wait_ms: 5_000,
        fetch_timeout_ms: 5_000,
        ..SegmentSection::default()
    }
}

/// A fresh file with `leaf_alloc` and one tag.
async fn setup(dir: &Path, tag: &str, step: i64, start: i64) -> SegmentSection {
    let s = section(&dir.join("seg.db"));
    let db = Database::connect_or_create(&s.db_url().unwrap(), s.fetch_timeout())
        .await
        .unwrap();
    assert!(db.init().await.unwrap(), "table created");
    db.create_tag(tag, step, start, Some("test")).await.unwrap();
    db.close().await;
    s
}

async fn max_id(s: &SegmentSection, tag: &str) -> i64 {
    let db = Database::connect(&s.db_url().unwrap(), s.fetch_timeout())
        .await
        .unwrap();
    let rows = db.list().await.unwrap();
    db.close().await;
    rows.into_iter().find(|r| r.tag == tag).unwrap().max_id
}

/// A pool of the test's own on the section's SQLite file, as an application or a second
/// allocator opens one.
async fn own_pool(s: &SegmentSection) -> SqlitePool {
    let path = s.db_url().unwrap().sqlite_path().unwrap().to_owned();
    SqlitePool::connect_with(
        SqliteConnectOptions::new()
            .filename(path)
            .busy_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap()
}

/// Leaf's `updateMaxId` + `getLeafAlloc` in one transaction, as a second allocator would.
async fn raw_leaf_fetch(s: &SegmentSection, tag: &str) -> std::ops::Range<i64> {
    let pool = own_pool(s).await;
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = ?")
        .bind(tag)
        .execute(&mut *tx)
        .await
        .unwrap();
    let (max_id, step): (i64, i32) =
        sqlx::query_as("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?")
            .bind(tag)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    pool.close().await;
    max_id - i64::from(step)..max_id
}

/// Polls `cond` on the tag's status for up to 5 s.
async fn until(
    store: &Store,
    tag: &str,
    what: &str,
    cond: impl Fn(&vesta_segment::TagStatus) -> bool,
) {
    for _ in 0..1000 {
        let status = store.status();
        if status.tags.iter().any(|t| t.tag == tag && cond(t)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}: {:?}", store.status());
}

#[tokio::test]
async fn a_missing_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let s = section(&missing.join("segments.db"));
    let err = Store::open(&s).await.unwrap_err();
    assert!(
        matches!(&err, SegmentError::NoDatabaseDirectory { dir, .. } if *dir == missing),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "the directory {} does not exist",
            missing.display()
        )),
        "{text}"
    );
    // Creating the file does not create the directory either.
    let url = s.db_url().unwrap();
    let err = Database::connect_or_create(&url, s.fetch_timeout())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(!missing.exists());
}

#[tokio::test]
async fn nothing_is_created_implicitly() {
    let dir = tempfile::tempdir().unwrap();
    let s = section(&dir.path().join("missing.db"));
    let err = Store::open(&s).await.unwrap_err();
    assert!(matches!(err, SegmentError::NoDatabaseFile { .. }), "{err}");
    assert!(!dir.path().join("missing.db").exists(), "no file created");

    let url = s.db_url().unwrap();
    assert_eq!(
        err.remedy(),
        Some(&vesta_core::Remedy::CreateSegmentTable {
            db: url.to_string()
        })
    );
    assert!(
        err.to_string()
            .ends_with(&format!("(to create it: create table leaf_alloc at {url})")),
        "{err}"
    );
    let db = Database::connect_or_create(&url, s.fetch_timeout())
        .await
        .unwrap();
    let err = Store::open(&s).await.unwrap_err();
    assert!(
        err.to_string().contains("table leaf_alloc does not exist"),
        "{err}"
    );
    assert!(db.init().await.unwrap());
    assert!(!db.init().await.unwrap(), "second init finds the table");
    let store = Store::open(&s).await.unwrap();
    let err = store.next("nope").await.unwrap_err();
    assert!(matches!(err, SegmentError::UnknownTag { .. }), "{err}");
    assert!(err.to_string().contains("\"nope\""), "{err}");
    let err = store.next("bad tag").await.unwrap_err();
    assert!(matches!(err, SegmentError::InvalidTag { .. }), "{err}");
    assert!(db.list().await.unwrap().is_empty(), "no tag created");
    store.shutdown().await;
}

#[tokio::test]
async fn create_checks_its_input_and_writes_nothing_on_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "orders", 10, 1).await;
    let db = Database::connect(&s.db_url().unwrap(), s.fetch_timeout())
        .await
        .unwrap();
    let before = db.list().await.unwrap();
    for (tag, step, start, needle) in [
        ("orders", 10, 1, "already exists"),
        (
            "fresh",
            0,
            1,
            "step 0 is out of range for tag \"fresh\": allowed 1..=2147483647",
        ),
        ("fresh", 1 << 31, 1, "step 2147483648"),
        ("fresh", 10, -1, "start -1 is out of range"),
        ("fresh", 10, i64::MAX - 5, "start"),
        ("", 10, 1, "cannot be empty"),
        (&"x".repeat(129), 10, 1, "too long"),
    ] {
        let err = db.create_tag(tag, step, start, None).await.unwrap_err();
        assert!(err.to_string().contains(needle), "{tag}: {err}");
    }
    let long = "d".repeat(257);
    let err = db
        .create_tag("fresh", 10, 1, Some(&long))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("description length 257"), "{err}");
    assert_eq!(db.list().await.unwrap(), before, "nothing written");
    db.close().await;
}

#[tokio::test]
async fn the_first_number_is_start_and_numbers_increase() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "orders", 7, 1000).await;
    let store = Store::open(&s).await.unwrap();
    let mut last = None;
    for i in 0..100u64 {
        let n = store.next("orders").await.unwrap();
        if i == 0 {
            assert_eq!(n, 1000, "first number is the start");
        }
        assert!(last.is_none_or(|l| n > l), "{n} after {last:?}");
        last = Some(n);
    }
    let ranges = store.next_n("orders", 50).await.unwrap();
    assert_eq!(ranges.iter().map(|r| r.end - r.start).sum::<u64>(), 50);
    assert!(ranges.windows(2).all(|w| w[0].end <= w[1].start));
    assert!(ranges[0].start > last.unwrap());
    for n in [0, vesta_segment::MAX_BATCH + 1] {
        let err = store.next_n("orders", n).await.unwrap_err().to_string();
        assert!(
            err.contains(&format!("count {n} is out of range for tag \"orders\"")),
            "{err}"
        );
    }
    store.shutdown().await;
    assert!(matches!(
        store.next("orders").await,
        Err(SegmentError::Closed)
    ));
}

#[tokio::test]
async fn prefetch_starts_once_the_percentage_is_issued() {
    let dir = tempfile::tempdir().unwrap();
    let s = SegmentSection {
        prefetch_percent: 50,
        adaptive_step: false,
        ..setup(dir.path(), "t", 100, 1).await
    };
    let store = Store::open(&s).await.unwrap();
    let tag = store.tag("t").await.unwrap();
    assert_eq!(tag.next().await.unwrap(), 1, "first fetch on first use");
    assert_eq!(store.next_n("t", 49).await.unwrap(), vec![2..51]);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let st = tag.status();
    assert_eq!((st.fetches, st.next.is_none()), (1, true), "{st:?}");
    assert_eq!(max_id(&s, "t").await, 101, "no second fetch below 50 %");
    assert_eq!(tag.try_next().unwrap(), 51, "the 51st number crosses 50 %");
    until(&store, "t", "the prefetch", |t| t.fetches == 2).await;
    let st = tag.status();
    assert_eq!(st.next.as_ref().map(|n| (n.start, n.end)), Some((101, 201)));
    assert_eq!(st.buffered, 49 + 100);
    store.shutdown().await;
}

#[tokio::test]
async fn the_step_doubles_when_fast_and_halves_when_slow_on_a_manual_clock() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "t", 100, 1).await;
    let clock = Arc::new(ManualClock::new());
    let store = Store::open_with_clock(
        &SegmentSection {
            prefetch_percent: 0,
            ..s.clone()
        },
        clock.clone(),
    )
    .await
    .unwrap();
    let tag = store.tag("t").await.unwrap();
    // Prefetch at 0 %: each segment's first number asks for the next one. Round i waits for
    // fetch i+1 (the prefetched next), moves the clock, uses up segment i and takes the first
    // number of segment i+1, which asks for fetch i+2: its step follows from the time since
    // fetch i+1, i.e. the minutes of round i.
    assert_eq!(tag.next().await.unwrap(), 1);
    let mut steps = Vec::new();
    let mut expect_start = 1;
    for (round, minutes) in [(1, 0), (2, 1), (3, 14), (4, 16), (5, 31), (6, 45)] {
        until(&store, "t", "the prefetch", |t| t.fetches == round + 1).await;
        let current = tag.status().current.unwrap();
        assert_eq!(current.start, expect_start, "contiguous: one allocator");
        steps.push(current.end - current.start);
        expect_start = current.end;
        clock.advance(Duration::from_secs(minutes * 60));
        tag.next_n(current.remaining).await.unwrap();
        assert_eq!(tag.next().await.unwrap(), expect_start);
    }
    // First fetch: the table's step; then < 15 min doubles, 15-30 min keeps, >= 30 halves.
    assert_eq!(steps, vec![100, 200, 400, 800, 1600, 1600]);
    until(&store, "t", "the last fetch", |t| t.fetches == 8).await;
    let st = tag.status();
    let len = |s: Option<vesta_segment::SegmentStatus>| s.map(|s| s.end - s.start);
    assert_eq!((len(st.current), len(st.next)), (Some(800), Some(400)));
    store.shutdown().await;
}

#[tokio::test]
async fn shutdown_gives_the_unused_tail_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = SegmentSection {
        adaptive_step: false,
        ..setup(dir.path(), "t", 100, 1).await
    };
    let store = Store::open(&s).await.unwrap();
    assert_eq!(store.next_n("t", 5).await.unwrap(), vec![1..6]);
    let gave = store.shutdown().await;
    assert_eq!(
        gave[0].outcome,
        GiveBackOutcome::Returned {
            max_id: 6,
            numbers: 95
        }
    );
    assert_eq!(max_id(&s, "t").await, 6);

    // Restart: continues at 6; current + prefetched next (contiguous) both go back.
    let store = Store::open(&s).await.unwrap();
    assert_eq!(store.next_n("t", 15).await.unwrap(), vec![6..21]);
    until(&store, "t", "the prefetch", |t| t.next.is_some()).await;
    let gave = store.shutdown().await;
    assert_eq!(
        gave[0].outcome,
        GiveBackOutcome::Returned {
            max_id: 21,
            numbers: 185
        }
    );
    assert_eq!(max_id(&s, "t").await, 21);
}

#[tokio::test]
async fn give_back_respects_other_allocators() {
    let dir = tempfile::tempdir().unwrap();
    let s = SegmentSection {
        adaptive_step: false,
        prefetch_percent: 50,
        ..setup(dir.path(), "t", 100, 1).await
    };
    // Another allocator moves max_id after our only segment: nothing goes back.
    let store = Store::open(&s).await.unwrap();
    store.next("t").await.unwrap();
    assert_eq!(raw_leaf_fetch(&s, "t").await, 101..201);
    let gave = store.shutdown().await;
    assert_eq!(gave[0].outcome, GiveBackOutcome::Moved);
    assert_eq!(max_id(&s, "t").await, 201);

    // Another allocator takes a segment between our current and next: only our next goes
    // back; the current's tail stays a gap.
    let store = Store::open(&s).await.unwrap();
    assert_eq!(store.next("t").await.unwrap(), 201);
    assert_eq!(raw_leaf_fetch(&s, "t").await, 301..401);
    store.next_n("t", 50).await.unwrap(); // crosses 50 %: the next segment is 401..501
    until(&store, "t", "the prefetch", |t| t.next.is_some()).await;
    let gave = store.shutdown().await;
    assert_eq!(
        gave[0].outcome,
        GiveBackOutcome::Returned {
            max_id: 401,
            numbers: 100
        }
    );
    assert_eq!(max_id(&s, "t").await, 401);
    let store = Store::open(&s).await.unwrap();
    assert_eq!(
        store.next("t").await.unwrap(),
        401,
        "no overlap with 301..401"
    );
    store.shutdown().await;
}

#[tokio::test]
async fn a_locked_database_degrades_then_fails_fast_then_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let s = SegmentSection {
        adaptive_step: false,
        prefetch_percent: 0,
        fetch_timeout_ms: 200,
        wait_ms: 2_000,
        ..setup(dir.path(), "t", 10, 1).await
    };
    let store = Store::open(&s).await.unwrap();
    assert_eq!(store.next("t").await.unwrap(), 1);
    until(&store, "t", "the prefetch", |t| t.next.is_some()).await;

    // An exclusive lock held by another connection: every fetch now times out.
    let path = s.db_url().unwrap().sqlite_path().unwrap().to_owned();
    let locker = SqlitePool::connect_with(SqliteConnectOptions::new().filename(path))
        .await
        .unwrap();
    let mut lock = locker.begin_with("BEGIN EXCLUSIVE").await.unwrap();
    sqlx::query("UPDATE leaf_alloc SET description = 'locked'")
        .execute(&mut *lock)
        .await
        .unwrap();

    // The buffered 19 numbers still flow, in order.
    let buffered = store.next_n("t", 19).await.unwrap();
    assert_eq!(buffered, vec![2..21]);
    until(&store, "t", "a failed fetch", |t| t.fetch_errors > 0).await;
    assert_eq!(store.status().health, Health::Degraded);
    let started = std::time::Instant::now();
    let err = store.next("t").await.unwrap_err();
    assert!(
        matches!(err, SegmentError::Unavailable { .. }),
        "fails fast with the cause: {err}"
    );
    assert!(err.to_string().contains("\"t\""), "{err}");
    assert!(
        // Failed by the fetch (fetch_timeout_ms 200) before wait_ms (2 s) ran out.
        started.elapsed() < Duration::from_millis(2_000),
        "did not wait out wait_ms"
    );
    assert_eq!(store.status().tags[0].state, TagState::Down);

    lock.rollback().await.unwrap();
    locker.close().await;
    until(&store, "t", "recovery", |t| t.state == TagState::Ok).await;
    let n = store.next("t").await.unwrap();
    assert!(n >= 21, "no number twice: {n}");
    store.shutdown().await;
}

/// A failover to a replica that lagged, while the store runs: `max_id` goes back below the
/// segments this store already took. The fetch is refused (rolled back, counted, named), the
/// buffered numbers still flow, and once the tag is raised the store recovers by itself.
#[tokio::test]
async fn a_table_that_goes_back_is_refused_until_raised() {
    let dir = tempfile::tempdir().unwrap();
    let state_file = dir.path().join("segments.state");
    let s = SegmentSection {
        adaptive_step: false,
        prefetch_percent: 0,
        state_file: Some(state_file.clone()),
        ..setup(dir.path(), "t", 10, 1).await
    };
    let store = Store::open(&s).await.unwrap();
    assert_eq!(store.next("t").await.unwrap(), 1);
    until(&store, "t", "the prefetch", |t| t.next.is_some()).await;
    assert_eq!(store.status().tags[0].floor, 21);
    let on_file = std::fs::read_to_string(&state_file).unwrap();
    assert!(on_file.contains("t = 21"), "{on_file}");

    // The replica's leaf_alloc is from before both segments.
    let db = Database::connect(&s.db_url().unwrap(), s.fetch_timeout())
        .await
        .unwrap();
    let path = s.db_url().unwrap().sqlite_path().unwrap().to_owned();
    let raw = SqlitePool::connect_with(SqliteConnectOptions::new().filename(path))
        .await
        .unwrap();
    sqlx::query("UPDATE leaf_alloc SET max_id = 1")
        .execute(&raw)
        .await
        .unwrap();
    raw.close().await;

    assert_eq!(store.next_n("t", 19).await.unwrap(), vec![2..21]);
    until(&store, "t", "a refused fetch", |t| t.moved_back > 0).await;
    let err = store.next("t").await.unwrap_err();
    assert!(
        matches!(
            err,
            SegmentError::MovedBack {
                start: 1,
                floor: 21,
                ..
            }
        ),
        "{err}"
    );
    // What lets it issue again, as data (the `vesta` binary spells it as its command).
    assert_eq!(
        err.remedy(),
        Some(&vesta_core::Remedy::RaiseTag {
            tag: "t".into(),
            at_least: 21,
            db: s.db_url().unwrap().to_string(),
        })
    );
    let t = &store.status().tags[0];
    assert_eq!((t.state, t.floor), (TagState::Down, 21), "{t:?}");
    assert_eq!(store.status().health, Health::Degraded);
    assert_eq!(
        max_id(&s, "t").await,
        1,
        "every refused fetch was rolled back"
    );

    let raised = db.raise("t", vesta_segment::Raise::To(21)).await.unwrap();
    assert_eq!((raised.from, raised.to), (1, 21));
    db.close().await;
    until(&store, "t", "recovery", |t| t.state == TagState::Ok).await;
    assert_eq!(store.next("t").await.unwrap(), 21, "no number twice");
    store.shutdown().await;
    let on_file = std::fs::read_to_string(&state_file).unwrap();
    assert!(
        on_file.contains("t = 22"),
        "the give-back lowers the floor: {on_file}"
    );
}

/// A stop with the database down and many tags in use: the give-backs of all tags together
/// take at most `fetch_timeout_ms` (one per tag, in turn, would take 50 × it and outlast a
/// unit's TimeoutStopSec); what was not given back is a gap, named as such.
#[tokio::test]
async fn a_stop_with_the_database_down_is_bounded_for_all_tags_together() {
    const TAGS: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let base = setup(dir.path(), "t0", 10, 1).await;
    let db = Database::connect(&base.db_url().unwrap(), base.fetch_timeout())
        .await
        .unwrap();
    for i in 1..TAGS {
        db.create_tag(&format!("t{i}"), 10, 1, None).await.unwrap();
    }
    db.close().await;
    let s = SegmentSection {
        fetch_timeout_ms: 300,
        prefetch_percent: 0,
        adaptive_step: false,
        ..base
    };
    let store = Store::open(&s).await.unwrap();
    for i in 0..TAGS {
        let tag = format!("t{i}");
        assert_eq!(store.next(&tag).await.unwrap(), 1);
        until(&store, &tag, "the prefetch", |t| t.next.is_some()).await;
    }
    let path = s.db_url().unwrap().sqlite_path().unwrap().to_owned();
    let locker = SqlitePool::connect_with(SqliteConnectOptions::new().filename(path))
        .await
        .unwrap();
    let mut lock = locker.begin_with("BEGIN EXCLUSIVE").await.unwrap();
    sqlx::query("UPDATE leaf_alloc SET description = 'locked'")
        .execute(&mut *lock)
        .await
        .unwrap();

    let started = std::time::Instant::now();
    let gave = store.shutdown().await;
    let took = started.elapsed();
    // The fetches under way finish within one fetch_timeout_ms, the give-backs within another;
    // the margin tells "bounded" from "one timeout per tag" (15 s here).
    assert!(
        took < Duration::from_millis(2 * 300) + Duration::from_secs(5),
        "the stop took {took:?}"
    );
    assert_eq!(gave.len(), TAGS);
    assert!(
        gave.iter()
            .all(|g| matches!(g.outcome, GiveBackOutcome::Failed { .. })),
        "{gave:?}"
    );
    assert!(
        gave.iter()
            .any(|g| matches!(&g.outcome, GiveBackOutcome::Failed { error }
            if error.contains("segment.fetch_timeout_ms (300 ms)"))),
        "{gave:?}"
    );
    lock.rollback().await.unwrap();
    locker.close().await;
    assert_eq!(
        max_id(&s, "t7").await,
        21,
        "not given back: a gap, never a repeat"
    );
}

#[tokio::test]
async fn next_buffered_answers_from_the_right_store_and_sees_new_tags() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "a", 100, 1).await;
    let db = Database::connect(&s.db_url().unwrap(), s.fetch_timeout())
        .await
        .unwrap();
    db.create_tag("b", 100, 1000, None).await.unwrap();
    db.close().await;
    let (one, two) = (
        Store::open(&s).await.unwrap(),
        Store::open(&s).await.unwrap(),
    );
    assert_eq!(
        one.next_buffered("a"),
        None,
        "not in use yet: nothing buffered"
    );
    assert_eq!(one.next("a").await.unwrap(), 1);
    assert_eq!(two.next("a").await.unwrap(), 101, "its own segment");
    for k in 0..3 {
        // The thread's cached map alternates between the stores: each answers its own.
        assert_eq!(one.next_buffered("a"), Some(2 + k));
        assert_eq!(two.next_buffered("a"), Some(102 + k));
    }
    // A tag put in use after the map was cached is found.
    assert_eq!(one.next_buffered("b"), None);
    assert_eq!(one.next("b").await.unwrap(), 1000);
    assert_eq!(one.next_buffered("b"), Some(1001));
    assert_eq!(one.next_buffered("a"), Some(5));
    one.shutdown().await;
    assert_eq!(one.next_buffered("a"), None, "shut down");
    two.shutdown().await;
}

#[tokio::test]
async fn a_bounded_batch_stops_at_its_ranges_and_takes_nothing_beyond() {
    let dir = tempfile::tempdir().unwrap();
    let s = SegmentSection {
        adaptive_step: false,
        prefetch_percent: 0,
        fetch_timeout_ms: 200,
        ..setup(dir.path(), "t", 3, 1).await
    };
    let store = Store::open(&s).await.unwrap();
    assert_eq!(store.next("t").await.unwrap(), 1);
    until(&store, "t", "the prefetch of 4..7", |t| t.next.is_some()).await;
    // Another allocator takes 7..10: our next segment after 4..7 is 10..13.
    assert_eq!(raw_leaf_fetch(&s, "t").await, 7..10);
    assert_eq!(store.next_n_within("t", 8, 1).await.unwrap(), vec![2..4]);
    assert_eq!(
        store.next_n_within("t", 8, 2).await.unwrap(),
        vec![4..7, 10..13],
        "two ranges, 6 of the 8 numbers"
    );
    assert_eq!(
        store.next("t").await.unwrap(),
        13,
        "nothing beyond was taken"
    );
    until(&store, "t", "the prefetch of 16..19", |t| t.next.is_some()).await;

    // The database locked: what is buffered comes back instead of an error.
    let path = s.db_url().unwrap().sqlite_path().unwrap().to_owned();
    let locker = SqlitePool::connect_with(SqliteConnectOptions::new().filename(path))
        .await
        .unwrap();
    let mut lock = locker.begin_with("BEGIN EXCLUSIVE").await.unwrap();
    sqlx::query("UPDATE leaf_alloc SET description = 'locked'")
        .execute(&mut *lock)
        .await
        .unwrap();
    assert_eq!(
        store.next_n_within("t", 100, 10).await.unwrap(),
        vec![14..19]
    );
    assert!(
        store.next_n("t", 1).await.is_err(),
        "nothing left, database locked"
    );
    lock.rollback().await.unwrap();
    locker.close().await;
    store.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_callers_on_two_stores_never_share_a_number() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "t", 50, 1).await;
    let s = SegmentSection { max_step: 800, ..s };
    let stores = [
        Arc::new(Store::open(&s).await.unwrap()),
        Arc::new(Store::open(&s).await.unwrap()),
    ];
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = Arc::clone(&stores[i % 2]);
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::with_capacity(20_000);
            for j in 0..20_000u64 {
                if j % 100 == 0 {
                    for r in store.next_n("t", 7).await.unwrap() {
                        mine.extend(r);
                    }
                } else {
                    mine.push(store.next("t").await.unwrap());
                }
            }
            mine
        }));
    }
    let mut all = HashSet::new();
    for t in tasks {
        let mine = t.await.unwrap();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "increasing per caller"
        );
        for n in mine {
            assert!(all.insert(n), "{n} issued twice");
        }
    }
    assert!(all.len() > 160_000);
    for store in &stores {
        store.shutdown().await;
    }
}

#[tokio::test]
async fn bad_urls_and_unreachable_servers_are_named() {
    let err = DbUrl::parse("postgres://u:secret@127.0.0.1/db").unwrap_err();
    assert!(err.to_string().contains("port is missing"), "{err}");
    let s = SegmentSection {
        db: Some("postgres://u:secret@127.0.0.1:1/db".into()),
        fetch_timeout_ms: 1_000,
        ..SegmentSection::default()
    };
    let err = Store::open(&s).await.unwrap_err().to_string();
    assert!(
        err.contains("postgres://u:***@127.0.0.1:1/db") && err.contains("connecting"),
        "{err}"
    );
    assert!(!err.contains("secret"), "{err}");
}

/// `Store::from_pool`: the application's own `SqlitePool` (its settings kept), numbers from it,
/// errors naming it, the unused tail given back through it, and the pool still the
/// application's after the store's shutdown.
#[tokio::test]
async fn a_store_on_the_applications_own_pool() {
    let dir = tempfile::tempdir().unwrap();
    let s = setup(dir.path(), "orders", 100, 1).await;
    let pool = own_pool(&s).await;
    let section = SegmentSection {
        db: None,
        ..s.clone()
    };
    let store = Store::from_pool(pool.clone(), &section).await.unwrap();
    let first = store.next("orders").await.unwrap();
    let second = store.next("orders").await.unwrap();
    assert_eq!((first, second), (1, 2));
    let err = store.next("missing").await.unwrap_err().to_string();
    assert!(err.contains("sqlite pool of the application"), "{err}");
    assert_eq!(store.status().db, "sqlite pool of the application");
    let gave = store.shutdown().await;
    assert_eq!(
        gave[0].outcome,
        GiveBackOutcome::Returned {
            max_id: 3,
            numbers: 98
        }
    );
    let (max_id,): (i64,) =
        sqlx::query_as("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'orders'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(max_id, 3, "the pool is still the application's");
    pool.close().await;
}
