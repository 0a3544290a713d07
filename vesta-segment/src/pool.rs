//! A connection pool to whichever database a [`DbUrl`] names, opened the same way for every
//! user of a database (segment mode here, the SQL machine-ID lease in vesta-embed): one direct
//! connection first, so an unreachable server or bad credentials fail at once with the
//! driver's own reason (a pool would retry a refused connection until its timeout), then a
//! lazy pool whose every acquisition is bounded by the timeout.

use std::path::PathBuf;
use std::time::Duration;

use sqlx::Connection;
#[cfg(feature = "mysql")]
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlSslMode};
#[cfg(feature = "postgres")]
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgSslMode};
#[cfg(feature = "sqlite")]
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqlitePool};

#[cfg(any(feature = "postgres", feature = "mysql"))]
use crate::url::TlsMode;
use crate::url::{DbTarget, DbUrl};

/// A pool on one of the databases this build supports (features `sqlite`, `postgres`,
/// `mysql`). Build one from your own `sqlx` pool with `From` (see `Store::from_pool`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyPool {
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(SqlitePool),
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
    /// MySQL or MariaDB.
    #[cfg(feature = "mysql")]
    MySql(MySqlPool),
}

#[cfg(feature = "sqlite")]
impl From<SqlitePool> for AnyPool {
    fn from(p: SqlitePool) -> Self {
        AnyPool::Sqlite(p)
    }
}

#[cfg(feature = "postgres")]
impl From<PgPool> for AnyPool {
    fn from(p: PgPool) -> Self {
        AnyPool::Postgres(p)
    }
}

#[cfg(feature = "mysql")]
impl From<MySqlPool> for AnyPool {
    fn from(p: MySqlPool) -> Self {
        AnyPool::MySql(p)
    }
}

/// Runs the same body against whichever pool `$pool` (a reference) is; `$p` is `&Pool<DB>` in
/// each arm. Within this crate: the arms follow its features.
macro_rules! on_pool_here {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            #[cfg(feature = "sqlite")]
            $crate::pool::AnyPool::Sqlite($p) => $body,
            #[cfg(feature = "postgres")]
            $crate::pool::AnyPool::Postgres($p) => $body,
            #[cfg(feature = "mysql")]
            $crate::pool::AnyPool::MySql($p) => $body,
        }
    };
}
pub(crate) use on_pool_here;

/// Runs the same body against whichever pool `$pool` (a reference) is; `$p` is `&Pool<DB>` in
/// each arm. For other crates; exists when all three databases are built in.
#[cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
#[macro_export]
macro_rules! on_any_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            $crate::pool::AnyPool::Sqlite($p) => $body,
            $crate::pool::AnyPool::Postgres($p) => $body,
            $crate::pool::AnyPool::MySql($p) => $body,
            // `AnyPool` is non-exhaustive for other crates; this macro exists only when all
            // three of its variants do.
            #[allow(unreachable_patterns)]
            _ => unreachable!("every AnyPool variant is matched above"),
        }
    };
}

impl AnyPool {
    /// Which database this pool is on.
    pub fn kind(&self) -> crate::url::DbKind {
        use crate::url::DbKind;
        match self {
            #[cfg(feature = "sqlite")]
            AnyPool::Sqlite(_) => DbKind::Sqlite,
            #[cfg(feature = "postgres")]
            AnyPool::Postgres(_) => DbKind::Postgres,
            #[cfg(feature = "mysql")]
            AnyPool::MySql(_) => DbKind::MySql,
        }
    }
}

/// Why a pool could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// An `sqlite://` file whose directory does not exist (SQLite's own error would only say
    /// "unable to open database file"): the directory.
    NoDirectory(PathBuf),
    /// An `sqlite://` file that does not exist (and `create` was false).
    NoFile(PathBuf),
    /// The driver's error on the first connection.
    Driver(sqlx::Error),
    /// No answer within the timeout.
    Timeout,
}

/// How a pool is opened.
#[derive(Clone, Copy, Debug)]
pub struct PoolSettings<'a> {
    /// Bound on the first connection and on every later acquisition.
    pub timeout: Duration,
    /// Connections at most.
    pub max_connections: u32,
    /// Create a missing SQLite file.
    pub create: bool,
    /// PostgreSQL's `application_name`.
    pub application: &'a str,
}

