//! One configuration shape for both servers (`conf/server.toml`, `conf/rest.toml`): the issuer's
//! sections (`[id]`, `[machine]`, `[clock]`, `[zookeeper]`), a `[server]` section whose keys
//! both servers share by name and unit (`listen`, `max_connections`, `max_batch`, `max_wait_ms`,
//! `shutdown_grace_ms`) beside their own, and `[segment]` (segment mode, on when its `db` is
//! set: `vesta_segment::SegmentSection`), `[seq]` (per-key sequences, on when its `db` is set:
//! `vesta_seq::SeqSection`). Unknown keys are errors naming the key; every value,
//! and that a static machine ID lies in the server pool, is checked at load, before anything
//! binds or leases. Renamed keys still load, with a warning for the operator.

use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use vesta_core::{GenMethod, Layout};
use vesta_embed::IssuerConfig;
use vesta_embed::config::{
    ClockSection, EtcdSection, IdSection, MachinePlan, MachineSection, Registry, ZooKeeperSection,
    load_toml, parse_toml,
};
use vesta_segment::SegmentSection;
use vesta_seq::SeqSection;

use crate::error::ConfigError;
use crate::tls::{ServerTls, TlsFiles};

/// What the config and the start read of a `[server]` section: implemented once, by
/// [`Server`](crate::server_section::Server) (the shared keys, and the server's own as its
/// `K`).
pub trait ServerSection:
    Clone + Default + PartialEq + Eq + fmt::Debug + DeserializeOwned + Send + Sync + 'static
{
    /// The genMethod of the IDs this server issues (it picks the machine pool too).
    const GEN_METHOD: GenMethod;
    /// Former names of the section, still read (with a warning).
    const OLD_NAMES: &'static [&'static str] = &[];
    /// Keys renamed within the section, `(old, new)`: the old name is a serde alias of the new
    /// one and loading warns about it.
    const RENAMED_KEYS: &'static [(&'static str, &'static str)] = &[];

    /// The limits every server has, under the same names.
    fn common(&self) -> CommonLimits;

    /// Sets the listen address (the `--listen` flag).
    fn set_listen(&mut self, addr: SocketAddr);

    /// Lowers `max_batch` to `cap` when it is larger: a layout that issues fewer IDs per second
    /// than the configured batch caps every request at what it issues in a second.
    fn cap_max_batch(&mut self, cap: u64);

    /// Checks the server's own keys (the common ones are checked for it).
    fn validate_own(&self, layout: &Layout) -> Result<(), ConfigError>;

    /// `tls_cert` and `tls_key`, as set.
    fn tls_paths(&self) -> (Option<&Path>, Option<&Path>);

    /// Sets `tls_cert` and `tls_key` (the `--tls-cert`, `--tls-key` flags).
    fn set_tls(&mut self, cert: Option<PathBuf>, key: Option<PathBuf>);

    /// Turns the web console on (the `--console` flag).
    fn set_console(&mut self);

    /// `make`: making IDs is allowed.
    fn make(&self) -> bool;

    /// `console`: the web console is on.
    fn console(&self) -> bool;

    /// `auth_token_file`, as set.
    fn auth_token_file(&self) -> Option<&Path>;
}

/// The `[server]` keys both servers have, with the same meaning and unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommonLimits {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// Connections served at once.
    pub max_connections: u64,
    /// Largest number of IDs one request may ask for.
    pub max_batch: u64,
    /// Longest a request waits for sequence space before it is answered "saturated".
    pub max_wait_ms: u64,
    /// How long a shutdown lets connections finish their in-flight work.
    pub shutdown_grace_ms: u64,
}

impl CommonLimits {
    /// `max_wait_ms` as a duration.
    pub fn max_wait(&self) -> Duration {
        Duration::from_millis(self.max_wait_ms)
    }

    /// `shutdown_grace_ms` as a duration.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}

/// Default of `max_wait_ms`: three max-peak seconds.
pub const DEFAULT_MAX_WAIT_MS: u64 = 3_000;

/// Everything a server needs. `Default` equals the shipped conf file of that server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceConfig<S: ServerSection> {
    /// The IDs' layout, epoch and version.
    pub id: IdSection,
    /// Where the machine ID comes from (it must lie in the server pool).
    pub machine: MachineSection,
    /// Clock-rollback policy and sequence start.
    pub clock: ClockSection,
    /// The ZooKeeper lease, used when `machine.source = "zookeeper"`, and the sequences
    /// cluster's store when `seq.coordination = "zookeeper"`.
    pub zookeeper: ZooKeeperSection,
    /// The etcd lease, used when `machine.source = "etcd"`.
    pub etcd: EtcdSection,
    /// The listener and its limits.
    pub server: S,
    /// Segment mode: Leaf-compatible numbers per tag from `leaf_alloc`; off while `db` is unset.
    pub segment: SegmentSection,
    /// Per-key sequences from `vesta_seq`; off while `db` is unset.
    pub seq: SeqSection,
    /// Renamed keys found while loading, one line each, for the operator to fix.
    pub warnings: Vec<String>,
    /// Hold a static machine ID on this host even without a state file (with one it is always
    /// held): `vesta serve` always does; a library user opts in (see vesta-embed's
    /// `IssuerConfigBuilder::hold_on_host`). Set by the program, not the file.
    pub hold_on_host: bool,
}

