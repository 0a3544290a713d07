//! Routing: path to endpoint, the method and URI-length checks, and the per-request metrics.
//! Every request ends in a response here; nothing a client sends can make it panic. Each
//! response carries its request's guard, so the request counts as open on its connection
//! until the response has been sent (see [`crate::connection`]).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::{Method, Request, Response};
use vesta_core::Clock;

use crate::app::App;
use crate::connection::{ConnContext, RequestGuard};
use crate::endpoints;
use crate::error::ApiError;
use crate::response::{self, Body};

/// The endpoints, plus `Other` for unknown paths; the `endpoint` label of the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/genid`: one ID as text.
    Genid,
    /// `/genids?count=N`: a JSON array of IDs as strings.
    Genids,
    /// `/expid?id=`: an ID explained as JSON.
    Expid,
    /// `/makeid?time=&seq=...`: an ID made from fields.
    Makeid,
    /// `/transtime?time=`: a time value as an RFC 3339 instant.
    Transtime,
    /// `/healthz`: 200 while issuing, 503 with the reason otherwise.
    Healthz,
    /// `/metrics`: Prometheus text.
    Metrics,
    /// `/segment/{tag}`: the tag's next segment number as text (segment mode).
    Segment,
    /// `/segments/{tag}?count=N`: N segment numbers, a JSON array of strings.
    Segments,
    /// `/api/segment/get/{tag}`: Leaf's own path, answered as Leaf does.
    LeafSegment,
    /// `/api/snowflake/get/{key}`: Leaf's snowflake path, one ID as text (leaf and twitter
    /// layouts).
    LeafSnowflake,
    /// `/decodeSnowflakeId?snowflakeId=`: Leaf's decoding of a snowflake ID.
    LeafDecode,
    /// `/ui` and below: the web console's HTML pages (not part of the API, so no path here).
    Console,
    /// Any other path (404).
    Other,
}

/// Path prefixes of the segment endpoints; the rest of the path is the tag.
const SEGMENT: &str = "/segment/";
const SEGMENTS: &str = "/segments/";
const LEAF_SEGMENT: &str = "/api/segment/get/";
const LEAF_SNOWFLAKE: &str = "/api/snowflake/get/";

impl Endpoint {
    /// All endpoints in index order (`Endpoint as usize`).
    pub const ALL: [Endpoint; 14] = [
        Endpoint::Genid,
        Endpoint::Genids,
        Endpoint::Expid,
        Endpoint::Makeid,
        Endpoint::Transtime,
        Endpoint::Healthz,
        Endpoint::Metrics,
        Endpoint::Segment,
        Endpoint::Segments,
        Endpoint::LeafSegment,
        Endpoint::LeafSnowflake,
        Endpoint::LeafDecode,
        Endpoint::Console,
        Endpoint::Other,
    ];

    /// The endpoint serving `path`: exact match for Vesta's paths (no trailing slash), prefix
    /// for the segment paths (the rest is the tag; Leaf's path needs a non-empty one, as in
    /// Leaf, where an empty key matches no mapping).
    pub fn from_path(path: &str) -> Self {
        match path {
            "/genid" => Endpoint::Genid,
            "/genids" => Endpoint::Genids,
            "/expid" => Endpoint::Expid,
            "/makeid" => Endpoint::Makeid,
            "/transtime" => Endpoint::Transtime,
            "/healthz" => Endpoint::Healthz,
            "/metrics" => Endpoint::Metrics,
            p if p.starts_with(SEGMENT) => Endpoint::Segment,
            p if p.starts_with(SEGMENTS) => Endpoint::Segments,
            p if p.len() > LEAF_SEGMENT.len() && p.starts_with(LEAF_SEGMENT) => {
                Endpoint::LeafSegment
            }
            p if p.len() > LEAF_SNOWFLAKE.len() && p.starts_with(LEAF_SNOWFLAKE) => {
                Endpoint::LeafSnowflake
            }
            "/decodeSnowflakeId" => Endpoint::LeafDecode,
            p if vesta_service::console::is_console_path(p) => Endpoint::Console,
            _ => Endpoint::Other,
        }
    }

    /// The part of `path` after the endpoint's prefix (the tag of a segment path; empty for
    /// the others).
    pub fn tag_of(self, path: &str) -> &str {
        let prefix = match self {
            Endpoint::Segment => SEGMENT,
            Endpoint::Segments => SEGMENTS,
            Endpoint::LeafSegment => LEAF_SEGMENT,
            _ => return "",
        };
        path.get(prefix.len()..).unwrap_or("")
    }

