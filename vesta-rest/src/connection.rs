//! One client connection, from its first bytes to its close: hyper serves it (HTTP/1.1 or
//! HTTP/2), while a watcher reads what the connection is doing and closes it when it holds a
//! slot without using it:
//!
//! - **idle**: no request open for `header_read_timeout_ms` (HTTP/1 between requests; HTTP/2 with
//!   no open stream, however many PINGs it answers): closed gracefully (HTTP/2 `GOAWAY`);
//! - **stalled**: requests open, none waiting for IDs, and no response bytes taken by the client
//!   for `send_timeout_ms` (it reads nothing, or grants no HTTP/2 window): closed at once, which
//!   frees every byte it pinned;
//! - **aged**: older than `max_connection_age_ms` (when set): closed gracefully.
//!
//! A graceful close that the client does not complete within `shutdown_grace_ms` becomes a hard
//! one. What the watcher reads is an [`Activity`] that the request path updates with a few
//! relaxed atomic operations per request.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;

use hyper::body::Incoming;
use hyper::rt::bounds::Http2ServerConnExec;
use hyper::server::conn::{http1, http2};
use hyper::service::{HttpService, service_fn};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout, timeout_at};
use vesta_core::Clock;
use vesta_embed::Flow;
use vesta_service::shutdown::Shutdown;
use vesta_service::tls::{ServerTls, Stream};

use crate::config::RestSection;
use crate::rest::Rest;
use crate::router;

/// What one connection is doing, read by its watcher.
#[derive(Debug, Default)]
pub struct Activity {
    /// Requests whose response is not yet fully taken by hyper (or dropped).
    open: AtomicUsize,
    /// Open requests waiting for sequence space (bounded by `max_wait_ms`, so not a stall).
    waiting: AtomicUsize,
    /// Bumped whenever a request starts or ends or a piece of a response is sent.
    progress: AtomicU64,
}

impl Activity {
    /// Counts a request as open until the guard (which travels with its response) is dropped.
    pub fn request(self: &Arc<Self>) -> RequestGuard {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.progress();
        RequestGuard(Arc::clone(self))
    }

    /// Records that a piece of a response was sent.
    pub fn progress(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests open now.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// An open request; dropped with the last piece of its response.
#[derive(Debug)]
pub struct RequestGuard(Arc<Activity>);

impl RequestGuard {
    /// The connection's activity.
    pub fn activity(&self) -> &Activity {
        &self.0
    }

    /// Marks the request as waiting for IDs while the returned guard lives.
    pub fn waiting(&self) -> WaitingGuard<'_> {
        self.0.waiting.fetch_add(1, Ordering::Relaxed);
        WaitingGuard(&self.0)
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
        self.0.progress();
    }
}

/// A request parked for sequence space.
#[derive(Debug)]
pub struct WaitingGuard<'a>(&'a Activity);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        self.0.progress();
    }
}

/// What the request path needs of its connection: its flow of the issuer (fair waiting) and
/// its activity.
#[derive(Debug)]
pub struct ConnContext<C: Clock + 'static> {
    /// This connection's share of the issuer.
    pub flow: Flow<C>,
    /// Read by the watcher.
    pub activity: Arc<Activity>,
}

/// Why the watcher ends a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// No request open for `header_read_timeout_ms`.
    Idle,
    /// Responses made no progress for `send_timeout_ms`.
    Stalled,
    /// Older than `max_connection_age_ms`.
    Aged,
    /// The TLS handshake failed or did not finish within `header_read_timeout_ms`.
    Handshake,
}

impl CloseReason {
    /// All reasons, in metrics order.
    pub const ALL: [CloseReason; 4] = [
        CloseReason::Idle,
        CloseReason::Stalled,
        CloseReason::Aged,
        CloseReason::Handshake,
    ];

    /// The metrics label.
    pub const fn label(self) -> &'static str {
        match self {
            CloseReason::Idle => "idle",
            CloseReason::Stalled => "stalled",
            CloseReason::Aged => "aged",
            CloseReason::Handshake => "handshake",
        }
    }
}

/// The limits a connection is served under.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    idle: Duration,
    send: Duration,
    age: Option<Duration>,
    grace: Duration,
}

