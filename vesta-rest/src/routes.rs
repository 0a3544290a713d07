//! Every route of the REST port, declared once as rows of the gate's table
//! ([`vesta_service::gate`]): its path or prefix, the methods it serves, what it needs (the
//! bearer token, a switch), its metrics label, and its handler. The gate applies the checks
//! in one order for every row (see its module); this table only says which apply:
//!
//! | routes | methods | needs |
//! | --- | --- | --- |
//! | `/genid`, `/genids`, `/expid`, `/transtime`, the segment and seq paths | GET | token |
//! | `/makeid` | GET | token, `[server] make` (else 404) |
//! | `/healthz`, `/metrics` | GET | nothing (scrapers and health checks carry no token) |
//! | `/ui` and below | GET | `[server] console` (else 404), token |
//! | Leaf's controller paths | Spring's eight | token (the query string is theirs) |
//!
//! Lookup scans the table once: the exact paths first (`/genid` leads), then the prefixes, so
//! it costs what a `match` on the path would. Adding an endpoint: one row here and its handler
//! in `endpoints/`, and its path in docs/openapi.yaml (checked by `tests/it/openapi.rs`).

use std::marker::PhantomData;

use vesta_core::Clock;
use vesta_embed::SystemClock;
use vesta_service::gate::{Methods, Needs, RoutePath};

use crate::ctx::Handler;
use crate::endpoints::{
    console, expid, healthz, issue, leaf, makeid, metrics, segment, seq, transtime,
};

/// One route of the REST port.
pub(crate) type Route<C> = vesta_service::gate::Route<Handler<C>>;

/// The route table of a server whose issuer reads the clock `C`.
pub(crate) struct Routes<C>(PhantomData<C>);

const GET: Methods = Methods::Get;
const LEAF: Methods = Methods::Leaf;
const OPEN: Needs = Needs::OPEN;
const TOKEN: Needs = Needs::TOKEN;
const MAKE: Needs = Needs::MAKE;
const CONSOLE: Needs = Needs::CONSOLE;

impl<C: Clock + 'static> Routes<C> {
    /// Every route: the exact paths first, `/genid` leading, then the prefixes.
    #[rustfmt::skip]
    pub(crate) const ALL: &'static [Route<C>] = &[
        //    path                                    methods needs    label             handler
        route(exact("/genid"),                        GET,  TOKEN,   "genid",          issue::genid),
        route(exact("/genids"),                       GET,  TOKEN,   "genids",         issue::genids),
        route(exact("/expid"),                        GET,  TOKEN,   "expid",          expid::expid),
        route(exact("/makeid"),                       GET,  MAKE,    "makeid",         makeid::makeid),
        route(exact("/transtime"),                    GET,  TOKEN,   "transtime",      transtime::transtime),
        route(exact("/healthz"),                      GET,  OPEN,    "healthz",        healthz::healthz),
        route(exact("/metrics"),                      GET,  OPEN,    "metrics",        metrics::metrics),
        route(exact("/decodeSnowflakeId"),            LEAF, TOKEN,   "leaf_decode",    leaf::decode),
        route(param("/segment/{tag}"),                GET,  TOKEN,   "segment",        segment::one),
        route(param("/segments/{tag}"),               GET,  TOKEN,   "segments",       segment::many),
        route(param("/seq/{key}/current"),            GET,  TOKEN,   "seq_current",    seq::current),
        route(param("/seq/{key}"),                    GET,  TOKEN,   "seq",            seq::next),
        route(leaf_param("/api/segment/get/{tag}"),   LEAF, TOKEN,   "leaf_segment",   leaf::segment),
        route(leaf_param("/api/snowflake/get/{key}"), LEAF, TOKEN,   "leaf_snowflake", leaf::snowflake),
        route(RoutePath::Tree("/ui"),                 GET,  CONSOLE, "console",        console::page),
    ];

    /// The route serving `path`, with its endpoint, if any.
    #[inline]
    pub(crate) fn find(path: &str) -> Option<(Endpoint, &'static Route<C>)> {
        let (i, route) = vesta_service::gate::find(Self::ALL, path)?;
        Some((Endpoint(i as u8), route))
    }
}

const fn exact(path: &'static str) -> RoutePath {
    RoutePath::Exact(path)
}

/// A path ending in a parameter (`/segment/{tag}`): served for every path with its prefix.
/// Vesta's take an empty parameter too (refused by the handler, naming it).
const fn param(template: &'static str) -> RoutePath {
    RoutePath::param(template)
}

/// Leaf's paths need a non-empty parameter, as in Leaf: an empty key matches no mapping.
const fn leaf_param(template: &'static str) -> RoutePath {
    RoutePath::nonempty_param(template)
}

const fn route<C: Clock + 'static>(
    path: RoutePath,
    methods: Methods,
    needs: Needs,
    label: &'static str,
    handler: Handler<C>,
) -> Route<C> {
    Route::new(path, methods, needs, label, handler)
}

/// The routes' paths, labels and groups are the same whatever the issuer's clock: the system
/// clock's table answers for them.
type Table = Routes<SystemClock>;

/// How many endpoints there are: the routes, and one for unknown paths.
const COUNT: usize = Table::ALL.len() + 1;

