//! Machine IDs leased from an SQL database (`[machine] source = "sql"`), against a real SQLite
//! file, PostgreSQL server and MariaDB server, each started by the test:
//!
//! - issuers starting at once get distinct machine IDs, a full pool is refused naming it, and
//!   no ID is issued twice;
//! - a clean stop writes the final mark and frees the ID: the successor takes it and issues
//!   only after the mark;
//! - a SIGKILLed server keeps its ID until its lease expires by the database's clock (an
//!   immediate restart gets another ID); once expired, the successor waits out its mark;
//! - the database stopped under a holder fences it within ⅔ of the lease, and it issues again
//!   once the database is back;
//! - an unreachable database fails the start in one line naming it;
//! - a static machine ID registered in the table is refused to a second live holder;
//! - a partition through a proxy (blackhole, cut; PostgreSQL and MariaDB) fences the holder
//!   before its ID can move to a successor, which starts after the holder's mark; healed, the
//!   old holder stays fenced;
//! - a mark counted in another epoch is refused until `vesta machine retire`, and a table made
//!   before marks carried it gains the column.

use std::process::Stdio;
use std::time::Duration;

use vesta_embed::{IssuerConfig, MachineSource};
use vesta_tests::bin::{vesta_fails, vesta_ok};
use vesta_tests::lease;
use vesta_tests::proxy::Proxy;

/// An embedded issuer leasing from `url`: a 6 s lease (fence window 4 s, a renewal every
/// second), so a slow machine never fences a healthy holder mid-test.
fn config(url: &str, scope: &str, pool_size: u64) -> IssuerConfig {
    let mut c = IssuerConfig::default();
    c.machine.source = MachineSource::Sql;
    c.machine.db = Some(url.into());
    c.machine.scope = scope.into();
    c.machine.server_pool_start = Some(pool_size);
    c.machine.lease_ms = 6_000;
    c.machine.db_timeout_ms = 3_000;
    c.machine.start_guard_max_wait_ms = 3_000;
    c
}

/// Scenario 1: six issuers at once on a pool of four; then a released ID is reused after its
/// mark; `vesta machine ls` shows the leases and then their release.
fn concurrent_claims_are_distinct(url: &str) {
    let config = config(url, "concurrent", 4);
    let (issuers, mut ids) = lease::concurrent_claims_are_distinct(
        &config,
        "every machine ID of the embed pool 0..=3 in scope \"concurrent\" is held",
    );
    let ls = [
        "machine",
        "ls",
        "--machine-db",
        url,
        "--scope",
        "concurrent",
    ];
    let listed = vesta_ok(&[&ls[..], &["--json"]].concat());
    assert_eq!(listed.lines().count(), 4, "{listed}");
    assert!(
        listed
            .lines()
            .all(|l| l.contains("\"lease_left_ms\":") && !l.contains("\"holder\":\"\"")),
        "{listed}"
    );
    lease::a_freed_id_is_reused_after_its_mark(issuers, &config, &mut ids);
    let listed = vesta_ok(&ls);
    assert!(listed.contains(": 4 machine IDs, 0 leased"), "{listed}");
}

/// Scenario 2: a SIGKILLed server's ID stays held until the lease expires by the database's
/// clock; then its successor takes it and issues after the dead holder's mark.
fn a_killed_holder_keeps_its_id_until_its_lease_expires(url: &str) {
    lease::a_killed_server_keeps_its_id_until_its_lease_expires(
        "[machine]\nsource = \"sql\"\nscope = \"killed\"\nlease_ms = 5000\n",
        &["--machine-db", url],
        &["--machine-db", url, "--scope", "killed"],
        Duration::from_millis(5_000),
    );
}

/// Scenario 3: the database goes away under a holder: it stops issuing within ⅔ of the lease
/// (its own monotonic deadline), says why, and issues again once the database is back.
fn a_lost_database_fences_the_holder(url: &str, stop: &mut dyn FnMut(), restart: &mut dyn FnMut()) {
    let mut c = config(url, "fenced", 4);
    c.machine.lease_ms = 3_000;
    c.machine.db_timeout_ms = 1_000;
    lease::a_lost_store_fences_the_holder(c, "is not confirmed by", stop, restart);
}

/// Scenario 5: a static machine ID registered in the table (`--machine N --machine-db URL`):
/// a second server with the same ID is refused at start, naming the holder.
fn a_duplicated_static_id_is_refused(url: &str) {
    lease::a_duplicated_static_id_is_refused(
        &["--machine-db", url],
        &[
            "scope \"default\"",
            &format!("(to see by whom: vesta machine ls --machine-db {url} --scope default)"),
        ],
    );
}

