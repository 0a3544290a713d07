//! `[segment]`: where segments come from and how they are buffered. One serde type that the
//! servers' config files embed as `[segment]` and the CLI reads from `--config`. Unknown keys
//! are errors naming the key; every value is range-checked while parsing, naming the key.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::step::StepPolicy;
use crate::url::{DbUrl, redact};

/// The database the CLI uses when neither `--db` nor `[segment] db` is given.
pub const DEFAULT_CLI_DB: &str = "sqlite://vesta-segments.db";

/// The `[segment]` section. `Default` is Leaf's behaviour: prefetch at 10 %, adaptive step
/// (double under 15 min, halve over 30 min, cap 1,000,000), with no database configured.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawSection")]
pub struct SegmentSection {
    /// `sqlite://PATH`, `postgres://USER[:PASS]@HOST:PORT/DB` or
    /// `mysql://USER[:PASS]@HOST:PORT/DB`; none turns segment mode off in the servers.
    pub db: Option<String>,
    /// Fetch the next segment in the background once this percentage of the current one is
    /// issued (Leaf: 10).
    pub prefetch_percent: u32,
    /// How long a caller may wait when both segments are used up and a fetch is under way.
    pub wait_ms: u64,
    /// Bound on one database round (connect, transaction, commit); past it the fetch counts as
    /// failed and whatever it may have reserved is left as a gap.
    pub fetch_timeout_ms: u64,
    /// Leaf's adaptive step: on unless `false`; off takes the table's `step` every time.
    pub adaptive_step: bool,
    /// The adaptive step never doubles past this (Leaf: 1,000,000).
    pub max_step: u32,
    /// A segment fetched sooner than this after the previous one doubles the step (Leaf: 900).
    pub grow_below_s: u64,
    /// A segment fetched this long or longer after the previous one halves the step, never
    /// below the table's `step` (Leaf: 1800).
    pub shrink_above_s: u64,
    /// The restore guard's file: each tag's floor (where this process's numbers end), so a
    /// `leaf_alloc` restored from a backup or failed over to a lagging replica is refused
    /// instead of issuing numbers again. One file per process; none keeps the guard in memory
    /// only (it then covers this process's lifetime, not a restart).
    pub state_file: Option<PathBuf>,
}

impl Default for SegmentSection {
    fn default() -> Self {
        SegmentSection {
            db: None,
            prefetch_percent: 10,
            wait_ms: 1_000,
            fetch_timeout_ms: 5_000,
            adaptive_step: true,
            max_step: 1_000_000,
            grow_below_s: 15 * 60,
            shrink_above_s: 30 * 60,
            state_file: None,
        }
    }
}

impl fmt::Debug for SegmentSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentSection")
            .field("db", &self.db.as_deref().map(redact))
            .field("prefetch_percent", &self.prefetch_percent)
            .field("wait_ms", &self.wait_ms)
            .field("fetch_timeout_ms", &self.fetch_timeout_ms)
            .field("adaptive_step", &self.adaptive_step)
            .field("max_step", &self.max_step)
            .field("grow_below_s", &self.grow_below_s)
            .field("shrink_above_s", &self.shrink_above_s)
            .field("state_file", &self.state_file)
            .finish()
    }
}

/// Allowed range of each number, checked at parse time and by [`SegmentSection::validate`].
mod limits {
    pub const PREFETCH_PERCENT: (u64, u64) = (0, 99);
    pub const WAIT_MS: (u64, u64) = (0, 60_000);
    pub const FETCH_TIMEOUT_MS: (u64, u64) = (100, 600_000);
    pub const MAX_STEP: (u64, u64) = (1, i32::MAX as u64);
    pub const GROW_BELOW_S: (u64, u64) = (1, 7 * 86_400);
    pub const SHRINK_ABOVE_S: (u64, u64) = (1, 30 * 86_400);
}

impl SegmentSection {
    /// Checks every value; the error names the key and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            "segment.prefetch_percent",
            self.prefetch_percent.into(),
            limits::PREFETCH_PERCENT,
        )?;
        check("segment.wait_ms", self.wait_ms, limits::WAIT_MS)?;
        check(
            "segment.fetch_timeout_ms",
            self.fetch_timeout_ms,
            limits::FETCH_TIMEOUT_MS,
        )?;
        check("segment.max_step", self.max_step.into(), limits::MAX_STEP)?;
        check(
            "segment.grow_below_s",
            self.grow_below_s,
            limits::GROW_BELOW_S,
        )?;
        check(
            "segment.shrink_above_s",
            self.shrink_above_s,
            limits::SHRINK_ABOVE_S,
        )?;
        if self.shrink_above_s < self.grow_below_s {
            return Err(ConfigError::Inconsistent(format!(
                "segment.shrink_above_s ({}) must not be below segment.grow_below_s ({})",
                self.shrink_above_s, self.grow_below_s
            )));
        }
        if let Some(db) = &self.db {
            DbUrl::parse(db)?;
        }
        Ok(())
    }

    /// The configured database URL, parsed; [`ConfigError::NoDatabase`] when unset.
    pub fn db_url(&self) -> Result<DbUrl, ConfigError> {
        let db = self.db.as_deref().ok_or(ConfigError::NoDatabase)?;
        Ok(DbUrl::parse(db)?)
    }

    /// The step policy these settings describe.
    pub fn step_policy(&self) -> StepPolicy {
        StepPolicy {
            adaptive: self.adaptive_step,
            max_step: self.max_step,
            grow_below: Duration::from_secs(self.grow_below_s),
            shrink_above: Duration::from_secs(self.shrink_above_s),
        }
    }

    /// The wait limit as a duration.
    pub fn wait(&self) -> Duration {
        Duration::from_millis(self.wait_ms)
    }

    /// The fetch timeout as a duration.
    pub fn fetch_timeout(&self) -> Duration {
        Duration::from_millis(self.fetch_timeout_ms)
    }
}

