//! The machine plan: which machine ID an issuer uses and what keeps it honest, decided once from
//! the config and checked there ([`IssuerConfig::plan`]). Validation, the start, each
//! registry's settings, the `vesta` command and the servers' console read the same value, so
//! they cannot disagree.
//!
//! An ID is fixed (`static`, or `ordinal` from the host name: [`MachineChoice`]) or leased from
//! a registry's pool. Its mark is kept nowhere, in a state file, or in one registry (ZooKeeper,
//! an SQL table, etcd), which also refuses a second live holder of a fixed ID; a fixed ID
//! registered nowhere may also be held on this host ([`MachinePlan::host_hold`]). A registry
//! this build leaves out is refused here, naming its feature: the features stay inside
//! [`Registry::keeper`]. A registry's settings are built from the plan's decision ([`Wanted`])
//! and their own section, never from `machine.source` again.

use std::fmt;
use std::ops::RangeInclusive;
#[cfg(feature = "state-file")]
use std::path::PathBuf;

use vesta_core::ConfigError as CoreConfigError;

use super::{
    ConfigError, EtcdSection, IssuerConfig, MachineSection, MachineSource, ZooKeeperSection,
};

/// Which machine ID an issuer uses, and what keeps it honest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MachinePlan {
    /// How the machine ID is chosen: fixed by the config (and how), or leased.
    pub choice: MachineChoice,
    /// The pool of the genMethod (`embed` or `server`) ...
    pub pool_name: &'static str,
    /// ... and its IDs: those a lease may take (a fixed ID lies in it).
    pub pool: RangeInclusive<u64>,
    /// Where the mark is kept.
    pub keeper: Keeper,
    /// The fixed ID is held on this host for the issuer's life (a second holder in its ID
    /// space on this host is refused): with a state file always, without one when
    /// [`IssuerConfig::hold_on_host`] asks. A registry refuses a second holder itself.
    pub host_hold: bool,
    /// How many machine IDs the issuer holds (`machine.ids`, at least 1): a fixed plan's run
    /// from [`fixed`](Self::fixed) up, or as many leases. Each is planned alone
    /// ([`members`](Self::members)).
    pub ids: u64,
}

impl MachinePlan {
    /// The machine ID the config fixes (the first of [`ids`](Self::ids)); `None` when a
    /// registry leases them from the pool.
    pub fn fixed(&self) -> Option<u64> {
        match self.choice {
            MachineChoice::Fixed { machine, .. } => Some(machine),
            MachineChoice::Leased => None,
        }
    }

    /// The machine ID an issuer starts on: the fixed one, else the pool's first (a placeholder
    /// until the lease is held; the generator is fenced meanwhile).
    pub fn first_machine(&self) -> u64 {
        self.fixed().unwrap_or(*self.pool.start())
    }

    /// The registry that leases the ID or that the fixed one is registered in, if any.
    pub fn registry(&self) -> Option<Registry> {
        self.keeper.registry()
    }

    /// What the plan asks of its registry.
    fn wanted(&self) -> Wanted {
        Wanted {
            fixed: self.fixed(),
            pool_name: self.pool_name,
            pool: self.pool.clone(),
        }
    }
}

