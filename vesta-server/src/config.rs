//! The TCP server's configuration (`conf/server.toml`): the shared server shape of
//! [`vesta_service::config`] (issuer sections plus `[server]` with the limits both servers have)
//! with the protocol's keys of its own. Unknown keys are errors naming the key; every value, and
//! that a full batch answer fits a frame, is checked before anything binds or leases.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use serde::Deserialize;
use vesta_core::{GenMethod, Layout};
use vesta_service::config::check;
use vesta_service::{ConfigError, OwnKeys, Server, ServiceConfig};

use crate::frame::{self, HEADER_BYTES};
use crate::proto::{self, DEFAULT_MAX_BATCH};

/// Everything `vesta serve tcp` needs. `Default` equals `conf/server.toml`: max-peak, Vesta's
/// epoch, static machine ID 924 (the first of the server pool), listening on 127.0.0.1:7654.
pub type TcpConfig = ServiceConfig<TcpSection>;

/// `[server]` of the TCP server: the keys both servers share ([`Server`]) and the protocol's
/// keys of its own ([`TcpKeys`]).
pub type TcpSection = Server<TcpKeys>;

/// The TCP server's own `[server]` keys: the protocol's limits and its side listener.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TcpKeys {
    /// Largest frame length accepted or sent.
    pub max_frame_bytes: u32,
    /// A connection with no complete frame (or a blocked write) for this long is closed.
    pub idle_timeout_ms: u64,
    /// ID requests one connection may have waiting; beyond it the server stops reading from
    /// it until answers go out (back-pressure that bounds the memory a client can pin).
    pub max_pending_per_connection: u64,
    /// Where to serve `GET /metrics` (Prometheus), `GET /healthz` and the console over HTTP;
    /// none when unset.
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for TcpKeys {
    fn default() -> Self {
        TcpKeys {
            max_frame_bytes: frame::DEFAULT_MAX_FRAME_BYTES,
            idle_timeout_ms: 60_000,
            max_pending_per_connection: 1024,
            metrics_listen: None,
        }
    }
}

impl TcpKeys {
    /// The idle timeout as a duration.
    pub(crate) fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
}

/// `max_batch` as the protocol's u32 (validation keeps it within a second of IDs).
pub(crate) fn max_batch_u32(section: &TcpSection) -> u32 {
    u32::try_from(section.max_batch).unwrap_or(u32::MAX)
}

impl OwnKeys for TcpKeys {
    const GEN_METHOD: GenMethod = GenMethod::Server;
    const LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7654));
    const MAX_BATCH: u64 = DEFAULT_MAX_BATCH as u64;

    /// The frame limits, the idle timeout, and that a full batch answer fits a frame.
    fn validate(s: &TcpSection, layout: &Layout) -> Result<(), ConfigError> {
        check(
            "server.max_frame_bytes",
            s.max_frame_bytes.into(),
            frame::MIN_MAX_FRAME_BYTES.into(),
            frame::MAX_MAX_FRAME_BYTES.into(),
        )?;
        check("server.idle_timeout_ms", s.idle_timeout_ms, 10, 86_400_000)?;
        check(
            "server.max_pending_per_connection",
            s.max_pending_per_connection,
            1,
            65_536,
        )?;
        if s.console && s.metrics_listen.is_none() {
            return Err(ConfigError::Inconsistent(
                "server.console = true needs server.metrics_listen: the TCP server serves its \
                 console on the metrics listener (set metrics_listen = \"127.0.0.1:9100\", say)"
                    .into(),
            ));
        }
        let needed = max_ids_frame_len(s.max_batch, layout.capacity_per_unit());
        if needed > u64::from(s.max_frame_bytes) {
            return Err(ConfigError::Inconsistent(format!(
                "server.max_batch {} needs frames of up to {needed} bytes for {} IDs, above \
                 server.max_frame_bytes {}",
                s.max_batch,
                layout.full_name(),
                s.max_frame_bytes
            )));
        }
        Ok(())
    }
}

/// The largest `IDS` frame length (after the length field) a batch of `count` can need: one run
/// per time unit touched, and a batch touches at most `ceil(count / capacity) + 1` units.
fn max_ids_frame_len(count: u64, capacity_per_unit: u64) -> u64 {
    let runs = count.div_ceil(capacity_per_unit) + 1;
    (HEADER_BYTES + proto::ids_payload_len(runs as usize)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_conf_file_is_the_default() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf/server.toml");
        let shipped = TcpConfig::from_toml_file(path).unwrap();
        assert_eq!(shipped, TcpConfig::default());
        assert!(shipped.warnings.is_empty(), "{:?}", shipped.warnings);
    }

    #[test]
    fn default_is_valid_and_uses_the_first_server_machine() {
        let c = TcpConfig::default();
        c.validate().unwrap();
        assert_eq!(c.issuer_config().static_machine().unwrap(), 924);
        assert_eq!(c.server.listen.to_string(), "127.0.0.1:7654");
        assert_eq!(TcpConfig::from_toml_str("").unwrap(), c);
    }

    #[test]
    fn machine_outside_the_server_pool_is_refused() {
        let err = TcpConfig::from_toml_str("[machine]\nid = 5\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid config: machine 5 is outside the server pool 924..=1023 (genMethod server)"
        );
        assert!(TcpConfig::from_toml_str("[machine]\nid = 1023\n").is_ok());
    }

    #[test]
    fn limits_are_range_checked_and_named() {
        let err = TcpConfig::from_toml_str("[server]\nmax_frame_bytes = 100\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid config: server.max_frame_bytes 100 is out of range: allowed 2048..=16777216"
        );
        let err = TcpConfig::from_toml_str("[server]\nmax_batch = 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("server.max_batch 0"), "{err}");
        let err = TcpConfig::from_toml_str("[server]\nlisten = \"nowhere\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen") || err.contains("socket"), "{err}");
        let err = TcpConfig::from_toml_str("[server]\nmax_conections = 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_conections"), "{err}");
    }

    /// The REST server's key, the same way: a path read at start, not at load.
    #[test]
    fn the_console_token_file_is_the_rest_servers_key() {
        let c = TcpConfig::from_toml_str(
            "[server]\nmetrics_listen = \"127.0.0.1:0\"\nconsole = true\n\
             auth_token_file = \"/nonexistent/token\"\n",
        )
        .unwrap();
        let path = c.server.auth_token_file.as_deref().unwrap();
        assert_eq!(path, std::path::Path::new("/nonexistent/token"));
        let token = |c: &TcpConfig| {
            vesta_service::auth::BearerToken::from_file(c.server.auth_token_file.as_deref())
        };
        let err = token(&c).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "invalid config: server.auth_token_file /nonexistent/token: cannot read it"
            ),
            "{err}"
        );
        assert!(token(&TcpConfig::default()).unwrap().is_none());
    }

    #[test]
    fn a_batch_that_cannot_fit_a_frame_is_refused() {
        // min-granularity: 1024 per unit, so 1,000,000 IDs can need 978 runs = 11.7 KB.
        let err = TcpConfig::from_toml_str(
            "[id]\ntype = \"min-granularity\"\n[server]\nmax_batch = 1000000\nmax_frame_bytes = 4096\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("above server.max_frame_bytes 4096"), "{err}");
        // The default limits fit both layouts.
        TcpConfig::from_toml_str("[id]\ntype = \"min-granularity\"\n").unwrap();
    }
}
