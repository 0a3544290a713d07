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
//! Per-key sequence numbers ([`Client::seq_next`], [`Client::seq_next_n`],
//! [`Client::seq_current`]) come only from servers with `[seq] db`; a retried request only
//! leaves a gap in the key's numbers.
//!
//! Here: [`Client`] and its calls; `config.rs`: [`ClientConfig`]; `failover.rs`: retries,
//! failover, backoff and the re-checks; `endpoint.rs`: an endpoint's health and pool;
//! `conn.rs`: one pipelined connection; `fallback.rs`: the embedded issuer; `tls.rs`.

mod config;
mod conn;
mod endpoint;
mod failover;
mod fallback;
mod seq_routes;
mod tls;

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub use config::ClientConfig;
pub use tls::ClientTls;
use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinHandle;
use vesta_core::{Explanation, FieldValues, IdBatch, IdRun, Layout};

use crate::error::ClientError;
use crate::proto::{DEFAULT_MAX_BATCH, Request, Response, ServerInfo};
use conn::LayoutPin;
use endpoint::Endpoint;
use failover::{Source, health_loop};
use fallback::Fallback;

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
    /// The largest `SEQ_NEXT` count the servers take (their `seq.step`), once one refused a
    /// larger call naming it; `u32::MAX` until then.
    seq_chunk: AtomicU32,
    prefetched: AsyncMutex<VecDeque<IdRun>>,
    fallback: Option<Fallback>,
    /// The one layout of the servers (and the fallback).
    pin: LayoutPin,
    counters: Counters,
    /// Which member served each key last (sequences clusters).
    seq_routes: seq_routes::Routes,
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
            seq_chunk: AtomicU32::new(u32::MAX),
            prefetched: AsyncMutex::new(VecDeque::new()),
            fallback,
            pin,
            counters: Counters::default(),
            seq_routes: seq_routes::Routes::default(),
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

    /// The next number of `key` (per-key sequences: the server needs `[seq] db`): above every
    /// number the key was handed before. A bad key is `Refused` with `INVALID_ARGUMENT`; a
    /// server without sequences with `SEQ_OFF`; the key's section needing its table, which is
    /// down, slow or moved under another process, with `SEQ_UNAVAILABLE` (at once from a single
    /// server; from one of several, after asking the others within the retry budget: a member
    /// cut off from its table or coordination hands its sets on when its lease runs out).
    pub async fn seq_next(&self, key: impl AsRef<[u8]>) -> Result<u64, ClientError> {
        let key = bytes::Bytes::copy_from_slice(key.as_ref());
        Ok(self.seq_call(key, 1).await?.end - 1)
    }

    /// `n` numbers of `key` as ranges, increasing: one call takes at most the server's step
    /// (the server refuses a larger count naming its step, and the client asks again in calls
    /// of at most it, remembered for later calls), so numbers
    /// of one call are consecutive and calls leave gaps between them only when another caller
    /// or a raise came between.
    pub async fn seq_next_n(
        &self,
        key: impl AsRef<[u8]>,
        n: u64,
    ) -> Result<Vec<Range<u64>>, ClientError> {
        let key = bytes::Bytes::copy_from_slice(key.as_ref());
        let mut ranges: Vec<Range<u64>> = Vec::new();
        let mut left = n;
        while left > 0 {
            let chunk = u64::from(self.inner.seq_chunk.load(Ordering::Relaxed));
            let asked = left.min(chunk);
            let got = match self.seq_call(key.clone(), asked).await {
                Ok(got) => got,
                // A call above the server's step is refused whole (nothing taken), naming the
                // step: ask again in calls of at most it.
                Err(e) => match step_named(&e).filter(|&step| step < asked) {
                    Some(step) => {
                        self.inner
                            .seq_chunk
                            .fetch_min(step as u32, Ordering::Relaxed);
                        continue;
                    }
                    None => return Err(e),
                },
            };
            left -= got.end - got.start;
            match ranges.last_mut() {
                Some(last) if last.end == got.start => last.end = got.end,
                _ => ranges.push(got),
            }
        }
        Ok(ranges)
    }

    /// One `SEQ_NEXT` of at most `count` numbers: the range the server answered.
    async fn seq_call(&self, key: bytes::Bytes, count: u64) -> Result<Range<u64>, ClientError> {
        let request = Request::SeqNext {
            count: count as u32,
            key: key.clone(),
        };
        match self.seq_request(&key, &request).await? {
            (Response::Seq { last, count: got }, _) if u64::from(got) <= count => {
                Ok(last + 1 - u64::from(got)..last + 1)
            }
            (other, ep) => Err(self.unexpected(ep, &other)),
        }
    }

    /// The current number of `key`, without moving it: the last number handed out, or on a
    /// server that has not served the key since it started, its section's stored maximum.
    pub async fn seq_current(&self, key: impl AsRef<[u8]>) -> Result<u64, ClientError> {
        let request = Request::SeqCurrent {
            key: bytes::Bytes::copy_from_slice(key.as_ref()),
        };
        match self.seq_request(key.as_ref(), &request).await? {
            (Response::SeqCurrent(n), _) => Ok(n),
            (other, ep) => Err(self.unexpected(ep, &other)),
        }
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

/// The largest count a server takes, from its refusal of a larger `SEQ_NEXT` (`INVALID_ARGUMENT`,
/// "... count N is out of range: allowed 1..=STEP"), if `e` is that refusal.
fn step_named(e: &ClientError) -> Option<u64> {
    let ClientError::Refused {
        code: crate::proto::ErrorCode::InvalidArgument,
        message,
        ..
    } = e
    else {
        return None;
    };
    let (_, after) = message.split_once("count ")?;
    let (_, max) = after.split_once("out of range: allowed 1..=")?;
    let digits: &str = &max[..max.bytes().take_while(u8::is_ascii_digit).count()];
    digits
        .parse()
        .ok()
        .filter(|&n| n >= 1 && n <= u64::from(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
