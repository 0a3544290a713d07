//! The server's configuration (`conf/server.toml`): the issuer's sections (`[id]`, `[machine]`,
//! `[clock]`, `[zookeeper]`) plus `[server]` with the listen address and the limits. Unknown keys
//! are errors naming the key; every value is range-checked before anything binds or leases.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use vesta_core::{GenMethod, MachinePools};
use vesta_embed::IssuerConfig;
use vesta_embed::config::{
    ClockSection, ConfigError as LoadError, IdSection, MachineSection, ZooKeeperSection, load_toml,
    parse_toml,
};

use crate::frame::{self, HEADER_BYTES};
use crate::proto::{self, DEFAULT_MAX_BATCH};

/// The default listen address: loopback only, so nothing is exposed by accident.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7654";

/// A server configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or parsed, or an issuer value is invalid.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A `[server]` value is out of range.
    #[error("invalid config: server.{field} {value} is out of range: allowed {min}..={max}")]
    OutOfRange {
        /// The key under `[server]`.
        field: &'static str,
        /// The rejected value.
        value: u64,
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
    },
    /// `max_batch` answers would not fit in `max_frame_bytes`.
    #[error(
        "invalid config: server.max_batch {max_batch} needs frames of up to {needed} bytes \
         for {id_type} IDs, above server.max_frame_bytes {max_frame_bytes}"
    )]
    BatchDoesNotFit {
        /// The batch cap.
        max_batch: u32,
        /// The frame limit.
        max_frame_bytes: u32,
        /// The largest `IDS` frame length such a batch can need.
        needed: u64,
        /// The layout name.
        id_type: &'static str,
    },
    /// The static machine ID is not in the server pool.
    #[error("invalid config: {0}")]
    Pool(vesta_core::PoolError),
}

// By hand rather than `#[from]`, so the cause is printed once, not again as a `source`.
impl From<vesta_core::PoolError> for ConfigError {
    fn from(e: vesta_core::PoolError) -> Self {
        ConfigError::Pool(e)
    }
}

/// Everything `vesta serve tcp` needs. `Default` equals `conf/server.toml`: max-peak, Vesta's
/// epoch, static machine ID 924 (the first of the server pool), listening on 127.0.0.1:7654.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// The IDs' layout, epoch and version.
    pub id: IdSection,
    /// Where the machine ID comes from (it must lie in the server pool).
    pub machine: MachineSection,
    /// Clock-rollback policy and sequence start.
    pub clock: ClockSection,
    /// The ZooKeeper lease, used when `machine.source = "zookeeper"`.
    pub zookeeper: ZooKeeperSection,
    /// The listen address and the limits.
    pub server: ServerSection,
}

/// `[server]`: where to listen and how much any one client may take.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// Connections served at once; more are refused with `TOO_MANY_CONNECTIONS`.
    pub max_connections: u32,
    /// Largest frame length accepted or sent.
    pub max_frame_bytes: u32,
    /// Largest `NEXT_IDS` count.
    pub max_batch: u32,
    /// A connection with no complete frame (or a blocked write) for this long is closed.
    pub idle_timeout_ms: u64,
    /// How long a shutdown waits for connections to finish their in-flight work.
    pub shutdown_grace_ms: u64,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: SocketAddr::from(([127, 0, 0, 1], 7654)),
            max_connections: 1024,
            max_frame_bytes: frame::DEFAULT_MAX_FRAME_BYTES,
            max_batch: DEFAULT_MAX_BATCH,
            idle_timeout_ms: 60_000,
            shutdown_grace_ms: 5_000,
        }
    }
}

impl ServerSection {
    /// The idle timeout as a duration.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    /// The shutdown grace period as a duration.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}

fn check(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            field,
            value,
            min,
            max,
        })
    }
}

