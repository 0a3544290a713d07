//! How a [`Client`](super::Client) behaves ([`ClientConfig`]): its endpoints, connections,
//! timeouts, retry budget and backoff, re-checks, prefetch, fallback issuer and TLS; checked
//! before it connects, every message naming the field.

use std::time::Duration;

use vesta_embed::IssuerConfig;

use super::ClientTls;
use crate::error::ClientError;

/// How a [`Client`](super::Client) behaves. `ClientConfig::new(endpoints)` gives sensible defaults.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// `host:port` of each server, in order of preference.
    pub endpoints: Vec<String>,
    /// Connections kept to each endpoint; requests are pipelined over them round-robin.
    pub connections_per_endpoint: usize,
    /// Requests one connection carries at once before callers wait.
    pub max_in_flight_per_connection: usize,
    /// Connecting plus handshake.
    pub connect_timeout: Duration,
    /// One request on one connection; past it the connection is closed and the request retried
    /// elsewhere. Keep it above one time unit (1 s for max-peak): a batch may wait that long.
    pub request_timeout: Duration,
    /// The longest one call keeps retrying before it fails (or falls back).
    pub retry_budget: Duration,
    /// First pause after a round in which every endpoint failed; doubles up to `backoff_max`.
    pub backoff_initial: Duration,
    /// Longest pause between rounds.
    pub backoff_max: Duration,
    /// How often endpoints marked dead are re-checked (connect, handshake, ping).
    pub health_check_interval: Duration,
    /// IDs fetched per batch into a local buffer for [`Client::next_id`](super::Client::next_id); 0 (the default) turns
    /// prefetch off. Prefetched IDs carry the time they were fetched, not the time they are used.
    pub prefetch: u32,
    /// An embedded issuer used when every server is down (genMethod embed, a machine ID from the
    /// embed pool, which must be unique among embedded issuers). `None`: no fallback.
    pub fallback: Option<IssuerConfig>,
    /// TLS to every endpoint, trusting the CA it was made with
    /// ([`ClientTls::with_ca`]); each endpoint's host must be named by its certificate.
    /// `None` (the default): plain TCP.
    pub tls: Option<ClientTls>,
}

impl ClientConfig {
    /// Defaults for the given endpoints: 2 connections each, 1 s connect, 3 s request timeout,
    /// 10 s retry budget, backoff 10..500 ms, re-checks every 500 ms, no prefetch, no fallback.
    pub fn new<S: Into<String>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        ClientConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            connections_per_endpoint: 2,
            max_in_flight_per_connection: 4096,
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(3),
            retry_budget: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(10),
            backoff_max: Duration::from_millis(500),
            health_check_interval: Duration::from_millis(500),
            prefetch: 0,
            fallback: None,
            tls: None,
        }
    }

    /// Defaults for a comma-separated list, `host:port[,host:port...]`.
    pub fn from_list(list: &str) -> Result<Self, ClientError> {
        let endpoints: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let c = Self::new(endpoints);
        c.validate()?;
        Ok(c)
    }

    /// Checks the values; the message names the field.
    pub fn validate(&self) -> Result<(), ClientError> {
        let bad = |m: String| Err(ClientError::Config(m));
        if self.endpoints.is_empty() {
            return bad("endpoints: at least one host:port is needed".into());
        }
        for e in &self.endpoints {
            let port_ok = e
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !port_ok {
                return bad(format!("endpoint `{e}` is not valid: expected host:port"));
            }
        }
        if !(1..=64).contains(&self.connections_per_endpoint) {
            return bad(format!(
                "connections_per_endpoint {} is out of range: allowed 1..=64",
                self.connections_per_endpoint
            ));
        }
        if self.max_in_flight_per_connection == 0 {
            return bad("max_in_flight_per_connection 0 is out of range: allowed 1..".into());
        }
        if self.request_timeout.is_zero() || self.connect_timeout.is_zero() {
            return bad("request_timeout and connect_timeout must be above 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_lists_are_checked() {
        let c = ClientConfig::from_list("127.0.0.1:7654, localhost:7655").unwrap();
        assert_eq!(c.endpoints, ["127.0.0.1:7654", "localhost:7655"]);
        let err = ClientConfig::from_list("127.0.0.1")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid client config: endpoint `127.0.0.1` is not valid: expected host:port"
        );
        assert!(ClientConfig::from_list(" , ").is_err());
        assert!(ClientConfig::from_list("h:70000").is_err());
    }
}
