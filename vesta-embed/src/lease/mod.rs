//! Machine IDs leased from ZooKeeper: the settings, the pure timing rules of the recipe (start
//! guard, fencing window, marks) and the `vesta zk ls` view. The ZooKeeper calls live in
//! [`zk`], the znode contents in [`znode`], the background thread in `keeper`.
//!
//! The rules in one place (docs/zookeeper.md explains them for operators):
//! - A holder may issue only until `confirmed + window`, where `confirmed` is when the last
//!   successful write to ZooKeeper was *sent* and `window` is two thirds of the negotiated session
//!   timeout, so it stops before the server can expire its session and hand the ID to another.
//! - Every mark it writes is a promise: the end of the last time unit it issued in *or may still
//!   issue in before the write's deadline*. A successor issues only in units that start at or
//!   after the mark, whether the holder shut down cleanly or crashed, so no guess of "one report
//!   interval" is needed.

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use vesta_core::{Epoch, Layout};

use crate::config::{ConfigError, IssuerConfig};

pub(crate) mod keeper;
pub mod zk;
pub mod znode;

pub use zk::{LeaseRow, inspect};

/// Everything the lease needs, checked and converted from [`IssuerConfig`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSettings {
    /// `host:port[,host:port...]`.
    pub connect: String,
    /// Root znode, e.g. `/vesta/default`; claims live under `<root>/machines`, marks under
    /// `<root>/last`.
    pub root: String,
    /// Session timeout asked of the server (it may negotiate another within its bounds).
    pub session_timeout: Duration,
    /// How long the first connection may take before start fails.
    pub connect_timeout: Duration,
    /// How often the mark is written (and with it, the lease confirmed).
    pub report_interval: Duration,
    /// The longest the start guard waits for the clock to pass the mark.
    pub start_guard_max_wait: Duration,
    /// Start from the state file when ZooKeeper is unreachable at start.
    pub start_without_zookeeper: bool,
    /// `user:password` for digest auth; the znodes then get a creator-only ACL.
    pub auth: Option<String>,
    /// Shown in the claim node.
    pub instance: Option<String>,
    /// The local state file, if any.
    pub state_file: Option<PathBuf>,
    /// `embed` or `server`.
    pub pool_name: &'static str,
    /// The machine IDs this issuer may lease (the pool of its genMethod).
    pub pool: RangeInclusive<u64>,
}

impl LeaseSettings {
    /// Checks the `[zookeeper]` section and picks the pool of the config's genMethod.
    pub fn from_config(config: &IssuerConfig) -> Result<Self, ConfigError> {
        let z = &config.zookeeper;
        let bad = |msg: String| Err(ConfigError::Inconsistent(msg));
        if z.connect.trim().is_empty() {
            return bad("zookeeper.connect is empty: expected host:port[,host:port...]".into());
        }
        if !z.root.starts_with('/') || z.root.len() < 2 || z.root.ends_with('/') {
            return bad(format!(
                "zookeeper.root `{}` is not valid: expected an absolute znode path such as \
                 /vesta/default, without a trailing slash",
                z.root
            ));
        }
        for (key, v, min) in [
            ("session_timeout_ms", z.session_timeout_ms, 100),
            ("connect_timeout_ms", z.connect_timeout_ms, 1),
            ("report_interval_ms", z.report_interval_ms, 10),
        ] {
            if v < min {
                return bad(format!("zookeeper.{key} {v} is too small: at least {min}"));
            }
        }
        if z.auth.as_ref().is_some_and(|a| !a.contains(':')) {
            return bad("zookeeper.auth is not valid: expected user:password".into());
        }
        let (pool_name, pool) = config
            .pools()?
            .for_gen_method(config.gen_method)
            .map_err(vesta_core::ConfigError::from)?;
        Ok(LeaseSettings {
            connect: z.connect.trim().to_owned(),
            root: z.root.clone(),
            session_timeout: Duration::from_millis(z.session_timeout_ms),
            connect_timeout: Duration::from_millis(z.connect_timeout_ms),
            report_interval: Duration::from_millis(z.report_interval_ms),
            start_guard_max_wait: Duration::from_millis(z.start_guard_max_wait_ms),
            start_without_zookeeper: z.start_without_zookeeper,
            auth: z.auth.clone(),
            instance: z.instance.clone(),
            state_file: config.machine.state_file.clone(),
            pool_name,
            pool,
        })
    }

