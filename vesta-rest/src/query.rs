//! The query string of a request: the shared parser of `vesta_service::query` (the console's
//! forms use it too), whose refusals are 400s here, and the `count` parameter of the batch
//! endpoints.

pub use vesta_service::query::{BadRequest, Query, shorten};

use crate::error::ApiError;

/// A refused parameter is a 400 with the parser's sentence.
impl From<BadRequest> for ApiError {
    fn from(e: BadRequest) -> Self {
        ApiError::bad_request(e.message)
    }
}

/// `count` as a `u64` in plain decimal digits (no sign, as every integer parameter), for an op
/// that takes 1..=`max` and enforces it itself (the sequences' `seq_next`): only text that is
/// no such number is refused here, naming the parameter and the range.
pub(crate) fn parse_count_text(text: &str, max: u64) -> Result<u64, ApiError> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let numeric = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    match text.parse::<u64>() {
        Ok(n) if numeric => Ok(n),
        _ if numeric => Err(ApiError::invalid_param(
            "count",
            format_args!("count {} is out of range: allowed 1..={max}", shorten(text)),
        )),
        _ => Err(ApiError::invalid_param(
            "count",
            format_args!("`{}` is not an integer: expected 1..={max}", shorten(text)),
        )),
    }
}

/// `count` as 1..=max, checked before the endpoint reserves room for its answer (`/genids`,
/// `/segments/{tag}`); the error names the parameter and the allowed range, in the words of
/// the ops' own check.
pub(crate) fn parse_count(text: &str, max: u64) -> Result<u64, ApiError> {
    let n = parse_count_text(text, max)?;
    if (1..=max).contains(&n) {
        Ok(n)
    } else {
        Err(vesta_service::OpError::count_out_of_range(n, max).into())
    }
}

#[cfg(test)]
mod tests {
    use crate::query::parse_count;

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
            (
                "+5",
                "invalid parameter count: `+5` is not an integer: expected 1..=10",
            ),
        ] {
            assert_eq!(parse_count(bad, 10).unwrap_err().message, msg);
        }
    }
}
