//! The listener: accepts connections under the connection limit, serves HTTP/1.1 and HTTP/2
//! (hyper-util's auto builder) with a header read timeout, and shuts down gracefully: stop
//! accepting, let requests in flight finish (bounded), then drop the issuer to release its lease.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use vesta_core::{Clock, GenMethod};
use vesta_embed::config::ConfigError;
use vesta_embed::{Issuer, SystemClock};

use crate::app::App;
use crate::config::{RestConfig, RestSection};
use crate::error::RestError;
use crate::router;

/// A bound REST server with its issuer, ready to [`serve`](Self::serve).
#[derive(Debug)]
pub struct RestServer<C: Clock + 'static = SystemClock> {
    listener: TcpListener,
    addr: SocketAddr,
    app: Arc<App<C>>,
    rest: RestSection,
}

/// What happened during [`RestServer::serve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeReport {
    /// Connections accepted.
    pub connections: u64,
    /// Connections still open when the shutdown grace period ended, closed without finishing.
    pub forced_closed: usize,
    /// Why giving the machine ID back was not clean (`None`: released). A leased ID whose
    /// release failed expires with its ZooKeeper session; no duplicate can result.
    pub release_error: Option<String>,
}

impl RestServer<SystemClock> {
    /// Binds `config.rest.listen`, then starts the issuer (genMethod rest, machine ID from the
    /// server pool): a busy port fails before any machine-ID lease is taken.
    pub async fn start(config: RestConfig) -> Result<Self, RestError> {
        config.rest.validate()?;
        let listener = bind(config.rest.listen).await?;
        let issuer_config = config.issuer_config();
        // Starting may talk to ZooKeeper and wait out a start guard: keep it off the workers.
        let issuer = tokio::task::spawn_blocking(move || Issuer::start(issuer_config))
            .await
            .map_err(|e| RestError::Join(e.to_string()))??;
        Self::from_parts(listener, issuer, config.rest)
    }
}

impl<C: Clock + 'static> RestServer<C> {
    /// Serves an issuer built elsewhere (tests use a manual clock or a fenced issuer). The
    /// issuer must have genMethod rest.
    pub async fn with_issuer(issuer: Issuer<C>, rest: RestSection) -> Result<Self, RestError> {
        rest.validate()?;
        let listener = bind(rest.listen).await?;
        Self::from_parts(listener, issuer, rest)
    }

    fn from_parts(
        listener: TcpListener,
        issuer: Issuer<C>,
        rest: RestSection,
    ) -> Result<Self, RestError> {
        let gen_method = issuer.status().gen_method;
        if gen_method != GenMethod::Rest {
            return Err(RestError::Config(ConfigError::Inconsistent(format!(
                "the REST server issues with genMethod rest, not {gen_method}"
            ))));
        }
        let addr = listener.local_addr().map_err(|cause| RestError::Bind {
            addr: rest.listen,
            cause,
        })?;
        let app = Arc::new(App::new(Arc::new(issuer), &rest));
        Ok(RestServer {
            listener,
            addr,
            app,
            rest,
        })
    }

    /// The address actually bound (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The issuer; tests fence it, or hold a `Weak` to see it released after shutdown.
    pub fn issuer(&self) -> &Arc<Issuer<C>> {
        &self.app.issuer
    }

    /// Serves until `shutdown` resolves, then stops accepting, waits up to
    /// `rest.shutdown_timeout_ms` for requests in flight, closes what is left and shuts the
    /// issuer down (giving a leased machine ID back) before returning.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> ServeReport {
        let RestServer {
            listener,
            app,
            rest,
            addr,
        } = self;
        let builder = Arc::new(http_builder(&rest));
        let limit = Arc::new(Semaphore::new(rest.max_connections));
        let graceful = GracefulShutdown::new();
        let mut tasks = JoinSet::new();
        let mut connections = 0u64;
        tracing::info!(%addr, "serving");
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                () = &mut shutdown => break,
                p = Arc::clone(&limit).acquire_owned() => match p {
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
            let watcher = graceful.watcher();
            let first_bytes_timeout = rest.header_read_timeout();
            tasks.spawn(async move {
                let _permit = permit;
                if !wait_for_request_start(&stream, first_bytes_timeout).await {
                    tracing::debug!(%peer, "closed: no request within the header read timeout");
                    return;
                }
                let service = service_fn(move |req| router::respond(&app, req));
                let conn = builder.serve_connection(TokioIo::new(stream), service);
                if let Err(e) = watcher.watch(conn).await {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
            });
            while tasks.try_join_next().is_some() {}
        }
        drop(listener);
        tracing::info!("shutting down: finishing requests in flight");
        let drained = tokio::time::timeout(rest.shutdown_timeout(), graceful.shutdown())
            .await
            .is_ok();
        let mut forced_closed = 0;
        if !drained {
            forced_closed = tasks.len();
            tracing::warn!(
                forced_closed,
                "shutdown timeout: closing connections still open"
            );
        }
        // Connections still waiting for their first bytes are not watched: close them too.
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        // Release the machine ID now, even if the caller still holds the issuer; it may talk to
        // ZooKeeper, so off the async workers.
        let issuer = Arc::clone(&app.issuer);
        drop(app);
        let release_error = match tokio::task::spawn_blocking(move || issuer.shutdown()).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(format!("releasing the machine ID failed: {e}")),
        };
        match &release_error {
            None => tracing::info!("stopped; machine ID released"),
            Some(e) => tracing::warn!("stopped; {e}"),
        }
        ServeReport {
            connections,
            forced_closed,
            release_error,
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, RestError> {
    TcpListener::bind(addr)
        .await
        .map_err(|cause| RestError::Bind { addr, cause })
}

fn http_builder(rest: &RestSection) -> auto::Builder<TokioExecutor> {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(rest.header_read_timeout())
        .keep_alive(true);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(256)
        .keep_alive_interval(Some(rest.header_read_timeout()));
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