/// Where the machine ID comes from, for people: `static, registered in ZooKeeper z1:2181 under
/// /vesta/default`, `leased from etcd http://e1:2379 under /vesta/default`, `static, not
/// registered anywhere, its mark in the state file /var/lib/vesta/m5.state, held on this
/// host`. An SQL database's URL is not shown (it names a user and host; the scope is).
impl fmt::Display for MachinePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let from = match &self.choice {
            MachineChoice::Leased => {
                if self.ids > 1 {
                    write!(f, "{} machine IDs ", self.ids)?;
                }
                return match self.keeper.describe() {
                    Some(registry) => write!(f, "leased from {registry}"),
                    None => f.write_str("leased"),
                };
            }
            MachineChoice::Fixed { from, .. } => from,
        };
        let times = match self.ids {
            1 => String::new(),
            k => format!(" × {k}"),
        };
        match from {
            FixedFrom::Config => f.write_str("static")?,
            FixedFrom::PoolDefault => f.write_str("static (none chosen: the pool's first)")?,
            FixedFrom::Ordinal { host, offset: 0 } => {
                write!(f, "StatefulSet ordinal of host {host}{times}")?
            }
            FixedFrom::Ordinal { host, offset } => {
                write!(f, "StatefulSet ordinal of host {host}{times} + {offset}")?
            }
        }
        if let Some(range) = self.fixed_range().filter(|_| self.ids > 1) {
            write!(
                f,
                ", {} machine IDs {}..={}",
                self.ids,
                range.start(),
                range.end()
            )?;
        }
        match self.keeper.describe() {
            Some(registry) => write!(f, ", registered in {registry}")?,
            None => f.write_str(", not registered anywhere")?,
        }
        #[cfg(feature = "state-file")]
        if let Keeper::StateFile(path) = &self.keeper {
            match self.ids {
                1 => write!(f, ", its mark in the state file {}", path.display())?,
                _ => write!(
                    f,
                    ", their marks in the state file {} and one beside it per further ID",
                    path.display()
                )?,
            }
        }
        if self.host_hold {
            f.write_str(", held on this host")?;
        }
        Ok(())
    }
}

/// How the machine ID is chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MachineChoice {
    /// Fixed by the config: only this ID is used (and, with a registry, registered there).
    Fixed {
        /// The machine ID.
        machine: u64,
        /// Where the config takes it from.
        from: FixedFrom,
    },
    /// Leased from the registry's pool at start (and again after a lost lease).
    Leased,
}

/// Where a fixed machine ID comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FixedFrom {
    /// `machine.id` (or a command line's `--machine N`).
    Config,
    /// None chosen: the pool's default for the genMethod (an embedded issuer's 0, a server's
    /// first of Vesta's share) — fine for a try, a duplicate on a second such issuer.
    PoolDefault,
    /// `source = "ordinal"`: the host name's trailing number plus `machine.ordinal_offset`.
    Ordinal {
        /// The host name it was read from.
        host: String,
        /// `machine.ordinal_offset`.
        offset: u64,
    },
}

/// What the plan asks of a registry: register its fixed ID, or lease one from the pool. The one
/// input a registry's settings take from the plan, beside their own section.
#[cfg_attr(
    not(any(feature = "zookeeper", feature = "sql", feature = "etcd")),
    allow(dead_code)
)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// The fixed ID to register; `None`: lease one.
    pub fixed: Option<u64>,
    /// `embed` or `server`.
    pub pool_name: &'static str,
    /// The IDs a lease may take.
    pub pool: RangeInclusive<u64>,
}

/// Where a machine ID's mark is kept (and, for a registry, what refuses a second holder). A
/// build without a source's feature has no variant for it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Keeper {
    /// Nowhere: a fixed ID without a state file. A start takes the floor after whatever an
    /// earlier run could have issued (docs/machine-ids.md).
    Nothing,
    /// A local state file of a fixed ID (feature `state-file`).
    #[cfg(feature = "state-file")]
    StateFile(PathBuf),
    /// ZooKeeper: a leased ID, or a fixed one registered there (feature `zookeeper`).
    #[cfg(feature = "zookeeper")]
    ZooKeeper(Box<crate::lease::ZkSettings>),
    /// An SQL table: a leased ID, or a fixed one registered there (feature `sql`).
    #[cfg(feature = "sql")]
    Sql(Box<crate::lease::SqlSettings>),
    /// etcd v3: a leased ID, or a fixed one registered there (feature `etcd`).
    #[cfg(feature = "etcd")]
    Etcd(Box<crate::lease::EtcdSettings>),
}

impl Keeper {
    /// The registry it is, if it is one.
    pub fn registry(&self) -> Option<Registry> {
        match self {
            #[cfg(feature = "zookeeper")]
            Keeper::ZooKeeper(_) => Some(Registry::ZooKeeper),
            #[cfg(feature = "sql")]
            Keeper::Sql(_) => Some(Registry::Sql),
            #[cfg(feature = "etcd")]
            Keeper::Etcd(_) => Some(Registry::Etcd),
            _ => None,
        }
    }

