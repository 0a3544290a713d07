//! The scenarios on a MariaDB server the test starts.

use vesta_tests::db::MariaDb;

#[test]
fn processes_and_leaf_never_duplicate() {
    let db = MariaDb::start();
    super::processes_and_leaf_never_duplicate(&db.create_database("dups"));
}

#[test]
fn outage_drains_buffers_fails_fast_and_recovers() {
    let db = std::cell::RefCell::new(MariaDb::start());
    let url = db.borrow().create_database("outage");
    super::outage(&url, &mut || db.borrow_mut().stop(), &mut || {
        db.borrow_mut().restart()
    });
}

#[test]
fn shutdown_gives_the_tail_back() {
    let db = MariaDb::start();
    super::give_back(&db.create_database("giveback"));
}

#[test]
fn a_restored_backup_is_refused_until_raised() {
    let db = MariaDb::start();
    let url = db.create_database("restore");
    let backup = std::cell::RefCell::new(None);
    super::restore_guard(
        &url,
        &mut || *backup.borrow_mut() = Some(db.backup_table("restore", "leaf_alloc")),
        &mut || db.restore("restore", backup.borrow().as_ref().unwrap()),
    );
}

#[test]
fn bad_input_writes_nothing() {
    let db = MariaDb::start();
    let url = db.create_database("bad");
    let port = db.port();
    let no_db = format!("mysql://root@127.0.0.1:{port}/nosuchdb");
    let closed = "mysql://root:secret@127.0.0.1:1/x".to_owned();
    super::bad_input(
        &url,
        &[
            (&no_db, "Unknown database 'nosuchdb'"),
            (&closed, "mysql://root:***@127.0.0.1:1/x: connecting"),
        ],
    );
    assert_eq!(db.sql("SELECT biz_tag FROM bad.leaf_alloc").trim(), "t");
}
