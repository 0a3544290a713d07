//! Every route, declared once (axum's style): its path or prefix, its metrics label, its
//! group, and its handler. The group says which layers a request passes before its handler
//! (the methods served, the bearer token, a switch), so the checks are written once per
//! layer, not once per endpoint:
//!
//! | group | routes | layers, in order |
//! | --- | --- | --- |
//! | `Api` | `/genid`, `/genids`, `/expid`, `/transtime`, the segment and seq paths | GET only, token |
//! | `Make` | `/makeid` | GET only, token, 404 while `[server] make = false` |
//! | `Probe` | `/healthz`, `/metrics` | GET only (scrapers and health checks carry no token) |
//! | `Console` | `/ui` and below | 404 while the console is off, GET only, token |
//! | `Leaf` | Leaf's controller paths | token (any method; the query string is theirs) |
//!
//! Lookup scans the table once: the exact paths first (`/genid` leads), then the prefixes, so
//! it costs what the `match` on the path it replaces did. Adding an endpoint: one row here and
//! its handler in `endpoints/`, and its path in docs/openapi.yaml (checked by
//! `tests/it/openapi.rs`).

use std::marker::PhantomData;

use vesta_core::Clock;
use vesta_embed::SystemClock;

use crate::endpoints::{
    console, expid, healthz, issue, leaf, makeid, metrics, segment, seq, transtime,
};
use crate::router::{Ctx, Reply};

/// A route's handler: the request past its group's layers, answered now or later.
pub(crate) type Handler<C> = for<'a> fn(Ctx<'a, C>) -> Reply;

/// Where a route answers.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RoutePath {
    /// This path exactly (no trailing slash).
    Exact(&'static str),
    /// Paths starting with `prefix` and ending with `suffix`; what lies between is the route's
    /// path parameter (`{tag}`, `{key}`), which must not be empty when `nonempty` (Leaf's
    /// paths: an empty key matches no mapping).
    Prefix {
        /// What the path starts with.
        prefix: &'static str,
        /// What the path ends with, after the parameter (`/current`; mostly empty).
        suffix: &'static str,
        /// The path as documented, with its parameter.
        template: &'static str,
        /// The parameter may not be empty.
        nonempty: bool,
    },
    /// `root` and every path below `root/` (the console's pages).
    Tree(&'static str),
}

impl RoutePath {
    #[inline]
    fn matches(self, path: &str) -> bool {
        match self {
            RoutePath::Exact(p) => path == p,
            RoutePath::Prefix {
                prefix,
                suffix,
                nonempty,
                ..
            } => {
                path.len() >= prefix.len() + suffix.len()
                    && path.starts_with(prefix)
                    && path.ends_with(suffix)
                    && (!nonempty || path.len() > prefix.len() + suffix.len())
            }
            RoutePath::Tree(root) => {
                path.starts_with(root)
                    && (path.len() == root.len() || path.as_bytes()[root.len()] == b'/')
            }
        }
    }

    /// The path as its errors name it: the path, the template, or the tree's root.
    pub(crate) const fn shown(self) -> &'static str {
        match self {
            RoutePath::Exact(p) | RoutePath::Tree(p) => p,
            RoutePath::Prefix { template, .. } => template,
        }
    }
}

/// A set of routes that pass the same layers before their handlers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    /// Vesta's own API.
    Api,
    /// `/makeid`: switched off with `[server] make = false`.
    Make,
    /// Health checks and scrapes: no token.
    Probe,
    /// The web console's pages: mounted only while `[server] console` is on.
    Console,
    /// Leaf's controller paths, answered as Leaf's `@RequestMapping` does: any method, and
    /// the query string theirs to read or ignore.
    Leaf,
}

/// One check a request passes on its way to its handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layer {
    /// The console is on, else a 404 as for an unknown path.
    ConsoleOn,
    /// `GET`, else a 405 with `Allow: GET`.
    GetOnly,
    /// The bearer token, when `[server] auth_token_file` is set, else a 401.
    Token,
    /// Making IDs is allowed, else the service's refusal (a 404).
    MakeOn,
}

impl Group {
    /// The layers of the group's routes, outermost first.
    pub(crate) const fn layers(self) -> &'static [Layer] {
        match self {
            Group::Api => &[Layer::GetOnly, Layer::Token],
            Group::Make => &[Layer::GetOnly, Layer::Token, Layer::MakeOn],
            Group::Probe => &[Layer::GetOnly],
            Group::Console => &[Layer::ConsoleOn, Layer::GetOnly, Layer::Token],
            Group::Leaf => &[Layer::Token],
        }
    }
}

