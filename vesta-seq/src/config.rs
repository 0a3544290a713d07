//! The `[seq]` config section (per-key sequences in the servers and `vesta seq`): the
//! database and the [`SeqOptions`] in config units, every number checked at parse time with
//! the key and its allowed range named.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use vesta_segment::config::check;
use vesta_segment::url::redact;
use vesta_segment::{ConfigError, DbUrl, UrlError};

use crate::SeqOptions;

/// The database `vesta seq` uses without `--db` or a config's `[seq] db`.
pub const DEFAULT_SEQ_DB: &str = "sqlite://vesta-seq.db";

/// Allowed range of each number.
const STEP: (u64, u64) = (1, 1_000_000_000);
const STORE_TIMEOUT_MS: (u64, u64) = (100, 60_000);
/// From 4 MiB: a numeric section turning into its array holds its table (557 KB) and the
/// array (800 KB) at once, with room for the rest.
const MAX_MEMORY_MB: (u64, u64) = (4, 1 << 20);
/// Bytes the old `max_sections` and `max_string_keys` meant a section and a string key to be.
const OLD_SECTION_BYTES: u64 = 800_000;
const OLD_STRING_KEY_BYTES: u64 = 100;
const IDLE_S: (u64, u64) = (4, 7 * 86_400);

/// Where a sequences cluster keeps its members' leases and its sets' owners
/// (`seq.coordination`, docs/seq-cluster.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Coordination {
    /// The sequences' own database (tables `vesta_seq_member`, `vesta_seq_set`).
    #[default]
    Sql,
    /// etcd v3, reached through the `[etcd]` section (the one a machine ID is leased from).
    Etcd,
    /// ZooKeeper, reached through the `[zookeeper]` section (the one a machine ID is leased
    /// from).
    Zookeeper,
}

impl Coordination {
    /// Every value `seq.coordination` takes.
    pub const NAMES: &'static str = "\"sql\", \"etcd\", \"zookeeper\"";

    /// Its name in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Coordination::Sql => "sql",
            Coordination::Etcd => "etcd",
            Coordination::Zookeeper => "zookeeper",
        }
    }

    /// Parses a config value; the error names the key and the values it takes.
    pub fn parse(value: &str) -> Result<Self, ConfigError> {
        match value {
            "sql" => Ok(Coordination::Sql),
            "etcd" => Ok(Coordination::Etcd),
            "zookeeper" => Ok(Coordination::Zookeeper),
            other => Err(ConfigError::Inconsistent(format!(
                "seq.coordination {other:?} is not one of {}",
                Coordination::NAMES
            ))),
        }
    }
}

impl fmt::Display for Coordination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `[seq]` section; `Default` is [`SeqOptions::default`] with no database (off).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawSection")]
pub struct SeqSection {
    /// `sqlite://PATH`, `postgres://...` or `mysql://...`; none turns per-key sequences off
    /// in the servers.
    pub db: Option<String>,
    /// How far one raise moves a section's stored maximum at first (seqsvr: 10,000).
    pub step: u64,
    /// The adaptive step's ceiling: a section raised more than once a second doubles its
    /// step up to this.
    pub max_step: u64,
    /// Longest wait for one round trip to the table, and a caller's for a raise.
    pub store_timeout_ms: u64,
    /// Most memory the sections hold together, MiB: at the bound the least recently used
    /// sections are evicted to make room (docs/seq.md, "Memory").
    pub max_memory_mb: u64,
    /// A section untouched this long is evicted.
    pub idle_s: u64,
    /// Serve as a member of the cluster of servers on this database (docs/seq-cluster.md): the
    /// sets of keys are dealt among them, each served by one at a time.
    pub cluster: bool,
    /// The member's lease in the cluster: a killed member's keys wait at most this long.
    pub cluster_ttl_ms: u64,
    /// Where the cluster keeps its leases and sets: the sequences' database (`sql`, the
    /// default), etcd (`etcd`, reached through the `[etcd]` section) or ZooKeeper (`zookeeper`,
    /// through the `[zookeeper]` section).
    pub coordination: Coordination,
    /// The `host:port` other members send clients to for this server's keys (default: the
    /// address it listens on, unless that is a wildcard such as `0.0.0.0`).
    pub advertise: Option<String>,
}

impl Default for SeqSection {
    fn default() -> Self {
        let o = SeqOptions::default();
        SeqSection {
            db: None,
            step: o.step,
            max_step: o.max_step,
            store_timeout_ms: o.store_timeout.as_millis() as u64,
            max_memory_mb: (o.max_memory >> 20) as u64,
            idle_s: o.idle.as_secs(),
            cluster: false,
            cluster_ttl_ms: crate::cluster::DEFAULT_TTL.as_millis() as u64,
            coordination: Coordination::Sql,
            advertise: None,
        }
    }
}

