//! What the sequences' statements write differently per database, said once: placeholders
//! (`?` or PostgreSQL's `$n`), the database's clock in ms, the insert that leaves an existing
//! row alone; and [`PerKind`], which builds a module's statements once per database on first
//! use. `owner.rs` and `seq_cluster.rs` build theirs with it, so a dialect's difference is
//! written here and nowhere else.

use std::sync::OnceLock;

use vesta_segment::DbKind;

/// One database's way of writing what differs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dialect {
    kind: DbKind,
    /// The database's clock in ms since the Unix epoch, as an SQL expression.
    pub now: &'static str,
}

impl Dialect {
    fn new(kind: DbKind) -> Dialect {
        Dialect {
            kind,
            now: kind.now_ms_sql(),
        }
    }

    /// `sql` with its `?` placeholders in the database's style.
    pub fn placeholders(&self, sql: &str) -> String {
        self.kind.placeholders(sql)
    }

    /// `INSERT INTO {into} VALUES {values}` that leaves an existing row (by its key) alone,
    /// placeholders in the database's style.
    pub fn insert_missing(&self, into: &str, values: &str) -> String {
        let sql = match self.kind {
            DbKind::Postgres => {
                format!("INSERT INTO {into} VALUES {values} ON CONFLICT DO NOTHING")
            }
            DbKind::MySql => format!("INSERT IGNORE INTO {into} VALUES {values}"),
            DbKind::Sqlite => format!("INSERT OR IGNORE INTO {into} VALUES {values}"),
        };
        self.placeholders(&sql)
    }
}

/// A module's statements, built by `build` once per database on first use and kept for the
/// process (a `static`).
pub(crate) struct PerKind<T> {
    sqlite: OnceLock<T>,
    postgres: OnceLock<T>,
    mysql: OnceLock<T>,
    build: fn(&Dialect) -> T,
}

impl<T> PerKind<T> {
    /// Statements that `build` writes for a dialect.
    pub const fn new(build: fn(&Dialect) -> T) -> Self {
        PerKind {
            sqlite: OnceLock::new(),
            postgres: OnceLock::new(),
            mysql: OnceLock::new(),
            build,
        }
    }

    /// `kind`'s statements.
    pub fn get(&self, kind: DbKind) -> &T {
        let cell = match kind {
            DbKind::Sqlite => &self.sqlite,
            DbKind::Postgres => &self.postgres,
            DbKind::MySql => &self.mysql,
        };
        cell.get_or_init(|| (self.build)(&Dialect::new(kind)))
    }
}

/// The dialect of `kind`, for a module's tests.
#[cfg(test)]
pub(crate) fn of(kind: DbKind) -> Dialect {
    Dialect::new(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_database_leaves_an_existing_row_alone_its_own_way() {
        let into = "t (a, b)";
        assert_eq!(
            of(DbKind::Postgres).insert_missing(into, "(?, ?)"),
            "INSERT INTO t (a, b) VALUES ($1, $2) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            of(DbKind::MySql).insert_missing(into, "(?, ?)"),
            "INSERT IGNORE INTO t (a, b) VALUES (?, ?)"
        );
        assert_eq!(
            of(DbKind::Sqlite).insert_missing(into, "(?, ?)"),
            "INSERT OR IGNORE INTO t (a, b) VALUES (?, ?)"
        );
    }

    #[test]
    fn statements_are_built_once_per_database() {
        static BUILT: PerKind<String> = PerKind::new(|d| d.placeholders("? ?"));
        let first: *const String = BUILT.get(DbKind::Postgres);
        assert_eq!(BUILT.get(DbKind::Postgres), "$1 $2");
        assert!(std::ptr::eq(first, BUILT.get(DbKind::Postgres)));
        assert_eq!(BUILT.get(DbKind::Sqlite), "? ?");
    }
}
