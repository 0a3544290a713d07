//! Blocking calls through real clock steps: an issuer on a [`ShiftedClock`] uses up its unit, a
//! caller blocks for the next one, and the clock is stepped back while it waits. The caller must
//! come back within about the tolerance plus one unit, with an ID if the step was within the
//! tolerance and `ClockBehind` if not — never after the hour the clock stepped back. On both of
//! the system clock's sources: the kernel's, and std's `SystemTime` (macOS's and Windows').

use std::sync::Arc;
use std::time::{Duration, Instant};

use vesta_core::{Clock, GenError, IdFields, IdType};
use vesta_embed::{IssueError, Issuer, IssuerConfig, ShiftedClock, SystemClock};

/// The system clock's sources: the kernel's precise clock (std's elsewhere) and std's
/// `SystemTime`, the one macOS and Windows read, run here on Linux too.
fn sources() -> [SystemClock; 2] {
    [SystemClock::precise(), SystemClock::portable()]
}

fn issuer(id_type: IdType, base: SystemClock) -> (Issuer<Arc<ShiftedClock>>, Arc<ShiftedClock>) {
    let clock = Arc::new(ShiftedClock::new(base));
    let mut config = IssuerConfig::default();
    config.id.id_type = Some(id_type);
    let issuer = Issuer::start_with_clock(config, clock.clone()).unwrap();
    (issuer, clock)
}

/// Waits until the clock is `after_ms` into a unit, so the unit has most of its length left.
fn align(clock: &ShiftedClock, unit_ms: u64, after_ms: u64) {
    while clock.now_ms() % unit_ms != after_ms {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Blocks on `next_id` on a thread with the unit used up, steps the clock by `step_ms` after
/// `delay`, and returns what the call gave and how long it took.
fn blocked_call_through_a_step(
    id_type: IdType,
    base: SystemClock,
    step_ms: i64,
    delay: Duration,
) -> (Result<u64, IssueError>, Duration, u64) {
    let (issuer, clock) = issuer(id_type, base);
    let layout = id_type.layout();
    let unit_ms = layout.unit_ms();
    align(&clock, unit_ms, if unit_ms > 1 { 20 } else { 0 });
    // Use up the unit (a batch never spans units when the unit has room for it all).
    let used = issuer.try_next_ids(layout.capacity_per_unit()).unwrap();
    let last = used.iter().last().unwrap();
    let issuer = Arc::new(issuer);
    let caller = {
        let issuer = issuer.clone();
        std::thread::spawn(move || {
            let began = Instant::now();
            let r = issuer.next_id();
            (r, began.elapsed())
        })
    };
    std::thread::sleep(delay);
    clock.step_ms(step_ms);
    let (r, took) = caller.join().unwrap();
    (r, took, last)
}

#[test]
fn max_peak_caller_gets_clock_behind_not_an_hour_of_sleep() {
    for base in sources() {
        let (r, took, _) = blocked_call_through_a_step(
            IdType::MaxPeak,
            base,
            -3_600_000,
            Duration::from_millis(200),
        );
        assert!(
            matches!(r, Err(IssueError::Refused(GenError::ClockBehind { behind_ms, .. })) if behind_ms > 3_500_000),
            "{base:?}: {r:?}"
        );
        // Not the hour of the step: 30 s tells the two apart on any machine.
        assert!(
            took < Duration::from_secs(30),
            "{base:?}: blocked for {took:?}"
        );
    }
}

#[test]
fn max_peak_caller_rides_out_a_step_within_the_tolerance() {
    for base in sources() {
        let (r, took, last) =
            blocked_call_through_a_step(IdType::MaxPeak, base, -400, Duration::from_millis(200));
        let id = r.unwrap();
        assert!(id > last);
        assert_eq!(
            IdFields::decode(id).time,
            IdFields::decode(last).time + 1,
            "{base:?}: the next unit after the used-up one"
        );
        // One unit plus the step; 10 s tells "rode it out" from "hung" on a busy machine.
        assert!(
            took < Duration::from_secs(10),
            "{base:?}: blocked for {took:?}"
        );
    }
}

#[test]
fn min_granularity_caller_gets_clock_behind_or_an_id_quickly() {
    for base in sources() {
        // The unit is a millisecond, so the step may land before or during the wait: either
        // way the call returns promptly, and with an ID only if it is above the used-up unit.
        let (r, took, last) =
            blocked_call_through_a_step(IdType::MinGranularity, base, -3_600_000, Duration::ZERO);
        match r {
            Ok(id) => assert!(id > last),
            Err(IssueError::Refused(GenError::ClockBehind { .. })) => {}
            Err(e) => panic!("{base:?}: {e}"),
        }
        // Not the hour of the step.
        assert!(
            took < Duration::from_secs(30),
            "{base:?}: blocked for {took:?}"
        );
    }
}