/// `value` of the setting `key` within `min..=max`, or the error naming both (shared with the
/// `[seq]` section's checks in vesta-seq).
pub fn check(key: &'static str, value: u64, (min, max): (u64, u64)) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            key,
            value,
            min,
            max,
        })
    }
}

/// The section as written, before the range checks.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawSection {
    db: Option<String>,
    prefetch_percent: u32,
    wait_ms: u64,
    fetch_timeout_ms: u64,
    adaptive_step: bool,
    max_step: u32,
    grow_below_s: u64,
    shrink_above_s: u64,
    state_file: Option<PathBuf>,
}

impl Default for RawSection {
    fn default() -> Self {
        let d = SegmentSection::default();
        RawSection {
            db: d.db,
            prefetch_percent: d.prefetch_percent,
            wait_ms: d.wait_ms,
            fetch_timeout_ms: d.fetch_timeout_ms,
            adaptive_step: d.adaptive_step,
            max_step: d.max_step,
            grow_below_s: d.grow_below_s,
            shrink_above_s: d.shrink_above_s,
            state_file: d.state_file,
        }
    }
}

impl TryFrom<RawSection> for SegmentSection {
    type Error = ConfigError;

    fn try_from(r: RawSection) -> Result<Self, ConfigError> {
        let section = SegmentSection {
            db: r.db,
            prefetch_percent: r.prefetch_percent,
            wait_ms: r.wait_ms,
            fetch_timeout_ms: r.fetch_timeout_ms,
            adaptive_step: r.adaptive_step,
            max_step: r.max_step,
            grow_below_s: r.grow_below_s,
            shrink_above_s: r.shrink_above_s,
            state_file: r.state_file,
        };
        section.validate()?;
        Ok(section)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        segment: SegmentSection,
    }

    fn parse(text: &str) -> Result<SegmentSection, String> {
        toml::from_str::<File>(text)
            .map(|f| f.segment)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn empty_section_is_the_default() {
        assert_eq!(parse("").unwrap(), SegmentSection::default());
        assert_eq!(parse("[segment]\n").unwrap(), SegmentSection::default());
        SegmentSection::default().validate().unwrap();
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn every_key_parses() {
        let s = parse(
            "[segment]\ndb = \"postgres://u:pw@127.0.0.1:5432/leaf\"\nprefetch_percent = 20\n\
             wait_ms = 50\nfetch_timeout_ms = 2000\nadaptive_step = false\nmax_step = 5000\n\
             grow_below_s = 60\nshrink_above_s = 120\nstate_file = \"/var/lib/vesta/s.state\"\n",
        )
        .unwrap();
        assert_eq!(s.prefetch_percent, 20);
        assert_eq!(
            s.state_file.as_deref(),
            Some(std::path::Path::new("/var/lib/vesta/s.state"))
        );
        assert!(!s.step_policy().adaptive);
        assert_eq!(s.step_policy().shrink_above, Duration::from_secs(120));
        assert_eq!(
            s.db_url().unwrap().redacted(),
            "postgres://u:***@127.0.0.1:5432/leaf"
        );
        assert!(!format!("{s:?}").contains("pw"), "Debug hides the password");
    }

    #[test]
    fn unknown_keys_and_ranges_name_the_key() {
        let err = parse("[segment]\nprefetch = 10\n").unwrap_err();
        assert!(err.contains("prefetch"), "{err}");
        let err = parse("[segment]\nprefetch_percent = 100\n").unwrap_err();
        assert!(
            err.contains("segment.prefetch_percent 100 is out of range: allowed 0..=99"),
            "{err}"
        );
        let err = parse("[segment]\nmax_step = 0\n").unwrap_err();
        assert!(err.contains("segment.max_step 0"), "{err}");
        let err = parse("[segment]\nfetch_timeout_ms = 1\n").unwrap_err();
        assert!(err.contains("segment.fetch_timeout_ms 1"), "{err}");
        let err = parse("[segment]\ngrow_below_s = 100\nshrink_above_s = 50\n").unwrap_err();
        assert!(err.contains("segment.shrink_above_s (50)"), "{err}");
        let err = parse("[segment]\ndb = \"postgres://u:pw@h/db\"\n").unwrap_err();
        assert!(
            err.contains("segment.db") && err.contains("port is missing"),
            "{err}"
        );
        assert!(!err.contains("pw@"), "{err}");
    }

    #[test]
    fn no_db_is_an_error_only_where_one_is_needed() {
        assert!(matches!(
            SegmentSection::default().db_url(),
            Err(ConfigError::NoDatabase)
        ));
    }
}
