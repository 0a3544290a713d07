//! Who owns the table, in the table's own database (docs/seq.md, "One owner per table"):
//!
//! - `vesta_seq_store` keeps the store's name (`id`, drawn once at random: the table's
//!   identity, the key of what a host remembers of it) and how it is served (`mode`,
//!   `standalone` or `cluster <coordination>`), recorded by the first server and changed only
//!   by compare-and-set (`vesta seq mode --set`);
//! - the **table's lease** is the row `member = -1` of `vesta_seq_member`, the cluster's member
//!   leases' table, taken, renewed and ended by the same statements as a member's lease (by the
//!   database's clock; renewed only while unexpired). A standalone server holds it for as long
//!   as it serves, a `vesta seq` run on the table for its run; members never take it (the
//!   members' reads skip it).
//! - `vesta_seq` itself, read and raised whole by the restore guard's check and its recovery
//!   (`vesta seq raise`): a raise here only ever moves a row up.

use crate::db::Database;
use crate::db::dialect::{Dialect, PerKind};
use crate::db::seq_cluster::cluster_statements;
use vesta_segment::DbKind;
use vesta_segment::SegmentError;

/// The row of `vesta_seq_member` that is the table's lease.
pub(crate) const TABLE_ROW: i64 = -1;

/// The table lease's row as read, with the database's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaseRow {
    /// The incarnation holding it (`''`: none).
    pub holder: String,
    /// Its TCP and REST addresses (`''`: none).
    pub tcp: String,
    pub rest: String,
    /// When its lease runs out, and when it was last written (ms, the database's clock).
    pub expires_ms: i64,
    pub updated_ms: i64,
    /// The database's clock at the read.
    pub now_ms: i64,
}

impl LeaseRow {
    /// Whether a lease runs at the read.
    pub(crate) fn live(&self) -> bool {
        !self.holder.is_empty() && self.expires_ms >= self.now_ms
    }
}

/// The statements of `vesta_seq_store` and of `vesta_seq` read and raised whole (the table
/// lease's are `vesta_seq_member`'s, in `seq_cluster.rs`).
struct OwnerSql {
    create_store: &'static str,
    insert_item: String,
    read_item: String,
    /// Binds the new value, the item, the expected value.
    swap_item: String,
    /// Every row but the meta rows: kinds 0 (numeric sections), 1 (string buckets) and 3 (spread
    /// buckets).
    rows: &'static str,
    /// Binds to, kind, section, to: never lowers.
    raise_to: String,
}

static STATEMENTS: PerKind<OwnerSql> = PerKind::new(OwnerSql::build);

fn statements(kind: DbKind) -> &'static OwnerSql {
    STATEMENTS.get(kind)
}

impl OwnerSql {
    fn build(d: &Dialect) -> OwnerSql {
        OwnerSql {
            create_store: "CREATE TABLE IF NOT EXISTS vesta_seq_store (
  item VARCHAR(64) NOT NULL PRIMARY KEY,
  val VARCHAR(255) NOT NULL
)",
            insert_item: d.insert_missing("vesta_seq_store (item, val)", "(?, ?)"),
            read_item: d.placeholders("SELECT val FROM vesta_seq_store WHERE item = ?"),
            swap_item: d
                .placeholders("UPDATE vesta_seq_store SET val = ? WHERE item = ? AND val = ?"),
            // Every row but the meta rows (kind 2, `db::seq::META`).
            rows: "SELECT kind, section, max_seq FROM vesta_seq WHERE kind <> 2 \
                   ORDER BY kind, section",
            raise_to: d.placeholders(
                "UPDATE vesta_seq SET max_seq = ?, update_time = CURRENT_TIMESTAMP \
                 WHERE kind = ? AND section = ? AND max_seq < ?",
            ),
        }
    }
}

/// A lease row as read: holder, tcp, rest, expires_ms, updated_ms, now.
type RawLease = (String, String, String, i64, i64, i64);

impl Database {
    /// Creates `vesta_seq_store` and `vesta_seq_member` unless they exist, and the store's
    /// name (`candidate` unless one was drawn before); the name.
    pub(crate) async fn owner_init(&self, candidate: &str) -> Result<String, SegmentError> {
        let q = statements(self.url().kind());
        self.members_init().await?;
        self.write(|| "creating the table vesta_seq_store".into(), async {
            on_pool!(self.pool(), p => {
                sqlx::query(q.create_store).execute(p).await.map(|_| ())
            })
        })
        .await?;
        self.store_item("id", candidate).await
    }

    /// The store's `item`: `value` if it had none (written now), else the one it has.
    pub(crate) async fn store_item(&self, item: &str, value: &str) -> Result<String, SegmentError> {
        let q = statements(self.url().kind());
        self.write(
            || format!("reading the store's {item} (vesta_seq_store)"),
            async {
                on_pool!(self.pool(), p => {
                    sqlx::query(q.insert_item.as_str()).bind(item).bind(value).execute(p).await?;
                    let (val,): (String,) =
                        sqlx::query_as(q.read_item.as_str()).bind(item).fetch_one(p).await?;
                    Ok(val)
                })
            },
        )
        .await
    }

