//! The SQL text per database: Leaf's statements (leaf-core `IDAllocMapper`) with each
//! database's placeholders, Leaf's DDL (scripts/leaf_alloc.sql) and its PostgreSQL/SQLite
//! equivalents. MySQL keeps `update_time` fresh by `ON UPDATE CURRENT_TIMESTAMP`; PostgreSQL
//! and SQLite have no such clause, so their UPDATEs set it.

use crate::url::DbKind;

/// Every statement the crate sends, for one database.
#[derive(Debug)]
pub(crate) struct Dialect {
    /// Starts the write transaction of a fetch. SQLite: `BEGIN IMMEDIATE`, so the write lock
    /// is taken (waiting up to the busy timeout) before anything is read.
    pub begin: &'static str,
    /// Leaf's `updateMaxId`: the table's own step.
    pub take_table_step: &'static str,
    /// Leaf's `updateMaxIdByCustomStep`: binds the step, then the tag.
    pub take_custom_step: &'static str,
    /// Leaf's `getLeafAlloc`: the row read back in the same transaction.
    pub read_back: &'static str,
    /// The give-back: binds the first unused number, the tag, then the end we reserved.
    pub give_back: &'static str,
    /// `raise`: the row's `max_id`, locked until the transaction ends (SQLite: the write lock
    /// of `BEGIN IMMEDIATE` already holds the whole database). Binds the tag.
    pub lock_row: &'static str,
    /// `raise`: binds the new `max_id`, then the tag.
    pub set_max_id: &'static str,
    /// Leaf's `getAllTags`.
    pub all_tags: &'static str,
    /// Every row for `ls`, `update_time` as RFC 3339 UTC text.
    pub list: &'static str,
    /// A new tag: binds tag, max_id, step, description.
    pub insert: &'static str,
    /// Leaf's DDL, `IF NOT EXISTS`.
    pub create_table: &'static str,
}

/// The statements for `kind`.
pub(crate) fn dialect(kind: DbKind) -> &'static Dialect {
    match kind {
        DbKind::Sqlite => &SQLITE,
        DbKind::Postgres => &POSTGRES,
        DbKind::MySql => &MYSQL,
    }
}

static MYSQL: Dialect = Dialect {
    begin: "BEGIN",
    take_table_step: "UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = ?",
    take_custom_step: "UPDATE leaf_alloc SET max_id = max_id + ? WHERE biz_tag = ?",
    read_back: "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?",
    give_back: "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ? AND max_id = ?",
    lock_row: "SELECT max_id FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE",
    set_max_id: "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?",
    all_tags: "SELECT biz_tag FROM leaf_alloc",
    list: "SELECT biz_tag, max_id, step, DATE_FORMAT(update_time, '%Y-%m-%dT%H:%i:%sZ'), \
           description FROM leaf_alloc ORDER BY biz_tag",
    insert: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)",
    create_table: "CREATE TABLE IF NOT EXISTS `leaf_alloc` (
  `biz_tag` varchar(128)  NOT NULL DEFAULT '',
  `max_id` bigint(20) NOT NULL DEFAULT '1',
  `step` int(11) NOT NULL,
  `description` varchar(256)  DEFAULT NULL,
  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (`biz_tag`)
) ENGINE=InnoDB",
};

static POSTGRES: Dialect = Dialect {
    begin: "BEGIN",
    take_table_step: "UPDATE leaf_alloc SET max_id = max_id + step, \
                      update_time = CURRENT_TIMESTAMP WHERE biz_tag = $1",
    take_custom_step: "UPDATE leaf_alloc SET max_id = max_id + $1, \
                       update_time = CURRENT_TIMESTAMP WHERE biz_tag = $2",
    read_back: "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = $1",
    give_back: "UPDATE leaf_alloc SET max_id = $1, update_time = CURRENT_TIMESTAMP \
                WHERE biz_tag = $2 AND max_id = $3",
    lock_row: "SELECT max_id FROM leaf_alloc WHERE biz_tag = $1 FOR UPDATE",
    set_max_id: "UPDATE leaf_alloc SET max_id = $1, update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = $2",
    all_tags: "SELECT biz_tag FROM leaf_alloc",
    list: "SELECT biz_tag, max_id, step, \
           to_char(update_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
           description FROM leaf_alloc ORDER BY biz_tag",
    insert: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ($1, $2, $3, $4)",
    create_table: "CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag varchar(128) NOT NULL DEFAULT '',
  max_id bigint NOT NULL DEFAULT 1,
  step integer NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)",
};

static SQLITE: Dialect = Dialect {
    begin: "BEGIN IMMEDIATE",
    take_table_step: "UPDATE leaf_alloc SET max_id = max_id + step, \
                      update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?",
    take_custom_step: "UPDATE leaf_alloc SET max_id = max_id + ?, \
                       update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?",
    read_back: "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = ?",
    give_back: "UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP \
                WHERE biz_tag = ? AND max_id = ?",
    lock_row: "SELECT max_id FROM leaf_alloc WHERE biz_tag = ?",
    set_max_id: "UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = ?",
    all_tags: "SELECT biz_tag FROM leaf_alloc",
    list: "SELECT biz_tag, max_id, step, strftime('%Y-%m-%dT%H:%M:%SZ', update_time), \
           description FROM leaf_alloc ORDER BY biz_tag",
    insert: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)",
    create_table: "CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag VARCHAR(128) NOT NULL DEFAULT '',
  max_id BIGINT NOT NULL DEFAULT 1,
  step INT NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
)",
};