impl<S: ServerSection> ServiceConfig<S> {
    /// Loads and checks a TOML file; errors name the file, the key and the line.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let c = Self::from_toml_file_unchecked(path)?;
        c.validate()?;
        Ok(c)
    }

    /// Loads a TOML file, checking each value's type and range but not how the sections fit
    /// together: for a caller that completes it (command-line flags) and then calls
    /// [`ServiceConfig::validate`].
    pub fn from_toml_file_unchecked(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let mut c: Self = load_toml(path)?;
        c.warnings = renamed_keys::<S>(&std::fs::read_to_string(path).unwrap_or_default());
        Ok(c)
    }

    /// Parses and checks TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let mut c: Self = parse_toml(text)?;
        c.warnings = renamed_keys::<S>(text);
        c.validate()?;
        Ok(c)
    }

    /// The issuer's configuration: these sections with the server's genMethod. A machine ID
    /// leased from an SQL table without `machine.db` is leased from `[segment] db` (one
    /// database for both).
    pub fn issuer_config(&self) -> IssuerConfig {
        let mut machine = self.machine.clone();
        if machine.source.registry() == Some(Registry::Sql) && machine.db.is_none() {
            machine.db = self.segment.db.clone();
        }
        let mut config = IssuerConfig::default();
        config.id = self.id.clone();
        config.machine = machine;
        config.clock = self.clock.clone();
        config.zookeeper = self.zookeeper.clone();
        config.etcd = self.etcd.clone();
        config.gen_method = S::GEN_METHOD;
        config.hold_on_host = self.hold_on_host;
        config
    }

    /// The issuer's machine plan ([`IssuerConfig::plan`]): how the machine ID is chosen, what
    /// keeps it, whether it is held on this host; what the server starts on and `vesta serve`
    /// acts on.
    pub fn plan(&self) -> Result<MachinePlan, ConfigError> {
        Ok(self.issuer_config().plan()?)
    }

    /// The sections a sequences cluster coordinated outside its database is reached through.
    pub fn reach(&self) -> vesta_seq::coordination::Reach<'_> {
        vesta_seq::coordination::Reach {
            etcd: &self.etcd,
            zookeeper: &self.zookeeper,
        }
    }

    /// The limits both servers share.
    pub fn limits(&self) -> CommonLimits {
        self.server.common()
    }

    /// Checks every `[server]` value and the issuer's sections as
    /// [`IssuerConfig::validate`] does, with the server's genMethod: a static machine ID must
    /// lie in the server pool.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let layout = self.issuer_config().layout()?;
        validate_section(&self.server, &layout)?;
        self.issuer_config().validate()?;
        self.segment.validate()?;
        self.seq.validate()?;
        if self.seq.db.is_some() {
            vesta_seq::coordination::check(self.seq.coordination, self.reach())?;
        }
        Ok(())
    }
}

/// The default of `server.max_batch` (a layout with fewer IDs per second caps it).
pub const DEFAULT_MAX_BATCH: u64 = 65_536;

/// Checks a `[server]` section for IDs of `layout`: the shared limits, then the server's own.
pub fn validate_section<S: ServerSection>(section: &S, layout: &Layout) -> Result<(), ConfigError> {
    let c = section.common();
    check("server.max_connections", c.max_connections, 1, 65_536)?;
    // A request never asks for more than a second's worth of IDs: the layout's cap per second,
    // or the default batch where that is larger (it is then capped to the layout's, see
    // `ServerSection::cap_max_batch`).
    check(
        "server.max_batch",
        c.max_batch,
        1,
        layout.capacity_per_second().max(DEFAULT_MAX_BATCH),
    )?;
    // A request parked just after a boundary waits a whole unit: allow at least two.
    check(
        "server.max_wait_ms",
        c.max_wait_ms,
        2 * layout.unit_ms(),
        600_000,
    )?;
    check("server.shutdown_grace_ms", c.shutdown_grace_ms, 0, 600_000)?;
    tls_files(section)?;
    section.validate_own(layout)
}

