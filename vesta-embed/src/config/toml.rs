//! TOML: a file or text into a config section, every error naming the file, the key and the
//! line, and a key that moved to another section named with where it lives now.

use std::path::Path;

use serde::Deserialize;

use super::ConfigError;

/// Reads a TOML file into `T`, naming the file in every error.
#[cfg(feature = "toml")]
pub fn load_toml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Read {
        path: path.to_owned(),
        cause,
    })?;
    parse_toml(&text).map_err(|e| match e {
        ConfigError::Parse { message, .. } => ConfigError::Parse {
            path: Some(path.to_owned()),
            message,
        },
        other => other,
    })
}

/// Parses TOML text into `T`.
#[cfg(feature = "toml")]
pub fn parse_toml<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: None,
        message: e.message().to_owned() + &moved_hint(e.message()) + &location(text, e.span()),
    })
}

/// For an unknown key that moved to another section: where it lives now.
#[cfg(feature = "toml")]
fn moved_hint(message: &str) -> String {
    MOVED_KEYS
        .iter()
        .find(|(key, _)| message.starts_with(&format!("unknown field `{key}`")))
        .map(|(key, section)| format!(" ({key} moved to {section}: see CHANGELOG.md)"))
        .unwrap_or_default()
}

#[cfg(feature = "toml")]
fn location(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(span) = span else {
        return String::new();
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    format!(" (line {line})")
}

/// Keys that moved to another section, named in the error a stale config gets
/// (see CHANGELOG.md).
#[cfg(feature = "toml")]
const MOVED_KEYS: &[(&str, &str)] = &[("start_guard_max_wait_ms", "[machine]")];
