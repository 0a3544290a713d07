//! The sequences' database: vesta-segment's [`Database`](vesta_segment::Database) (one pool,
//! the URL rules, every round trip bounded and its errors named, as segment mode and the SQL
//! machine-ID lease have them) with the statements of the sequences' own tables: `vesta_seq`
//! ([`seq`]) and the cluster's (`seq_cluster`).

use std::time::Duration;

use vesta_segment::{AnyPool, DbKind, DbUrl, SegmentError, UrlError};

/// Runs the same body against whichever pool `$pool` (a reference) is; `$p` is `&Pool<DB>` in
/// each arm. The arms follow this crate's features; [`Database`] refuses the others at open.
macro_rules! on_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            #[cfg(feature = "sqlite")]
            vesta_segment::AnyPool::Sqlite($p) => $body,
            #[cfg(feature = "postgres")]
            vesta_segment::AnyPool::Postgres($p) => $body,
            #[cfg(feature = "mysql")]
            vesta_segment::AnyPool::MySql($p) => $body,
            // vesta-segment built with a database this crate was not (another crate's feature):
            // `Database::open` and `from_pool` refuse such a pool.
            #[allow(unreachable_patterns)]
            _ => unreachable!("a pool of a database vesta-seq was built without"),
        }
    };
}

// After `on_pool!`, which they use.
pub(crate) mod dialect;
pub(crate) mod owner;
pub(crate) mod seq;
pub(crate) mod seq_cluster;
mod writes;

use writes::{Turn, Writes};

/// A pool on the sequences' database. Opened only for a database this crate was built with.
pub(crate) struct Database {
    db: vesta_segment::Database,
    /// On an SQLite file, the turns of this process's writes (`writes.rs`).
    writes: Option<Writes>,
}

impl Database {
    /// Opens a pool on `url` (`create`: a missing SQLite file is created); `key` is the setting
    /// `timeout` comes from, named when a round trip runs out of it.
    pub(crate) async fn open(
        url: &DbUrl,
        timeout: Duration,
        create: bool,
        key: &'static str,
    ) -> Result<Database, SegmentError> {
        built_in(url.kind(), url)?;
        let db = vesta_segment::Database::open(url, timeout, create, key).await?;
        Ok(Database::on(db))
    }

    /// On a pool the application already has (it stays the application's to close).
    pub(crate) fn from_pool(
        pool: AnyPool,
        timeout: Duration,
        key: &'static str,
    ) -> Result<Database, SegmentError> {
        let kind = pool.kind();
        let db = vesta_segment::Database::from_pool(pool, timeout).timeout_from(key);
        built_in(kind, db.url())?;
        Ok(Database::on(db))
    }

    fn on(db: vesta_segment::Database) -> Database {
        let writes = (db.url().kind() == DbKind::Sqlite).then(Writes::default);
        Database { db, writes }
    }

    /// The URL (its `Display` hides the password).
    pub(crate) fn url(&self) -> &DbUrl {
        self.db.url()
    }

    fn pool(&self) -> &AnyPool {
        self.db.pool()
    }

    /// Runs `op` within the timeout, mapping its errors to [`SegmentError`] naming `action`: a
    /// read (a write goes through [`Database::write`]).
    async fn bounded<T>(
        &self,
        action: impl FnOnce() -> String,
        op: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, SegmentError> {
        self.db.bounded(action, op).await
    }

    /// [`Database::bounded`] for a write: on SQLite in its turn (`writes.rs`), the wait for it
    /// within the timeout.
    async fn write<T>(
        &self,
        action: impl FnOnce() -> String,
        op: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, SegmentError> {
        self.in_turn(false, action, op).await
    }

    /// [`Database::write`] for a lease's write (taking, renewing or ending one): on SQLite
    /// ahead of every write waiting.
    async fn lease_write<T>(
        &self,
        action: impl FnOnce() -> String,
        op: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, SegmentError> {
        self.in_turn(true, action, op).await
    }

    async fn in_turn<T>(
        &self,
        lease: bool,
        action: impl FnOnce() -> String,
        op: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, SegmentError> {
        let turn = async {
            let _turn: Option<Turn<'_>> = match &self.writes {
                Some(w) if lease => Some(w.lease().await),
                Some(w) => Some(w.ordinary().await),
                None => None,
            };
            op.await
        };
        self.db.bounded(action, turn).await
    }

    /// Closes every connection of a pool opened here, within the timeout.
    pub(crate) async fn close(&self) {
        self.db.close().await;
    }
}

/// Ok when this crate was built with `kind`'s feature (vesta-segment may have more, from
/// another crate's features); else the error naming the feature.
fn built_in(kind: DbKind, url: &DbUrl) -> Result<(), SegmentError> {
    let built = match kind {
        DbKind::Sqlite => cfg!(feature = "sqlite"),
        DbKind::Postgres => cfg!(feature = "postgres"),
        DbKind::MySql => cfg!(feature = "mysql"),
    };
    if built {
        return Ok(());
    }
    let scheme = kind.scheme();
    Err(SegmentError::Url(UrlError {
        url: url.to_string(),
        reason: format!("{scheme}:// needs vesta-seq built with its feature `{scheme}`"),
    }))
}