fn pool_options<DB: sqlx::Database>(s: &PoolSettings<'_>) -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::new()
        .max_connections(s.max_connections)
        .acquire_timeout(s.timeout)
}

/// Opens a pool on `url`, with the TLS its parameters ask for (feature `tls`).
pub async fn open(url: &DbUrl, settings: PoolSettings<'_>) -> Result<AnyPool, OpenError> {
    let connecting = async {
        Ok::<AnyPool, OpenError>(match url.target() {
            #[cfg(feature = "sqlite")]
            DbTarget::Sqlite(path) => {
                if let Some(dir) = missing_directory(path) {
                    return Err(OpenError::NoDirectory(dir));
                }
                if !settings.create && !path.exists() {
                    return Err(OpenError::NoFile(path.clone()));
                }
                let opts = SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(settings.create)
                    .busy_timeout(settings.timeout);
                let first = SqliteConnection::connect_with(&opts).await;
                first
                    .map_err(OpenError::Driver)?
                    .close()
                    .await
                    .map_err(OpenError::Driver)?;
                AnyPool::Sqlite(pool_options(&settings).connect_lazy_with(opts))
            }
            #[cfg(feature = "postgres")]
            DbTarget::Postgres(a) => {
                let mut opts = PgConnectOptions::new_without_pgpass()
                    .host(&a.host)
                    .port(a.port)
                    .username(&a.user)
                    .database(&a.database)
                    .ssl_mode(match a.tls {
                        TlsMode::Required => PgSslMode::Require,
                        TlsMode::VerifyCa => PgSslMode::VerifyCa,
                        TlsMode::VerifyFull => PgSslMode::VerifyFull,
                        _ => PgSslMode::Disable,
                    })
                    .application_name(settings.application);
                if let Some(pw) = &a.password {
                    opts = opts.password(pw);
                }
                if let Some(ca) = &a.ca {
                    opts = opts.ssl_root_cert(ca);
                }
                let first = PgConnection::connect_with(&opts).await;
                first
                    .map_err(OpenError::Driver)?
                    .close()
                    .await
                    .map_err(OpenError::Driver)?;
                AnyPool::Postgres(pool_options(&settings).connect_lazy_with(opts))
            }
            #[cfg(feature = "mysql")]
            DbTarget::MySql(a) => {
                let mut opts = MySqlConnectOptions::new()
                    .host(&a.host)
                    .port(a.port)
                    .username(&a.user)
                    .database(&a.database)
                    .ssl_mode(match a.tls {
                        TlsMode::Required => MySqlSslMode::Required,
                        TlsMode::VerifyCa => MySqlSslMode::VerifyCa,
                        TlsMode::VerifyFull => MySqlSslMode::VerifyIdentity,
                        _ => MySqlSslMode::Disabled,
                    });
                if let Some(pw) = &a.password {
                    opts = opts.password(pw);
                }
                if let Some(ca) = &a.ca {
                    opts = opts.ssl_ca(ca);
                }
                let first = MySqlConnection::connect_with(&opts).await;
                first
                    .map_err(OpenError::Driver)?
                    .close()
                    .await
                    .map_err(OpenError::Driver)?;
                AnyPool::MySql(pool_options(&settings).connect_lazy_with(opts))
            }
            // `DbUrl::parse` refuses the URL of a database this build leaves out.
            #[allow(unreachable_patterns)]
            _ => {
                return Err(OpenError::Driver(sqlx::Error::Configuration(
                    url.kind().missing_feature().into(),
                )));
            }
        })
    };
    match tokio::time::timeout(settings.timeout, connecting).await {
        Ok(result) => result,
        Err(_) => Err(OpenError::Timeout),
    }
}

/// The directory of an SQLite file when it is not there (a relative file name's is the
/// working directory, always there).
#[cfg(feature = "sqlite")]
fn missing_directory(path: &std::path::Path) -> Option<PathBuf> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    (!dir.is_dir()).then(|| dir.to_owned())
}

impl AnyPool {
    /// Closes every connection, waiting at most `timeout` (a connection stuck in a partition
    /// would otherwise hold the close, and a server's stop, forever).
    pub async fn close_within(&self, timeout: Duration) {
        let closing = async { on_pool_here!(self, p => p.close().await) };
        let _ = tokio::time::timeout(timeout, closing).await;
    }
}