/// Each endpoint's metrics label, by index (unknown paths last): what the metrics are built
/// with, so they need not know the routes.
pub(crate) const LABELS: [&str; COUNT] = {
    let mut labels = [""; COUNT];
    let mut i = 0;
    while i < COUNT {
        labels[i] = Endpoint::ALL[i].label();
        i += 1;
    }
    labels
};

/// A served endpoint, or [`Endpoint::OTHER`] for an unknown path: the `endpoint` label of the
/// metrics.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint(u8);

impl Endpoint {
    /// Every endpoint, in index order ([`Endpoint::index`]); unknown paths last.
    pub const ALL: [Endpoint; COUNT] = {
        let mut all = [Endpoint(0); COUNT];
        let mut i = 0;
        while i < COUNT {
            all[i] = Endpoint(i as u8);
            i += 1;
        }
        all
    };

    /// Any path no route serves (404).
    pub const OTHER: Endpoint = Endpoint((COUNT - 1) as u8);

    /// The endpoint serving `path`: an exact match for Vesta's paths (no trailing slash), a
    /// prefix for the segment and Leaf paths (the rest is the tag or key; Leaf's need a
    /// non-empty one, as in Leaf, where an empty key matches no mapping), the console's tree.
    pub fn from_path(path: &str) -> Endpoint {
        Table::find(path).map_or(Endpoint::OTHER, |(e, _)| e)
    }

    /// Its position in [`Endpoint::ALL`].
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The path (a template with `{tag}` or `{key}` for the prefix paths), or `None` for
    /// unknown paths and the console (pages, not API paths).
    pub const fn path(self) -> Option<&'static str> {
        match Self::route(self) {
            Some(Route {
                path: path @ (RoutePath::Exact(_) | RoutePath::Prefix { .. }),
                ..
            }) => Some(path.shown()),
            _ => None,
        }
    }

    /// The metrics label.
    pub const fn label(self) -> &'static str {
        match Self::route(self) {
            Some(r) => r.label,
            None => "other",
        }
    }

    /// True for Leaf's controller paths, which answer every method Spring's
    /// `@RequestMapping` does.
    pub const fn any_method(self) -> bool {
        matches!(
            Self::route(self),
            Some(Route {
                methods: Methods::Leaf,
                ..
            })
        )
    }

    const fn route(self) -> Option<&'static Route<SystemClock>> {
        let i = self.0 as usize;
        if i < Table::ALL.len() {
            Some(&Table::ALL[i])
        } else {
            None
        }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({})", self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_labels_round_trip() {
        for (i, e) in Endpoint::ALL.into_iter().enumerate() {
            assert_eq!(e.index(), i);
            match e.path() {
                Some(p) => {
                    assert_eq!(Endpoint::from_path(p), e);
                    let label = p.trim_end_matches("/{tag}").trim_start_matches('/');
                    let label = label
                        .replace("api/segment/get", "leaf_segment")
                        .replace("api/snowflake/get/{key}", "leaf_snowflake")
                        .replace("decodeSnowflakeId", "leaf_decode")
                        .replace("seq/{key}/current", "seq_current")
                        .replace("seq/{key}", "seq");
                    assert_eq!(e.label(), label);
                }
                None => assert!(["other", "console"].contains(&e.label())),
            }
        }
        let labels: std::collections::BTreeSet<_> = Endpoint::ALL.map(Endpoint::label).into();
        assert_eq!(labels.len(), COUNT, "labels are unique");
        assert_eq!(Endpoint::from_path("/genid/"), Endpoint::OTHER);
        assert_eq!(Endpoint::from_path("/"), Endpoint::OTHER);
        let console = Endpoint::from_path("/ui");
        assert_eq!(console.label(), "console");
        for page in ["/ui", "/ui/", "/ui/status", "/ui/nothing"] {
            assert_eq!(Endpoint::from_path(page), console, "{page}");
        }
        assert_eq!(Endpoint::from_path("/uix"), Endpoint::OTHER);
        for leaf in [
            "/decodeSnowflakeId",
            "/api/segment/get/t",
            "/api/snowflake/get/k",
        ] {
            assert!(Endpoint::from_path(leaf).any_method(), "{leaf}");
        }
        assert!(!Endpoint::from_path("/genid").any_method());
    }

    #[test]
    fn prefix_paths_carry_their_parameter() {
        for (path, label, tag) in [
            ("/segment/orders", "segment", "orders"),
            ("/segment/", "segment", ""),
            ("/segments/a:b", "segments", "a:b"),
            ("/api/segment/get/leaf-test", "leaf_segment", "leaf-test"),
            ("/segment/a/b", "segment", "a/b"),
            ("/api/snowflake/get/k", "leaf_snowflake", "k"),
            ("/seq/42", "seq", "42"),
            ("/seq/42/current", "seq_current", "42"),
            ("/seq/a%2Fcurrent", "seq", "a%2Fcurrent"),
            ("/seq//current", "seq_current", ""),
            ("/seq/current", "seq", "current"),
        ] {
            let (e, route) = Table::find(path).unwrap();
            assert_eq!(e.label(), label, "{path}");
            assert!(matches!(route.path, RoutePath::Prefix { .. }), "{path}");
            assert_eq!(route.path.param_of(path), tag);
        }
        for other in [
            "/segment",
            "/segments",
            "/api/segment/get/",
            "/api/segment/get",
            "/api/snowflake/get/",
        ] {
            assert_eq!(Endpoint::from_path(other), Endpoint::OTHER, "{other}");
        }
    }
}
