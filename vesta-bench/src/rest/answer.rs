//! Reading vesta-rest's answers: `/genid`'s decimal ID, `/genids`' `{"ids": ["…", …]}`,
//! `/seq/{key}`'s number and `?format=json`'s `{"key", "first", "last"}`, the `/healthz`
//! description and the `{"error": "…"}` sentence of a refusal.

use serde::Deserialize;

/// What `/healthz` says about the server.
#[derive(Debug, Deserialize)]
pub(crate) struct Health {
    /// The machine ID.
    pub machine: u64,
    /// The layout's name (absent from servers before layouts were data: Vesta's).
    #[serde(default)]
    pub layout: String,
    /// Vesta's type code (Vesta's layouts only).
    #[serde(rename = "type", default)]
    pub id_type: Option<u64>,
    /// The lease state.
    pub lease: String,
    /// Segment mode is on (a `segments` object is present).
    #[serde(default, deserialize_with = "present")]
    pub segments: bool,
    /// Per-key sequences are on (a `seq` object is present).
    #[serde(default, deserialize_with = "present")]
    pub seq: bool,
    /// Every machine ID of a server of several (`machines`, absent for one).
    #[serde(default)]
    pub machines: Vec<HealthMachine>,
}

/// One of the machine IDs `/healthz` lists.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct HealthMachine {
    pub machine: u64,
}

/// True for any value of a field that is present.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

/// Parses a `/healthz` body.
pub(crate) fn health(body: &[u8]) -> Result<Health, String> {
    serde_json::from_slice(body)
        .map_err(|e| format!("/healthz is not vesta's ({e}): {}", text(body)))
}

/// The IDs of a 200 answer: one for `/genid` (`batch` `None`), exactly `batch` for `/genids`.
/// Calls `each` on every ID in order; returns how many there were.
pub(crate) fn ids(
    body: &[u8],
    batch: Option<u32>,
    mut each: impl FnMut(u64),
) -> Result<u64, String> {
    match batch {
        None => {
            let id = std::str::from_utf8(body)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .ok_or_else(|| format!("the answer is not an ID: {}", text(body)))?;
            each(id);
            Ok(1)
        }
        Some(count) => {
            #[derive(Deserialize)]
            struct Ids<'a> {
                #[serde(borrow)]
                ids: Vec<&'a str>,
            }
            let parsed: Ids<'_> = serde_json::from_slice(body)
                .map_err(|e| format!("the answer is not a list of IDs ({e}): {}", text(body)))?;
            if parsed.ids.len() != count as usize {
                return Err(format!("asked for {count} IDs, got {}", parsed.ids.len()));
            }
            for s in parsed.ids {
                each(s.parse().map_err(|_| format!("`{s}` is not an ID"))?);
            }
            Ok(u64::from(count))
        }
    }
}

/// The numbers of a 200 answer to `GET /seq/{key}`: one number (`batch` `None`: the body is
/// the number as text), or exactly `batch` (`?count=N&format=json`: `first`..=`last` of `key`).
/// Returns how many.
pub(crate) fn seq(body: &[u8], key: &str, batch: Option<u32>) -> Result<u64, String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| format!("`{s}` is not a sequence number"))
    };
    let Some(count) = batch else {
        number(std::str::from_utf8(body).unwrap_or_default())
            .map_err(|_| format!("the answer is not a sequence number: {}", text(body)))?;
        return Ok(1);
    };
    #[derive(Deserialize)]
    struct Numbers<'a> {
        key: &'a str,
        first: &'a str,
        last: &'a str,
    }
    let n: Numbers<'_> = serde_json::from_slice(body)
        .map_err(|e| format!("the answer is not a key's numbers ({e}): {}", text(body)))?;
    if n.key != key {
        return Err(format!("asked for key {key}, got key {}", n.key));
    }
    let (first, last) = (number(n.first)?, number(n.last)?);
    let got = last.checked_sub(first).map(|d| d + 1);
    if got != Some(u64::from(count)) {
        return Err(format!("asked for {count} numbers, got {first}..={last}"));
    }
    Ok(u64::from(count))
}