    /// The path (a template with `{tag}` for the segment paths), or `None` for `Other` and
    /// the console (pages, not API paths).
    pub const fn path(self) -> Option<&'static str> {
        match self {
            Endpoint::Genid => Some("/genid"),
            Endpoint::Genids => Some("/genids"),
            Endpoint::Expid => Some("/expid"),
            Endpoint::Makeid => Some("/makeid"),
            Endpoint::Transtime => Some("/transtime"),
            Endpoint::Healthz => Some("/healthz"),
            Endpoint::Metrics => Some("/metrics"),
            Endpoint::Segment => Some("/segment/{tag}"),
            Endpoint::Segments => Some("/segments/{tag}"),
            Endpoint::LeafSegment => Some("/api/segment/get/{tag}"),
            Endpoint::LeafSnowflake => Some("/api/snowflake/get/{key}"),
            Endpoint::LeafDecode => Some("/decodeSnowflakeId"),
            Endpoint::Console | Endpoint::Other => None,
        }
    }

    /// The metrics label.
    pub const fn label(self) -> &'static str {
        match self {
            Endpoint::Genid => "genid",
            Endpoint::Genids => "genids",
            Endpoint::Expid => "expid",
            Endpoint::Makeid => "makeid",
            Endpoint::Transtime => "transtime",
            Endpoint::Healthz => "healthz",
            Endpoint::Metrics => "metrics",
            Endpoint::Segment => "segment",
            Endpoint::Segments => "segments",
            Endpoint::LeafSegment => "leaf_segment",
            Endpoint::LeafSnowflake => "leaf_snowflake",
            Endpoint::LeafDecode => "leaf_decode",
            Endpoint::Console => "console",
            Endpoint::Other => "other",
        }
    }

    /// Leaf's snowflake paths answer any method, as Leaf's `@RequestMapping` does; vesta's own
    /// answer `GET` only.
    pub const fn any_method(self) -> bool {
        matches!(self, Endpoint::LeafSnowflake | Endpoint::LeafDecode)
    }
}

/// The response future handed to hyper: ready at once for almost every request; boxed, holding
/// the app, only for a request that must wait for a later time unit. The fast path clones no
/// `Arc` (its count would bounce between cores on every request).
pub enum Reply {
    /// Answered synchronously (taken on the first poll).
    Now(Option<Response<Body>>),
    /// Waiting for sequence space (the unit was used up).
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

/// Answers one request of the connection `conn`, and records it in the metrics.
pub fn respond<B, C>(app: &Arc<App<C>>, conn: &ConnContext<C>, req: Request<B>) -> Reply
where
    B: Send + 'static,
    C: Clock + 'static,
{
    let start = Instant::now();
    let guard = conn.activity.request();
    let endpoint = Endpoint::from_path(req.uri().path());
    let request = match dispatch_now(app, endpoint, &req) {
        Dispatch::Answered(result) => {
            return Reply::Now(Some(finish(app, guard, endpoint, start, result)));
        }
        Dispatch::Issue(request) => request,
        Dispatch::Wait(waiting) => {
            let app = Arc::clone(app);
            return Reply::Later(Box::pin(async move {
                let result = {
                    let _waiting = guard.waiting();
                    waiting.await
                };
                finish(&app, guard, endpoint, start, result)
            }));
        }
    };
    let mut ids = conn.flow.issue(request.count);
    if let Some(ready) = ids.ready() {
        let result = endpoints::issue::answer(app, request, ready);
        return Reply::Now(Some(finish(app, guard, endpoint, start, result)));
    }
    let app = Arc::clone(app);
    Reply::Later(Box::pin(async move {
        let waited = {
            let _waiting = guard.waiting();
            ids.await
        };
        let result = endpoints::issue::answer(&app, request, waited);
        finish(&app, guard, endpoint, start, result)
    }))
}

fn finish<C: Clock + 'static>(
    app: &App<C>,
    guard: RequestGuard,
    endpoint: Endpoint,
    start: Instant,
    result: Result<Response<Body>, ApiError>,
) -> Response<Body> {
    let mut resp = result.unwrap_or_else(|e| response::error(&e));
    app.metrics
        .observe(endpoint, resp.status().as_u16(), start.elapsed());
    resp.body_mut().hold_request(guard);
    resp
}

/// What a request needs: an answer made here, IDs from the issuer, or a wait for a segment.
enum Dispatch {
    Answered(Result<Response<Body>, ApiError>),
    Issue(endpoints::issue::IdRequest),
    Wait(endpoints::segment::Waiting),
}

