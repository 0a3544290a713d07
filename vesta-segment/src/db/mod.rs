//! The database layer (sqlx, runtime query API only): one pool per store, and the few
//! operations on `leaf_alloc` — take a segment, give a tail back, list, create, init.
//!
//! A segment is taken only by `Database::fetch`: Leaf's `UPDATE ... SET max_id = max_id +
//! step WHERE biz_tag = ?` then its `SELECT` of the row, in one transaction (SQLite:
//! `BEGIN IMMEDIATE`). The row read back is checked before the commit; a bad one is rolled back.

mod driver;
mod sql;

use std::ops::Range;
use std::time::Duration;

use crate::error::{SegmentError, shown_tag};
use crate::pool::{self, AnyPool, OpenError, PoolSettings};
use crate::tag::validate_tag;
use crate::url::DbUrl;
use vesta_core::Remedy;

use self::driver::{
    FETCH_TIMEOUT_KEY, UNIQUE, driver_message, is_missing_table, is_unreachable, no_answer,
};
use self::sql::{Dialect, dialect};

/// Connections per store: fetches of different tags may run together; one tag fetches one at
/// a time.
const MAX_CONNECTIONS: u32 = 4;

/// The longest description (Leaf's `varchar(256)`), in characters.
pub const MAX_DESCRIPTION_LEN: usize = 256;

/// Probe that fails with "no such table" when `leaf_alloc` is missing (same in every dialect).
const TABLE_PROBE: &str = "SELECT 1 FROM leaf_alloc LIMIT 1";

/// Runs the same body against whichever pool this is; `$p` is `&Pool<DB>` in each arm.
macro_rules! on_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        $crate::pool::on_pool_here!($pool, $p => $body)
    };
}

/// How the step of a fetch is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StepRequest {
    /// The table's own `step` (Leaf's `updateMaxId`).
    Table,
    /// An adapted step (Leaf's `updateMaxIdByCustomStep`).
    Custom(u32),
}

/// A segment taken from the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fetched {
    /// `[max_id - step, max_id)`.
    pub range: Range<u64>,
    /// The step added.
    pub step: u32,
    /// The table's `step` column as read back.
    pub table_step: u32,
}

/// Why a fetch failed; the caller adds the tag.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// No row for the tag.
    UnknownTag,
    /// No table.
    MissingTable,
    /// The row read back is not a valid segment.
    Inconsistent(String),
    /// The segment starts below the floor: the table went back.
    MovedBack {
        /// Where it starts.
        start: u64,
        /// The floor.
        floor: u64,
    },
    /// The database failed or did not answer in time.
    Unavailable(String),
}

/// One row of `leaf_alloc`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TagRow {
    /// `biz_tag`.
    pub tag: String,
    /// `max_id`: the first number the next fetch hands out.
    pub max_id: i64,
    /// `step`.
    pub step: i32,
    /// `update_time` as RFC 3339 UTC, when readable.
    pub updated: Option<String>,
    /// `description`.
    pub description: Option<String>,
}

/// How [`Database::raise`] moves a tag's `max_id` (never down).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raise {
    /// To this value; a tag already at or above it is left alone.
    To(i64),
    /// Up by this many numbers (at least 1).
    By(i64),
}

/// What [`Database::raise`] did to one tag.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Raised {
    /// The tag.
    pub tag: String,
    /// `max_id` before.
    pub from: i64,
    /// `max_id` after (equal to `from` when the tag was left alone).
    pub to: i64,
}

/// A pool of connections to the database holding `leaf_alloc`.
pub struct Database {
    pool: AnyPool,
    url: DbUrl,
    timeout: Duration,
    /// The setting `timeout` comes from, named when a round trip runs out of it.
    timeout_key: &'static str,
    /// Opened here (closed by [`Database::close`]), not handed in by the application.
    owned: bool,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Database({})", self.url)
    }
}

