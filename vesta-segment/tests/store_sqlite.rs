//! The store against a real SQLite file: opening and admin errors, prefetch timing and step
//! adaptation with a manual clock, give-back (contiguous, not contiguous, moved by another
//! allocator), an outage simulated by another connection holding the write lock, and many
//! callers on two stores sharing the file.
//!
//! This file has the helpers, opening, the admin commands and the numbers' pace;
//! `store_sqlite/stops.rs` the give-back and a database locked, stopped or restored;
//! `store_sqlite/callers.rs` batches and many callers, bad URLs and an application's own pool.

#[path = "store_sqlite/callers.rs"]
mod callers;
#[path = "store_sqlite/stops.rs"]
mod stops;

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