/// One route.
pub(crate) struct Route<C: Clock + 'static> {
    /// Where it answers.
    pub path: RoutePath,
    /// Its `endpoint` label in the metrics.
    pub label: &'static str,
    /// The layers before its handler.
    pub group: Group,
    /// Its handler.
    pub handler: Handler<C>,
}

/// The route table of a server whose issuer reads the clock `C`.
pub(crate) struct Routes<C>(PhantomData<C>);

impl<C: Clock + 'static> Routes<C> {
    /// Every route: the exact paths first, `/genid` leading, then the prefixes.
    #[rustfmt::skip]
    pub(crate) const ALL: &'static [Route<C>] = &[
        //    path                                   label             group           handler
        route(exact("/genid"),                       "genid",          Group::Api,     issue::genid),
        route(exact("/genids"),                      "genids",         Group::Api,     issue::genids),
        route(exact("/expid"),                       "expid",          Group::Api,     expid::expid),
        route(exact("/makeid"),                      "makeid",         Group::Make,    makeid::makeid),
        route(exact("/transtime"),                   "transtime",      Group::Api,     transtime::transtime),
        route(exact("/healthz"),                     "healthz",        Group::Probe,   healthz::healthz),
        route(exact("/metrics"),                     "metrics",        Group::Probe,   metrics::metrics),
        route(exact("/decodeSnowflakeId"),           "leaf_decode",    Group::Leaf,    leaf::decode),
        route(param("/segment/{tag}"),               "segment",        Group::Api,     segment::one),
        route(param("/segments/{tag}"),              "segments",       Group::Api,     segment::many),
        route(param("/seq/{key}/current"),           "seq_current",    Group::Api,     seq::current),
        route(param("/seq/{key}"),                   "seq",            Group::Api,     seq::next),
        route(leaf_param("/api/segment/get/{tag}"),  "leaf_segment",   Group::Leaf,    leaf::segment),
        route(leaf_param("/api/snowflake/get/{key}"), "leaf_snowflake", Group::Leaf,   leaf::snowflake),
        route(RoutePath::Tree("/ui"),                "console",        Group::Console, console::page),
    ];

    /// The route serving `path`, with its endpoint, if any.
    #[inline]
    pub(crate) fn find(path: &str) -> Option<(Endpoint, &'static Route<C>)> {
        let i = Self::ALL.iter().position(|r| r.path.matches(path))?;
        Some((Endpoint(i as u8), &Self::ALL[i]))
    }
}

const fn exact(path: &'static str) -> RoutePath {
    RoutePath::Exact(path)
}

/// A path ending in a parameter (`/segment/{tag}`): served for every path with its prefix.
/// Vesta's take an empty parameter too (refused by the handler, naming it).
const fn param(template: &'static str) -> RoutePath {
    RoutePath::Prefix {
        prefix: before_param(template),
        suffix: after_param(template),
        template,
        nonempty: false,
    }
}

/// Leaf's paths need a non-empty parameter, as in Leaf: an empty key matches no mapping.
const fn leaf_param(template: &'static str) -> RoutePath {
    RoutePath::Prefix {
        prefix: before_param(template),
        suffix: after_param(template),
        template,
        nonempty: true,
    }
}

/// `template` after its `}` (a template without one does not compile).
const fn after_param(template: &'static str) -> &'static str {
    let bytes = template.as_bytes();
    let mut i = 0;
    while bytes[i] != b'}' {
        i += 1;
    }
    template.split_at(i + 1).1
}

/// `template` up to its `{` (a template without one does not compile).
const fn before_param(template: &'static str) -> &'static str {
    let bytes = template.as_bytes();
    let mut i = 0;
    while bytes[i] != b'{' {
        i += 1;
    }
    template.split_at(i).0
}

const fn route<C: Clock + 'static>(
    path: RoutePath,
    label: &'static str,
    group: Group,
    handler: Handler<C>,
) -> Route<C> {
    Route {
        path,
        label,
        group,
        handler,
    }
}

/// The routes' paths, labels and groups are the same whatever the issuer's clock: the system
/// clock's table answers for them.
type Table = Routes<SystemClock>;

/// How many endpoints there are: the routes, and one for unknown paths.
const COUNT: usize = Table::ALL.len() + 1;

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

    /// True for Leaf's controller paths, which answer any method.
    pub const fn any_method(self) -> bool {
        matches!(
            Self::route(self),
            Some(Route {
                group: Group::Leaf,
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
            let RoutePath::Prefix { prefix, suffix, .. } = route.path else {
                panic!("{path}: not a prefix route");
            };
            assert_eq!(&path[prefix.len()..path.len() - suffix.len()], tag);
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
