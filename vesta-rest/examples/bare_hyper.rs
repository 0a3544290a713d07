//! The benchmark baseline: a bare hyper 1.x server (same auto connection builder, runtime and
//! `TCP_NODELAY` as vesta-rest) whose only handler returns an incrementing counter as text.
//! `/genid` is measured against it in the same run (docs/bench/rest.md).
//!
//! `cargo run --release -p vesta-rest --example bare_hyper -- [ADDR] [SECONDS] [timer]`
//! (default 127.0.0.1:18081, exits by itself after 120 s). With `timer`, HTTP/1 gets the same
//! 5 s header read timeout as vesta-rest (a tokio timer per request), to tell that cost apart.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:18081".into())
        .parse()?;
    let seconds: u64 = args.next().map_or(Ok(120), |s| s.parse())?;
    let timer = args.next().is_some_and(|a| a == "timer");
    let listener = TcpListener::bind(addr).await?;
    println!("bare-hyper listening on http://{}", listener.local_addr()?);
    let counter = Arc::new(AtomicU64::new(0));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if timer {
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(5));
    }
    let builder = Arc::new(builder);
    let serve = async {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let counter = Arc::clone(&counter);
            let builder = Arc::clone(&builder);
            tokio::spawn(async move {
                let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    let mut buf = itoa::Buffer::new();
                    let mut r =
                        Response::new(Full::new(Bytes::copy_from_slice(buf.format(n).as_bytes())));
                    r.headers_mut().insert(
                        CONTENT_TYPE,
                        HeaderValue::from_static("text/plain; charset=utf-8"),
                    );
                    async move { Ok::<_, Infallible>(r) }
                });
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    };
    tokio::select! {
        _ = serve => {}
        () = tokio::time::sleep(Duration::from_secs(seconds)) => {}
    }
    println!(
        "bare-hyper served {} requests",
        counter.load(Ordering::Relaxed)
    );
    Ok(())
}