impl Database {
    /// Connects to an existing database; an SQLite file that does not exist is an error (only
    /// [`Database::connect_or_create`] creates one). Every round trip, the first connection
    /// included, is bounded by `timeout`.
    pub async fn connect(url: &DbUrl, timeout: Duration) -> Result<Database, SegmentError> {
        Self::open(url, timeout, false, FETCH_TIMEOUT_KEY).await
    }

    /// On a pool the application already has; every round trip is bounded by `timeout`.
    pub fn from_pool(pool: AnyPool, timeout: Duration) -> Database {
        Database {
            url: DbUrl::of_pool(pool.kind()),
            pool,
            timeout,
            timeout_key: FETCH_TIMEOUT_KEY,
            owned: false,
        }
    }

    /// Like [`Database::connect`], but creates a missing SQLite file (for `init`).
    pub async fn connect_or_create(
        url: &DbUrl,
        timeout: Duration,
    ) -> Result<Database, SegmentError> {
        Self::open(url, timeout, true, FETCH_TIMEOUT_KEY).await
    }

    /// Opens a pool on `url` (`create`: a missing SQLite file is created); `key` is the setting
    /// `timeout` comes from, named when a round trip runs out of it (vesta-seq names its own).
    pub async fn open(
        url: &DbUrl,
        timeout: Duration,
        create: bool,
        key: &'static str,
    ) -> Result<Database, SegmentError> {
        let settings = PoolSettings {
            timeout,
            max_connections: MAX_CONNECTIONS,
            create,
            application: "vesta-segment",
        };
        let pool = match pool::open(url, settings).await {
            Ok(pool) => pool,
            Err(OpenError::NoDirectory(dir)) => {
                return Err(SegmentError::NoDatabaseDirectory {
                    path: url.sqlite_path().map(ToOwned::to_owned).unwrap_or_default(),
                    dir,
                });
            }
            Err(OpenError::NoFile(path)) => {
                return Err(SegmentError::NoDatabaseFile {
                    path,
                    remedy: Remedy::CreateSegmentTable {
                        db: url.to_string(),
                    },
                });
            }
            Err(OpenError::Driver(e)) if is_unreachable(&e) => {
                return Err(SegmentError::Unreachable {
                    db: url.to_string(),
                    cause: driver_message(&e),
                });
            }
            Err(OpenError::Driver(e)) => {
                return Err(SegmentError::Database {
                    db: url.to_string(),
                    action: "connecting".into(),
                    cause: driver_message(&e),
                });
            }
            Err(OpenError::Timeout) => {
                return Err(SegmentError::Unreachable {
                    db: url.to_string(),
                    cause: no_answer(timeout, key),
                });
            }
        };
        Ok(Database {
            pool,
            url: url.clone(),
            timeout,
            timeout_key: key,
            owned: true,
        })
    }

    /// Names `key` as the setting the timeout comes from in errors (the default is
    /// `segment.fetch_timeout_ms`; per-key sequences name theirs).
    pub fn timeout_from(mut self, key: &'static str) -> Self {
        self.timeout_key = key;
        self
    }

    /// The URL (its `Display` hides the password).
    pub fn url(&self) -> &DbUrl {
        &self.url
    }

