//! The query string of a request, decoded and checked against the parameters an endpoint
//! accepts (the REST server's endpoints and the console's forms alike): unknown or repeated parameters are rejected, so a typo such as `machin=5` is a 400
//! naming it instead of a silently ignored value. Values are taken literally: one with spaces
//! around it is refused rather than trimmed.

use std::borrow::Cow;

/// A request whose parameters were refused: the one sentence the client sees, naming the
/// parameter at fault (the REST server answers it as a 400, the console shows it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadRequest {
    /// The sentence.
    pub message: String,
}

impl BadRequest {
    /// A refusal saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        BadRequest {
            message: message.into(),
        }
    }

    /// A parameter whose value was rejected; `why` usually names the field again.
    pub fn invalid_param(name: &str, why: impl std::fmt::Display) -> Self {
        Self::new(format!("invalid parameter {name}: {why}"))
    }

    /// A required parameter that is absent.
    pub fn missing_param(name: &str) -> Self {
        Self::new(format!("missing required parameter {name}"))
    }
}

/// The decoded parameters of one request.
#[derive(Debug, Default)]
pub struct Query<'a> {
    pairs: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

impl<'a> Query<'a> {
    /// Decodes `raw` (`application/x-www-form-urlencoded`) and accepts only names in `allowed`.
    /// `endpoint` is named in the error for an unknown parameter.
    pub fn parse(
        raw: Option<&'a str>,
        endpoint: &str,
        allowed: &[&str],
    ) -> Result<Self, BadRequest> {
        let mut pairs: Vec<(Cow<'a, str>, Cow<'a, str>)> = Vec::new();
        for part in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            let name = decode(name)?;
            let value = decode(value)?;
            if !allowed.contains(&name.as_ref()) {
                let accepted = if allowed.is_empty() {
                    "no parameters".to_owned()
                } else {
                    allowed.join(", ")
                };
                return Err(BadRequest::new(format!(
                    "unknown parameter {}: {endpoint} accepts {accepted}",
                    shorten(&name)
                )));
            }
            if pairs.iter().any(|(n, _)| *n == name) {
                return Err(BadRequest::new(format!(
                    "parameter {name} is given more than once"
                )));
            }
            if value.trim() != value {
                return Err(BadRequest::invalid_param(
                    &name,
                    format_args!("`{}` has spaces around it", shorten(&value)),
                ));
            }
            pairs.push((name, value));
        }
        Ok(Query { pairs })
    }

    /// The value of `name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_ref())
    }

    /// The value of `name`, or a 400 saying it is missing.
    pub fn required(&self, name: &str) -> Result<&str, BadRequest> {
        self.get(name)
            .ok_or_else(|| BadRequest::missing_param(name))
    }

    /// `name` as an unsigned decimal integer; required.
    pub fn required_u64(&self, name: &str) -> Result<u64, BadRequest> {
        parse_u64(name, self.required(name)?)
    }
}

/// Parses a field value: plain decimal digits only (no sign, no spaces, no hex), so the value a
/// client meant is never guessed.
pub fn parse_u64(name: &str, value: &str) -> Result<u64, BadRequest> {
    if !value.is_empty()
        && value.bytes().all(|b| b.is_ascii_digit())
        && let Ok(v) = value.parse::<u64>()
    {
        return Ok(v);
    }
    Err(BadRequest::invalid_param(
        name,
        format_args!(
            "`{}` is not an unsigned decimal integer up to {}",
            shorten(value),
            u64::MAX
        ),
    ))
}

/// Parses an ID parameter in any form [`vesta_core::parse_id`] accepts.
pub fn parse_id_param(name: &str, text: &str) -> Result<u64, BadRequest> {
    vesta_core::parse_id(text).map_err(|e| {
        let text = shorten(e.text.as_str());
        if e.hex {
            return BadRequest::invalid_param(
                name,
                format_args!(
                    "`{text}` is not an ID: a leading 0x means hex, and it must be followed by 1 \
                     to 16 hex digits (0-9, a-f, either case)"
                ),
            );
        }
        if e.over.is_some() {
            // "is out of range: base62 goes up to ... (18446744073709551615)"
            return BadRequest::invalid_param(name, format_args!("`{text}` {}", e.why()));
        }
        BadRequest::invalid_param(
            name,
            format_args!(
                "`{text}` is not an ID: expected an unsigned decimal up to {}, a negative \
                 decimal down to {} (Java long), 0x hex up to 16 digits, 13 characters of \
                 base32 or 11 of base62",
                u64::MAX,
                i64::MIN
            ),
        )
    })
}

