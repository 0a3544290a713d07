//! The one state every transport serves from ([`Service`]) and the operations on it, each a
//! typed function written once (mini-redis's `Db` and `Command::apply`): IDs and batches
//! ([`Service::ids`]), explain, make, trans-time ([`Service::make`], ...), segment numbers
//! ([`Service::segment_number`], [`Service::segment_numbers`]), per-key sequences
//! ([`Service::seq_next`], [`Service::seq_current`]), health and status. The TCP
//! server, the REST server (and the next transport) only parse a request, call the op, and
//! write its answer or map its [`OpError`] by [`ErrorKind`], each in one place of their own.
//!
//! An op answers now or later ([`Answer`]): an ID request whose time unit is used up waits
//! for a unit boundary ([`IdsLater`]), a segment request whose buffers are empty waits for
//! the store at most `segment.wait_ms` ([`Later`]). What an op hands out is counted here, once:
//! `vesta_ids_issued_total` and `vesta_segment_numbers_issued_total` do not depend on the
//! transport that asked.
//!
//! Adding an op: a method on [`Service`] in the module of what it reads (the issuer: `ids.rs`,
//! the store: `segments.rs`), returning its value, an [`Answer`], or an [`OpError`]; then each
//! transport's parse, call and write.

mod error;
mod ids;
mod segments;
mod seq;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use vesta_core::Clock;
use vesta_embed::{AsyncIssuer, Flow, Issuer, Status, SystemClock};

use crate::auth::BearerToken;
use crate::config::ServerSection;
use crate::error::ConfigError;
use crate::health::Health;
use crate::metrics::Connections;
use crate::segments::Segments;
use vesta_seq::Sequences;
use vesta_seq::cluster::{Cluster, ClusterStatus};

pub use error::{ErrorKind, OpError, SeqOwner};
pub use ids::IdsLater;
pub use seq::SeqNumbers;

/// What a server allows, read from its `[server]` section: the same keys on every transport.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Limits {
    /// Largest number of IDs (or segment numbers) one request may ask for, capped at what the
    /// layout issues in a second.
    pub max_batch: u64,
    /// Connections served at once (`vesta_connections_max`).
    pub max_connections: u64,
    /// How long a shutdown lets connections finish their in-flight work.
    pub shutdown_grace: Duration,
    /// Making IDs is allowed (`[server] make`).
    pub make: bool,
    /// The web console is on (`[server] console`).
    pub console: bool,
    /// The bearer token HTTP requests must carry (`[server] auth_token_file`), if set.
    pub auth_token: Option<BearerToken>,
}

impl Limits {
    /// The limits of `section` (its `max_batch` already capped); reads the token file.
    pub fn of<S: ServerSection>(section: &S) -> Result<Limits, ConfigError> {
        let common = section.common();
        Ok(Limits {
            max_batch: common.max_batch,
            max_connections: common.max_connections,
            shutdown_grace: common.shutdown_grace(),
            make: section.make(),
            console: section.console(),
            auth_token: BearerToken::from_file(section.auth_token_file())?,
        })
    }

    /// `Ok` while making IDs is allowed (`[server] make`), else the refusal every transport
    /// gives.
    pub fn check_make(&self) -> Result<(), OpError> {
        if self.make {
            return Ok(());
        }
        Err(OpError::new(
            ErrorKind::Off,
            "making IDs is switched off on this server ([server] make = false)",
        ))
    }
}

/// The state every connection of every transport shares: the issuer behind its waiting list,
/// the segment store (segment mode), the limits and the counters. Cheap to share in an `Arc`.
#[derive(Debug)]
pub struct Service<C: Clock + 'static = SystemClock> {
    ids: AsyncIssuer<C>,
    segments: Option<Arc<Segments>>,
    seq: Option<Sequences>,
    /// This server's membership of the sequences cluster (`[seq] cluster`); taken at stop.
    seq_cluster: std::sync::Mutex<Option<Cluster>>,
    /// Per-key sequence numbers handed out (`vesta_seq_numbers_issued_total`).
    seq_issued: Counter,
    limits: Limits,
    issued: Counter,
    connections: Connections,
}