impl fmt::Debug for SeqSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeqSection")
            .field("db", &self.db.as_deref().map(redact))
            .field("step", &self.step)
            .field("max_step", &self.max_step)
            .field("store_timeout_ms", &self.store_timeout_ms)
            .field("max_memory_mb", &self.max_memory_mb)
            .field("idle_s", &self.idle_s)
            .field("cluster", &self.cluster)
            .field("cluster_ttl_ms", &self.cluster_ttl_ms)
            .field("coordination", &self.coordination)
            .field("advertise", &self.advertise)
            .finish()
    }
}

impl SeqSection {
    /// Keys renamed within `[seq]`, `(old, new)`: still read (the old bounds become a bound in
    /// MiB: 800 KB a section, 100 bytes a string key), and loading warns about them.
    pub const RENAMED_KEYS: &'static [(&'static str, &'static str)] = &[
        ("max_sections", "max_memory_mb"),
        ("max_string_keys", "max_memory_mb"),
    ];

    /// Checks every value; the error names the key and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("seq.step", self.step, STEP)?;
        check("seq.max_step", self.max_step, STEP)?;
        if self.max_step < self.step {
            return Err(ConfigError::Inconsistent(format!(
                "seq.max_step ({}) must not be below seq.step ({})",
                self.max_step, self.step
            )));
        }
        check(
            "seq.store_timeout_ms",
            self.store_timeout_ms,
            STORE_TIMEOUT_MS,
        )?;
        check("seq.max_memory_mb", self.max_memory_mb, MAX_MEMORY_MB)?;
        check("seq.idle_s", self.idle_s, IDLE_S)?;
        check(
            "seq.cluster_ttl_ms",
            self.cluster_ttl_ms,
            crate::cluster::TTL_MS,
        )?;
        if let Some(a) = &self.advertise
            && (a.is_empty() || a.contains(char::is_whitespace) || !a.contains(':'))
        {
            return Err(ConfigError::Inconsistent(format!(
                "seq.advertise {a:?} is not a host:port clients can reach"
            )));
        }
        if self.cluster && self.db.is_none() {
            return Err(ConfigError::Inconsistent(
                "seq.cluster needs seq.db: the cluster is the servers on one sequences database"
                    .into(),
            ));
        }
        if let Some(db) = &self.db {
            DbUrl::parse(db)
                .map_err(|e: UrlError| ConfigError::Inconsistent(format!("seq.db: {e}")))?;
        }
        Ok(())
    }

    /// The configured database, parsed; `None` when unset.
    pub fn db_url(&self) -> Result<Option<DbUrl>, ConfigError> {
        self.db
            .as_deref()
            .map(|db| {
                DbUrl::parse(db).map_err(|e| ConfigError::Inconsistent(format!("seq.db: {e}")))
            })
            .transpose()
    }

    /// The options these settings describe (checked: call [`SeqSection::validate`] first, or
    /// take the section from TOML, which does).
    pub fn options(&self) -> SeqOptions {
        SeqOptions {
            step: self.step,
            max_step: self.max_step,
            store_timeout: Duration::from_millis(self.store_timeout_ms),
            max_memory: usize::try_from(self.max_memory_mb << 20).unwrap_or(usize::MAX),
            idle: Duration::from_secs(self.idle_s),
        }
    }
}

/// Checks `options` as the section's keys would be (the memory bound in bytes, from 1 KiB: a
/// section and its first key, so a bound below the config's 4 MiB is a test's).
pub(crate) fn check_options(o: &SeqOptions) -> Result<(), ConfigError> {
    if o.max_memory < 1024 {
        return Err(ConfigError::Inconsistent(format!(
            "max_memory {} bytes is below 1024: a section and its first key need that \
             (seq.max_memory_mb)",
            o.max_memory
        )));
    }
    SeqSection {
        db: None,
        step: o.step,
        max_step: o.max_step,
        store_timeout_ms: o.store_timeout.as_millis().try_into().unwrap_or(u64::MAX),
        idle_s: o.idle.as_secs(),
        ..SeqSection::default()
    }
    .validate()
}

/// The section as written, before the range checks.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawSection {
    db: Option<String>,
    step: u64,
    max_step: u64,
    store_timeout_ms: u64,
    max_memory_mb: Option<u64>,
    /// Renamed: read as part of `max_memory_mb`.
    max_sections: Option<u64>,
    /// Renamed: read as part of `max_memory_mb`.
    max_string_keys: Option<u64>,
    idle_s: u64,
    cluster: bool,
    cluster_ttl_ms: u64,
    coordination: String,
    advertise: Option<String>,
}

impl Default for RawSection {
    fn default() -> Self {
        let d = SeqSection::default();
        RawSection {
            db: d.db,
            step: d.step,
            max_step: d.max_step,
            store_timeout_ms: d.store_timeout_ms,
            max_memory_mb: None,
            max_sections: None,
            max_string_keys: None,
            idle_s: d.idle_s,
            cluster: d.cluster,
            cluster_ttl_ms: d.cluster_ttl_ms,
            coordination: d.coordination.as_str().into(),
            advertise: d.advertise,
        }
    }
}

impl TryFrom<RawSection> for SeqSection {
    type Error = ConfigError;

