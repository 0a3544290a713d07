//! What an SQL lease needs, checked and converted from the config once ([`SqlSettings`]), and
//! one row of the table as `vesta machine ls` shows it ([`MachineRow`]).

use std::ops::RangeInclusive;
use std::time::Duration;

use vesta_segment::url::DbUrl;

use crate::config::{ConfigError, IssuerConfig, MachineSource};

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
