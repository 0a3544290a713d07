//! Stopping and outages: the unused tail given back at shutdown (and left alone when another
//! allocator moved it), a database locked by another connection, a table restored backwards,
//! and a stop with the database down.

use super::*;

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
/// unit's TimeoutStopSec); what was not given back is a gap, named as such. None is started
/// once the time is up; the one under way then may still land when the lock goes (SQLite's
/// own worker finishes it), and the next start takes either outcome without a refusal.
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
    let state_file = dir.path().join("segments.state");
    let s = SegmentSection {
        fetch_timeout_ms: 300,
        prefetch_percent: 0,
        adaptive_step: false,
        state_file: Some(state_file.clone()),
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
    drop(store);
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
    // Every tag issued 1 and reserved up to 21: a tag's max_id is 21 (a gap) or, for at most
    // the give-back under way when the time ran out, 2 (it landed late).
    let mut landed = 0;
    for i in 0..TAGS {
        match max_id(&s, &format!("t{i}")).await {
            21 => {}
            2 => landed += 1,
            other => panic!("t{i}: max_id {other}, not 21 (a gap) nor 2 (given back)"),
        }
    }
    assert!(landed <= 1, "{landed} give-backs landed after the stop");
    let on_file = std::fs::read_to_string(&state_file).unwrap();
    assert!(
        (0..TAGS).all(|i| on_file.contains(&format!("t{i} = 2\n"))),
        "the stop lowers every floor to the first number not issued: {on_file}"
    );
    // The next start is not refused whichever way each give-back went, and repeats nothing.
    let store = Store::open(&s).await.unwrap();
    for i in 0..TAGS {
        let next = store.next(&format!("t{i}")).await.unwrap();
        assert!(next == 2 || next == 21, "t{i}: {next} after 1");
    }
    store.shutdown().await;
}
