//! `/ui` and below: the web console's pages (`vesta_service::console`) when `[server] console`
//! is on; a 404 like any unknown path when it is off. The pages are HTML, not part of the API
//! (docs/console.md); `GET` only, and the bearer token is asked for as on every endpoint. A
//! page's bytes count in the unsent-bytes budget until sent, so a browser that stops reading
//! pins no more than any other client.

use hyper::header::{HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use vesta_core::Clock;

use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::response::Body;

/// The page at the request's path, rendered on the connection's task (the segments page
/// reads the table).
pub fn page<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let Some(console) = cx.rest.console.clone() else {
        // The gate let it through only with the console on.
        return cx.now(Err(ApiError::not_found_because(
            vesta_service::gate::console_off(),
        )));
    };
    let (path, query) = (cx.path.to_owned(), cx.query.map(str::to_owned));
    let budget = cx.rest.budget.clone();
    cx.later(async move {
        let page = console.answer(&path, query.as_deref()).await;
        // A page (a few KiB) is charged to the unsent-bytes budget until sent, as /metrics is.
        let reservation = budget.reserve(page.html.len())?;
        let mut r = Response::new(Body::charged(page.html.into(), reservation));
        *r.status_mut() = StatusCode::from_u16(page.status).unwrap_or(StatusCode::OK);
        for (name, value) in vesta_service::console::HEADERS {
            r.headers_mut().insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        Ok(r)
    })
}
