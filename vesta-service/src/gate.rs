//! The one gate every HTTP request passes before its handler, on every listener: the REST
//! port (its gRPC calls included), and the TCP server's side listener (`/metrics`, `/healthz`,
//! the console). A transport declares its routes once, as rows ([`Route`]: where it answers,
//! the methods it serves, what it [`Needs`]), finds a request's row with [`find`] and asks
//! [`Gate::admit`]; a refusal comes back as data ([`Refusal`]) that the transport only words
//! in its own dialect (JSON for REST and the side listener, a gRPC status for gRPC). So the
//! checks are written once, in one order, whatever the listener:
//!
//! 1. the request target's length (`server.max_uri_bytes`), else 414;
//! 2. a route serves the path, else 404 (the transport's own list of paths);
//! 3. the console is on, for its pages, else the 404 of an unknown path, saying why;
//! 4. the route serves the method, else 405 with `Allow` listing the methods it serves;
//! 5. the bearer token (`[server] auth_token_file`), when the route needs it, else 401;
//! 6. making IDs is on (`[server] make`), for the routes that make one, else the op's 404.
//!
//! Limits on what a request asks for (a batch's count, a sequence call's count) are not here:
//! the op enforces them ([`crate::ops`]), the same for every transport.

use hyper::header::AUTHORIZATION;
use hyper::{HeaderMap, Method};

use vesta_core::Remedy;

use crate::ops::{Limits, OpError};

/// Where a route answers.
#[derive(Clone, Copy, Debug)]
pub enum RoutePath {
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
    /// A path ending in a parameter (`/segment/{tag}`): served for every path with its
    /// prefix, an empty parameter included (the handler refuses it, naming it).
    pub const fn param(template: &'static str) -> RoutePath {
        RoutePath::Prefix {
            prefix: before_param(template),
            suffix: after_param(template),
            template,
            nonempty: false,
        }
    }

    /// A path ending in a parameter that may not be empty (Leaf's: an empty key matches no
    /// mapping there).
    pub const fn nonempty_param(template: &'static str) -> RoutePath {
        RoutePath::Prefix {
            prefix: before_param(template),
            suffix: after_param(template),
            template,
            nonempty: true,
        }
    }

    /// True if this serves `path`.
    #[inline]
    pub fn matches(self, path: &str) -> bool {
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

    /// The parameter of `path` (a path this serves): what lies between a prefix route's
    /// prefix and suffix; empty for the others.
    #[inline]
    pub fn param_of(self, path: &str) -> &str {
        match self {
            RoutePath::Prefix { prefix, suffix, .. } => path
                .get(prefix.len()..path.len().saturating_sub(suffix.len()))
                .unwrap_or(""),
            _ => "",
        }
    }

    /// The path as its errors name it: the path, the template, or the tree's root.
    pub const fn shown(self) -> &'static str {
        match self {
            RoutePath::Exact(p) | RoutePath::Tree(p) => p,
            RoutePath::Prefix { template, .. } => template,
        }
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

/// The methods a route serves; any other is a 405 naming them in `Allow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Methods {
    /// `GET` only: vesta's API, the probes, the console (it changes nothing).
    Get,
    /// `POST` only: gRPC calls.
    Post,
    /// What Spring's `@RequestMapping` without a method answers, as Leaf's controller paths
    /// do: the eight methods of HTTP/1.1 (not an extension method such as `QUERY`).
    Leaf,
}

/// Spring's methods, as `Allow` lists them.
const LEAF_METHODS: [Method; 8] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
    Method::TRACE,
];

impl Methods {
    /// True if `method` is served.
    #[inline]
    pub fn allows(self, method: &Method) -> bool {
        match self {
            Methods::Get => method == Method::GET,
            Methods::Post => method == Method::POST,
            Methods::Leaf => LEAF_METHODS.contains(method),
        }
    }

    /// The `Allow` header's value.
    pub const fn allow(self) -> &'static str {
        match self {
            Methods::Get => "GET",
            Methods::Post => "POST",
            Methods::Leaf => "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE",
        }
    }
}

/// What a route needs besides its method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// The bearer token, when `[server] auth_token_file` is set.
    pub token: bool,
    /// The console on (`[server] console`).
    pub console: bool,
    /// Making IDs on (`[server] make`).
    pub make: bool,
}

impl Needs {
    /// Nothing: health checks and scrapes carry no token.
    pub const OPEN: Needs = Needs {
        token: false,
        console: false,
        make: false,
    };
    /// The token: vesta's API, Leaf's paths.
    pub const TOKEN: Needs = Needs {
        token: true,
        ..Needs::OPEN
    };
    /// The token, and making IDs on: `/makeid`.
    pub const MAKE: Needs = Needs {
        make: true,
        ..Needs::TOKEN
    };
    /// The console on, and the token: the console's pages.
    pub const CONSOLE: Needs = Needs {
        console: true,
        ..Needs::TOKEN
    };
}

