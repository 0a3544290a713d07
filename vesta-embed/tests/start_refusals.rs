//! A start refused because the clock reads behind the machine ID's mark, as the operator reads
//! it: the mark is what the last run promised to stay below (it may have issued less), so the
//! message says "promised up to", naming the machine and both instants.

use std::sync::Arc;

use vesta_core::{Epoch, IdType, ManualClock};
use vesta_embed::{Issuer, IssuerConfig, StartError};

#[test]
fn a_start_behind_the_mark_says_what_was_promised() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = IssuerConfig::default();
    c.id.id_type = Some(IdType::MinGranularity);
    c.machine.state_file = Some(dir.path().join("static.state"));
    let t0 = 1_800_000_000_000;
    let a = Issuer::start_with_clock(c.clone(), Arc::new(ManualClock::new(t0))).unwrap();
    a.next_id().unwrap();
    a.shutdown().unwrap();

    // A minute behind: more than the start guard waits.
    let behind = t0 - 60_000;
    let err = Issuer::start_with_clock(c, Arc::new(ManualClock::new(behind))).unwrap_err();
    let StartError::ClockBehindMark { machine, now, mark } = &err else {
        panic!("not refused for the mark: {err}");
    };
    assert_eq!(
        (*machine, now.as_str()),
        (0, Epoch::rfc3339(behind).as_str())
    );
    assert_eq!(
        err.to_string(),
        format!(
            "the clock reads {now} but machine 0 promised up to {mark}; refusing to start until \
             the clock is past it"
        )
    );
}
