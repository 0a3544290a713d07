//! `/genid` and `/genids`: issuing without ever blocking a worker thread. When the current
//! time unit's sequence is used up the handler sleeps on the tokio timer until the next unit
//! starts, then tries again; a bounded total wait turns a stuck clock into a 503.

use std::time::Duration;

use hyper::Response;
use vesta_core::{Clock, GenError, IdRun};
use vesta_embed::IssueError;

use crate::app::App;
use crate::error::ApiError;
use crate::query::Query;
use crate::response::{self, Body};

/// The longest one request waits for sequence space before answering 503.
pub const MAX_WAIT: Duration = Duration::from_secs(3);

/// `GET /genid` without waiting: the answer, or `None` when the current unit's sequence is used
/// up (then [`genid`] waits for the next unit on the async path; nothing was issued).
#[inline]
pub fn genid_now<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Option<Result<Response<Body>, ApiError>> {
    if query.is_some_and(|q| !q.is_empty()) {
        if let Err(e) = Query::parse(query, "/genid", &[]) {
            return Some(Err(e));
        }
    }
    match app.issuer.try_next_id() {
        Ok(id) => {
            app.metrics.issued(1);
            Some(Ok(response::decimal(id)))
        }
        Err(IssueError::Refused(GenError::WouldBlock { .. })) => None,
        Err(e) => Some(Err(e.into())),
    }
}

/// `GET /genid`: the next ID as decimal text, waiting for the next unit if need be.
pub async fn genid<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    if query.is_some_and(|q| !q.is_empty()) {
        Query::parse(query, "/genid", &[])?;
    }
    let mut waited = Duration::ZERO;
    loop {
        match app.issuer.try_next_id() {
            Ok(id) => {
                app.metrics.issued(1);
                return Ok(response::decimal(id));
            }
            Err(e) => wait_or_fail(app, e, &mut waited).await?,
        }
    }
}

/// `GET /genids?count=N`: `{"ids": ["…", …]}`, N IDs as strings (JavaScript numbers lose
/// precision above 2^53), in issue order.
pub async fn genids<C: Clock + 'static>(
    app: &App<C>,
    query: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let q = Query::parse(query, "/genids", &["count"])?;
    let count = parse_count(q.required("count")?, app.max_count)?;
    let mut runs: Vec<IdRun> = Vec::new();
    let mut left = count;
    let mut waited = Duration::ZERO;
    while left > 0 {
        match app.issuer.try_next_ids(left) {
            Ok(batch) => {
                left = left.saturating_sub(batch.len());
                runs.extend_from_slice(batch.runs());
            }
            Err(e) => wait_or_fail(app, e, &mut waited).await?,
        }
    }
    app.metrics.issued(count);
    Ok(response::json(ids_json(&runs, count)))
}

/// Sleeps until the next time unit on `WouldBlock` (within [`MAX_WAIT`] in total); any other
/// refusal becomes the error response.
async fn wait_or_fail<C: Clock + 'static>(
    app: &App<C>,
    e: IssueError,
    waited: &mut Duration,
) -> Result<(), ApiError> {
    match e {
        IssueError::Refused(GenError::WouldBlock { wait_ms, .. }) if *waited < MAX_WAIT => {
            let nap = Duration::from_millis(wait_ms.clamp(1, 1000));
            app.metrics.waited();
            tokio::time::sleep(nap).await;
            *waited += nap;
            Ok(())
        }
        other => Err(other.into()),
    }
}

/// `count` as 1..=max; the error names the parameter and the allowed range.
fn parse_count(text: &str, max: u64) -> Result<u64, ApiError> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let numeric = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    match text.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ if numeric => Err(ApiError::invalid_param(
            "count",
            format_args!(
                "count {} is out of range: allowed 1..={max}",
                crate::query::shorten(text)
            ),
        )),
        _ => Err(ApiError::invalid_param(
            "count",
            format_args!(
                "`{}` is not an integer: expected 1..={max}",
                crate::query::shorten(text)
            ),
        )),
    }
}

/// The JSON body, written directly: 10,000 IDs take ~230 KB and no per-ID allocation.
fn ids_json(runs: &[IdRun], count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + usize::try_from(count).unwrap_or(0) * 23);
    out.extend_from_slice(b"{\"ids\":[");
    let mut buf = itoa::Buffer::new();
    let mut first = true;
    for id in runs.iter().flat_map(IdRun::iter) {
        if !first {
            out.push(b',');
        }
        first = false;
        out.push(b'"');
        out.extend_from_slice(buf.format(id).as_bytes());
        out.push(b'"');
    }
    out.extend_from_slice(b"]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_is_checked_with_a_clear_message() {
        assert_eq!(parse_count("1", 10), Ok(1));
        assert_eq!(parse_count("10", 10), Ok(10));
        for (bad, msg) in [
            (
                "0",
                "invalid parameter count: count 0 is out of range: allowed 1..=10",
            ),
            (
                "11",
                "invalid parameter count: count 11 is out of range: allowed 1..=10",
            ),
            (
                "-3",
                "invalid parameter count: count -3 is out of range: allowed 1..=10",
            ),
            (
                "99999999999999999999999",
                "invalid parameter count: count 99999999999999999999999 is out of range: allowed 1..=10",
            ),
            (
                "ten",
                "invalid parameter count: `ten` is not an integer: expected 1..=10",
            ),
            (
                "",
                "invalid parameter count: `` is not an integer: expected 1..=10",
            ),
        ] {
            assert_eq!(parse_count(bad, 10).unwrap_err().message, msg);
        }
    }

    #[test]
    fn ids_are_json_strings_in_order() {
        let runs = [
            IdRun { first: 5, count: 2 },
            IdRun {
                first: u64::MAX,
                count: 1,
            },
        ];
        let v: serde_json::Value = serde_json::from_slice(&ids_json(&runs, 3)).unwrap();
        let step = IdRun::STEP;
        assert_eq!(
            v,
            serde_json::json!({"ids": ["5", (5 + step).to_string(), u64::MAX.to_string()]})
        );
    }
}
