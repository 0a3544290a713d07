//! The REST server's configuration (`conf/rest.toml`): the issuer's sections (`[id]`,
//! `[machine]`, `[clock]`, `[zookeeper]`, shared with the embedded issuer) plus `[rest]` for the
//! HTTP side. Unknown keys are errors naming the key; every value is checked before binding.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use vesta_core::GenMethod;
use vesta_embed::IssuerConfig;
use vesta_embed::config::{
    ClockSection, ConfigError, IdSection, MachineSection, ZooKeeperSection, load_toml, parse_toml,
};

/// Everything `vesta serve rest` needs. `Default` equals the shipped `conf/rest.toml`: max-peak,
/// Vesta's epoch, static machine 924 (the server pool's first ID), listening on 127.0.0.1:8080.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RestConfig {
    /// The IDs' layout, epoch and version.
    pub id: IdSection,
    /// Where the machine ID comes from (a server-pool ID: genMethod rest).
    pub machine: MachineSection,
    /// Clock-rollback policy and sequence start.
    pub clock: ClockSection,
    /// The ZooKeeper lease, used when `machine.source = "zookeeper"`.
    pub zookeeper: ZooKeeperSection,
    /// The HTTP listener and its limits.
    pub rest: RestSection,
}

/// `[rest]`: the HTTP listener and the limits that keep one client from hurting the others.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RestSection {
    /// Address to listen on; loopback by default so nothing is exposed by accident.
    pub listen: SocketAddr,
    /// Open connections at most; further clients wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Longest request target (path and query) accepted; longer gets 414.
    pub max_uri_bytes: usize,
    /// A client must send its request head within this time (slow-client protection).
    pub header_read_timeout_ms: u64,
    /// Largest `count` that `/genids` accepts.
    pub max_count: u64,
    /// How long shutdown waits for requests in flight before closing their connections.
    pub shutdown_timeout_ms: u64,
}

impl RestSection {
    /// Smallest accepted `max_uri_bytes`: room for the longest valid `/makeid` request.
    pub const MIN_URI_BYTES: usize = 256;
    /// Largest accepted `max_count`: one max-peak second of one machine (2^20 IDs).
    pub const MAX_COUNT_LIMIT: u64 = 1 << 20;

    /// The header read timeout as a `Duration`.
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    /// The shutdown grace period as a `Duration`.
    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_millis(self.shutdown_timeout_ms)
    }

    /// Checks every value; the error names the key and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: String, allowed: String| {
            Err(ConfigError::Inconsistent(format!(
                "rest.{key} = {value} is out of range: allowed {allowed}"
            )))
        };
        if self.max_connections == 0 {
            return bad("max_connections", "0".into(), "1 or more".into());
        }
        if self.max_uri_bytes < Self::MIN_URI_BYTES {
            return bad(
                "max_uri_bytes",
                self.max_uri_bytes.to_string(),
                format!("{} or more", Self::MIN_URI_BYTES),
            );
        }
        if self.header_read_timeout_ms == 0 {
            return bad("header_read_timeout_ms", "0".into(), "1 or more".into());
        }
        if !(1..=Self::MAX_COUNT_LIMIT).contains(&self.max_count) {
            return bad(
                "max_count",
                self.max_count.to_string(),
                format!("1..={}", Self::MAX_COUNT_LIMIT),
            );
        }
        Ok(())
    }
}

impl Default for RestSection {
    fn default() -> Self {
        RestSection {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            max_connections: 1024,
            max_uri_bytes: 4096,
            header_read_timeout_ms: 5_000,
            max_count: 10_000,
            shutdown_timeout_ms: 5_000,
        }
    }
}

impl RestConfig {
    /// Loads a TOML file; errors name the file, the key and the line.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let config: RestConfig = load_toml(path)?;
        config.rest.validate()?;
        Ok(config)
    }

    /// Parses TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: RestConfig = parse_toml(text)?;
        config.rest.validate()?;
        Ok(config)
    }

    /// The issuer's config: these sections with genMethod rest, so the machine ID comes from
    /// (and is checked against) the server pool.
    pub fn issuer_config(&self) -> IssuerConfig {
        IssuerConfig {
            id: self.id.clone(),
            machine: self.machine.clone(),
            clock: self.clock.clone(),
            zookeeper: self.zookeeper.clone(),
            gen_method: GenMethod::Rest,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_default() {
        assert_eq!(
            RestConfig::from_toml_str("").unwrap(),
            RestConfig::default()
        );
    }

    #[test]
    fn shipped_conf_file_is_the_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf/rest.toml");
        assert_eq!(
            RestConfig::from_file(Path::new(path)).unwrap(),
            RestConfig::default()
        );
    }

    #[test]
    fn default_machine_is_the_server_pools_first() {
        let c = RestConfig::default().issuer_config();
        assert_eq!(c.gen_method, GenMethod::Rest);
        assert_eq!(c.static_machine().unwrap(), 924);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let err = RestConfig::from_toml_str("[rest]\nlisten_addr = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen_addr"), "{err}");
        let err = RestConfig::from_toml_str("[rest]\nmax_count = 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("rest.max_count = 0 is out of range: allowed 1..=1048576"),
            "{err}"
        );
        let err = RestConfig::from_toml_str("[rest]\nmax_uri_bytes = 10\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("rest.max_uri_bytes = 10"), "{err}");
        let err = RestConfig::from_toml_str("[rest]\nlisten = \"localhost\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("listen") || err.contains("socket address"),
            "{err}"
        );
    }
}