    /// The pool, for statements of tables other than `leaf_alloc` on the same database (the
    /// per-key sequences' in vesta-seq), each run through [`Database::bounded`].
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    fn dialect(&self) -> &'static Dialect {
        dialect(self.url.kind())
    }

    /// Runs `op` within the timeout, mapping its errors to [`SegmentError`] naming `action`
    /// (and the timeout's setting): the one round trip every table on this pool goes through.
    pub async fn bounded<T>(
        &self,
        action: impl FnOnce() -> String,
        op: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, SegmentError> {
        match tokio::time::timeout(self.timeout, op).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if is_missing_table(&e) => Err(SegmentError::missing_table(&self.url)),
            Ok(Err(e)) => Err(SegmentError::Database {
                db: self.url.to_string(),
                action: action(),
                cause: driver_message(&e),
            }),
            Err(_) => Err(SegmentError::Database {
                db: self.url.to_string(),
                action: action(),
                cause: no_answer(self.timeout, self.timeout_key),
            }),
        }
    }

    /// Creates `leaf_alloc` (Leaf's DDL for this database) unless it exists. Returns true when
    /// it was created.
    pub async fn init(&self) -> Result<bool, SegmentError> {
        match self.check_table().await {
            Ok(()) => return Ok(false),
            Err(SegmentError::MissingTable { .. }) => {}
            Err(e) => return Err(e),
        }
        let ddl = self.dialect().create_table;
        self.bounded(|| "creating table leaf_alloc".into(), async {
            on_pool!(&self.pool, p => {
                sqlx::query(ddl).execute(p).await.map(|_| ())
            })
        })
        .await?;
        Ok(true)
    }

    /// Ok when `leaf_alloc` exists; [`SegmentError::MissingTable`] when not.
    pub async fn check_table(&self) -> Result<(), SegmentError> {
        self.bounded(|| "reading table leaf_alloc".into(), async {
            on_pool!(&self.pool, p => {
                sqlx::query(TABLE_PROBE).fetch_optional(p).await.map(|_| ())
            })
        })
        .await
    }

    /// Adds a tag whose first number will be `start` (`max_id = start`), with `step`. An
    /// existing tag, a step outside `1..=2^31-1`, a start that leaves no room for one step,
    /// a bad tag or a description over 256 characters is an error, and nothing is written.
    pub async fn create_tag(
        &self,
        tag: &str,
        step: i64,
        start: i64,
        description: Option<&str>,
    ) -> Result<(), SegmentError> {
        validate_tag(tag)?;
        let context = format!(" for tag {:?}", shown_tag(tag));
        let range = |field, value: i64, min: i64, max: i64| SegmentError::OutOfRange {
            field,
            value: value.into(),
            min: min.into(),
            max: max.into(),
            context: context.clone(),
        };
        let max_step = i64::from(i32::MAX);
        if !(1..=max_step).contains(&step) {
            return Err(range("step", step, 1, max_step));
        }
        if !(0..=i64::MAX - step).contains(&start) {
            return Err(range("start", start, 0, i64::MAX - step));
        }
        if let Some(d) = description {
            let len = d.chars().count();
            if len > MAX_DESCRIPTION_LEN {
                return Err(range(
                    "description length",
                    len as i64,
                    0,
                    MAX_DESCRIPTION_LEN as i64,
                ));
            }
        }
        let insert = self.dialect().insert;
        let result = self
            .bounded(|| format!("creating tag {:?}", shown_tag(tag)), async {
                on_pool!(&self.pool, p => {
                    sqlx::query(insert)
                        .bind(tag)
                        .bind(start)
                        .bind(step as i32)
                        .bind(description)
                        .execute(p)
                        .await
                        .map(|_| ())
                })
            })
            .await;
        match result {
            Err(SegmentError::Database { ref cause, .. }) if cause.starts_with(UNIQUE) => {
                Err(SegmentError::TagExists {
                    tag: shown_tag(tag),
                    db: self.url.to_string(),
                })
            }
            other => other,
        }
    }

    /// Every row, ordered by tag.
    pub async fn list(&self) -> Result<Vec<TagRow>, SegmentError> {
        type Row = (String, i64, i32, Option<String>, Option<String>);
        let list = self.dialect().list;
        let rows: Vec<Row> = self
            .bounded(|| "listing leaf_alloc".into(), async {
                on_pool!(&self.pool, p => {
                    sqlx::query_as::<_, Row>(list).fetch_all(p).await
                })
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|(tag, max_id, step, updated, description)| TagRow {
                tag,
                max_id,
                step,
                updated,
                description,
            })
            .collect())
    }

    /// Moves `tag`'s `max_id` up (the restore procedure: past every number issued before a
    /// backup was restored or a replica took over), in one transaction with the row locked, so
    /// a fetch under way elsewhere is either before it or after it. Never lowers `max_id`.
    pub async fn raise(&self, tag: &str, how: Raise) -> Result<Raised, SegmentError> {
        validate_tag(tag)?;
        let context = format!(" for tag {:?}", shown_tag(tag));
        match how {
            Raise::To(n) if n < 0 => {
                return Err(SegmentError::OutOfRange {
                    field: "to",
                    value: n.into(),
                    min: 0,
                    max: i64::MAX.into(),
                    context,
                });
            }
            Raise::By(n) if n < 1 => {
                return Err(SegmentError::OutOfRange {
                    field: "by",
                    value: n.into(),
                    min: 1,
                    max: i64::MAX.into(),
                    context,
                });
            }
            _ => {}
        }
        let d = self.dialect();
        let raising = async {
            on_pool!(&self.pool, p => {
                let mut tx = p.begin_with(d.begin).await?;
                let from: Option<i64> = sqlx::query_scalar(d.lock_row)
                    .bind(tag)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(from) = from else {
                    tx.rollback().await?;
                    return Ok(Ok(None));
                };
                let to = match how {
                    Raise::To(n) => n.max(from),
                    Raise::By(n) => match from.checked_add(n) {
                        Some(to) => to,
                        None => {
                            tx.rollback().await?;
                            return Ok(Err(SegmentError::OutOfRange {
                                field: "by",
                                value: n.into(),
                                min: 1,
                                max: (i64::MAX - from).into(),
                                context: format!("{context} (max_id is {from})"),
                            }));
                        }
                    },
                };
                if to != from {
                    sqlx::query(d.set_max_id).bind(to).bind(tag).execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(Ok(Some((from, to))))
            })
        };
        let raised = self
            .bounded(|| format!("raising tag {:?}", shown_tag(tag)), raising)
            .await??;
        match raised {
            Some((from, to)) => Ok(Raised {
                tag: tag.to_owned(),
                from,
                to,
            }),
            None => Err(SegmentError::UnknownTag {
                tag: shown_tag(tag),
                db: self.url.to_string(),
            }),
        }
    }

    /// Every tag name (Leaf's `getAllTags`).
    pub async fn tags(&self) -> Result<Vec<String>, SegmentError> {
        let all = self.dialect().all_tags;
        self.bounded(|| "reading the tags of leaf_alloc".into(), async {
            on_pool!(&self.pool, p => {
                sqlx::query_scalar::<_, String>(all).fetch_all(p).await
            })
        })
        .await
    }

    /// Takes a segment for `tag`: the UPDATE and the read-back in one transaction, committed
    /// only if the row describes a valid segment starting at or above `floor`.
    pub(crate) async fn fetch(
        &self,
        tag: &str,
        request: StepRequest,
        floor: u64,
    ) -> Result<Fetched, FetchError> {
        let d = self.dialect();
        let fetching = async {
            on_pool!(&self.pool, p => {
                let mut tx = p.begin_with(d.begin).await?;
                let updated = match request {
                    StepRequest::Table => {
                        sqlx::query(d.take_table_step).bind(tag).execute(&mut *tx).await?
                    }
                    StepRequest::Custom(step) => {
                        sqlx::query(d.take_custom_step)
                            .bind(i64::from(step))
                            .bind(tag)
                            .execute(&mut *tx)
                            .await?
                    }
                };
                if updated.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Ok(Err(FetchError::UnknownTag));
                }
                let row: Option<(String, i64, i32)> = sqlx::query_as(d.read_back)
                    .bind(tag)
                    .fetch_optional(&mut *tx)
                    .await?;
                match check_row(row, request, floor) {
                    Ok(fetched) => {
                        tx.commit().await?;
                        Ok(Ok(fetched))
                    }
                    Err(e) => {
                        tx.rollback().await?;
                        Ok(Err(e))
                    }
                }
            })
        };
        match tokio::time::timeout(self.timeout, fetching).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) if is_missing_table(&e) => Err(FetchError::MissingTable),
            Ok(Err(e)) => Err(FetchError::Unavailable(driver_message(&e))),
            Err(_) => Err(FetchError::Unavailable(no_answer(
                self.timeout,
                self.timeout_key,
            ))),
        }
    }

    /// Lowers `max_id` back to `first_unused` if it still equals `reserved_end` (nobody took a
    /// segment after ours). Returns whether it did.
    pub(crate) async fn give_back(
        &self,
        tag: &str,
        first_unused: u64,
        reserved_end: u64,
    ) -> Result<bool, SegmentError> {
        let (Ok(to), Ok(expect)) = (i64::try_from(first_unused), i64::try_from(reserved_end))
        else {
            return Ok(false);
        };
        let sql = self.dialect().give_back;
        let affected = self
            .bounded(
                || format!("giving back the tail of tag {:?}", shown_tag(tag)),
                async {
                    on_pool!(&self.pool, p => {
                        sqlx::query(sql)
                            .bind(to)
                            .bind(tag)
                            .bind(expect)
                            .execute(p)
                            .await
                            .map(|r| r.rows_affected())
                    })
                },
            )
            .await?;
        Ok(affected == 1)
    }

    /// Closes every connection, waiting at most `segment.fetch_timeout_ms` (a connection stuck
    /// in a partition would otherwise hold the close, and a server's stop, forever). A pool
    /// handed in by the application ([`Database::from_pool`]) stays open: it is the
    /// application's to close.
    pub async fn close(&self) {
        if self.owned {
            self.pool.close_within(self.timeout).await;
        }
    }
}

