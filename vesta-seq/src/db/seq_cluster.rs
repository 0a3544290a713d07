//! The per-key sequences' cluster tables, in the sequences' own database (docs/seq-cluster.md):
//!
//! - `vesta_seq_member`: one row per member (a server's machine ID) — the incarnation holding
//!   it (`holder`), the addresses it serves on, and until when its lease runs (`expires_ms`, by
//!   the database's clock). A lease is renewed only while it has not expired: an incarnation
//!   whose lease ran out is gone for good and must join again as a new one.
//! - `vesta_seq_set`: one row per set (256) — the owner (`-1`: none), the incarnation that owns
//!   it, and a generation that every change of owner raises. Changed only by compare-and-set on
//!   the generation, so two members can never both take one set.
//!
//!
//! The row `member = -1` of `vesta_seq_member` is the table's lease (a standalone server's, or a
//! `vesta seq` run's: `owner.rs`), taken and renewed by the same statements; the members'
//! reads skip it.
//!
//! Every time is the database's (`now_ms`), never a server's: expiry is judged on one clock.

use crate::db::Database;
use crate::db::dialect::{Dialect, PerKind};
use crate::db::owner::TABLE_ROW;
use crate::sets::SETS;
use vesta_segment::DbKind;
use vesta_segment::SegmentError;

/// A member's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRow {
    /// The member: its server's machine ID.
    pub member: u64,
    /// The incarnation holding it (`''` once it left).
    pub holder: String,
    /// Its TCP server's address (`''`: none).
    pub tcp: String,
    /// Its REST server's address (`''`: none).
    pub rest: String,
    /// When its lease runs out (ms since the Unix epoch, the database's clock).
    pub expires_ms: i64,
}

/// A set's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetRow {
    /// The set, 0..256.
    pub set: u32,
    /// The owning member, `None` when released (or never owned).
    pub owner: Option<u64>,
    /// The owning incarnation (`''` when released).
    pub holder: String,
    /// Raised at every change of owner.
    pub generation: i64,
}

/// Every statement of the cluster's tables (the table lease's included: a row of
/// `vesta_seq_member`), for one database (placeholders in its style).
pub(crate) struct ClusterSql {
    now: String,
    create_members: &'static str,
    create_sets: &'static str,
    /// Every set's row, those missing made (a multi-row insert of literals; one round trip).
    insert_sets: String,
    count_sets: &'static str,
    /// Binds member; leaves an existing row alone.
    insert_member: String,
    /// Binds holder, tcp, rest, ttl, member, holder: takes the row when it is ours or expired.
    join: String,
    /// Binds ttl, member, holder: renews only an unexpired lease.
    renew: String,
    /// Binds member, holder.
    leave: String,
    members: &'static str,
    sets: &'static str,
    /// Binds owner, holder; the sets and generations follow (`matching`).
    take_sets: String,
    /// Binds holder; the sets and generations follow.
    release_sets: String,
    /// The table lease's row with the database's clock (`owner.rs`).
    pub(crate) read_table_lease: String,
    /// Binds holder, tcp, rest, ttl, the dead holder: the table's lease of a holder known gone.
    pub(crate) take_table_lease_from: String,
}

static STATEMENTS: PerKind<ClusterSql> = PerKind::new(ClusterSql::build);

/// The statements of `vesta_seq_member` (the table lease's too) and `vesta_seq_set` for `kind`.
pub(crate) fn cluster_statements(kind: DbKind) -> &'static ClusterSql {
    STATEMENTS.get(kind)
}

