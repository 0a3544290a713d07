//! Leaf's paths, answered as Meituan Leaf's `LeafController` and `LeafMonitorController`
//! answer, so a Leaf client switches by host name:
//!
//! - `/api/segment/get/{key}` (segment mode): the tag's next segment number as `text/plain`;
//!   a failure is Leaf's 500 with Spring Boot's error body and `Result{id=CODE,
//!   status=EXCEPTION}` (`-1` the store not initialised, `-2` no such tag, `-3` no segment).
//!   Without a segment database it is vesta's 404 (Leaf would answer `0` from its
//!   `ZeroIDGen`, which is not a unique number).
//! - `/api/snowflake/get/{key}`: one ID as `text/plain` (the key is ignored, as Leaf ignores
//!   it); a failure is Leaf's 500 (`-3` clock behind, `-1` anything else that kept the ID
//!   back).
//! - `/decodeSnowflakeId?snowflakeId=N`: `{"timestamp": "<ms>(yyyy-MM-dd HH:mm:ss.SSS)",
//!   "workerId": "...", "sequenceId": "..."}`, every value a string, computed with Leaf's own
//!   Java `long` arithmetic (so negative input reads as Leaf reads it) and formatted in the
//!   server's local time zone as Leaf's JVM does (`TZ` changes it); `{"errorMsg": ...}` for
//!   text that is not a Java `long`.
//!
//! All three answer any method and ignore query parameters they do not read, as Leaf's
//! `@RequestMapping` does (the route group `Leaf`). The snowflake paths are served in the
//! `leaf` and `twitter` layouts (the same 64 bits); elsewhere a 404 says which layouts serve
//! them. Every other failure speaks Leaf's JSON too; [`failure`] is the one place an op's
//! refusal becomes Leaf's code.

use std::future::Future;
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::{Response, StatusCode};
use vesta_core::{Clock, IdBatch, Layout, Preset};
use vesta_service::ops::Turn;
use vesta_service::{Answer, ErrorKind, OpError};

use super::segment::decode as decode_tag;
use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::query::shorten;
use crate::response::{self, Body};

/// Leaf's own message for a `snowflakeId` that `Long.parseLong` refuses.
pub const DECODE_ERROR: &str = "snowflake Id反解析发生异常!";

/// The layouts whose IDs Leaf's snowflake paths read: Leaf's and Twitter's (the same bits).
pub fn serves(layout: &Layout) -> bool {
    matches!(layout.preset(), Some(Preset::Leaf | Preset::Twitter))
}

/// The 404 of a Leaf snowflake path on a server of another layout.
pub fn not_served(layout: &Layout, path: &str) -> ApiError {
    ApiError::not_found_because(format!(
        "{path} is Leaf's snowflake API, served by a server with layout = \"leaf\" or \
         \"twitter\"; this server issues the {} layout",
        layout.full_name()
    ))
}

/// Spring Boot 1.5's default error body, as Leaf's server answers a failure.
pub fn spring_error(
    status: StatusCode,
    exception: &str,
    message: &str,
    path: &str,
) -> Response<Body> {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let body = serde_json::json!({
        "timestamp": timestamp,
        "status": status.as_u16(),
        "error": status.canonical_reason().unwrap_or(""),
        "exception": exception,
        "message": message,
        "path": path,
    });
    let mut r = response::ok(response::JSON_UTF8, body.to_string());
    *r.status_mut() = status;
    r
}

/// Leaf's 500 for a `Result` with status `EXCEPTION` and id `code`.
pub fn server_exception(code: i64, path: &str) -> Response<Body> {
    spring_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "com.sankuai.inf.leaf.server.exception.LeafServerException",
        &format!("Result{{id={code}, status=EXCEPTION}}"),
        path,
    )
}

/// Leaf's failure answer for an op's refusal: its 500 with the code Leaf gives the same
/// failure — `-2` an unknown (or malformed) tag, `-3` no segment now or the clock behind
/// (Leaf's "clock moved backwards more than 5 ms"), `-1` anything else (the store not
/// initialised, the issuer fenced, saturated or shutting down).
pub fn failure(e: &OpError, path: &str) -> Response<Body> {
    let code = match e.kind() {
        ErrorKind::UnknownTag | ErrorKind::BadParameter => -2,
        ErrorKind::NoSegment | ErrorKind::ClockBehind => -3,
        _ => -1,
    };
    server_exception(code, path)
}

/// `/api/snowflake/get/{key}`: one ID from the service's `ids` op.
pub fn snowflake<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let layout = cx.service().issuer().layout();
    if !serves(layout) {
        let e = not_served(layout, cx.documented_path());
        return cx.now(Err(e));
    }
    let id = cx.service().ids(&cx.conn.flow, 1);
    reply(cx, id, snowflake_answer)
}

/// The answer of `/api/snowflake/get/{key}` once its ID (or the refusal) is there.
fn snowflake_answer(ids: Result<IdBatch, OpError>, path: &str) -> Response<Body> {
    let id = ids.and_then(|b| {
        b.iter()
            .next()
            .ok_or_else(|| OpError::internal("the issuer answered no ID"))
    });
    match id {
        Ok(id) => response::decimal(id),
        Err(e) => failure(&e, path),
    }
}

/// `/api/segment/get/{key}`: the tag's next number from the service's segment op.
pub fn segment<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    if let Err(e) = cx.service().segments_on() {
        return cx.now(Err(e.into()));
    }
    let number = match decode_tag(cx.param()) {
        Ok(tag) => cx.service().segment_number(&tag, Turn::Now),
        Err(e) => Answer::Now(Err(e)),
    };
    reply(cx, number, number_answer)
}

