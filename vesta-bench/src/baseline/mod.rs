//! The benchmark baseline: a bare hyper 1.x server with the same auto connection builder,
//! runtime and `TCP_NODELAY` as vesta-rest, whose only handler answers every request with an
//! incrementing counter as text. `/genid` is measured against it in the same run
//! (`vesta bench rest --baseline`, docs/bench/rest.md), so what vesta-rest adds to hyper shows.
//! [`grpc`] is the same for gRPC: the bare tonic handler the gRPC service is measured against.

pub mod grpc;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

/// Serves `listener` until `shutdown` completes; returns how many requests were answered.
/// With `header_read_timeout`, HTTP/1 gets vesta-rest's slow-client limit (a tokio timer per
/// request head), to tell that cost apart.
pub async fn serve(
    listener: TcpListener,
    header_read_timeout: Option<Duration>,
    shutdown: impl Future<Output = ()>,
) -> u64 {
    let counter = Arc::new(AtomicU64::new(0));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if let Some(limit) = header_read_timeout {
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limit);
    }
    let answered = Arc::clone(&counter);
    let service = service_fn(move |_req: Request<Incoming>| {
        let n = answered.fetch_add(1, Ordering::Relaxed);
        let mut buf = itoa::Buffer::new();
        let mut r = Response::new(Full::new(Bytes::copy_from_slice(buf.format(n).as_bytes())));
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        async move { Ok::<_, Infallible>(r) }
    });
    accept(listener, builder, service, shutdown).await;
    counter.load(Ordering::Relaxed)
}

/// Accepts connections on `listener` (`TCP_NODELAY`, as vesta-rest) and serves each with
/// `builder` and a clone of `service`, until `shutdown` completes.
async fn accept<S, B>(
    listener: TcpListener,
    builder: auto::Builder<TokioExecutor>,
    service: S,
    shutdown: impl Future<Output = ()>,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let builder = Arc::new(builder);
    let accepting = async {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let builder = Arc::clone(&builder);
            let service = service.clone();
            tokio::spawn(async move {
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    };
    tokio::select! {
        () = accepting => {}
        () = shutdown => {}
    }
}