    /// A registry for people (the SQL URL left out), or `None` for a local keeper.
    fn describe(&self) -> Option<String> {
        match self {
            #[cfg(feature = "zookeeper")]
            Keeper::ZooKeeper(s) => Some(format!("ZooKeeper {} under {}", s.connect, s.root)),
            #[cfg(feature = "sql")]
            Keeper::Sql(s) => Some(format!("the SQL table vesta_machine, scope {:?}", s.scope)),
            #[cfg(feature = "etcd")]
            Keeper::Etcd(s) => Some(format!("etcd {} under {}", s.shown, s.root)),
            _ => None,
        }
    }
}

/// A registry of machine IDs: what leases one, or refuses a second holder of a fixed one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Registry {
    /// ZooKeeper (`[zookeeper] connect`).
    ZooKeeper,
    /// An SQL database's `vesta_machine` table (`[machine] db`).
    Sql,
    /// etcd v3 (`[etcd] endpoints`).
    Etcd,
}

impl Registry {
    /// In the order a config's keys are named in messages.
    const ALL: [Registry; 3] = [Registry::Sql, Registry::Etcd, Registry::ZooKeeper];

    /// The key that configures it.
    pub const fn key(self) -> &'static str {
        match self {
            Registry::ZooKeeper => "zookeeper.connect",
            Registry::Sql => "machine.db",
            Registry::Etcd => "etcd.endpoints",
        }
    }

    /// The source that leases from it.
    pub const fn source(self) -> MachineSource {
        match self {
            Registry::ZooKeeper => MachineSource::Zookeeper,
            Registry::Sql => MachineSource::Sql,
            Registry::Etcd => MachineSource::Etcd,
        }
    }

    /// The vesta-embed feature it needs, and its name in messages.
    const fn feature(self) -> (&'static str, &'static str) {
        match self {
            Registry::ZooKeeper => ("zookeeper", "ZooKeeper"),
            Registry::Sql => ("sql", "an SQL database"),
            Registry::Etcd => ("etcd", "etcd"),
        }
    }

    fn is_set(self, config: &IssuerConfig) -> bool {
        match self {
            Registry::ZooKeeper => !config.zookeeper.connect.trim().is_empty(),
            Registry::Sql => config.machine.db.is_some(),
            Registry::Etcd => !config.etcd.endpoints.is_empty(),
        }
    }

    /// Its keeper for what the plan `wanted`, its settings built from its own section of
    /// `config` and checked, or why this build has none.
    #[cfg_attr(
        not(any(feature = "zookeeper", feature = "sql", feature = "etcd")),
        allow(unused_variables)
    )]
    fn keeper(self, config: &IssuerConfig, wanted: Wanted) -> Result<Keeper, ConfigError> {
        match self {
            #[cfg(feature = "zookeeper")]
            Registry::ZooKeeper => Ok(Keeper::ZooKeeper(Box::new(
                crate::lease::ZkSettings::planned(config, wanted)?,
            ))),
            #[cfg(feature = "sql")]
            Registry::Sql => Ok(Keeper::Sql(Box::new(crate::lease::SqlSettings::planned(
                config, wanted,
            )?))),
            #[cfg(feature = "etcd")]
            Registry::Etcd => Ok(Keeper::Etcd(Box::new(crate::lease::EtcdSettings::planned(
                config, wanted,
            )?))),
            #[allow(unreachable_patterns)]
            other => {
                let (feature, name) = other.feature();
                Err(ConfigError::Inconsistent(format!(
                    "a machine ID from {name} (machine.source = \"{}\", or a static ID \
                     registered with {}) needs vesta-embed built with its feature `{feature}`",
                    other.source().name(),
                    other.key()
                )))
            }
        }
    }
}

/// The sections that say which machine ID (an issuer's, or a server config's own copies).
#[derive(Debug)]
pub struct MachineSections<'a> {
    /// `[machine]`.
    pub machine: &'a mut MachineSection,
    /// `[zookeeper]`.
    pub zookeeper: &'a mut ZooKeeperSection,
    /// `[etcd]`.
    pub etcd: &'a mut EtcdSection,
}

