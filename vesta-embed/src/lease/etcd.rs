//! The etcd v3 lease store (`[machine] source = "etcd"`), spoken through etcd's JSON gateway
//! (`POST /v3/...` over HTTP/1.1 with hyper): no gRPC stack and no `protoc` at build time, at
//! the cost of base64 keys in JSON. Endpoints are tried in order on each call.
//!
//! - **Claim**: an etcd lease with a TTL (granted by etcd, which may raise it to its minimum),
//!   then a transaction that creates `<root>/machines/<id>` with that lease only if the key
//!   does not exist (`create_revision == 0`): etcd's leader orders claims, so one ID never has
//!   two holders. The preferred ID first, then the lowest free one.
//! - **Renew**: a keep-alive (the lease's TTL restarts on etcd's clock), then the mark written
//!   to `<root>/last/<id>` in a transaction that requires the claim to still hold our holder
//!   string.
//! - **Release**: the final mark, then the lease revoked (which deletes the claim).
//!
//! The sequences cluster (vesta-service's `seq_cluster::etcd`, `[seq] coordination = "etcd"`)
//! uses the same client: leases of its own TTL ([`EtcdClient::grant_ttl`]), a consistent read
//! of a prefix with each key's `mod_revision` ([`EtcdClient::range_prefix`]) and puts that hold
//! only at a key's `mod_revision` ([`EtcdClient::put_all_if_mod`]).

use std::ops::RangeInclusive;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use vesta_core::MarkStore;

use crate::config::{ConfigError, EtcdSection, IssuerConfig, Keeper, Wanted};

/// Everything an etcd lease needs, checked and converted from [`IssuerConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdSettings {
    /// `(host, port)` of each endpoint, in order.
    pub endpoints: Vec<(String, u16)>,
    /// The endpoints as configured, for messages.
    pub shown: String,
    /// Key prefix of the leases.
    pub root: String,
    /// The TTL asked for, whole seconds.
    pub ttl_s: u64,
    /// Bound on each request.
    pub timeout: Duration,
    /// The longest the start guard waits for the clock to pass the mark.
    pub start_guard_max_wait: Duration,
    /// `embed` or `server`.
    pub pool_name: &'static str,
    /// The machine IDs this issuer may lease.
    pub pool: RangeInclusive<u64>,
    /// A static machine ID registered in etcd (the plan's fixed ID, `etcd.endpoints` set): only
    /// this ID is claimed, and a live holder of it refuses the start.
    pub fixed: Option<u64>,
}

impl EtcdSettings {
    /// The settings of `config`'s machine plan ([`IssuerConfig::plan`]), which keeps its
    /// machine ID in etcd: leased (`source = "etcd"`) or a static one registered there
    /// (`etcd.endpoints` set).
    pub fn from_config(config: &IssuerConfig) -> Result<Self, ConfigError> {
        match config.plan()?.keeper {
            Keeper::Etcd(settings) => Ok(*settings),
            _ => Err(ConfigError::Inconsistent(
                "machine.source is not \"etcd\" and etcd.endpoints is not set".into(),
            )),
        }
    }

    /// Built by the plan alone: what it `wanted` (the fixed ID, or the pool to lease from) and
    /// the `[etcd]` section, checked.
    pub(crate) fn planned(config: &IssuerConfig, wanted: Wanted) -> Result<Self, ConfigError> {
        let e = &config.etcd;
        let bad = |msg: String| Err(ConfigError::Inconsistent(msg));
        let base = Self::connection(e)?;
        if e.ttl_ms < 2_000 {
            return bad(format!(
                "etcd.ttl_ms {} is too small: at least 2000",
                e.ttl_ms
            ));
        }
        if let Some(path) = &config.machine.state_file {
            return bad(format!(
                "machine.state_file {} is set but the machine ID is leased from or registered \
                 in etcd, which keeps the mark: remove machine.state_file",
                path.display()
            ));
        }
        Ok(EtcdSettings {
            start_guard_max_wait: config.start_guard_max_wait(),
            pool_name: wanted.pool_name,
            pool: wanted.pool,
            fixed: wanted.fixed,
            ..base
        })
    }