impl ClusterSql {
    fn build(d: &Dialect) -> ClusterSql {
        let now = d.now;
        // What taking a lease row writes (binds holder, tcp, rest, ttl); the row's condition
        // follows.
        let take_lease = format!(
            "UPDATE vesta_seq_member SET holder = ?, tcp = ?, rest = ?, \
             expires_ms = {now} + ?, updated_ms = {now} WHERE"
        );
        ClusterSql {
            now: format!("SELECT {now}"),
            create_members: "CREATE TABLE IF NOT EXISTS vesta_seq_member (
  member BIGINT NOT NULL PRIMARY KEY,
  holder VARCHAR(255) NOT NULL,
  tcp VARCHAR(255) NOT NULL,
  rest VARCHAR(255) NOT NULL,
  expires_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL
)",
            create_sets: "CREATE TABLE IF NOT EXISTS vesta_seq_set (
  set_no INT NOT NULL PRIMARY KEY,
  owner BIGINT NOT NULL,
  holder VARCHAR(255) NOT NULL,
  generation BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL
)",
            insert_sets: d.insert_missing(
                "vesta_seq_set (set_no, owner, holder, generation, updated_ms)",
                &(0..SETS)
                    .map(|s| format!("({s}, -1, '', 0, {now})"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            count_sets: "SELECT COUNT(*) FROM vesta_seq_set",
            insert_member: d.insert_missing(
                "vesta_seq_member (member, holder, tcp, rest, expires_ms, updated_ms)",
                &format!("(?, '', '', '', 0, {now})"),
            ),
            join: d.placeholders(&format!(
                "{take_lease} member = ? AND (holder = ? OR expires_ms < {now})"
            )),
            renew: d.placeholders(&format!(
                "UPDATE vesta_seq_member SET expires_ms = {now} + ?, updated_ms = {now} \
                 WHERE member = ? AND holder = ? AND expires_ms >= {now}"
            )),
            leave: d.placeholders(&format!(
                "UPDATE vesta_seq_member SET holder = '', expires_ms = 0, updated_ms = {now} \
                 WHERE member = ? AND holder = ?"
            )),
            members: "SELECT member, holder, tcp, rest, expires_ms FROM vesta_seq_member \
                      WHERE member >= 0 ORDER BY member",
            sets: "SELECT set_no, owner, holder, generation FROM vesta_seq_set ORDER BY set_no",
            take_sets: d.placeholders(&format!(
                "UPDATE vesta_seq_set SET owner = ?, holder = ?, generation = generation + 1, \
                 updated_ms = {now} WHERE 1 = 1"
            )),
            release_sets: d.placeholders(&format!(
                "UPDATE vesta_seq_set SET owner = -1, holder = '', generation = generation + 1, \
                 updated_ms = {now} WHERE holder = ?"
            )),
            read_table_lease: format!(
                "SELECT holder, tcp, rest, expires_ms, updated_ms, {now} FROM vesta_seq_member \
                 WHERE member = {TABLE_ROW}"
            ),
            take_table_lease_from: d
                .placeholders(&format!("{take_lease} member = {TABLE_ROW} AND holder = ?")),
        }
    }
}

/// What the database answered a read of the cluster: its clock first, then the rows (read
/// after it, so a lease seen expired at `now_ms` had expired when the rows were read; the sets
/// before the members, so an owner that took a set after the sets were read is never judged
/// dead by a plan made on the old generation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterRows {
    /// The database's clock before the rows were read (ms since the Unix epoch).
    pub now_ms: i64,
    /// Every member row, by member.
    pub members: Vec<MemberRow>,
    /// Every set row, by set.
    pub sets: Vec<SetRow>,
}

/// A member row as read: member, holder, tcp, rest, expires_ms.
type RawMember = (i64, String, String, String, i64);
/// A set row as read: set_no, owner, holder, generation.
type RawSet = (i32, i64, String, i64);

fn to_member(member: i64) -> u64 {
    u64::try_from(member).unwrap_or(0)
}

impl Database {
    /// Creates the cluster tables unless they exist, and a row for every set.
    pub(crate) async fn cluster_init(&self) -> Result<(), SegmentError> {
        let q = cluster_statements(self.url().kind());
        self.write(
            || "creating the tables vesta_seq_member and vesta_seq_set".into(),
            async {
                on_pool!(self.pool(), p => {
                    sqlx::query(q.create_members).execute(p).await?;
                    sqlx::query(q.create_sets).execute(p).await?;
                    let (rows,): (i64,) = sqlx::query_as(q.count_sets).fetch_one(p).await?;
                    if rows < i64::from(SETS) {
                        sqlx::query(q.insert_sets.as_str()).execute(p).await?;
                    }
                    Ok(())
                })
            },
        )
        .await
    }

    /// Creates `vesta_seq_member` unless it exists (the table's lease lives there too).
    pub(crate) async fn members_init(&self) -> Result<(), SegmentError> {
        let q = cluster_statements(self.url().kind());
        self.write(|| "creating the table vesta_seq_member".into(), async {
            on_pool!(self.pool(), p => {
                sqlx::query(q.create_members).execute(p).await.map(|_| ())
            })
        })
        .await
    }

