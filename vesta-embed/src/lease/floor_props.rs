//! The start floor as a property: for any mark an earlier holder left (none, true, stale,
//! newer than now, or counted in another epoch), an earlier holder whose clock read up to the
//! tolerance ahead of ours (our clock stepped back that far before the start), and any step
//! back within the tolerance after it, no ID at or below one already issued is issued again.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use vesta_core::{
    Epoch, GenError, GenMethod, Generator, GeneratorConfig, IdType, Layout, ManualClock, Preset,
};

use super::counted_in::CountedIn;
use super::rules::{guarded_floor, unit_end_ms};

/// A clock reading well after every epoch in use.
const T0: u64 = 1_700_000_000_000;

fn layouts() -> [Layout; 3] {
    [
        IdType::MaxPeak.layout().clone(),
        IdType::MinGranularity.layout().clone(),
        Preset::Sonyflake.layout(),
    ]
}

/// What the earlier holder left.
#[derive(Clone, Copy, Debug)]
enum Left {
    /// No mark at all (no state file, a fresh registry).
    Nothing,
    /// Its true mark: the end of the unit it last issued in.
    True,
    /// An older mark (a restored backup, a copy made while it ran): this many ms too early.
    Stale(u64),
    /// A promise ahead of the clock: this many ms after its last unit.
    Ahead(u64),
}

fn left() -> impl Strategy<Value = Left> {
    prop_oneof![
        Just(Left::Nothing),
        Just(Left::True),
        (1..600_000u64).prop_map(Left::Stale),
        (0..4_000u64).prop_map(Left::Ahead),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn nothing_at_or_below_an_issued_id_is_issued_again(
        which in 0..3usize,
        now_offset in 0..10_000_000u64,
        // The earlier holder's last reading, relative to ours at the start: at most the
        // tolerance ahead (the premise: our clock stepped back no more than the tolerance
        // since), or any way behind.
        behind in 0..60_000u64,
        ahead_fraction in 0..=100u64,
        left in left(),
        step_after in 0..=100u64,
    ) {
        let layout = layouts()[which].clone();
        let config = GeneratorConfig { machine: 5, ..GeneratorConfig::for_layout(layout.clone()) };
        let tolerance = config.rollback_tolerance_ms();
        let now = T0 + now_offset;
        let earlier_reading = (now + tolerance * ahead_fraction / 100).saturating_sub(behind);
        let earlier_unit = layout.time_at(earlier_reading).unwrap();
        let true_mark = unit_end_ms(&layout, earlier_unit);
        let mark = match left {
            Left::Nothing => 0,
            Left::True => true_mark,
            Left::Stale(ms) => true_mark.saturating_sub(ms).max(1),
            Left::Ahead(ms) => true_mark + ms,
        };
        let clock = Arc::new(ManualClock::new(now));
        // Above every mark drawn: a promise up to 4 s ahead of a last unit that ends up to the
        // tolerance plus a unit after now (6 s in max-peak).
        let max_wait = Duration::from_secs(10);
        let floor = guarded_floor(&*clock, &config, 5, mark, max_wait)
            .expect("every mark here is within the guard's wait");
        let generator = Generator::new(
            GeneratorConfig { floor: Some(floor.time), ..config },
            clock.clone(),
        )
        .unwrap();
        clock.rewind(tolerance * step_after / 100);
        for _ in 0..50 {
            match generator.try_next_id() {
                Ok(id) => {
                    let time = layout.for_id(id).time_span().get(id);
                    prop_assert!(
                        time > earlier_unit,
                        "{}: issued in unit {time}, the earlier holder reached {earlier_unit}",
                        layout.full_name()
                    );
                }
                Err(GenError::WouldBlock { .. } | GenError::ClockBehind { .. }) => {}
                Err(e) => prop_assert!(false, "unexpected refusal: {e}"),
            }
            clock.advance(layout.unit_ms().div_ceil(3));
        }
    }

    #[test]
    fn a_mark_counted_in_another_epoch_or_layout_is_refused(
        which in 0..3usize,
        theirs in 0..3usize,
        shift in 0..2u64,
        by in 1..100_000_000u64,
    ) {
        let ours = layouts()[which].clone();
        let base = layouts()[theirs].clone();
        let moved = if shift == 1 {
            base.with_epoch(Epoch::from_unix_ms(base.epoch().unix_ms() + by))
        } else {
            base
        };
        let (a, b) = (
            CountedIn::of(&ours, GenMethod::Embed),
            CountedIn::of(&moved, GenMethod::Embed),
        );
        let retire = vesta_core::Remedy::RetireStateFile { path: "here".into() };
        let checked = a.check(Some(&b), 5, "here", retire);
        // Sonyflake's and Vesta's IDs can meet (no fixed bit tells them apart), Vesta's two
        // types cannot (the type bit): only the first kind is refused.
        let disjoint = ours.id_type().is_some()
            && moved.id_type().is_some()
            && ours.id_type() != moved.id_type();
        let same = disjoint
            || ours.time_span() == moved.time_span()
            && ours.seq_span() == moved.seq_span()
            && ours.node_span() == moved.node_span()
            && ours.unit_ms() == moved.unit_ms()
            && ours.epoch() == moved.epoch();
        prop_assert_eq!(checked.is_ok(), same);
    }
}
