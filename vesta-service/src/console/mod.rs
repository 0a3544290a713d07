//! The web console both servers serve when `[server] console = true` (REST: under `/ui` on its
//! port; TCP: on its metrics listener): server-rendered, read-only pages for the people who run
//! an issuer, as Leaf's monitor pages are.
//!
//! - `/ui`, `/ui/explain`: an ID in any form explained in any layout; `/ui/make`: an ID made
//!   from fields, with `/makeid`'s checks and messages ([`crate::make`]). With `[server] make
//!   = false` the make form is not shown and `/ui/make` is a 404 saying why, as `/makeid` is.
//! - `/ui/status`: the layout and its end of life, the machine ID, its source and lease,
//!   issuing and refusal rates over the last minutes, refusals by reason, connections.
//! - `/ui/segments` (segment mode): each tag's two buffers as Leaf's `/cache` shows them, and
//!   the `leaf_alloc` rows as Leaf's `/db` does.
//! - `/ui/seq` (per-key sequences, `[seq] db`): their database, settings and work since start,
//!   and one key's current number, read without loading its section.
//!
//! Pages a server does not have (segment mode or the sequences off) are 404 pages saying why.
//!
//! Architecture Invariant: the console changes nothing. It reads the issuer's status, the
//! servers' counters and the tables; it never issues an ID, a segment number or a sequence
//! number, nor loads a sequence section (a load writes its row), so a browser left open on it
//! does not move anything an alert or a client sees. It answers `GET` only, every echoed text
//! is escaped (`html`), and no page runs script or loads anything.

mod explain;
mod html;
mod rates;
mod segments;
mod seq;
mod status;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use vesta_core::Clock;

use crate::gate::{self, Asked, Gate, Methods, Needs, Refusal, Route, RoutePath};
use crate::ops::Service;
use explain::MakeForm;
pub use html::CONTENT_SECURITY_POLICY;
use html::{Modes, Nav};
use rates::Rates;

/// Longest a page waits for a database read (the `leaf_alloc` rows, a sequence's stored row):
/// a slow database makes the page say so instead of hanging it.
const DB_READ_TIMEOUT: Duration = Duration::from_secs(3);

/// What a transport counts that the status page shows besides the service's own counters:
/// its refusals, read at each page view and each sample.
pub trait Refusals: Send + Sync + 'static {
    /// Requests answered with an error since start, by reason (the transport's own labels:
    /// HTTP statuses for REST, error codes for TCP), zeros included.
    fn refusals(&self) -> Vec<(String, u64)>;
}

/// A console page: the status code and the HTML.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// 200, or 404 for a path the console has not.
    pub status: u16,
    /// The whole document.
    pub html: String,
}

/// The headers every console page carries besides its status: HTML, never cached, no script
/// or outside resource allowed, not framed, no referrer leaked.
pub const HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/html; charset=utf-8"),
    ("cache-control", "no-store"),
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
];

/// The console of one server; cheap to clone.
pub struct Console<C: Clock + 'static> {
    inner: Arc<Inner<C>>,
}

impl<C: Clock + 'static> Clone for Console<C> {
    fn clone(&self) -> Self {
        Console {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C: Clock + 'static> std::fmt::Debug for Console<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Console({})", self.inner.server)
    }
}

struct Inner<C: Clock + 'static> {
    /// `REST` or `TCP`, shown in the titles.
    server: &'static str,
    /// The issuer, the segments, the counters; its `[server] make` off, no page makes an ID
    /// (the form is gone, `/ui/make` is a 404).
    service: Arc<Service<C>>,
    refusals: Box<dyn Refusals>,
    rates: Rates,
    started: Instant,
}

impl<C: Clock + 'static> Console<C> {
    /// The console of a `server` (`REST` or `TCP`) serving `service`, with the transport's
    /// `refusals`; the service's `[server] make` off switches the make form off too. Inside a
    /// tokio runtime it samples the counters every 10 s on a task that ends with the console.
    pub fn new(
        server: &'static str,
        service: Arc<Service<C>>,
        refusals: Box<dyn Refusals>,
    ) -> Self {
        let console = Console {
            inner: Arc::new(Inner {
                server,
                service,
                refusals,
                rates: Rates::default(),
                started: Instant::now(),
            }),
        };
        console.inner.sample();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(sample_while_alive(Arc::downgrade(&console.inner)));
        }
        console
    }

    /// The page at `path` (a console path) for the query string `query`: its row of
    /// `Inner::PAGES`, past the gate's check of what the row needs (`/ui/make`: making IDs
    /// on, else the 404 `/makeid` gives, as a page), or the 404 page of a path with no row.
    pub async fn answer(&self, path: &str, query: Option<&str>) -> Page {
        let i = &*self.inner;
        let modes = Modes {
            segments: i.service.segments().is_some(),
            seq: i.service.seq().is_some(),
        };
        let gate = Gate {
            limits: i.service.limits(),
            max_target_bytes: usize::MAX,
        };
        let no_headers = hyper::HeaderMap::new();
        let asked = Asked {
            method: &hyper::Method::GET,
            target_len: 0,
            headers: &no_headers,
        };
        let shown = match gate.admit(gate::find(Inner::<C>::PAGES, path).map(|(_, r)| r), asked) {
            Ok(route) => (route.handler)(i, query).await,
            Err(Refusal::Off(e)) => Shown::not_found("Make an ID", Nav::None, e.message()),
            Err(_) => Shown::not_found(
                "Not found",
                Nav::None,
                if i.service.check_make().is_ok() {
                    "no console page here: the pages are /ui/explain, /ui/make, /ui/status, \
                     /ui/segments and /ui/seq"
                } else {
                    "no console page here: the pages are /ui/explain, /ui/status, /ui/segments \
                     and /ui/seq"
                },
            ),
        };
        let title = format!("{} · {} server", shown.title, i.server);
        Page {
            status: shown.status,
            html: html::page(&title, shown.nav, modes, shown.refresh_s, &shown.body),
        }
    }
}

