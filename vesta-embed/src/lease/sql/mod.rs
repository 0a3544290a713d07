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

mod choose;
mod settings;
mod statements;

use std::time::Duration;

use vesta_core::Remedy;
use vesta_segment::pool::{self, AnyPool, OpenError, PoolSettings};

use super::counted_in::CountedIn;
use crate::error::StartError;
use choose::{Choice, choose, choose_fixed};
pub use settings::{MachineRow, SqlSettings};
use statements::{ADD_COUNTED_IN, DDL, PROBE, PROBE_COUNTED_IN, Statements, safe};

/// How many times a claim is retried after losing an INSERT race.
const CLAIM_ATTEMPTS: u32 = 20;

/// Runs the same body against whichever pool this is.
macro_rules! on_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        vesta_segment::on_any_pool!($pool, $p => $body)
    };
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
            Err(OpenError::NoDirectory(dir)) => {
                return Err(format!(
                    "machine.db {db}: connecting: the directory {} does not exist (create it \
                     first)",
                    dir.display()
                ));
            }
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
    ) -> Result<Claimed, StartError> {
        for attempt in 1..=CLAIM_ATTEMPTS {
            match self.try_claim(holder, preferred).await? {
                Some(claimed) => return Ok(claimed),
                // Lost a race with another claimer: read the pool again, a little later each
                // time (at most about 2 s in all).
                None => tokio::time::sleep(Duration::from_millis(10) * attempt).await,
            }
        }
        Err(StartError::Lease(format!(
            "machine.db {}: claiming a machine ID in scope {:?}: lost {CLAIM_ATTEMPTS} races \
             with other claimers in a row",
            self.settings.db, self.settings.scope
        )))
    }

    /// One claim transaction; `None` when a racing claimer inserted the chosen ID first.
    async fn try_claim(
        &self,
        holder: &str,
        preferred: Option<u64>,
    ) -> Result<Option<Claimed>, StartError> {
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
        let taken = |message| StartError::Taken {
            message,
            remedy: Box::new(Remedy::ListHolders { store: s.store() }),
        };
        match self
            .bounded("claiming a machine ID", claiming)
            .await
            .map_err(StartError::Lease)?
        {
            Ok(claimed) => Ok(claimed),
            Err(Some((holder, left_ms))) => Err(taken(format!(
                "machine {} is held by {holder} in {} scope {:?} for another {left_ms} ms: \
                 another issuer runs with this static machine ID; give each its own machine.id",
                s.fixed.unwrap_or_default(),
                s.db,
                s.scope
            ))),
            Err(None) => Err(taken(format!(
                "machine.db {}: every machine ID of the {} pool {}..={} in scope {:?} is held",
                s.db,
                s.pool_name,
                s.pool.start(),
                s.pool.end(),
                s.scope
            ))),
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