/// One route of a listener: where it answers, the methods it serves, what it needs, its
/// label in the metrics, and what answers it (`H`: the transport's handler).
#[derive(Debug)]
pub struct Route<H: 'static> {
    /// Where it answers.
    pub path: RoutePath,
    /// The methods served.
    pub methods: Methods,
    /// What it needs besides its method.
    pub needs: Needs,
    /// Its `endpoint` label in the metrics.
    pub label: &'static str,
    /// What answers it.
    pub handler: H,
}

impl<H> Route<H> {
    /// A row of a route table.
    pub const fn new(
        path: RoutePath,
        methods: Methods,
        needs: Needs,
        label: &'static str,
        handler: H,
    ) -> Self {
        Route {
            path,
            methods,
            needs,
            label,
            handler,
        }
    }
}

/// The first row of `routes` serving `path`, with its index (rows are scanned in order: a
/// table lists its hottest exact paths first).
#[inline]
pub fn find<H>(routes: &'static [Route<H>], path: &str) -> Option<(usize, &'static Route<H>)> {
    let i = routes.iter().position(|r| r.path.matches(path))?;
    Some((i, &routes[i]))
}

/// What the console's pages answer while the console is off: the remedy
/// ([`Remedy::ServeConsole`]) as this process says it (in words, or as the `vesta` binary's
/// renderer spells it).
#[cold]
pub fn console_off() -> String {
    format!(
        "the console is off on this server: turn it on with {}",
        Remedy::ServeConsole
    )
}

/// Why the gate refused a request; each transport words it in its own dialect.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// 414: the target is `len` bytes, over `max`.
    TargetTooLong {
        /// The target's length.
        len: usize,
        /// `server.max_uri_bytes`.
        max: usize,
    },
    /// 404: no route serves the path (the transport lists its paths).
    NoRoute,
    /// 404: a console page while the console is off.
    ConsoleOff,
    /// 405: the route serves other methods.
    Method {
        /// The methods it serves (`Allow`).
        allowed: Methods,
        /// The route's path as documented.
        path: &'static str,
    },
    /// 401: no bearer token, or another one.
    Token,
    /// 404: making IDs is off; the op's refusal.
    Off(OpError),
}

impl Refusal {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::TargetTooLong { .. } => 414,
            Refusal::NoRoute | Refusal::ConsoleOff | Refusal::Off(_) => 404,
            Refusal::Method { .. } => 405,
            Refusal::Token => 401,
        }
    }

    /// The sentence the client reads, `method` being the request's (`None` for
    /// [`Refusal::NoRoute`], which each transport words with its list of paths).
    pub fn message(&self, method: &Method) -> Option<String> {
        Some(match self {
            Refusal::TargetTooLong { len, max } => format!(
                "the request target is {len} bytes, over the limit of {max} (server.max_uri_bytes)"
            ),
            Refusal::NoRoute => return None,
            Refusal::ConsoleOff => console_off(),
            Refusal::Method { allowed, path } => match allowed {
                Methods::Leaf => format!(
                    "method {method} is not allowed on {path}: use one of {}",
                    allowed.allow()
                ),
                _ => format!(
                    "method {method} is not allowed on {path}: use {}",
                    allowed.allow()
                ),
            },
            Refusal::Token => crate::auth::NEEDS_TOKEN.to_owned(),
            Refusal::Off(e) => e.message().to_owned(),
        })
    }
}

/// What a request shows the gate: its method, the length of its target (path and query), and
/// its headers (the `Authorization` header is looked up only when a token is asked for).
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    /// The method.
    pub method: &'a Method,
    /// The request target's length in bytes.
    pub target_len: usize,
    /// The headers.
    pub headers: &'a HeaderMap,
}

/// The gate of one listener: the server's limits and the longest target it reads.
#[derive(Clone, Copy, Debug)]
pub struct Gate<'a> {
    /// The server's `[server]` limits: console, make, token.
    pub limits: &'a Limits,
    /// Longest request target accepted (`server.max_uri_bytes`).
    pub max_target_bytes: usize,
}