/// A refusal's sentence: the `error` of a JSON body, else the body's text (shortened).
pub(crate) fn error_sentence(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: String,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => e.error,
        Err(_) => text(body),
    }
}

/// A body as text for a message: lossy UTF-8, at most 200 characters.
fn text(body: &[u8]) -> String {
    let t = String::from_utf8_lossy(body);
    let t = t.trim();
    match t.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &t[..end]),
        None if t.is_empty() => "(empty body)".to_owned(),
        None => t.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(body: &str, batch: Option<u32>) -> Result<Vec<u64>, String> {
        let mut out = Vec::new();
        let n = ids(body.as_bytes(), batch, |id| out.push(id))?;
        assert_eq!(n, out.len() as u64);
        Ok(out)
    }

    #[test]
    fn answers_are_read_as_ids() {
        assert_eq!(
            collect("2708764574982603676", None),
            Ok(vec![2708764574982603676])
        );
        assert_eq!(
            collect(r#"{"ids":["5","18446744073709551615"]}"#, Some(2)),
            Ok(vec![5, u64::MAX])
        );
        assert_eq!(
            collect(r#"{"ids":["5"]}"#, Some(2)),
            Err("asked for 2 IDs, got 1".into())
        );
        assert_eq!(
            collect("hello", None),
            Err("the answer is not an ID: hello".into())
        );
        assert_eq!(
            collect(r#"{"ids":["x"]}"#, Some(1)),
            Err("`x` is not an ID".into())
        );
        assert!(collect("", Some(1)).unwrap_err().contains("(empty body)"));
    }

    #[test]
    fn seq_answers_are_checked_for_their_count() {
        assert_eq!(seq(b"17", "3", None), Ok(1));
        assert_eq!(
            seq(b"0", "3", None),
            Err("the answer is not a sequence number: 0".into())
        );
        let json = |k: &str, f: &str, l: &str| {
            format!(r#"{{"key":"{k}","first":"{f}","last":"{l}"}}"#).into_bytes()
        };
        assert_eq!(seq(&json("3", "11", "20"), "3", Some(10)), Ok(10));
        assert_eq!(
            seq(&json("3", "11", "19"), "3", Some(10)),
            Err("asked for 10 numbers, got 11..=19".into())
        );
        assert_eq!(
            seq(&json("3", "20", "11"), "3", Some(10)),
            Err("asked for 10 numbers, got 20..=11".into())
        );
        assert_eq!(
            seq(&json("4", "11", "20"), "3", Some(10)),
            Err("asked for key 3, got key 4".into())
        );
        assert!(
            seq(b"20", "3", Some(10))
                .unwrap_err()
                .starts_with("the answer is not a key's numbers")
        );
    }

    #[test]
    fn health_and_refusals_are_read() {
        let h = health(br#"{"genMethod":2,"lease":"static","machine":924,"status":"ok","type":1}"#)
            .unwrap();
        assert_eq!(
            (h.machine, h.id_type, h.lease.as_str()),
            (924, Some(1), "static")
        );
        assert!(!h.segments && !h.seq);
        let h =
            health(br#"{"lease":"static","machine":924,"type":0,"segments":{"tags":[]}}"#).unwrap();
        assert!(h.segments);
        let h = health(br#"{"lease":"static","machine":924,"seq":{"sections":0}}"#).unwrap();
        assert!(h.seq && !h.segments);
        assert!(
            health(b"42")
                .unwrap_err()
                .starts_with("/healthz is not vesta's")
        );
        assert_eq!(
            error_sentence(br#"{"error":"not issuing: lease lost"}"#),
            "not issuing: lease lost"
        );
        assert_eq!(error_sentence(b"Not Found"), "Not Found");
        assert_eq!(
            error_sentence("é".repeat(300).as_bytes()).chars().count(),
            201
        );
    }
}
