//! [`IssuerConfigBuilder`]: an [`IssuerConfig`] in code, one call per choice a user makes
//! (layout, epoch, where the machine ID comes from, pools, genMethod), checked once at `build`.

use std::path::PathBuf;

use vesta_core::{Epoch, GenMethod, IdType, LayoutSpec, Preset};

use super::{ConfigError, IssuerConfig, LayoutChoice, MachineSource};

/// Builds an [`IssuerConfig`] from the defaults; [`build`](Self::build) checks every value
/// ([`IssuerConfig::validate`]), so a config that builds is one an issuer can start with.
///
/// Keys without a method here (clock-rollback policy, ZooKeeper timeouts, ...) are public
/// fields of the config's sections: set them on the built config, then
/// [`validate`](IssuerConfig::validate) it again.
///
/// ```
/// use vesta_core::{Epoch, IdType};
/// use vesta_embed::IssuerConfig;
///
/// // Milliseconds, your own epoch, machine ID 42 (from the embed pool 0..=923).
/// let config = IssuerConfig::builder()
///     .id_type(IdType::MinGranularity)
///     .epoch("2024-01-01T00:00:00Z".parse::<Epoch>()?)
///     .machine(42)
///     .build()?;
/// assert_eq!(config.machine.id, Some(42));
///
/// // A machine ID leased from ZooKeeper instead (nothing connects before `Issuer::start`).
/// let leased = IssuerConfig::builder()
///     .zookeeper("zk1:2181,zk2:2181,zk3:2181")
///     .zookeeper_root("/vesta/orders")
///     .build()?;
/// assert_eq!(leased.zookeeper.root, "/vesta/orders");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct IssuerConfigBuilder {
    config: IssuerConfig,
}

impl IssuerConfigBuilder {
    /// `[id] layout`: a preset (default `Preset::Vesta`); a team switching from Leaf, Twitter's
    /// snowflake, Sonyflake or UidGenerator keeps its IDs' layout and epoch with the peer's
    /// preset.
    pub fn layout(mut self, preset: Preset) -> Self {
        self.config.id.layout = LayoutChoice::Preset(preset);
        self
    }

    /// `[id.layout]`: a custom layout, checked at `build`.
    pub fn custom_layout(mut self, spec: LayoutSpec) -> Self {
        self.config.id.layout = LayoutChoice::Custom(spec);
        self
    }

    /// `[id] type` of the vesta layout: max-peak (seconds, 2^20 IDs per second; the default)
    /// or min-granularity (milliseconds, 1024 IDs per millisecond).
    pub fn id_type(mut self, id_type: IdType) -> Self {
        self.config.id.id_type = Some(id_type);
        self
    }

    /// `[id] epoch`: time zero of the time field (default: the layout's own; Vesta's is
    /// 2015-01-01T00:00:00+08:00). Explaining an ID needs it, so every issuer and reader of a
    /// deployment must agree on it.
    pub fn epoch(mut self, epoch: Epoch) -> Self {
        self.config.id.epoch = Some(epoch);
        self
    }

    /// `[id] version`: the version bit, 0 (default) or 1 (the extension scheme; such IDs are
    /// negative as a Java `long`).
    pub fn version(mut self, version: u8) -> Self {
        self.config.id.version = Some(version);
        self
    }

    /// A static machine ID (`[machine] source = "static"`, `id`): from the pool of the
    /// genMethod, and unique among the running issuers of a deployment — nothing checks that
    /// for you but a ZooKeeper lease.
    pub fn machine(mut self, id: u64) -> Self {
        self.config.machine.source = MachineSource::Static;
        self.config.machine.id = Some(id);
        self
    }

    /// `[machine] ids`: hold `k` machine IDs instead of one (default 1), for a process that
    /// needs more than one ID's cap (2^20 IDs a second in max-peak, 1,024,000 in
    /// min-granularity): with [`machine`](Self::machine)`(N)` the IDs N..=N + k - 1, with a
    /// registry k leases. Each has its own lease, mark, hold and fence; calls are spread over
    /// them (each thread keeps to one until its unit is used up), so IDs stay unique and
    /// increase per machine ID — across machine IDs, an ID of one may be below an earlier one
    /// of another. `build` refuses a `k` the pool cannot hold.
    pub fn machine_ids(mut self, k: u64) -> Self {
        self.config.machine.ids = k;
        self
    }

    /// A machine ID leased from ZooKeeper at `connect` (`host:port[,host:port...]`;
    /// `[machine] source = "zookeeper"`, `[zookeeper] connect`). Conflicts with
    /// [`machine`](Self::machine): `build` refuses both.
    pub fn zookeeper(mut self, connect: impl Into<String>) -> Self {
        self.config.machine.source = MachineSource::Zookeeper;
        self.config.zookeeper.connect = connect.into();
        self
    }

