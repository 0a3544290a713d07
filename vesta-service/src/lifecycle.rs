//! How a server starts and stops, the same for both:
//!
//! 1. the config is checked (done when it was loaded);
//! 2. the listen address is *bound but not listened on*: a busy port fails before any machine-ID
//!    lease is taken, and while the issuer starts (a ZooKeeper lease, a start guard) clients are
//!    refused at once instead of hanging in a backlog nobody reads;
//! 3. with `[segment] db` set, the segment store opens ([`Segments::open`]): a missing table
//!    fails here, before any lease is taken; an unreachable database does not stop the start;
//!    with `[seq] db` set, the per-key sequences open (`vesta_seq` created on first use): a
//!    database that cannot be reached fails the start, naming it;
//! 4. the issuer starts, off the async workers, and is wrapped in the [`AsyncIssuer`] every
//!    request issues through (parked requests served fairly at each unit boundary);
//! 5. the socket listens; the server serves until its shutdown future resolves;
//! 6. connections drain within `shutdown_grace_ms`, the rest are closed;
//! 7. the segment store gives its unused tails back ([`give_back`]); the per-key sequences'
//!    connections close (nothing to write: every number handed out is under a stored maximum);
//! 8. the machine ID is released (final mark, claim deleted), off the async workers.
//!
//! A server runs steps 2-5 with [`launch`] (or [`launch_with_issuer`]), which also loads its
//! TLS files, reads its limits and builds the [`Service`] its connections share ([`Started`]),
//! and steps 6-8 with [`stop`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::task::{JoinHandle, JoinSet};
use vesta_core::{Clock, GenMethod};
use vesta_embed::{AsyncIssuer, Issuer, SystemClock};
use vesta_segment::GiveBack;
use vesta_seq::cluster::{Cluster, ClusterOptions};
use vesta_seq::{Mode, Owner, SeqSection, Sequences};

use crate::config::{CommonLimits, ServerSection, ServiceConfig, server_tls, validate_section};
use crate::error::{ConfigError, ServeError};
use crate::ops::{Limits, Service};
use crate::segments::Segments;
use crate::shutdown::Trigger;
use crate::tls::{ServerTls, watch_sighup};

/// Connections waiting to be accepted, at most.
const BACKLOG: u32 = 1024;

/// A server ready to serve: a listening socket and the issuer requests go through.
#[derive(Debug)]
pub struct Prepared<C: Clock + 'static = SystemClock> {
    /// Listening.
    pub listener: TcpListener,
    /// The address bound (the real port when the config asked for port 0).
    pub addr: SocketAddr,
    /// The issuer, behind its waiting list.
    pub issuer: AsyncIssuer<C>,
    /// The segment store, when segment mode is on.
    pub segments: Option<Arc<Segments>>,
    /// The per-key sequences, when `[seq] db` is set.
    pub seq: Option<Sequences>,
    /// Its membership of the sequences cluster, when `[seq] cluster` is set.
    pub seq_cluster: Option<Cluster>,
}

/// Steps 2-5 for a config: bind, open the segment store, start the issuer, listen.
pub async fn start<S: ServerSection>(
    config: &ServiceConfig<S>,
) -> Result<Prepared<SystemClock>, ServeError> {
    config.validate()?;
    let limits = config.limits();
    let socket = bind(limits.listen)?;
    let bound = socket.local_addr().map_err(|cause| ServeError::Bind {
        addr: limits.listen,
        cause,
    })?;
    let segments = Segments::open(&config.segment).await?;
    let seq = match open_seq(&config.seq, bound, S::GEN_METHOD).await {
        Ok(seq) => seq,
        Err(e) => {
            give_back(segments.as_deref()).await;
            return Err(e);
        }
    };
    let issuer_config = config.issuer_config();
    let started = tokio::task::spawn_blocking(move || Issuer::start(issuer_config))
        .await
        .map_err(|e| ServeError::Internal(format!("starting the issuer: {e}")))
        .and_then(|r| r.map_err(ServeError::from))
        .and_then(|issuer| listen(socket, Arc::new(issuer), S::GEN_METHOD, &limits));
    let started = match (started, &seq) {
        (Ok(mut prepared), Some(seqs)) if config.seq.cluster => {
            match join_cluster(config, seqs, &prepared, S::GEN_METHOD).await {
                Ok(cluster) => {
                    prepared.seq_cluster = Some(cluster);
                    Ok(prepared)
                }
                Err(e) => {
                    let _ = release(prepared.issuer.clone()).await;
                    Err(e)
                }
            }
        }
        (started, _) => started,
    };
    match started {
        Ok(mut prepared) => {
            prepared.segments = segments;
            prepared.seq = seq;
            Ok(prepared)
        }
        Err(e) => {
            // Nothing was issued: close the store (nothing to give back).
            give_back(segments.as_deref()).await;
            if let Some(seq) = seq {
                seq.close().await;
            }
            Err(e)
        }
    }
}

