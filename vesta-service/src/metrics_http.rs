//! A small HTTP listener for a server whose own protocol is not HTTP (the TCP server): `GET
//! /metrics` for Prometheus and `GET /healthz` for load balancers and service managers, on an
//! address of its own (`server.metrics_listen`). HTTP/1.1 only, a header read timeout, and no
//! other path, so it adds little to what a hostile client can reach. With `[server] console`
//! on, the console's read-only pages are served under `/ui` too. Its routes are rows of the
//! gate's table ([`crate::gate`]), so a request meets the REST port's checks in the same order
//! and is refused with the same sentences: the target's length, the method (405 with `Allow`),
//! the console on, the bearer token (`/metrics` and `/healthz` stay open: scrapers and health
//! checks carry no token).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{
    ALLOW, CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue, WWW_AUTHENTICATE,
};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::console::{HEADERS, Pages};
use crate::gate::{self, Asked, Gate, Methods, Needs, Refusal, Route, RoutePath};
use crate::ops::Limits;

/// The OpenMetrics content type Prometheus asks for.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the listener answers: the metrics text, the health (200 or 503, JSON body), and the
/// console's pages when it is on.
pub trait Exposition: Send + Sync + 'static {
    /// The OpenMetrics text of every metric.
    fn metrics(&self) -> String;
    /// `(healthy, JSON body)`.
    fn health(&self) -> (bool, String);
    /// The web console, served under `/ui` when on.
    fn console(&self) -> Option<&dyn Pages> {
        None
    }
    /// The server's `[server]` limits the gate reads: console, make, token.
    fn limits(&self) -> &Limits;
    /// Longest request target accepted (`server.max_uri_bytes`).
    fn max_target_bytes(&self) -> usize;
}

/// What answers a route of this listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Page {
    Metrics,
    Health,
    Console,
}

/// The listener's routes.
#[rustfmt::skip]
static ROUTES: [Route<Page>; 3] = [
    Route::new(RoutePath::Exact("/metrics"), Methods::Get, Needs::OPEN,    "metrics", Page::Metrics),
    Route::new(RoutePath::Exact("/healthz"), Methods::Get, Needs::OPEN,    "healthz", Page::Health),
    Route::new(RoutePath::Tree("/ui"),       Methods::Get, Needs::CONSOLE, "console", Page::Console),
];

/// How long a client may take to send a request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; scrapers and health checks need a handful.
const MAX_CONNECTIONS: usize = 64;

/// Serves `listener` until the task is aborted (the server aborts it when it stops).
pub async fn serve(listener: TcpListener, exposition: Arc<dyn Exposition>) {
    let mut tasks = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        while tasks.try_join_next().is_some() {}
        if tasks.len() >= MAX_CONNECTIONS {
            continue; // dropped: the scraper retries
        }
        let exposition = Arc::clone(&exposition);
        tasks.spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let exposition = Arc::clone(&exposition);
                async move { Ok::<_, Infallible>(answer(&*exposition, &req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The answer to `req`: past the gate, its route's; else the gate's refusal, worded as the
/// REST port words it.
async fn answer<B>(e: &dyn Exposition, req: &Request<B>) -> Response<Full<Bytes>> {
    let gate = Gate {
        limits: e.limits(),
        max_target_bytes: e.max_target_bytes(),
    };
    let path = req.uri().path();
    let asked = Asked {
        method: req.method(),
        target_len: req.uri().path_and_query().map_or(0, |pq| pq.as_str().len()),
        headers: req.headers(),
    };
    let route = match gate.admit(gate::find(&ROUTES, path).map(|(_, r)| r), asked) {
        Ok(route) => route,
        Err(r) => return refused(&r, req.method()),
    };
    match (route.handler, e.console()) {
        (Page::Metrics, _) => response(StatusCode::OK, OPENMETRICS, e.metrics()),
        (Page::Health, _) => {
            let (healthy, body) = e.health();
            let status = if healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            response(status, "application/json", body)
        }
        (Page::Console, Some(pages)) => {
            let page = pages.page(path, req.uri().query()).await;
            let mut r = Response::new(Full::new(Bytes::from(page.html)));
            *r.status_mut() = StatusCode::from_u16(page.status).unwrap_or(StatusCode::OK);
            for (name, value) in HEADERS {
                r.headers_mut().insert(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            r
        }
        // The gate let it through only with the console on.
        (Page::Console, None) => refused(&Refusal::ConsoleOff, req.method()),
    }
}

/// The gate's refusal as JSON, with `Allow` on a 405 and `WWW-Authenticate` on a 401.
fn refused(r: &Refusal, method: &hyper::Method) -> Response<Full<Bytes>> {
    let why = r
        .message(method)
        .unwrap_or_else(|| "no endpoint here: the paths are /metrics and /healthz".into());
    let body = serde_json::json!({ "error": why }).to_string();
    let status = StatusCode::from_u16(r.status()).unwrap_or(StatusCode::NOT_FOUND);
    let mut resp = response(status, "application/json", body);
    let h = resp.headers_mut();
    match r {
        Refusal::Method { allowed, .. } => {
            h.insert(ALLOW, HeaderValue::from_static(allowed.allow()));
        }
        Refusal::Token => {
            h.insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"vesta\""),
            );
        }
        _ => {}
    }
    resp
}

fn response(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
