//! The client of the central issuer: a list of endpoints, each with a small pool of pipelined
//! connections; timeouts, retries with backoff and failover to the next endpoint; a background
//! re-check of endpoints marked dead; an optional prefetch buffer and an optional embedded
//! fallback issuer.
//!
//! Guarantees: a call returns its IDs exactly once or an error. A request whose connection broke
//! or timed out is sent again (to the next endpoint first); an answer that arrives for a request
//! nobody waits on any more is dropped, so no ID reaches two callers. Lost answers only leave
//! gaps. Servers have distinct machine IDs from the server pool and the fallback issuer one from
//! the embed pool, so IDs from different sources never collide either.
//!
//! Segment numbers ([`Client::next_segment`], [`Client::next_segments`]) come only from servers
//! with segment mode on; the fallback cannot issue them. Every server on one `leaf_alloc`
//! table hands out disjoint numbers, so a retried segment request is as safe as an ID request.

mod conn;
mod endpoint;
mod fallback;
mod tls;

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

pub use tls::ClientTls;
use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use vesta_core::{Explanation, FieldValues, IdBatch, IdRun, Layout};
use vesta_embed::IssuerConfig;

use crate::error::{AttemptError, ClientError};
use crate::proto::{DEFAULT_MAX_BATCH, Request, Response, ServerInfo};
use conn::LayoutPin;
use endpoint::Endpoint;
use fallback::Fallback;

/// How a [`Client`] behaves. `ClientConfig::new(endpoints)` gives sensible defaults.
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
    /// IDs fetched per batch into a local buffer for [`Client::next_id`]; 0 (the default) turns
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

/// Counters of what the client had to do, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Calls answered by a server.
    pub served: u64,
    /// Attempts that failed and were retried.
    pub retries: u64,
    /// Times an endpoint was marked dead.
    pub endpoints_marked_dead: u64,
    /// Times a dead endpoint was found alive again.
    pub endpoints_revived: u64,
    /// Calls answered by the embedded fallback issuer.
    pub fallback_calls: u64,
}

#[derive(Default)]
struct Counters {
    served: AtomicU64,
    retries: AtomicU64,
    dead: AtomicU64,
    revived: AtomicU64,
    fallback: AtomicU64,
}

struct Inner {
    config: ClientConfig,
    endpoints: Vec<Endpoint>,
    /// The smallest `max_batch` a server announced (chunk size of large batches).
    max_batch: AtomicU32,
    prefetched: AsyncMutex<VecDeque<IdRun>>,
    fallback: Option<Fallback>,
    /// The one layout of the servers (and the fallback).
    pin: LayoutPin,
    counters: Counters,
    health: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut h) = self.health.lock()
            && let Some(h) = h.take()
        {
            h.abort();
        }
    }
}

/// A client of one or more vesta TCP servers. Cheap to clone; all clones share connections.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.inner.config.endpoints)
            .finish_non_exhaustive()
    }
}

/// Which source answered a call.
enum Source {
    Server(Response),
    Fallback,
}

impl Client {
    /// Builds a client and starts its health checker. Connections open on first use, so this
    /// succeeds even while every server is down; the fallback issuer, if configured, starts here.
    pub async fn connect(config: ClientConfig) -> Result<Client, ClientError> {
        config.validate()?;
        let fallback = match &config.fallback {
            Some(c) => Some(Fallback::start(c.clone()).await?),
            None => None,
        };
        let endpoints = config
            .endpoints
            .iter()
            .map(|a| Endpoint::new(a.clone(), config.connections_per_endpoint))
            .collect();
        let pin = LayoutPin::default();
        if let Some(f) = &fallback {
            pin.pin(f.layout());
        }
        let inner = Arc::new(Inner {
            endpoints,
            max_batch: AtomicU32::new(DEFAULT_MAX_BATCH),
            prefetched: AsyncMutex::new(VecDeque::new()),
            fallback,
            pin,
            counters: Counters::default(),
            health: std::sync::Mutex::new(None),
            config,
        });
        let task = tokio::spawn(health_loop(Arc::downgrade(&inner)));
        if let Ok(mut h) = inner.health.lock() {
            *h = Some(task);
        }
        Ok(Client { inner })
    }

    /// One ID: from the prefetch buffer when prefetch is on, else one `NEXT_ID` request.
    pub async fn next_id(&self) -> Result<u64, ClientError> {
        let prefetch = self.inner.config.prefetch;
        if prefetch == 0 {
            return self.fetch_one().await;
        }
        let mut buf = self.inner.prefetched.lock().await;
        if let Some(id) = pop(&mut buf) {
            return Ok(id);
        }
        // Refill under the lock: one fetch at a time, the other callers wait for its IDs.
        let batch = self.next_ids(u64::from(prefetch)).await?;
        buf.extend(batch.runs().iter().copied());
        pop(&mut buf).ok_or_else(|| ClientError::Fallback("an empty batch came back".into()))
    }