/// Checks the target and method, then answers, or passes an ID request on to the issuer.
fn dispatch_now<B, C: Clock + 'static>(
    app: &App<C>,
    endpoint: Endpoint,
    req: &Request<B>,
) -> Dispatch {
    let uri = req.uri();
    let target_len = uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    let answered = |r| Dispatch::Answered(r);
    if target_len > app.max_uri_bytes {
        return answered(Err(ApiError::uri_too_long(target_len, app.max_uri_bytes)));
    }
    if endpoint == Endpoint::Console && app.console.is_none() {
        return answered(Err(endpoints::console::off()));
    }
    let path = match (endpoint, endpoint.path()) {
        (_, Some(path)) => path,
        (Endpoint::Console, None) => "/ui",
        (_, None) => {
            return answered(Err(ApiError::not_found(&crate::query::shorten(uri.path()))));
        }
    };
    if req.method() != Method::GET && !endpoint.any_method() {
        return answered(Err(ApiError::method_not_allowed(
            req.method().as_str(),
            path,
        )));
    }
    if let Some(token) = &app.auth_token
        && !matches!(endpoint, Endpoint::Healthz | Endpoint::Metrics)
        && !token.admits(
            req.headers()
                .get(hyper::header::AUTHORIZATION)
                .map(|v| v.as_bytes()),
        )
    {
        return answered(Err(ApiError::unauthorized(
            vesta_service::auth::NEEDS_TOKEN,
        )));
    }
    let query = uri.query();
    let segment = |answer| match answer {
        endpoints::segment::Answer::Now(r) => Dispatch::Answered(r),
        endpoints::segment::Answer::Later(w) => Dispatch::Wait(w),
    };
    let tag = endpoint.tag_of(uri.path());
    answered(match endpoint {
        Endpoint::Genid | Endpoint::Genids | Endpoint::LeafSnowflake => {
            return match endpoints::issue::parse(app, endpoint, query, uri.path()) {
                Ok(request) => Dispatch::Issue(request),
                Err(e) => answered(Err(e)),
            };
        }
        Endpoint::Expid => endpoints::expid::expid(app, query),
        Endpoint::Makeid if !app.make => Err(ApiError::not_found_because(
            "/makeid is switched off on this server ([server] make = false)",
        )),
        Endpoint::Makeid => endpoints::makeid::makeid(app, query),
        Endpoint::Transtime => endpoints::transtime::transtime(app, query),
        Endpoint::Healthz => endpoints::healthz::healthz(app, query),
        Endpoint::Metrics => endpoints::metrics::metrics(app, query),
        Endpoint::Segment => return segment(endpoints::segment::one(app, tag, query)),
        Endpoint::Segments => return segment(endpoints::segment::many(app, tag, query)),
        Endpoint::LeafSegment => {
            return segment(endpoints::segment::leaf(app, tag, uri.path(), query));
        }
        Endpoint::LeafDecode => endpoints::leaf::decode(app, query, uri.path()),
        Endpoint::Console => {
            return match endpoints::console::page(app, uri.path(), query) {
                Ok(page) => Dispatch::Wait(page),
                Err(e) => answered(Err(e)),
            };
        }
        Endpoint::Other => Err(ApiError::not_found(path)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_labels_round_trip() {
        for (i, e) in Endpoint::ALL.into_iter().enumerate() {
            assert_eq!(e as usize, i);
            match e.path() {
                Some(p) => {
                    assert_eq!(Endpoint::from_path(p), e);
                    let label = p.trim_end_matches("/{tag}").trim_start_matches('/');
                    let label = label
                        .replace("api/segment/get", "leaf_segment")
                        .replace("api/snowflake/get/{key}", "leaf_snowflake")
                        .replace("decodeSnowflakeId", "leaf_decode");
                    assert_eq!(e.label(), label);
                }
                None => assert!(["other", "console"].contains(&e.label())),
            }
        }
        assert_eq!(Endpoint::from_path("/genid/"), Endpoint::Other);
        assert_eq!(Endpoint::from_path("/"), Endpoint::Other);
        for page in ["/ui", "/ui/", "/ui/status", "/ui/nothing"] {
            assert_eq!(Endpoint::from_path(page), Endpoint::Console, "{page}");
        }
        assert_eq!(Endpoint::from_path("/uix"), Endpoint::Other);
    }

    #[test]
    fn segment_paths_carry_their_tag() {
        for (path, e, tag) in [
            ("/segment/orders", Endpoint::Segment, "orders"),
            ("/segment/", Endpoint::Segment, ""),
            ("/segments/a:b", Endpoint::Segments, "a:b"),
            (
                "/api/segment/get/leaf-test",
                Endpoint::LeafSegment,
                "leaf-test",
            ),
            ("/segment/a/b", Endpoint::Segment, "a/b"),
        ] {
            assert_eq!(Endpoint::from_path(path), e, "{path}");
            assert_eq!(e.tag_of(path), tag);
        }
        for other in [
            "/segment",
            "/segments",
            "/api/segment/get/",
            "/api/segment/get",
        ] {
            assert_eq!(Endpoint::from_path(other), Endpoint::Other, "{other}");
        }
    }
}