    /// Takes `member`'s row for incarnation `holder` (when it is free, expired, or already
    /// `holder`'s) with a lease of `ttl_ms`; false when another incarnation's lease runs.
    pub(crate) async fn cluster_join(
        &self,
        member: u64,
        holder: &str,
        tcp: &str,
        rest: &str,
        ttl_ms: i64,
    ) -> Result<bool, SegmentError> {
        let id = i64::try_from(member).unwrap_or(i64::MAX);
        self.lease_join(id, holder, tcp, rest, ttl_ms).await
    }

    /// [`Database::cluster_join`] on row `id` of `vesta_seq_member` (`-1`: the table's lease).
    pub(crate) async fn lease_join(
        &self,
        id: i64,
        holder: &str,
        tcp: &str,
        rest: &str,
        ttl_ms: i64,
    ) -> Result<bool, SegmentError> {
        let q = cluster_statements(self.url().kind());
        let affected = self
            .lease_write(
                || format!("taking lease {} (vesta_seq_member)", lease_name(id)),
                async {
                    on_pool!(self.pool(), p => {
                        sqlx::query(q.insert_member.as_str()).bind(id).execute(p).await?;
                        sqlx::query(q.join.as_str())
                            .bind(holder)
                            .bind(tcp)
                            .bind(rest)
                            .bind(ttl_ms)
                            .bind(id)
                            .bind(holder)
                            .execute(p)
                            .await
                            .map(|r| r.rows_affected())
                    })
                },
            )
            .await?;
        Ok(affected == 1)
    }

