//! Routing: path to endpoint, the method and URI-length checks, and the per-request metrics.
//! Every request ends in a response here; nothing a client sends can make it panic.

use std::time::Instant;

use hyper::{Method, Request, Response};
use vesta_core::Clock;

use crate::app::App;
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
    /// Any other path (404).
    Other,
}

impl Endpoint {
    /// All endpoints in index order (`Endpoint as usize`).
    pub const ALL: [Endpoint; 8] = [
        Endpoint::Genid,
        Endpoint::Genids,
        Endpoint::Expid,
        Endpoint::Makeid,
        Endpoint::Transtime,
        Endpoint::Healthz,
        Endpoint::Metrics,
        Endpoint::Other,
    ];

    /// The endpoint serving `path` (exact match; Vesta's paths have no trailing slash).
    pub fn from_path(path: &str) -> Self {
        match path {
            "/genid" => Endpoint::Genid,
            "/genids" => Endpoint::Genids,
            "/expid" => Endpoint::Expid,
            "/makeid" => Endpoint::Makeid,
            "/transtime" => Endpoint::Transtime,
            "/healthz" => Endpoint::Healthz,
            "/metrics" => Endpoint::Metrics,
            _ => Endpoint::Other,
        }
    }

    /// The path, or `None` for `Other`.
    pub const fn path(self) -> Option<&'static str> {
        match self {
            Endpoint::Genid => Some("/genid"),
            Endpoint::Genids => Some("/genids"),
            Endpoint::Expid => Some("/expid"),
            Endpoint::Makeid => Some("/makeid"),
            Endpoint::Transtime => Some("/transtime"),
            Endpoint::Healthz => Some("/healthz"),
            Endpoint::Metrics => Some("/metrics"),
            Endpoint::Other => None,
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
            Endpoint::Other => "other",
        }
    }
}

/// Answers one request and records it in the metrics.
pub async fn handle<B, C: Clock + 'static>(app: &App<C>, req: Request<B>) -> Response<Body> {
    let start = Instant::now();
    let endpoint = Endpoint::from_path(req.uri().path());
    let resp = match dispatch(app, endpoint, &req).await {
        Ok(r) => r,
        Err(e) => response::error(&e),
    };
    app.metrics
        .observe(endpoint, resp.status().as_u16(), start.elapsed());
    resp
}

async fn dispatch<B, C: Clock + 'static>(
    app: &App<C>,
    endpoint: Endpoint,
    req: &Request<B>,
) -> Result<Response<Body>, ApiError> {
    let uri = req.uri();
    let target_len = uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    if target_len > app.max_uri_bytes {
        return Err(ApiError::uri_too_long(target_len, app.max_uri_bytes));
    }
    let Some(path) = endpoint.path() else {
        return Err(ApiError::not_found(&crate::query::shorten(uri.path())));
    };
    if req.method() != Method::GET {
        return Err(ApiError::method_not_allowed(req.method().as_str(), path));
    }
    let query = uri.query();
    match endpoint {
        Endpoint::Genid => endpoints::issue::genid(app, query).await,
        Endpoint::Genids => endpoints::issue::genids(app, query).await,
        Endpoint::Expid => endpoints::expid::expid(app, query),
        Endpoint::Makeid => endpoints::makeid::makeid(app, query),
        Endpoint::Transtime => endpoints::transtime::transtime(app, query),
        Endpoint::Healthz => endpoints::healthz::healthz(app, query),
        Endpoint::Metrics => endpoints::metrics::metrics(app, query),
        Endpoint::Other => Err(ApiError::not_found(path)),
    }
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
                    assert_eq!(format!("/{}", e.label()), p);
                }
                None => assert_eq!(e.label(), "other"),
            }
        }
        assert_eq!(Endpoint::from_path("/genid/"), Endpoint::Other);
        assert_eq!(Endpoint::from_path("/"), Endpoint::Other);
    }
}
