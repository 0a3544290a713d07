//! Every statement of the lease table per database: placeholders in each dialect's style, the
//! database's own `now`, and the DDL (with the column tables made before it lack).

use std::sync::Arc;

use sqlx::AssertSqlSafe;
use vesta_segment::url::DbKind;

/// The statements for one database (placeholders already in its style). Built only from this
/// module's constants and the database's `now` expression, never from input: safe to run as
/// they are ([`safe`]).
pub(super) struct Statements {
    pub(super) begin: &'static str,
    pub(super) now: Arc<str>,
    pub(super) lock_pool: Arc<str>,
    pub(super) take: Arc<str>,
    pub(super) insert: Arc<str>,
    pub(super) renew: Arc<str>,
    pub(super) release: Arc<str>,
    pub(super) list: Arc<str>,
    pub(super) counted_in: Arc<str>,
    pub(super) retire: Arc<str>,
}

/// A statement of [`Statements`] for sqlx.
pub(super) fn safe(sql: &Arc<str>) -> AssertSqlSafe<Arc<str>> {
    AssertSqlSafe(Arc::clone(sql))
}

pub(super) const DDL: &str = "CREATE TABLE IF NOT EXISTS vesta_machine (
  scope VARCHAR(128) NOT NULL,
  machine_id BIGINT NOT NULL,
  holder VARCHAR(255) NOT NULL DEFAULT '',
  expires_ms BIGINT NOT NULL,
  mark_ms BIGINT NOT NULL DEFAULT 0,
  updated_ms BIGINT NOT NULL,
  counted_in VARCHAR(255) NOT NULL DEFAULT '',
  PRIMARY KEY (scope, machine_id)
)";

pub(super) const PROBE: &str = "SELECT 1 FROM vesta_machine LIMIT 1";

/// Tables made before marks carried what they were counted in lack the column: it is added
/// (empty: such a mark is taken as counted in the layout in force, and rewritten with it).
pub(super) const PROBE_COUNTED_IN: &str = "SELECT counted_in FROM vesta_machine LIMIT 1";
pub(super) const ADD_COUNTED_IN: &str =
    "ALTER TABLE vesta_machine ADD COLUMN counted_in VARCHAR(255) NOT NULL DEFAULT ''";

impl Statements {
    pub(super) fn for_kind(kind: DbKind) -> Statements {
        let now = kind.now_ms_sql();
        let (for_update, begin) = match kind {
            DbKind::Postgres | DbKind::MySql => (" FOR UPDATE", "BEGIN"),
            DbKind::Sqlite => ("", "BEGIN IMMEDIATE"),
        };
        let numbered = |sql: String| -> Arc<str> { kind.placeholders(&sql).into() };
        Statements {
            begin,
            now: format!("SELECT {now}").into(),
            lock_pool: numbered(format!(
                "SELECT machine_id, holder, expires_ms, mark_ms FROM vesta_machine \
                 WHERE scope = ? AND machine_id >= ? AND machine_id <= ? ORDER BY machine_id\
                 {for_update}"
            )),
            take: numbered(
                "UPDATE vesta_machine SET holder = ?, expires_ms = ?, updated_ms = ? \
                 WHERE scope = ? AND machine_id = ? AND expires_ms < ?"
                    .into(),
            ),
            insert: numbered(
                "INSERT INTO vesta_machine (scope, machine_id, holder, expires_ms, mark_ms, \
                 updated_ms) VALUES (?, ?, ?, ?, 0, ?)"
                    .into(),
            ),
            renew: numbered(format!(
                "UPDATE vesta_machine SET expires_ms = {now} + ?, mark_ms = ?, counted_in = ?, \
                 updated_ms = {now} WHERE scope = ? AND machine_id = ? AND holder = ?"
            )),
            release: numbered(format!(
                "UPDATE vesta_machine SET holder = '', expires_ms = 0, mark_ms = ?, \
                 counted_in = ?, updated_ms = {now} WHERE scope = ? AND machine_id = ? AND \
                 holder = ?"
            )),
            counted_in: numbered(
                "SELECT counted_in FROM vesta_machine WHERE scope = ? AND machine_id = ?".into(),
            ),
            retire: numbered(format!(
                "UPDATE vesta_machine SET mark_ms = 0, counted_in = '', updated_ms = {now} \
                 WHERE scope = ? AND machine_id = ? AND (holder = '' OR expires_ms < {now})"
            )),
            list: numbered(format!(
                "SELECT machine_id, holder, expires_ms, mark_ms, updated_ms, {now} \
                 FROM vesta_machine WHERE scope = ? ORDER BY machine_id"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_statements_number_their_placeholders() {
        let s = Statements::for_kind(DbKind::Postgres);
        assert!(s.renew.contains("+ $1, mark_ms = $2"), "{}", s.renew);
        assert!(s.renew.ends_with("holder = $6"), "{}", s.renew);
        assert!(s.lock_pool.ends_with("FOR UPDATE"), "{}", s.lock_pool);
        let s = Statements::for_kind(DbKind::Sqlite);
        assert!(!s.lock_pool.contains("FOR UPDATE"));
        assert_eq!(s.begin, "BEGIN IMMEDIATE");
    }
}