impl<C: Clock + 'static> Service<C> {
    /// The service of `ids` (and `segments`, when segment mode is on) under `limits`.
    pub fn new(ids: AsyncIssuer<C>, segments: Option<Arc<Segments>>, limits: Limits) -> Self {
        let connections = Connections::new(limits.max_connections);
        Service {
            ids,
            segments,
            seq: None,
            seq_cluster: std::sync::Mutex::new(None),
            seq_issued: Counter::default(),
            limits,
            issued: Counter::default(),
            connections,
        }
    }

    /// With the per-key sequences `seq` (`[seq] db`), when set.
    pub fn with_seq(mut self, seq: Option<Sequences>) -> Self {
        self.seq = seq;
        self
    }

    /// The per-key sequences, when `[seq] db` is set.
    pub fn seq(&self) -> Option<&Sequences> {
        self.seq.as_ref()
    }

    /// As a member of the sequences cluster `cluster` (`[seq] cluster`), when set.
    pub fn with_seq_cluster(self, cluster: Option<Cluster>) -> Self {
        *self.seq_cluster.lock().unwrap_or_else(|e| e.into_inner()) = cluster;
        self
    }

    /// What this server's membership of the sequences cluster is doing, when it is a member.
    pub fn seq_cluster_status(&self) -> Option<ClusterStatus> {
        let cluster = self.seq_cluster.lock().unwrap_or_else(|e| e.into_inner());
        cluster.as_ref().map(Cluster::status)
    }

    /// The membership, taken out to leave the cluster (at stop).
    pub fn take_seq_cluster(&self) -> Option<Cluster> {
        self.seq_cluster
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Registers the metrics every server exports alike in `registry` (prefix `vesta`): the
    /// issuer's, `vesta_ids_issued_total`, the connections and their limit, and the segments'.
    pub fn register_metrics(&self, registry: &mut Registry) {
        crate::metrics::register_issuer(registry, &self.ids);
        registry.register(
            "ids_issued",
            "IDs handed out to clients (REST /genid, /genids and Leaf's snowflake path; TCP \
             NEXT_ID and NEXT_IDS)",
            self.issued.clone(),
        );
        self.connections.register(registry);
        if let Some(segments) = &self.segments {
            crate::metrics::register_segments(registry, Arc::clone(segments));
        }
        if let Some(seq) = &self.seq {
            crate::metrics::register_seq(registry, seq.clone(), self.seq_issued.clone());
        }
    }

    /// The issuer: its layout, clock and status.
    pub fn issuer(&self) -> &Arc<Issuer<C>> {
        self.ids.issuer()
    }

    /// The issuer behind its waiting list.
    pub fn async_issuer(&self) -> &AsyncIssuer<C> {
        &self.ids
    }

    /// A connection's share of the issuer: its waiting requests take turns with other flows'.
    pub fn flow(&self) -> Flow<C> {
        self.ids.flow()
    }

    /// The segment store, when segment mode is on.
    pub fn segments(&self) -> Option<&Arc<Segments>> {
        self.segments.as_ref()
    }

    /// What this server allows.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The open-connections gauge: each connection holds a guard of it while it lives.
    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// IDs handed out since start, all transports.
    pub fn ids_issued(&self) -> u64 {
        self.issued.get()
    }

    /// The issuer's status now (machine ID, lease, last issued time).
    pub fn status(&self) -> Status {
        self.issuer().status()
    }

    /// The health `/healthz` answers: issuing or why not, the segments' and the per-key
    /// sequences' state.
    pub fn health(&self) -> Health {
        let issuer = self.issuer();
        Health::of(&issuer.status(), issuer.clock().now_ms())
            .with_segments(self.segments.as_deref())
            .with_seq(self.seq.as_ref())
    }

    /// `Ok` while making IDs is allowed, else the refusal every transport gives.
    pub fn check_make(&self) -> Result<(), OpError> {
        self.limits.check_make()
    }
}

/// `count` within `1..=max`, or the refusal naming it.
fn check_count(count: u64, max: u64) -> Result<u64, OpError> {
    if (1..=max).contains(&count) {
        Ok(count)
    } else {
        Err(OpError::count_out_of_range(count, max))
    }
}

/// An op's answer: there now, or on its way (`L`, a future of the same result).
#[derive(Debug)]
pub enum Answer<T, L = Later<T>> {
    /// Answered without waiting.
    Now(Result<T, OpError>),
    /// Waiting: for a unit boundary, or for the segment store.
    Later(L),
}

/// Whether an op may take its answer now, or must leave the taking to the first poll of its
/// future: a caller that answers in request order (TCP's pipeline) with earlier requests
/// still waiting takes nothing ahead of them, so its numbers come after theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Nothing of the caller's waits: take now if the answer is there.
    Now,
    /// Earlier requests of the caller wait: take when polled.
    Queued,
}

/// An answer on its way (segment numbers from the store); counted when it arrives.
pub struct Later<T>(Pin<Box<dyn Future<Output = Result<T, OpError>> + Send>>);

impl<T> std::fmt::Debug for Later<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Later(..)")
    }
}

impl<T> Later<T> {
    fn new(f: impl Future<Output = Result<T, OpError>> + Send + 'static) -> Self {
        Later(Box::pin(f))
    }

    /// The answer if it is there after one poll, without waiting (a later poll with a real
    /// waker goes on from where this one stopped).
    pub fn try_take(&mut self) -> Option<Result<T, OpError>> {
        match self
            .0
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(r) => Some(r),
            Poll::Pending => None,
        }
    }

    /// `Now` if the answer came at the first poll, else still `Later`.
    fn polled_once(mut self) -> Answer<T> {
        match self.try_take() {
            Some(r) => Answer::Now(r),
            None => Answer::Later(self),
        }
    }
}

impl<T> Future for Later<T> {
    type Output = Result<T, OpError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// A service on a manual clock, for the ops' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;
    use std::time::Duration;

    use vesta_core::{GenMethod, IdType, ManualClock};
    use vesta_embed::{AsyncIssuer, Issuer, IssuerConfig};

    use super::{Limits, Service};

    /// A service with static machine 930 issuing `gen_method` IDs of `id_type`, `max_batch`
    /// per request, on a clock that stands still until the test moves it.
    pub(crate) fn service(
        id_type: IdType,
        gen_method: GenMethod,
        max_batch: u64,
    ) -> (Service<Arc<ManualClock>>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let mut config = IssuerConfig::default();
        config.id.id_type = Some(id_type);
        config.machine.id = Some(930);
        config.gen_method = gen_method;
        let issuer = Arc::new(Issuer::start_with_clock(config, clock.clone()).unwrap());
        clock.hold_waits(true);
        let ids = AsyncIssuer::new(issuer, Duration::from_secs(3)).unwrap();
        let limits = Limits {
            max_batch,
            max_connections: 1,
            shutdown_grace: Duration::ZERO,
            make: true,
            console: false,
            auth_token: None,
        };
        (Service::new(ids, None, limits), clock)
    }
}
