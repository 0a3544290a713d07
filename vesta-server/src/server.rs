//! The TCP server: an accept loop with a connection limit, and one task per connection that cuts
//! frames, runs each operation and writes all answers of one read in one write (mini-redis's
//! `Listener` and `Handler`). Nothing here blocks a worker thread: an ID request that must wait
//! for the next time unit is parked on a timer while the connection goes on answering.
//!
//! Shutdown: stop accepting, tell every connection to stop reading, let each answer what it has
//! read (parked ID requests included) and say `GOAWAY`, wait up to the grace period, then release
//! the machine ID.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tracing::{debug, info, warn};
use vesta_core::Clock;
use vesta_embed::{Issuer, SystemClock};

use crate::config::{ServerConfig, ServerSection};
use crate::connection::Connection;
use crate::error::ServerError;
use crate::frame::{Frame, FrameError};
use crate::proto::{
    ErrorCode, Outcome, Request, Response, ServerContext, ServerInfo, Waiting, explain, hello,
    info, make, next_id, next_ids, ping, trans_time,
};
use crate::shutdown::{Shutdown, Trigger};

/// Parked ID requests per connection before the server stops reading from it (back-pressure).
const MAX_WAITING_PER_CONNECTION: usize = 4096;

/// A bound server, ready to [`run`](Server::run).
#[derive(Debug)]
pub struct Server<C: Clock + 'static = SystemClock> {
    listener: TcpListener,
    ctx: Arc<ServerContext<C>>,
}

impl Server<SystemClock> {
    /// Checks `config`, starts the issuer (genMethod server; a ZooKeeper lease is taken here) and
    /// binds the listen address.
    pub async fn start(config: ServerConfig) -> Result<Self, ServerError> {
        config.validate()?;
        let issuer_config = config.issuer_config();
        // Starting may wait on ZooKeeper or a start guard: keep it off the async workers.
        let issuer = tokio::task::spawn_blocking(move || Issuer::start(issuer_config))
            .await
            .map_err(|e| ServerError::Internal(e.to_string()))??;
        Self::bind(config.server, Arc::new(issuer)).await
    }
}

impl<C: Clock + 'static> Server<C> {
    /// Binds `limits.listen` for an issuer that is already running.
    pub async fn bind(limits: ServerSection, issuer: Arc<Issuer<C>>) -> Result<Self, ServerError> {
        let addr = limits.listen;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|cause| ServerError::Bind { addr, cause })?;
        Ok(Server {
            listener,
            ctx: Arc::new(ServerContext {
                issuer,
                limits,
                connections: AtomicU32::new(0),
            }),
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        // A bound listener always has an address; fall back to the configured one regardless.
        self.listener.local_addr().unwrap_or(self.ctx.limits.listen)
    }

    /// What `INFO` answers now.
    pub fn info(&self) -> ServerInfo {
        info::describe(&self.ctx)
    }

    /// The issuer.
    pub fn issuer(&self) -> &Arc<Issuer<C>> {
        &self.ctx.issuer
    }

    /// Serves until `shutdown` resolves, then drains and releases the machine ID
    /// ([`Issuer::shutdown`]); after that the issuer issues nothing, even through other handles.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
        let Server { listener, ctx } = self;
        let trigger = Trigger::new();
        let permits = Arc::new(Semaphore::new(ctx.limits.max_connections as usize));
        let mut tasks = JoinSet::new();
        let mut accept_backoff = Duration::from_millis(5);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        accept_backoff = Duration::from_millis(5);
                        let _ = stream.set_nodelay(true);
                        match permits.clone().try_acquire_owned() {
                            Ok(permit) => {
                                let ctx = ctx.clone();
                                let shutdown = trigger.subscribe();
                                tasks.spawn(async move {
                                    let _permit = permit;
                                    handle(stream, peer, ctx, shutdown).await;
                                });
                            }
                            Err(_) => {
                                let limit = ctx.limits.max_connections;
                                tasks.spawn(refuse(stream, peer, limit));
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
        info!(
            connections = tasks.len(),
            "shutting down: answering in-flight requests"
        );
        trigger.fire();
        let grace = ctx.limits.shutdown_grace();
        let drained = timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            warn!(
                left = tasks.len(),
                "grace period over: closing the remaining connections"
            );
            tasks.shutdown().await;
        }
        release(ctx).await
    }
}

/// Gives the machine ID back ([`Issuer::shutdown`]: a leased ID is released in ZooKeeper, a
/// static one fenced as released), off the async workers since it may wait on ZooKeeper.
async fn release<C: Clock + 'static>(ctx: Arc<ServerContext<C>>) -> Result<(), ServerError> {
    let issuer = ctx.issuer.clone();
    drop(ctx);
    let released = tokio::task::spawn_blocking(move || issuer.shutdown())
        .await
        .map_err(|e| ServerError::Internal(e.to_string()))?;
    match released {
        Ok(()) => {
            info!("machine ID released");
            Ok(())
        }
        Err(e) => Err(ServerError::Release(e.to_string())),
    }
}

/// Tells a connection beyond the limit why it is closed, without waiting long on it.
async fn refuse(stream: TcpStream, peer: SocketAddr, limit: u32) {
    debug!(%peer, "refused: max_connections reached");
    let mut conn = Connection::new(stream, crate::frame::MIN_MAX_FRAME_BYTES);
    let msg = format!("the server has reached max_connections {limit}: try another server");
    Response::encode_error(0, ErrorCode::TooManyConnections, &msg, conn.out());
    let _ = timeout(Duration::from_secs(1), conn.close()).await;
}