    /// `[zookeeper] root`: the znode under which this deployment's leases live (default
    /// `/vesta/default`); deployments sharing a ZooKeeper use different roots.
    pub fn zookeeper_root(mut self, root: impl Into<String>) -> Self {
        self.config.zookeeper.root = root.into();
        self
    }

    /// `[machine] state_file`: a local file keeping the machine ID's high-water mark across
    /// restarts, so a restarted issuer never reissues an ID even if the clock was set back.
    pub fn state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.machine.state_file = Some(path.into());
        self
    }

    /// Holds the static machine ID on this host for the issuer's life, with or without a state
    /// file (with one it is always held): a second process on this host issuing with the same
    /// machine ID in the same ID space — whatever it calls its layout — is refused at start in
    /// one line naming it, and a start counted in another layout or epoch than the machine
    /// ID's last holder on this host is refused. What it protects: processes on this host (in
    /// its network namespace, on Linux), whoever runs them, however they are stopped; a file
    /// tidy-up cannot undo it. What it cannot: two hosts (or containers with network namespaces
    /// of their own) given one static machine ID — that takes a leasing source (`.zookeeper`,
    /// an SQL table, etcd). Feature `state-file` (default). docs/machine-ids.md has the
    /// details; the crate's docs an example.
    #[cfg(feature = "state-file")]
    pub fn hold_on_host(mut self) -> Self {
        self.config.hold_on_host = true;
        self
    }

    /// `[machine] server_pool_start`: the first machine ID of the server pool (default: the
    /// layout's split, 924 for a 10-bit node); embedded issuers use the IDs below it.
    pub fn server_pool_start(mut self, first: u64) -> Self {
        self.config.machine.server_pool_start = Some(first);
        self
    }

    /// The genMethod recorded in every ID, which also picks the machine pool (default embed).
    /// Servers set it; an embedding application keeps the default.
    pub fn gen_method(mut self, gen_method: GenMethod) -> Self {
        self.config.gen_method = gen_method;
        self
    }

    /// How long a start waits for another process to let go of the state file, or of the
    /// static machine ID on this host, before it is refused naming the holder (default zero:
    /// refused at once). A command-line tool run in parallel waits; a server should not.
    pub fn hold_wait(mut self, wait: std::time::Duration) -> Self {
        self.config.hold_wait = wait;
        self
    }

    /// The config, if every value is valid; else an error naming the key and what is allowed.
    /// A static source needs [`machine`](Self::machine): a builder never picks a machine ID by
    /// itself (two issuers built alike would issue the same IDs).
    pub fn build(self) -> Result<IssuerConfig, ConfigError> {
        if self.config.machine.source == MachineSource::Static && self.config.machine.id.is_none() {
            return Err(ConfigError::Inconsistent(
                "no machine ID chosen: call .machine(N) with an ID unique among the issuers of \
                 this epoch, or lease one (.zookeeper(..))"
                    .into(),
            ));
        }
        self.config.validate()?;
        Ok(self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_id_must_be_chosen_and_then_builds_the_default_otherwise() {
        let err = IssuerConfig::builder().build().unwrap_err().to_string();
        assert!(
            err.contains("no machine ID chosen: call .machine(N)"),
            "{err}"
        );
        let mut expected = IssuerConfig::default();
        expected.machine.id = Some(0);
        assert_eq!(
            IssuerConfig::builder().machine(0).build().unwrap(),
            expected
        );
    }

    #[test]
    fn each_bad_value_is_named() {
        let cases: [(IssuerConfigBuilder, &str); 5] = [
            (
                IssuerConfig::builder().machine(924),
                "machine 924 is outside the embed pool 0..=923",
            ),
            (
                IssuerConfig::builder().machine(1).version(2),
                "version 2 is out of range: allowed 0..=1",
            ),
            (
                IssuerConfig::builder().zookeeper(" "),
                "zookeeper.connect is empty",
            ),
            (
                IssuerConfig::builder()
                    .zookeeper("zk:2181")
                    .zookeeper_root("vesta"),
                "zookeeper.root `vesta` is not valid",
            ),
            (
                IssuerConfig::builder().machine(3).zookeeper("zk:2181"),
                "machine.id 3 is set but machine.source is zookeeper",
            ),
        ];
        for (builder, expected) in cases {
            let err = builder.build().unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }

    #[test]
    fn a_server_machine_needs_the_server_gen_method() {
        let c = IssuerConfig::builder()
            .gen_method(GenMethod::Server)
            .machine(930)
            .build()
            .unwrap();
        assert_eq!(c.static_machine().unwrap(), 930);
        let c = IssuerConfig::builder()
            .server_pool_start(1000)
            .machine(930)
            .build()
            .unwrap();
        assert_eq!(c.machine.server_pool_start, Some(1000));
    }
}
