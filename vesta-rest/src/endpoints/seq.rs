//! Per-key sequences (`[seq] db`): `GET /seq/{key}` (the key's next number as text, like
//! `/genid`), `?count=N` (N numbers, the last one answered), `?format=json`
//! (`{"key":"…","first":"…","last":"…"}`, numbers as strings like `/genids`), and
//! `GET /seq/{key}/current` (the current number, not moved). The key is the path segment,
//! percent-decoded: a decimal `u64`, or UTF-8 text of 1-128 bytes (a `/` in a key is sent as
//! `%2F`, a `%` as `%25`; a `%` without two hex digits is refused). From the service's seq
//! ops.
//!
//! A key whose section is in memory and covers the call answers at once; otherwise the request
//! waits for the table (never on a worker), at most `seq.store_timeout_ms`. Errors: no
//! `[seq] db` → 404, bad key (or escape) or count → 400, the table down or slow → 503 with `Retry-After`.
//! In a sequences cluster (`[seq] cluster`), a key another member serves → 307 with
//! `Location: //HOST:PORT/seq/...` (that member, same scheme, same query); a key between
//! members → 503 with `Retry-After`.

use std::borrow::Cow;

use hyper::Response;
use vesta_core::Clock;
use vesta_service::OpError;
use vesta_service::ops::{SeqNumbers, Turn};

use crate::body::Body;
use crate::ctx::{Ctx, Reply};
use crate::error::ApiError;
use crate::query::{Query, parse_count_text};
use crate::response;

/// `GET /seq/{key}[?count=N][&format=json]`.
pub fn next<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let raw = cx.param();
    let checked = (|| {
        let service = cx.service();
        service.seq_on()?;
        let q = Query::parse(cx.query, cx.documented_path(), &["count", "format"])?;
        // The op enforces the range (one rule, one text on every transport).
        let count = match q.get("count") {
            Some(text) => parse_count_text(text, service.max_seq_batch())?,
            None => 1,
        };
        let json = json(&q)?;
        Ok::<_, ApiError>((decode(raw)?, count, json))
    })();
    let (key, count, json) = match checked {
        Ok(c) => c,
        Err(e) => return cx.now(Err(e)),
    };
    let shown = json.then(|| String::from_utf8_lossy(&key).into_owned());
    let target = Target::of(&cx);
    let numbers = cx.service().seq_next(&key, count, Turn::Now);
    cx.answer(numbers, move |r| write(target.moved(r), shown.as_deref()))
}

/// `GET /seq/{key}/current[?format=json]`.
pub fn current<C: Clock + 'static>(cx: Ctx<'_, C>) -> Reply {
    let raw = cx.param();
    let checked = (|| {
        cx.service().seq_on()?;
        let q = Query::parse(cx.query, cx.documented_path(), &["format"])?;
        Ok::<_, ApiError>((decode(raw)?, json(&q)?))
    })();
    let (key, json) = match checked {
        Ok(c) => c,
        Err(e) => return cx.now(Err(e)),
    };
    let shown = json.then(|| String::from_utf8_lossy(&key).into_owned());
    let target = Target::of(&cx);
    let answer = cx.service().seq_current(&key, Turn::Now);
    let reply = move |n: Result<u64, OpError>| -> Result<Response<Body>, ApiError> {
        let n = target.moved(n)?;
        Ok(match &shown {
            Some(key) => response::json(
                serde_json::json!({ "key": key, "current": n.to_string() }).to_string(),
            ),
            None => response::decimal(n),
        })
    };
    cx.answer(answer, reply)
}

/// The request's path and query, for a 307 to the member that serves the key.
struct Target(String);

impl Target {
    fn of<C: Clock + 'static>(cx: &Ctx<'_, C>) -> Target {
        Target(match cx.query {
            Some(q) => format!("{}?{q}", cx.path),
            None => cx.path.to_owned(),
        })
    }

    /// A move to another member as a 307 to it; anything else as it is.
    fn moved<T>(&self, r: Result<T, OpError>) -> Result<T, ApiError> {
        r.map_err(|e| match e.owner() {
            Some(owner) if !owner.rest.is_empty() => {
                ApiError::moved(e.message(), format!("//{}{}", owner.rest, self.0))
            }
            _ => ApiError::from(e),
        })
    }
}

/// `format`: absent or `text` (a number as text), or `json`.
fn json(q: &Query<'_>) -> Result<bool, ApiError> {
    match q.get("format") {
        None | Some("text") => Ok(false),
        Some("json") => Ok(true),
        Some(other) => Err(ApiError::invalid_param(
            "format",
            format_args!(
                "`{}` is not a format here: use text or json",
                crate::query::shorten(other)
            ),
        )),
    }
}

/// The answer: the last number as text, or the call as JSON.
fn write(n: Result<SeqNumbers, ApiError>, key: Option<&str>) -> Result<Response<Body>, ApiError> {
    let n = n?;
    Ok(match key {
        Some(key) => response::json(
            serde_json::json!({
                "key": key,
                "first": n.first().to_string(),
                "last": n.last.to_string(),
            })
            .to_string(),
        ),
        None => response::decimal(n.last),
    })
}

/// The key as written in the path, percent-decoded to bytes (the sequences check the key
/// rule, UTF-8 included: a key that is not is refused, never replaced). A `%` not followed by
/// two hex digits is refused naming it, never kept as text: `/seq/%zz` is a broken escape,
/// not the key `%zz` (which is sent as `%25zz`).
fn decode(raw: &str) -> Result<Cow<'_, [u8]>, ApiError> {
    let bytes = raw.as_bytes();
    for (at, _) in raw.match_indices('%') {
        let escape = bytes.get(at + 1..at + 3);
        if !escape.is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) {
            let shown: String = raw[at..].chars().take(3).collect();
            return Err(ApiError::invalid_param(
                "key",
                format_args!(
                    "`{shown}` (byte {at} of the key as sent) is not a percent-escape: a `%` \
                     takes two hex digits; a `%` in a key is sent as `%25`"
                ),
            ));
        }
    }
    Ok(percent_encoding::percent_decode_str(raw).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_percent_decoded_and_a_broken_escape_is_refused_naming_it() {
        assert_eq!(&*decode("chat%3A7").unwrap(), b"chat:7");
        assert_eq!(&*decode("100%25").unwrap(), b"100%");
        assert_eq!(
            &*decode("%FF").unwrap(),
            [0xff],
            "the key rule refuses it, not this"
        );
        assert_eq!(&*decode("42").unwrap(), b"42");
        for (raw, shown, at) in [
            ("%zz", "`%zz`", 0),
            ("%4", "`%4`", 0),
            ("a%", "`%`", 1),
            ("ok%41%g1", "`%g1`", 5),
            ("%%41", "`%%4`", 0),
        ] {
            let e = decode(raw).unwrap_err();
            assert_eq!(e.status(), 400, "{raw}");
            assert!(e.message.starts_with("invalid parameter key: "), "{e}");
            assert!(
                e.message.contains(shown) && e.message.contains(&format!("byte {at} ")),
                "{raw}: {e}"
            );
            assert!(e.message.contains("%25"), "{e}");
        }
    }
}