/// With `[seq] db` set, opens the per-key sequences (creating `vesta_seq` on first use): a
/// database that cannot be reached or refuses fails the start, naming it. A standalone server
/// takes the table's lease (refused, naming the holder, while another process serves the
/// table, or when the table is recorded as a cluster's), advertising where it listens; a
/// cluster member holds nothing until it joins.
async fn open_seq(
    section: &SeqSection,
    bound: SocketAddr,
    gen_method: GenMethod,
) -> Result<Option<Sequences>, ServeError> {
    let Some(url) = section.db_url().map_err(ConfigError::from)? else {
        return Ok(None);
    };
    let owner = if section.cluster {
        Owner::member()
    } else {
        let at = section
            .advertise
            .clone()
            .unwrap_or_else(|| bound.to_string());
        let mut owner = Owner::standalone().lease(Duration::from_millis(section.cluster_ttl_ms));
        if gen_method == GenMethod::Rest {
            owner.rest = at;
        } else {
            owner.tcp = at;
        }
        owner
    };
    let seqs = Sequences::open_as(&url, section.options(), owner)
        .await
        .map_err(ServeError::from_coordination)?;
    if section.cluster
        && let Err(e) = seqs.record_mode(Mode::Cluster(section.coordination)).await
    {
        seqs.close().await;
        return Err(ServeError::Seq(e));
    }
    Ok(Some(seqs))
}

/// Joins the sequences cluster as the issuer's machine ID, advertising `seq.advertise` (else
/// the bound address, unless it is a wildcard) for this server's transport.
async fn join_cluster<C: Clock + 'static, S: ServerSection>(
    config: &ServiceConfig<S>,
    seqs: &Sequences,
    prepared: &Prepared<C>,
    gen_method: GenMethod,
) -> Result<Cluster, ServeError> {
    let section = &config.seq;
    let advertise = match &section.advertise {
        Some(a) => a.clone(),
        None if prepared.addr.ip().is_unspecified() => {
            return Err(ConfigError::Inconsistent(format!(
                "seq.cluster: this server listens on {}, which clients cannot be sent to; set \
                 seq.advertise to the host:port other members should name",
                prepared.addr
            ))
            .into());
        }
        None => prepared.addr.to_string(),
    };
    let (tcp, rest) = if gen_method == GenMethod::Rest {
        (String::new(), advertise)
    } else {
        (advertise, String::new())
    };
    let options = ClusterOptions {
        member: prepared.issuer.issuer().status().machine,
        tcp,
        rest,
        ttl: Duration::from_millis(section.cluster_ttl_ms),
    };
    let coord = vesta_seq::coordination::coordinator(section.coordination, config.reach(), seqs)
        .await
        .map_err(ServeError::from_coordination)?;
    Cluster::join_with(seqs, options, coord)
        .await
        .map_err(ServeError::Seq)
}

/// Steps 2 and 5 for an issuer started elsewhere (tests pass one on a manual clock); it must
/// issue with the server's genMethod. `segments`, if any, were opened by the caller.
pub async fn start_with_issuer<C: Clock + 'static>(
    issuer: Arc<Issuer<C>>,
    gen_method: GenMethod,
    limits: &CommonLimits,
) -> Result<Prepared<C>, ServeError> {
    let socket = bind(limits.listen)?;
    listen(socket, issuer, gen_method, limits)
}

/// A server started (steps 2-5): listening, with the service its connections share, its
/// `[server]` section (`max_batch` capped to the layout) and its TLS.
#[derive(Debug)]
pub struct Started<C: Clock + 'static, S> {
    /// Listening.
    pub listener: TcpListener,
    /// The address bound (the real port when the config asked for port 0).
    pub addr: SocketAddr,
    /// The state and ops every connection shares.
    pub service: Arc<Service<C>>,
    /// The `[server]` section, `max_batch` lowered to what the layout issues in a second.
    pub section: S,
    /// TLS, when `tls_cert` and `tls_key` are set.
    pub tls: Option<ServerTls>,
    /// The tasks beside the connections; hand them to [`stop`].
    pub watchers: Watchers,
}