impl ConnLimits {
    /// The connection limits of `server`.
    pub fn new(server: &RestSection) -> Self {
        ConnLimits {
            idle: server.header_read_timeout(),
            send: server.send_timeout(),
            age: server.max_connection_age(),
            grace: Duration::from_millis(server.shutdown_grace_ms),
        }
    }
}

/// The HTTP/1.1 and HTTP/2 connection builders, configured once by the server.
#[derive(Debug)]
pub struct Builders {
    /// For connections that do not start with the HTTP/2 preface.
    pub http1: http1::Builder,
    /// For connections that do (prior knowledge, as `h2c` clients and proxies speak it).
    pub http2: http2::Builder<TokioExecutor>,
}

/// A hyper connection of either version, as the watcher drives it.
trait HttpConnection: Future<Output = Result<(), hyper::Error>> {
    fn close_gracefully(self: Pin<&mut Self>);
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<I, S, B> HttpConnection for http1::Connection<I, S>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<BoxError>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: http_body::Body + 'static,
    B::Error: Into<BoxError>,
{
    fn close_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B, E> HttpConnection for http2::Connection<I, S, E>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<BoxError>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: http_body::Body + 'static,
    B::Error: Into<BoxError>,
    E: Http2ServerConnExec<S::Future, B>,
{
    fn close_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Serves one accepted connection until it ends, is closed by the watcher, or the server shuts
/// down (then gracefully; the server's drain bounds that). With `tls`, the handshake comes
/// first (bounded by the header read timeout) and ALPN picks the HTTP version.
pub async fn serve<C: Clock + 'static>(
    stream: TcpStream,
    peer: SocketAddr,
    rest: Arc<Rest<C>>,
    builders: Arc<Builders>,
    limits: ConnLimits,
    shutdown: Shutdown,
    tls: Option<ServerTls>,
) {
    let accepted = Instant::now();
    let (stream, version) = match tls {
        None => match wait_for_request_start(&stream, limits.idle).await {
            Some(version) => (Stream::Plain(stream), version),
            None => {
                tracing::debug!(%peer, "closed: no request within the header read timeout");
                rest.metrics.closed(CloseReason::Idle);
                return;
            }
        },
        Some(tls) => match tls.accept(stream, limits.idle).await {
            Ok(stream) => {
                let version = if stream.alpn() == Some(b"h2") {
                    Version::Http2
                } else {
                    Version::Http1
                };
                (stream, version)
            }
            Err(e) => {
                tracing::debug!(%peer, "closed: TLS handshake: {e}");
                rest.metrics.closed(CloseReason::Handshake);
                return;
            }
        },
    };
    let ctx = ConnContext {
        flow: rest.service.flow(),
        activity: Arc::new(Activity::default()),
    };
    let activity = Arc::clone(&ctx.activity);
    let service_rest = Arc::clone(&rest);
    let service = service_fn(move |req| router::respond(&service_rest, &ctx, req));
    let io = TokioIo::new(stream);
    let watched = Watched {
        rest: &rest,
        activity: &activity,
        peer,
        accepted,
        limits,
        shutdown,
    };
    match version {
        Version::Http1 => {
            watched
                .drive(builders.http1.serve_connection(io, service))
                .await
        }
        Version::Http2 => {
            watched
                .drive(builders.http2.serve_connection(io, service))
                .await
        }
    }
}

/// A connection's surroundings while hyper serves it.
struct Watched<'a, C: Clock + 'static> {
    rest: &'a Rest<C>,
    activity: &'a Activity,
    peer: SocketAddr,
    accepted: Instant,
    limits: ConnLimits,
    shutdown: Shutdown,
}

impl<C: Clock + 'static> Watched<'_, C> {
    async fn drive(mut self, conn: impl HttpConnection) {
        let peer = self.peer;
        tokio::pin!(conn);
        let aged = async {
            match self.limits.age {
                Some(age) => tokio::time::sleep_until(self.accepted + age).await,
                None => std::future::pending().await,
            }
        };
        let reason = tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                return;
            }
            () = self.shutdown.recv() => {
                conn.as_mut().close_gracefully();
                if let Err(e) = conn.await {
                    tracing::debug!(%peer, "connection ended during shutdown: {e}");
                }
                return;
            }
            () = aged => CloseReason::Aged,
            reason = watch(self.activity, self.limits) => reason,
        };
        self.rest.metrics.closed(reason);
        tracing::debug!(%peer, reason = reason.label(), "closing the connection");
        if reason == CloseReason::Stalled {
            return; // dropping it closes the socket and frees what it pinned
        }
        conn.as_mut().close_gracefully();
        tokio::select! {
            ended = timeout(self.limits.grace, conn.as_mut()) => {
                if !matches!(ended, Ok(Ok(()))) {
                    tracing::debug!(%peer, "closed without completing the graceful close");
                }
            }
            () = self.shutdown.recv() => {}
        }
    }
}

