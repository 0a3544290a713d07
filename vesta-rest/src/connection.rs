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
//! one. What the watcher reads is the connection's [`Activity`] (`activity`), which the request
//! path updates with a few relaxed atomic operations per request.

use std::net::SocketAddr;
use std::sync::Arc;
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
use vesta_service::shutdown::Shutdown;
use vesta_service::tls::{ServerTls, Stream};

use crate::activity::{Activity, CloseReason, ConnContext, watch};
use crate::config::RestSection;
use crate::rest::Rest;
use crate::router;

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
            reason = watch(self.activity, self.limits.idle, self.limits.send) => reason,
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
