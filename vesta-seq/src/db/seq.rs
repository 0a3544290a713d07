//! The per-key sequences' table, `vesta_seq`: one row per section, `(kind, section)` → `max_seq`,
//! the highest number any key of the section may have been handed. It only goes up, and only by
//! a compare-and-set from the value this process last read or wrote, so a second process on the
//! same table is detected at its first raise of a section the other one moved, never followed.
//!
//! Meta rows (kind [`META`]) pin the layout of keys over sections (keys per numeric section,
//! buckets of string keys, the first spread key and the spread buckets): a build that grouped
//! keys differently would put a key in a section with another `max_seq`, so it is refused at
//! open instead (`sequences/layout.rs`).

use crate::db::Database;
use vesta_segment::DbKind;
use vesta_segment::SegmentError;

/// `kind` of the rows that pin the key layout.
pub(crate) const META: i16 = 2;

/// Every statement, for one database.
pub(crate) struct SeqSql {
    create_table: &'static str,
    /// Binds kind, section, max_seq; leaves an existing row alone.
    pub(crate) insert_missing: &'static str,
    /// Binds kind, section; reads max_seq, owner.
    read: &'static str,
    /// Binds the new max_seq, the owner, kind, section, the expected max_seq.
    raise: &'static str,
    /// Binds kind, the first section; reads section, max_seq of every row from it on.
    rows_from: &'static str,
}

pub(crate) fn sql(kind: DbKind) -> &'static SeqSql {
    match kind {
        DbKind::Sqlite => &SQLITE,
        DbKind::Postgres => &POSTGRES,
        DbKind::MySql => &MYSQL,
    }
}

static SQLITE: SeqSql = SeqSql {
    create_table: "CREATE TABLE IF NOT EXISTS vesta_seq (
  kind SMALLINT NOT NULL,
  section BIGINT NOT NULL,
  max_seq BIGINT NOT NULL,
  owner BIGINT NOT NULL DEFAULT 0,
  update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (kind, section)
)",
    insert_missing: "INSERT OR IGNORE INTO vesta_seq (kind, section, max_seq) VALUES (?, ?, ?)",
    read: "SELECT max_seq, owner FROM vesta_seq WHERE kind = ? AND section = ?",
    raise: "UPDATE vesta_seq SET max_seq = ?, owner = ?, update_time = CURRENT_TIMESTAMP \
            WHERE kind = ? AND section = ? AND max_seq = ?",
    rows_from: "SELECT section, max_seq FROM vesta_seq WHERE kind = ? AND section >= ?",
};

static POSTGRES: SeqSql = SeqSql {
    create_table: "CREATE TABLE IF NOT EXISTS vesta_seq (
  kind smallint NOT NULL,
  section bigint NOT NULL,
  max_seq bigint NOT NULL,
  owner bigint NOT NULL DEFAULT 0,
  update_time timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (kind, section)
)",
    insert_missing: "INSERT INTO vesta_seq (kind, section, max_seq) VALUES ($1, $2, $3) \
                     ON CONFLICT DO NOTHING",
    read: "SELECT max_seq, owner FROM vesta_seq WHERE kind = $1 AND section = $2",
    raise: "UPDATE vesta_seq SET max_seq = $1, owner = $2, update_time = CURRENT_TIMESTAMP \
            WHERE kind = $3 AND section = $4 AND max_seq = $5",
    rows_from: "SELECT section, max_seq FROM vesta_seq WHERE kind = $1 AND section >= $2",
};

static MYSQL: SeqSql = SeqSql {
    create_table: "CREATE TABLE IF NOT EXISTS `vesta_seq` (
  `kind` smallint NOT NULL,
  `section` bigint NOT NULL,
  `max_seq` bigint NOT NULL,
  `owner` bigint NOT NULL DEFAULT 0,
  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (`kind`, `section`)
) ENGINE=InnoDB",
    insert_missing: "INSERT IGNORE INTO vesta_seq (kind, section, max_seq) VALUES (?, ?, ?)",
    read: "SELECT max_seq, owner FROM vesta_seq WHERE kind = ? AND section = ?",
    raise: "UPDATE vesta_seq SET max_seq = ?, owner = ?, update_time = CURRENT_TIMESTAMP \
            WHERE kind = ? AND section = ? AND max_seq = ?",
    rows_from: "SELECT section, max_seq FROM vesta_seq WHERE kind = ? AND section >= ?",
};

/// What a compare-and-set raise found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cas {
    /// The row held the expected value and now holds the new one.
    Done,
    /// The row held `(max_seq, owner)` instead (`None`: the row is gone). An owner that is the
    /// raiser's own token means an earlier raise of its own, whose answer was lost, did commit.
    Moved(Option<(i64, i64)>),
}

impl Database {
    /// Creates `vesta_seq` unless it exists.
    pub(crate) async fn seq_init(&self) -> Result<(), SegmentError> {
        let ddl = sql(self.url().kind()).create_table;
        self.write(|| "creating table vesta_seq".into(), async {
            on_pool!(self.pool(), p => {
                sqlx::query(ddl).execute(p).await.map(|_| ())
            })
        })
        .await
    }

    /// The section's `max_seq`, its row created with `initial` when missing.
    pub(crate) async fn seq_load(
        &self,
        kind: i16,
        section: i64,
        initial: i64,
    ) -> Result<i64, SegmentError> {
        Ok(self.seq_load_new(kind, section, initial).await?.0)
    }

