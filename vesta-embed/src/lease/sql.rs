//! The SQL lease store (`[machine] source = "sql"`): a `vesta_machine` table in PostgreSQL,
//! MySQL/MariaDB or SQLite, one row per machine ID of a scope, saying who holds it, until when
//! (by the database's clock) and the mark its holders promised.
//!
//! - **Claim**: one transaction reads the pool's rows locked (`FOR UPDATE`; SQLite: `BEGIN
//!   IMMEDIATE`) with the database's `now`, takes the preferred ID if free, else the lowest whose
//!   lease expired, else the lowest never used (an INSERT; a unique violation from a racing
//!   claimer is retried). Expiry is decided by comparing with the database's own clock, never
//!   with this host's.
//! - **Renew**: `UPDATE ... SET expires_ms = <db now> + lease_ms, mark_ms = ? WHERE ... AND
//!   holder = ?`: one row means still ours; none means another holder took it.
//! - **Release**: the final mark, the holder cleared and the lease expired, so the next claimer
//!   takes it at once and waits out the mark.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use sqlx::AssertSqlSafe;
use vesta_segment::pool::{self, AnyPool, OpenError, PoolSettings};
use vesta_segment::url::{DbKind, DbUrl};

use super::counted_in::CountedIn;
use crate::config::{ConfigError, IssuerConfig, MachineSource};

/// The longest scope name.
const MAX_SCOPE_LEN: usize = 128;

/// How many times a claim is retried after losing an INSERT race.
const CLAIM_ATTEMPTS: u32 = 20;

/// Everything an SQL lease needs, checked and converted from [`IssuerConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlSettings {
    /// The database (its `Display` hides the password).
    pub db: DbUrl,
    /// The namespace of the leases in the table.
    pub scope: String,
    /// How long a lease lasts without renewal (database clock).
    pub lease: Duration,
    /// Bound on connecting and on each statement.
    pub timeout: Duration,
    /// The longest the start guard waits for the clock to pass the mark.
    pub start_guard_max_wait: Duration,
    /// `embed` or `server`.
    pub pool_name: &'static str,
    /// The machine IDs this issuer may lease.
    pub pool: RangeInclusive<u64>,
    /// A static machine ID registered in the table (`source = "static"` with `machine.db`):
    /// only this ID is claimed, and a live holder of it refuses the start.
    pub fixed: Option<u64>,
}

impl SqlSettings {
    /// Checks the `[machine]` keys of an SQL lease (`source = "sql"`, or a static ID with
    /// `machine.db`, which registers it) and picks the pool of the genMethod.
    pub fn from_config(config: &IssuerConfig) -> Result<Self, ConfigError> {
        let m = &config.machine;
        let bad = |msg: String| Err(ConfigError::Inconsistent(msg));
        let fixed = match m.source {
            MachineSource::Sql => None,
            MachineSource::Static | MachineSource::Ordinal if m.db.is_some() => {
                Some(config.static_machine()?)
            }
            _ => return bad("machine.source is not \"sql\" and machine.db is not set".into()),
        };
        let Some(db) = m.db.as_deref() else {
            return bad("machine.source = \"sql\" needs machine.db: sqlite://PATH, \
                 postgres://USER[:PASS]@HOST:PORT/DB or mysql://USER[:PASS]@HOST:PORT/DB"
                .into());
        };
        let db =
            DbUrl::parse(db).map_err(|e| ConfigError::Inconsistent(format!("machine.db: {e}")))?;
        if m.scope.is_empty()
            || m.scope.len() > MAX_SCOPE_LEN
            || !m
                .scope
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._:/-".contains(c))
        {
            return bad(format!(
                "machine.scope {:?} is not valid: 1-{MAX_SCOPE_LEN} characters of A-Z a-z 0-9 \
                 . _ : / -",
                m.scope
            ));
        }
        if m.lease_ms < 300 {
            return bad(format!(
                "machine.lease_ms {} is too small: at least 300",
                m.lease_ms
            ));
        }
        if m.db_timeout_ms == 0 {
            return bad("machine.db_timeout_ms 0 is too small: at least 1".into());
        }
        if let Some(path) = &m.state_file {
            return bad(format!(
                "machine.state_file {} is set but the machine ID is leased from machine.db, \
                 which keeps the mark: remove machine.state_file",
                path.display()
            ));
        }
        let (pool_name, pool) = config
            .pools()?
            .for_gen_method(config.gen_method)
            .map_err(vesta_core::ConfigError::from)?;
        Ok(SqlSettings {
            db,
            scope: m.scope.clone(),
            lease: Duration::from_millis(m.lease_ms),
            timeout: Duration::from_millis(m.db_timeout_ms),
            start_guard_max_wait: config.start_guard_max_wait(),
            pool_name,
            pool,
            fixed,
        })
    }
}