/// Resolves when the connection has been idle or stalled too long (never while it is busy).
async fn watch(activity: &Activity, limits: ConnLimits) -> CloseReason {
    let tick = (limits.idle.min(limits.send) / 4).max(Duration::from_millis(1));
    let mut seen = activity.progress.load(Ordering::Relaxed);
    let mut since = Instant::now();
    loop {
        sleep(tick).await;
        let now = Instant::now();
        let progress = activity.progress.load(Ordering::Relaxed);
        if progress != seen {
            seen = progress;
            since = now;
            continue;
        }
        let open = activity.open.load(Ordering::Relaxed);
        let waiting = activity.waiting.load(Ordering::Relaxed);
        let quiet = now - since;
        if open == 0 {
            if quiet >= limits.idle {
                return CloseReason::Idle;
            }
        } else if open > waiting {
            if quiet >= limits.send {
                return CloseReason::Stalled;
            }
        } else {
            // Every open request waits for IDs: not the client's doing, and bounded.
            since = now;
        }
    }
}

/// The HTTP version a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    Http1,
    Http2,
}

/// Waits (up to `timeout`) until the client has sent enough to tell HTTP/1 from HTTP/2 (the
/// 24-byte preface), and says which: hyper's header read timeout only starts after that, so a
/// client that connects and sends nothing would otherwise hold a connection slot forever.
/// `None`: timed out or closed.
async fn wait_for_request_start(stream: &TcpStream, timeout: Duration) -> Option<Version> {
    const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 24];
    loop {
        let n = match timeout_at(deadline, stream.peek(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) | Err(_) => return None,
        };
        if n == 0 {
            return None;
        }
        if buf[..n] != H2_PREFACE[..n] {
            return Some(Version::Http1);
        }
        if n == buf.len() {
            return Some(Version::Http2);
        }
        // A partial HTTP/2 preface: peek returns at once while nothing new arrives, so nap.
        if timeout_at(deadline, sleep(Duration::from_millis(5)))
            .await
            .is_err()
        {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(idle_ms: u64, send_ms: u64) -> ConnLimits {
        ConnLimits {
            idle: Duration::from_millis(idle_ms),
            send: Duration::from_millis(send_ms),
            age: None,
            grace: Duration::from_millis(100),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_requests_is_idle_after_the_timeout() {
        let a = Activity::default();
        let started = Instant::now();
        assert_eq!(watch(&a, limits(400, 10_000)).await, CloseReason::Idle);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(400) && took <= Duration::from_millis(600));
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_request_without_progress_is_a_stall_but_waiting_for_ids_is_not() {
        let a = Arc::new(Activity::default());
        let request = a.request();
        let waiting = request.waiting();
        // Waiting for IDs for longer than the send timeout is not a stall.
        let w = watch(&a, limits(100, 200));
        tokio::pin!(w);
        assert!(timeout(Duration::from_secs(5), w.as_mut()).await.is_err());
        drop(waiting);
        let started = Instant::now();
        assert_eq!(w.await, CloseReason::Stalled);
        assert!(started.elapsed() <= Duration::from_millis(300));
        drop(request);
        assert_eq!(a.open(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn progress_keeps_a_connection_open() {
        let a = Arc::new(Activity::default());
        let request = a.request();
        let w = watch(&a, limits(100, 200));
        tokio::pin!(w);
        for _ in 0..20 {
            tokio::select! {
                r = w.as_mut() => panic!("closed while sending: {r:?}"),
                () = sleep(Duration::from_millis(100)) => a.progress(),
            }
        }
        drop(request);
        assert_eq!(w.await, CloseReason::Idle);
    }
}
