//! The scenarios on a PostgreSQL server the test starts, and its partition and schema cases.

use vesta_tests::db::Postgres;

/// A server's stop with its database behind a partition (blackhole: nothing answers, no
/// connection is refused): the give-back and the pool's close are bounded, so the stop
/// ends (a close that waited for a stuck connection hung forever), leaving gaps.
#[test]
fn a_stop_behind_a_partition_is_bounded() {
    use super::*;
    use vesta_tests::proxy::Proxy;
    let pg = Postgres::start();
    let url = pg.create_database("partition");
    vesta_ok(&["segment", "init", "--db", &url]);
    vesta_ok(&["segment", "create", "t", "--step", "100", "--db", &url]);
    let proxy = Proxy::start(([127, 0, 0, 1], pg.port()).into());
    let section = SegmentSection {
        db: Some(format!(
            "postgres://vesta@127.0.0.1:{}/partition",
            proxy.port()
        )),
        fetch_timeout_ms: 500,
        prefetch_percent: 0,
        ..SegmentSection::default()
    };
    let rt = runtime();
    let store = rt.block_on(Store::open(&section)).unwrap();
    assert_eq!(rt.block_on(store.next("t")).unwrap(), 1);
    proxy.blackhole();
    let started = Instant::now();
    let gave = rt.block_on(store.shutdown());
    // Fetches under way: one fetch_timeout_ms; the give-backs: another; the close: a third.
    assert!(
        started.elapsed() < Duration::from_millis(3 * 500) + Duration::from_secs(5),
        "the stop took {:?}",
        started.elapsed()
    );
    assert!(
        matches!(gave[0].outcome, GiveBackOutcome::Failed { .. }),
        "{gave:?}"
    );
    proxy.heal();
    let leaf = vesta_tests::leaf::LeafAllocator::connect(&url);
    assert!(
        leaf.max_id("t") > 1,
        "not given back: a gap, never a repeat"
    );
}

#[test]
fn processes_and_leaf_never_duplicate() {
    let pg = Postgres::start();
    super::processes_and_leaf_never_duplicate(&pg.create_database("dups"));
}

#[test]
fn outage_drains_buffers_fails_fast_and_recovers() {
    let pg = std::cell::RefCell::new(Postgres::start());
    let url = pg.borrow().create_database("outage");
    super::outage(&url, &mut || pg.borrow_mut().stop(), &mut || {
        pg.borrow_mut().restart()
    });
}

#[test]
fn shutdown_gives_the_tail_back() {
    let pg = Postgres::start();
    super::give_back(&pg.create_database("giveback"));
}

#[test]
fn a_restored_backup_is_refused_until_raised() {
    let pg = Postgres::start();
    let url = pg.create_database("restore");
    let backup = std::cell::RefCell::new(None);
    super::restore_guard(
        &url,
        &mut || *backup.borrow_mut() = Some(pg.backup_table("restore", "leaf_alloc")),
        &mut || pg.restore("restore", backup.borrow().as_ref().unwrap()),
    );
}

#[test]
fn bad_input_writes_nothing() {
    let pg = Postgres::start();
    let url = pg.create_database("bad");
    let port = pg.port();
    let no_db = format!("postgres://vesta@127.0.0.1:{port}/nosuchdb");
    let closed = "postgres://vesta:secret@127.0.0.1:1/x".to_owned();
    super::bad_input(
        &url,
        &[
            (&no_db, "database \"nosuchdb\" does not exist"),
            (&closed, "postgres://vesta:***@127.0.0.1:1/x: connecting"),
        ],
    );
    // Nothing created by the failed commands above but the table and one tag.
    let tags = pg.psql("bad", "SELECT biz_tag FROM leaf_alloc");
    assert_eq!(tags.trim(), "t");
}
