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

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tracing::{debug, info, warn};
use vesta_core::{Clock, GenMethod};
use vesta_embed::{Flow as IdFlow, Issuer, SystemClock};
use vesta_service::config::{server_tls, validate_section};
use vesta_service::lifecycle::{self, Prepared};
use vesta_service::metrics_http;
use vesta_service::shutdown::{Shutdown, Trigger};
use vesta_service::tls::{ServerTls, Stream, watch_sighup};
use vesta_service::{Segments, ServeError, ServeReport, ServerSection};

use crate::config::{TcpConfig, TcpSection};
use crate::connection::Connection;
use crate::frame::{Frame, FrameError};
use crate::metrics::{TcpExposition, TcpMetrics, TcpTraffic};
use crate::proto::{
    Dialect, ErrorCode, Outcome, Pending, Request, Response, ServerContext, ServerInfo, explain,
    hello, info, make, next_id, next_ids, ping, segment, trans_time,
};
use vesta_service::auth::BearerToken;
use vesta_service::console::Console;

/// A bound server, ready to [`serve`](TcpServer::serve).
#[derive(Debug)]
pub struct TcpServer<C: Clock + 'static = SystemClock> {
    listener: TcpListener,
    addr: SocketAddr,
    /// The HTTP listener for `/metrics` and `/healthz`, when `server.metrics_listen` is set.
    metrics_listener: Option<TcpListener>,
    ctx: Arc<ServerContext<C>>,
    /// The bearer token the console on the metrics listener asks for, when set.
    auth_token: Option<BearerToken>,
    /// TLS, when `server.tls_cert` and `tls_key` are set.
    tls: Option<ServerTls>,
    /// The SIGHUP watcher (TLS reload), from the start on.
    sighup: tokio::task::JoinHandle<()>,
}

impl TcpServer<SystemClock> {
    /// Binds `config.server.listen`, starts the issuer (genMethod server; a ZooKeeper lease is
    /// taken here), then listens: a busy port fails before any lease is taken, and clients are
    /// refused, not left hanging, while the issuer starts. With `[segment] db` set it serves
    /// the segment ops too; the store opens before the issuer starts (see
    /// [`vesta_service::segments`] for a missing table or an unreachable database).
    pub async fn start(config: TcpConfig) -> Result<Self, ServeError> {
        // The certificate loads before anything binds or leases: a bad file costs nothing.
        let tls = server_tls(&config.server, &[])?;
        let prepared = lifecycle::start(&config).await?;
        Self::from_prepared(prepared, config.server, tls).await
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
        validate_section(&limits, issuer.layout())?;
        let tls = server_tls(&limits, &[])?;
        let mut prepared =
            lifecycle::start_with_issuer(issuer, GenMethod::Server, &limits.common()).await?;
        prepared.segments = segments;
        Self::from_prepared(prepared, limits, tls).await
    }

