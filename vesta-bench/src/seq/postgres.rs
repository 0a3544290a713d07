//! The PostgreSQL peer of the seq load: a table with a row per key, and one
//! `UPDATE seq SET cur = cur + $2 WHERE key = $1 RETURNING cur` per request (the count is 1
//! without a batch), on C connections with one query in flight each: a pool of as many
//! connections as the run has, the way an application would keep per-key counters in its
//! database. Through sqlx, each connection driven by a current-thread runtime of its own on the
//! connection's thread (as the REST engine drives hyper), statements prepared once per
//! connection. Closed loop, or a fixed rate timed from the intended send.

use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::PgConnection;
use tokio::runtime::Runtime;
use tokio::time::timeout;

use super::Keys;
use crate::config::{BenchError, TcpLoad};
use crate::engine::{self, Ctx, Progress, Worker};
use crate::report::{Protocol, Report, Target};
use crate::tally::Tally;

/// The peer's table; `key` is the decimal key as a number.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS seq (key BIGINT PRIMARY KEY, cur BIGINT NOT NULL)";
/// Rows for the keys `max(key) + 1 .. $1` (the table holds `0..` of an earlier run, if any).
const FILL: &str = "INSERT INTO seq (key, cur) SELECT g, 0 FROM generate_series((SELECT \
                    coalesce(max(key) + 1, 0) FROM seq), $1 - 1) AS g";
/// One call.
const UPDATE: &str = "UPDATE seq SET cur = cur + $2 WHERE key = $1 RETURNING cur";
/// Longest wait for a connection or one query.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection and the runtime that drives it.
struct PgConn {
    runtime: Runtime,
    conn: PgConnection,
}

impl PgConn {
    fn connect(url: &str) -> Result<PgConn, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        // The timer is made inside the runtime (a `timeout` made outside has no reactor).
        let conn = runtime
            .block_on(async { timeout(QUERY_TIMEOUT, PgConnection::connect(url)).await })
            .map_err(|_| format!("no connection within {QUERY_TIMEOUT:?}"))?
            .map_err(|e| format!("connect: {e}"))?;
        Ok(PgConn { runtime, conn })
    }
}

/// Makes the table and a row per key of `0..n` when missing.
fn prepare(url: &str, n: u64) -> Result<(), String> {
    let PgConn { runtime, mut conn } = PgConn::connect(url)?;
    runtime.block_on(async {
        sqlx::query(CREATE)
            .execute(&mut conn)
            .await
            .map_err(|e| format!("{CREATE}: {e}"))?;
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        timeout(
            Duration::from_secs(600),
            sqlx::query(FILL).bind(n).execute(&mut conn),
        )
        .await
        .map_err(|_| "making the rows took over 10 minutes".to_owned())?
        .map_err(|e| format!("making a row per key: {e}"))?;
        let _ = conn.close().await;
        Ok(())
    })
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`, for the report.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{name}:***@{host}")
        }
        _ => url.to_owned(),
    }
}

/// Runs the PostgreSQL peer of a seq load (`config.peer` is Postgres, `config.seq_keys` set).
pub(crate) fn run(
    config: TcpLoad,
    n: u64,
    tick: Duration,
    progress: impl FnMut(Progress),
) -> Result<Report, BenchError> {
    let targets = engine::describe_targets(&config.load, |url| {
        prepare(url, n)?;
        Ok(Target::unknown(&redact(url)))
    })?;
    let by = i64::from(config.load.batch.unwrap_or(1));
    let mut load = config.load;
    let outcome = engine::drive(&load, tick, progress, |conn, target| {
        Ok(PgWorker {
            conn: PgConn::connect(target)?,
            keys: Keys::shaped(n, conn, config.seq_shape),
            by,
        })
    })?;
    // The report names the servers without their passwords.
    load.targets = load.targets.iter().map(|t| redact(t)).collect();
    let mut report = outcome.into_report(Protocol::Postgres, load, targets);
    report.seq_keys = Some(n);
    report.seq_shape = config.seq_shape;
    Ok(report)
}

struct PgWorker {
    conn: PgConn,
    keys: Keys,
    by: i64,
}

impl Worker for PgWorker {
    fn run(mut self, ctx: &Ctx<'_>) -> Result<Tally, String> {
        let mut tally = Tally::new(ctx.schedule.is_some());
        let mut schedule = ctx.schedule;
        let PgConn { runtime, conn } = &mut self.conn;
        while let Some(intended) = ctx.next_send(&mut schedule) {
            let key = self.keys.next_key();
            let written = Instant::now();
            let update = sqlx::query_scalar::<_, i64>(UPDATE)
                .bind(key as i64)
                .bind(self.by)
                .fetch_optional(&mut *conn);
            let answer = runtime.block_on(async { timeout(QUERY_TIMEOUT, update).await });
            tally.answer(intended, written, Instant::now());
            match answer {
                Ok(Ok(Some(cur))) if cur >= self.by => ctx.live.add(1, self.by as u64, 0),
                Ok(Ok(Some(cur))) => {
                    return Err(format!("key {key}: cur {cur} after adding {}", self.by));
                }
                Ok(Ok(None)) => {
                    tally.error("NO_ROW", || format!("key {key}: no row in table seq"));
                    ctx.live.add(1, 0, 1);
                }
                Ok(Err(sqlx::Error::Database(e))) => {
                    let code = e
                        .code()
                        .map_or_else(|| "DATABASE".to_owned(), |c| c.into_owned());
                    tally.error(&code, || format!("{code}: {e}"));
                    ctx.live.add(1, 0, 1);
                }
                Ok(Err(e)) => return Err(format!("key {key}: {e}")),
                Err(_) => return Err(format!("key {key}: no answer within {QUERY_TIMEOUT:?}")),
            }
        }
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_left_out_of_the_report() {
        assert_eq!(
            redact("postgres://vesta:secret@127.0.0.1:5432/peer"),
            "postgres://vesta:***@127.0.0.1:5432/peer"
        );
        assert_eq!(
            redact("postgres://vesta@127.0.0.1:5432/peer"),
            "postgres://vesta@127.0.0.1:5432/peer"
        );
        assert_eq!(redact("127.0.0.1:6379"), "127.0.0.1:6379");
    }
}