/// At most 64 characters of a rejected value, so an error never echoes a huge input.
pub fn shorten(value: &str) -> Cow<'_, str> {
    const MAX: usize = 64;
    match value.char_indices().nth(MAX) {
        None => Cow::Borrowed(value),
        Some((cut, _)) => Cow::Owned(format!("{}...", &value[..cut])),
    }
}

/// Percent-decoding with `+` as space; borrows when there is nothing to decode.
fn decode(s: &str) -> Result<Cow<'_, str>, BadRequest> {
    if !s.bytes().any(|b| b == b'%' || b == b'+') {
        return Ok(Cow::Borrowed(s));
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| {
                    std::str::from_utf8(h)
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                });
                match hex {
                    Some(b) if bytes[i + 1].is_ascii_hexdigit() => {
                        out.push(b);
                        i += 2;
                    }
                    _ => {
                        return Err(BadRequest::new(format!(
                            "the query string has an invalid percent-escape in `{}`",
                            shorten(s)
                        )));
                    }
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map(Cow::Owned).map_err(|_| {
        BadRequest::new(format!(
            "the query string decodes to text that is not UTF-8 in `{}`",
            shorten(s)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_checks_names() {
        let q = Query::parse(Some("id=0x1f&time=%31+%32"), "/x", &["id", "time"]).unwrap();
        assert_eq!(q.get("id"), Some("0x1f"));
        assert_eq!(q.get("time"), Some("1 2"));
        let e = Query::parse(Some("id=1&ib=2"), "/expid", &["id"]).unwrap_err();
        assert_eq!(e.message, "unknown parameter ib: /expid accepts id");
        let e = Query::parse(Some("id=1&id=2"), "/expid", &["id"]).unwrap_err();
        assert_eq!(e.message, "parameter id is given more than once");
        assert!(Query::parse(Some("id=%zz"), "/x", &["id"]).is_err());
        assert!(Query::parse(Some("id=%+1"), "/x", &["id"]).is_err());
        assert!(Query::parse(Some("id=%4"), "/x", &["id"]).is_err());
        assert!(Query::parse(Some("id=%ff"), "/x", &["id"]).is_err());
        let q = Query::parse(None, "/x", &[]).unwrap();
        assert_eq!(q.get("id"), None);
        let e = Query::parse(Some("id=%201"), "/expid", &["id"]).unwrap_err();
        assert_eq!(e.message, "invalid parameter id: ` 1` has spaces around it");
        assert!(Query::parse(Some("type=max-peak+"), "/x", &["type"]).is_err());
        let e = Query::parse(Some("x"), "/genid", &[]).unwrap_err();
        assert_eq!(
            e.message,
            "unknown parameter x: /genid accepts no parameters"
        );
    }

    /// The unknown name is cut like any rejected value: a 4 KiB name is not echoed whole (the
    /// `rest_query` fuzz target bounds every message).
    #[test]
    fn a_long_unknown_name_is_not_echoed_whole() {
        let name = "a".repeat(4000);
        let raw = format!("{name}=1");
        let e = Query::parse(Some(&raw), "/genids", &["count"]).unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "unknown parameter {}...: /genids accepts count",
                "a".repeat(64)
            )
        );
    }

    #[test]
    fn numbers_are_plain_decimals() {
        assert_eq!(parse_u64("seq", "0"), Ok(0));
        assert_eq!(parse_u64("seq", "18446744073709551615"), Ok(u64::MAX));
        for bad in ["", "-1", "+1", " 1", "0x10", "1.0", "18446744073709551616"] {
            let e = parse_u64("seq", bad).unwrap_err();
            assert!(
                e.message.starts_with("invalid parameter seq: `"),
                "{bad}: {e}"
            );
        }
        let long = "9".repeat(200);
        let e = parse_u64("seq", &long).unwrap_err();
        assert!(e.message.len() < 200, "{e}");
    }

    /// `0x` and 9 (base62's width) or 11 (base32's) hex digits is hex; `0x` and anything but
    /// hex is refused as hex, not with the list of every form.
    #[test]
    fn a_leading_0x_is_hex_in_an_id_parameter() {
        assert_eq!(parse_id_param("id", "0x123456789"), Ok(0x1_2345_6789));
        assert_eq!(parse_id_param("id", "0x12345678901"), Ok(0x123_4567_8901));
        let e = parse_id_param("id", "0xZZZZZZZZZ").unwrap_err();
        assert_eq!(
            e.message,
            "invalid parameter id: `0xZZZZZZZZZ` is not an ID: a leading 0x means hex, and it \
             must be followed by 1 to 16 hex digits (0-9, a-f, either case)"
        );
        let e = parse_id_param("id", "zz").unwrap_err();
        assert!(e.message.contains("13 characters of base32"), "{e}");
    }
}
