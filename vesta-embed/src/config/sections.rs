//! The sections of an issuer's config: `[id]` (layout, type, epoch, version), `[machine]`,
//! `[clock]`, `[zookeeper]` and `[etcd]`, each with its defaults, and the readers that name a
//! key whose value is of the wrong kind.

use std::path::PathBuf;

use serde::{Deserialize, Deserializer};
use vesta_core::{Epoch, IdType, Layout, LayoutSpec, Preset};

use super::ConfigError;

/// `[id]`: what the IDs look like.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct IdSection {
    /// The layout: a preset (`vesta`, `leaf`, `twitter`, `sonyflake`, `uid-generator`) or a
    /// custom one described under `[id.layout]`.
    pub layout: LayoutChoice,
    /// Vesta's type, `max-peak` (seconds) or `min-granularity` (milliseconds); the `vesta`
    /// layout only (default max-peak).
    #[serde(rename = "type", deserialize_with = "de_id_type")]
    pub id_type: Option<IdType>,
    /// Time zero: ms since the Unix epoch, or an RFC 3339 date-time (default: the layout's
    /// own; set, it overrides a custom layout's too).
    #[serde(deserialize_with = "de_epoch")]
    pub epoch: Option<Epoch>,
    /// Vesta's version bit: 0, or 1 for the extension scheme; the `vesta` layout only
    /// (default 0).
    pub version: Option<u8>,
    /// How long before the layout's end of life (the time field full) the issuer warns: in the
    /// log at start and daily, and as `degraded` in the servers' health.
    pub end_of_life_margin_days: u64,
}

impl IdSection {
    /// Default of `end_of_life_margin_days`: five years, time to roll out a new epoch.
    pub const DEFAULT_END_OF_LIFE_MARGIN_DAYS: u64 = 1826;
    /// Largest `end_of_life_margin_days`: a century.
    pub const MAX_END_OF_LIFE_MARGIN_DAYS: u64 = 36_525;

    /// The margin in ms.
    pub fn end_of_life_margin_ms(&self) -> u64 {
        self.end_of_life_margin_days.saturating_mul(86_400_000)
    }

    /// The layout these keys describe: the preset or custom layout, Vesta's type and version,
    /// the epoch. `type` or `version` with another layout than `vesta` is an error naming the
    /// key (nothing is ignored).
    pub fn layout(&self) -> Result<Layout, ConfigError> {
        let vesta_only = |key: &str| {
            ConfigError::Inconsistent(format!(
                "id.{key} applies to the vesta layout only, not {}: remove it",
                self.layout.name()
            ))
        };
        let base = match &self.layout {
            LayoutChoice::Preset(Preset::Vesta) => {
                let layout = self.id_type.unwrap_or(IdType::MaxPeak).layout().clone();
                match self.version {
                    None => layout,
                    Some(v) => layout
                        .with_fixed("version", u64::from(v))
                        .map_err(|e| ConfigError::Inconsistent(format!("id.{e}")))?,
                }
            }
            other => {
                if self.id_type.is_some() {
                    return Err(vesta_only("type"));
                }
                if self.version.is_some() {
                    return Err(vesta_only("version"));
                }
                match other {
                    LayoutChoice::Preset(p) => p.layout(),
                    LayoutChoice::Custom(spec) => spec.build()?,
                }
            }
        };
        Ok(match self.epoch {
            Some(epoch) => base.with_epoch(epoch),
            None => base,
        })
    }
}

impl Default for IdSection {
    fn default() -> Self {
        IdSection {
            layout: LayoutChoice::default(),
            id_type: None,
            epoch: None,
            version: None,
            end_of_life_margin_days: Self::DEFAULT_END_OF_LIFE_MARGIN_DAYS,
        }
    }
}

/// `[id] layout`: a preset by name (`layout = "leaf"`) or a custom layout described as a table
/// (`[id.layout]` with `unit_ms`, `epoch`, `signed` and `fields` from the top bit down).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutChoice {
    /// A preset.
    Preset(Preset),
    /// A custom layout.
    Custom(LayoutSpec),
}

impl LayoutChoice {
    /// The preset's name, or the custom layout's.
    pub fn name(&self) -> &str {
        match self {
            LayoutChoice::Preset(p) => p.name(),
            LayoutChoice::Custom(spec) => &spec.name,
        }
    }
}

impl Default for LayoutChoice {
    fn default() -> Self {
        LayoutChoice::Preset(Preset::Vesta)
    }
}