/// `[server] tls_cert` and `tls_key`: both (TLS on) or neither (plain TCP); one alone is an
/// error naming the other.
pub fn tls_files<S: ServerSection>(section: &S) -> Result<Option<TlsFiles>, ConfigError> {
    match section.tls_paths() {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles {
            cert: cert.to_owned(),
            key: key.to_owned(),
        })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(ConfigError::Inconsistent(
            "server.tls_cert is set but server.tls_key is not: TLS needs both".into(),
        )),
        (None, Some(_)) => Err(ConfigError::Inconsistent(
            "server.tls_key is set but server.tls_cert is not: TLS needs both".into(),
        )),
    }
}

/// The server's TLS, loaded from `[server] tls_cert` and `tls_key` when set, offering `alpn`.
pub fn server_tls<S: ServerSection>(
    section: &S,
    alpn: &[&[u8]],
) -> Result<Option<ServerTls>, ConfigError> {
    tls_files(section)?
        .map(|files| ServerTls::load(files, alpn))
        .transpose()
        .map_err(|e| ConfigError::Inconsistent(e.to_string()))
}

/// `value` within `min..=max`, or an error naming `field` and the range.
pub fn check(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
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

/// The warnings for renamed sections and keys present in `text` (already parsed once).
fn renamed_keys<S: ServerSection>(text: &str) -> Vec<String> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    let mut sections = vec![("server", table.get("server"))];
    for old in S::OLD_NAMES {
        if let Some(section) = table.get(*old) {
            warnings.push(format!(
                "config: section [{old}] is now called [server]; the old name is read until the \
                 next release"
            ));
            sections.push((old, Some(section)));
        }
    }
    for (name, section) in sections {
        let Some(section) = section.and_then(toml::Value::as_table) else {
            continue;
        };
        for (old, new) in S::RENAMED_KEYS {
            if section.contains_key(*old) {
                warnings.push(format!(
                    "config: {name}.{old} is now called server.{new}; the old name is read \
                     until the next release"
                ));
            }
        }
    }
    if let Some(seq) = table.get("seq").and_then(toml::Value::as_table) {
        for (old, new) in SeqSection::RENAMED_KEYS {
            if seq.contains_key(*old) {
                warnings.push(format!(
                    "config: seq.{old} is replaced by seq.{new}{}; the old key is read until \
                     the next release",
                    if seq.contains_key(*new) {
                        " (set here, so the old key is ignored)"
                    } else {
                        " (read as 800 KB a section, 100 bytes a string key)"
                    }
                ));
            }
        }
    }
    warnings
}

