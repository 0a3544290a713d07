//! `[server]`: one section type for both servers ([`Server`]). The keys both servers have are
//! its fields, declared, defaulted, read and checked once; a server's own keys (the REST
//! port's HTTP timeouts, the TCP server's frame limits) are its `K` ([`OwnKeys`]), read from
//! the same TOML table. An unknown key is an error naming it, as before: a key neither shared
//! nor the server's own is refused by `K`'s `deny_unknown_fields`.

use std::fmt;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use vesta_core::{GenMethod, Layout};

use crate::config::{CommonLimits, DEFAULT_MAX_WAIT_MS, ServerSection, check};
use crate::error::ConfigError;

/// The keys of `[server]` only one server has, and what differs between the servers.
pub trait OwnKeys:
    Clone + Default + PartialEq + Eq + fmt::Debug + DeserializeOwned + Send + Sync + 'static
{
    /// The genMethod of the IDs this server issues (it picks the machine pool too).
    const GEN_METHOD: GenMethod;
    /// Former names of the section, still read (with a warning).
    const OLD_NAMES: &'static [&'static str] = &[];
    /// Keys renamed within the section, `(old, new)`, still read (with a warning).
    const RENAMED_KEYS: &'static [(&'static str, &'static str)] = &[];
    /// The default `listen`.
    const LISTEN: SocketAddr;
    /// The default `max_batch`.
    const MAX_BATCH: u64;

    /// Checks these keys in `section` for IDs of `layout` (the shared ones are checked first).
    fn validate(section: &Server<Self>, layout: &Layout) -> Result<(), ConfigError>;
}

/// Smallest accepted `max_uri_bytes`: room for the longest valid `/makeid` request.
pub const MIN_URI_BYTES: u64 = 256;

/// The `[server]` section of a server whose own keys are `K`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server<K> {
    /// The address to listen on; loopback by default so nothing is exposed by accident.
    pub listen: SocketAddr,
    /// Connections served at once.
    pub max_connections: u64,
    /// Largest number of IDs (or segment numbers) one request may ask for.
    pub max_batch: u64,
    /// Longest a request waits for sequence space before it is answered "saturated".
    pub max_wait_ms: u64,
    /// How long a shutdown lets connections finish their in-flight work.
    pub shutdown_grace_ms: u64,
    /// Longest HTTP request target (path and query) accepted, else 414: the REST port's, the
    /// TCP server's side listener's.
    pub max_uri_bytes: u64,
    /// Making IDs is allowed (`/makeid`, `MAKE`, gRPC `Make`, the console's make page).
    pub make: bool,
    /// The web console (read-only pages under `/ui`); off by default.
    pub console: bool,
    /// A file holding the bearer token HTTP requests must carry, except `/healthz` and
    /// `/metrics`; unset: no token. Never the token inline in the config.
    pub auth_token_file: Option<PathBuf>,
    /// PEM certificate chain (leaf first): with `tls_key`, the server speaks TLS only. Read
    /// again on SIGHUP.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert` (PKCS#8, PKCS#1 or SEC1). Read again on SIGHUP.
    pub tls_key: Option<PathBuf>,
    /// The server's own keys.
    pub own: K,
}

impl<K: OwnKeys> Default for Server<K> {
    fn default() -> Self {
        Server {
            listen: K::LISTEN,
            max_connections: 1024,
            max_batch: K::MAX_BATCH,
            max_wait_ms: DEFAULT_MAX_WAIT_MS,
            shutdown_grace_ms: 5_000,
            max_uri_bytes: 4096,
            make: true,
            console: false,
            auth_token_file: None,
            tls_cert: None,
            tls_key: None,
            own: K::default(),
        }
    }
}

/// A server's own keys read as the section's (`section.max_frame_bytes`).
impl<K> Deref for Server<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.own
    }
}

impl<K> DerefMut for Server<K> {
    fn deref_mut(&mut self) -> &mut K {
        &mut self.own
    }
}

impl<K: OwnKeys> ServerSection for Server<K> {
    const GEN_METHOD: GenMethod = K::GEN_METHOD;
    const OLD_NAMES: &'static [&'static str] = K::OLD_NAMES;
    const RENAMED_KEYS: &'static [(&'static str, &'static str)] = K::RENAMED_KEYS;

    fn common(&self) -> CommonLimits {
        CommonLimits {
            listen: self.listen,
            max_connections: self.max_connections,
            max_batch: self.max_batch,
            max_wait_ms: self.max_wait_ms,
            shutdown_grace_ms: self.shutdown_grace_ms,
        }
    }

    fn set_listen(&mut self, addr: SocketAddr) {
        self.listen = addr;
    }

    fn cap_max_batch(&mut self, cap: u64) {
        self.max_batch = self.max_batch.min(cap);
    }

    fn validate_own(&self, layout: &Layout) -> Result<(), ConfigError> {
        check(
            "server.max_uri_bytes",
            self.max_uri_bytes,
            MIN_URI_BYTES,
            1 << 20,
        )?;
        K::validate(self, layout)
    }

    fn tls_paths(&self) -> (Option<&Path>, Option<&Path>) {
        (self.tls_cert.as_deref(), self.tls_key.as_deref())
    }

    fn set_tls(&mut self, cert: Option<PathBuf>, key: Option<PathBuf>) {
        if cert.is_some() {
            self.tls_cert = cert;
        }
        if key.is_some() {
            self.tls_key = key;
        }
    }

    fn set_console(&mut self) {
        self.console = true;
    }

    fn make(&self) -> bool {
        self.make
    }

    fn console(&self) -> bool {
        self.console
    }

    fn auth_token_file(&self) -> Option<&Path> {
        self.auth_token_file.as_deref()
    }
}

/// The shared keys by name; anything else is the server's own (`K` refuses what it has not).
impl<'de, K: OwnKeys> Deserialize<'de> for Server<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys<K>(PhantomData<K>);

        impl<'de, K: OwnKeys> Visitor<'de> for Keys<K> {
            type Value = Server<K>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [server] section")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut s = Server::<K>::default();
                let mut own = toml::Table::new();
                while let Some(key) = map.next_key::<String>()? {
                    let name = K::RENAMED_KEYS
                        .iter()
                        .find(|(old, _)| *old == key)
                        .map_or(key.as_str(), |(_, new)| new);
                    match name {
                        "listen" => s.listen = map.next_value()?,
                        "max_connections" => s.max_connections = map.next_value()?,
                        "max_batch" => s.max_batch = map.next_value()?,
                        "max_wait_ms" => s.max_wait_ms = map.next_value()?,
                        "shutdown_grace_ms" => s.shutdown_grace_ms = map.next_value()?,
                        "max_uri_bytes" => s.max_uri_bytes = map.next_value()?,
                        "make" => s.make = map.next_value()?,
                        "console" => s.console = map.next_value()?,
                        "auth_token_file" => s.auth_token_file = map.next_value()?,
                        "tls_cert" => s.tls_cert = map.next_value()?,
                        "tls_key" => s.tls_key = map.next_value()?,
                        _ => {
                            own.insert(key, map.next_value::<toml::Value>()?);
                        }
                    }
                }
                s.own = K::deserialize(toml::Value::Table(own)).map_err(de::Error::custom)?;
                Ok(s)
            }
        }

        d.deserialize_map(Keys(PhantomData))
    }
}
