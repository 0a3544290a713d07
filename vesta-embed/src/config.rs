//! The issuer's configuration: built in code ([`IssuerConfig::builder`], or the public fields
//! of the sections) or loaded from TOML ([`IssuerConfig::from_toml_file`], `conf/vesta.toml`).
//! Unknown keys are errors naming the key, and every value is checked
//! ([`IssuerConfig::validate`]) before anything starts.
//!
//! The sections (`[id]`, `[machine]`, `[clock]`, `[zookeeper]`) are separate types so the TCP and
//! REST servers reuse them in their own config files beside a section of their own.

mod builder;

pub use builder::IssuerConfigBuilder;

#[cfg(feature = "toml")]
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use vesta_core::{
    ConfigError as CoreConfigError, Epoch, GenMethod, GeneratorConfig, IdType, Layout, LayoutError,
    LayoutSpec, MachinePools, Preset, SeqStart,
};

use crate::lease::LeaseSettings;

/// A configuration that cannot be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key or a value of the wrong kind.
    #[error("invalid config{}: {message}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Parse {
        /// The file, if loaded from one.
        path: Option<PathBuf>,
        /// The parser's message (it names the key, line and column).
        message: String,
    },
    /// A value is out of its allowed range.
    #[error("invalid config: {0}")]
    Invalid(CoreConfigError),
    /// The custom layout under `[id.layout]` cannot be used.
    #[error("invalid config: id.layout: {0}")]
    Layout(LayoutError),
    /// A setting is missing or inconsistent.
    #[error("invalid config: {0}")]
    Inconsistent(String),
}

impl From<CoreConfigError> for ConfigError {
    fn from(e: CoreConfigError) -> Self {
        ConfigError::Invalid(e)
    }
}

// By hand rather than `#[from]`, so the layout's error is printed once, not again as a `source`
// by callers that print the whole chain (the `vesta` binary).
impl From<LayoutError> for ConfigError {
    fn from(e: LayoutError) -> Self {
        ConfigError::Layout(e)
    }
}

/// Reads a TOML file into `T`, naming the file in every error.
#[cfg(feature = "toml")]
pub fn load_toml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
        path: path.to_owned(),
        cause,
    })?;
    parse_toml(&text).map_err(|e| match e {
        ConfigError::Parse { message, .. } => ConfigError::Parse {
            path: Some(path.to_owned()),
            message,
        },
        other => other,
    })
}

/// Parses TOML text into `T`.
#[cfg(feature = "toml")]
pub fn parse_toml<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: None,
        message: e.message().to_owned() + &moved_hint(e.message()) + &location(text, e.span()),
    })
}

/// For an unknown key that moved to another section: where it lives now.
#[cfg(feature = "toml")]
fn moved_hint(message: &str) -> String {
    MOVED_KEYS
        .iter()
        .find(|(key, _)| message.starts_with(&format!("unknown field `{key}`")))
        .map(|(key, section)| format!(" ({key} moved to {section}: see CHANGELOG.md)"))
        .unwrap_or_default()
}