/// A command line's machine choice that contradicts the config it completes: refused, never
/// settled silently one way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChoiceConflict {
    /// The config fixes a machine ID, and the command line gives a registry without one:
    /// leasing from the pool would silently drop the config's ID.
    #[error(
        "the config's machine.id {machine} is set, and {} is given without a machine ID, \
         which leases one from the pool instead: register {machine} there, or remove \
         machine.id",
        registry.key()
    )]
    FixedIdWithLease {
        /// The config's machine ID.
        machine: u64,
        /// The registry the command line names.
        registry: Registry,
    },
}

impl MachineSections<'_> {
    /// `--machine N` and a registry from a command line: with an ID, N is static (registered
    /// in the registry, if one is given); without, the ID is leased from the registry — unless
    /// the config fixes one ([`ChoiceConflict`]). A registry keeps the mark, so an SQL or etcd
    /// registry drops the state file (a ZooKeeper lease keeps it: the ID to prefer next time).
    pub fn choose(
        self,
        id: Option<u64>,
        registry: Option<(Registry, &str)>,
    ) -> Result<(), ChoiceConflict> {
        if let Some(id) = id {
            self.machine.source = MachineSource::Static;
            self.machine.id = Some(id);
        }
        let Some((registry, address)) = registry else {
            return Ok(());
        };
        if id.is_none()
            && let Some(machine) = self.machine.id
        {
            return Err(ChoiceConflict::FixedIdWithLease { machine, registry });
        }
        if id.is_none() {
            // A lease replaces the file's static machine ID, which a leased config may not keep.
            self.machine.source = registry.source();
            self.machine.id = None;
        }
        match registry {
            Registry::ZooKeeper => self.zookeeper.connect = address.to_owned(),
            Registry::Sql => {
                self.machine.state_file = None;
                self.machine.db = Some(address.to_owned());
            }
            Registry::Etcd => {
                self.machine.state_file = None;
                self.etcd.endpoints = address.split(',').map(|e| e.trim().to_owned()).collect();
            }
        }
        Ok(())
    }
}

impl MachineSource {
    /// The registry this source leases a machine ID from; `None` for a fixed ID (`static`,
    /// `ordinal`), which may still be registered in one ([`IssuerConfig::plan`] says).
    pub fn registry(self) -> Option<Registry> {
        Registry::ALL.into_iter().find(|r| r.source() == self)
    }
}

impl IssuerConfig {
    /// Which machine ID and what keeps it honest, every key it depends on checked: the fixed ID
    /// in the pool of the genMethod, at most one registry for it, a registry's settings, a
    /// static `machine.id` with a leasing source refused rather than ignored. The one place
    /// that decides fixed or leased: a registry's settings are built from its answer.
    pub fn plan(&self) -> Result<MachinePlan, ConfigError> {
        let m = &self.machine;
        if m.source != MachineSource::Ordinal && m.ordinal_offset != 0 {
            return Err(ConfigError::Inconsistent(format!(
                "machine.ordinal_offset {} is set but machine.source is not \"ordinal\"",
                m.ordinal_offset
            )));
        }
        let (pool_name, pool) = self
            .pools()?
            .for_gen_method(self.gen_method)
            .map_err(CoreConfigError::from)?;
        let ids = super::members::check_ids(m.ids, pool_name, &pool)?;
        let (choice, registry) = match m.source.registry() {
            Some(registry) => {
                if let Some(id) = m.id {
                    return Err(ConfigError::Inconsistent(format!(
                        "machine.id {id} is set but machine.source is {}, which leases a \
                         machine ID from the pool: remove machine.id, or use source = \"static\"",
                        m.source.name()
                    )));
                }
                (MachineChoice::Leased, Some(registry))
            }
            None => {
                let registered: Vec<Registry> = Registry::ALL
                    .into_iter()
                    .filter(|r| r.is_set(self))
                    .collect();
                if registered.len() > 1 {
                    let keys: Vec<&str> = registered.iter().map(|r| r.key()).collect();
                    return Err(ConfigError::Inconsistent(format!(
                        "{} are all set with a static machine ID: register it in one of them",
                        keys.join(" and ")
                    )));
                }
                let (machine, from) = self.fixed_machine()?;
                super::members::check_fixed_run(machine, ids, pool_name, &pool)?;
                (
                    MachineChoice::Fixed { machine, from },
                    registered.first().copied(),
                )
            }
        };
        let mut plan = MachinePlan {
            choice,
            pool_name,
            pool,
            keeper: Keeper::Nothing,
            host_hold: false,
            ids,
        };
        plan.keeper = match registry {
            Some(registry) => registry.keeper(self, plan.wanted())?,
            None => self.local_keeper()?,
        };
        plan.host_hold = match plan.keeper {
            Keeper::Nothing => self.hold_on_host,
            #[cfg(feature = "state-file")]
            Keeper::StateFile(_) => true,
            #[allow(unreachable_patterns)]
            _ => false,
        };
        Ok(plan)
    }