    /// The znode of the claim on `machine`.
    pub fn claim_path(&self, machine: u64) -> String {
        format!("{}/machines/{machine}", self.root)
    }

    /// The znode of the mark of `machine`.
    pub fn mark_path(&self, machine: u64) -> String {
        format!("{}/last/{machine}", self.root)
    }
}

/// How long after the last confirmed contact a holder may keep issuing: two thirds of the
/// negotiated session timeout, so it has stopped well before the server can expire the session
/// (and delete the claim) even if its clock runs a little slow against the server's.
pub fn fence_window(session_timeout: Duration) -> Duration {
    Duration::from_millis((session_timeout.as_millis() * 2 / 3) as u64)
}

/// How often the mark is written: the configured interval, but at least three times per window
/// so that one lost write never fences a healthy holder.
pub fn beat_interval(report_interval: Duration, window: Duration) -> Duration {
    report_interval
        .min(window / 3)
        .max(Duration::from_millis(10))
}

/// The end (exclusive, ms since the Unix epoch) of time unit `time`.
pub fn unit_end_ms(layout: &Layout, epoch: Epoch, time: u64) -> u64 {
    epoch.unix_ms_of(layout, time.saturating_add(1))
}

/// The mark a holder writes while it may still issue until `deadline_ms`: the end of the later
/// of its last issued unit and the unit containing its deadline's last millisecond.
pub fn promise_mark_ms(layout: &Layout, epoch: Epoch, last_time: u64, deadline_ms: u64) -> u64 {
    let issued = unit_end_ms(layout, epoch, last_time);
    let promised = match epoch.time_at(layout, deadline_ms.saturating_sub(1)) {
        Ok(t) => unit_end_ms(layout, epoch, t),
        // Before the epoch nothing can be issued; past the end of life nothing either.
        Err(_) if deadline_ms <= epoch.unix_ms() => 0,
        Err(_) => layout.end_of_life_ms(epoch),
    };
    issued.max(promised)
}

/// The generator floor that keeps issuing at or after `mark_ms`: the unit containing the
/// mark's last millisecond (0 if the mark is at or before the epoch).
pub fn floor_for_mark(layout: &Layout, epoch: Epoch, mark_ms: u64) -> u64 {
    if mark_ms <= epoch.unix_ms() {
        return 0;
    }
    epoch
        .time_at(layout, mark_ms - 1)
        .unwrap_or(layout.max_time())
}

/// What the start guard decides for a clock reading and a mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// The clock is at or past the first instant the new holder may issue at.
    Ready,
    /// Wait this many ms (no more than the allowed maximum).
    Wait(u64),
    /// The clock is this many ms behind: more than the guard may wait.
    Refuse(u64),
}

/// The start guard: issue nothing until the clock reads `target_ms` (the start of the first unit
/// after the floor); wait out gaps up to `max_wait`, refuse larger ones.
pub fn start_guard(now_ms: u64, target_ms: u64, max_wait: Duration) -> Guard {
    let gap = target_ms.saturating_sub(now_ms);
    if gap == 0 {
        Guard::Ready
    } else if u128::from(gap) <= max_wait.as_millis() {
        Guard::Wait(gap)
    } else {
        Guard::Refuse(gap)
    }
}

/// The order in which machine IDs are tried: the preferred one (held last time) if it is in the
/// pool, then the pool's IDs from the lowest, skipping those known to be claimed.
pub fn claim_order(
    pool: &RangeInclusive<u64>,
    preferred: Option<u64>,
    claimed: &[u64],
) -> Vec<u64> {
    let mut order = Vec::new();
    if let Some(p) = preferred.filter(|p| pool.contains(p) && !claimed.contains(p)) {
        order.push(p);
    }
    order.extend(
        pool.clone()
            .filter(|id| Some(*id) != preferred && !claimed.contains(id)),
    );
    order
}

