//! What an SQL lease needs, built by the machine plan (the fixed ID or the pool) from the
//! `[machine]` keys and checked once ([`SqlSettings`]), and
//! one row of the table as `vesta machine ls` shows it ([`MachineRow`]).

use std::ops::RangeInclusive;
use std::time::Duration;

use vesta_core::MarkStore;
use vesta_segment::url::DbUrl;

use crate::config::{ConfigError, IssuerConfig, Keeper, Wanted};

/// The longest scope name.
const MAX_SCOPE_LEN: usize = 128;

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
    /// A static machine ID registered in the table (the plan's fixed ID, `machine.db` set):
    /// only this ID is claimed, and a live holder of it refuses the start.
    pub fixed: Option<u64>,
}

impl SqlSettings {
    /// The settings of `config`'s machine plan ([`IssuerConfig::plan`]), which keeps its
    /// machine ID in an SQL table: leased (`source = "sql"`) or a static one registered there
    /// (`machine.db` set).
    pub fn from_config(config: &IssuerConfig) -> Result<Self, ConfigError> {
        match config.plan()?.keeper {
            Keeper::Sql(settings) => Ok(*settings),
            _ => Err(ConfigError::Inconsistent(
                "machine.source is not \"sql\" and machine.db is not set".into(),
            )),
        }
    }

    /// Built by the plan alone: what it `wanted` (the fixed ID, or the pool to lease from) and
    /// the `[machine]` keys of an SQL lease, checked.
    pub(crate) fn planned(config: &IssuerConfig, wanted: Wanted) -> Result<Self, ConfigError> {
        let m = &config.machine;
        let bad = |msg: String| Err(ConfigError::Inconsistent(msg));
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
        Ok(SqlSettings {
            db,
            scope: m.scope.clone(),
            lease: Duration::from_millis(m.lease_ms),
            timeout: Duration::from_millis(m.db_timeout_ms),
            start_guard_max_wait: config.start_guard_max_wait(),
            pool_name: wanted.pool_name,
            pool: wanted.pool,
            fixed: wanted.fixed,
        })
    }

    /// The store, as a remedy names it (the URL's password hidden).
    pub fn store(&self) -> MarkStore {
        MarkStore::Sql {
            db: self.db.to_string(),
            scope: self.scope.clone(),
        }
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
