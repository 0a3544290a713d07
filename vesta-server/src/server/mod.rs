//! The TCP server: an accept loop with a connection limit, and one task per connection that cuts
//! frames, runs each operation and writes all answers of one read in one write (mini-redis's
//! `Listener` and `Handler`). Nothing here blocks a worker thread: an ID request whose time unit
//! is used up waits on the issuer's waiting list (served fairly across connections at each unit
//! boundary) while the connection goes on answering, and its answer keeps its place in line.
//!
//! Start and stop follow the shared order of [`vesta_service::lifecycle`]: bind, open the
//! segment store (segment mode), start the issuer, listen; serve; on shutdown stop reading,
//! answer what was read (waiting ID and segment requests included) and say `GOAWAY`, drain
//! within `shutdown_grace_ms`, give the segments' unused tails back, release the machine ID.
//!
//! Here: the accept loop and [`Tcp`] (what the transport adds to the shared
//! [`Service`]); `handler.rs`: one connection; `apply.rs`: each op onto the service;
//! `pending.rs`: answers on their way; `refusal.rs`: refusals as error codes.

mod apply;
mod handler;
mod pending;
mod refusal;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout};
use tracing::{debug, info, warn};
use vesta_core::Clock;
use vesta_embed::{Issuer, SystemClock};
use vesta_service::lifecycle::{self, Started};
use vesta_service::metrics_http;
use vesta_service::shutdown::Trigger;
use vesta_service::tls::{ServerTls, Stream};
use vesta_service::{Segments, ServeError, ServeReport, Service};

use crate::config::{TcpConfig, TcpSection};
use crate::connection::Connection;
use crate::metrics::{TcpExposition, TcpMetrics, TcpRefusals};
use crate::proto::{ErrorCode, Response, ServerInfo};
use vesta_service::console::Console;

/// What the TCP transport adds to the [`Service`] its connections share: its `[server]`
/// section (frame and pending limits, idle timeout) and its metrics.
#[derive(Debug)]
pub(crate) struct Tcp<C: Clock + 'static> {
    /// The state and ops every transport shares.
    pub service: Arc<Service<C>>,
    /// The protocol's limits and the listen address.
    pub section: TcpSection,
    /// Requests by op, errors by code (and the shared metrics, for the metrics listener).
    pub metrics: Arc<TcpMetrics>,
}

/// A bound server, ready to [`serve`](TcpServer::serve).
#[derive(Debug)]
pub struct TcpServer<C: Clock + 'static = SystemClock> {
    started: Started<C, TcpSection>,
    /// The HTTP listener for `/metrics` and `/healthz`, when `server.metrics_listen` is set.
    metrics_listener: Option<TcpListener>,
    tcp: Arc<Tcp<C>>,
}

impl TcpServer<SystemClock> {
    /// Binds `config.server.listen`, starts the issuer (genMethod server; a ZooKeeper lease is
    /// taken here), then listens: a busy port fails before any lease is taken, and clients are
    /// refused, not left hanging, while the issuer starts. With `[segment] db` set it serves
    /// the segment ops too; the store opens before the issuer starts (see
    /// [`vesta_service::segments`] for a missing table or an unreachable database).
    pub async fn start(config: TcpConfig) -> Result<Self, ServeError> {
        Self::from_started(lifecycle::launch(&config, &[]).await?).await
    }
}