    async fn from_prepared(
        p: Prepared<C>,
        mut limits: TcpSection,
        tls: Option<ServerTls>,
    ) -> Result<Self, ServeError> {
        limits.cap_max_batch(p.issuer.issuer().layout().capacity_per_second());
        let auth_token = limits.auth_token()?;
        let metrics_listener = match limits.metrics_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .await
                    .map_err(|cause| ServeError::Bind { addr, cause })?,
            ),
            None => None,
        };
        let metrics = Arc::new(TcpMetrics::new(
            &p.issuer,
            p.segments.as_ref(),
            limits.max_connections,
        ));
        Ok(TcpServer {
            listener: p.listener,
            addr: p.addr,
            metrics_listener,
            ctx: Arc::new(ServerContext {
                issuer: Arc::clone(p.issuer.issuer()),
                ids: p.issuer,
                limits,
                metrics,
                segments: p.segments,
            }),
            auth_token,
            sighup: watch_sighup(tls.clone()),
            tls,
        })
    }

    /// True if it speaks TLS (`[server] tls_cert` and `tls_key` set).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The address of the metrics listener, if `server.metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The bound address (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What `INFO` answers now.
    pub fn info(&self) -> ServerInfo {
        info::describe(&self.ctx)
    }

    /// The issuer.
    pub fn issuer(&self) -> &Arc<Issuer<C>> {
        &self.ctx.issuer
    }

    /// The segment store, when segment mode is on.
    pub fn segments(&self) -> Option<&Arc<Segments>> {
        self.ctx.segments.as_ref()
    }

    /// Serves until `shutdown` resolves, then drains, gives the segments' unused tails back and
    /// releases the machine ID ([`Issuer::shutdown`]); after that the issuer issues nothing,
    /// even through other handles.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> ServeReport {
        let TcpServer {
            listener,
            metrics_listener,
            ctx,
            auth_token,
            tls,
            sighup,
            ..
        } = self;
        let console = ctx.limits.console.then(|| {
            let traffic = TcpTraffic {
                metrics: Arc::clone(&ctx.metrics),
                max_connections: ctx.limits.max_connections,
            };
            Console::new(
                "TCP",
                ctx.ids.clone(),
                ctx.segments.clone(),
                Box::new(traffic),
                ctx.limits.make,
            )
        });
        let exposition = Arc::new(TcpExposition {
            metrics: Arc::clone(&ctx.metrics),
            ids: ctx.ids.clone(),
            segments: ctx.segments.clone(),
            console,
            auth_token,
        });
        let metrics_http =
            metrics_listener.map(|l| tokio::spawn(metrics_http::serve(l, exposition)));
        let trigger = Trigger::new();
        let slots = usize::try_from(ctx.limits.max_connections).unwrap_or(usize::MAX);
        let slots = Arc::new(Semaphore::new(slots));
        let mut tasks = JoinSet::new();
        let mut connections = 0u64;
        let mut accept_backoff = Duration::from_millis(5);
        let end_of_life = lifecycle::warn_daily_near_end_of_life(Arc::clone(&ctx.issuer));
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
                                let ctx = ctx.clone();
                                let shutdown = trigger.subscribe();
                                let tls = tls.clone();
                                tasks.spawn(async move {
                                    let _permit = permit;
                                    handle(stream, peer, ctx, shutdown, tls).await;
                                });
                            }
                            Err(_) => {
                                ctx.metrics.error(ErrorCode::TooManyConnections);
                                let limit = ctx.limits.max_connections;
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
        end_of_life.abort();
        sighup.abort();
        if let Some(task) = metrics_http {
            task.abort();
        }
        info!(
            connections = tasks.len(),
            "shutting down: answering in-flight requests"
        );
        trigger.fire();
        let forced_closed =
            lifecycle::drain(&mut tasks, ctx.limits.common().shutdown_grace()).await;
        let give_back = lifecycle::give_back(ctx.segments.as_deref()).await;
        let ids = ctx.ids.clone();
        drop(ctx);
        let release_error = lifecycle::release(ids).await;
        ServeReport {
            connections,
            forced_closed,
            release_error,
            give_back,
        }
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

async fn handle<C: Clock + 'static>(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<ServerContext<C>>,
    shutdown: Shutdown,
    tls: Option<ServerTls>,
) {
    // Counted (in `INFO` and the metrics) while it lives.
    let _open = ctx.metrics.connections.open();
    // The handshake is bounded like a frame: a client that says nothing gives its slot back.
    let stream = match tls {
        None => Stream::Plain(stream),
        Some(tls) => match tls.accept(stream, ctx.limits.idle_timeout()).await {
            Ok(s) => s,
            Err(e) => {
                debug!(%peer, error = %e, "closed: TLS handshake");
                ctx.metrics.tls_handshake_failed();
                return;
            }
        },
    };
    let mut h = Handler {
        conn: Connection::new(stream, ctx.limits.max_frame_bytes),
        flow: ctx.ids.flow(),
        ctx: ctx.clone(),
        shutdown,
        pending: VecDeque::new(),
        dialect: None,
        farewell: None,
    };
    if let Err(e) = h.run().await {
        debug!(%peer, error = %e, "connection ended");
    }
}

/// The state of one connection.
struct Handler<C: Clock + 'static> {
    conn: Connection,
    ctx: Arc<ServerContext<C>>,
    /// This connection's share of the issuer: its waiting requests take turns with others'.
    flow: IdFlow<C>,
    shutdown: Shutdown,
    /// ID and segment requests whose answers are on their way, answered in arrival order.
    pending: VecDeque<Pending>,
    /// The version agreed in the handshake and the server's layout; `None` before `HELLO`.
    dialect: Option<Dialect>,
    /// The last frame before closing: a fatal error or `GOAWAY`.
    farewell: Option<Response>,
}

/// Whether to go on reading after a frame.
enum Next {
    Continue,
    /// A fatal error: answer what came before, then close.
    Close,
}