/// Steps 2-5 for a config, and the service: the certificate loads first (a bad file costs
/// nothing), then bind, segments, issuer, listen. `alpn`: the protocols TLS offers.
pub async fn launch<S: ServerSection>(
    config: &ServiceConfig<S>,
    alpn: &[&[u8]],
) -> Result<Started<SystemClock, S>, ServeError> {
    let tls = server_tls(&config.server, alpn)?;
    let prepared = start(config).await?;
    Started::new(prepared, config.server.clone(), tls)
}

/// Steps 2 and 5 for an issuer started elsewhere (tests use a manual clock or a fenced
/// issuer; it must issue with `S`'s genMethod), serving `segments` opened elsewhere too.
pub async fn launch_with_issuer<C: Clock + 'static, S: ServerSection>(
    issuer: Arc<Issuer<C>>,
    section: S,
    segments: Option<Arc<Segments>>,
    alpn: &[&[u8]],
) -> Result<Started<C, S>, ServeError> {
    launch_with_stores(issuer, section, segments, None, alpn).await
}

/// [`launch_with_issuer`], also serving per-key sequences `seq` opened elsewhere.
pub async fn launch_with_stores<C: Clock + 'static, S: ServerSection>(
    issuer: Arc<Issuer<C>>,
    section: S,
    segments: Option<Arc<Segments>>,
    seq: Option<Sequences>,
    alpn: &[&[u8]],
) -> Result<Started<C, S>, ServeError> {
    validate_section(&section, issuer.layout())?;
    let tls = server_tls(&section, alpn)?;
    let mut prepared = start_with_issuer(issuer, S::GEN_METHOD, &section.common()).await?;
    prepared.segments = segments;
    prepared.seq = seq;
    Started::new(prepared, section, tls)
}

impl<C: Clock + 'static, S: ServerSection> Started<C, S> {
    fn new(p: Prepared<C>, mut section: S, tls: Option<ServerTls>) -> Result<Self, ServeError> {
        section.cap_max_batch(p.issuer.issuer().layout().capacity_per_second());
        let limits = Limits::of(&section)?;
        Ok(Started {
            listener: p.listener,
            addr: p.addr,
            service: Arc::new(
                Service::new(p.issuer, p.segments, limits)
                    .with_seq(p.seq)
                    .with_seq_cluster(p.seq_cluster),
            ),
            section,
            watchers: Watchers {
                sighup: watch_sighup(tls.clone()),
                end_of_life: None,
            },
            tls,
        })
    }
}

/// The tasks a server keeps beside its connections: the TLS reload on SIGHUP (from the start
/// on) and the daily end-of-life warning (while serving). [`stop`] ends them.
#[derive(Debug)]
pub struct Watchers {
    sighup: JoinHandle<()>,
    end_of_life: Option<JoinHandle<()>>,
}

impl Watchers {
    /// Serving begins: the end-of-life warning repeats daily from now on.
    pub fn serving<C: Clock + 'static>(&mut self, issuer: &Arc<Issuer<C>>) {
        self.end_of_life = Some(warn_daily_near_end_of_life(Arc::clone(issuer)));
    }
}

/// Steps 6-8, once the server stopped accepting (its listener dropped): ends the watchers,
/// tells every connection to drain (`trigger`), waits for them (`tasks`) up to the grace
/// period, gives the segments' unused tails back and releases the machine ID.
/// `connections`: how many were accepted.
pub async fn stop<C: Clock + 'static>(
    service: Arc<Service<C>>,
    watchers: Watchers,
    trigger: &Trigger,
    tasks: &mut JoinSet<()>,
    connections: u64,
) -> ServeReport {
    watchers.sighup.abort();
    if let Some(task) = watchers.end_of_life {
        task.abort();
    }
    trigger.fire();
    let grace = service.limits().shutdown_grace;
    let forced_closed = drain(tasks, grace).await;
    let give_back = give_back(service.segments().map(|s| &**s)).await;
    // A member hands its sets off first (stops serving them, releases them, ends its lease),
    // so the others take them at their next beat.
    if let Some(cluster) = service.take_seq_cluster()
        && let Err(e) = cluster.leave().await
    {
        tracing::warn!("leaving the sequences cluster: {e}; its sets move when the lease expires");
    }
    // Nothing to write for the sequences: every number handed out is under a stored maximum.
    if let Some(seq) = service.seq() {
        seq.close().await;
    }
    // Release the machine ID now, even if the caller still holds the issuer.
    let ids = service.async_issuer().clone();
    drop(service);
    let release_error = release(ids).await;
    ServeReport {
        connections,
        forced_closed,
        release_error,
        give_back,
    }
}