/// Counts a connection in `INFO` while it lives.
struct Counted<'a>(&'a AtomicU32);

impl<'a> Counted<'a> {
    fn new(c: &'a AtomicU32) -> Self {
        c.fetch_add(1, Ordering::Relaxed);
        Counted(c)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn handle<C: Clock + 'static>(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<ServerContext<C>>,
    shutdown: Shutdown,
) {
    let _counted = Counted::new(&ctx.connections);
    let mut h = Handler {
        conn: Connection::new(stream, ctx.limits.max_frame_bytes),
        ctx: ctx.clone(),
        shutdown,
        waiting: VecDeque::new(),
        wake_at: None,
        handshaken: false,
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
    shutdown: Shutdown,
    /// ID requests parked until the next time unit, answered in arrival order.
    waiting: VecDeque<Waiting>,
    /// When to retry the parked requests.
    wake_at: Option<Instant>,
    handshaken: bool,
    /// The last frame before closing: a fatal error or `GOAWAY`.
    farewell: Option<Response>,
}

/// Whether to go on reading after a frame.
enum Flow {
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
                        if let Flow::Close = self.on_frame(frame) {
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
            if !reading && self.waiting.is_empty() {
                if let Some(f) = self.farewell.take() {
                    f.encode(0, self.conn.out());
                }
                return timeout(idle, self.conn.close())
                    .await
                    .map_err(|_| std::io::Error::other("close blocked"))?;
            }
            let wake_at = self.wake_at.unwrap_or(idle_deadline);
            tokio::select! {
                biased;
                () = self.shutdown.recv(), if reading => {
                    reading = false;
                    self.goaway(ErrorCode::ShuttingDown, "the server is shutting down");
                }
                () = sleep_until(wake_at), if !self.waiting.is_empty() => self.retry_waiting(),
                read = self.conn.fill(), if reading && self.waiting.len() < MAX_WAITING_PER_CONNECTION => {
                    if read? == 0 {
                        // The peer closed its side: answer what is parked, then close.
                        reading = false;
                    }
                }
                () = sleep_until(idle_deadline), if reading && self.waiting.is_empty() => {
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
    fn on_frame(&mut self, frame: Frame) -> Flow {
        let id = frame.request_id;
        let request = Request::parse(&frame);
        let out = self.conn.out();
        if !self.handshaken {
            return match request {
                Ok(Request::Hello {
                    min_version,
                    max_version,
                }) => {
                    self.handshaken = hello::apply(&self.ctx, id, min_version, max_version, out);
                    if self.handshaken {
                        Flow::Continue
                    } else {
                        Flow::Close
                    }
                }
                _ => {
                    hello::required(id, out);
                    Flow::Close
                }
            };
        }
        if id == 0 {
            let msg = "request id 0 is reserved for frames the server sends on its own";
            Response::encode_error(0, ErrorCode::InvalidArgument, msg, out);
            return Flow::Continue;
        }
        let request = match request {
            Ok(r) => r,
            Err(e) => {
                Response::encode_error(id, e.code(), &e.to_string(), out);
                return Flow::Continue;
            }
        };
        let ctx = &*self.ctx;
        // ID requests queue behind parked ones, so a connection's IDs come in order.
        let after_parked = !self.waiting.is_empty();
        let outcome = match request {
            Request::Hello { .. } => hello::repeated(id, out),
            Request::Ping => ping::apply(id, out),
            Request::Info => info::apply(ctx, id, out),
            Request::NextId => next_id::apply(ctx, id, after_parked, out),
            Request::NextIds { count } => next_ids::apply(ctx, id, count, after_parked, out),
            Request::Explain { id: x } => explain::apply(ctx, id, x, out),
            Request::Make(fields) => make::apply(ctx, id, &fields, out),
            Request::TransTime { time } => trans_time::apply(ctx, id, time, out),
        };
        match outcome {
            Outcome::Done => {}
            Outcome::Wait { waiting, wait_ms } => self.park_front(waiting, wait_ms),
            Outcome::Queued(waiting) => self.waiting.push_back(waiting),
        }
        Flow::Continue
    }

    /// Parks a request at the front (it was first in line) and sets the retry timer.
    fn park_front(&mut self, waiting: Waiting, wait_ms: u64) {
        self.waiting.push_front(waiting);
        self.wake_at = Some(Instant::now() + Duration::from_millis(wait_ms.max(1)));
    }

    /// Retries the parked requests in order until one must wait again.
    fn retry_waiting(&mut self) {
        self.wake_at = None;
        while let Some(w) = self.waiting.pop_front() {
            if let Outcome::Wait { waiting, wait_ms } = w.retry(&self.ctx, self.conn.out()) {
                self.park_front(waiting, wait_ms);
                return;
            }
        }
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
    task: tokio::task::JoinHandle<Result<(), ServerError>>,
}

impl ServerHandle {
    /// Binds and spawns `server` on the current runtime.
    pub fn spawn<C: Clock + 'static>(server: Server<C>) -> Self {
        let addr = server.local_addr();
        let info = server.info();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(server.run(async move {
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

    /// Graceful shutdown: waits until in-flight work is answered and the lease released.
    pub async fn shutdown(mut self) -> Result<(), ServerError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => Err(ServerError::Internal(e.to_string())),
        }
    }

    /// Kills the server like a crash: every connection is dropped at once, nothing is answered.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}