#[cfg(feature = "toml")]
fn location(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else {
        return String::new();
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    format!(" (line {line})")
}

/// Why a state file is refused by a build without it.
pub(crate) const STATE_FILE_FEATURE: &str =
    "machine.state_file needs vesta-embed built with its feature `state-file`";

/// The shortest allowed `machine.state_file_interval_ms`: one fsync'd write per 10 ms at most.
const MIN_STATE_FILE_INTERVAL_MS: u64 = 10;

/// Keys that moved to another section, named in the error a stale config gets
/// (see CHANGELOG.md).
#[cfg(feature = "toml")]
const MOVED_KEYS: &[(&str, &str)] = &[("start_guard_max_wait_ms", "[machine]")];

/// Everything an [`Issuer`](crate::Issuer) needs. `Default` is the embedded default: Vesta's
/// max-peak layout and epoch, static machine ID 0, no ZooKeeper.
///
/// Three ways to get one: [`IssuerConfig::builder`] in code, [`IssuerConfig::from_toml_file`]
/// (or [`from_toml_str`](IssuerConfig::from_toml_str)) from the TOML of `conf/vesta.toml`, or
/// `IssuerConfig::default()` and its public section fields, checked with
/// [`validate`](IssuerConfig::validate). The first two check every value; errors name the key.
///
/// ```
/// use vesta_core::IdType;
/// use vesta_embed::IssuerConfig;
///
/// let from_code = IssuerConfig::builder().id_type(IdType::MinGranularity).machine(7).build()?;
/// let from_toml = IssuerConfig::from_toml_str(
///     "[id]\ntype = \"min-granularity\"\n[machine]\nid = 7\n",
/// )?;
/// assert_eq!(from_code, from_toml);
///
/// let err = IssuerConfig::builder().machine(930).build().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "invalid config: machine 930 is outside the embed pool 0..=923 (genMethod embed)"
/// );
/// # Ok::<(), vesta_embed::config::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct IssuerConfig {
    /// The IDs' layout, type, epoch and version.
    pub id: IdSection,
    /// Where the machine ID comes from.
    pub machine: MachineSection,
    /// Clock-rollback policy and sequence start.
    pub clock: ClockSection,
    /// The ZooKeeper lease, used when `machine.source = "zookeeper"`.
    pub zookeeper: ZooKeeperSection,
    /// The etcd lease, used when `machine.source = "etcd"` (feature `etcd`).
    pub etcd: EtcdSection,
    /// Recorded in every ID and picks the machine pool; set by the wrapper, not the file.
    #[serde(skip)]
    pub gen_method: GenMethod,
    /// How long a start waits for another process to let go of the state file or of the
    /// static machine ID on this host before it is refused naming the holder: zero (refuse at
    /// once, the servers' way) unless the program sets it (`vesta gen` waits, so parallel runs
    /// take turns); set by the wrapper, not the file.
    #[serde(skip)]
    pub hold_wait: Duration,
}

impl IssuerConfig {
    /// A builder starting from the defaults (max-peak, Vesta's epoch, static machine ID 0 of
    /// the embed pool); its [`build`](IssuerConfigBuilder::build) checks every value.
    pub fn builder() -> IssuerConfigBuilder {
        IssuerConfigBuilder::default()
    }