/// Validates the row read back after the UPDATE.
fn check_row(
    row: Option<(String, i64, i32)>,
    request: StepRequest,
    floor: u64,
) -> Result<Fetched, FetchError> {
    let Some((_, max_id, table_step)) = row else {
        return Err(FetchError::Inconsistent(
            "the row vanished between the UPDATE and the SELECT".into(),
        ));
    };
    let table_step = u32::try_from(table_step)
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| {
            FetchError::Inconsistent(format!("step {table_step} in the table is not positive"))
        })?;
    let step = match request {
        StepRequest::Table => table_step,
        StepRequest::Custom(s) => s,
    };
    let start = max_id - i64::from(step);
    let start = u64::try_from(start).map_err(|_| {
        FetchError::Inconsistent(format!(
            "max_id {max_id} minus step {step} is negative (numbers are never negative)"
        ))
    })?;
    if start < floor {
        return Err(FetchError::MovedBack { start, floor });
    }
    Ok(Fetched {
        range: start..max_id as u64,
        step,
        table_step,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_becomes_leafs_segment() {
        let row = Some(("t".into(), 2001, 1000));
        assert_eq!(
            check_row(row.clone(), StepRequest::Table, 0).unwrap(),
            Fetched {
                range: 1001..2001,
                step: 1000,
                table_step: 1000
            }
        );
        assert_eq!(
            check_row(row, StepRequest::Custom(2000), 0).unwrap().range,
            1..2001
        );
    }

    #[test]
    fn bad_rows_are_refused() {
        let refused = |row, req, floor| match check_row(row, req, floor) {
            Err(FetchError::Inconsistent(m)) => m,
            other => panic!("accepted: {other:?}"),
        };
        assert!(refused(None, StepRequest::Table, 0).contains("vanished"));
        assert!(refused(Some(("t".into(), 10, 0)), StepRequest::Table, 0).contains("step 0"));
        assert!(refused(Some(("t".into(), 5, 10)), StepRequest::Table, 0).contains("negative"));
        assert!(matches!(
            check_row(Some(("t".into(), 2001, 1000)), StepRequest::Table, 3000),
            Err(FetchError::MovedBack {
                start: 1001,
                floor: 3000
            })
        ));
    }
}
