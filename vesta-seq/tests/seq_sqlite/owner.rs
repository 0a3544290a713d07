//! One owner per table and the restore guard, on a real SQLite file in one process (each
//! `Sequences` as a process would have it): a second standalone owner refused naming the
//! holder, twenty simultaneous pairs leaving exactly one, a tool refused beside a server and
//! allowed after it, the recorded mode refusing a member on a standalone table and a
//! standalone owner on a cluster's, a lost lease stopping every call; a copy of the file put
//! back (stopped, and under a running owner, and reloaded after an eviction) refused, never
//! followed, and raised back without lowering anything.

use std::time::{Duration, Instant};

use vesta_seq::cluster::{Cluster, ClusterOptions};
use vesta_seq::{Mode, Owner, RaiseTo, SeqError, SeqKey, SeqOptions};

use super::{Checker, locker, open, open_as, options};

/// A short table lease, so the tests are quick.
const LEASE: Duration = Duration::from_millis(600);

fn standalone() -> Owner {
    Owner::standalone().lease(LEASE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_owner_is_refused_naming_the_holder_and_a_closed_one_frees_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = standalone();
    first.rest = "127.0.0.1:8080".into();
    let a = open_as(dir.path(), options(10), first).await.unwrap();
    assert_eq!(a.next(&SeqKey::Num(1)).await.unwrap(), 1);
    let began = Instant::now();
    for owner in [standalone(), Owner::tool().lease(LEASE)] {
        let err = open_as(dir.path(), options(10), owner).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, SeqError::Held { .. }), "{err:?}");
        assert!(
            text.contains("is served by server ")
                && text.contains("rest 127.0.0.1:8080")
                && text.contains("one owner per table"),
            "{text}"
        );
    }
    // Refused once the holder was seen renewing (a beat, lease / 6), not after a whole lease.
    assert!(began.elapsed() < LEASE * 3, "{:?}", began.elapsed());
    let status = a.owner_status().unwrap();
    assert!(status.holder.starts_with("server "), "{status:?}");
    assert!(a.cluster_status().is_none());
    // A clean close ends the lease: the next owner takes the table at once, above.
    a.close().await;
    let began = Instant::now();
    let b = open_as(dir.path(), options(10), standalone())
        .await
        .unwrap();
    assert!(began.elapsed() < LEASE, "{:?}", began.elapsed());
    assert!(b.next(&SeqKey::Num(1)).await.unwrap() > 1);
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_opened_at_once_leave_exactly_one_twenty_times() {
    for trial in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = tokio::join!(
            open_as(dir.path(), options(10), standalone()),
            open_as(dir.path(), options(10), standalone())
        );
        let (won, lost) = match (x, y) {
            (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
            (Ok(_), Ok(_)) => panic!("trial {trial}: both own the table"),
            (Err(a), Err(b)) => panic!("trial {trial}: neither: {a}; {b}"),
        };
        assert!(matches!(lost, SeqError::Held { .. }), "{lost:?}");
        assert_eq!(won.next(&SeqKey::Num(3)).await.unwrap(), 1);
        won.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorded_mode_refuses_a_server_configured_otherwise_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let a = open_as(dir.path(), options(10), standalone())
        .await
        .unwrap();
    a.close().await;
    // A member on a table served standalone.
    let m = open_as(dir.path(), options(10), Owner::member())
        .await
        .unwrap();
    let join = |member| ClusterOptions {
        member,
        tcp: "127.0.0.1:7001".into(),
        rest: String::new(),
        ttl: LEASE,
    };
    let err = Cluster::join(&m, join(940)).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SeqError::Mode { .. }), "{err:?}");
    assert!(
        text.contains("is served as standalone")
            && text.contains("this server as a cluster coordinated in the database (sql)"),
        "{text}"
    );
    // The mode changed by a tool holding the table (nothing serving it), then the other way.
    let tool = open_as(dir.path(), options(10), Owner::tool().lease(LEASE))
        .await
        .unwrap();
    let before = tool
        .set_mode(Mode::Cluster(vesta_seq::Coordination::Sql))
        .await
        .unwrap();
    assert_eq!(before, Some(Mode::Standalone));
    tool.close().await;
    let m = open_as(dir.path(), options(10), Owner::member())
        .await
        .unwrap();
    let cluster = Cluster::join(&m, join(941)).await.unwrap();
    let err = open_as(dir.path(), options(10), standalone())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("is served as a cluster coordinated in the database (sql)")
            && err.to_string().contains("this server as standalone"),
        "{err}"
    );
    // A tool beside a live member: refused, naming it.
    let err = open_as(dir.path(), options(10), Owner::tool().lease(LEASE))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("live members 941"), "{err}");
    cluster.leave().await.unwrap();
    // No member live: the tool may use the table (it records nothing).
    let tool = open_as(dir.path(), options(10), Owner::tool().lease(LEASE))
        .await
        .unwrap();
    assert!(tool.next(&SeqKey::Num(9)).await.is_ok());
    assert_eq!(
        tool.served().await.unwrap().mode,
        Some(Mode::Cluster(vesta_seq::Coordination::Sql))
    );
    tool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_stops_every_call_until_the_table_is_held_again() {
    let dir = tempfile::tempdir().unwrap();
    let a = open_as(dir.path(), options(10), standalone())
        .await
        .unwrap();
    let k = SeqKey::Num(4);
    let mut check = Checker::default();
    let n = a.next(&k).await.unwrap();
    check.saw(&k, n, n);
    // Another process took the lease (as after an expiry): renewals fail, the term lapses.
    let pool = locker(dir.path()).await;
    sqlx::query(
        "UPDATE vesta_seq_member SET holder = 'server elsewhere:1:1.1', expires_ms = \
         expires_ms + 600000 WHERE member = -1",
    )
    .execute(&pool)
    .await
    .unwrap();
    let deadline = Instant::now() + LEASE * 4;
    let err = loop {
        match a.next(&k).await {
            Ok(n) => check.saw(&k, n, n),
            Err(e) => break e,
        }
        assert!(
            Instant::now() < deadline,
            "still served after its lease was taken"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(matches!(err, SeqError::TableLapsed { .. }), "{err:?}");
    let deadline = Instant::now() + LEASE * 4;
    while a.owner_status().unwrap().taken_by.is_none() {
        assert!(Instant::now() < deadline, "{:?}", a.owner_status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        a.owner_status()
            .unwrap()
            .taken_by
            .unwrap()
            .contains("elsewhere"),
        "{:?}",
        a.owner_status()
    );
    // The other holder goes: the table is taken again, every section reloaded, above.
    sqlx::query("UPDATE vesta_seq_member SET holder = '', expires_ms = 0 WHERE member = -1")
        .execute(&pool)
        .await
        .unwrap();
    let deadline = Instant::now() + LEASE * 4;
    let n = loop {
        if let Ok(n) = a.next(&k).await {
            break n;
        }
        assert!(Instant::now() < deadline, "not served again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    check.saw(&k, n, n);
    assert!(a.owner_status().unwrap().leases_lost >= 1);
    pool.close().await;
    a.close().await;
}

/// Copies the table's file (SQLite's whole database) to `to`, through SQLite so a copy taken
/// under a running owner is consistent.
async fn backup(dir: &std::path::Path, to: &std::path::Path) {
    let pool = locker(dir).await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "VACUUM INTO '{}'",
        to.display()
    )))
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

/// Puts `from` back as the table's file (the file replaced, as `cp backup seq.db` does).
fn restore(dir: &std::path::Path, from: &std::path::Path) {
    for extra in ["seq.db-wal", "seq.db-shm"] {
        let _ = std::fs::remove_file(dir.join(extra));
    }
    std::fs::copy(from, dir.join("seq.db")).unwrap();
}

/// Puts the table `vesta_seq` of `from` back under a running owner, in one transaction (an
/// SQL-level copy of the table, as a restore of one table is done).
async fn restore_table(dir: &std::path::Path, from: &std::path::Path) {
    let pool = locker(dir).await;
    let mut c = pool.acquire().await.unwrap();
    for sql in [
        format!("ATTACH DATABASE '{}' AS b", from.display()),
        "BEGIN IMMEDIATE".into(),
        "DELETE FROM vesta_seq".into(),
        "INSERT INTO vesta_seq SELECT * FROM b.vesta_seq".into(),
        "COMMIT".into(),
        "DETACH DATABASE b".into(),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut *c)
            .await
            .unwrap();
    }
    drop(c);
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_put_back_while_stopped_is_refused_then_raised_back_never_lowered() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("backup.db");
    let (k, s) = (SeqKey::Num(7), SeqKey::parse(b"chat:7").unwrap());
    let mut check = Checker::default();
    let a = open_as(dir.path(), options(10), standalone())
        .await
        .unwrap();
    for key in [&k, &s] {
        let n = a.next(key).await.unwrap();
        check.saw(key, n, n);
    }
    a.close().await;
    backup(dir.path(), &copy).await;
    let a = open_as(dir.path(), options(10), standalone())
        .await
        .unwrap();
    for _ in 0..100 {
        for key in [&k, &s] {
            let n = a.next(key).await.unwrap();
            check.saw(key, n, n);
        }
    }
    a.close().await;
    restore(dir.path(), &copy);
    let a = open_as(dir.path(), options(10), standalone())
        .await
        .unwrap();
    assert_eq!(a.guard_status().went_back, 2, "{:?}", a.guard_status());
    for key in [&k, &s] {
        let err = a.next(key).await.unwrap_err();
        assert!(matches!(err, SeqError::WentBack { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("the table went back") && text.contains("floors"),
            "{text}"
        );
    }
    // Raised back from what the host remembers: every row to at least its floor.
    let raised = a.raise_table(RaiseTo::Floors, None).await.unwrap();
    assert_eq!(raised.len(), 2, "{raised:?}");
    // Served again within a second, above everything handed out.
    let deadline = Instant::now() + Duration::from_secs(5);
    for key in [&k, &s] {
        let n = loop {
            match a.next(key).await {
                Ok(n) => break n,
                Err(SeqError::WentBack { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{e:?}"),
            }
        };
        check.saw(key, n, n);
    }
    // Nothing is ever lowered: raising to a value below every row changes nothing.
    assert!(
        a.raise_table(RaiseTo::To(5), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        a.raise_table(RaiseTo::Floors, None)
            .await
            .unwrap()
            .is_empty()
    );
    let by = a.raise_table(RaiseTo::By(1000), Some(&k)).await.unwrap();
    assert_eq!(by.len(), 1, "{by:?}");
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_put_back_under_its_owner_is_refused_at_the_raise_and_after_an_eviction() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("backup.db");
    let opts = SeqOptions {
        idle: Duration::from_secs(4),
        ..options(10)
    };
    let (hot, idle) = (SeqKey::Num(7), SeqKey::Num(200_001));
    let mut check = Checker::default();
    let a = open_as(dir.path(), opts, standalone()).await.unwrap();
    for key in [&hot, &idle] {
        let n = a.next(key).await.unwrap();
        check.saw(key, n, n);
    }
    backup(dir.path(), &copy).await;
    for _ in 0..50 {
        for key in [&hot, &idle] {
            let n = a.next(key).await.unwrap();
            check.saw(key, n, n);
        }
    }
    restore_table(dir.path(), &copy).await;
    // The hot key's next raise finds its row below what this owner wrote: went back.
    let err = loop {
        match a.next(&hot).await {
            Ok(n) => check.saw(&hot, n, n),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SeqError::WentBack { .. }), "{err:?}");
    // The idle key's section leaves memory (evicted after idle: 4 s, or dropped by a raise
    // ahead of need that found its row gone back), then is loaded again: refused, not followed.
    let deadline = Instant::now() + Duration::from_secs(15);
    while a.status().sections > 0 {
        assert!(
            Instant::now() < deadline,
            "still in memory: {:?}",
            a.status()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let err = a.next(&idle).await.unwrap_err();
    assert!(matches!(err, SeqError::WentBack { .. }), "{err:?}");
    assert!(a.guard_status().went_back >= 2, "{:?}", a.guard_status());
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_open_is_a_standalone_owner() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), options(10)).await.unwrap();
    let served = a.served().await.unwrap();
    assert_eq!(served.mode, Some(Mode::Standalone));
    assert_eq!(served.lease, None, "its own lease is not another's");
    a.close().await;
}