    async fn fetch_one(&self) -> Result<u64, ClientError> {
        match self.request(&Request::NextId).await? {
            (Source::Server(Response::Id(id)), _) => Ok(id),
            (Source::Fallback, _) => self.fallback()?.next_id().await,
            (Source::Server(other), ep) => Err(self.unexpected(ep, &other)),
        }
    }

    /// `n` IDs as contiguous runs, in increasing order within each run; large counts are fetched
    /// in chunks of the servers' `max_batch`, one after the other.
    pub async fn next_ids(&self, n: u64) -> Result<IdBatch, ClientError> {
        let mut runs = Vec::new();
        let mut left = n;
        while left > 0 {
            let chunk = left.min(u64::from(
                self.inner.max_batch.load(Ordering::Relaxed).max(1),
            ));
            let request = Request::NextIds {
                count: chunk as u32,
            };
            match self.request(&request).await? {
                // The first handshake may reveal a smaller cap than assumed: ask again with it.
                (
                    Source::Server(Response::Error {
                        code: crate::proto::ErrorCode::InvalidArgument,
                        ..
                    }),
                    _,
                ) if chunk > u64::from(self.inner.max_batch.load(Ordering::Relaxed)) => continue,
                (Source::Server(Response::Ids(got)), ep) => {
                    let sum: u64 = got.iter().map(|r| r.count).sum();
                    if sum != chunk {
                        return Err(self.unexpected(ep, &Response::Ids(got)));
                    }
                    runs.extend(got);
                }
                (Source::Fallback, _) => runs.extend(self.fallback()?.next_ids(chunk).await?),
                (Source::Server(other), ep) => return Err(self.unexpected(ep, &other)),
            }
            left -= chunk;
        }
        Ok(IdBatch::from_runs(runs))
    }

    /// The next segment number of `tag` (segment mode: the servers need `[segment] db`). An
    /// unknown tag is `Refused` with `UNKNOWN_TAG`; a server without segments with
    /// `SEGMENTS_OFF`; nothing buffered and the database down with `SEGMENT_UNAVAILABLE`.
    pub async fn next_segment(&self, tag: &str) -> Result<u64, ClientError> {
        let request = Request::Segment { tag: tag.into() };
        match self.server_only(&request).await? {
            (Response::Number(n), _) => Ok(n),
            (other, ep) => Err(self.unexpected(ep, &other)),
        }
    }

    /// `n` segment numbers of `tag` as ranges of consecutive numbers (more than one when they
    /// span segments), fetched in chunks of the servers' `max_batch`; a server answers fewer
    /// than asked only when its ranges would not fit a frame (a tag with a tiny step), and the
    /// rest is asked again. The ranges of one answer increase; numbers from different servers
    /// (after a failover, or across chunks) interleave, as segments of different processes do.
    pub async fn next_segments(&self, tag: &str, n: u64) -> Result<Vec<Range<u64>>, ClientError> {
        let mut ranges: Vec<Range<u64>> = Vec::new();
        let mut left = n;
        while left > 0 {
            let cap = u64::from(self.inner.max_batch.load(Ordering::Relaxed).max(1))
                .min(vesta_core::tag::MAX_SEGMENT_BATCH);
            let chunk = left.min(cap);
            let request = Request::Segments {
                count: chunk as u32,
                tag: tag.into(),
            };
            match self.server_only(&request).await? {
                (
                    Response::Error {
                        code: crate::proto::ErrorCode::InvalidArgument,
                        message,
                    },
                    ep,
                ) => {
                    // The first handshake may reveal a smaller cap than assumed: ask again.
                    if chunk > u64::from(self.inner.max_batch.load(Ordering::Relaxed)) {
                        continue;
                    }
                    return Err(self.unexpected(
                        ep,
                        &Response::Error {
                            code: crate::proto::ErrorCode::InvalidArgument,
                            message,
                        },
                    ));
                }
                (Response::Numbers(got), ep) => {
                    let sum: u64 = got.iter().map(|r| r.end.saturating_sub(r.start)).sum();
                    if sum == 0 || sum > chunk {
                        return Err(self.unexpected(ep, &Response::Numbers(got)));
                    }
                    for r in got {
                        match ranges.last_mut() {
                            Some(last) if last.end == r.start => last.end = r.end,
                            _ => ranges.push(r),
                        }
                    }
                    left -= sum;
                }
                (other, ep) => return Err(self.unexpected(ep, &other)),
            }
        }
        Ok(ranges)
    }

    /// The layout (with its epoch) of the servers' IDs, once a server (or the fallback) told
    /// it; every server of one client must issue in the same one.
    pub fn layout(&self) -> Option<Layout> {
        self.inner.pin.get().cloned()
    }

