//! `/genid` and `/genids`: IDs from the service's `ids` op through the connection's
//! [`Flow`](vesta_embed::Flow). Answered at once while the time unit has sequence left;
//! otherwise the request waits, without blocking a worker, for a later unit boundary where
//! waiting requests are served in turns across connections, or answers 503 after
//! `server.max_wait_ms`. A `/genids` answer reserves its share of the unsent-bytes budget
//! before any ID is issued and is written in chunks as the client takes it ([`Body::ids_in`]).

use hyper::Response;
use vesta_core::{Clock, Form, IdBatch};
use vesta_service::OpError;

use crate::budget::Reservation;
use crate::ctx::{Ctx, Reply};
use crate::endpoints::metrics::METRICS_HEADROOM_BYTES;
use crate::error::ApiError;
use crate::query::{Query, parse_count};
use crate::response::{self, Body};

/// `?format=`: decimal (default), base32, base62 or hex.
fn form_of(q: &Query<'_>) -> Result<Form, ApiError> {
    match q.get("format") {
        None => Ok(Form::Decimal),
        Some(text) => text
            .parse::<Form>()
            .map_err(|e| ApiError::invalid_param("format", e)),
    }
}

/// `GET /genid[?format=]`: one ID as text.
#[inline]
pub fn genid<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let form = match cx.query.filter(|q| !q.is_empty()) {
        None => Form::Decimal,
        Some(_) => match Query::parse(cx.query, "/genid", &["format"])
            .map_err(ApiError::from)
            .and_then(|q| form_of(&q))
        {
            Ok(form) => form,
            Err(e) => return cx.now(Err(e)),
        },
    };
    issue(cx, 1, None, form)
}

/// `GET /genids?count=N[&format=]`: `count` (1..=`server.max_batch`) IDs as a JSON list; the
/// budget of its answer is reserved before any ID is issued (503 when it is used up).
pub fn genids<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let parsed = (|| {
        let q = Query::parse(cx.query, "/genids", &["count", "format"])?;
        let count = parse_count(q.required("count")?, cx.service().limits().max_batch)?;
        let form = form_of(&q)?;
        let reservation = cx
            .rest
            .budget
            .reserve_leaving(Body::ids_reservation(count), METRICS_HEADROOM_BYTES)?;
        Ok::<_, ApiError>((count, reservation, form))
    })();
    match parsed {
        Ok((count, reservation, form)) => issue(cx, count, Some(reservation), form),
        Err(e) => cx.now(Err(e)),
    }
}

/// `count` IDs through the connection's flow: answered now, or when a unit boundary brings
/// them.
#[inline]
fn issue<C: Clock + 'static>(
    cx: Ctx<'_, C>,
    count: u64,
    reservation: Option<Reservation>,
    form: Form,
) -> Reply {
    let ids = cx.service().ids(&cx.conn.flow, count);
    cx.answer(ids, move |ids| write(ids, reservation, form))
}

/// The answer once the IDs (or the refusal) are there: one ID as text for `/genid`,
/// `{"ids": ["…", …]}` for `/genids` (strings: JavaScript numbers lose precision above 2^53),
/// in issue order.
#[inline]
fn write(
    ids: Result<IdBatch, OpError>,
    reservation: Option<Reservation>,
    form: Form,
) -> Result<Response<Body>, ApiError> {
    let ids = ids?;
    if let Some(reservation) = reservation {
        let body = Body::ids_in(&ids, reservation, form);
        return Ok(response::with_body(response::APPLICATION_JSON, body));
    }
    let id = ids
        .iter()
        .next()
        .ok_or_else(|| ApiError::internal("the issuer answered no ID"))?;
    Ok(response::in_form(id, form))
}
