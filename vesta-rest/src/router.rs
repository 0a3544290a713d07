//! Routing: the request's row in the route table ([`crate::routes`]), the gate
//! ([`vesta_service::gate`]: target length, route, console, method, token, make), then its
//! handler; a refusal is worded here, once. Every request ends in a response; nothing a client
//! sends can make it panic. An HTTP/2 request with `content-type: application/grpc` goes to
//! the gRPC services instead, which pass the same gate.

use std::sync::Arc;
use std::time::Instant;

#[cfg(feature = "grpc")]
use hyper::Response;
use hyper::{Method, Request};
use vesta_core::Clock;
use vesta_service::gate::{Asked, Gate, Refusal};

use crate::activity::ConnContext;
use crate::ctx::{Ctx, Finish, Reply};
use crate::error::ApiError;
#[cfg(feature = "grpc")]
use crate::response::Body;
use crate::rest::Rest;
use crate::routes::{Endpoint, Routes};

/// Answers one request of the connection `conn`, and records it in the metrics. An HTTP/2
/// request with `content-type: application/grpc` goes to the gRPC services instead.
#[inline]
pub fn respond<B, C>(rest: &Arc<Rest<C>>, conn: &ConnContext<C>, req: Request<B>) -> Reply
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    C: Clock + 'static,
{
    #[cfg(feature = "grpc")]
    if req.version() == hyper::Version::HTTP_2
        && req
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .is_some_and(|v| vesta_grpc::is_grpc(v.as_bytes()))
    {
        return grpc(rest, conn, req);
    }
    let start = Instant::now();
    let guard = conn.activity.request();
    let uri = req.uri();
    let path = uri.path();
    let found = Routes::<C>::find(path);
    let endpoint = found.map_or(Endpoint::OTHER, |(e, _)| e);
    let finish = Finish {
        guard,
        endpoint: endpoint.index(),
        start,
    };
    let gate = Gate {
        limits: rest.service.limits(),
        max_target_bytes: rest.max_uri_bytes,
    };
    let asked = Asked {
        method: req.method(),
        target_len: uri.path_and_query().map_or(0, |pq| pq.as_str().len()),
        headers: req.headers(),
    };
    match gate.admit(found.map(|(_, r)| r), asked) {
        Ok(route) => (route.handler)(Ctx {
            rest,
            conn,
            path,
            query: uri.query(),
            route: route.path,
            finish,
        }),
        Err(r) => {
            let e = refusal(&r, req.method(), path);
            Reply::Now(Some(finish.done(&rest.metrics, Err(e))))
        }
    }
}

/// A gRPC request: answered by the gRPC services, open on its connection (and waiting, not
/// stalled, until its answer starts) like any other request.
#[cfg(feature = "grpc")]
fn grpc<B, C>(rest: &Arc<Rest<C>>, conn: &ConnContext<C>, req: Request<B>) -> Reply
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    C: Clock + 'static,
{
    let guard = conn.activity.request();
    let answer = rest.grpc.call(&conn.flow, req);
    Reply::Later(Box::pin(async move {
        let resp = {
            let _waiting = guard.waiting();
            match answer.await {
                Ok(resp) => resp,
                Err(never) => match never {},
            }
        };
        let (parts, body) = resp.into_parts();
        let mut body = Body::grpc(body);
        body.hold_request(guard);
        Response::from_parts(parts, body)
    }))
}

/// A refusal of the gate, worded as every REST error is.
#[cold]
fn refusal(r: &Refusal, method: &Method, path: &str) -> ApiError {
    match r {
        Refusal::NoRoute => ApiError::not_found(&crate::query::shorten(path)),
        Refusal::TargetTooLong { .. } => ApiError::uri_too_long(r.message(method)),
        Refusal::ConsoleOff => ApiError::not_found_because(vesta_service::gate::console_off()),
        Refusal::Method { allowed, .. } => {
            ApiError::method_not_allowed(r.message(method), allowed.allow())
        }
        Refusal::Token => ApiError::unauthorized(vesta_service::auth::NEEDS_TOKEN),
        Refusal::Off(e) => ApiError::from(e.clone()),
    }
}
