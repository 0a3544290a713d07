//! A small tokio HTTP service on plain hyper that hands out IDs from an embedded issuer
//! through the async API: a request never blocks a runtime worker, even when a second's
//! sequence is used up, and each connection gets its own fair share ([`Flow`]).
//!
//! ```sh
//! cargo run -p vesta-embed --example hyper_service          # listens on 127.0.0.1:3000
//! curl -s localhost:3000/id
//! curl -s 'localhost:3000/ids?count=3'
//! curl -s localhost:3000/order          # {"id":"2708763598951286684","ref":"2B5VP4H0001WW"}
//! curl -s localhost:3000/orders/2B5VP4H0001WW   # the ID from its URL form, explained
//! ```
//!
//! `/order` shows how to hand IDs to JavaScript: as JSON strings (`vesta_core::Id` serializes
//! as one; IDs pass 2^53, where JSON numbers lose digits), with a short base32 form for URLs,
//! which `/orders/{ref}` reads back.
//!
//! Ctrl-C stops it: open connections finish their requests, then the machine ID is released.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use vesta_embed::vesta_core::{Form, Id};
use vesta_embed::{AsyncIssuer, Flow, IssuerConfig};

/// The largest `count` of `/ids`.
pub const MAX_COUNT: u64 = 1000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    // Static machine ID 3 of the embed pool; start it before listening, so a bad config or an
    // unreachable ZooKeeper fails before any client connects.
    let ids = AsyncIssuer::start(IssuerConfig::builder().machine(3).build()?).await?;
    let listener = TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    serve(listener, ids.clone(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    ids.shutdown().await?;
    println!("stopped; machine ID released");
    Ok(())
}

/// Serves HTTP/1.1 on `listener` until `shutdown` resolves, then lets open connections finish
/// their requests. `GET /id` answers one ID, `GET /ids?count=N` N IDs, one per line.
pub async fn serve(listener: TcpListener, ids: AsyncIssuer, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else { continue };
                // One flow per connection: when a unit's sequence runs out, waiting requests
                // are served in turns across connections, so a greedy client cannot starve
                // the others.
                let flow = Arc::new(ids.flow());
                let service = service_fn(move |req| answer(Arc::clone(&flow), req));
                let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        }
    }
    graceful.shutdown().await;
}

/// One request: the IDs asked for, or an error sentence naming what is wrong.
async fn answer(
    flow: Arc<Flow>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path();
    if req.method() == Method::GET && path == "/order" {
        return Ok(new_order(&flow).await);
    }
    if let (&Method::GET, Some(reference)) = (req.method(), path.strip_prefix("/orders/")) {
        return Ok(show_order(&flow, reference));
    }
    let count = match (req.method(), path) {
        (&Method::GET, "/id") => Ok(1),
        (&Method::GET, "/ids") => parse_count(req.uri().query()),
        _ => {
            return Ok(reply(
                StatusCode::NOT_FOUND,
                "try /id or /ids?count=N\n".into(),
            ));
        }
    };
    let count = match count {
        Ok(count) => count,
        Err(message) => return Ok(reply(StatusCode::BAD_REQUEST, message + "\n")),
    };
    // Answered at once while the time unit has sequence left; otherwise this task waits for
    // the next unit on the runtime (the worker thread serves other tasks meanwhile).
    Ok(match flow.next_ids(count).await {
        Ok(batch) => {
            let mut body = String::with_capacity(batch.len() as usize * 20);
            for id in batch.iter() {
                let _ = writeln!(body, "{id}");
            }
            reply(StatusCode::OK, body)
        }
        // Saturated, or the lease not confirmed: worth retrying later or elsewhere.
        Err(e) if e.is_transient() => reply(StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    })
}

/// A new order's ID as JSON: the ID as a string (exact in JavaScript) and its base32 form
/// for URLs (13 characters, sorts as the IDs).
async fn new_order(flow: &Flow) -> Response<Full<Bytes>> {
    match flow.next_id().await {
        Ok(id) => {
            let id = Id::new(id);
            let body = serde_json::json!({ "id": id, "ref": id.to_form(Form::Base32).as_str() });
            reply(StatusCode::OK, format!("{body}\n"))
        }
        Err(e) => reply(StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
    }
}

/// An order's ID read back from its URL form (any form `Id` parses), explained.
fn show_order(flow: &Flow, reference: &str) -> Response<Full<Bytes>> {
    let id: Id = match reference.parse() {
        Ok(id) => id,
        Err(e) => return reply(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let x = flow.issuer().issuer().explain(id.get());
    let body = serde_json::json!({
        "id": id,
        "issued": x.timestamp(),
        "machine": x.node(),
    });
    reply(StatusCode::OK, format!("{body}\n"))
}

/// `count=N` with N in 1..=[`MAX_COUNT`]; the error names the parameter and the range.
fn parse_count(query: Option<&str>) -> Result<u64, String> {
    let value = query
        .and_then(|q| q.strip_prefix("count="))
        .ok_or("missing parameter count: /ids?count=N")?;
    match value.parse::<u64>() {
        Ok(n) if (1..=MAX_COUNT).contains(&n) => Ok(n),
        _ => Err(format!(
            "count {value} is out of range: allowed 1..={MAX_COUNT}"
        )),
    }
}

fn reply(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}
