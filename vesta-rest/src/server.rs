//! The listener: accepts connections under the connection limit and serves HTTP/1.1 and HTTP/2
//! (hyper-util's auto builder) with a header read timeout, each connection issuing through a
//! [`Flow`](vesta_embed::Flow) of its own so waiting requests are served fairly. Start and stop
//! follow the shared order of [`vesta_service::lifecycle`]: bind, start the issuer, listen;
//! serve; drain within `shutdown_grace_ms`; release the machine ID.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use vesta_core::{Clock, GenMethod};
use vesta_embed::{Issuer, SystemClock};
use vesta_service::config::validate_section;
use vesta_service::lifecycle::{self, Prepared};
use vesta_service::shutdown::Trigger;
use vesta_service::{ServeError, ServeReport, ServerSection};

use crate::app::App;
use crate::config::{RestConfig, RestSection};
use crate::router;

/// A bound REST server with its issuer, ready to [`serve`](Self::serve).
#[derive(Debug)]
pub struct RestServer<C: Clock + 'static = SystemClock> {
    listener: TcpListener,
    addr: SocketAddr,
    app: Arc<App<C>>,
    limits: RestSection,
}

impl RestServer<SystemClock> {
    /// Binds `config.server.listen`, starts the issuer (genMethod rest, machine ID from the
    /// server pool), then listens: a busy port fails before any lease is taken, and clients are
    /// refused, not left hanging, while the issuer starts.
    pub async fn start(config: RestConfig) -> Result<Self, ServeError> {
        let prepared = lifecycle::start(&config).await?;
        Ok(Self::from_prepared(prepared, config.server))
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
        validate_section(&limits, issuer.config().id.id_type)?;
        let prepared =
            lifecycle::start_with_issuer(issuer, GenMethod::Rest, &limits.common()).await?;
        Ok(Self::from_prepared(prepared, limits))
    }

    fn from_prepared(p: Prepared<C>, limits: RestSection) -> Self {
        RestServer {
            listener: p.listener,
            addr: p.addr,
            app: Arc::new(App::new(p.issuer, &limits)),
            limits,
        }
    }

    /// The address actually bound (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The issuer; tests fence it, or hold a `Weak` to see it released after shutdown.
    pub fn issuer(&self) -> &Arc<Issuer<C>> {
        &self.app.issuer
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets requests in flight finish
    /// (up to `server.shutdown_grace_ms`), closes what is left and releases the machine ID before
    /// returning.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> ServeReport {
        let RestServer {
            listener,
            app,
            limits,
            addr,
        } = self;
        let builder = Arc::new(http_builder(&limits));
        let slots = usize::try_from(limits.max_connections).unwrap_or(usize::MAX);
        let slots = Arc::new(Semaphore::new(slots));
        let trigger = Trigger::new();
        let mut tasks = JoinSet::new();
        let mut connections = 0u64;
        let end_of_life = lifecycle::warn_daily_near_end_of_life(Arc::clone(&app.issuer));
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
            let app = Arc::clone(&app);
            let builder = Arc::clone(&builder);
            let mut shutdown = trigger.subscribe();
            let first_bytes_timeout = limits.header_read_timeout();
            tasks.spawn(async move {
                let _permit = permit;
                if !wait_for_request_start(&stream, first_bytes_timeout).await {
                    tracing::debug!(%peer, "closed: no request within the header read timeout");
                    return;
                }
                let flow = app.ids.flow();
                let service = service_fn(move |req| router::respond(&app, &flow, req));
                let conn = builder.serve_connection(TokioIo::new(stream), service);
                tokio::pin!(conn);
                let ended = tokio::select! {
                    r = conn.as_mut() => r,
                    () = shutdown.recv() => {
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                };
                if let Err(e) = ended {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
            });
            while tasks.try_join_next().is_some() {}
        }
        drop(listener);
        end_of_life.abort();
        tracing::info!("shutting down: finishing requests in flight");
        trigger.fire();
        let forced_closed = lifecycle::drain(&mut tasks, limits.common().shutdown_grace()).await;
        // Release the machine ID now, even if the caller still holds the issuer.
        let ids = app.ids.clone();
        drop(app);
        let release_error = lifecycle::release(ids).await;
        ServeReport {
            connections,
            forced_closed,
            release_error,
        }
    }
}

fn http_builder(limits: &RestSection) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout())
        .keep_alive(true);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(256)
        .keep_alive_interval(Some(limits.header_read_timeout()));
    b
}

/// Waits (up to `timeout`) until the client has sent enough to tell HTTP/1 from HTTP/2: hyper's
/// header read timeout only starts after that, so a client that connects and sends nothing
/// would otherwise hold a connection slot forever. False: timed out or closed.
async fn wait_for_request_start(stream: &TcpStream, timeout: Duration) -> bool {
    const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 24];
    loop {
        let n = match tokio::time::timeout_at(deadline, stream.peek(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) | Err(_) => return false,
        };
        if n == 0 {
            return false;
        }
        if n == buf.len() || buf[..n] != H2_PREFACE[..n] {
            return true;
        }
        // A partial HTTP/2 preface: peek returns at once while nothing new arrives, so nap.
        if tokio::time::timeout_at(deadline, tokio::time::sleep(Duration::from_millis(5)))
            .await
            .is_err()
        {
            return false;
        }
    }
}
