//! The REST server's configuration (`conf/rest.toml`): the shared server shape of
//! [`vesta_service::config`] (issuer sections plus `[server]` with the limits both servers have)
//! with the HTTP keys of its own. Unknown keys are errors naming the key; every value is checked
//! before anything binds or leases. The former `[rest]` section name and its keys `max_count`
//! and `shutdown_timeout_ms` still load, with a warning (CHANGELOG.md).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use serde::Deserialize;
use vesta_core::{GenMethod, Layout};
use vesta_service::config::check;
use vesta_service::{ConfigError, OwnKeys, Server, ServiceConfig};

/// Everything `vesta serve rest` needs. `Default` equals the shipped `conf/rest.toml`: max-peak,
/// Vesta's epoch, static machine 924 (the server pool's first ID), listening on 127.0.0.1:8080.
pub type RestConfig = ServiceConfig<RestSection>;

/// `[server]` of the REST server: the keys both servers share ([`Server`]) and the HTTP keys of
/// its own ([`RestKeys`]).
pub type RestSection = Server<RestKeys>;

/// The REST server's own `[server]` keys: the limits that keep one HTTP client from hurting the
/// others.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RestKeys {
    /// A connection must start its next request within this time of connecting or of its last
    /// response (HTTP/1: a complete head; HTTP/2: a stream, PINGs do not count), else it is
    /// closed: slow and idle clients give their slot back.
    pub header_read_timeout_ms: u64,
    /// A connection whose responses make no progress this long (the client reads nothing, or
    /// grants no HTTP/2 flow-control window) is closed, freeing what it pinned.
    pub send_timeout_ms: u64,
    /// A connection older than this is asked to close (HTTP/2 GOAWAY, HTTP/1 `Connection:
    /// close` after the response in flight) and closed `shutdown_grace_ms` later. 0: no limit.
    pub max_connection_age_ms: u64,
    /// Concurrent HTTP/2 streams per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_streams_per_connection: u64,
    /// Response bytes held for clients that have not taken them yet, across all connections;
    /// an ID batch or a metrics scrape that would go over it gets 503.
    pub max_unsent_bytes: u64,
}

impl Default for RestKeys {
    fn default() -> Self {
        RestKeys {
            header_read_timeout_ms: 5_000,
            send_timeout_ms: 10_000,
            max_connection_age_ms: 0,
            max_streams_per_connection: 100,
            max_unsent_bytes: 64 << 20,
        }
    }
}

impl RestKeys {
    /// Smallest accepted `max_unsent_bytes`: room for a few responses being sent at once.
    pub(crate) const MIN_UNSENT_BYTES: u64 = 1 << 20;

    /// The header read (and HTTP/2 idle) timeout as a `Duration`.
    pub(crate) fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    /// The send timeout as a `Duration`.
    pub(crate) fn send_timeout(&self) -> Duration {
        Duration::from_millis(self.send_timeout_ms)
    }

    /// The connection age limit, if any.
    pub(crate) fn max_connection_age(&self) -> Option<Duration> {
        (self.max_connection_age_ms > 0).then(|| Duration::from_millis(self.max_connection_age_ms))
    }
}

impl OwnKeys for RestKeys {
    const GEN_METHOD: GenMethod = GenMethod::Rest;
    const OLD_NAMES: &'static [&'static str] = &["rest"];
    const RENAMED_KEYS: &'static [(&'static str, &'static str)] = &[
        ("max_count", "max_batch"),
        ("shutdown_timeout_ms", "shutdown_grace_ms"),
    ];
    const LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
    const MAX_BATCH: u64 = 10_000;

    fn validate(s: &RestSection, _: &Layout) -> Result<(), ConfigError> {
        check(
            "server.header_read_timeout_ms",
            s.header_read_timeout_ms,
            1,
            3_600_000,
        )?;
        check("server.send_timeout_ms", s.send_timeout_ms, 1, 3_600_000)?;
        check(
            "server.max_connection_age_ms",
            s.max_connection_age_ms,
            0,
            604_800_000,
        )?;
        check(
            "server.max_streams_per_connection",
            s.max_streams_per_connection,
            1,
            1_000,
        )?;
        check(
            "server.max_unsent_bytes",
            s.max_unsent_bytes,
            RestKeys::MIN_UNSENT_BYTES,
            1 << 40,
        )
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
        let shipped = RestConfig::from_toml_file(path).unwrap();
        assert_eq!(shipped, RestConfig::default());
        assert!(shipped.warnings.is_empty(), "{:?}", shipped.warnings);
    }

    #[test]
    fn default_machine_is_the_server_pools_first() {
        let c = RestConfig::default().issuer_config();
        assert_eq!(c.gen_method, GenMethod::Rest);
        assert_eq!(c.static_machine().unwrap(), 924);
    }

    #[test]
    fn the_former_section_and_key_names_still_load() {
        let c =
            RestConfig::from_toml_str("[rest]\nmax_count = 5\nshutdown_timeout_ms = 7\n").unwrap();
        assert_eq!((c.server.max_batch, c.server.shutdown_grace_ms), (5, 7));
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let err = RestConfig::from_toml_str("[server]\nlisten_addr = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen_addr"), "{err}");
        let err = RestConfig::from_toml_str("[server]\nmax_batch = 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("server.max_batch 0 is out of range: allowed 1..=1048576"),
            "{err}"
        );
        let err = RestConfig::from_toml_str("[server]\nmax_uri_bytes = 10\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("server.max_uri_bytes 10"), "{err}");
        for (toml, msg) in [
            (
                "send_timeout_ms = 0",
                "server.send_timeout_ms 0 is out of range: allowed 1..=3600000",
            ),
            (
                "max_streams_per_connection = 0",
                "server.max_streams_per_connection 0 is out of range: allowed 1..=1000",
            ),
            (
                "max_unsent_bytes = 4096",
                "server.max_unsent_bytes 4096 is out of range: allowed 1048576..=1099511627776",
            ),
            (
                "max_connection_age_ms = 604800001",
                "server.max_connection_age_ms 604800001 is out of range: allowed 0..=604800000",
            ),
        ] {
            let err = RestConfig::from_toml_str(&format!("[server]\n{toml}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(msg), "{err}");
        }
        let c = RestConfig::from_toml_str("[server]\nmax_connection_age_ms = 0\n").unwrap();
        assert_eq!(c.server.max_connection_age(), None);
        let err = RestConfig::from_toml_str("[server]\nlisten = \"localhost\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("listen") || err.contains("socket address"),
            "{err}"
        );
    }
}
