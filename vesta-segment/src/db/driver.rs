//! How a driver's error reads: one line (a unique violation recognisable by its prefix), and
//! which errors mean nothing usable answered or the table is missing.

use std::time::Duration;

/// Prefix of a unique-violation message (see [`driver_message`]).
pub(super) const UNIQUE: &str = "unique violation: ";

/// The driver's error as one line; unique violations get a recognisable prefix.
pub(super) fn driver_message(e: &sqlx::Error) -> String {
    let text = match e {
        sqlx::Error::Database(db) if db.kind() == sqlx::error::ErrorKind::UniqueViolation => {
            format!("{UNIQUE}{}", db.message())
        }
        sqlx::Error::Database(db) => db.message().to_owned(),
        sqlx::Error::PoolTimedOut => "no connection could be made in time".into(),
        other => other.to_string(),
    };
    text.replace('\n', " ")
}

pub(super) fn no_answer(timeout: Duration, key: &str) -> String {
    format!("no answer within {} ms ({key})", timeout.as_millis())
}

/// The setting a segment store's round trips are bounded by.
pub(super) const FETCH_TIMEOUT_KEY: &str = "segment.fetch_timeout_ms";

/// Nothing usable answered: I/O errors (refused, reset, unreachable host), TLS or protocol
/// breakage, a pool that could not connect. A server's own refusal (`Database`) is not.
pub(super) fn is_unreachable(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Tls(_)
    )
}

/// PostgreSQL `42P01`, MySQL/MariaDB `42S02` (1146), SQLite "no such table".
pub(super) fn is_missing_table(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            matches!(db.code().as_deref(), Some("42P01" | "42S02"))
                || db.message().starts_with("no such table")
        }
        _ => false,
    }
}