/// Scenario 7: a mark counted in another epoch is refused until `vesta machine retire`.
fn a_mark_of_another_epoch_is_refused_until_retired(url: &str) {
    // `config(url, "epochs", 1)` as a file, which `vesta gen --config` reads too.
    let toml = format!(
        "[machine]\nsource = \"sql\"\ndb = \"{url}\"\nscope = \"epochs\"\n\
         server_pool_start = 1\nlease_ms = 6000\ndb_timeout_ms = 3000\n\
         start_guard_max_wait_ms = 3000\n"
    );
    assert_eq!(
        IssuerConfig::from_toml_str(&toml).unwrap(),
        config(url, "epochs", 1)
    );
    vesta_tests::lease::a_mark_of_another_epoch_is_refused_until_retired(
        &toml,
        0,
        vesta_core::MarkStore::Sql {
            db: url.into(),
            scope: "epochs".into(),
        },
        &["--machine-db", url, "--scope", "epochs"],
        "scope \"epochs\"",
    );
}

/// Scenario 8: a table made before marks carried their layout and epoch (no `counted_in`
/// column) gains the column; its mark is still waited out, then rewritten with it. `make`
/// runs SQL on the database.
fn an_old_table_gains_the_column(url: &str, make: &dyn Fn(&str)) {
    make(
        "CREATE TABLE vesta_machine (scope VARCHAR(128) NOT NULL, machine_id BIGINT NOT NULL, \
         holder VARCHAR(255) NOT NULL DEFAULT '', expires_ms BIGINT NOT NULL, mark_ms BIGINT \
         NOT NULL DEFAULT 0, updated_ms BIGINT NOT NULL, PRIMARY KEY (scope, machine_id))",
    );
    // A mark two seconds ahead of the clock: the start waits it out.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let mark = now + 2_000;
    make(&format!(
        "INSERT INTO vesta_machine VALUES ('old', 0, '', 0, {mark}, {now})"
    ));
    let issuer = vesta_embed::Issuer::start(config(url, "old", 1)).unwrap();
    let id = issuer.next_id().unwrap();
    let at = vesta_core::Epoch::VESTA.unix_ms() + issuer.explain(id).time() * 1000;
    assert!(u128::from(at) >= mark, "issued inside the old mark");
    issuer.shutdown().unwrap();
    let listed = vesta_ok(&["machine", "ls", "--machine-db", url, "--scope", "old"]);
    assert!(listed.contains("1 machine IDs, 0 leased"), "{listed}");
    // Rewritten with what it was counted in: another epoch is now refused.
    let mut moved = config(url, "old", 1);
    moved.id.epoch = Some(vesta_core::Epoch::from_unix_ms(1_451_606_400_000));
    let err = vesta_embed::Issuer::start(moved).expect_err("another epoch");
    assert!(err.to_string().contains("was counted in"), "{err}");
}

/// Scenario 4: nothing answers: one line naming the database (a refused connection fails at
/// once; the bound of a silent one is the partition scenario's).
fn unreachable(url: &str) {
    vesta_fails(&["gen", "--machine-db", url], &["machine.db", "connecting"]);
}

/// Scenario 6: a partition between a holder and the database, through a proxy in front of the
/// server at `port` (`url` reaches it directly).
fn partition(url: &str, port: u16, blackhole: bool) {
    let proxy = Proxy::start(([127, 0, 0, 1], port).into());
    let proxied = url.replacen(&format!(":{port}/"), &format!(":{}/", proxy.port()), 1);
    assert_ne!(proxied, url, "{url} names port {port}");
    let config = |url: &str| {
        let mut c = config(url, "partition", 1);
        c.machine.lease_ms = 3_000;
        c.machine.db_timeout_ms = 1_000;
        c
    };
    lease::a_partitioned_holder_is_fenced_before_its_id_moves(
        &config(url),
        &config(&proxied),
        &proxy,
        blackhole,
    );
}

mod sqlite {
    use super::*;

    fn url(dir: &std::path::Path) -> String {
        format!("sqlite://{}", dir.join("machines.db").display())
    }

    #[test]
    fn concurrent_claims_are_distinct() {
        let dir = tempfile::tempdir().unwrap();
        super::concurrent_claims_are_distinct(&url(dir.path()));
    }

    #[test]
    fn a_killed_holder_keeps_its_id_until_its_lease_expires() {
        let dir = tempfile::tempdir().unwrap();
        super::a_killed_holder_keeps_its_id_until_its_lease_expires(&url(dir.path()));
    }