impl<'de> Deserialize<'de> for LayoutChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = LayoutChoice;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a layout name or an [id.layout] table")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<LayoutChoice, E> {
                if v == "custom" {
                    return Err(E::custom(
                        "a custom layout is described as a table: [id.layout] with unit_ms, epoch \
                         and fields (see conf/vesta.toml)",
                    ));
                }
                v.parse().map(LayoutChoice::Preset).map_err(E::custom)
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<LayoutChoice, A::Error> {
                LayoutSpec::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(LayoutChoice::Custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Where the machine ID comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum MachineSource {
    /// From `machine.id` (or the first ID of the pool); no ZooKeeper needed.
    #[default]
    Static,
    /// Leased from ZooKeeper under `zookeeper.root`.
    Zookeeper,
    /// The trailing number of the host name (a Kubernetes StatefulSet pod's ordinal) plus
    /// `machine.ordinal_offset`; otherwise a static machine ID (state file included).
    Ordinal,
    /// Leased from a table (`vesta_machine`) in the SQL database at `machine.db` (PostgreSQL,
    /// MySQL/MariaDB, SQLite); needs the crate feature `sql`.
    Sql,
    /// Leased from etcd v3 under `etcd.root`; needs the crate feature `etcd`.
    Etcd,
}

impl MachineSource {
    /// Its name in config files and messages.
    pub const fn name(self) -> &'static str {
        match self {
            MachineSource::Static => "static",
            MachineSource::Zookeeper => "zookeeper",
            MachineSource::Ordinal => "ordinal",
            MachineSource::Sql => "sql",
            MachineSource::Etcd => "etcd",
        }
    }
}

/// `[machine]`: the machine ID and the pools.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct MachineSection {
    /// `static`, `zookeeper`, `ordinal` or `sql`.
    pub source: MachineSource,
    /// The static machine ID; when absent, the first ID of the genMethod's pool.
    pub id: Option<u64>,
    /// How many machine IDs the issuer holds (default 1), for more than one ID's cap: each is
    /// a machine ID of its own, with its own lease, mark, hold, state file and fence, and calls
    /// are spread over them, so `ids` IDs issue up to `ids` times the layout's cap per unit.
    /// Static: `id`..=`id + ids - 1`; ordinal: from ordinal × `ids` + `ordinal_offset`; a
    /// registry: `ids` leases from the pool. Refused where the pool cannot hold them.
    pub ids: u64,
    /// First machine ID of the server pool; embedded issuers use the IDs below it (default:
    /// the layout's split, 924 for 10-bit nodes; see `MachinePools::for_node_bits`).
    pub server_pool_start: Option<u64>,
    /// A local file keeping the machine ID and its high-water mark across restarts (for both
    /// sources; see docs/zookeeper.md).
    pub state_file: Option<PathBuf>,
    /// Static source with a `state_file`: how often the file is rewritten. Each write promises
    /// three intervals ahead, so a restart after a crash waits at most about that long.
    pub state_file_interval_ms: u64,
    /// The longest the start guard waits for the clock to pass the machine ID's mark (from
    /// its registry or the state file, for every source); a clock further behind is a startup
    /// error naming both times.
    pub start_guard_max_wait_ms: u64,
    /// `source = "ordinal"`: added to the host name's trailing number (so two StatefulSets,
    /// or two clusters, can take disjoint ranges of the pool).
    pub ordinal_offset: u64,
    /// `source = "sql"`: the database holding the `vesta_machine` table (`sqlite://PATH`,
    /// `postgres://...`, `mysql://...`; servers default to `[segment] db`). With a static (or
    /// ordinal) ID: the ID is registered there, and a second live holder of it is refused.
    pub db: Option<String>,
    /// `source = "sql"`: the leases' namespace in the table (like `zookeeper.root`): one per
    /// environment and epoch; IDs of one scope are unique among its holders.
    pub scope: String,
    /// `source = "sql"`: how long a lease lasts without renewal, by the database's clock. A
    /// holder renews at least three times per ⅔ of it and stops issuing ⅔ of it after its
    /// last confirmed renewal (its own monotonic clock).
    pub lease_ms: u64,
    /// `source = "sql"`: bound on connecting and on each statement.
    pub db_timeout_ms: u64,
}

impl Default for MachineSection {
    fn default() -> Self {
        MachineSection {
            source: MachineSource::Static,
            id: None,
            ids: 1,
            server_pool_start: None,
            state_file: None,
            state_file_interval_ms: 1_000,
            start_guard_max_wait_ms: 5_000,
            ordinal_offset: 0,
            db: None,
            scope: "default".into(),
            lease_ms: 10_000,
            db_timeout_ms: 5_000,
        }
    }
}

/// How each time unit's sequence starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SeqStartKind {
    /// At 0 (Vesta).
    #[default]
    Zero,
    /// At a pseudo-random value below `seq_start_bound`.
    Random,
}

