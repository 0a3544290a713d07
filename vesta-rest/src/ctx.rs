//! A request past the gate, as its handler sees it ([`Ctx`]), and the reply it makes
//! ([`Reply`]): answered now, or later through one helper ([`Ctx::answer`]) for an op that may
//! answer either way. Each reply carries its request's guard, so the request counts as open on
//! its connection until the response has been sent (see [`crate::connection`]), and is
//! recorded in the metrics once.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::Response;
use vesta_core::Clock;
use vesta_service::{Answer, OpError, Service};

use crate::activity::{ConnContext, RequestGuard};
use crate::error::ApiError;
use crate::response::{self, Body};
use crate::rest::Rest;
use vesta_service::gate::RoutePath;

/// A route's handler: the request past the gate, answered now or later.
pub(crate) type Handler<C> = for<'a> fn(Ctx<'a, C>) -> Reply;

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
    /// Where the request's route answers: its parameter and its documented path.
    pub(crate) route: RoutePath,
    pub(crate) finish: Finish,
}

/// What a reply needs to be finished: recorded in the metrics, holding its request's guard.
pub(crate) struct Finish {
    pub(crate) guard: RequestGuard,
    /// The endpoint's index in the metrics (`Endpoint::index`).
    pub(crate) endpoint: usize,
    pub(crate) start: Instant,
}

impl<'a, C: Clock + 'static> Ctx<'a, C> {
    /// The ops.
    #[inline]
    pub fn service(&self) -> &Service<C> {
        &self.rest.service
    }

    /// The path after the route's prefix (the tag or key of a prefix route; empty otherwise).
    pub fn param(&self) -> &'a str {
        self.route.param_of(self.path)
    }

    /// The route's path as documented (`/segment/{tag}`), for messages.
    pub fn documented_path(&self) -> &'static str {
        self.route.shown()
    }

    /// The reply with `result`, answered now.
    #[inline]
    pub fn now(self, result: Result<Response<Body>, ApiError>) -> Reply {
        Reply::Now(Some(self.finish.done(&self.rest.metrics, result)))
    }

    /// The reply to an op's `answer`, written by `write` now if it is there, else once it
    /// comes: the one place a REST handler turns "now or later" into a reply.
    #[inline]
    pub fn answer<T, L, W>(self, answer: Answer<T, L>, write: W) -> Reply
    where
        L: Future<Output = Result<T, OpError>> + Send + 'static,
        W: FnOnce(Result<T, OpError>) -> Result<Response<Body>, ApiError> + Send + 'static,
    {
        match answer {
            Answer::Now(r) => self.now(write(r)),
            Answer::Later(later) => self.later(async move { write(later.await) }),
        }
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
    pub(crate) fn done(
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