    #[test]
    fn a_duplicated_static_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        super::a_duplicated_static_id_is_refused(&url(dir.path()));
    }

    #[test]
    fn a_mark_of_another_epoch_is_refused_until_retired() {
        let dir = tempfile::tempdir().unwrap();
        super::a_mark_of_another_epoch_is_refused_until_retired(&url(dir.path()));
    }

    #[test]
    fn an_old_table_gains_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let url = url(dir.path());
        let path = dir.path().join("machines.db");
        let make = |sql: &str| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            runtime.block_on(async {
                use sqlx::ConnectOptions;
                let mut c = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(&path)
                    .create_if_missing(true)
                    .connect()
                    .await
                    .unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                    .execute(&mut c)
                    .await
                    .unwrap();
            });
        };
        super::an_old_table_gains_the_column(&url, &make);
    }

    #[test]
    fn a_missing_table_or_file_is_named_by_ls() {
        let dir = tempfile::tempdir().unwrap();
        let url = url(dir.path());
        vesta_fails(
            &["machine", "ls", "--machine-db", &url],
            &["machines.db does not exist"],
        );
        assert!(
            !dir.path().join("machines.db").exists(),
            "ls created nothing"
        );
        let out = vesta_tests::bin::vesta_cmd(["gen", "-n", "2", "--machine-db", &url])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listed = vesta_ok(&["machine", "ls", "--machine-db", &url]);
        assert!(
            listed.contains("scope default: 1 machine IDs, 0 leased"),
            "{listed}"
        );
    }
}

mod postgres {
    use vesta_tests::db::Postgres;

    fn partition(blackhole: bool) {
        let pg = Postgres::start();
        let direct = pg.create_database("partition");
        super::partition(&direct, pg.port(), blackhole);
    }

    #[test]
    fn a_blackholed_holder_is_fenced_before_its_id_moves() {
        partition(true);
    }

    #[test]
    fn a_cut_off_holder_is_fenced_before_its_id_moves() {
        partition(false);
    }

    #[test]
    fn concurrent_claims_are_distinct() {
        let pg = Postgres::start();
        super::concurrent_claims_are_distinct(&pg.create_database("claims"));
    }

    #[test]
    fn a_killed_holder_keeps_its_id_until_its_lease_expires() {
        let pg = Postgres::start();
        super::a_killed_holder_keeps_its_id_until_its_lease_expires(&pg.create_database("killed"));
    }

    #[test]
    fn a_lost_database_fences_the_holder() {
        let pg = std::cell::RefCell::new(Postgres::start());
        let url = pg.borrow().create_database("fenced");
        super::a_lost_database_fences_the_holder(&url, &mut || pg.borrow_mut().stop(), &mut || {
            pg.borrow_mut().restart()
        });
    }

    #[test]
    fn a_duplicated_static_id_is_refused() {
        let pg = Postgres::start();
        super::a_duplicated_static_id_is_refused(&pg.create_database("dup"));
    }

    #[test]
    fn an_unreachable_database_fails_the_start_in_one_line() {
        super::unreachable("postgres://vesta@127.0.0.1:1/x");
    }

    #[test]
    fn a_mark_of_another_epoch_is_refused_until_retired() {
        let pg = Postgres::start();
        super::a_mark_of_another_epoch_is_refused_until_retired(&pg.create_database("epochs"));
    }

    #[test]
    fn an_old_table_gains_the_column() {
        let pg = Postgres::start();
        let url = pg.create_database("old");
        super::an_old_table_gains_the_column(&url, &|sql| {
            pg.psql("old", sql);
        });
    }
}

mod mariadb {
    use vesta_tests::db::MariaDb;

    fn partition(blackhole: bool) {
        let db = MariaDb::start();
        let direct = db.create_database("cut_off");
        super::partition(&direct, db.port(), blackhole);
    }

    #[test]
    fn a_blackholed_holder_is_fenced_before_its_id_moves() {
        partition(true);
    }

    #[test]
    fn a_cut_off_holder_is_fenced_before_its_id_moves() {
        partition(false);
    }

    #[test]
    fn concurrent_claims_are_distinct() {
        let db = MariaDb::start();
        super::concurrent_claims_are_distinct(&db.create_database("claims"));
    }

    #[test]
    fn a_killed_holder_keeps_its_id_until_its_lease_expires() {
        let db = MariaDb::start();
        super::a_killed_holder_keeps_its_id_until_its_lease_expires(&db.create_database("killed"));
    }

    #[test]
    fn an_old_table_gains_the_column() {
        let db = MariaDb::start();
        let url = db.create_database("old");
        super::an_old_table_gains_the_column(&url, &|sql| {
            db.sql(&format!("USE old; {sql}"));
        });
    }

    #[test]
    fn a_lost_database_fences_the_holder() {
        let db = std::cell::RefCell::new(MariaDb::start());
        let url = db.borrow().create_database("fenced");
        super::a_lost_database_fences_the_holder(&url, &mut || db.borrow_mut().stop(), &mut || {
            db.borrow_mut().restart()
        });
    }
}
