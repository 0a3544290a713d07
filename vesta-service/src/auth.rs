//! The bearer token both servers ask for when `[server] auth_token_file` is set: read once at
//! start (one word in a file, never inline in the config), and matched against a request's
//! `Authorization` header by one function, the REST server's for every endpoint but `/healthz`
//! and `/metrics`, the TCP server's metrics listener's for its console.
//!
//! Matching follows RFC 9110: the scheme `Bearer` in any case, then one or more spaces, then
//! the token. The token is compared through a keyed digest, so how long a refusal takes tells
//! neither where a guess differs nor how long the token is.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::sync::Arc;

use crate::error::ConfigError;

/// What a refused request is told (the REST server's 401 and the metrics listener's alike).
pub const NEEDS_TOKEN: &str =
    "this server needs Authorization: Bearer <token> ([server] auth_token_file)";

/// The token requests must carry as `Authorization: Bearer TOKEN`; cheap to clone.
#[derive(Clone)]
pub struct BearerToken(Arc<Inner>);

struct Inner {
    token: Box<[u8]>,
    /// A key drawn at random for this process, so no client can aim at a digest.
    keys: RandomState,
    /// The token's digest under `keys`, taken once.
    digest: u64,
}

impl fmt::Debug for BearerToken {
    /// Never the token itself: a config dump or a log line must not leak it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// A token of these bytes (already checked: one non-empty word).
    pub fn new(token: &[u8]) -> Self {
        let keys = RandomState::new();
        let digest = keys.hash_one(token);
        BearerToken(Arc::new(Inner {
            token: token.into(),
            keys,
            digest,
        }))
    }

    /// The token in `path` (`[server] auth_token_file`; surrounding whitespace trimmed), or
    /// `None` when unset. An unreadable file, or one that is not one word, is an error naming
    /// the key and the file.
    pub fn from_file(path: Option<&Path>) -> Result<Option<Self>, ConfigError> {
        let Some(path) = path else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::Inconsistent(format!(
                "server.auth_token_file {}: cannot read it: {e}",
                path.display()
            ))
        })?;
        let token = text.trim();
        if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ConfigError::Inconsistent(format!(
                "server.auth_token_file {}: the token must be one non-empty word (no spaces)",
                path.display()
            )));
        }
        Ok(Some(Self::new(token.as_bytes())))
    }

    /// True if `authorization` (the header's value, if any) is `Bearer` in any case, one or
    /// more spaces and this token. The offered token is digested whole and only the digests
    /// are compared (the bytes too once they agree, against a collision), so the time taken
    /// depends on the offered text alone.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some((scheme, rest)) = value.split_at_checked(6) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
            return false;
        }
        let given = rest.trim_ascii();
        let inner = &*self.0;
        inner.keys.hash_one(given) == inner.digest && given == &*inner.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(token: &BearerToken, header: &str) -> bool {
        token.admits(Some(header.as_bytes()))
    }

    #[test]
    fn the_scheme_is_read_in_any_case_with_its_spaces() {
        let t = BearerToken::new(b"s3cret-token");
        for ok in [
            "Bearer s3cret-token",
            "bearer s3cret-token",
            "BEARER s3cret-token",
            "bEaReR s3cret-token",
            "Bearer   s3cret-token",
            "Bearer s3cret-token ",
        ] {
            assert!(admits(&t, ok), "{ok:?}");
        }
        for refused in [
            "Bearer",
            "Bearer ",
            "Bearers3cret-token",
            "Bearer\ts3cret-token",
            "Basic s3cret-token",
            "Bearerx s3cret-token",
            "s3cret-token",
            "",
        ] {
            assert!(!admits(&t, refused), "{refused:?}");
        }
        assert!(!t.admits(None));
    }

    #[test]
    fn only_the_whole_token_is_admitted() {
        let t = BearerToken::new(b"s3cret-token");
        for wrong in [
            "Bearer s3cret-toke",
            "Bearer s3cret-token2",
            "Bearer S3CRET-TOKEN",
            "Bearer s3cret-tokeN",
            "Bearer x",
            "Bearer s3cret-token s3cret-token",
        ] {
            assert!(!admits(&t, wrong), "{wrong:?}");
        }
        // A clone shares the token and its key.
        assert!(admits(&t.clone(), "Bearer s3cret-token"));
        assert_eq!(format!("{t:?}"), "BearerToken(..)");
    }

    #[test]
    fn the_file_holds_one_word() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        assert!(BearerToken::from_file(None).unwrap().is_none());
        std::fs::write(&file, "  abc-123\n").unwrap();
        let t = BearerToken::from_file(Some(&file)).unwrap().unwrap();
        assert!(admits(&t, "Bearer abc-123"));
        for bad in ["", "\n", "two words"] {
            std::fs::write(&file, bad).unwrap();
            let err = BearerToken::from_file(Some(&file)).unwrap_err().to_string();
            assert!(
                err.contains("server.auth_token_file") && err.contains("one non-empty word"),
                "{bad:?}: {err}"
            );
        }
        let err = BearerToken::from_file(Some(&dir.path().join("none")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot read it"), "{err}");
    }
}
