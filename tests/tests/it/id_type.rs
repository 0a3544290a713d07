//! `vesta_core::Id` in the databases users store it in: a signed `BIGINT` column on real SQLite
//! and PostgreSQL through sqlx (`Type`/`Encode`/`Decode`, feature `sqlx`), bit for bit at the
//! edges (0, the top bit set: negative in SQL, i64::MAX, u64::MAX) and in order for the IDs of
//! every layout that keeps the top bit 0.

use sqlx::{Connection, Row};
use vesta_core::Id;
use vesta_tests::db::Postgres;

const EDGES: [u64; 5] = [0, 1, i64::MAX as u64, 1 << 63, u64::MAX];

/// Inserts the edges as `Id`s and reads them back both as `Id` and as the raw `i64`.
macro_rules! round_trip {
    ($conn:expr, $name:expr, $create:expr, $insert:expr) => {{
        let conn = $conn;
        sqlx::query($create).execute(&mut *conn).await.unwrap();
        for (i, bits) in EDGES.into_iter().enumerate() {
            sqlx::query($insert)
                .bind(i as i64)
                .bind(Id::new(bits))
                .execute(&mut *conn)
                .await
                .unwrap();
        }
        let rows = sqlx::query("SELECT id, id FROM ids ORDER BY n")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        assert_eq!(rows.len(), EDGES.len());
        for (row, bits) in rows.iter().zip(EDGES) {
            let id: Id = row.get(0);
            let raw: i64 = row.get(1);
            assert_eq!(id, Id::new(bits), "{}", $name);
            assert_eq!(
                raw, bits as i64,
                "{}: the column holds the signed view",
                $name
            );
        }
    }};
}

#[tokio::test]
async fn an_id_round_trips_through_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("ids.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    round_trip!(
        &mut conn,
        "SQLite",
        "CREATE TABLE ids (n INTEGER, id BIGINT NOT NULL)",
        "INSERT INTO ids (n, id) VALUES (?, ?)"
    );
}

#[tokio::test]
async fn an_id_round_trips_through_postgres() {
    let pg = Postgres::start();
    let url = pg.create_database("ids");
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    round_trip!(
        &mut conn,
        "PostgreSQL",
        "CREATE TABLE ids (n BIGINT, id BIGINT NOT NULL)",
        "INSERT INTO ids (n, id) VALUES ($1, $2)"
    );
}
