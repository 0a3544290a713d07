//! The issuer's own tests on a manual clock: static starts with and without a state file,
//! end of life, fencing, the pools, the clock's sync status.

use super::*;
use std::sync::Arc;
use vesta_core::{GenMethod, ManualClock};

const T0: u64 = 1_700_000_000_000;

/// `clock.require_sync` with an injected kernel status: `warn` starts and shows it, `wait`
/// refuses after `sync_wait_ms` with one line naming the key, `off` does not ask, and a
/// synchronised or unknown clock starts under every policy.
#[test]
fn an_unsynchronised_clock_is_shown_waited_for_or_refused() {
    let unsynced = vesta_core::ClockSync {
        synchronised: false,
        max_error_us: 16_000_000,
    };
    let with = |policy: RequireSync| {
        let mut c = IssuerConfig::default();
        c.clock.require_sync = policy;
        c.clock.sync_wait_ms = 300;
        c
    };
    let clock = Arc::new(ManualClock::new(T0));
    clock.set_sync(Some(unsynced));
    let issuer = Issuer::start_with_clock(with(RequireSync::Warn), clock.clone()).unwrap();
    assert_eq!(issuer.status().clock_sync, Some(unsynced));
    issuer.next_id().unwrap();
    let started = std::time::Instant::now();
    let Err(err) = Issuer::start_with_clock(with(RequireSync::Wait), clock.clone()) else {
        panic!("started on an unsynchronised clock with require_sync = wait");
    };
    let err = err.to_string();
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(300),
        "waited"
    );
    assert!(
        err.contains("unsynchronised") && err.contains("max error 16000 ms"),
        "{err}"
    );
    assert!(
        err.contains("clock.sync_wait_ms") && err.contains("require_sync"),
        "{err}"
    );
    let issuer = Issuer::start_with_clock(with(RequireSync::Off), clock.clone()).unwrap();
    assert_eq!(issuer.status().clock_sync, None, "not asked");
    clock.set_sync(Some(vesta_core::ClockSync {
        synchronised: true,
        max_error_us: 1_000,
    }));
    Issuer::start_with_clock(with(RequireSync::Wait), clock.clone()).unwrap();
    clock.set_sync(None);
    Issuer::start_with_clock(with(RequireSync::Wait), clock).unwrap();
}

#[test]
fn static_issuer_issues_explains_and_makes() {
    let clock = Arc::new(ManualClock::new(T0));
    let issuer = Issuer::start_with_clock(IssuerConfig::default(), clock.clone()).unwrap();
    let id = issuer.next_id().unwrap();
    let x = issuer.explain(id);
    assert_eq!(x.node(), 0);
    assert_eq!(x.gen_method(), Some(GenMethod::Embed));
    let values = issuer
        .own_values()
        .with("time", x.time())
        .with("seq", x.seq());
    assert_eq!(issuer.make(&values), Ok(id));
    assert_eq!(
        issuer.trans_time(x.time()).unwrap().timestamp_millis() as u64 / 1000,
        clock.now_ms() / 1000
    );
    assert!(issuer.status().can_issue());
}

#[test]
fn an_issuer_near_its_layouts_end_warns() {
    let issuer = Issuer::start_with_clock(IssuerConfig::default(), ManualClock::new(T0)).unwrap();
    assert_eq!(
        issuer.warn_near_end_of_life(),
        None,
        "2049 is far from 2023"
    );
    let mut config = IssuerConfig::default();
    config.id.epoch = Some("1994-01-01T00:00:00Z".parse().unwrap());
    let issuer = Issuer::start_with_clock(config.clone(), ManualClock::new(T0)).unwrap();
    let warning = issuer.warn_near_end_of_life().unwrap();
    assert!(
        warning.contains("max-peak layout's time field is full at 2028-01-10"),
        "{warning}"
    );
    assert!(warning.contains("1517 days (4.2 years) left"), "{warning}");
    config.id.end_of_life_margin_days = 1000;
    let issuer = Issuer::start_with_clock(config.clone(), ManualClock::new(T0)).unwrap();
    assert_eq!(issuer.warn_near_end_of_life(), None);
    config.id.end_of_life_margin_days = 40_000;
    let err = Issuer::start_with_clock(config, ManualClock::new(T0))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("id.end_of_life_margin_days 40000 is out of range: allowed 0..=36525"),
        "{err}"
    );
}

