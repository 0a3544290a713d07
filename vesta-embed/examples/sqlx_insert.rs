//! IDs in an SQL table with sqlx: [`Id`] binds and reads as a `BIGINT` (no `as i64` at each
//! query; PostgreSQL has no unsigned type, and a version-1 ID is stored negative and read back
//! exactly), rows come back in time order by their key, and a row's key explains itself. SQLite
//! in a file here; PostgreSQL and MySQL take the same code with their pool and `$1` or `?`.
//!
//! Needs vesta-core's feature `sqlx` (`vesta-core = { version = "0.1", features = ["sqlx"] }`)
//! beside your sqlx.
//!
//! ```sh
//! cargo run -p vesta-embed --example sqlx_insert
//! ```

use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use vesta_core::Id;
use vesta_embed::{Issuer, IssuerConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let rows = run(dir.path(), 7, 3).await?;
    for (id, item) in rows {
        println!(
            "{id} ({}) {item}",
            id.to_form(vesta_core::Form::Base32).as_str()
        );
    }
    Ok(())
}

/// Creates `orders` in the SQLite file `orders.db` in `dir`, inserts `n` rows keyed by IDs from
/// an issuer on static machine ID `machine`, and returns the rows as read back, by key.
///
/// The issuer keeps its high-water mark in `dir/machine.state`: a static machine ID restarted
/// within the same second (a crash loop, a quick redeploy) would otherwise issue that second's
/// IDs again, and the primary key would refuse them.
pub async fn run(
    dir: &std::path::Path,
    machine: u64,
    n: usize,
) -> Result<Vec<(Id, String)>, Box<dyn std::error::Error>> {
    let path = dir.join("orders.db");
    let pool = SqlitePool::connect_with(
        SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true),
    )
    .await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, item TEXT NOT NULL)")
        .execute(&pool)
        .await?;
    let config = IssuerConfig::builder()
        .machine(machine)
        .state_file(dir.join("machine.state"))
        .build()?;
    let issuer = Issuer::start(config)?;
    for k in 0..n {
        let id = Id::new(issuer.next_id()?);
        sqlx::query("INSERT INTO orders (id, item) VALUES (?, ?)")
            .bind(id)
            .bind(format!("item {k}"))
            .execute(&pool)
            .await?;
    }
    let rows: Vec<(Id, String)> = sqlx::query_as("SELECT id, item FROM orders ORDER BY id")
        .fetch_all(&pool)
        .await?;
    issuer.shutdown()?;
    pool.close().await;
    Ok(rows)
}