    /// Loads and checks a TOML file in the format of `conf/vesta.toml` (every key optional,
    /// unknown keys refused). Errors name the file, the key and the allowed values. Feature
    /// `toml` (default).
    #[cfg(feature = "toml")]
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let config: Self = load_toml(path.as_ref())?;
        config.validate()?;
        Ok(config)
    }

    /// Parses and checks TOML text, as [`from_toml_file`](Self::from_toml_file) does.
    #[cfg(feature = "toml")]
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: Self = parse_toml(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every value without starting anything: the ranges of `[id]` and `[clock]`, the
    /// pools, the static machine ID in the pool of the genMethod, or for a ZooKeeper lease the
    /// `[zookeeper]` section (a static `machine.id` is then an error, not silently ignored).
    /// [`Issuer::start`](crate::Issuer::start) makes the same checks.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.machine.source != MachineSource::Ordinal && self.machine.ordinal_offset != 0 {
            return Err(ConfigError::Inconsistent(format!(
                "machine.ordinal_offset {} is set but machine.source is not \"ordinal\"",
                self.machine.ordinal_offset
            )));
        }
        let machine = match self.machine.source {
            MachineSource::Static | MachineSource::Ordinal => {
                let stores = self.registries();
                if stores.len() > 1 {
                    return Err(ConfigError::Inconsistent(format!(
                        "{} are all set with a static machine ID: register it in one of them",
                        stores.join(" and ")
                    )));
                }
                match stores.first() {
                    // Registered in the SQL table: its settings must hold too.
                    Some(&"machine.db") => {
                        sql_pool_start(self)?;
                    }
                    // Registered in etcd or ZooKeeper, likewise.
                    Some(&"etcd.endpoints") => {
                        etcd_pool_start(self)?;
                    }
                    Some(_) => {
                        zk_settings(self)?;
                    }
                    None => {}
                }
                if self.machine.state_file.is_some() {
                    self.state_file_interval()?;
                }
                self.static_machine()?
            }
            MachineSource::Zookeeper => {
                if let Some(id) = self.machine.id {
                    return Err(ConfigError::Inconsistent(format!(
                        "machine.id {id} is set but machine.source is zookeeper, which leases \
                         a machine ID from the pool: remove machine.id, or use source = \
                         \"static\""
                    )));
                }
                zk_settings(self)?
            }
            MachineSource::Etcd => {
                if let Some(id) = self.machine.id {
                    return Err(ConfigError::Inconsistent(format!(
                        "machine.id {id} is set but machine.source is etcd, which leases a \
                         machine ID from the pool: remove machine.id, or use source = \"static\""
                    )));
                }
                etcd_pool_start(self)?
            }
            MachineSource::Sql => {
                if let Some(id) = self.machine.id {
                    return Err(ConfigError::Inconsistent(format!(
                        "machine.id {id} is set but machine.source is sql, which leases a \
                         machine ID from the pool: remove machine.id, or use source = \"static\""
                    )));
                }
                sql_pool_start(self)?
            }
        };
        self.generator_config(machine)?
            .validate()
            .map_err(ConfigError::from)
    }

    /// The lease stores a static (or ordinal) machine ID is registered in, by the key that
    /// configures each: `machine.db`, `etcd.endpoints`, `zookeeper.connect` (at most one may be
    /// set; [`validate`](Self::validate) says so).
    pub fn registries(&self) -> Vec<&'static str> {
        let set = [
            ("machine.db", self.machine.db.is_some()),
            ("etcd.endpoints", !self.etcd.endpoints.is_empty()),
            (
                "zookeeper.connect",
                !self.zookeeper.connect.trim().is_empty(),
            ),
        ];
        set.into_iter().filter(|s| s.1).map(|s| s.0).collect()
    }

    /// The name a program's own state file of this config's static machine ID takes in a
    /// directory of its choice (`vesta gen` keeps one per user): one file per ID space (the
    /// layout's fields and unit, its fixed values and the genMethod) and machine ID, and not
    /// per epoch, so that an epoch changed under it is refused rather than met with a fresh
    /// file. E.g. `vesta-max-peak.0f3c...e2.m0.state`.
    pub fn state_file_name(&self) -> Result<String, ConfigError> {
        let space = crate::lease::counted_in::IdSpace::of(&self.layout()?, self.gen_method);
        Ok(format!(
            "{}.{}.m{}.state",
            space.name,
            space.key,
            self.static_machine()?
        ))
    }

    /// The SQL lease's settings, checked (`source = "sql"`).
    #[cfg(feature = "sql")]
    pub fn sql_lease(&self) -> Result<crate::lease::SqlSettings, ConfigError> {
        crate::lease::SqlSettings::from_config(self)
    }

    /// The layout of the issued IDs with the epoch and version in force.
    pub fn layout(&self) -> Result<Layout, ConfigError> {
        self.id.layout()
    }

    /// The machine pools of this config: `machine.server_pool_start`, else the default split of
    /// the layout's node width.
    pub fn pools(&self) -> Result<MachinePools, ConfigError> {
        let layout = self.layout()?;
        match self.machine.server_pool_start {
            None => Ok(layout.default_pools()),
            Some(start) => Ok(MachinePools::with_node_bits(layout.node_bits(), start)
                .map_err(CoreConfigError::from)?),
        }
    }

    /// The static machine ID: the configured one, else the first of the genMethod's pool; for
    /// `source = "ordinal"`, the host name's trailing number plus `machine.ordinal_offset`.
    pub fn static_machine(&self) -> Result<u64, ConfigError> {
        if self.machine.source == MachineSource::Ordinal {
            if let Some(id) = self.machine.id {
                return Err(ConfigError::Inconsistent(format!(
                    "machine.id {id} is set but machine.source is ordinal, which takes the \
                     machine ID from the host name: remove machine.id, or use source = \"static\""
                )));
            }
            let host = ordinal_host_name();
            let machine = ordinal_machine(&host, self.machine.ordinal_offset)?;
            let (name, range) = self
                .pools()?
                .for_gen_method(self.gen_method)
                .map_err(CoreConfigError::from)?;
            if !range.contains(&machine) {
                return Err(ConfigError::Inconsistent(format!(
                    "machine.source = \"ordinal\": host name {host:?} gives machine ID {machine} \
                     (ordinal + machine.ordinal_offset {}), outside the {name} pool {}..={}",
                    self.machine.ordinal_offset,
                    range.start(),
                    range.end()
                )));
            }
            return Ok(machine);
        }
        match self.machine.id {
            Some(id) => Ok(id),
            None => {
                let (_, range) = self
                    .pools()?
                    .for_gen_method(self.gen_method)
                    .map_err(CoreConfigError::from)?;
                Ok(*range.start())
            }
        }
    }

    /// The longest the start guard waits (`machine.start_guard_max_wait_ms`), for both sources.
    pub(crate) fn start_guard_max_wait(&self) -> Duration {
        Duration::from_millis(self.machine.start_guard_max_wait_ms)
    }

    /// How often a static source rewrites its state file (`machine.state_file_interval_ms`).
    pub(crate) fn state_file_interval(&self) -> Result<Duration, ConfigError> {
        if cfg!(not(feature = "state-file")) {
            return Err(ConfigError::Inconsistent(STATE_FILE_FEATURE.into()));
        }
        let ms = self.machine.state_file_interval_ms;
        if ms < MIN_STATE_FILE_INTERVAL_MS {
            return Err(ConfigError::Inconsistent(format!(
                "machine.state_file_interval_ms {ms} is too small: at least \
                 {MIN_STATE_FILE_INTERVAL_MS}"
            )));
        }
        Ok(Duration::from_millis(ms))
    }

    /// Every wait a start or a lease may make is bounded: a key set past its bound is refused
    /// (a start must end with an issuer or an error, never hang for days). The lower bounds are
    /// each source's own checks.
    fn check_waits(&self) -> Result<(), ConfigError> {
        const MINUTE: u64 = 60_000;
        let (m, z, e) = (&self.machine, &self.zookeeper, &self.etcd);
        for (key, value, min, max) in [
            (
                "machine.state_file_interval_ms",
                m.state_file_interval_ms,
                10,
                MINUTE,
            ),
            (
                "machine.start_guard_max_wait_ms",
                m.start_guard_max_wait_ms,
                0,
                10 * MINUTE,
            ),
            ("machine.lease_ms", m.lease_ms, 300, 10 * MINUTE),
            ("machine.db_timeout_ms", m.db_timeout_ms, 1, 10 * MINUTE),
            (
                "clock.sync_wait_ms",
                self.clock.sync_wait_ms,
                0,
                60 * MINUTE,
            ),
            (
                "zookeeper.session_timeout_ms",
                z.session_timeout_ms,
                100,
                10 * MINUTE,
            ),
            (
                "zookeeper.connect_timeout_ms",
                z.connect_timeout_ms,
                1,
                10 * MINUTE,
            ),
            (
                "zookeeper.report_interval_ms",
                z.report_interval_ms,
                10,
                10 * MINUTE,
            ),
            ("etcd.ttl_ms", e.ttl_ms, 2_000, 10 * MINUTE),
            ("etcd.timeout_ms", e.timeout_ms, 1, 10 * MINUTE),
        ] {
            if value > max {
                return Err(ConfigError::Inconsistent(format!(
                    "{key} {value} is out of range: allowed {min}..={max}"
                )));
            }
        }
        Ok(())
    }

    /// The generator config for `machine` with no floor; checks every value.
    pub fn generator_config(&self, machine: u64) -> Result<GeneratorConfig, ConfigError> {
        self.check_waits()?;
        let margin = self.id.end_of_life_margin_days;
        if margin > IdSection::MAX_END_OF_LIFE_MARGIN_DAYS {
            return Err(ConfigError::Inconsistent(format!(
                "id.end_of_life_margin_days {margin} is out of range: allowed 0..={}",
                IdSection::MAX_END_OF_LIFE_MARGIN_DAYS
            )));
        }
        let seq_start = match self.clock.seq_start {
            SeqStartKind::Zero => SeqStart::Zero,
            SeqStartKind::Random => SeqStart::Random {
                bound: self.clock.seq_start_bound,
            },
        };
        Ok(GeneratorConfig {
            layout: self.layout()?,
            machine,
            gen_method: self.gen_method,
            pools: Some(self.pools()?),
            rollback_tolerance_ms: self.clock.rollback_tolerance_ms,
            seq_start,
            floor: None,
        })
    }
}

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
                        "a custom layout is described as a table: [id.layout] with unit_ms,                          epoch and fields (see conf/vesta.toml)",
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

