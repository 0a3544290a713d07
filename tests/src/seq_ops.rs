//! An operator's hands on a per-key sequences table, for the real-process tests of one owner
//! per table and of a restored table (`tests/it/seq_owner.rs`, `seq_restore.rs`): calls to the
//! servers recorded for the history checker (REST through HTTP/1.1, TCP through the client),
//! and a backup of the table put back — an SQLite file copied, or the table copied at the SQL
//! level under a running server — as people do it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bin::http;
use crate::history::{self, History};

/// How long [`Calls::rest`] retries a 503 that says to retry shortly.
const RETRY_FOR: Duration = Duration::from_secs(5);

/// Calls to servers, every answered one recorded.
pub struct Calls {
    /// What was answered.
    pub history: Arc<History>,
    runtime: tokio::runtime::Runtime,
}

impl Default for Calls {
    fn default() -> Self {
        Calls {
            history: Arc::default(),
            runtime: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime"),
        }
    }
}

/// A refused call: its status (REST) or error, and the sentence.
#[derive(Debug)]
pub struct Refused {
    /// The HTTP status (0 for a TCP call).
    pub status: u16,
    /// What the server said.
    pub said: String,
}

impl Calls {
    /// `GET /seq/{key}` on a REST server: its number, recorded, or the refusal.
    pub fn rest(&self, addr: &str, key: &str) -> Result<u64, Refused> {
        let start = Instant::now();
        // A 503 that says to retry shortly (a term not confirmed in time on a loaded host) is
        // retried for up to 5 s, as a client honouring `Retry-After` does: one call.
        let (status, body) = loop {
            let (status, body) = http(addr, "GET", &format!("/seq/{key}"));
            if status == 503 && body.contains("retry shortly") && start.elapsed() < RETRY_FOR {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            break (status, body);
        };
        let end = Instant::now();
        if status != 200 {
            return Err(Refused { status, said: body });
        }
        let n: u64 = body
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("/seq/{key}: not a number: {body}"));
        self.history.record(one(key, n, start, end));
        Ok(n)
    }

    /// `n` numbers of `key` from the TCP servers `addrs` (the client follows moves and waits
    /// out hand-offs within `budget`): the last, recorded, or the refusal.
    pub fn tcp(&self, addrs: &[&str], key: &str, n: u64, budget: Duration) -> Result<u64, Refused> {
        let addrs: Vec<String> = addrs.iter().map(|a| (*a).to_owned()).collect();
        let start = Instant::now();
        let got = self.runtime.block_on(async {
            let mut config = vesta_server::ClientConfig::new(addrs);
            config.retry_budget = budget;
            let client = vesta_server::Client::connect(config).await?;
            client.seq_next_n(key, n).await
        });
        let end = Instant::now();
        match got {
            Ok(ranges) => {
                let last = ranges.last().map(|r| r.end - 1).expect("a range");
                self.history.extend(history::calls(key, ranges, start, end));
                Ok(last)
            }
            Err(e) => Err(Refused {
                status: 0,
                said: e.to_string(),
            }),
        }
    }

    /// Records numbers printed by `vesta seq next KEY -n N` (one call, from `start` to now).
    pub fn printed(&self, key: &str, numbers: &[u64], start: Instant) {
        let end = Instant::now();
        self.history
            .extend(numbers.iter().map(|&n| one(key, n, start, end)));
    }

    /// The history checker over every answer: the summary, or a panic naming the violation.
    pub fn check(&self) -> history::Summary {
        self.history.check().unwrap_or_else(|v| panic!("{v}"))
    }
}

/// One number answered to a call on `key`.
fn one(key: &str, n: u64, start: Instant, end: Instant) -> history::Call {
    history::Call {
        key: key.to_owned(),
        first: n,
        last: n,
        start,
        end,
    }
}

/// An SQLite database's consistent copy beside it (`VACUUM INTO`, safe under a running
/// server), as a backup is taken.
pub fn sqlite_backup(db: &Path) -> PathBuf {
    let copy = db.with_extension(format!(
        "backup-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    run_sqlite(db, &[format!("VACUUM INTO '{}'", copy.display())]);
    copy
}

/// Puts the table `vesta_seq` of `backup` back into `db` in one transaction: an SQL-level
/// restore of one table, safe under a running server (a file copied over an open database is
/// not).
pub fn sqlite_put_back_table(db: &Path, backup: &Path) {
    run_sqlite(
        db,
        &[
            format!("ATTACH DATABASE '{}' AS b", backup.display()),
            "BEGIN IMMEDIATE".into(),
            "DELETE FROM vesta_seq".into(),
            "INSERT INTO vesta_seq SELECT * FROM b.vesta_seq".into(),
            "COMMIT".into(),
            "DETACH DATABASE b".into(),
        ],
    );
}

fn run_sqlite(db: &Path, statements: &[String]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(db)
            .busy_timeout(Duration::from_secs(10));
        let mut c = sqlx::ConnectOptions::connect(&options)
            .await
            .expect("open the SQLite file");
        for sql in statements {
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&mut c)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    });
}