/// Leaf's answer to `answer`, now or once it is there, written by `write` (which echoes the
/// request's path in a failure, as Spring does).
fn reply<C, T, L>(
    cx: Ctx<'_, C>,
    answer: Answer<T, L>,
    write: fn(Result<T, OpError>, &str) -> Response<Body>,
) -> Reply
where
    C: Clock + 'static,
    T: Send + 'static,
    L: Future<Output = Result<T, OpError>> + Send + 'static,
{
    // Not `Ctx::answer`: the path is borrowed, not copied, when the answer is there now.
    let path = shorten(cx.path);
    match answer {
        Answer::Now(r) => {
            let answer = write(r, &path);
            cx.now(Ok(answer))
        }
        Answer::Later(later) => {
            let path = path.into_owned();
            cx.later(async move { Ok(write(later.await, &path)) })
        }
    }
}

/// The answer of `/api/segment/get/{key}` once its number (or the refusal) is there.
fn number_answer(n: Result<u64, OpError>, path: &str) -> Response<Body> {
    match n {
        Ok(n) => response::decimal(n),
        Err(e) => failure(&e, path),
    }
}

/// `/decodeSnowflakeId?snowflakeId=N`.
pub fn decode<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let r = decode_answer(&cx);
    cx.now(r)
}

fn decode_answer<C: Clock + 'static>(cx: &Ctx<'_, C>) -> Result<Response<Body>, ApiError> {
    let layout = cx.service().issuer().layout();
    let path = cx.path;
    if !serves(layout) {
        return Err(not_served(layout, path));
    }
    // Spring binds the first value of the parameter and ignores the others.
    let Some(text) = first_param(cx.query, "snowflakeId") else {
        return Ok(spring_error(
            StatusCode::BAD_REQUEST,
            "org.springframework.web.bind.MissingServletRequestParameterException",
            "Required String parameter 'snowflakeId' is not present",
            path,
        ));
    };
    let body = match parse_java_long(&text) {
        Some(id) => decoded(id, layout.epoch().unix_ms() as i64),
        None => serde_json::json!({ "errorMsg": DECODE_ERROR }),
    };
    Ok(response::ok(response::JSON_UTF8, body.to_string()))
}

/// Leaf's decoding, in its own Java `long` arithmetic (arithmetic shifts, wrapping adds).
fn decoded(id: i64, epoch_ms: i64) -> serde_json::Value {
    let origin = (id >> 22).wrapping_add(epoch_ms);
    let worker = (id >> 12) ^ (id >> 22 << 10);
    let sequence = id ^ (id >> 12 << 12);
    serde_json::json!({
        "timestamp": format!("{origin}({})", local_time(origin)),
        "workerId": worker.to_string(),
        "sequenceId": sequence.to_string(),
    })
}

/// `yyyy-MM-dd HH:mm:ss.SSS` in the local time zone, as Java's `SimpleDateFormat` writes it.
fn local_time(ms: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_millis_opt(ms) {
        chrono::LocalResult::Single(t) | chrono::LocalResult::Ambiguous(t, _) => {
            t.format("%Y-%m-%d %H:%M:%S%.3f").to_string()
        }
        chrono::LocalResult::None => String::new(),
    }
}

/// What Java's `Long.parseLong` accepts: an optional sign and decimal digits within `long`,
/// ASCII digits only (Java also takes other scripts' decimal digits; docs/migrate.md says why
/// not here).
fn parse_java_long(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok()
}

/// The first value of `name` in a query string, percent-decoded (lossy where Leaf's container
/// would be: the value only feeds a number parse).
fn first_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_encoding::percent_decode_str(k).decode_utf8_lossy();
        (key == name).then(|| {
            let v = v.replace('+', " ");
            percent_encoding::percent_decode_str(&v)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_is_leafs_long_arithmetic() {
        // (ts - twepoch) << 22 | worker << 12 | seq, from Leaf's SnowflakeIDGenImpl.
        let id: i64 = 123_456_789 << 22 | 513 << 12 | 4095;
        let v = decoded(id, 1_288_834_974_657);
        assert_eq!(v["workerId"], "513");
        assert_eq!(v["sequenceId"], "4095");
        let ts = v["timestamp"].as_str().unwrap();
        assert!(ts.starts_with("1288958431446("), "{ts}");
        assert_eq!(
            ts.len(),
            "1288958431446(2010-11-05 12:00:31.446)".len(),
            "{ts}"
        );
        // Negative input: Leaf shifts arithmetically and XORs, and so do we.
        let v = decoded(-1, 1_288_834_974_657);
        assert_eq!(v["workerId"], "1023");
        assert_eq!(v["sequenceId"], "4095");
        assert!(
            v["timestamp"]
                .as_str()
                .unwrap()
                .starts_with("1288834974656(")
        );
    }

    #[test]
    fn only_what_java_parses_is_a_long() {
        assert_eq!(parse_java_long("+42"), Some(42));
        assert_eq!(parse_java_long("-9223372036854775808"), Some(i64::MIN));
        for bad in ["", "-", "9223372036854775808", "0x10", " 1", "1e3"] {
            assert_eq!(parse_java_long(bad), None, "{bad:?}");
        }
        // Chosen (docs/migrate.md): ASCII digits only, where Java also reads other scripts'.
        assert_eq!(parse_java_long("\u{ff11}\u{ff12}"), None);
        assert_eq!(parse_java_long("007"), Some(7));
        assert_eq!(
            first_param(Some("a=1&snowflakeId=%2B7&snowflakeId=8"), "snowflakeId"),
            Some("+7".into())
        );
    }
}
