//! A small HTTP listener for a server whose own protocol is not HTTP (the TCP server): `GET
//! /metrics` for Prometheus and `GET /healthz` for load balancers and service managers, on an
//! address of its own (`server.metrics_listen`). HTTP/1.1 only, a header read timeout, and no
//! other path, so it adds little to what a hostile client can reach.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// The OpenMetrics content type Prometheus asks for.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the listener answers: the metrics text, and the health (200 or 503, JSON body).
pub trait Exposition: Send + Sync + 'static {
    /// The OpenMetrics text of every metric.
    fn metrics(&self) -> String;
    /// `(healthy, JSON body)`.
    fn health(&self) -> (bool, String);
}

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
                let response = answer(&*exposition, req.method(), req.uri().path());
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
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
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