/// A page before its shell: the status, the title, the tab it belongs to, its refresh, the
/// body.
struct Shown {
    status: u16,
    title: &'static str,
    nav: Nav,
    refresh_s: Option<u32>,
    body: String,
}

impl Shown {
    fn ok(title: &'static str, nav: Nav, refresh_s: Option<u32>, body: String) -> Shown {
        Shown {
            status: 200,
            title,
            nav,
            refresh_s,
            body,
        }
    }

    /// The page of a handler that has it at once (no await).
    fn now<'a>(self) -> PageFuture<'a> {
        Box::pin(std::future::ready(self))
    }

    fn not_found(title: &'static str, nav: Nav, why: &str) -> Shown {
        Shown {
            status: 404,
            title,
            nav,
            refresh_s: None,
            body: not_found(why),
        }
    }
}

/// A page's handler: the console and the query string, the page on its way.
type PageFn<C> = for<'a> fn(&'a Inner<C>, Option<&'a str>) -> PageFuture<'a>;
type PageFuture<'a> = Pin<Box<dyn Future<Output = Shown> + Send + 'a>>;

/// What `/ui/make` needs: making IDs on (the console itself and the token are the
/// listener's row).
const MAKE_ON: Needs = Needs {
    make: true,
    ..Needs::OPEN
};

impl<C: Clock + 'static> Inner<C> {
    /// The console's pages, rows of the gate's table below the listener's `/ui` row.
    #[rustfmt::skip]
    const PAGES: &'static [Route<PageFn<C>>] = &[
        Route::new(RoutePath::Exact("/ui"),          Methods::Get, Needs::OPEN, "explain",  Self::explain),
        Route::new(RoutePath::Exact("/ui/"),         Methods::Get, Needs::OPEN, "explain",  Self::explain),
        Route::new(RoutePath::Exact("/ui/explain"),  Methods::Get, Needs::OPEN, "explain",  Self::explain),
        Route::new(RoutePath::Exact("/ui/make"),     Methods::Get, MAKE_ON,     "make",     Self::make),
        Route::new(RoutePath::Exact("/ui/status"),   Methods::Get, Needs::OPEN, "status",   Self::status),
        Route::new(RoutePath::Exact("/ui/segments"), Methods::Get, Needs::OPEN, "segments", Self::segments),
        Route::new(RoutePath::Exact("/ui/seq"),      Methods::Get, Needs::OPEN, "seq",      Self::seq),
    ];

    /// `/ui`, `/ui/explain`: an ID explained, and the blank make form while making is on.
    fn explain<'a>(&'a self, query: Option<&'a str>) -> PageFuture<'a> {
        let form = if self.service.check_make().is_ok() {
            MakeForm::Blank
        } else {
            MakeForm::Off
        };
        let body = explain::page(&self.service, query, form);
        Shown::ok("Explain an ID", Nav::Explain, None, body).now()
    }

    /// `/ui/make`: an ID made by the service's `make` op.
    fn make<'a>(&'a self, query: Option<&'a str>) -> PageFuture<'a> {
        let body = explain::page(&self.service, None, MakeForm::Made(query));
        Shown::ok("Make an ID", Nav::Explain, None, body).now()
    }

    /// `/ui/status`.
    fn status<'a>(&'a self, _: Option<&'a str>) -> PageFuture<'a> {
        let body = status::page(self);
        Shown::ok("Status", Nav::Status, Some(5), body).now()
    }

    /// `/ui/segments` (segment mode), else a 404 saying why.
    fn segments<'a>(&'a self, _: Option<&'a str>) -> PageFuture<'a> {
        Box::pin(async move {
            match self.service.segments() {
                Some(s) => {
                    let body = segments::page(s).await;
                    Shown::ok("Segments", Nav::Segments, Some(5), body)
                }
                None => Shown::not_found(
                    "Segments",
                    Nav::Segments,
                    "segment mode is off on this server (set [segment] db)",
                ),
            }
        })
    }

    /// `/ui/seq` (`[seq] db`), else the 404 `/seq/{key}` gives, as a page.
    fn seq<'a>(&'a self, query: Option<&'a str>) -> PageFuture<'a> {
        Box::pin(async move {
            match self.service.seq_on() {
                Ok(s) => {
                    let body = seq::page(s, self.service.seq_numbers_issued(), query).await;
                    Shown::ok("Sequences", Nav::Seq, None, body)
                }
                Err(e) => Shown::not_found("Sequences", Nav::Seq, e.message()),
            }
        })
    }
}