/// `[clock]`: clock-rollback policy and sequence start.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ClockSection {
    /// How far the clock may step back while issuing continues; default 1000 for max-peak,
    /// 5 for min-granularity.
    pub rollback_tolerance_ms: Option<u64>,
    /// `zero` or `random`.
    pub seq_start: SeqStartKind,
    /// Exclusive bound of a random sequence start.
    pub seq_start_bound: u64,
    /// What to do at start when the kernel says the clock is not synchronised (`STA_UNSYNC`):
    /// `warn` (default: start, log it, show it in health and metrics), `wait` (up to
    /// `sync_wait_ms`, then refuse to start) or `off` (do not ask).
    pub require_sync: RequireSync,
    /// `require_sync = "wait"`: the longest to wait for the clock to be synchronised.
    pub sync_wait_ms: u64,
    /// How the clock is read for units below the coarse clock's reach (milliseconds):
    /// `auto` (default: the precise clock only when the coarse one has moved past its last
    /// reading, so an ID's time may be behind the clock by less than a kernel tick, never
    /// ahead; the cheapest exact-enough reading, vesta-embed's `SystemClock`) or `precise`
    /// (every call; an ID's time is the millisecond it was issued in).
    pub read: ClockRead,
}

/// `[clock] read`: how millisecond units read the clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ClockRead {
    /// The cheapest reading exact enough for the layout and the rollback tolerance.
    #[default]
    Auto,
    /// The precise clock on every call.
    Precise,
}

impl Default for ClockSection {
    fn default() -> Self {
        ClockSection {
            rollback_tolerance_ms: None,
            seq_start: SeqStartKind::Zero,
            seq_start_bound: 64,
            require_sync: RequireSync::Warn,
            sync_wait_ms: 60_000,
            read: ClockRead::Auto,
        }
    }
}

/// `[clock] require_sync`: how an unsynchronised clock at start is treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RequireSync {
    /// Start anyway; log a warning; health and metrics show it.
    #[default]
    Warn,
    /// Wait up to `clock.sync_wait_ms` for synchronisation, then refuse to start.
    Wait,
    /// Do not ask the kernel.
    Off,
}

/// `[zookeeper]`: the lease of a machine ID.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ZooKeeperSection {
    /// `host:port[,host:port...]`. Required by `machine.source = "zookeeper"`; set with a
    /// static (or ordinal) machine ID, the ID is registered there and a second live holder of
    /// it is refused. Empty by default.
    pub connect: String,
    /// Root znode of this deployment's leases.
    pub root: String,
    /// Session timeout asked of the server.
    pub session_timeout_ms: u64,
    /// How long to try connecting at start before failing.
    pub connect_timeout_ms: u64,
    /// How often the high-water mark is written, which confirms the lease.
    pub report_interval_ms: u64,
    /// Start from the local state file when ZooKeeper is unreachable (off: fail closed).
    pub start_without_zookeeper: bool,
    /// `user:password` for digest auth and a creator-only ACL on the znodes.
    pub auth: Option<String>,
    /// A name for this instance, shown in `vesta zk ls`.
    pub instance: Option<String>,
}

impl Default for ZooKeeperSection {
    fn default() -> Self {
        ZooKeeperSection {
            connect: String::new(),
            root: "/vesta/default".into(),
            session_timeout_ms: 10_000,
            connect_timeout_ms: 5_000,
            report_interval_ms: 3_000,
            start_without_zookeeper: false,
            auth: None,
            instance: None,
        }
    }
}

/// `[etcd]`: the lease of a machine ID from etcd v3 (`machine.source = "etcd"`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct EtcdSection {
    /// Client URLs, tried in order: `http://HOST:PORT`. Required by `machine.source = "etcd"`;
    /// set with a static (or ordinal) machine ID, the ID is registered there and a second
    /// live holder of it is refused. Empty by default.
    pub endpoints: Vec<String>,
    /// Key prefix of this deployment's leases (claims under `<root>/machines/`, marks under
    /// `<root>/last/`).
    pub root: String,
    /// The etcd lease's TTL (whole seconds, rounded up; etcd may raise it to its minimum).
    pub ttl_ms: u64,
    /// Bound on each request to etcd.
    pub timeout_ms: u64,
}

impl Default for EtcdSection {
    fn default() -> Self {
        EtcdSection {
            endpoints: Vec::new(),
            root: "/vesta/default".into(),
            ttl_ms: 10_000,
            timeout_ms: 5_000,
        }
    }
}

/// `[id] type` by name or code; a value of any other kind is refused naming the key (an
/// untagged enum would say only that nothing matched).
fn de_id_type<'de, D: Deserializer<'de>>(d: D) -> Result<Option<IdType>, D::Error> {
    struct Visitor;

    impl serde::de::Visitor<'_> for Visitor {
        type Value = IdType;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("type as max-peak (seconds), min-granularity (millis), 0 or 1")
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IdType, E> {
            IdType::from_code(v).map_err(E::custom)
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IdType, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => v.to_string().parse().map_err(E::custom),
            }
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IdType, E> {
            v.parse().map_err(E::custom)
        }
    }

    d.deserialize_any(Visitor).map(Some)
}

fn de_epoch<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Epoch>, D::Error> {
    Epoch::deserialize_key(d, "id.epoch").map(Some)
}