/// One row of `vesta_machine`, for `vesta machine ls`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MachineRow {
    /// The machine ID.
    pub machine: u64,
    /// `host:pid:started` of the holder; empty once released.
    pub holder: String,
    /// Lease left by the database's clock, ms (0 when expired or released).
    pub lease_left_ms: u64,
    /// The highest time any holder promised not to pass (ms since the Unix epoch).
    pub mark_ms: u64,
    /// When the row was last written (database clock, ms since the Unix epoch).
    pub updated_ms: u64,
}

/// Runs the same body against whichever pool this is.
macro_rules! on_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        vesta_segment::on_any_pool!($pool, $p => $body)
    };
}

/// The statements for one database (placeholders already in its style). Built only from this
/// module's constants and the database's `now` expression, never from input: safe to run as
/// they are ([`safe`]).
struct Statements {
    begin: &'static str,
    now: Arc<str>,
    lock_pool: Arc<str>,
    take: Arc<str>,
    insert: Arc<str>,
    renew: Arc<str>,
    release: Arc<str>,
    list: Arc<str>,
    counted_in: Arc<str>,
    retire: Arc<str>,
}

/// `sql` with its `?` placeholders in the database's style: PostgreSQL numbers them (`$1`...).
fn placeholders(kind: DbKind, sql: &str) -> String {
    if kind != DbKind::Postgres {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A statement of [`Statements`] for sqlx.
fn safe(sql: &Arc<str>) -> AssertSqlSafe<Arc<str>> {
    AssertSqlSafe(Arc::clone(sql))
}

const DDL: &str = "CREATE TABLE IF NOT EXISTS vesta_machine (
  scope VARCHAR(128) NOT NULL,
  machine_id BIGINT NOT NULL,
  holder VARCHAR(255) NOT NULL DEFAULT '',
  expires_ms BIGINT NOT NULL,
  mark_ms BIGINT NOT NULL DEFAULT 0,
  updated_ms BIGINT NOT NULL,
  counted_in VARCHAR(255) NOT NULL DEFAULT '',
  PRIMARY KEY (scope, machine_id)
)";

const PROBE: &str = "SELECT 1 FROM vesta_machine LIMIT 1";

/// Tables made before marks carried what they were counted in lack the column: it is added
/// (empty: such a mark is taken as counted in the layout in force, and rewritten with it).
const PROBE_COUNTED_IN: &str = "SELECT counted_in FROM vesta_machine LIMIT 1";
const ADD_COUNTED_IN: &str =
    "ALTER TABLE vesta_machine ADD COLUMN counted_in VARCHAR(255) NOT NULL DEFAULT ''";

impl Statements {
    fn for_kind(kind: DbKind) -> Statements {
        let (now, for_update, begin) = match kind {
            DbKind::Postgres => (
                "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
                " FOR UPDATE",
                "BEGIN",
            ),
            DbKind::MySql => (
                "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
                " FOR UPDATE",
                "BEGIN",
            ),
            DbKind::Sqlite => (
                "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
                "",
                "BEGIN IMMEDIATE",
            ),
        };
        let numbered = |sql: String| -> Arc<str> { placeholders(kind, &sql).into() };
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

/// A machine ID just claimed, and the mark its earlier holders left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claimed {
    pub machine: u64,
    pub mark_ms: u64,
}

/// A connection pool to the lease table of one scope.
pub struct SqlLease {
    pool: AnyPool,
    sql: Statements,
    settings: SqlSettings,
}

impl std::fmt::Debug for SqlLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SqlLease({}, scope {})",
            self.settings.db, self.settings.scope
        )
    }
}

/// The driver's error as one line.
fn driver_message(e: &sqlx::Error) -> String {
    let text = match e {
        sqlx::Error::Database(db) => db.message().to_owned(),
        sqlx::Error::PoolTimedOut => "no connection could be made in time".into(),
        other => other.to_string(),
    };
    text.replace('\n', " ")
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db)
        if db.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

