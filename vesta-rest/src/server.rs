//! The listener: accepts connections under the connection limit and hands each to
//! [`connection::serve`] (HTTP/1.1 or HTTP/2 by hyper, configured here with the limits that bound
//! what one connection can pin). Start and stop follow the shared order
//! of [`vesta_service::lifecycle`]: bind, open the segment store (segment mode), start the
//! issuer, listen; serve; drain within `shutdown_grace_ms`; give the segments' unused tails
//! back; release the machine ID.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use vesta_core::Clock;
use vesta_embed::{Issuer, SystemClock};
use vesta_seq::Sequences;
use vesta_service::lifecycle::{self, Started};
use vesta_service::shutdown::Trigger;
use vesta_service::{Segments, ServeError, ServeReport};

use crate::body::CHUNK_BYTES;
use crate::config::{RestConfig, RestSection};
use crate::connection::{self, Builders, ConnLimits};
use crate::rest::Rest;

/// A bound REST server with its issuer, ready to [`serve`](Self::serve).
#[derive(Debug)]
pub struct RestServer<C: Clock + 'static = SystemClock> {
    started: Started<C, RestSection>,
    rest: Arc<Rest<C>>,
}

impl RestServer<SystemClock> {
    /// Binds `config.server.listen`, starts the issuer (genMethod rest, machine ID from the
    /// server pool), then listens: a busy port fails before any lease is taken, and clients are
    /// refused, not left hanging, while the issuer starts.
    ///
    /// With `[segment] db` set it serves the segment paths too; the store opens before the
    /// issuer starts (see [`vesta_service::segments`] for what a missing table or an
    /// unreachable database does). With `[seq] db` set it serves `/seq/{key}` too (an
    /// unreachable database fails the start).
    pub async fn start(config: RestConfig) -> Result<Self, ServeError> {
        Ok(Self::from_started(lifecycle::launch(&config, ALPN).await?))
    }
}

impl<C: Clock + 'static> RestServer<C> {
    /// Serves an issuer started elsewhere (tests use a manual clock or a fenced issuer); it
    /// must have genMethod rest. As with `vesta_server::TcpServer::with_issuer`, the server
    /// releases it when serving ends.
    pub async fn with_issuer(
        issuer: Arc<Issuer<C>>,
        limits: RestSection,
    ) -> Result<Self, ServeError> {
        Self::with_issuer_and_segments(issuer, limits, None).await
    }

    /// Like [`with_issuer`](Self::with_issuer), also serving `segments` (opened elsewhere,
    /// e.g. [`Segments::from_store`]); the server gives their unused tails back when serving
    /// ends.
    pub async fn with_issuer_and_segments(
        issuer: Arc<Issuer<C>>,
        limits: RestSection,
        segments: Option<Arc<Segments>>,
    ) -> Result<Self, ServeError> {
        Self::with_issuer_and_stores(issuer, limits, segments, None).await
    }

    /// Like [`with_issuer_and_segments`](Self::with_issuer_and_segments), also serving the
    /// per-key sequences `seq` (opened elsewhere).
    pub async fn with_issuer_and_stores(
        issuer: Arc<Issuer<C>>,
        limits: RestSection,
        segments: Option<Arc<Segments>>,
        seq: Option<Sequences>,
    ) -> Result<Self, ServeError> {
        let started = lifecycle::launch_with_stores(issuer, limits, segments, seq, ALPN).await?;
        Ok(Self::from_started(started))
    }

    fn from_started(started: Started<C, RestSection>) -> Self {
        let rest = Arc::new(Rest::new(
            Arc::clone(&started.service),
            &started.section,
            &crate::routes::LABELS,
        ));
        RestServer { started, rest }
    }

    /// The address actually bound (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.started.addr
    }

    /// True if it speaks HTTPS (`[server] tls_cert` and `tls_key` set).
    pub fn is_tls(&self) -> bool {
        self.started.tls.is_some()
    }

    /// The issuer; tests fence it, or hold a `Weak` to see it released after shutdown.
    pub fn issuer(&self) -> &Arc<Issuer<C>> {
        self.rest.service.issuer()
    }

    /// The segment store, when segment mode is on.
    pub fn segments(&self) -> Option<&Arc<Segments>> {
        self.rest.service.segments()
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets requests in flight finish
    /// (up to `server.shutdown_grace_ms`), closes what is left, gives the segments' unused
    /// tails back and releases the machine ID before returning.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> ServeReport {
        let RestServer { started, rest } = self;
        let Started {
            listener,
            addr,
            service,
            section: limits,
            tls,
            mut watchers,
        } = started;
        let builders = Arc::new(http_builders(&limits));
        let slots = usize::try_from(limits.max_connections).unwrap_or(usize::MAX);
        let slots = Arc::new(Semaphore::new(slots));
        let conn_limits = ConnLimits::new(&limits);
        let trigger = Trigger::new();
        let mut tasks = JoinSet::new();
        let mut connections = 0u64;
        watchers.serving(service.issuer());
        tracing::info!(%addr, "serving");
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                () = &mut shutdown => break,
                p = Arc::clone(&slots).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break, // never closed; stop rather than spin
                },
            };
            let (stream, peer) = tokio::select! {
                () = &mut shutdown => break,
                r = listener.accept() => match r {
                    Ok(conn) => conn,
                    Err(e) => {
                        // E.g. out of file descriptors: back off instead of spinning.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            connections += 1;
            let _ = stream.set_nodelay(true);
            tracing::trace!(%peer, "accepted");
            let serve = connection::serve(
                stream,
                peer,
                Arc::clone(&rest),
                Arc::clone(&builders),
                conn_limits,
                trigger.subscribe(),
                tls.clone(),
            );
            let open = service.connections().open();
            tasks.spawn(async move {
                let (_permit, _open) = (permit, open);
                serve.await;
            });
            while tasks.try_join_next().is_some() {}
        }
        drop(listener);
        tracing::info!("shutting down: finishing requests in flight");
        drop(rest);
        lifecycle::stop(service, watchers, &trigger, &mut tasks, connections).await
    }
}

/// The protocols offered by ALPN, preferred first.
const ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// Room for a request head besides its target: hyper's HTTP/1 read buffer and the HTTP/2
/// header list are capped at `max_uri_bytes` plus this.
pub const HEADER_ROOM_BYTES: u64 = 16 * 1024;
/// HTTP/2 receive windows: requests are GETs, so a client has no reason to send much body.
const RECV_WINDOW_BYTES: u32 = 64 * 1024;

fn http_builders(limits: &RestSection) -> Builders {
    let head_bytes = limits.max_uri_bytes.saturating_add(HEADER_ROOM_BYTES);
    let head_bytes = usize::try_from(head_bytes).unwrap_or(usize::MAX);
    let mut http1 = http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout())
        .keep_alive(true)
        .max_header_size(head_bytes)
        .max_buf_size(head_bytes.max(8192));
    let mut http2 = http2::Builder::new(TokioExecutor::new());
    http2
        .timer(TokioTimer::new())
        .max_concurrent_streams(
            u32::try_from(limits.max_streams_per_connection).unwrap_or(u32::MAX),
        )
        .max_send_buf_size(CHUNK_BYTES)
        .max_header_list_size(u32::try_from(head_bytes).unwrap_or(u32::MAX))
        .initial_stream_window_size(RECV_WINDOW_BYTES)
        .initial_connection_window_size(RECV_WINDOW_BYTES)
        .keep_alive_interval(Some(limits.header_read_timeout()))
        .keep_alive_timeout(limits.header_read_timeout());
    Builders { http1, http2 }
}