    fn try_from(r: RawSection) -> Result<Self, ConfigError> {
        let max_memory_mb = match (r.max_memory_mb, r.max_sections, r.max_string_keys) {
            (Some(mb), _, _) => mb,
            (None, None, None) => SeqSection::default().max_memory_mb,
            // The old bounds, as the memory they stood for.
            (None, sections, strings) => {
                let bytes = sections.unwrap_or(125).saturating_mul(OLD_SECTION_BYTES)
                    + strings
                        .unwrap_or(1_000_000)
                        .saturating_mul(OLD_STRING_KEY_BYTES);
                bytes.div_ceil(1 << 20).max(MAX_MEMORY_MB.0)
            }
        };
        let section = SeqSection {
            db: r.db,
            step: r.step,
            max_step: r.max_step,
            store_timeout_ms: r.store_timeout_ms,
            max_memory_mb,
            idle_s: r.idle_s,
            cluster: r.cluster,
            cluster_ttl_ms: r.cluster_ttl_ms,
            coordination: Coordination::parse(&r.coordination)?,
            advertise: r.advertise,
        };
        section.validate()?;
        Ok(section)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        seq: SeqSection,
    }

    fn parse(text: &str) -> Result<SeqSection, String> {
        toml::from_str::<File>(text)
            .map(|f| f.seq)
            .map_err(|e| e.message().to_owned())
    }

    #[test]
    fn the_section_parses_with_defaults_and_names_bad_values() {
        let s = parse("[seq]\ndb = \"sqlite://x.db\"\nstep = 500\n").unwrap();
        assert_eq!((s.step, s.db.as_deref()), (500, Some("sqlite://x.db")));
        assert_eq!(s.options().max_memory, 256 << 20);
        assert_eq!(parse("").unwrap(), SeqSection::default());
        assert_eq!(
            parse("[seq]\nstep = 0\n").unwrap_err(),
            "seq.step 0 is out of range: allowed 1..=1000000000"
        );
        assert_eq!(
            parse("[seq]\nstore_timeout_ms = 5\n").unwrap_err(),
            "seq.store_timeout_ms 5 is out of range: allowed 100..=60000"
        );
        assert!(
            parse("[seq]\nsteps = 5\n")
                .unwrap_err()
                .contains("unknown field `steps`")
        );
        assert!(
            parse("[seq]\ndb = \"redis://x\"\n")
                .unwrap_err()
                .starts_with("seq.db: invalid database URL")
        );
        assert_eq!(
            parse("[seq]\ncluster = true\n").unwrap_err(),
            "seq.cluster needs seq.db: the cluster is the servers on one sequences database"
        );
        assert_eq!(
            parse("[seq]\ncluster_ttl_ms = 10\n").unwrap_err(),
            "seq.cluster_ttl_ms 10 is out of range: allowed 300..=600000"
        );
        assert!(
            parse("[seq]\nadvertise = \"nohost\"\n")
                .unwrap_err()
                .contains("host:port")
        );
        let c =
            parse("[seq]\ndb = \"sqlite://x.db\"\ncluster = true\nadvertise = \"h:1\"\n").unwrap();
        assert!(c.cluster && c.cluster_ttl_ms == 6000);
        assert_eq!(c.coordination, Coordination::Sql);
        let c = parse("[seq]\ndb = \"sqlite://x.db\"\ncluster = true\ncoordination = \"etcd\"\n")
            .unwrap();
        assert_eq!(c.coordination, Coordination::Etcd);
        assert_eq!(
            parse("[seq]\ncoordination = \"consul\"\n").unwrap_err(),
            "seq.coordination \"consul\" is not one of \"sql\", \"etcd\", \"zookeeper\""
        );
        assert_eq!(
            parse("[seq]\ncoordination = \"zookeeper\"\n")
                .unwrap()
                .coordination,
            Coordination::Zookeeper
        );
        assert_eq!(
            parse("[seq]\nmax_memory_mb = 0\n").unwrap_err(),
            "seq.max_memory_mb 0 is out of range: allowed 4..=1048576"
        );
        assert_eq!(
            parse("[seq]\nmax_memory_mb = 64\n").unwrap().max_memory_mb,
            64
        );
        // The renamed bounds are read as the memory they stood for: 300 sections of 800 KB and
        // the default million string keys of 100 bytes; the new key wins over them.
        assert_eq!(
            parse("[seq]\nmax_sections = 300\n").unwrap().max_memory_mb,
            (300 * 800_000 + 100_000_000u64).div_ceil(1 << 20)
        );
        assert_eq!(
            parse("[seq]\nmax_string_keys = 0\nmax_sections = 1\n")
                .unwrap()
                .max_memory_mb,
            4
        );
        assert_eq!(
            parse("[seq]\nmax_sections = 300\nmax_memory_mb = 7\n")
                .unwrap()
                .max_memory_mb,
            7
        );
        let debug = format!(
            "{:?}",
            parse("[seq]\ndb = \"postgres://u:secret@h:5432/d\"\n").unwrap()
        );
        assert!(!debug.contains("secret"), "{debug}");
    }
}
