//! The call's deadline, from the `grpc-timeout` header its client sends (gRPC over HTTP/2:
//! at most 8 digits and a unit, `H` `M` `S` `m` `u` `n`). A waiting op ends at the deadline
//! without taking anything: the client has given up, so no ID is issued that nobody receives.

use std::time::Duration;

use tokio::time::Instant;
use tonic::metadata::MetadataMap;

/// When the call's client stops waiting, if it said; a malformed value is no deadline (as in
/// gRPC's own servers), never a refusal.
pub fn of(metadata: &MetadataMap) -> Option<Instant> {
    let text = metadata.get("grpc-timeout")?.to_str().ok()?;
    Some(Instant::now() + parse(text)?)
}

/// `grpc-timeout`'s value as a duration.
fn parse(text: &str) -> Option<Duration> {
    if !text.is_ascii() {
        return None;
    }
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::parse;
    use std::time::Duration;

    #[test]
    fn every_unit_and_no_malformed_value() {
        assert_eq!(parse("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse("99999999S"), Some(Duration::from_secs(99_999_999)));
        assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse("1n"), Some(Duration::from_nanos(1)));
        for bad in [
            "",
            "m",
            "100",
            "123456789S",
            "1x",
            "-1S",
            "1.5S",
            "１S",
            "1é",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
