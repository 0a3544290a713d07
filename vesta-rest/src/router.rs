//! Routing: the target's length, the route ([`crate::routes`]), its group's layers, its
//! handler, and the per-request metrics. Every request ends in a response here; nothing a
//! client sends can make it panic. Each response carries its request's guard, so the request
//! counts as open on its connection until the response has been sent (see
//! [`crate::connection`]).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::{HeaderMap, Method, Request, Response};
use vesta_core::Clock;
use vesta_service::Service;

use crate::connection::{ConnContext, RequestGuard};
use crate::endpoints;
use crate::error::ApiError;
use crate::response::{self, Body};
use crate::rest::Rest;
use crate::routes::{Endpoint, Layer, Route, RoutePath, Routes};

/// The response future handed to hyper: ready at once for almost every request; boxed, holding
/// the server's state, only for a request that must wait (for a later time unit, the segment
/// store, a console page). The fast path clones no `Arc` (its count would bounce between cores
/// on every request).
pub enum Reply {
    /// Answered synchronously (taken on the first poll).
    Now(Option<Response<Body>>),
    /// Waiting for its answer.
    Later(Pin<Box<dyn Future<Output = Response<Body>> + Send>>),
}

impl Future for Reply {
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Reply::Now(r) => Poll::Ready(Ok(r.take().unwrap_or_else(|| {
                response::error(&ApiError::internal(
                    "a response was polled after completion",
                ))
            }))),
            Reply::Later(f) => f.as_mut().poll(cx).map(Ok),
        }
    }
}

/// A request past its route's layers, as its handler sees it: what it asked, the server and
/// the connection; [`now`](Ctx::now) or [`later`](Ctx::later) makes its reply.
pub struct Ctx<'a, C: Clock + 'static> {
    /// The server's state.
    pub rest: &'a Arc<Rest<C>>,
    /// The connection's flow of the issuer.
    pub conn: &'a ConnContext<C>,
    /// The request's path.
    pub path: &'a str,
    /// The request's query string.
    pub query: Option<&'a str>,
    route: &'static Route<C>,
    finish: Finish,
}

/// What a reply needs to be finished: recorded in the metrics, holding its request's guard.
struct Finish {
    guard: RequestGuard,
    endpoint: Endpoint,
    start: Instant,
}

impl<'a, C: Clock + 'static> Ctx<'a, C> {
    /// The ops.
    #[inline]
    pub fn service(&self) -> &Service<C> {
        &self.rest.service
    }

    /// The path after the route's prefix (the tag or key of a prefix route; empty otherwise).
    pub fn param(&self) -> &'a str {
        match self.route.path {
            RoutePath::Prefix { prefix, suffix, .. } => self
                .path
                .get(prefix.len()..self.path.len() - suffix.len())
                .unwrap_or(""),
            _ => "",
        }
    }

    /// The route's path as documented (`/segment/{tag}`), for messages.
    pub fn documented_path(&self) -> &'static str {
        self.route.path.shown()
    }

    /// The reply with `result`, answered now.
    #[inline]
    pub fn now(self, result: Result<Response<Body>, ApiError>) -> Reply {
        Reply::Now(Some(self.finish.done(&self.rest.metrics, result)))
    }

    /// The reply once `answer` resolves; meanwhile the request counts as waiting on its
    /// connection (not a stall).
    pub fn later<F>(self, answer: F) -> Reply
    where
        F: Future<Output = Result<Response<Body>, ApiError>> + Send + 'static,
    {
        let rest = Arc::clone(self.rest);
        let finish = self.finish;
        Reply::Later(Box::pin(async move {
            let result = {
                let _waiting = finish.guard.waiting();
                answer.await
            };
            finish.done(&rest.metrics, result)
        }))
    }
}

impl Finish {
    #[inline]
    fn done(
        self,
        metrics: &crate::metrics::Metrics,
        result: Result<Response<Body>, ApiError>,
    ) -> Response<Body> {
        let mut resp = result.unwrap_or_else(|e| response::error(&e));
        metrics.observe(self.endpoint, resp.status().as_u16(), self.start.elapsed());
        resp.body_mut().hold_request(self.guard);
        resp
    }
}

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
        endpoint,
        start,
    };
    let target_len = uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    let refused = if target_len > rest.max_uri_bytes {
        ApiError::uri_too_long(target_len, rest.max_uri_bytes)
    } else {
        match found {
            None => ApiError::not_found(&crate::query::shorten(path)),
            Some((_, route)) => match admit(rest, route, req.method(), req.headers()) {
                Ok(()) => {
                    let cx = Ctx {
                        rest,
                        conn,
                        path,
                        query: uri.query(),
                        route,
                        finish,
                    };
                    return (route.handler)(cx);
                }
                Err(e) => e,
            },
        }
    };
    Reply::Now(Some(finish.done(&rest.metrics, Err(refused))))
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

/// Passes the request through its route's layers, outermost first.
#[inline]
fn admit<C: Clock + 'static>(
    rest: &Rest<C>,
    route: &Route<C>,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    for layer in route.group.layers() {
        match layer {
            Layer::ConsoleOn if rest.console.is_none() => return Err(endpoints::console::off()),
            Layer::GetOnly if method != Method::GET => {
                return Err(ApiError::method_not_allowed(
                    method.as_str(),
                    route.path.shown(),
                ));
            }
            Layer::Token => {
                if let Some(token) = &rest.service.limits().auth_token
                    && !token.admits(
                        headers
                            .get(hyper::header::AUTHORIZATION)
                            .map(|v| v.as_bytes()),
                    )
                {
                    return Err(ApiError::unauthorized(vesta_service::auth::NEEDS_TOKEN));
                }
            }
            Layer::MakeOn => rest.service.check_make()?,
            _ => {}
        }
    }
    Ok(())
}