impl Gate<'_> {
    /// The checks, in the order of the module's list, of `asked` on the row `found` (`None`: no
    /// route serves the path); `Ok` with the row to answer.
    #[inline]
    pub fn admit<H>(
        &self,
        found: Option<&'static Route<H>>,
        asked: Asked<'_>,
    ) -> Result<&'static Route<H>, Refusal> {
        if asked.target_len > self.max_target_bytes {
            return Err(Refusal::TargetTooLong {
                len: asked.target_len,
                max: self.max_target_bytes,
            });
        }
        let route = found.ok_or(Refusal::NoRoute)?;
        self.admit_route(route.methods, route.needs, route.path, asked)?;
        Ok(route)
    }

    /// Checks 3 to 6 for a route serving `methods` at `path` that needs `needs`.
    #[inline]
    pub fn admit_route(
        &self,
        methods: Methods,
        needs: Needs,
        path: RoutePath,
        asked: Asked<'_>,
    ) -> Result<(), Refusal> {
        if needs.console && !self.limits.console {
            return Err(Refusal::ConsoleOff);
        }
        if !methods.allows(asked.method) {
            return Err(Refusal::Method {
                allowed: methods,
                path: path.shown(),
            });
        }
        if needs.token
            && let Some(token) = &self.limits.auth_token
            && !token.admits(asked.headers.get(AUTHORIZATION).map(|v| v.as_bytes()))
        {
            return Err(Refusal::Token);
        }
        if needs.make {
            self.limits.check_make().map_err(Refusal::Off)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::auth::BearerToken;

    fn limits(console: bool, make: bool, token: Option<&str>) -> Limits {
        Limits {
            max_batch: 10,
            max_connections: 1,
            shutdown_grace: Duration::ZERO,
            make,
            console,
            auth_token: token.map(|t| BearerToken::new(t.as_bytes())),
        }
    }

    static ROUTES: [Route<u8>; 4] = [
        Route::new(
            RoutePath::Exact("/genid"),
            Methods::Get,
            Needs::TOKEN,
            "genid",
            0,
        ),
        Route::new(
            RoutePath::Exact("/makeid"),
            Methods::Get,
            Needs::MAKE,
            "makeid",
            1,
        ),
        Route::new(
            RoutePath::Exact("/healthz"),
            Methods::Get,
            Needs::OPEN,
            "healthz",
            2,
        ),
        Route::new(
            RoutePath::Tree("/ui"),
            Methods::Get,
            Needs::CONSOLE,
            "console",
            3,
        ),
    ];

    fn asked<'a>(method: &'a Method, target_len: usize, auth: Option<&str>) -> Asked<'a> {
        let mut headers = HeaderMap::new();
        if let Some(a) = auth {
            headers.insert(AUTHORIZATION, a.parse().unwrap());
        }
        Asked {
            method,
            target_len,
            headers: Box::leak(Box::new(headers)),
        }
    }

    fn check(l: &Limits, path: &str, a: Asked<'_>) -> Result<u8, Refusal> {
        let gate = Gate {
            limits: l,
            max_target_bytes: 100,
        };
        gate.admit(find(&ROUTES, path).map(|(_, r)| r), a)
            .map(|r| r.handler)
    }

    /// Each check in its order: the target, the route, the console, the method, the token,
    /// make; a request that passes gets its row.
    #[test]
    fn the_checks_come_in_one_order() {
        let get = Method::GET;
        let post = Method::POST;
        let all_off = limits(false, false, Some("s3cret"));
        let long = asked(&post, 101, None);
        assert_eq!(
            check(&all_off, "/nothing", long),
            Err(Refusal::TargetTooLong { len: 101, max: 100 })
        );
        assert_eq!(
            check(&all_off, "/nothing", asked(&post, 1, None)),
            Err(Refusal::NoRoute)
        );
        assert_eq!(
            check(&all_off, "/ui/status", asked(&post, 1, None)),
            Err(Refusal::ConsoleOff)
        );
        let e = check(&all_off, "/genid", asked(&post, 1, None)).unwrap_err();
        assert_eq!(e.status(), 405);
        assert_eq!(
            e.message(&post).unwrap(),
            "method POST is not allowed on /genid: use GET"
        );
        assert_eq!(
            check(&all_off, "/makeid", asked(&get, 1, Some("Bearer nope"))),
            Err(Refusal::Token)
        );
        let off = check(&all_off, "/makeid", asked(&get, 1, Some("bearer s3cret")));
        assert!(
            matches!(&off, Err(Refusal::Off(e)) if e.message().contains("[server] make = false")),
            "{off:?}"
        );
        assert_eq!(check(&all_off, "/healthz", asked(&get, 1, None)), Ok(2));
        let all_on = limits(true, true, None);
        assert_eq!(check(&all_on, "/ui/seq", asked(&get, 1, None)), Ok(3));
        assert_eq!(check(&all_on, "/makeid", asked(&get, 1, None)), Ok(1));
    }

    /// Leaf's paths serve Spring's eight methods; an extension method is a 405 listing them.
    #[test]
    fn leaf_methods_are_springs() {
        for m in LEAF_METHODS {
            assert!(Methods::Leaf.allows(&m), "{m}");
        }
        let query = Method::from_bytes(b"QUERY").unwrap();
        assert!(!Methods::Leaf.allows(&query));
        let e = Refusal::Method {
            allowed: Methods::Leaf,
            path: "/decodeSnowflakeId",
        };
        assert_eq!(
            e.message(&query).unwrap(),
            "method QUERY is not allowed on /decodeSnowflakeId: use one of GET, HEAD, POST, \
             PUT, PATCH, DELETE, OPTIONS, TRACE"
        );
    }

    #[test]
    fn prefix_paths_carry_their_parameter() {
        let seq = RoutePath::param("/seq/{key}/current");
        assert!(seq.matches("/seq/42/current"));
        assert_eq!(seq.param_of("/seq/42/current"), "42");
        let leaf = RoutePath::nonempty_param("/api/segment/get/{tag}");
        assert!(!leaf.matches("/api/segment/get/"));
        assert_eq!(leaf.param_of("/api/segment/get/t"), "t");
        assert!(RoutePath::Tree("/ui").matches("/ui/x"));
        assert!(!RoutePath::Tree("/ui").matches("/uix"));
    }
}
