//! What a ZooKeeper lease needs, built by the machine plan ([`IssuerConfig::plan`]: the fixed
//! ID or the pool) from the `[zookeeper]` section, checked once before anything connects.
//! Public because `vesta zk ls` reads the same settings.

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use vesta_core::MarkStore;

use crate::config::{ConfigError, IssuerConfig, Wanted, ZooKeeperSection};

/// Everything the ZooKeeper lease needs, checked and converted from [`IssuerConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkSettings {
    /// `host:port[,host:port...]`.
    pub connect: String,
    /// Root znode, e.g. `/vesta/default`; claims live under `<root>/machines`, marks under
    /// `<root>/last`.
    pub root: String,
    /// Session timeout asked of the server (it may negotiate another within its bounds).
    pub session_timeout: Duration,
    /// How long the first connection may take before start fails.
    pub connect_timeout: Duration,
    /// How often the mark is written (and with it, the lease confirmed).
    pub report_interval: Duration,
    /// The longest the start guard waits for the clock to pass the mark.
    pub start_guard_max_wait: Duration,
    /// Start from the state file when ZooKeeper is unreachable at start.
    pub start_without_zookeeper: bool,
    /// `user:password` for digest auth; the znodes then get a creator-only ACL.
    pub auth: Option<String>,
    /// Shown in the claim node.
    pub instance: Option<String>,
    /// The local state file, if any.
    pub state_file: Option<PathBuf>,
    /// How long the start waits for another process to let go of the state file.
    pub hold_wait: Duration,
    /// `embed` or `server`.
    pub pool_name: &'static str,
    /// The machine IDs this issuer may lease (the pool of its genMethod).
    pub pool: RangeInclusive<u64>,
    /// A static machine ID registered in ZooKeeper (the plan's fixed ID, `zookeeper.connect`
    /// set): only this ID is claimed, and a live holder of it refuses the start.
    pub fixed: Option<u64>,
}

impl ZkSettings {
    /// The settings of `config`'s machine plan ([`IssuerConfig::plan`]), which keeps its
    /// machine ID in ZooKeeper: leased (`source = "zookeeper"`) or a static one registered
    /// there (`zookeeper.connect` set).
    pub fn from_config(config: &IssuerConfig) -> Result<Self, ConfigError> {
        match config.plan()?.keeper {
            #[cfg(feature = "zookeeper")]
            crate::config::Keeper::ZooKeeper(settings) => Ok(*settings),
            _ => Err(ConfigError::Inconsistent(
                "machine.source is not \"zookeeper\" and zookeeper.connect is not set".into(),
            )),
        }
    }

    /// Built by the plan alone: what it `wanted` (the fixed ID, or the pool to lease from) and
    /// the `[zookeeper]` section, checked.
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub(crate) fn planned(config: &IssuerConfig, wanted: Wanted) -> Result<Self, ConfigError> {
        let z = &config.zookeeper;
        let bad = |msg: String| Err(ConfigError::Inconsistent(msg));
        let connection = Self::connection(z)?;
        if wanted.fixed.is_some() && z.start_without_zookeeper {
            return bad(
                "zookeeper.start_without_zookeeper is set with a static machine ID registered \
                 in ZooKeeper: the registration is what refuses a second holder, so it cannot \
                 be skipped; remove zookeeper.connect to issue unregistered"
                    .into(),
            );
        }
        if z.report_interval_ms < 10 {
            return bad(format!(
                "zookeeper.report_interval_ms {} is too small: at least 10",
                z.report_interval_ms
            ));
        }
        Ok(ZkSettings {
            report_interval: Duration::from_millis(z.report_interval_ms),
            start_guard_max_wait: config.start_guard_max_wait(),
            start_without_zookeeper: z.start_without_zookeeper,
            instance: z.instance.clone(),
            state_file: config.machine.state_file.clone(),
            hold_wait: config.hold_wait,
            pool_name: wanted.pool_name,
            pool: wanted.pool,
            fixed: wanted.fixed,
            ..connection
        })
    }