    /// An ID explained by a server, in the server's layout and epoch (checked against the
    /// layout the server announced: an answer that disagrees is refused).
    pub async fn explain(&self, id: u64) -> Result<Explanation, ClientError> {
        match self.server_only(&Request::Explain { id }).await? {
            (Response::Explained(x), _) => Ok(x),
            (other, ep) => Err(self.unexpected(ep, &other)),
        }
    }

    /// An ID made by a server from field values by name (the layout's own names, or `time`,
    /// `seq`, `node`); out-of-range and missing fields are refused, named.
    pub async fn make(&self, values: &FieldValues) -> Result<u64, ClientError> {
        let request = Request::Make(values.clone());
        match self.server_only(&request).await? {
            (Response::Made(id), _) => Ok(id),
            (other, ep) => Err(self.unexpected(ep, &other)),
        }
    }

    /// The instant (ms since 1970) a time value of the servers' layout starts.
    pub async fn trans_time(&self, time: u64) -> Result<u64, ClientError> {
        match self.server_only(&Request::TransTime { time }).await? {
            (Response::Time(ms), _) => Ok(ms),
            (other, ep) => Err(self.unexpected(ep, &other)),
        }
    }

    /// `INFO` from the first endpoint that answers.
    pub async fn info(&self) -> Result<ServerInfo, ClientError> {
        match self.server_only(&Request::Info).await? {
            (Response::Info(i), _) => Ok(i),
            (other, ep) => Err(self.unexpected(ep, &other)),
        }
    }

    /// `INFO` from each endpoint, in order (an endpoint that does not answer gives its error).
    pub async fn info_each(&self) -> Vec<(String, Result<ServerInfo, ClientError>)> {
        let mut all = Vec::new();
        for (i, ep) in self.inner.endpoints.iter().enumerate() {
            let r = match self.attempt(i, &Request::Info).await {
                Ok(Response::Info(info)) => Ok(info),
                Ok(other) => Err(self.unexpected(i, &other)),
                Err(e) => Err(ClientError::Unavailable {
                    attempts: 1,
                    elapsed_ms: 0,
                    last: e.to_string(),
                }),
            };
            all.push((ep.addr().to_owned(), r));
        }
        all
    }

    /// What the client had to do so far.
    pub fn stats(&self) -> ClientStats {
        let c = &self.inner.counters;
        ClientStats {
            served: c.served.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            endpoints_marked_dead: c.dead.load(Ordering::Relaxed),
            endpoints_revived: c.revived.load(Ordering::Relaxed),
            fallback_calls: c.fallback.load(Ordering::Relaxed),
        }
    }

    /// Each endpoint and whether it is considered alive now.
    pub fn endpoint_health(&self) -> Vec<(String, bool)> {
        self.inner
            .endpoints
            .iter()
            .map(|e| (e.addr().to_owned(), e.is_healthy()))
            .collect()
    }

    fn fallback(&self) -> Result<&Fallback, ClientError> {
        self.inner
            .fallback
            .as_ref()
            .ok_or_else(|| ClientError::Fallback("not configured".into()))
    }

    fn unexpected(&self, ep: usize, answer: &Response) -> ClientError {
        let endpoint = self.endpoint_name(ep);
        match answer {
            Response::Error { code, message } => ClientError::Refused {
                endpoint,
                code: *code,
                message: message.clone(),
            },
            other => ClientError::Refused {
                endpoint,
                code: crate::proto::ErrorCode::Internal,
                message: format!("unexpected answer {other:?}"),
            },
        }
    }

    fn endpoint_name(&self, ep: usize) -> String {
        self.inner
            .endpoints
            .get(ep)
            .map_or_else(String::new, |e| e.addr().to_owned())
    }

    /// Like [`request`](Self::request) for operations the fallback cannot answer.
    async fn server_only(&self, request: &Request) -> Result<(Response, usize), ClientError> {
        match self.request_inner(request, false).await? {
            (Source::Server(r), ep) => Ok((r, ep)),
            (Source::Fallback, _) => Err(ClientError::Fallback("not for this operation".into())),
        }
    }

    async fn request(&self, request: &Request) -> Result<(Source, usize), ClientError> {
        self.request_inner(request, true).await
    }