/// A console as a listener serves it, whatever its issuer's clock (the TCP server's metrics
/// listener holds one of these).
pub trait Pages: Send + Sync {
    /// The page at `path` for `query`.
    fn page<'a>(
        &'a self,
        path: &'a str,
        query: Option<&'a str>,
    ) -> Pin<Box<dyn Future<Output = Page> + Send + 'a>>;
}

impl<C: Clock + 'static> Pages for Console<C> {
    fn page<'a>(
        &'a self,
        path: &'a str,
        query: Option<&'a str>,
    ) -> Pin<Box<dyn Future<Output = Page> + Send + 'a>> {
        Box::pin(self.answer(path, query))
    }
}

impl<C: Clock + 'static> Inner<C> {
    fn refused_total(&self) -> u64 {
        self.refusals.refusals().iter().map(|(_, n)| n).sum()
    }

    fn sample(&self) {
        let issued = self.service.ids_issued();
        self.rates
            .record(Instant::now(), issued, self.refused_total());
    }
}

/// Samples the counters until the console is dropped.
async fn sample_while_alive<C: Clock + 'static>(console: Weak<Inner<C>>) {
    let mut tick = tokio::time::interval(rates::SAMPLE_EVERY);
    tick.tick().await; // the first tick is immediate: `new` sampled already
    loop {
        tick.tick().await;
        match console.upgrade() {
            Some(inner) => inner.sample(),
            None => return,
        }
    }
}

fn not_found(why: &str) -> String {
    let mut h = html::Html::default();
    h.error(why);
    h.into_string()
}

/// A transport that refuses nothing: the console's unit tests.
#[cfg(test)]
pub(crate) struct NoRefusals;

#[cfg(test)]
impl Refusals for NoRefusals {
    fn refusals(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use vesta_core::ManualClock;
    use vesta_embed::{AsyncIssuer, Issuer, IssuerConfig};

    use super::*;
    use crate::ops::Limits;

    fn console(make: bool) -> Console<Arc<ManualClock>> {
        let clock = Arc::new(ManualClock::new(1_800_000_000_000));
        let issuer = Issuer::start_with_clock(IssuerConfig::default(), clock).unwrap();
        let ids = AsyncIssuer::new(Arc::new(issuer), Duration::from_secs(3)).unwrap();
        let limits = Limits {
            max_batch: 10,
            max_connections: 1,
            shutdown_grace: Duration::ZERO,
            make,
            console: true,
            auth_token: None,
        };
        let service = Arc::new(Service::new(ids, None, limits));
        Console::new("REST", service, Box::new(NoRefusals))
    }

    /// `[server] make = false` leaves no page that makes an ID: no form, no link, and
    /// `/ui/make` is the 404 `/makeid` is, saying why; with it on, both are there.
    #[tokio::test]
    async fn make_off_takes_the_form_away_and_refuses_its_page() {
        let on = console(true);
        let page = on.answer("/ui/explain", Some("id=1")).await;
        assert!(page.html.contains("action=\"/ui/make\""), "{}", page.html);
        let made = on.answer("/ui/make", Some("time=1&seq=2")).await;
        assert_eq!(made.status, 200);
        assert!(made.html.contains("<p id=\"made\">"), "{}", made.html);

        let off = console(false);
        for (path, query) in [
            ("/ui", None),
            ("/ui/explain", Some("id=1")),
            ("/ui/nothing", None),
            ("/ui/status", None),
        ] {
            let page = off.answer(path, query).await;
            assert!(!page.html.contains("/ui/make"), "{path}: {}", page.html);
            assert!(!page.html.contains("id=\"make\""), "{path}: {}", page.html);
        }
        let refused = off.answer("/ui/make", Some("time=1&seq=2")).await;
        assert_eq!(refused.status, 404);
        assert!(
            refused
                .html
                .contains("making IDs is switched off on this server ([server] make = false)"),
            "{}",
            refused.html
        );
        assert!(!refused.html.contains("id=\"made\""), "{}", refused.html);
        assert!(!refused.html.contains("<form"), "{}", refused.html);
    }

    /// Without `[seq] db` the sequences page is a 404 saying why, and no page links to it.
    #[tokio::test]
    async fn without_sequences_their_page_is_a_404_saying_why() {
        let c = console(true);
        let page = c.answer("/ui/seq", Some("key=42")).await;
        assert_eq!(page.status, 404);
        assert!(
            page.html.contains("per-key sequences are off") && page.html.contains("[seq] db"),
            "{}",
            page.html
        );
        assert!(!page.html.contains("<form"), "{}", page.html);
        let status = c.answer("/ui/status", None).await;
        assert!(!status.html.contains("href=\"/ui/seq\""), "{}", status.html);
    }
}
