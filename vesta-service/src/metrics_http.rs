//! A small HTTP listener for a server whose own protocol is not HTTP (the TCP server): `GET
//! /metrics` for Prometheus and `GET /healthz` for load balancers and service managers, on an
//! address of its own (`server.metrics_listen`). HTTP/1.1 only, a header read timeout, and no
//! other path, so it adds little to what a hostile client can reach. With `[server] console`
//! on, the console's read-only pages are served under `/ui` too, behind the bearer token when
//! `[server] auth_token_file` is set (`/metrics` and `/healthz` stay open: scrapers and health
//! checks carry no token).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue, WWW_AUTHENTICATE,
};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::auth::{BearerToken, NEEDS_TOKEN};
use crate::console::{HEADERS, Pages, is_console_path};

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
    /// The bearer token the console's pages need, if one is configured.
    fn console_token(&self) -> Option<&BearerToken> {
        None
    }
}

/// Longest request target the console reads (the metrics paths take no query).
const MAX_TARGET_BYTES: usize = 4096;

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
                async move {
                    let response = match exposition.console() {
                        Some(pages) if is_console_path(req.uri().path()) => {
                            console(pages, exposition.console_token(), &req).await
                        }
                        _ => answer(&*exposition, req.method(), req.uri().path()),
                    };
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// A console page, `GET` only, its target bounded, and with the bearer token when one is set
/// (the REST server's check, [`BearerToken::admits`]).
async fn console<B>(
    pages: &dyn Pages,
    token: Option<&BearerToken>,
    req: &Request<B>,
) -> Response<Full<Bytes>> {
    let target = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    let refused = |status, why: String| {
        let body = serde_json::json!({ "error": why }).to_string();
        response(status, "application/json", body)
    };
    if req.method() != Method::GET {
        return refused(StatusCode::METHOD_NOT_ALLOWED, "use GET".into());
    }
    if target > MAX_TARGET_BYTES {
        return refused(
            StatusCode::URI_TOO_LONG,
            format!("the request target is {target} bytes, over the limit of {MAX_TARGET_BYTES}"),
        );
    }
    if let Some(token) = token
        && !token.admits(req.headers().get(AUTHORIZATION).map(|v| v.as_bytes()))
    {
        let mut r = refused(StatusCode::UNAUTHORIZED, NEEDS_TOKEN.into());
        r.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"vesta\""),
        );
        return r;
    }
    let page = pages.page(req.uri().path(), req.uri().query()).await;
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

fn answer(e: &dyn Exposition, method: &Method, path: &str) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (method, path) {
        (&Method::GET, "/metrics") => (StatusCode::OK, OPENMETRICS, e.metrics()),
        (&Method::GET, "/healthz") => {
            let (healthy, body) = e.health();
            let status = if healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, "application/json", body)
        }
        (&Method::GET, _) => (
            StatusCode::NOT_FOUND,
            "application/json",
            r#"{"error":"no endpoint here: the paths are /metrics and /healthz"}"#.into(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "application/json",
            r#"{"error":"use GET"}"#.into(),
        ),
    };
    response(status, content_type, body)
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