    /// The store, as a remedy names it.
    pub fn store(&self) -> MarkStore {
        MarkStore::Etcd {
            endpoints: self.shown.clone(),
            root: self.root.clone(),
        }
    }

    /// Where and how to reach etcd from an `[etcd]` section alone (endpoints, root, timeout
    /// checked; no pool, no fixed ID, the section's TTL): what a client that takes no machine
    /// ID needs, such as the sequences cluster's coordinator.
    pub fn connection(e: &EtcdSection) -> Result<Self, ConfigError> {
        let bad = |msg: String| Err(ConfigError::Inconsistent(msg));
        if e.endpoints.is_empty() {
            return bad("etcd.endpoints is empty: expected [\"http://HOST:PORT\", ...]".into());
        }
        let mut endpoints = Vec::new();
        for url in &e.endpoints {
            let Some(rest) = url.strip_prefix("http://") else {
                return bad(format!(
                    "etcd.endpoints: {url:?} is not http://HOST:PORT (TLS to etcd is not \
                     supported yet)"
                ));
            };
            let rest = rest.trim_end_matches('/');
            let parsed = rest
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h.to_owned(), p.parse::<u16>().ok()?)))
                .filter(|(h, _)| !h.is_empty() && !h.contains('/'));
            match parsed {
                Some(hp) => endpoints.push(hp),
                None => return bad(format!("etcd.endpoints: {url:?} is not http://HOST:PORT")),
            }
        }
        if !e.root.starts_with('/') || e.root.len() < 2 || e.root.ends_with('/') {
            return bad(format!(
                "etcd.root `{}` is not valid: expected a key prefix such as /vesta/default, \
                 without a trailing slash",
                e.root
            ));
        }
        if e.timeout_ms == 0 {
            return bad("etcd.timeout_ms 0 is too small: at least 1".into());
        }
        Ok(EtcdSettings {
            endpoints,
            shown: e.endpoints.join(","),
            root: e.root.clone(),
            ttl_s: e.ttl_ms.div_ceil(1_000),
            timeout: Duration::from_millis(e.timeout_ms),
            start_guard_max_wait: Duration::ZERO,
            pool_name: "server",
            pool: 0..=0,
            fixed: None,
        })
    }

    /// The claim key of `machine`.
    pub fn claim_key(&self, machine: u64) -> String {
        format!("{}/machines/{machine}", self.root)
    }

    /// The mark key of `machine`.
    pub fn mark_key(&self, machine: u64) -> String {
        format!("{}/last/{machine}", self.root)
    }
}

/// A claim as `vesta machine ls --etcd` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EtcdRow {
    /// The machine ID.
    pub machine: u64,
    /// Who holds it now (`host:pid:started`), if anyone.
    pub holder: Option<String>,
    /// The mark its holders promised not to pass (ms since the Unix epoch), if any.
    pub mark_ms: Option<u64>,
}

/// A key as [`EtcdClient::range_prefix`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdKv {
    /// The key.
    pub key: String,
    /// Its value (UTF-8).
    pub value: String,
    /// The revision of its last change: raised by every put, never lowered.
    pub mod_revision: i64,
    /// The lease it is attached to (0: none).
    pub lease: i64,
}

/// An etcd client over its JSON gateway.
#[derive(Clone, Debug)]
pub struct EtcdClient {
    settings: EtcdSettings,
}

fn b64(s: &str) -> String {
    B64.encode(s)
}

fn unb64(v: &Value) -> Option<String> {
    let bytes = B64.decode(v.as_str()?).ok()?;
    String::from_utf8(bytes).ok()
}