#[test]
fn fenced_issuer_says_why_and_resumes() {
    let issuer = Issuer::start_with_clock(IssuerConfig::default(), ManualClock::new(T0)).unwrap();
    issuer.fence_for_test(LeaseState::Fenced, "lease lost");
    assert_eq!(
        issuer.next_id(),
        Err(IssueError::Unavailable("lease lost".into()))
    );
    assert!(!issuer.status().can_issue());
    assert_eq!(issuer.status().lease.fence_events, 1);
    issuer.resume_for_test(LeaseState::Held);
    assert!(issuer.next_id().is_ok());
}

#[test]
fn machine_outside_the_pool_is_refused() {
    let mut config = IssuerConfig::default();
    config.machine.id = Some(924);
    let err = Issuer::start_with_clock(config, ManualClock::new(T0))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("machine 924 is outside the embed pool 0..=923"),
        "{err}"
    );
}
/// Configs of every unit size: Vesta's seconds and milliseconds, Sonyflake's 10 ms.
fn static_configs() -> Vec<IssuerConfig> {
    let mut seconds = IssuerConfig::default();
    seconds.id.id_type = Some(vesta_core::IdType::MaxPeak);
    let mut millis = IssuerConfig::default();
    millis.id.id_type = Some(vesta_core::IdType::MinGranularity);
    let mut sonyflake = IssuerConfig::default();
    sonyflake.id.layout = crate::config::LayoutChoice::Preset(vesta_core::Preset::Sonyflake);
    sonyflake.machine.id = Some(7);
    vec![seconds, millis, sonyflake]
}

/// A static ID with no mark knows nothing of an earlier run: a restart in the same unit, or
/// with the clock stepped back within the rollback tolerance (before or after the start),
/// must not issue what the earlier run did. The start waits at most the tolerance plus one
/// unit. Without a state file, and with one not written yet (the lease thread's path).
#[test]
fn a_static_restart_without_a_mark_never_reissues() {
    let dir = tempfile::tempdir().unwrap();
    let mut configs = static_configs();
    for (k, mut config) in static_configs().into_iter().enumerate() {
        config.machine.state_file = Some(dir.path().join(format!("{k}.state")));
        configs.push(config);
    }
    for mut config in configs {
        let layout = config.layout().unwrap();
        let tolerance = layout.default_rollback_tolerance_ms();
        // Mid-unit, so a restart "in the same unit" really is one.
        let t = layout.unix_ms_of(layout.time_at(T0).unwrap()) + layout.unit_ms() / 2;
        for step_back in [0, tolerance / 2, tolerance] {
            let state_file = config.machine.state_file.take();
            let clock = Arc::new(ManualClock::new(t));
            let a = Issuer::start_with_clock(config.clone(), clock.clone()).unwrap();
            let waited = clock.now_ms() - t;
            assert!(
                waited <= tolerance + layout.unit_ms(),
                "{}: the start waited {waited} ms",
                layout.full_name()
            );
            // The earlier run uses up its unit (and a few more in a ms layout).
            let a_ids = a.next_ids(layout.capacity_per_unit() + 3).unwrap().to_vec();
            let a_seen = clock.now_ms();
            drop(a);

            // Restarted at once, on a clock stepped back by `step_back`, and stepped back
            // by the whole tolerance once started.
            config.machine.state_file = state_file.clone();
            let clock = Arc::new(ManualClock::new(a_seen - step_back));
            let b = Issuer::start_with_clock(config.clone(), clock.clone()).unwrap();
            clock.rewind(tolerance);
            let b_ids = b.next_ids(10).unwrap().to_vec();
            let a_max = a_ids.iter().max().unwrap();
            assert!(
                b_ids.iter().all(|id| id > a_max),
                "{} stepped back {step_back} ms: {b_ids:?} overlaps up to {a_max}",
                layout.full_name()
            );
            drop(b);
            if let Some(path) = &state_file {
                std::fs::remove_file(path).unwrap();
            }
        }
    }
}

/// Before the epoch nothing was issued: the start neither waits nor refuses; the first
/// call says the clock is before the epoch, as it always did.
#[test]
fn a_static_start_before_the_epoch_does_not_wait() {
    let clock = Arc::new(ManualClock::new(Epoch::VESTA.unix_ms() - 60_000));
    let issuer = Issuer::start_with_clock(IssuerConfig::default(), clock.clone()).unwrap();
    assert_eq!(clock.waits(), 0);
    let err = issuer.next_id().unwrap_err().to_string();
    assert!(err.contains("epoch"), "{err}");
}