    /// The section's `max_seq`, and whether this call created its row (with `initial`): a
    /// row created here was never handed a number from, so its keys may start at 0 under it.
    pub(crate) async fn seq_load_new(
        &self,
        kind: i16,
        section: i64,
        initial: i64,
    ) -> Result<(i64, bool), SegmentError> {
        let q = sql(self.url().kind());
        let (created, found): (bool, Option<(i64, i64)>) = self
            .write(
                || format!("loading section {section} (kind {kind}) of vesta_seq"),
                async {
                    on_pool!(self.pool(), p => {
                        let created = sqlx::query(q.insert_missing)
                            .bind(kind)
                            .bind(section)
                            .bind(initial)
                            .execute(p)
                            .await?
                            .rows_affected()
                            == 1;
                        sqlx::query_as(q.read)
                            .bind(kind)
                            .bind(section)
                            .fetch_optional(p)
                            .await
                            .map(|found| (created, found))
                    })
                },
            )
            .await?;
        found
            .map(|(max, _)| (max, created && max == initial))
            .ok_or_else(|| SegmentError::Database {
                db: self.url().to_string(),
                action: format!("loading section {section} (kind {kind}) of vesta_seq"),
                cause: "the row vanished between its INSERT and its SELECT".into(),
            })
    }

    /// Whether [`Database::seq_load_batch`] loads its rows in one transaction (SQLite, which
    /// commits one at a time), rather than one round trip each.
    pub(crate) fn loads_in_one_transaction(&self) -> bool {
        self.url().kind() == DbKind::Sqlite
    }

    /// [`Database::seq_load_new`] for many sections, in the order given. On SQLite in one
    /// transaction: it writes one transaction at a time, each a sync, so sections loaded
    /// together cost one. On PostgreSQL and MySQL one statement at a time, each committed: a
    /// transaction left open by a server cut off mid-batch would hold its new rows' locks
    /// against the other servers of a cluster until the database noticed.
    pub(crate) async fn seq_load_batch(
        &self,
        rows: &[(i16, i64)],
        initial: i64,
    ) -> Result<Vec<(i64, bool)>, SegmentError> {
        if !self.loads_in_one_transaction() {
            let mut loaded = Vec::with_capacity(rows.len());
            for (kind, section) in rows {
                loaded.push(self.seq_load_new(*kind, *section, initial).await?);
            }
            return Ok(loaded);
        }
        let q = sql(self.url().kind());
        let found: Vec<(bool, Option<(i64, i64)>)> = self
            .write(
                || format!("loading {} sections of vesta_seq", rows.len()),
                async {
                    on_pool!(self.pool(), p => {
                        let mut tx = p.begin().await?;
                        let mut created = Vec::with_capacity(rows.len());
                        for (kind, section) in rows {
                            let r = sqlx::query(q.insert_missing)
                                .bind(kind)
                                .bind(section)
                                .bind(initial)
                                .execute(&mut *tx)
                                .await?;
                            created.push(r.rows_affected() == 1);
                        }
                        let mut found = Vec::with_capacity(rows.len());
                        for ((kind, section), created) in rows.iter().zip(created) {
                            let row: Option<(i64, i64)> = sqlx::query_as(q.read)
                                .bind(kind)
                                .bind(section)
                                .fetch_optional(&mut *tx)
                                .await?;
                            found.push((created, row));
                        }
                        tx.commit().await?;
                        Ok::<_, sqlx::Error>(found)
                    })
                },
            )
            .await?;
        found
            .into_iter()
            .zip(rows)
            .map(|((created, row), (kind, section))| {
                row.map(|(max, _)| (max, created && max == initial))
                    .ok_or_else(|| SegmentError::Database {
                        db: self.url().to_string(),
                        action: format!("loading section {section} (kind {kind}) of vesta_seq"),
                        cause: "the row vanished between its INSERT and its SELECT".into(),
                    })
            })
            .collect()
    }

    /// Sets the section's `max_seq` to `to`, and its owner to `owner` (the raiser's token), if
    /// it still holds `from`.
    pub(crate) async fn seq_raise(
        &self,
        kind: i16,
        section: i64,
        from: i64,
        to: i64,
        owner: i64,
    ) -> Result<Cas, SegmentError> {
        let q = sql(self.url().kind());
        let action = || format!("raising section {section} (kind {kind}) of vesta_seq to {to}");
        let affected = self
            .write(action, async {
                on_pool!(self.pool(), p => {
                    sqlx::query(q.raise)
                        .bind(to)
                        .bind(owner)
                        .bind(kind)
                        .bind(section)
                        .bind(from)
                        .execute(p)
                        .await
                        .map(|r| r.rows_affected())
                })
            })
            .await?;
        if affected == 1 {
            return Ok(Cas::Done);
        }
        Ok(Cas::Moved(self.seq_read(kind, section, action).await?))
    }

    /// `(section, max_seq)` of every row of `kind` from section `from` on (a read only).
    pub(crate) async fn seq_rows_from(
        &self,
        kind: i16,
        from: i64,
    ) -> Result<Vec<(i64, i64)>, SegmentError> {
        let q = sql(self.url().kind()).rows_from;
        self.bounded(
            || format!("reading the sections of kind {kind} from {from} on in vesta_seq"),
            async {
                on_pool!(self.pool(), p => {
                    sqlx::query_as(q).bind(kind).bind(from).fetch_all(p).await
                })
            },
        )
        .await
    }

    /// The section's row: `(max_seq, owner)`, if there is one (a read only: nothing created).
    pub(crate) async fn seq_read(
        &self,
        kind: i16,
        section: i64,
        action: impl FnOnce() -> String,
    ) -> Result<Option<(i64, i64)>, SegmentError> {
        let read = sql(self.url().kind()).read;
        self.bounded(action, async {
            on_pool!(self.pool(), p => {
                sqlx::query_as(read)
                    .bind(kind)
                    .bind(section)
                    .fetch_optional(p)
                    .await
            })
        })
        .await
    }
}