    /// The store's `item`, if it has one (a read only).
    pub(crate) async fn store_item_read(&self, item: &str) -> Result<Option<String>, SegmentError> {
        let q = statements(self.url().kind());
        self.bounded(
            || format!("reading the store's {item} (vesta_seq_store)"),
            async {
                on_pool!(self.pool(), p => {
                    let row: Option<(String,)> =
                        sqlx::query_as(q.read_item.as_str()).bind(item).fetch_optional(p).await?;
                    Ok(row.map(|r| r.0))
                })
            },
        )
        .await
    }

    /// Sets the store's `item` to `to` if it holds `from` (inserted when it has none);
    /// whether it did.
    pub(crate) async fn store_item_swap(
        &self,
        item: &str,
        from: Option<&str>,
        to: &str,
    ) -> Result<bool, SegmentError> {
        let q = statements(self.url().kind());
        self.write(
            || format!("changing the store's {item} (vesta_seq_store)"),
            async {
                on_pool!(self.pool(), p => {
                    let changed = match from {
                        Some(from) => sqlx::query(q.swap_item.as_str())
                            .bind(to)
                            .bind(item)
                            .bind(from)
                            .execute(p)
                            .await?
                            .rows_affected(),
                        None => sqlx::query(q.insert_item.as_str())
                            .bind(item)
                            .bind(to)
                            .execute(p)
                            .await?
                            .rows_affected(),
                    };
                    Ok(changed == 1)
                })
            },
        )
        .await
    }

    /// The table lease's row (`None`: never taken).
    pub(crate) async fn owner_read(&self) -> Result<Option<LeaseRow>, SegmentError> {
        let q = cluster_statements(self.url().kind());
        let row: Option<RawLease> = self
            .bounded(
                || "reading the table's lease (vesta_seq_member)".into(),
                async {
                    on_pool!(self.pool(), p => {
                        sqlx::query_as(q.read_table_lease.as_str()).fetch_optional(p).await
                    })
                },
            )
            .await?;
        Ok(row.map(
            |(holder, tcp, rest, expires_ms, updated_ms, now_ms)| LeaseRow {
                holder,
                tcp,
                rest,
                expires_ms,
                updated_ms,
                now_ms,
            },
        ))
    }

    /// Takes the table's lease from `gone`, a holder known to have ended (its host's kernel
    /// released its claim), before its lease runs out; whether it was still `gone`'s.
    pub(crate) async fn owner_take_from(
        &self,
        gone: &str,
        holder: &str,
        tcp: &str,
        rest: &str,
        ttl_ms: i64,
    ) -> Result<bool, SegmentError> {
        let q = cluster_statements(self.url().kind());
        let changed = self
            .lease_write(
                || "taking the table's lease (vesta_seq_member)".into(),
                async {
                    on_pool!(self.pool(), p => {
                        sqlx::query(q.take_table_lease_from.as_str())
                            .bind(holder)
                            .bind(tcp)
                            .bind(rest)
                            .bind(ttl_ms)
                            .bind(gone)
                            .execute(p)
                            .await
                            .map(|r| r.rows_affected())
                    })
                },
            )
            .await?;
        Ok(changed == 1)
    }

    /// Every row of `vesta_seq` but the meta rows: `(kind, section, max_seq)`.
    pub(crate) async fn seq_rows(&self) -> Result<Vec<(i16, i64, i64)>, SegmentError> {
        let q = statements(self.url().kind());
        self.bounded(|| "reading every row of vesta_seq".into(), async {
            on_pool!(self.pool(), p => {
                sqlx::query_as(q.rows).fetch_all(p).await
            })
        })
        .await
    }

    /// Raises the row `(kind, section)` to `to` if it is below (a missing row is made at
    /// `to`); whether it changed.
    pub(crate) async fn seq_raise_to(
        &self,
        kind: i16,
        section: i64,
        to: i64,
    ) -> Result<bool, SegmentError> {
        let q = statements(self.url().kind());
        // The row made when missing, as a section's first load makes it.
        let insert_missing = super::seq::sql(self.url().kind()).insert_missing;
        self.write(
            || format!("raising section {section} (kind {kind}) of vesta_seq to {to}"),
            async {
                on_pool!(self.pool(), p => {
                    let made = sqlx::query(insert_missing)
                        .bind(kind)
                        .bind(section)
                        .bind(to)
                        .execute(p)
                        .await?
                        .rows_affected();
                    let raised = sqlx::query(q.raise_to.as_str())
                        .bind(to)
                        .bind(kind)
                        .bind(section)
                        .bind(to)
                        .execute(p)
                        .await?
                        .rows_affected();
                    Ok(made + raised > 0)
                })
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::dialect;

    #[test]
    fn postgres_statements_number_their_placeholders() {
        let q = OwnerSql::build(&dialect::of(DbKind::Postgres));
        assert!(
            q.swap_item
                .contains("val = $1 WHERE item = $2 AND val = $3")
        );
        assert!(q.read_item.ends_with("item = $1"), "{}", q.read_item);
        assert!(q.raise_to.contains("max_seq = $1") && q.raise_to.contains("max_seq < $4"));
        let q = OwnerSql::build(&dialect::of(DbKind::MySql));
        assert!(q.insert_item.starts_with("INSERT IGNORE INTO"));
    }
}