#[test]
fn static_state_file_floors_a_restart_and_guards_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("static.state");
    let mut c = IssuerConfig::default();
    // Each test holds its own machine ID on the host: the tests run at once.
    c.machine.id = Some(1);
    c.machine.state_file = Some(path.clone());
    c.machine.state_file_interval_ms = 50;
    let a_clock = Arc::new(ManualClock::new(T0));
    let a = Issuer::start_with_clock(c.clone(), a_clock.clone()).unwrap();
    let a_last = a.next_ids(1000).unwrap().to_vec()[999];
    let a_second_ends = (a_clock.now_ms() / 1000 + 1) * 1000;
    a.shutdown().unwrap();
    assert_eq!(a.status().lease.state, LeaseState::Released);
    let rec = crate::lease::state_file::read(&path).unwrap().unwrap();
    assert!(rec.clean);
    assert_eq!((rec.machine, rec.source.as_str()), (1, "static"));
    assert_eq!(
        rec.mark_ms, a_second_ends,
        "the end of the last issued second"
    );

    // The clock 2 s before the mark: the guard waits (within 5 s), then issues above A.
    let clock = Arc::new(ManualClock::new(rec.mark_ms - 2000));
    let b = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
    assert!(clock.waits() >= 1);
    assert!(b.next_id().unwrap() > a_last);
    drop(b);

    // A minute back: refused, naming both times.
    let behind = ManualClock::new(rec.mark_ms - 60_000);
    let err = Issuer::start_with_clock(c, behind).unwrap_err();
    assert!(
        matches!(err, StartError::ClockBehindMark { machine: 1, .. }),
        "{err}"
    );
}

#[test]
fn static_state_file_left_by_a_crash_covers_what_was_promised() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("static.state");
    let mut c = IssuerConfig::default();
    c.id.id_type = Some(vesta_core::IdType::MinGranularity);
    c.machine.id = Some(3);
    c.machine.state_file = Some(path.clone());
    c.machine.state_file_interval_ms = 50;
    let a = Issuer::start_with_clock(c.clone(), Arc::new(ManualClock::new(T0))).unwrap();
    let a_ids = a.next_ids(5000).unwrap().to_vec();
    // What a kill -9 would leave behind: the running issuer's last (unclean) record.
    std::thread::sleep(std::time::Duration::from_millis(120));
    let crashed = crate::lease::state_file::read(&path).unwrap().unwrap();
    assert!(!crashed.clean);
    assert!(
        crashed.mark_ms >= T0 + 150,
        "the promise reaches three intervals ahead"
    );
    drop(a);
    crate::lease::state_file::write(&path, &crashed).unwrap();

    let clock = Arc::new(ManualClock::new(T0));
    let b = Issuer::start_with_clock(c, clock.clone()).unwrap();
    assert!(clock.waits() >= 1, "waited out the promise");
    let first = b.next_id().unwrap();
    assert!(first > *a_ids.last().unwrap());
    let first_ms = Epoch::VESTA.unix_ms() + b.explain(first).time();
    assert!(
        first_ms >= crashed.mark_ms,
        "issued inside the crashed holder's promise"
    );
}

/// The generator's deadline ran out with no rewrite of the state file in time: the caller
/// is told the one documented reason (the one the lease thread fences with), and no
/// "waiting".
#[test]
fn a_static_term_running_out_gives_the_documented_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("static.state");
    let mut c = IssuerConfig::default();
    c.machine.id = Some(2);
    c.machine.state_file = Some(path.clone());
    // No rewrite while the test runs: the term is three minutes of the manual clock.
    c.machine.state_file_interval_ms = 60_000;
    let clock = Arc::new(ManualClock::new(T0));
    let issuer = Issuer::start_with_clock(c, clock.clone()).unwrap();
    let written = clock.now_ms();
    issuer.next_id().unwrap();
    clock.advance(180_000);
    let expected = format!(
        "the state file {} was not rewritten in time (last written at {}, allowed 180000 \
             ms); not issuing until it is",
        path.display(),
        Epoch::rfc3339(written)
    );
    assert_eq!(
        issuer.next_id(),
        Err(IssueError::Unavailable(expected.clone()))
    );
    let lease = issuer.status().lease;
    assert_eq!(
        (lease.state, lease.reason),
        (LeaseState::Fenced, Some(expected))
    );
}