impl<C: Clock + 'static> Handler<C> {
    async fn run(&mut self) -> std::io::Result<()> {
        let idle = self.ctx.limits.idle_timeout();
        let mut reading = true;
        let mut idle_deadline = Instant::now() + idle;
        loop {
            while reading {
                match self.conn.next_frame() {
                    Ok(Some(frame)) => {
                        idle_deadline = Instant::now() + idle;
                        if let Next::Close = self.on_frame(frame) {
                            reading = false;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.fatal(frame_error_code(&e), &e.to_string());
                        reading = false;
                    }
                }
            }
            if self.conn.has_output() {
                // A client that does not read its answers is dropped after the idle timeout.
                timeout(idle, self.conn.flush())
                    .await
                    .map_err(|_| std::io::Error::other("write blocked past the idle timeout"))??;
            }
            if !reading && self.pending.is_empty() {
                if let Some(f) = self.farewell.take() {
                    // Errors and GOAWAY read the same in every version.
                    f.encode(0, &Dialect::v1(), self.conn.out());
                }
                return timeout(idle, self.conn.close())
                    .await
                    .map_err(|_| std::io::Error::other("close blocked"))?;
            }
            let max_pending =
                usize::try_from(self.ctx.limits.max_pending_per_connection).unwrap_or(usize::MAX);
            let waiting = !self.pending.is_empty();
            tokio::select! {
                biased;
                () = self.shutdown.recv(), if reading => {
                    reading = false;
                    self.goaway(ErrorCode::ShuttingDown, "the server is shutting down");
                }
                outcome = first_ready(&mut self.pending), if waiting => {
                    self.answer_ready(outcome);
                }
                read = self.conn.fill(), if reading && self.pending.len() < max_pending => {
                    if read? == 0 {
                        // The peer closed its side: answer what waits, then close.
                        reading = false;
                    }
                }
                () = sleep_until(idle_deadline), if reading && !waiting => {
                    reading = false;
                    let msg = if self.conn.has_partial_frame() {
                        "a frame stayed incomplete past the idle timeout"
                    } else {
                        "no request within the idle timeout"
                    };
                    self.goaway(ErrorCode::IdleTimeout, msg);
                }
            }
        }
    }

    /// The first waiting request's answer arrived: answer it, then every following one whose
    /// answer is there too, in order.
    fn answer_ready(&mut self, first: Outcome) {
        let mut ready = Some(first);
        while let Some(mut p) = self.pending.pop_front() {
            let Some(r) = ready.take().or_else(|| p.try_take()) else {
                self.pending.push_front(p);
                return;
            };
            p.answer(r, &self.ctx.metrics, self.conn.out());
        }
    }

    fn goaway(&mut self, code: ErrorCode, message: &str) {
        if self.farewell.is_none() {
            self.farewell = Some(Response::GoAway {
                code,
                message: message.to_owned(),
            });
        }
    }

    /// A fatal error about the stream itself, sent with request id 0 just before closing.
    fn fatal(&mut self, code: ErrorCode, message: &str) {
        self.farewell = Some(Response::Error {
            code,
            message: message.to_owned(),
        });
    }

    /// Runs one frame; appends its answer or parks it. Each op's `apply` is in its module under
    /// `proto/`; this is their dispatch.
    fn on_frame(&mut self, frame: Frame) -> Next {
        let id = frame.request_id;
        let Some(dialect) = &self.dialect else {
            let out = self.conn.out();
            return match Request::parse(&frame, &Dialect::v1()) {
                Ok(Request::Hello {
                    min_version,
                    max_version,
                }) => match hello::apply(&self.ctx, id, min_version, max_version, out) {
                    Some(version) => {
                        let layout = self.ctx.issuer.layout().clone();
                        self.dialect = Some(Dialect::new(version, layout));
                        Next::Continue
                    }
                    None => Next::Close,
                },
                _ => {
                    hello::required(id, out);
                    Next::Close
                }
            };
        };
        let request = Request::parse(&frame, dialect);
        let out = self.conn.out();
        if id == 0 {
            let msg = "request id 0 is reserved for frames the server sends on its own";
            self.ctx.metrics.error(ErrorCode::InvalidArgument);
            Response::encode_error(0, ErrorCode::InvalidArgument, msg, out);
            return Next::Continue;
        }
        let request = match request {
            Ok(r) => r,
            Err(e) => {
                self.ctx.metrics.error(e.code());
                Response::encode_error(id, e.code(), &e.to_string(), out);
                return Next::Continue;
            }
        };
        let ctx = &*self.ctx;
        ctx.metrics.request(request.op());
        let (flow, pending) = (&self.flow, &mut self.pending);
        match request {
            Request::Hello { .. } => hello::repeated(id, out),
            Request::Ping => ping::apply(id, out),
            Request::Info => info::apply(ctx, id, dialect, out),
            Request::NextId => next_id::apply(ctx, flow, id, pending, out),
            Request::NextIds { count } => next_ids::apply(ctx, flow, id, count, pending, out),
            Request::Explain { id: x } => explain::apply(ctx, id, x, dialect, out),
            Request::Make(fields) => make::apply(ctx, id, &fields, out),
            Request::TransTime { time } => trans_time::apply(ctx, id, time, out),
            Request::Segment { tag } => segment::apply_one(ctx, id, tag, pending, out),
            Request::Segments { count, tag } => {
                segment::apply_many(ctx, id, count, tag, pending, out)
            }
        }
        Next::Continue
    }
}

/// The answer of the first waiting request, once it is there.
async fn first_ready(pending: &mut VecDeque<Pending>) -> Outcome {
    match pending.front_mut() {
        Some(p) => p.outcome().await,
        None => std::future::pending().await,
    }
}

fn frame_error_code(e: &FrameError) -> ErrorCode {
    match e {
        FrameError::TooShort { .. } => ErrorCode::MalformedFrame,
        FrameError::TooLarge { .. } => ErrorCode::FrameTooLarge,
    }
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