/// By hand, so the server section's former names map onto `[server]` while unknown sections
/// stay errors that name the section (serde's `flatten` cannot be combined with that).
impl<'de, S: ServerSection> Deserialize<'de> for ServiceConfig<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Sections<S>(PhantomData<S>);

        impl<'de, S: ServerSection> Visitor<'de> for Sections<S> {
            type Value = ServiceConfig<S>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a vesta server configuration")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                const SECTIONS: &[&str] = &[
                    "server",
                    "id",
                    "machine",
                    "clock",
                    "zookeeper",
                    "etcd",
                    "segment",
                    "seq",
                ];
                let mut c = ServiceConfig::<S>::default();
                let mut seen: Vec<&'static str> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let section = match key.as_str() {
                        k if S::OLD_NAMES.contains(&k) => "server",
                        k => SECTIONS
                            .iter()
                            .copied()
                            .find(|s| *s == k)
                            .ok_or_else(|| de::Error::unknown_field(k, SECTIONS))?,
                    };
                    if seen.contains(&section) {
                        return Err(de::Error::custom(format!(
                            "section [{section}] is given twice (under its old and new name?)"
                        )));
                    }
                    seen.push(section);
                    match section {
                        "server" => c.server = map.next_value()?,
                        "id" => c.id = map.next_value()?,
                        "machine" => c.machine = map.next_value()?,
                        "clock" => c.clock = map.next_value()?,
                        "segment" => c.segment = map.next_value()?,
                        "seq" => c.seq = map.next_value()?,
                        "etcd" => c.etcd = map.next_value()?,
                        _ => c.zookeeper = map.next_value()?,
                    }
                }
                Ok(c)
            }
        }

        d.deserialize_map(Sections(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A section shaped like the servers' own.
    #[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct TestSection {
        listen: SocketAddr,
        #[serde(alias = "max_count")]
        max_batch: u64,
        extra: u64,
    }

    impl Default for TestSection {
        fn default() -> Self {
            TestSection {
                listen: "127.0.0.1:1".parse().unwrap(),
                max_batch: 100,
                extra: 1,
            }
        }
    }

    impl ServerSection for TestSection {
        const GEN_METHOD: GenMethod = GenMethod::Rest;
        const OLD_NAMES: &'static [&'static str] = &["rest"];
        const RENAMED_KEYS: &'static [(&'static str, &'static str)] = &[("max_count", "max_batch")];

        fn common(&self) -> CommonLimits {
            CommonLimits {
                listen: self.listen,
                max_connections: 10,
                max_batch: self.max_batch,
                max_wait_ms: DEFAULT_MAX_WAIT_MS,
                shutdown_grace_ms: 0,
            }
        }

        fn set_listen(&mut self, addr: SocketAddr) {
            self.listen = addr;
        }

        fn set_console(&mut self) {}

        fn make(&self) -> bool {
            true
        }

        fn console(&self) -> bool {
            false
        }

        fn auth_token_file(&self) -> Option<&Path> {
            None
        }

        fn cap_max_batch(&mut self, cap: u64) {
            self.max_batch = self.max_batch.min(cap);
        }

        fn validate_own(&self, _: &Layout) -> Result<(), ConfigError> {
            check("server.extra", self.extra, 1, 5)
        }

        fn tls_paths(&self) -> (Option<&Path>, Option<&Path>) {
            (None, None)
        }

        fn set_tls(&mut self, _: Option<PathBuf>, _: Option<PathBuf>) {}
    }

    type Config = ServiceConfig<TestSection>;

    #[test]
    fn an_empty_file_is_the_default_and_valid() {
        assert_eq!(Config::from_toml_str("").unwrap(), Config::default());
    }

    #[test]
    fn old_section_and_key_names_load_with_warnings() {
        let c = Config::from_toml_str("[rest]\nmax_count = 7\n").unwrap();
        assert_eq!(c.server.max_batch, 7);
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("[rest] is now called [server]"));
        assert!(c.warnings[1].contains("rest.max_count is now called server.max_batch"));
        let err = Config::from_toml_str("[rest]\n[server]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("section [server] is given twice"), "{err}");
        // [seq]'s count bounds, replaced by a bound in MiB: read into it, with a warning each.
        let c = Config::from_toml_str("[seq]\nmax_sections = 300\nmax_string_keys = 0\n").unwrap();
        assert_eq!(c.seq.max_memory_mb, (300 * 800_000u64).div_ceil(1 << 20));
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("seq.max_sections is replaced by seq.max_memory_mb (read as"),
            "{:?}",
            c.warnings
        );
        let c = Config::from_toml_str("[seq]\nmax_sections = 3\nmax_memory_mb = 64\n").unwrap();
        assert_eq!(c.seq.max_memory_mb, 64);
        assert!(
            c.warnings[0].contains("the old key is ignored"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn unknown_sections_and_keys_are_named() {
        let err = Config::from_toml_str("[serve]\n").unwrap_err().to_string();
        assert!(err.contains("serve"), "{err}");
        let err = Config::from_toml_str("[server]\nlisten_addr = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen_addr"), "{err}");
    }

    #[test]
    fn values_are_checked_and_named() {
        let err = Config::from_toml_str("[server]\nextra = 9\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid config: server.extra 9 is out of range: allowed 1..=5"
        );
        let err = Config::from_toml_str("[server]\nmax_batch = 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("server.max_batch 0 is out of range"), "{err}");
    }

    #[test]
    fn the_segment_section_is_read_and_checked() {
        let c = Config::from_toml_str(
            "[segment]\ndb = \"sqlite://x.db\"\nprefetch_percent = 20\nwait_ms = 50\n",
        )
        .unwrap();
        assert_eq!(c.segment.db.as_deref(), Some("sqlite://x.db"));
        assert_eq!((c.segment.prefetch_percent, c.segment.wait_ms), (20, 50));
        assert_eq!(Config::default().segment, SegmentSection::default());
        let err = Config::from_toml_str("[segment]\nwait_ms = 60001\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("segment.wait_ms 60001 is out of range: allowed 0..=60000"),
            "{err}"
        );
        let err = Config::from_toml_str("[segment]\ndb_url = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("db_url"), "{err}");
        // A bad URL set after loading (the --segment-db flag) is caught by validate.
        let mut c = Config::default();
        c.segment.db = Some("mysql://h/db".into());
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("invalid config: segment.db: invalid database URL"),
            "{err}"
        );
    }

    #[test]
    fn a_static_machine_outside_the_server_pool_is_refused_at_load() {
        let err = Config::from_toml_str("[machine]\nid = 5\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid config: machine 5 is outside the server pool 924..=1023 (genMethod rest)"
        );
        let c = Config::from_toml_str("").unwrap();
        assert_eq!(c.issuer_config().static_machine().unwrap(), 924);
        assert_eq!(c.issuer_config().gen_method, GenMethod::Rest);
    }
}