/// The first ID of the pool an SQL lease draws from, once its settings are checked.
#[cfg(feature = "sql")]
fn sql_pool_start(config: &IssuerConfig) -> Result<u64, ConfigError> {
    Ok(*config.sql_lease()?.pool.start())
}

#[cfg(not(feature = "sql"))]
fn sql_pool_start(_: &IssuerConfig) -> Result<u64, ConfigError> {
    Err(ConfigError::Inconsistent(
        "machine.db (an SQL lease or a registered static ID) needs vesta-embed built with its \
         feature `sql`"
            .into(),
    ))
}

/// The first ID of the pool a ZooKeeper lease draws from, once its settings are checked.
fn zk_settings(config: &IssuerConfig) -> Result<u64, ConfigError> {
    if cfg!(not(feature = "zookeeper")) {
        return Err(ConfigError::Inconsistent(
            "machine.source = \"zookeeper\" (or a static ID registered with \
             zookeeper.connect) needs vesta-embed built with its feature `zookeeper`"
                .into(),
        ));
    }
    Ok(*LeaseSettings::from_config(config)?.pool.start())
}

/// The first ID of the pool an etcd lease draws from, once its settings are checked.
#[cfg(feature = "etcd")]
fn etcd_pool_start(config: &IssuerConfig) -> Result<u64, ConfigError> {
    Ok(*crate::lease::EtcdSettings::from_config(config)?
        .pool
        .start())
}

