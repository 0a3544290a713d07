//! A raw allocator doing exactly what Leaf's segment code does (leaf-core
//! `SegmentIDGenImpl.updateSegmentFromDb` with `IDAllocDaoImpl`): in one transaction, its
//! `UPDATE leaf_alloc SET max_id = max_id + step` (the first two fetches) or `+ #{step}` (the
//! adapted step after that), then its `SELECT biz_tag, max_id, step`, then commit; the segment
//! is `[max_id - step, max_id)`. Its own connection code (sqlx's URL parsing), so it shares
//! nothing with vesta-segment but the table. Also: holding an SQLite file's write lock, the
//! "outage" of an embedded database.

use std::ops::Range;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use sqlx::mysql::MySqlPool;
use sqlx::postgres::PgPool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use sqlx::{ConnectOptions, Connection};

/// Leaf's `MAX_STEP`.
pub const LEAF_MAX_STEP: i64 = 1_000_000;
/// Leaf's `SEGMENT_DURATION` (15 minutes).
const SEGMENT_DURATION: Duration = Duration::from_secs(15 * 60);

enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    MySql(MySqlPool),
}

/// One Leaf `SegmentBuffer`'s fetch state for one tag, with its own connection pool.
pub struct LeafAllocator {
    runtime: tokio::runtime::Runtime,
    pool: Pool,
    init_ok: bool,
    update_timestamp: Option<Instant>,
    step: i64,
    min_step: i64,
}

impl LeafAllocator {
    /// Connects to `url` (`sqlite://`, `postgres://` or `mysql://`).
    pub fn connect(url: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let pool = runtime.block_on(async {
            if url.starts_with("sqlite:") {
                Pool::Sqlite(SqlitePool::connect(url).await.expect("sqlite"))
            } else if url.starts_with("postgres") {
                Pool::Postgres(PgPool::connect(url).await.expect("postgres"))
            } else {
                Pool::MySql(MySqlPool::connect(url).await.expect("mysql"))
            }
        });
        LeafAllocator {
            runtime,
            pool,
            init_ok: false,
            update_timestamp: None,
            step: 0,
            min_step: 0,
        }
    }

    /// Leaf's `updateSegmentFromDb`: reserves the next segment of `tag`, adapting the step as
    /// Leaf does, and returns it.
    pub fn fetch(&mut self, tag: &str) -> Range<i64> {
        let (max_id, table_step) = if !self.init_ok || self.update_timestamp.is_none() {
            let row = self.update_max_id(tag, None);
            if self.init_ok {
                self.update_timestamp = Some(Instant::now());
            }
            self.init_ok = true;
            self.step = row.1;
            row
        } else {
            let duration = self
                .update_timestamp
                .map_or(Duration::ZERO, |t| t.elapsed());
            let mut next_step = self.step;
            if duration < SEGMENT_DURATION {
                if next_step * 2 <= LEAF_MAX_STEP {
                    next_step *= 2;
                }
            } else if duration < SEGMENT_DURATION * 2 {
                // unchanged
            } else if next_step / 2 >= self.min_step {
                next_step /= 2;
            }
            let row = self.update_max_id(tag, Some(next_step));
            self.update_timestamp = Some(Instant::now());
            self.step = next_step;
            row
        };
        self.min_step = table_step;
        max_id - self.step..max_id
    }

    /// `updateMaxIdAndGetLeafAlloc` (`step` None) or `updateMaxIdByCustomStepAndGetLeafAlloc`.
    fn update_max_id(&self, tag: &str, step: Option<i64>) -> (i64, i64) {
        macro_rules! leaf_tx {
            ($pool:expr, $by_table:expr, $by_custom:expr, $select:expr) => {{
                let mut tx = $pool.begin().await.expect("begin");
                match step {
                    None => sqlx::query($by_table).bind(tag).execute(&mut *tx).await,
                    Some(s) => {
                        sqlx::query($by_custom)
                            .bind(s)
                            .bind(tag)
                            .execute(&mut *tx)
                            .await
                    }
                }
                .expect("Leaf's UPDATE");
                let (_, max_id, step): (String, i64, i32) = sqlx::query_as($select)
                    .bind(tag)
                    .fetch_one(&mut *tx)
                    .await
                    .expect("Leaf's SELECT");
                tx.commit().await.expect("commit");
                (max_id, i64::from(step))
            }};
        }
        self.runtime.block_on(async {
            match &self.pool {
                Pool::Sqlite(p) => leaf_tx!(
                    p,
                    "UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = ?",
                    "UPDATE leaf_alloc SET max_id = max_id + ? WHERE biz_tag = ?",
                    "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?"
                ),
                Pool::MySql(p) => leaf_tx!(
                    p,
                    "UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = ?",
                    "UPDATE leaf_alloc SET max_id = max_id + ? WHERE biz_tag = ?",
                    "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?"
                ),
                Pool::Postgres(p) => leaf_tx!(
                    p,
                    "UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = $1",
                    "UPDATE leaf_alloc SET max_id = max_id + $1 WHERE biz_tag = $2",
                    "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = $1"
                ),
            }
        })
    }

    /// `max_id` of `tag` as the table has it now.
    pub fn max_id(&self, tag: &str) -> i64 {
        self.runtime.block_on(async {
            match &self.pool {
                Pool::Sqlite(p) => {
                    sqlx::query_scalar("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?")
                        .bind(tag)
                        .fetch_one(p)
                        .await
                }
                Pool::MySql(p) => {
                    sqlx::query_scalar("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?")
                        .bind(tag)
                        .fetch_one(p)
                        .await
                }
                Pool::Postgres(p) => {
                    sqlx::query_scalar("SELECT max_id FROM leaf_alloc WHERE biz_tag = $1")
                        .bind(tag)
                        .fetch_one(p)
                        .await
                }
            }
            .expect("reading max_id")
        })
    }
}

/// Another connection holding an SQLite file's exclusive lock: to the store, the database is
/// down (every fetch times out on the busy lock). Released on [`SqliteLock::release`] or drop.
pub struct SqliteLock {
    release: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl SqliteLock {
    /// Takes the lock on `path` and returns once it is held.
    pub fn take(path: &std::path::Path) -> Self {
        let (locked_tx, locked_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let path = path.to_owned();
        let thread = thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let mut conn = SqliteConnectOptions::new()
                    .filename(&path)
                    .connect()
                    .await
                    .expect("sqlite connection");
                sqlx::query("BEGIN EXCLUSIVE")
                    .execute(&mut conn)
                    .await
                    .expect("BEGIN EXCLUSIVE");
                locked_tx.send(()).expect("signal");
                let _ = release_rx.recv();
                sqlx::query("ROLLBACK")
                    .execute(&mut conn)
                    .await
                    .expect("ROLLBACK");
                let _ = conn.close().await;
            });
        });
        locked_rx.recv().expect("lock taken");
        SqliteLock {
            release: Some(release_tx),
            thread: Some(thread),
        }
    }

    /// Releases the lock.
    pub fn release(mut self) {
        self.end();
    }

    fn end(&mut self) {
        drop(self.release.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SqliteLock {
    fn drop(&mut self) {
        self.end();
    }
}