/// The machine's host name, for claim nodes (best effort).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vesta_core::{GenMethod, IdType};

    const E: Epoch = Epoch::VESTA;

    #[test]
    fn window_is_inside_the_session_timeout_and_beats_fit_three_times() {
        let w = fence_window(Duration::from_millis(10_000));
        assert_eq!(w, Duration::from_millis(6_666));
        assert_eq!(
            beat_interval(Duration::from_millis(3_000), w),
            Duration::from_millis(2_222)
        );
        assert_eq!(
            beat_interval(Duration::from_millis(500), w),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn promise_covers_the_deadline_unit_and_the_last_issued_unit() {
        let l = IdType::MaxPeak.layout();
        let t = 100;
        let start = E.unix_ms_of(l, t);
        // Deadline in the middle of unit 103: units up to 103 may still be used.
        assert_eq!(
            promise_mark_ms(l, E, t, start + 3_500),
            E.unix_ms_of(l, 104)
        );
        // Deadline exactly at the start of unit 103: its last usable ms is in unit 102.
        assert_eq!(
            promise_mark_ms(l, E, t, start + 3_000),
            E.unix_ms_of(l, 103)
        );
        // A clean mark (deadline now, already fenced) is the end of the last issued unit.
        assert_eq!(promise_mark_ms(l, E, t, start + 10), E.unix_ms_of(l, 101));
        let ms = IdType::MinGranularity.layout();
        assert_eq!(promise_mark_ms(ms, E, 5, E.unix_ms() + 9), E.unix_ms() + 9);
    }

    #[test]
    fn floor_makes_the_next_unit_start_at_or_after_the_mark() {
        for id_type in [IdType::MaxPeak, IdType::MinGranularity] {
            let l = id_type.layout();
            for mark in [
                E.unix_ms() + 1,
                E.unix_ms() + 999,
                E.unix_ms() + 1000,
                1_700_000_000_123,
            ] {
                let floor = floor_for_mark(l, E, mark);
                let next = E.unix_ms_of(l, floor + 1);
                assert!(next >= mark, "{id_type:?} mark {mark} next {next}");
                // And the floor unit itself contains the mark's last ms: nothing is lost.
                assert!(E.unix_ms_of(l, floor) < mark);
            }
            assert_eq!(floor_for_mark(l, E, E.unix_ms()), 0);
            assert_eq!(floor_for_mark(l, E, 5), 0);
        }
    }

    #[test]
    fn guard_waits_small_gaps_and_refuses_large_ones() {
        let max = Duration::from_millis(5_000);
        assert_eq!(start_guard(1_000, 1_000, max), Guard::Ready);
        assert_eq!(start_guard(2_000, 1_000, max), Guard::Ready);
        assert_eq!(start_guard(1_000, 1_700, max), Guard::Wait(700));
        assert_eq!(start_guard(1_000, 6_000, max), Guard::Wait(5_000));
        assert_eq!(start_guard(1_000, 6_001, max), Guard::Refuse(5_001));
        assert_eq!(start_guard(1_000, 1_001, Duration::ZERO), Guard::Refuse(1));
    }

    #[test]
    fn claim_order_prefers_the_last_id_then_the_lowest_free() {
        let pool = 0..=5;
        assert_eq!(claim_order(&pool, Some(3), &[0]), vec![3, 1, 2, 4, 5]);
        assert_eq!(claim_order(&pool, Some(3), &[3]), vec![0, 1, 2, 4, 5]);
        assert_eq!(claim_order(&pool, Some(9), &[]), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(
            claim_order(&pool, None, &[0, 1, 2, 3, 4, 5]),
            Vec::<u64>::new()
        );
        assert_eq!(claim_order(&(924..=925), None, &[]), vec![924, 925]);
    }

    #[test]
    fn settings_check_root_auth_and_pick_the_pool() {
        let mut c = IssuerConfig::default();
        let s = LeaseSettings::from_config(&c).unwrap();
        assert_eq!(s.pool, 0..=923);
        assert_eq!(s.claim_path(4), "/vesta/default/machines/4");
        assert_eq!(s.mark_path(4), "/vesta/default/last/4");
        c.gen_method = GenMethod::Server;
        assert_eq!(LeaseSettings::from_config(&c).unwrap().pool, 924..=1023);
        c.zookeeper.root = "vesta/x".into();
        let err = LeaseSettings::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("zookeeper.root `vesta/x`"), "{err}");
        c.zookeeper.root = "/v".into();
        c.zookeeper.auth = Some("nopassword".into());
        let err = LeaseSettings::from_config(&c).unwrap_err().to_string();
        assert!(err.contains("zookeeper.auth"), "{err}");
    }
}