/// A claim that lost to a concurrent one and may simply be tried again: a unique violation
/// (both inserted one ID), a deadlock or a serialization failure (SQLSTATE 40001, 40P01;
/// InnoDB's gap locks make two claimers' range locks and inserts deadlock).
fn is_lost_race(e: &sqlx::Error) -> bool {
    is_unique_violation(e)
        || matches!(e, sqlx::Error::Database(db)
            if matches!(db.code().as_deref(), Some("40001" | "40P01")))
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl SqlLease {
    /// Connects (one connection first, so an unreachable or refusing database fails within
    /// `machine.db_timeout_ms` with its reason) and creates the table if it is missing (an
    /// SQLite file too).
    pub async fn connect(settings: &SqlSettings) -> Result<SqlLease, String> {
        Self::open(settings, true).await
    }

    /// Like [`SqlLease::connect`], but creates nothing: a missing table or SQLite file is an
    /// error (for `vesta machine ls`).
    pub async fn connect_existing(settings: &SqlSettings) -> Result<SqlLease, String> {
        Self::open(settings, false).await
    }

    async fn open(settings: &SqlSettings, create: bool) -> Result<SqlLease, String> {
        let (timeout, db) = (settings.timeout, &settings.db);
        let opening = PoolSettings {
            timeout,
            max_connections: 2,
            create,
            application: "vesta-lease",
        };
        let pool = match pool::open(db, opening).await {
            Ok(pool) => pool,
            Err(OpenError::NoFile(path)) => {
                return Err(format!(
                    "machine.db {db}: connecting: the file {} does not exist",
                    path.display()
                ));
            }
            Err(OpenError::Driver(e)) => {
                return Err(format!(
                    "machine.db {db}: connecting: {}",
                    driver_message(&e)
                ));
            }
            Err(OpenError::Timeout) => {
                return Err(format!(
                    "machine.db {db}: connecting: no answer within {} ms (machine.db_timeout_ms)",
                    timeout.as_millis()
                ));
            }
        };
        let lease = SqlLease {
            pool,
            sql: Statements::for_kind(db.kind()),
            settings: settings.clone(),
        };
        if create {
            lease.ensure_table().await?;
        } else {
            let probe = async {
                on_pool!(&lease.pool, p => sqlx::query(PROBE).fetch_optional(p).await.map(|_| ()))
            };
            lease
                .bounded("reading vesta_machine", probe)
                .await
                .map_err(|e| {
                    format!("{e} (the table is created by the first issuer that leases from it)")
                })?;
        }
        Ok(lease)
    }

    /// The settings.
    pub fn settings(&self) -> &SqlSettings {
        &self.settings
    }

    /// Runs `op` within the timeout; errors name the database and `action`.
    async fn bounded<T>(
        &self,
        action: &str,
        op: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.settings.timeout, op).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(format!(
                "machine.db {}: {action}: {}",
                self.settings.db,
                driver_message(&e)
            )),
            Err(_) => Err(format!(
                "machine.db {}: {action}: no answer within {} ms (machine.db_timeout_ms)",
                self.settings.db,
                self.settings.timeout.as_millis()
            )),
        }
    }

    /// Creates `vesta_machine` unless it exists, and adds the `counted_in` column to a table
    /// made before it (two processes doing either at once is fine: the loser finds it made).
    async fn ensure_table(&self) -> Result<(), String> {
        self.make_until(PROBE, DDL, "creating table vesta_machine")
            .await?;
        self.make_until(
            PROBE_COUNTED_IN,
            ADD_COUNTED_IN,
            "adding the column counted_in to vesta_machine",
        )
        .await
    }

    /// Runs `make` unless `probe` already works (two processes making it at once is fine: the
    /// loser finds it made).
    async fn make_until(
        &self,
        probe: &'static str,
        make: &'static str,
        action: &str,
    ) -> Result<(), String> {
        let probing = || async {
            on_pool!(&self.pool, p => sqlx::query(probe).fetch_optional(p).await.map(|_| ()))
        };
        if self
            .bounded("reading vesta_machine", probing())
            .await
            .is_ok()
        {
            return Ok(());
        }
        let making =
            async { on_pool!(&self.pool, p => sqlx::query(make).execute(p).await.map(|_| ())) };
        let made = self.bounded(action, making).await;
        match (made, self.bounded("reading vesta_machine", probing()).await) {
            (_, Ok(_)) => Ok(()),
            (Err(e), Err(_)) | (Ok(_), Err(e)) => Err(e),
        }
    }

    /// What the mark of `machine` was counted in (`None`: no row, an empty column).
    pub(crate) async fn counted_in(&self, machine: u64) -> Result<Option<CountedIn>, String> {
        let s = &self.settings;
        let reading = async {
            on_pool!(&self.pool, p => {
                sqlx::query_scalar::<_, String>(safe(&self.sql.counted_in))
                    .bind(&s.scope)
                    .bind(to_i64(machine))
                    .fetch_optional(p)
                    .await
            })
        };
        let text = self.bounded("reading a mark", reading).await?;
        Ok(text.as_deref().and_then(CountedIn::decode))
    }

    /// Retires the mark of `machine` (`vesta machine retire`): its next holder starts as if
    /// none had been left. Refused while the ID is held; `Ok(false)` if it has no row.
    pub async fn retire(&self, machine: u64) -> Result<bool, String> {
        let s = &self.settings;
        let retiring = async {
            on_pool!(&self.pool, p => {
                sqlx::query(safe(&self.sql.retire))
                    .bind(&s.scope)
                    .bind(to_i64(machine))
                    .execute(p)
                    .await
                    .map(|r| r.rows_affected() == 1)
            })
        };
        if self.bounded("retiring a mark", retiring).await? {
            return Ok(true);
        }
        let rows = self.list().await?;
        match rows.iter().find(|r| r.machine == machine) {
            Some(row) => Err(format!(
                "machine {machine} is held by {} in {} scope {:?} for another {} ms: stop it \
                 first",
                row.holder, s.db, s.scope, row.lease_left_ms
            )),
            None => Ok(false),
        }
    }

    /// Claims a machine ID for `holder`: `preferred` if free, else the lowest free one.
    pub(crate) async fn claim(
        &self,
        holder: &str,
        preferred: Option<u64>,
    ) -> Result<Claimed, String> {
        for attempt in 1..=CLAIM_ATTEMPTS {
            match self.try_claim(holder, preferred).await? {
                Some(claimed) => return Ok(claimed),
                // Lost a race with another claimer: read the pool again, a little later each
                // time (at most about 2 s in all).
                None => tokio::time::sleep(Duration::from_millis(10) * attempt).await,
            }
        }
        Err(format!(
            "machine.db {}: claiming a machine ID in scope {:?}: lost {CLAIM_ATTEMPTS} races \
             with other claimers in a row",
            self.settings.db, self.settings.scope
        ))
    }

    /// One claim transaction; `None` when a racing claimer inserted the chosen ID first.
    async fn try_claim(
        &self,
        holder: &str,
        preferred: Option<u64>,
    ) -> Result<Option<Claimed>, String> {
        let s = &self.settings;
        let (lo, hi) = (to_i64(*s.pool.start()), to_i64(*s.pool.end()));
        let lease_ms = to_i64(s.lease.as_millis() as u64);
        let sql = &self.sql;
        let claiming = async {
            on_pool!(&self.pool, p => {
                let mut tx = p.begin_with(sql.begin).await?;
                let now: i64 = sqlx::query_scalar(safe(&sql.now)).fetch_one(&mut *tx).await?;
                let rows: Vec<(i64, String, i64, i64)> = sqlx::query_as(safe(&sql.lock_pool))
                    .bind(&s.scope)
                    .bind(lo)
                    .bind(hi)
                    .fetch_all(&mut *tx)
                    .await?;
                let choice = match s.fixed {
                    Some(id) => choose_fixed(&rows, now, to_i64(id)),
                    None => choose(&rows, now, lo, hi, preferred.map(to_i64)).ok_or(None),
                };
                let choice = match choice {
                    Ok(choice) => choice,
                    Err(held_by) => {
                        tx.rollback().await?;
                        return Ok(Err(held_by));
                    }
                };
                let expires = now.saturating_add(lease_ms);
                let written = match choice {
                    Choice::Expired { machine, .. } => sqlx::query(safe(&sql.take))
                        .bind(holder)
                        .bind(expires)
                        .bind(now)
                        .bind(&s.scope)
                        .bind(machine)
                        .bind(now)
                        .execute(&mut *tx)
                        .await
                        .map(|r| r.rows_affected() == 1),
                    Choice::Unused { machine } => sqlx::query(safe(&sql.insert))
                        .bind(&s.scope)
                        .bind(machine)
                        .bind(holder)
                        .bind(expires)
                        .bind(now)
                        .execute(&mut *tx)
                        .await
                        .map(|r| r.rows_affected() == 1),
                };
                match written {
                    Ok(true) => {
                        tx.commit().await?;
                        Ok(Ok(Some(choice.claimed())))
                    }
                    Ok(false) => {
                        tx.rollback().await?;
                        Ok(Ok(None))
                    }
                    Err(e) => Err(e),
                }
            })
        };
        // A transaction that lost a race is rolled back as it is dropped; read the pool again.
        let claiming = async {
            match claiming.await {
                Err(e) if is_lost_race(&e) => Ok(Ok(None)),
                other => other,
            }
        };
        match self.bounded("claiming a machine ID", claiming).await? {
            Ok(claimed) => Ok(claimed),
            Err(Some((holder, left_ms))) => Err(format!(
                "machine {} is held by {holder} in {} scope {:?} for another {left_ms} ms: \
                 another issuer runs with this static machine ID; give each its own \
                 machine.id (vesta machine ls shows the holders)",
                s.fixed.unwrap_or_default(),
                s.db,
                s.scope
            )),
            Err(None) => Err(format!(
                "machine.db {}: every machine ID of the {} pool {}..={} in scope {:?} is held \
                 (vesta machine ls shows by whom)",
                s.db,
                s.pool_name,
                s.pool.start(),
                s.pool.end(),
                s.scope
            )),
        }
    }

    /// Extends the lease of `machine` and records `mark_ms`; `Ok(false)` when the row is no
    /// longer `holder`'s.
    pub(crate) async fn renew(
        &self,
        holder: &str,
        machine: u64,
        (mark_ms, counted_in): (u64, &str),
        timeout: Duration,
    ) -> Result<bool, String> {
        let s = &self.settings;
        let renewing = async {
            on_pool!(&self.pool, p => {
                sqlx::query(safe(&self.sql.renew))
                    .bind(to_i64(s.lease.as_millis() as u64))
                    .bind(to_i64(mark_ms))
                    .bind(counted_in)
                    .bind(&s.scope)
                    .bind(to_i64(machine))
                    .bind(holder)
                    .execute(p)
                    .await
                    .map(|r| r.rows_affected() == 1)
            })
        };
        match tokio::time::timeout(timeout, self.bounded("renewing the lease", renewing)).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "machine.db {}: renewing the lease: no answer within {} ms",
                s.db,
                timeout.as_millis()
            )),
        }
    }

    /// Writes the final mark and frees `machine` (if still `holder`'s).
    pub(crate) async fn release(
        &self,
        holder: &str,
        machine: u64,
        (mark_ms, counted_in): (u64, &str),
    ) -> Result<bool, String> {
        let s = &self.settings;
        let releasing = async {
            on_pool!(&self.pool, p => {
                sqlx::query(safe(&self.sql.release))
                    .bind(to_i64(mark_ms))
                    .bind(counted_in)
                    .bind(&s.scope)
                    .bind(to_i64(machine))
                    .bind(holder)
                    .execute(p)
                    .await
                    .map(|r| r.rows_affected() == 1)
            })
        };
        self.bounded("releasing the lease", releasing).await
    }

    /// Every row of the scope, by machine ID.
    pub async fn list(&self) -> Result<Vec<MachineRow>, String> {
        let s = &self.settings;
        let listing = async {
            on_pool!(&self.pool, p => {
                sqlx::query_as::<_, (i64, String, i64, i64, i64, i64)>(safe(&self.sql.list))
                    .bind(&s.scope)
                    .fetch_all(p)
                    .await
            })
        };
        let rows = self.bounded("listing vesta_machine", listing).await?;
        Ok(rows
            .into_iter()
            .map(
                |(machine, holder, expires, mark, updated, now)| MachineRow {
                    machine: to_u64(machine),
                    holder,
                    lease_left_ms: to_u64(expires.saturating_sub(now)),
                    mark_ms: to_u64(mark),
                    updated_ms: to_u64(updated),
                },
            )
            .collect())
    }

    /// Closes every connection, waiting at most `machine.db_timeout_ms` (a connection stuck
    /// in a partition would otherwise hold the close, and a stop, forever).
    pub async fn close(&self) {
        self.pool.close_within(self.settings.timeout).await;
    }
}