    /// The connection alone (connect string, root, auth, session and connect timeouts),
    /// checked as [`ZkSettings::from_config`] checks them: for another user of `[zookeeper]`
    /// than a machine-ID lease (the sequences cluster's coordinator in vesta-service). The
    /// lease's own fields keep neutral values.
    pub fn connection(z: &ZooKeeperSection) -> Result<Self, ConfigError> {
        let bad = |msg: String| Err(ConfigError::Inconsistent(msg));
        if z.connect.trim().is_empty() {
            return bad("zookeeper.connect is empty: expected host:port[,host:port...]".into());
        }
        if !z.root.starts_with('/') || z.root.len() < 2 || z.root.ends_with('/') {
            return bad(format!(
                "zookeeper.root `{}` is not valid: expected an absolute znode path such as \
                 /vesta/default, without a trailing slash",
                z.root
            ));
        }
        for (key, v, min) in [
            ("session_timeout_ms", z.session_timeout_ms, 100),
            ("connect_timeout_ms", z.connect_timeout_ms, 1),
        ] {
            if v < min {
                return bad(format!("zookeeper.{key} {v} is too small: at least {min}"));
            }
        }
        if z.auth.as_ref().is_some_and(|a| !a.contains(':')) {
            return bad("zookeeper.auth is not valid: expected user:password".into());
        }
        Ok(ZkSettings {
            connect: z.connect.trim().to_owned(),
            root: z.root.clone(),
            session_timeout: Duration::from_millis(z.session_timeout_ms),
            connect_timeout: Duration::from_millis(z.connect_timeout_ms),
            report_interval: Duration::from_millis(z.report_interval_ms),
            start_guard_max_wait: Duration::ZERO,
            start_without_zookeeper: false,
            auth: z.auth.clone(),
            instance: None,
            state_file: None,
            hold_wait: Duration::ZERO,
            pool_name: "server",
            pool: 0..=0,
            fixed: None,
        })
    }

    /// The store, as a remedy names it.
    pub fn store(&self) -> MarkStore {
        MarkStore::ZooKeeper {
            connect: self.connect.clone(),
            root: self.root.clone(),
        }
    }

    /// The znode of the claim on `machine`.
    pub fn claim_path(&self, machine: u64) -> String {
        format!("{}/machines/{machine}", self.root)
    }

    /// The znode of the mark of `machine`.
    pub fn mark_path(&self, machine: u64) -> String {
        format!("{}/last/{machine}", self.root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MachineSource;
    use vesta_core::GenMethod;

    #[test]
    fn settings_check_root_auth_and_pick_the_pool() {
        let mut c = IssuerConfig::default();
        let err = ZkSettings::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("zookeeper.connect is not set"), "{err}");
        c.zookeeper.connect = "127.0.0.1:2181".into();
        let s = ZkSettings::from_config(&c).unwrap();
        assert_eq!(
            s.fixed,
            Some(0),
            "a static ID with zookeeper.connect is registered"
        );
        c.zookeeper.start_without_zookeeper = true;
        let err = ZkSettings::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("zookeeper.start_without_zookeeper"), "{err}");
        c.zookeeper.start_without_zookeeper = false;
        c.machine.source = MachineSource::Zookeeper;
        let s = ZkSettings::from_config(&c).unwrap();
        assert_eq!(s.fixed, None, "a lease claims from the pool");
        assert_eq!(s.pool, 0..=923);
        assert_eq!(s.claim_path(4), "/vesta/default/machines/4");
        assert_eq!(s.mark_path(4), "/vesta/default/last/4");
        assert_eq!(s.start_guard_max_wait, Duration::from_millis(5_000));
        c.machine.start_guard_max_wait_ms = 1_234;
        assert_eq!(
            ZkSettings::from_config(&c).unwrap().start_guard_max_wait,
            Duration::from_millis(1_234),
            "the guard's wait comes from [machine]"
        );
        c.gen_method = GenMethod::Server;
        assert_eq!(ZkSettings::from_config(&c).unwrap().pool, 924..=1023);
        c.zookeeper.root = "vesta/x".into();
        let err = ZkSettings::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("zookeeper.root `vesta/x`"), "{err}");
        c.zookeeper.root = "/v".into();
        c.zookeeper.auth = Some("nopassword".into());
        let err = ZkSettings::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("zookeeper.auth"), "{err}");
    }

    #[test]
    fn the_connection_alone_is_checked_as_a_lease_checks_it() {
        let mut z = ZooKeeperSection::default();
        let err = ZkSettings::connection(&z).unwrap_err().to_string();
        assert!(err.contains("zookeeper.connect is empty"), "{err}");
        z.connect = " 127.0.0.1:2181 ".into();
        z.auth = Some("u:p".into());
        let s = ZkSettings::connection(&z).unwrap();
        assert_eq!(
            (s.connect.as_str(), s.root.as_str(), s.auth.as_deref()),
            ("127.0.0.1:2181", "/vesta/default", Some("u:p"))
        );
        assert_eq!(s.connect_timeout, Duration::from_millis(5_000));
        z.root = "/v/".into();
        let err = ZkSettings::connection(&z).unwrap_err().to_string();
        assert!(err.contains("zookeeper.root `/v/`"), "{err}");
    }
}