impl<C: Clock + 'static> TcpServer<C> {
    /// Serves an issuer that is already running (genMethod server), under `limits`.
    pub async fn with_issuer(
        issuer: Arc<Issuer<C>>,
        limits: TcpSection,
    ) -> Result<Self, ServeError> {
        Self::with_issuer_and_segments(issuer, limits, None).await
    }

    /// Like [`with_issuer`](Self::with_issuer), also serving `segments` (opened elsewhere,
    /// e.g. [`Segments::from_store`]); the server gives their unused tails back when serving
    /// ends.
    pub async fn with_issuer_and_segments(
        issuer: Arc<Issuer<C>>,
        limits: TcpSection,
        segments: Option<Arc<Segments>>,
    ) -> Result<Self, ServeError> {
        let started = lifecycle::launch_with_issuer(issuer, limits, segments, &[]).await?;
        Self::from_started(started).await
    }

    async fn from_started(started: Started<C, TcpSection>) -> Result<Self, ServeError> {
        let metrics_listener = match started.section.metrics_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|cause| ServeError::Bind { addr, cause })?,
            ),
            None => None,
        };
        let tcp = Arc::new(Tcp {
            metrics: Arc::new(TcpMetrics::new(&started.service)),
            service: Arc::clone(&started.service),
            section: started.section.clone(),
        });
        Ok(TcpServer {
            started,
            metrics_listener,
            tcp,
        })
    }

    /// True if it speaks TLS (`[server] tls_cert` and `tls_key` set).
    pub fn is_tls(&self) -> bool {
        self.started.tls.is_some()
    }

    /// The address of the metrics listener, if `server.metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The bound address (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.started.addr
    }

    /// What `INFO` answers now.
    pub fn info(&self) -> ServerInfo {
        apply::describe(&self.tcp)
    }

    /// The issuer.
    pub fn issuer(&self) -> &Arc<Issuer<C>> {
        self.tcp.service.issuer()
    }

    /// The segment store, when segment mode is on.
    pub fn segments(&self) -> Option<&Arc<Segments>> {
        self.tcp.service.segments()
    }

    /// Serves until `shutdown` resolves, then drains, gives the segments' unused tails back and
    /// releases the machine ID ([`Issuer::shutdown`]); after that the issuer issues nothing,
    /// even through other handles.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> ServeReport {
        let TcpServer {
            started,
            metrics_listener,
            tcp,
        } = self;
        let Started {
            listener,
            service,
            tls,
            mut watchers,
            ..
        } = started;
        let console = service.limits().console.then(|| {
            let refusals = TcpRefusals(Arc::clone(&tcp.metrics));
            Console::new("TCP", Arc::clone(&service), Box::new(refusals))
        });
        let exposition = Arc::new(TcpExposition {
            metrics: Arc::clone(&tcp.metrics),
            service: Arc::clone(&service),
            console,
            max_uri_bytes: usize::try_from(tcp.section.max_uri_bytes).unwrap_or(usize::MAX),
        });
        let metrics_http =
            metrics_listener.map(|l| tokio::spawn(metrics_http::serve(l, exposition)));
        let trigger = Trigger::new();
        let max_connections = service.limits().max_connections;
        let slots = usize::try_from(max_connections).unwrap_or(usize::MAX);
        let slots = Arc::new(Semaphore::new(slots));
        let mut tasks = JoinSet::new();
        let mut connections = 0u64;
        let mut accept_backoff = Duration::from_millis(5);
        watchers.serving(service.issuer());
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        accept_backoff = Duration::from_millis(5);
                        connections += 1;
                        let _ = stream.set_nodelay(true);
                        match slots.clone().try_acquire_owned() {
                            Ok(permit) => {
                                let tcp = tcp.clone();
                                let shutdown = trigger.subscribe();
                                let tls = tls.clone();
                                tasks.spawn(async move {
                                    let _permit = permit;
                                    handler::handle(stream, peer, tcp, shutdown, tls).await;
                                });
                            }
                            Err(_) => {
                                tcp.metrics.error(ErrorCode::TooManyConnections);
                                let limit = max_connections;
                                tasks.spawn(refuse(stream, peer, limit, tls.clone()));
                            }
                        }
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: back off, keep serving.
                        warn!(error = %e, "accept failed");
                        sleep(accept_backoff).await;
                        accept_backoff = (accept_backoff * 2).min(Duration::from_secs(1));
                    }
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        drop(listener);
        if let Some(task) = metrics_http {
            task.abort();
        }
        info!(
            connections = tasks.len(),
            "shutting down: answering in-flight requests"
        );
        drop(tcp);
        lifecycle::stop(service, watchers, &trigger, &mut tasks, connections).await
    }
}

/// How long a connection beyond the limit gets for its TLS handshake and the refusal.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// Tells a connection beyond the limit why it is closed, without waiting long on it.
async fn refuse(stream: TcpStream, peer: SocketAddr, limit: u64, tls: Option<ServerTls>) {
    debug!(%peer, "refused: max_connections reached");
    let stream = match tls {
        None => Stream::Plain(stream),
        Some(tls) => match tls.accept(stream, REFUSAL_TIME).await {
            Ok(s) => s,
            Err(_) => return,
        },
    };
    let mut conn = Connection::new(stream, crate::frame::MIN_MAX_FRAME_BYTES);
    let msg = format!("the server has reached max_connections {limit}: try another server");
    Response::encode_error(0, ErrorCode::TooManyConnections, &msg, conn.out());
    let _ = timeout(REFUSAL_TIME, conn.close()).await;
}

/// A server running on its own task, for tests and embedding: stop it gracefully or kill it.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    info: ServerInfo,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<ServeReport>,
}

impl ServerHandle {
    /// Binds and spawns `server` on the current runtime.
    pub fn spawn<C: Clock + 'static>(server: TcpServer<C>) -> Self {
        let addr = server.local_addr();
        let info = server.info();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(server.serve(async move {
            let _ = rx.await;
        }));
        ServerHandle {
            addr,
            info,
            stop: Some(tx),
            task,
        }
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `INFO` as of the start.
    pub fn info(&self) -> &ServerInfo {
        &self.info
    }

    /// Graceful shutdown: waits until in-flight work is answered and the lease released; an
    /// unclean release is an error.
    pub async fn shutdown(mut self) -> Result<ServeReport, ServeError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(report) => report.into_result(),
            Err(e) => Err(ServeError::Internal(e.to_string())),
        }
    }

    /// Kills the server like a crash: every connection is dropped at once, nothing is answered.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}