/// Which row a claim takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// A row whose lease expired (or was released), with its mark.
    Expired { machine: i64, mark_ms: i64 },
    /// An ID without a row.
    Unused { machine: i64 },
}

impl Choice {
    fn claimed(self) -> Claimed {
        match self {
            Choice::Expired { machine, mark_ms } => Claimed {
                machine: to_u64(machine),
                mark_ms: to_u64(mark_ms),
            },
            Choice::Unused { machine } => Claimed {
                machine: to_u64(machine),
                mark_ms: 0,
            },
        }
    }
}

/// A static ID's row: taken when free, else who holds it and for how long (ms).
fn choose_fixed(
    rows: &[(i64, String, i64, i64)],
    now: i64,
    id: i64,
) -> Result<Choice, Option<(String, i64)>> {
    match rows.iter().find(|r| r.0 == id) {
        Some(r) if r.2 < now => Ok(Choice::Expired {
            machine: id,
            mark_ms: r.3,
        }),
        Some(r) => Err(Some((r.1.clone(), r.2 - now))),
        None => Ok(Choice::Unused { machine: id }),
    }
}

/// The preferred ID if free, else the lowest free one: expired rows and IDs without a row
/// alike. `rows` are the pool's rows by machine ID: (machine, holder, expires_ms, mark_ms).
fn choose(
    rows: &[(i64, String, i64, i64)],
    now: i64,
    lo: i64,
    hi: i64,
    preferred: Option<i64>,
) -> Option<Choice> {
    let free = |m: i64| -> Option<Choice> {
        match rows.iter().find(|r| r.0 == m) {
            Some(r) if r.2 < now => Some(Choice::Expired {
                machine: m,
                mark_ms: r.3,
            }),
            Some(_) => None,
            None => Some(Choice::Unused { machine: m }),
        }
    };
    if let Some(m) = preferred.filter(|m| (lo..=hi).contains(m))
        && let Some(c) = free(m)
    {
        return Some(c);
    }
    // The lowest expired row, or the lowest ID without a row: whichever is lower.
    let expired = rows.iter().find(|r| r.2 < now).map(|r| r.0);
    let mut unused = lo;
    for r in rows {
        if r.0 == unused {
            unused += 1;
        } else if r.0 > unused {
            break;
        }
    }
    let unused = (unused <= hi).then_some(unused);
    match (expired, unused) {
        (Some(e), Some(u)) => free(e.min(u)),
        (Some(e), None) => free(e),
        (None, Some(u)) => free(u),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(m: i64, expires: i64, mark: i64) -> (i64, String, i64, i64) {
        (m, "h:1:0".into(), expires, mark)
    }

    #[test]
    fn the_lowest_free_id_is_taken_expired_or_unused() {
        let now = 1_000;
        assert_eq!(
            choose(&[], now, 0, 3, None),
            Some(Choice::Unused { machine: 0 })
        );
        let rows = [row(0, 2_000, 5), row(1, 2_000, 5), row(3, 2_000, 5)];
        assert_eq!(
            choose(&rows, now, 0, 3, None),
            Some(Choice::Unused { machine: 2 })
        );
        let rows = [row(0, 2_000, 5), row(1, 999, 7), row(2, 2_000, 5)];
        assert_eq!(
            choose(&rows, now, 0, 3, None),
            Some(Choice::Expired {
                machine: 1,
                mark_ms: 7
            })
        );
        let full = [row(0, 2_000, 5), row(1, 2_000, 5)];
        assert_eq!(choose(&full, now, 0, 1, None), None);
        // A lease expiring exactly now is still held (expiry is strictly before now).
        assert_eq!(choose(&[row(0, 1_000, 5)], now, 0, 0, None), None);
    }

    #[test]
    fn the_preferred_id_wins_when_free() {
        let now = 1_000;
        let rows = [row(0, 500, 1), row(5, 500, 9)];
        assert_eq!(
            choose(&rows, now, 0, 9, Some(5)),
            Some(Choice::Expired {
                machine: 5,
                mark_ms: 9
            })
        );
        let rows = [row(0, 500, 1), row(5, 2_000, 9)];
        assert_eq!(
            choose(&rows, now, 0, 9, Some(5)),
            Some(Choice::Expired {
                machine: 0,
                mark_ms: 1
            })
        );
        assert_eq!(
            choose(&[], now, 0, 9, Some(42)),
            Some(Choice::Unused { machine: 0 }),
            "a preferred ID outside the pool is ignored"
        );
    }

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