    /// Renews `holder`'s lease on `member` by `ttl_ms`; false when it had expired (or another
    /// incarnation holds the row): the lease is gone.
    pub(crate) async fn cluster_renew(
        &self,
        member: u64,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<bool, SegmentError> {
        let id = i64::try_from(member).unwrap_or(i64::MAX);
        self.lease_renew(id, holder, ttl_ms).await
    }

    /// [`Database::cluster_renew`] on row `id` (`-1`: the table's lease).
    pub(crate) async fn lease_renew(
        &self,
        id: i64,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<bool, SegmentError> {
        let q = cluster_statements(self.url().kind());
        let affected = self
            .lease_write(|| format!("renewing lease {}", lease_name(id)), async {
                on_pool!(self.pool(), p => {
                    sqlx::query(q.renew.as_str())
                        .bind(ttl_ms)
                        .bind(id)
                        .bind(holder)
                        .execute(p)
                        .await
                        .map(|r| r.rows_affected())
                })
            })
            .await?;
        Ok(affected == 1)
    }

    /// Ends `holder`'s lease on `member` at once (a clean leave).
    pub(crate) async fn cluster_leave(
        &self,
        member: u64,
        holder: &str,
    ) -> Result<(), SegmentError> {
        let id = i64::try_from(member).unwrap_or(i64::MAX);
        self.lease_leave(id, holder).await
    }

    /// [`Database::cluster_leave`] on row `id` (`-1`: the table's lease).
    pub(crate) async fn lease_leave(&self, id: i64, holder: &str) -> Result<(), SegmentError> {
        let q = cluster_statements(self.url().kind());
        self.lease_write(|| format!("ending lease {}", lease_name(id)), async {
            on_pool!(self.pool(), p => {
                sqlx::query(q.leave.as_str()).bind(id).bind(holder).execute(p).await.map(|_| ())
            })
        })
        .await
    }

    /// The database's clock, then every member and set row.
    pub(crate) async fn cluster_read(&self) -> Result<ClusterRows, SegmentError> {
        let q = cluster_statements(self.url().kind());
        let (now_ms, members, sets): (i64, Vec<RawMember>, Vec<RawSet>) = self
            .bounded(
                || "reading vesta_seq_member and vesta_seq_set".into(),
                async {
                    on_pool!(self.pool(), p => {
                        // The sets before the members: an owner judged dead was dead when its
                        // set was read (dead stays dead), and one that took a set after that
                        // read changed its generation, so a take planned on it fails.
                        let (now,): (i64,) = sqlx::query_as(q.now.as_str()).fetch_one(p).await?;
                        let sets = sqlx::query_as(q.sets).fetch_all(p).await?;
                        let members = sqlx::query_as(q.members).fetch_all(p).await?;
                        Ok((now, members, sets))
                    })
                },
            )
            .await?;
        Ok(ClusterRows {
            now_ms,
            members: members
                .into_iter()
                .map(|(member, holder, tcp, rest, expires_ms)| MemberRow {
                    member: to_member(member),
                    holder,
                    tcp,
                    rest,
                    expires_ms,
                })
                .collect(),
            sets: sets
                .into_iter()
                .map(|(set, owner, holder, generation)| SetRow {
                    set: u32::try_from(set).unwrap_or(u32::MAX),
                    owner: u64::try_from(owner).ok(),
                    holder,
                    generation,
                })
                .collect(),
        })
    }

    /// Makes incarnation `holder` of `member` the owner of each `(set, generation)` whose
    /// generation is still the one given (one statement; read the rows back to see which).
    pub(crate) async fn cluster_take_sets(
        &self,
        member: u64,
        holder: &str,
        sets: &[(u32, i64)],
    ) -> Result<u64, SegmentError> {
        let q = cluster_statements(self.url().kind());
        let id = i64::try_from(member).unwrap_or(i64::MAX);
        self.update_sets("taking", &q.take_sets, Some(id), holder, sets)
            .await
    }

    /// Releases each `(set, generation)` that incarnation `holder` still owns at that
    /// generation (one statement).
    pub(crate) async fn cluster_release_sets(
        &self,
        holder: &str,
        sets: &[(u32, i64)],
    ) -> Result<u64, SegmentError> {
        let q = cluster_statements(self.url().kind());
        self.update_sets("releasing", &q.release_sets, None, holder, sets)
            .await
    }

    /// Runs `head` (binding `owner` if given, then `holder`) on the rows of `sets` at their
    /// generations; the rows changed.
    async fn update_sets(
        &self,
        verb: &str,
        head: &str,
        owner: Option<i64>,
        holder: &str,
        sets: &[(u32, i64)],
    ) -> Result<u64, SegmentError> {
        if sets.is_empty() {
            return Ok(0);
        }
        let sql = format!("{head} AND ({})", matching(sets));
        self.write(
            || format!("{verb} {} sets (vesta_seq_set)", sets.len()),
            async {
                on_pool!(self.pool(), p => {
                    let query = sqlx::query(sqlx::AssertSqlSafe(sql));
                    let query = match owner {
                        Some(id) => query.bind(id),
                        None => query,
                    };
                    query
                        .bind(holder)
                        .execute(p)
                        .await
                        .map(|r| r.rows_affected())
                })
            },
        )
        .await
    }
}

/// A lease row for messages: `member 950`, or `of the table` for row -1.
fn lease_name(id: i64) -> String {
    if id < 0 {
        "of the table".into()
    } else {
        format!("of member {id}")
    }
}

/// `(set_no = S AND generation = G) OR ...`: integers this crate made, never input.
fn matching(sets: &[(u32, i64)]) -> String {
    sets.iter()
        .map(|(s, g)| format!("(set_no = {s} AND generation = {g})"))
        .collect::<Vec<_>>()
        .join(" OR ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::dialect;

    #[test]
    fn postgres_statements_number_their_placeholders() {
        let q = ClusterSql::build(&dialect::of(DbKind::Postgres));
        assert!(
            q.renew.contains("+ $1") && q.renew.contains("holder = $3"),
            "{}",
            q.renew
        );
        assert!(
            q.take_sets.contains("owner = $1, holder = $2"),
            "{}",
            q.take_sets
        );
        assert_eq!(
            matching(&[(3, 5), (4, 0)]),
            "(set_no = 3 AND generation = 5) OR (set_no = 4 AND generation = 0)"
        );
        assert!(
            q.insert_sets.ends_with("ON CONFLICT DO NOTHING"),
            "{}",
            q.insert_sets
        );
        assert!(
            q.read_table_lease.ends_with("WHERE member = -1"),
            "{}",
            q.read_table_lease
        );
        assert!(
            q.take_table_lease_from
                .ends_with("WHERE member = -1 AND holder = $5"),
            "{}",
            q.take_table_lease_from
        );
        let q = ClusterSql::build(&dialect::of(DbKind::Sqlite));
        assert!(q.join.contains("holder = ? OR expires_ms <"), "{}", q.join);
    }
}
