//! The issuer's configuration: built in code ([`IssuerConfig::builder`], or the public fields
//! of the sections) or loaded from TOML ([`IssuerConfig::from_toml_file`], `conf/vesta.toml`).
//! Unknown keys are errors naming the key, and every value is checked
//! ([`IssuerConfig::validate`]) before anything starts.
//!
//! The sections (`[id]`, `[machine]`, `[clock]`, `[zookeeper]`, `[etcd]`: `sections`) are
//! separate types so the TCP and REST servers reuse them in their own config files beside a
//! section of their own. Which machine ID an issuer uses and what keeps it honest is decided
//! once, in `plan` ([`MachinePlan`]).

mod builder;
mod members;
mod plan;
mod sections;
#[cfg(test)]
mod tests;
#[cfg(feature = "toml")]
mod toml;

pub use builder::IssuerConfigBuilder;
pub use members::MAX_IDS;
pub(crate) use plan::Wanted;
pub use plan::{
    ChoiceConflict, FixedFrom, Keeper, MachineChoice, MachinePlan, MachineSections, Registry,
    ordinal_machine,
};
pub use sections::{
    ClockRead, ClockSection, EtcdSection, IdSection, LayoutChoice, MachineSection, MachineSource,
    RequireSync, SeqStartKind, ZooKeeperSection,
};
#[cfg(feature = "toml")]
pub use toml::{load_toml, parse_toml};

#[cfg(feature = "toml")]
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use vesta_core::{
    ConfigError as CoreConfigError, GenMethod, GeneratorConfig, Layout, LayoutError, MachinePools,
    SeqStart,
};

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

/// Why a state file is refused by a build without it.
#[cfg(not(feature = "state-file"))]
pub(crate) const STATE_FILE_FEATURE: &str =
    "machine.state_file needs vesta-embed built with its feature `state-file`";

/// The shortest allowed `machine.state_file_interval_ms`: one fsync'd write per 10 ms at most.
#[cfg(feature = "state-file")]
const MIN_STATE_FILE_INTERVAL_MS: u64 = 10;

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
    /// Hold a static machine ID on this host even without a state file (with one it is always
    /// held): see [`IssuerConfigBuilder::hold_on_host`]. The `vesta` command always does; set
    /// by the program, not the file.
    #[serde(skip)]
    pub hold_on_host: bool,
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

    /// The `[id]` and `[machine]` sections of any vesta config file (an embedded issuer's, or
    /// the TCP or REST server's, whose other sections are left unread), for the tools that only
    /// read the layout (`vesta layout|explain|make --config`). Unknown keys inside the two
    /// sections are refused as ever; the layout and the machine pools are checked, not the
    /// machine plan (a server's machine ID is outside the embedded pool, and that is not the
    /// layout's business). The other sections keep their defaults.
    #[cfg(feature = "toml")]
    pub fn layout_sections_from_toml_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        /// The two sections; serde skips every other top-level key.
        #[derive(Deserialize)]
        #[serde(default)]
        #[derive(Default)]
        struct LayoutSections {
            id: IdSection,
            machine: MachineSection,
        }
        let read: LayoutSections = load_toml(path.as_ref())?;
        let config = IssuerConfig {
            id: read.id,
            machine: read.machine,
            ..IssuerConfig::default()
        };
        config.pools()?;
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
    /// pools, the machine plan ([`plan`](Self::plan): the static machine ID in the pool of the
    /// genMethod, a registry's settings, a static `machine.id` with a leasing source refused
    /// rather than ignored) and every wait's bound. [`Issuer::start`](crate::Issuer::start)
    /// makes the same checks.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let plan = self.plan()?;
        self.generator_config(plan.first_machine())?
            .validate()
            .map_err(ConfigError::from)
    }

    /// The name a program's own state file of this config's static machine ID takes in a
    /// directory of its choice (`vesta gen` keeps one per user): one file per ID space (where
    /// the node field sits and the bits every ID carries, whatever the layout is called) and
    /// machine ID, and not per epoch or name, so that an epoch changed under it, or the same
    /// space under another name (Leaf and Twitter), meets the file's mark rather than a fresh
    /// file. E.g. `space-0f3c...e2.m0.state`.
    #[cfg(feature = "state-file")]
    pub fn state_file_name(&self) -> Result<String, ConfigError> {
        let space = crate::lease::counted_in::IdSpace::of(&self.layout()?, self.gen_method);
        Ok(format!(
            "space-{}.m{}.state",
            space.key(),
            self.static_machine()?
        ))
    }

    /// The SQL lease's settings, as the plan builds them (`source = "sql"`, or a static ID
    /// registered with `machine.db`).
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

    /// The longest the start guard waits (`machine.start_guard_max_wait_ms`), for every source.
    pub(crate) fn start_guard_max_wait(&self) -> Duration {
        Duration::from_millis(self.machine.start_guard_max_wait_ms)
    }

    /// How often a static source rewrites its state file (`machine.state_file_interval_ms`).
    #[cfg(feature = "state-file")]
    pub(crate) fn state_file_interval(&self) -> Result<Duration, ConfigError> {
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