/// A JSON number etcd writes as a string (int64).
fn int(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// The first key after every key starting with `prefix`.
fn prefix_end(prefix: &str) -> String {
    let mut bytes = prefix.as_bytes().to_vec();
    if let Some(last) = bytes.last_mut() {
        *last += 1;
    }
    String::from_utf8(bytes).unwrap_or_default()
}

impl EtcdClient {
    /// A client for `settings` (nothing is connected until the first call).
    pub fn new(settings: EtcdSettings) -> Self {
        EtcdClient { settings }
    }

    /// The settings.
    pub fn settings(&self) -> &EtcdSettings {
        &self.settings
    }

    /// `POST path` with `body` to the first endpoint that answers within the timeout.
    async fn call(&self, path: &str, body: Value) -> Result<Value, String> {
        let mut last = String::new();
        for (host, port) in &self.settings.endpoints {
            match tokio::time::timeout(self.settings.timeout, post(host, *port, path, &body)).await
            {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => last = e,
                Err(_) => {
                    last = format!(
                        "no answer within {} ms (etcd.timeout_ms)",
                        self.settings.timeout.as_millis()
                    )
                }
            }
        }
        Err(format!("etcd {}: {path}: {last}", self.settings.shown))
    }

    /// A new lease of the settings' TTL; returns its ID and the TTL etcd granted (seconds).
    pub(crate) async fn grant(&self) -> Result<(i64, u64), String> {
        self.grant_ttl(self.settings.ttl_s).await
    }

    /// A new lease of `ttl_s` seconds; returns its ID and the TTL etcd granted (seconds: at
    /// least `ttl_s`, raised to etcd's minimum).
    pub async fn grant_ttl(&self, ttl_s: u64) -> Result<(i64, u64), String> {
        let v = self.call("/v3/lease/grant", json!({"TTL": ttl_s})).await?;
        match (int(&v["ID"]), int(&v["TTL"])) {
            (Some(id), Some(ttl)) if ttl > 0 => Ok((id, ttl as u64)),
            _ => Err(format!(
                "etcd {}: granting a lease: unexpected answer {v}",
                self.settings.shown
            )),
        }
    }

    /// Restarts the lease's TTL; `false` when etcd no longer knows it (expired).
    pub async fn keep_alive(&self, lease: i64) -> Result<bool, String> {
        let v = self
            .call("/v3/lease/keepalive", json!({"ID": lease.to_string()}))
            .await?;
        Ok(int(&v["result"]["TTL"]).is_some_and(|ttl| ttl > 0))
    }

    /// Ends the lease (its keys go with it).
    pub async fn revoke(&self, lease: i64) -> Result<(), String> {
        self.call("/v3/lease/revoke", json!({"ID": lease.to_string()}))
            .await
            .map(|_| ())
    }

    /// Creates `key` = `value` under `lease` if the key does not exist; whether it did.
    pub async fn create(&self, key: &str, value: &str, lease: i64) -> Result<bool, String> {
        let v = self
            .call(
                "/v3/kv/txn",
                json!({
                    "compare": [{"target": "CREATE", "key": b64(key), "create_revision": "0"}],
                    "success": [{"request_put": {
                        "key": b64(key), "value": b64(value), "lease": lease.to_string()}}],
                }),
            )
            .await?;
        Ok(v["succeeded"].as_bool().unwrap_or(false))
    }

    /// Puts `key` = `value` if `guard` still holds `expected`; whether it did.
    pub(crate) async fn put_if(
        &self,
        guard: &str,
        expected: &str,
        key: &str,
        value: &str,
    ) -> Result<bool, String> {
        let v = self
            .call(
                "/v3/kv/txn",
                json!({
                    "compare": [{"target": "VALUE", "key": b64(guard), "value": b64(expected)}],
                    "success": [{"request_put": {"key": b64(key), "value": b64(value)}}],
                }),
            )
            .await?;
        Ok(v["succeeded"].as_bool().unwrap_or(false))
    }

    /// Puts `key` = `value` under `lease` if `key` holds exactly `expected`; whether it did.
    pub async fn replace_if(
        &self,
        key: &str,
        expected: &str,
        value: &str,
        lease: i64,
    ) -> Result<bool, String> {
        let v = self
            .call(
                "/v3/kv/txn",
                json!({
                    "compare": [{"target": "VALUE", "key": b64(key), "value": b64(expected)}],
                    "success": [{"request_put": {
                        "key": b64(key), "value": b64(value), "lease": lease.to_string()}}],
                }),
            )
            .await?;
        Ok(v["succeeded"].as_bool().unwrap_or(false))
    }

    /// Puts every `(key, mod_revision, value)` in one transaction that holds only if each key
    /// is still at its `mod_revision` (0: absent); whether it did (all or none). Keep a call
    /// under etcd's `--max-txn-ops` (128 by default) puts.
    pub async fn put_all_if_mod(&self, puts: &[(String, i64, String)]) -> Result<bool, String> {
        let compare: Vec<Value> = puts
            .iter()
            .map(|(k, rev, _)| {
                json!({"target": "MOD", "key": b64(k), "mod_revision": rev.to_string()})
            })
            .collect();
        let success: Vec<Value> = puts
            .iter()
            .map(|(k, _, v)| json!({"request_put": {"key": b64(k), "value": b64(v)}}))
            .collect();
        let v = self
            .call(
                "/v3/kv/txn",
                json!({"compare": compare, "success": success}),
            )
            .await?;
        Ok(v["succeeded"].as_bool().unwrap_or(false))
    }

    /// Every key under `prefix` in one read (one revision of the store, so a consistent
    /// view), by key.
    pub async fn range_prefix(&self, prefix: &str) -> Result<Vec<EtcdKv>, String> {
        let v = self
            .call(
                "/v3/kv/range",
                json!({"key": b64(prefix), "range_end": b64(&prefix_end(prefix))}),
            )
            .await?;
        Ok(v["kvs"]
            .as_array()
            .map(|kvs| {
                kvs.iter()
                    .filter_map(|kv| {
                        Some(EtcdKv {
                            key: unb64(&kv["key"])?,
                            value: unb64(&kv["value"]).unwrap_or_default(),
                            mod_revision: int(&kv["mod_revision"]).unwrap_or(0),
                            lease: int(&kv["lease"]).unwrap_or(0),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Retires the mark of `machine` (`vesta machine retire --etcd`): deleted in one
    /// transaction that also checks no claim exists, so a live holder refuses it. `Ok(false)`
    /// when there was no mark.
    pub async fn retire(&self, machine: u64) -> Result<bool, String> {
        let (claim, mark) = (
            self.settings.claim_key(machine),
            self.settings.mark_key(machine),
        );
        let v = self
            .call(
                "/v3/kv/txn",
                json!({
                    "compare": [{"target": "CREATE", "key": b64(&claim), "create_revision": "0"}],
                    "success": [{"request_delete_range": {"key": b64(&mark)}}],
                }),
            )
            .await?;
        if !v["succeeded"].as_bool().unwrap_or(false) {
            let holder = self.get(&claim).await?.unwrap_or_default();
            return Err(format!(
                "etcd {}: machine {machine} is held by {holder} under {}: stop it first",
                self.settings.shown, self.settings.root
            ));
        }
        let deleted = &v["responses"][0]["response_delete_range"]["deleted"];
        Ok(int(deleted).is_some_and(|n| n > 0))
    }

    /// The value of `key`, if any.
    pub(crate) async fn get(&self, key: &str) -> Result<Option<String>, String> {
        let v = self.call("/v3/kv/range", json!({"key": b64(key)})).await?;
        Ok(v["kvs"].get(0).and_then(|kv| unb64(&kv["value"])))
    }

    /// Every `(key, value)` under `prefix` (a key without a value has `""`).
    pub(crate) async fn list(&self, prefix: &str) -> Result<Vec<(String, String)>, String> {
        Ok(self
            .range_prefix(prefix)
            .await?
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect())
    }

    /// The machine IDs held now, by machine ID.
    pub(crate) async fn held(&self) -> Result<Vec<(u64, String)>, String> {
        let prefix = format!("{}/machines/", self.settings.root);
        let mut held: Vec<(u64, String)> = self
            .list(&prefix)
            .await?
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.parse().ok()?, v)))
            .collect();
        held.sort();
        Ok(held)
    }

    /// Every machine ID with a claim or a mark, for `vesta machine ls --etcd`.
    pub async fn rows(&self) -> Result<Vec<EtcdRow>, String> {
        let held = self.held().await?;
        let prefix = format!("{}/last/", self.settings.root);
        let marks: Vec<(u64, u64)> = self
            .list(&prefix)
            .await?
            .into_iter()
            .filter_map(|(k, v)| {
                let machine = k.strip_prefix(&prefix)?.parse().ok()?;
                let mark: super::Mark = serde_json::from_str(&v).ok()?;
                Some((machine, mark.mark_ms))
            })
            .collect();
        let mut machines: Vec<u64> = held
            .iter()
            .map(|h| h.0)
            .chain(marks.iter().map(|m| m.0))
            .collect();
        machines.sort_unstable();
        machines.dedup();
        Ok(machines
            .into_iter()
            .map(|m| EtcdRow {
                machine: m,
                holder: held.iter().find(|h| h.0 == m).map(|h| h.1.clone()),
                mark_ms: marks.iter().find(|x| x.0 == m).map(|x| x.1),
            })
            .collect())
    }
}

/// One HTTP/1.1 request on a fresh connection (a call a second at most: no pool needed).
async fn post(host: &str, port: u16, path: &str, body: &Value) -> Result<Value, String> {
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let request = hyper::Request::post(path)
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let answer = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            return Err(format!("HTTP {status}: {}", text.trim()));
        }
        serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {}", text.trim()))
    };
    let result = answer.await;
    driver.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MachineSource;

    #[test]
    fn settings_check_endpoints_root_and_ttl() {
        let mut c = IssuerConfig::default();
        c.machine.source = MachineSource::Etcd;
        c.etcd.endpoints = vec!["http://127.0.0.1:2379".into(), "http://e2:2379/".into()];
        c.etcd.ttl_ms = 2_500;
        let s = EtcdSettings::from_config(&c).unwrap();
        assert_eq!(
            s.endpoints,
            vec![("127.0.0.1".into(), 2379), ("e2".into(), 2379)]
        );
        assert_eq!(s.ttl_s, 3, "rounded up to whole seconds");
        assert_eq!(s.claim_key(4), "/vesta/default/machines/4");
        assert_eq!(s.mark_key(4), "/vesta/default/last/4");
        c.etcd.endpoints = vec!["https://e:2379".into()];
        let err = EtcdSettings::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("TLS to etcd is not supported yet"), "{err}");
        c.etcd.endpoints = vec!["http://e".into()];
        assert!(EtcdSettings::from_config(&c).is_err());
        c.etcd.endpoints = vec!["http://e:1".into()];
        c.etcd.ttl_ms = 1_000;
        let err = EtcdSettings::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("etcd.ttl_ms 1000 is too small"), "{err}");
    }

    #[test]
    fn keys_and_numbers_as_etcd_writes_them() {
        assert_eq!(prefix_end("/v/machines/"), "/v/machines0");
        assert_eq!(
            unb64(&json!(b64("/v/last/3"))).as_deref(),
            Some("/v/last/3")
        );
        assert_eq!(int(&json!("694")), Some(694));
        assert_eq!(int(&json!(7)), Some(7));
        assert_eq!(int(&json!(null)), None);
    }
}