fn bind(addr: SocketAddr) -> Result<TcpSocket, ServeError> {
    let bind_error = |cause| ServeError::Bind { addr, cause };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(bind_error)?;
    socket.set_reuseaddr(true).map_err(bind_error)?;
    socket.bind(addr).map_err(bind_error)?;
    Ok(socket)
}

fn listen<C: Clock + 'static>(
    socket: TcpSocket,
    issuer: Arc<Issuer<C>>,
    gen_method: GenMethod,
    limits: &CommonLimits,
) -> Result<Prepared<C>, ServeError> {
    let actual = issuer.status().gen_method;
    if actual != gen_method {
        return Err(ConfigError::Inconsistent(format!(
            "this server issues with genMethod {gen_method}, not {actual}"
        ))
        .into());
    }
    let addr = socket.local_addr().map_err(|cause| ServeError::Bind {
        addr: limits.listen,
        cause,
    })?;
    let listener = socket
        .listen(BACKLOG)
        .map_err(|cause| ServeError::Bind { addr, cause })?;
    let issuer = AsyncIssuer::new(issuer, limits.max_wait())
        .map_err(|e| ServeError::Internal(e.to_string()))?;
    Ok(Prepared {
        listener,
        addr,
        issuer,
        segments: None,
        seq: None,
        seq_cluster: None,
    })
}

/// How often a serving server repeats its end-of-life warning.
const END_OF_LIFE_CHECK: Duration = Duration::from_secs(24 * 3600);

/// Repeats the issuer's end-of-life warning once a day while a server runs (the first was
/// logged at start); abort the task when serving ends.
pub fn warn_daily_near_end_of_life<C: Clock + 'static>(
    issuer: Arc<Issuer<C>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut daily = tokio::time::interval(END_OF_LIFE_CHECK);
        daily.tick().await;
        loop {
            daily.tick().await;
            issuer.warn_near_end_of_life();
        }
    })
}

/// What a server did between start and stop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServeReport {
    /// Connections accepted.
    pub connections: u64,
    /// Connections still open when the grace period ended, closed without finishing.
    pub forced_closed: usize,
    /// Why giving the machine ID back was not clean (`None`: released). A leased ID whose
    /// release failed expires with its ZooKeeper session; no duplicate can result.
    pub release_error: Option<String>,
    /// What the segment store did with each tag's unused numbers (empty without segments).
    pub give_back: Vec<GiveBack>,
}

impl ServeReport {
    /// The report, or the release error as an error.
    pub fn into_result(self) -> Result<Self, ServeError> {
        match self.release_error.clone() {
            None => Ok(self),
            Some(e) => Err(ServeError::Release(e)),
        }
    }
}

/// Step 6: waits up to `grace` for the connection tasks, then aborts the rest; returns how many
/// were cut off.
pub async fn drain(tasks: &mut JoinSet<()>, grace: Duration) -> usize {
    let finished =
        tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    let forced = if finished.is_err() { tasks.len() } else { 0 };
    if forced > 0 {
        tracing::warn!(
            forced,
            "grace period over: closing the connections still busy"
        );
    }
    tasks.shutdown().await;
    forced
}

/// Step 7: stops segment issuing and gives each tag's unused tail back
/// ([`Segments::shutdown`]), after the connections drained and before the machine ID goes.
pub async fn give_back(segments: Option<&Segments>) -> Vec<GiveBack> {
    match segments {
        Some(s) => s.shutdown().await,
        None => Vec::new(),
    }
}

/// Step 8: gives the machine ID back ([`Issuer::shutdown`]: final mark and claim deleted for a
/// lease, released state for a static ID) and stops the issuer's clock thread, off the async
/// workers, since both may wait (on ZooKeeper, on a unit boundary). After it the issuer issues
/// nothing, even through other handles.
pub async fn release<C: Clock + 'static>(ids: AsyncIssuer<C>) -> Option<String> {
    let error = ids.shutdown().await.err().map(|e| e.to_string());
    match &error {
        None => tracing::info!("stopped; machine ID released"),
        Some(e) => tracing::warn!("stopped; {e}"),
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bound_socket_refuses_connections_until_it_listens() {
        let socket = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = socket.local_addr().unwrap();
        let refused = tokio::net::TcpStream::connect(addr).await;
        assert!(refused.is_err(), "connected before listen");
        let listener = socket.listen(8).unwrap();
        // A port someone listens on is busy: caught before the issuer starts.
        assert!(matches!(bind(addr), Err(ServeError::Bind { .. })));
        let (accepted, connected) =
            tokio::join!(listener.accept(), tokio::net::TcpStream::connect(addr));
        assert!(accepted.is_ok() && connected.is_ok());
    }
}