impl ServerConfig {
    /// Loads and checks a TOML file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let c: ServerConfig = load_toml(path)?;
        c.validate()?;
        Ok(c)
    }

    /// Parses and checks TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let c: ServerConfig = parse_toml(text)?;
        c.validate()?;
        Ok(c)
    }

    /// The issuer's configuration: these sections with genMethod server.
    pub fn issuer_config(&self) -> IssuerConfig {
        IssuerConfig {
            id: self.id.clone(),
            machine: self.machine.clone(),
            clock: self.clock.clone(),
            zookeeper: self.zookeeper.clone(),
            gen_method: GenMethod::Server,
        }
    }

    /// Checks every `[server]` value, that a full batch fits in a frame and that a static
    /// machine ID lies in the server pool (a machine ID outside it is a startup error).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let s = &self.server;
        check("max_connections", s.max_connections.into(), 1, 65_536)?;
        check(
            "max_frame_bytes",
            s.max_frame_bytes.into(),
            frame::MIN_MAX_FRAME_BYTES.into(),
            frame::MAX_MAX_FRAME_BYTES.into(),
        )?;
        let layout = self.id.id_type.layout();
        check(
            "max_batch",
            s.max_batch.into(),
            1,
            layout.capacity_per_second(),
        )?;
        check("idle_timeout_ms", s.idle_timeout_ms, 10, 86_400_000)?;
        check("shutdown_grace_ms", s.shutdown_grace_ms, 0, 600_000)?;
        let needed = max_ids_frame_len(s.max_batch, layout.capacity_per_unit());
        if needed > u64::from(s.max_frame_bytes) {
            return Err(ConfigError::BatchDoesNotFit {
                max_batch: s.max_batch,
                max_frame_bytes: s.max_frame_bytes,
                needed,
                id_type: layout.id_type.name(),
            });
        }
        let issuer = self.issuer_config();
        let pools = MachinePools::new(self.machine.server_pool_start)
            .map_err(|e| LoadError::Invalid(e.into()))?;
        if self.machine.source == vesta_embed::MachineSource::Static {
            let machine = issuer.static_machine()?;
            pools.check(machine, GenMethod::Server)?;
        }
        Ok(())
    }
}

/// The largest `IDS` frame length (after the length field) a batch of `count` can need: one run
/// per time unit touched, and a batch touches at most `ceil(count / capacity) + 1` units.
pub fn max_ids_frame_len(count: u32, capacity_per_unit: u64) -> u64 {
    let runs = u64::from(count).div_ceil(capacity_per_unit) + 1;
    (HEADER_BYTES + proto::ids_payload_len(runs as usize)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_conf_file_is_the_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf/server.toml");
        assert_eq!(
            ServerConfig::from_file(Path::new(path)).unwrap(),
            ServerConfig::default()
        );
    }

    #[test]
    fn default_is_valid_and_uses_the_first_server_machine() {
        let c = ServerConfig::default();
        c.validate().unwrap();
        assert_eq!(c.issuer_config().static_machine().unwrap(), 924);
        assert_eq!(c.server.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(ServerConfig::from_toml_str("").unwrap(), c);
    }

    #[test]
    fn machine_outside_the_server_pool_is_refused() {
        let err = ServerConfig::from_toml_str("[machine]\nid = 5\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid config: machine 5 is outside the server pool 924..=1023 (genMethod server)"
        );
        assert!(ServerConfig::from_toml_str("[machine]\nid = 1023\n").is_ok());
    }

    #[test]
    fn limits_are_range_checked_and_named() {
        let err = ServerConfig::from_toml_str("[server]\nmax_frame_bytes = 100\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid config: server.max_frame_bytes 100 is out of range: allowed 2048..=16777216"
        );
        let err = ServerConfig::from_toml_str("[server]\nmax_batch = 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("server.max_batch 0"), "{err}");
        let err = ServerConfig::from_toml_str("[server]\nlisten = \"nowhere\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen") || err.contains("socket"), "{err}");
        let err = ServerConfig::from_toml_str("[server]\nmax_conections = 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_conections"), "{err}");
    }

    #[test]
    fn a_batch_that_cannot_fit_a_frame_is_refused() {
        // min-granularity: 1024 per unit, so 1,000,000 IDs can need 978 runs = 11.7 KB.
        let err = ServerConfig::from_toml_str(
            "[id]\ntype = \"min-granularity\"\n[server]\nmax_batch = 1000000\nmax_frame_bytes = 4096\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("above server.max_frame_bytes 4096"), "{err}");
        // The default limits fit both layouts.
        ServerConfig::from_toml_str("[id]\ntype = \"min-granularity\"\n").unwrap();
    }
}