    /// Sends `request` until some endpoint answers it: endpoints believed alive first, in order,
    /// then the others; a round in which every endpoint failed goes to the fallback (if allowed
    /// and configured) or pauses with exponential backoff and jitter, within the retry budget.
    async fn request_inner(
        &self,
        request: &Request,
        may_fall_back: bool,
    ) -> Result<(Source, usize), ClientError> {
        let inner = &*self.inner;
        let start = Instant::now();
        let mut backoff = inner.config.backoff_initial;
        let mut attempts = 0u32;
        let mut last = String::from("no attempt made");
        let mut order = Vec::with_capacity(inner.endpoints.len());
        loop {
            order.clear();
            order.extend((0..inner.endpoints.len()).filter(|&i| inner.endpoints[i].is_healthy()));
            order.extend((0..inner.endpoints.len()).filter(|&i| !inner.endpoints[i].is_healthy()));
            for &i in &order {
                attempts += 1;
                match self.attempt(i, request).await {
                    Ok(Response::Error { code, message }) if code.is_retryable() => {
                        // Not issuing (lease, clock) or going away: prefer the others for now.
                        self.mark_dead(i);
                        last = format!("{}: {message} ({code})", self.endpoint_name(i));
                    }
                    Ok(answer) => {
                        inner.counters.served.fetch_add(1, Ordering::Relaxed);
                        return Ok((Source::Server(answer), i));
                    }
                    Err(e) => {
                        self.mark_dead(i);
                        last = format!("{}: {e}", self.endpoint_name(i));
                    }
                }
                inner.counters.retries.fetch_add(1, Ordering::Relaxed);
                if start.elapsed() >= inner.config.retry_budget {
                    break;
                }
            }
            if may_fall_back && inner.fallback.is_some() {
                inner.counters.fallback.fetch_add(1, Ordering::Relaxed);
                return Ok((Source::Fallback, usize::MAX));
            }
            let elapsed = start.elapsed();
            if elapsed + backoff > inner.config.retry_budget {
                return Err(ClientError::Unavailable {
                    attempts,
                    elapsed_ms: elapsed.as_millis() as u64,
                    last,
                });
            }
            sleep(jitter(backoff)).await;
            backoff = (backoff * 2).min(inner.config.backoff_max);
        }
    }

    /// One try of `request` on endpoint `i`.
    async fn attempt(&self, i: usize, request: &Request) -> Result<Response, AttemptError> {
        let inner = &*self.inner;
        let ep = &inner.endpoints[i];
        let (conn, fresh) = ep.conn(&inner.config, &inner.pin).await?;
        // A new connection and handshake is a sign of life (an answer on an old one is not:
        // it may have been sent just before the server died).
        if fresh && ep.set_healthy(true) {
            inner.counters.revived.fetch_add(1, Ordering::Relaxed);
        }
        inner
            .max_batch
            .fetch_min(conn.hello().max_batch, Ordering::Relaxed);
        conn.call(request, inner.config.request_timeout).await
    }

    fn mark_dead(&self, i: usize) {
        if self.inner.endpoints[i].set_healthy(false) {
            self.inner.counters.dead.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(endpoint = self.inner.endpoints[i].addr(), "marked dead");
        }
    }
}

fn pop(buf: &mut VecDeque<IdRun>) -> Option<u64> {
    let run = buf.front_mut()?;
    let id = run.first;
    run.count -= 1;
    run.first += run.step;
    if run.count == 0 {
        buf.pop_front();
    }
    Some(id)
}

/// `d` scaled by a pseudo-random factor in [0.5, 1.5), so clients that failed together do not
/// retry together.
fn jitter(d: Duration) -> Duration {
    static SEED: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    let x = SEED.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
    let mut z = x ^ (x >> 31);
    z = z.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^= z >> 29;
    let frac = (z % 1000) as f64 / 1000.0 + 0.5;
    d.mul_f64(frac)
}

/// Re-checks endpoints marked dead every `health_check_interval` until the client is dropped.
async fn health_loop(inner: Weak<Inner>) {
    loop {
        let interval = match inner.upgrade() {
            Some(i) => i.config.health_check_interval,
            None => return,
        };
        sleep(interval).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        for ep in inner.endpoints.iter().filter(|e| !e.is_healthy()) {
            if ep.check(&inner.config, &inner.pin).await && ep.set_healthy(true) {
                inner.counters.revived.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(endpoint = ep.addr(), "alive again");
            }
        }
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

    #[test]
    fn pop_walks_runs_in_order() {
        let mut buf = VecDeque::from([
            IdRun {
                first: 5,
                count: 2,
                step: 1024,
            },
            IdRun {
                first: 9000,
                count: 1,
                step: 1,
            },
        ]);
        assert_eq!(pop(&mut buf), Some(5));
        assert_eq!(pop(&mut buf), Some(5 + 1024));
        assert_eq!(pop(&mut buf), Some(9000));
        assert_eq!(pop(&mut buf), None);
    }

    #[test]
    fn jitter_stays_within_half_to_one_and_a_half() {
        for _ in 0..1000 {
            let j = jitter(Duration::from_millis(100));
            assert!(j >= Duration::from_millis(50) && j < Duration::from_millis(150));
        }
    }
}