#[cfg(not(feature = "etcd"))]
fn etcd_pool_start(_: &IssuerConfig) -> Result<u64, ConfigError> {
    Err(ConfigError::Inconsistent(
        "machine.source = \"etcd\" needs vesta-embed built with its feature `etcd`".into(),
    ))
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

/// `[machine]`: the machine ID and the pools.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct MachineSection {
    /// `static`, `zookeeper`, `ordinal` or `sql`.
    pub source: MachineSource,
    /// The static machine ID; when absent, the first ID of the genMethod's pool.
    pub id: Option<u64>,
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
    /// ZooKeeper or the state file, for either source); a clock further behind is a startup
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
}

impl Default for ClockSection {
    fn default() -> Self {
        ClockSection {
            rollback_tolerance_ms: None,
            seq_start: SeqStartKind::Zero,
            seq_start_bound: 64,
            require_sync: RequireSync::Warn,
            sync_wait_ms: 60_000,
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

/// The host name an ordinal is read from: `$HOSTNAME` (what Kubernetes sets to the pod name),
/// else the system's host name.
fn ordinal_host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(crate::lease::host_name)
}

/// The machine ID of a StatefulSet pod named `host` (`NAME-ORDINAL`): its trailing decimal
/// number plus `offset`. A name without one, or a sum past `u64`, is refused naming the host.
pub fn ordinal_machine(host: &str, offset: u64) -> Result<u64, ConfigError> {
    let digits = host.len() - host.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let tail = &host[host.len() - digits..];
    let ordinal = tail.parse::<u64>().map_err(|_| {
        ConfigError::Inconsistent(if tail.is_empty() {
            format!(
                "machine.source = \"ordinal\": host name {host:?} has no trailing number (a \
                 StatefulSet pod is named NAME-ORDINAL); set HOSTNAME or use source = \"static\""
            )
        } else {
            format!("machine.source = \"ordinal\": the ordinal of host name {host:?} is too large")
        })
    })?;
    ordinal.checked_add(offset).ok_or_else(|| {
        ConfigError::Inconsistent(format!(
            "machine.source = \"ordinal\": ordinal {ordinal} + machine.ordinal_offset {offset} \
             overflows"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinal_is_the_host_names_trailing_number_plus_the_offset() {
        assert_eq!(ordinal_machine("vesta-0", 0).unwrap(), 0);
        assert_eq!(ordinal_machine("vesta-17", 0).unwrap(), 17);
        assert_eq!(ordinal_machine("ids-2-42", 924).unwrap(), 966);
        assert_eq!(ordinal_machine("7", 1).unwrap(), 8);
        let err = ordinal_machine("vesta", 0).unwrap_err().to_string();
        assert!(
            err.contains("\"vesta\"") && err.contains("no trailing number"),
            "{err}"
        );
        let err = ordinal_machine("vesta-99999999999999999999999", 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("too large"), "{err}");
        let err = ordinal_machine("vesta-5", u64::MAX)
            .unwrap_err()
            .to_string();
        assert!(err.contains("overflows"), "{err}");
    }

    #[test]
    fn ordinal_keys_are_checked_against_the_source() {
        let err = IssuerConfig::from_toml_str(
            "[machine]
ordinal_offset = 3
",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("ordinal_offset 3") && err.contains("not \"ordinal\""),
            "{err}"
        );
        let err = IssuerConfig::from_toml_str(
            "[machine]
source = \"ordinal\"
id = 4
",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("machine.id 4") && err.contains("ordinal"),
            "{err}"
        );
    }

    #[test]
    fn empty_file_is_the_default() {
        assert_eq!(
            IssuerConfig::from_toml_str("").unwrap(),
            IssuerConfig::default()
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = IssuerConfig::from_toml_str("[id]\ntpye = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("tpye"), "{err}");
        let err = IssuerConfig::from_toml_str("[machin]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("machin"), "{err}");
    }

    #[test]
    fn epoch_and_type_accept_both_spellings() {
        let c = IssuerConfig::from_toml_str(
            "[id]\ntype = \"min-granularity\"\nepoch = \"2015-01-01T00:00:00+08:00\"\n",
        )
        .unwrap();
        assert_eq!(c.id.epoch, Some(Epoch::VESTA));
        assert_eq!(c.id.id_type, Some(IdType::MinGranularity));
        let c = IssuerConfig::from_toml_str("[id]\ntype = 0\nepoch = 1420041600000\n").unwrap();
        assert_eq!(c.id.id_type, Some(IdType::MaxPeak));
        let err = IssuerConfig::from_toml_str("[id]\ntype = 2\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("type 2 is out of range"), "{err}");
    }

    /// A value of the wrong kind or sign names the key and what it takes, not "did not match
    /// any variant of untagged enum".
    #[test]
    fn a_bad_epoch_or_type_names_its_key_and_forms() {
        let accepted = "ms since 1970 (0 or more) or an RFC 3339 date-time after 1970";
        for (toml, want) in [
            (
                "[id]\nepoch = -5\n",
                format!("invalid config: id.epoch `-5` is not valid: expected {accepted} (line 2)"),
            ),
            (
                "[id]\nepoch = \"yesterday\"\n",
                format!(
                    "invalid config: id.epoch `yesterday` is not valid: expected {accepted} \
                     (line 2)"
                ),
            ),
            (
                "[id]\nepoch = 1.5\n",
                format!(
                    "invalid config: invalid type: floating point `1.5`, expected id.epoch as \
                     {accepted} (line 2)"
                ),
            ),
            (
                "[id]\ntype = -1\n",
                "invalid config: type `-1` is not valid: expected max-peak (seconds), \
                 min-granularity (millis), 0 or 1 (line 2)"
                    .to_owned(),
            ),
            (
                "[id]\ntype = true\n",
                "invalid config: invalid type: boolean `true`, expected type as max-peak \
                 (seconds), min-granularity (millis), 0 or 1 (line 2)"
                    .to_owned(),
            ),
            (
                "[id.layout]\nunit_ms = 1\nepoch = -5\nfields = []\n",
                format!(
                    "invalid config: id.layout.epoch `-5` is not valid: expected {accepted} \
                     (line 3)"
                ),
            ),
        ] {
            let err = IssuerConfig::from_toml_str(toml).unwrap_err().to_string();
            assert_eq!(err, want, "{toml}");
        }
        let c = IssuerConfig::from_toml_str("[id]\nepoch = 0\ntype = 1\n").unwrap();
        assert_eq!(c.id.epoch, Some(Epoch::from_unix_ms(0)));
        assert_eq!(c.id.id_type, Some(IdType::MinGranularity));
    }

    #[test]
    fn shipped_conf_file_is_the_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf/vesta.toml");
        assert_eq!(
            IssuerConfig::from_toml_file(path).unwrap(),
            IssuerConfig::default()
        );
    }

    #[test]
    fn a_key_that_moved_sections_says_where_it_went() {
        let err = IssuerConfig::from_toml_str("[zookeeper]\nstart_guard_max_wait_ms = 3000\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown field `start_guard_max_wait_ms`"),
            "{err}"
        );
        assert!(
            err.contains("start_guard_max_wait_ms moved to [machine]: see CHANGELOG.md"),
            "{err}"
        );
        assert!(err.contains("(line 2)"), "{err}");
        let c = IssuerConfig::from_toml_str(
            "[machine]\nstart_guard_max_wait_ms = 3000\nstate_file_interval_ms = 250\n",
        )
        .unwrap();
        assert_eq!(c.start_guard_max_wait(), Duration::from_millis(3000));
        assert_eq!(c.state_file_interval().unwrap(), Duration::from_millis(250));
        // Other unknown keys get no hint.
        let err = IssuerConfig::from_toml_str("[zookeeper]\nreport_interval = 1\n")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("moved"), "{err}");
    }

    /// A wait set past its bound is refused by name, at load and at start alike.
    #[test]
    fn every_wait_has_an_upper_bound() {
        for (key, text) in [
            (
                "machine.start_guard_max_wait_ms",
                "[machine]\nstart_guard_max_wait_ms = 600001",
            ),
            (
                "machine.state_file_interval_ms",
                "[machine]\nstate_file_interval_ms = 60001",
            ),
            ("clock.sync_wait_ms", "[clock]\nsync_wait_ms = 3600001"),
            (
                "zookeeper.session_timeout_ms",
                "[zookeeper]\nsession_timeout_ms = 600001",
            ),
            (
                "etcd.timeout_ms",
                "[etcd]\ntimeout_ms = 18446744073709551615",
            ),
        ] {
            let err = IssuerConfig::from_toml_str(text).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains("out of range"), "{err}");
        }
        let mut c = IssuerConfig::default();
        c.machine.start_guard_max_wait_ms = u64::MAX;
        let err =
            crate::Issuer::start_with_clock(c, vesta_core::ManualClock::new(1_700_000_000_000))
                .unwrap_err()
                .to_string();
        assert!(err.contains("allowed 0..=600000"), "{err}");
        // The largest allowed loads.
        IssuerConfig::from_toml_str("[machine]\nstart_guard_max_wait_ms = 600000").unwrap();
    }

    #[test]
    fn a_state_file_interval_below_10_ms_is_refused_by_name() {
        let mut c = IssuerConfig::default();
        c.machine.state_file_interval_ms = 9;
        let err = c.state_file_interval().unwrap_err().to_string();
        assert!(
            err.contains("machine.state_file_interval_ms 9 is too small: at least 10"),
            "{err}"
        );
    }

    #[test]
    fn static_machine_defaults_to_the_pools_first_id() {
        let mut c = IssuerConfig::default();
        assert_eq!(c.static_machine().unwrap(), 0);
        c.gen_method = GenMethod::Server;
        assert_eq!(c.static_machine().unwrap(), 924);
    }

    #[test]
    fn a_preset_layout_takes_its_own_epoch_unless_one_is_set() {
        let c = IssuerConfig::from_toml_str("[id]\nlayout = \"leaf\"\n").unwrap();
        let leaf = c.layout().unwrap();
        assert_eq!(leaf.name(), "leaf");
        assert_eq!(leaf.epoch().unix_ms(), 1_288_834_974_657);
        // A 10-bit worker: Vesta's split of the pools.
        assert_eq!(c.pools().unwrap().server(), 924..=1023);
        let c = IssuerConfig::from_toml_str(
            "[id]\nlayout = \"sonyflake\"\nepoch = \"2020-01-01T00:00:00Z\"\n[machine]\nid = 40000\n",
        )
        .unwrap();
        assert_eq!(c.layout().unwrap().epoch().unix_ms(), 1_577_836_800_000);
        assert_eq!(c.pools().unwrap().embed(), 0..=59135);
    }

    #[test]
    fn vesta_only_keys_with_another_layout_are_refused_by_name() {
        let err =
            IssuerConfig::from_toml_str("[id]\nlayout = \"leaf\"\ntype = \"min-granularity\"\n")
                .unwrap_err()
                .to_string();
        assert_eq!(
            err,
            "invalid config: id.type applies to the vesta layout only, not leaf: remove it"
        );
        let err = IssuerConfig::from_toml_str("[id]\nlayout = \"twitter\"\nversion = 1\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("id.version applies to the vesta layout only"),
            "{err}"
        );
        let err = IssuerConfig::from_toml_str("[id]\nversion = 2\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("id.version 2 is out of range: allowed 0..=1"),
            "{err}"
        );
        let err = IssuerConfig::from_toml_str("[id]\nlayout = \"snowflake\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("layout `snowflake` is not valid"), "{err}");
        assert!(err.contains("leaf, twitter"), "{err}");
        let err = IssuerConfig::from_toml_str("[id]\nlayout = \"custom\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("described as a table: [id.layout]"), "{err}");
    }

    #[test]
    fn a_custom_layout_is_described_under_id_layout() {
        let toml = r#"
[id.layout]
name = "orders"
unit_ms = 1
epoch = "2020-01-01T00:00:00Z"
fields = [
  { kind = "time", bits = 41 },
  { kind = "node", parts = [{ name = "idc", bits = 6 }, { name = "business", bits = 6 }] },
  { kind = "seq", bits = 10 },
]

[machine]
id = 3000
"#;
        let c = IssuerConfig::from_toml_str(toml).unwrap();
        let layout = c.layout().unwrap();
        assert_eq!(layout.name(), "orders");
        assert_eq!(layout.describe_bits(), "time 22-62, node 10-21, seq 0-9");
        assert_eq!(c.pools().unwrap().server(), 3696..=4095);
        let bad = toml.replace("bits = 41", "bits = 42");
        let err = IssuerConfig::from_toml_str(&bad).unwrap_err();
        // Said once: the message is not repeated as the error's source (printed by the
        // `vesta` binary after it).
        assert!(std::error::Error::source(&err).is_none(), "{err:?}");
        assert_eq!(
            err.to_string(),
            "invalid config: id.layout: the fields take 64 bits: allowed at most 63 (signed = \
             true keeps the top bit 0 for SQL BIGINT and Java long)"
        );
        let bad = toml.replace("kind = \"seq\"", "kind = \"sequence\"");
        let err = IssuerConfig::from_toml_str(&bad).unwrap_err().to_string();
        assert!(err.contains("kind `sequence` is not valid"), "{err}");
        let bad = toml.replace("id = 3000", "id = 4096");
        let err = IssuerConfig::from_toml_str(&bad).unwrap_err().to_string();
        assert!(
            err.contains("machine 4096 is outside the embed pool 0..=3695"),
            "{err}"
        );
    }
}