    /// A fixed ID's own keeper: its state file, if any.
    fn local_keeper(&self) -> Result<Keeper, ConfigError> {
        match &self.machine.state_file {
            None => Ok(Keeper::Nothing),
            #[cfg(feature = "state-file")]
            Some(path) => {
                self.state_file_interval()?;
                Ok(Keeper::StateFile(path.clone()))
            }
            #[cfg(not(feature = "state-file"))]
            Some(_) => Err(ConfigError::Inconsistent(super::STATE_FILE_FEATURE.into())),
        }
    }

    /// `--machine N` and a registry from a command line ([`MachineSections::choose`]).
    pub fn choose_machine(
        &mut self,
        id: Option<u64>,
        registry: Option<(Registry, &str)>,
    ) -> Result<(), ChoiceConflict> {
        MachineSections {
            machine: &mut self.machine,
            zookeeper: &mut self.zookeeper,
            etcd: &mut self.etcd,
        }
        .choose(id, registry)
    }

    /// The static machine ID: the configured one, else the pool's default for the genMethod
    /// (`MachinePools::default_machine`: an embedded issuer's 0, a server's first of Vesta's
    /// share); for `source = "ordinal"`, the host name's trailing number plus
    /// `machine.ordinal_offset`.
    pub fn static_machine(&self) -> Result<u64, ConfigError> {
        Ok(self.fixed_machine()?.0)
    }

    /// [`static_machine`](Self::static_machine), and where it comes from.
    fn fixed_machine(&self) -> Result<(u64, FixedFrom), ConfigError> {
        let pools = self.pools()?;
        let (name, range) = pools
            .for_gen_method(self.gen_method)
            .map_err(CoreConfigError::from)?;
        if self.machine.source != MachineSource::Ordinal {
            return match self.machine.id {
                Some(id) => Ok((id, FixedFrom::Config)),
                None => Ok((
                    pools
                        .default_machine(self.gen_method)
                        .map_err(CoreConfigError::from)?,
                    FixedFrom::PoolDefault,
                )),
            };
        }
        if let Some(id) = self.machine.id {
            return Err(ConfigError::Inconsistent(format!(
                "machine.id {id} is set but machine.source is ordinal, which takes the machine \
                 ID from the host name: remove machine.id, or use source = \"static\""
            )));
        }
        let host = ordinal_host_name();
        let offset = self.machine.ordinal_offset;
        let ids = self.machine.ids.max(1);
        let machine = super::members::ordinal_first(&host, ids, offset)?;
        if !range.contains(&machine) {
            let formula = match ids {
                1 => "ordinal".to_owned(),
                k => format!("ordinal × machine.ids {k}"),
            };
            return Err(ConfigError::Inconsistent(format!(
                "machine.source = \"ordinal\": host name {host:?} gives machine ID {machine} \
                 ({formula} + machine.ordinal_offset {offset}), outside the {name} pool {}..={}",
                range.start(),
                range.end()
            )));
        }
        Ok((machine, FixedFrom::Ordinal { host, offset }))
    }
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
    let ordinal = host_ordinal(host)?;
    ordinal.checked_add(offset).ok_or_else(|| {
        ConfigError::Inconsistent(format!(
            "machine.source = \"ordinal\": ordinal {ordinal} + machine.ordinal_offset {offset} \
             overflows"
        ))
    })
}

/// The trailing decimal number of `host` (a StatefulSet pod's `NAME-ORDINAL`), or why none.
pub(super) fn host_ordinal(host: &str) -> Result<u64, ConfigError> {
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
    Ok(ordinal)
}
