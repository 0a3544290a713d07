//! The ways in beyond one `next`: `next_buffered` across stores, bounded batches, many callers
//! on two stores sharing the file, bad URLs and unreachable servers, and a store on the
//! application's own pool.

use super::*;

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
