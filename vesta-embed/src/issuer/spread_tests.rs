//! An issuer of k machine IDs on a manual clock: IDs unique across the k, increasing per
//! machine ID, each explaining to one of the issuer's machine IDs; a unit issues k units'
//! capacity; one fenced machine ID leaves the others issuing; a clock step is seen by all; a
//! restart of a state-file issuer floors every machine ID; a clock without a shared handle is
//! refused in one line.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use vesta_core::{GenError, IdType, ManualClock};

use super::*;
use crate::config::MachineSection;

const T0: u64 = 1_700_000_000_000;

/// An embedded issuer config of `k` static machine IDs from 7, min-granularity (1,024 IDs a
/// millisecond per machine ID, so a test fills units quickly).
fn config(k: u64) -> IssuerConfig {
    let mut c = IssuerConfig::default();
    c.id.id_type = Some(IdType::MinGranularity);
    c.machine = MachineSection {
        id: Some(7),
        ids: k,
        ..MachineSection::default()
    };
    c
}

/// Checks `ids` are unique, explain to the issuer's machine IDs, and increase per machine ID
/// in the order given; returns how many each machine ID issued.
fn check<C: Clock>(issuer: &Issuer<C>, ids: &[u64]) -> BTreeMap<u64, u64> {
    let own: HashSet<u64> = issuer.status().machines.iter().map(|m| m.machine).collect();
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    let mut count = BTreeMap::new();
    let mut seen = HashSet::new();
    for &id in ids {
        assert!(seen.insert(id), "duplicate ID {id}");
        let machine = issuer.explain(id).node();
        assert!(
            own.contains(&machine),
            "ID {id} explains to machine {machine}"
        );
        if let Some(&before) = last.get(&machine) {
            assert!(id > before, "machine {machine}: {id} after {before}");
        }
        last.insert(machine, id);
        *count.entry(machine).or_insert(0) += 1;
    }
    count
}

#[test]
fn k_machine_ids_issue_k_units_capacity_in_one_unit_each_id_its_own() {
    let clock = Arc::new(ManualClock::new(T0));
    let issuer = Issuer::start_with_clock(config(3), clock.clone()).unwrap();
    assert_eq!(issuer.machine_count(), 3);
    let machines: Vec<u64> = issuer.status().machines.iter().map(|m| m.machine).collect();
    assert_eq!(machines, [7, 8, 9]);
    let per_unit = issuer.layout().capacity_per_unit();
    let started = clock.now_ms();
    let mut ids = Vec::new();
    loop {
        match issuer.try_next_id() {
            Ok(id) => ids.push(id),
            Err(IssueError::Refused(GenError::WouldBlock { .. })) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        ids.len() as u64,
        3 * per_unit,
        "one unit of each machine ID"
    );
    let count = check(&issuer, &ids);
    assert_eq!(count.values().copied().collect::<Vec<_>>(), [per_unit; 3]);
    // A batch past the unit takes what the next unit of each brings, waiting on the clock.
    let batch = issuer.next_ids(2 * per_unit + 5).unwrap();
    assert_eq!(batch.len(), 2 * per_unit + 5);
    ids.extend(batch.iter());
    check(&issuer, &ids);
    assert!(
        clock.now_ms() > started,
        "the batch waited for a later unit"
    );
    // try_next_ids takes from every machine ID with room, never waiting.
    clock.advance(1);
    let some = issuer.try_next_ids(10 * per_unit).unwrap();
    assert_eq!(some.len(), 3 * per_unit, "every machine ID's whole unit");
    ids.extend(some.iter());
    check(&issuer, &ids);
    assert!(matches!(
        issuer.try_next_ids(1),
        Err(IssueError::Refused(GenError::WouldBlock { .. }))
    ));
    // next_id blocks for the next unit once all are used up.
    ids.push(issuer.next_id().unwrap());
    check(&issuer, &ids);
    let status = issuer.status();
    assert_eq!(status.machine, 7);
    assert_eq!(
        status.last_issued_time,
        status
            .machines
            .iter()
            .map(|m| m.last_issued_time)
            .max()
            .unwrap()
    );
}

#[test]
fn threads_spread_over_the_machine_ids_and_never_repeat_an_id() {
    let clock = Arc::new(ManualClock::new(T0));
    let issuer = Arc::new(Issuer::start_with_clock(config(4), clock.clone()).unwrap());
    let per_unit = issuer.layout().capacity_per_unit();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let issuer = issuer.clone();
            std::thread::spawn(move || {
                (0..3 * per_unit)
                    .map(|_| issuer.next_id().unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in threads {
        let ids = t.join().unwrap();
        // Each thread's own IDs increase per machine ID.
        check(&issuer, &ids);
        all.extend(ids);
    }
    let count = check(&issuer, &{
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted
    });
    assert_eq!(count.len(), 4, "every machine ID issued: {count:?}");
    assert_eq!(all.len() as u64, 12 * per_unit);
}

#[test]
fn a_fenced_machine_id_leaves_the_others_issuing_and_all_fenced_says_why() {
    let clock = Arc::new(ManualClock::new(T0));
    let issuer = Issuer::start_with_clock(config(3), clock.clone()).unwrap();
    issuer.fence_machine_for_test(1, LeaseState::Fenced, "lease of 8 lost");
    let per_unit = issuer.layout().capacity_per_unit();
    let batch = issuer.next_ids(3 * per_unit).unwrap();
    let count = check(&issuer, &batch.iter().collect::<Vec<_>>());
    assert!(
        !count.contains_key(&8),
        "the fenced machine ID issued: {count:?}"
    );
    let status = issuer.status();
    assert!(status.can_issue(), "the others issue");
    let not: Vec<_> = status.machines_not_issuing().map(|m| m.machine).collect();
    assert_eq!(not, [8]);
    assert_eq!(status.lease.fence_events, 1, "summed over the machine IDs");
    issuer.fence_machine_for_test(0, LeaseState::Fenced, "lease of 7 lost");
    issuer.fence_machine_for_test(2, LeaseState::Fenced, "lease of 9 lost");
    let err = issuer.next_id().unwrap_err().to_string();
    assert!(
        err.contains("lost") && err.contains("none of the issuer's 3 machine IDs may issue"),
        "{err}"
    );
    assert!(!issuer.status().can_issue());
    assert!(issuer.try_next_ids(5).is_err());
    issuer.resume_for_test(LeaseState::Static);
    issuer.next_id().unwrap();
    issuer.shutdown().unwrap();
    let err = issuer.next_id().unwrap_err();
    assert!(matches!(err, IssueError::Unavailable(_)), "{err}");
}

#[test]
fn a_clock_step_back_is_seen_by_every_machine_id() {
    let clock = Arc::new(ManualClock::new(T0));
    let mut c = config(2);
    c.clock.rollback_tolerance_ms = Some(0);
    let issuer = Issuer::start_with_clock(c, clock.clone()).unwrap();
    let per_unit = issuer.layout().capacity_per_unit();
    let before: Vec<u64> = issuer.next_ids(2 * per_unit).unwrap().iter().collect();
    clock.rewind(50);
    let err = issuer.next_id().unwrap_err();
    assert!(
        matches!(err, IssueError::Refused(GenError::ClockBehind { .. })),
        "{err}"
    );
    assert!(issuer.next_ids(10).is_err());
    clock.advance(51);
    let mut ids = before;
    ids.extend(issuer.next_ids(2 * per_unit).unwrap().iter());
    check(&issuer, &ids);
    assert!(issuer.status().generator.clock_rollback_refusals >= 2);
}

#[test]
fn a_clock_without_a_shared_handle_is_refused_for_more_than_one_id() {
    let err = Issuer::start_with_clock(config(2), ManualClock::new(T0))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("machine.ids 2") && err.contains("Clock::share"),
        "{err}"
    );
    Issuer::start_with_clock(config(1), ManualClock::new(T0)).unwrap();
    // The system clock shares itself.
    let issuer = Issuer::start(config(2)).unwrap();
    assert_eq!(issuer.machine_count(), 2);
}

#[test]
fn k_machine_ids_out_of_the_pool_are_refused_in_one_line() {
    let mut c = config(3);
    c.machine.id = Some(922);
    let err = Issuer::start_with_clock(c, Arc::new(ManualClock::new(T0)))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("machine.ids 3 from machine 922 needs 922..=924, past the embed pool"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
}

#[cfg(feature = "state-file")]
#[test]
fn a_restart_floors_every_machine_id_from_its_own_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("vesta.state");
    let mut c = config(2);
    c.machine.state_file = Some(state.clone());
    let clock = Arc::new(ManualClock::new(T0));
    let issuer = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
    let per_unit = issuer.layout().capacity_per_unit();
    let mut ids: Vec<u64> = issuer.next_ids(2 * per_unit).unwrap().iter().collect();
    issuer.shutdown().unwrap();
    drop(issuer);
    assert!(state.exists() && dir.path().join("vesta.m8.state").exists());
    // The clock stepped back across the restart: each machine ID starts after its own mark.
    clock.rewind(5);
    let issuer = Issuer::start_with_clock(c, clock.clone()).unwrap();
    ids.extend(issuer.next_ids(2 * per_unit).unwrap().iter());
    check(&issuer, &ids);
}

/// The async issuer parks a call once every machine ID's unit is used up and serves it from
/// the next units of all of them.
#[cfg(feature = "tokio")]
#[tokio::test]
async fn the_async_issuer_parks_until_the_next_units_of_all_machine_ids() {
    let clock = Arc::new(ManualClock::new(T0));
    let issuer = Arc::new(Issuer::start_with_clock(config(2), clock.clone()).unwrap());
    let a = crate::AsyncIssuer::new(issuer.clone(), std::time::Duration::from_secs(5)).unwrap();
    let per_unit = issuer.layout().capacity_per_unit();
    let started = clock.now_ms();
    let first = a.next_ids(2 * per_unit).await.unwrap();
    assert_eq!(clock.now_ms(), started, "two units' worth without a wait");
    let more = a.next_ids(3 * per_unit).await.unwrap();
    assert_eq!(more.len(), 3 * per_unit);
    let ids: Vec<u64> = first.iter().chain(more.iter()).collect();
    let count = check(&issuer, &ids);
    assert_eq!(count.len(), 2);
    assert!(a.stats().parked_total >= 1);
}

/// A chaos clock under k machine IDs: four threads issue (singles, batches, non-blocking calls)
/// from an issuer of four machine IDs and, every 16 calls, step the clock at random: on with
/// time, or back from it within the rollback tolerance or beyond it, each excursion undone by
/// the next step (a clock that only drifted back would refuse every call once far enough
/// behind, however the threads were scheduled). Refusals are allowed (a clock behind further
/// than the tolerance); a duplicate, or an ID of one machine ID below an earlier one of the
/// same machine ID within a thread, is not.
#[test]
fn a_chaos_clock_never_makes_k_machine_ids_repeat_or_go_back() {
    let clock = Arc::new(ManualClock::new(T0));
    let mut c = config(4);
    c.clock.rollback_tolerance_ms = Some(5);
    let issuer = Arc::new(Issuer::start_with_clock(c, clock.clone()).unwrap());
    // xorshift (deterministic steps, no dependency) and how far the clock is behind its base,
    // which only goes on.
    let walk = Arc::new(std::sync::Mutex::new((0x9E37_79B9_7F4A_7C15u64, 0u64)));
    let step = {
        let (clock, walk) = (clock.clone(), walk.clone());
        move || {
            let mut w = walk.lock().unwrap();
            let (x, behind) = &mut *w;
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            let on = 1 + *x % 3;
            let back = match *x % 8 {
                0 => 1 + *x % 5,  // within the tolerance
                1 => 6 + *x % 40, // beyond it
                _ => 0,           // time goes on
            };
            // From base - behind to (base + on) - back.
            clock.advance(*behind + on);
            clock.rewind(back);
            *behind = back;
        }
    };
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let (issuer, step) = (issuer.clone(), step.clone());
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for i in 0..10_000u64 {
                    if i % 16 == 0 {
                        step();
                    }
                    let got = match (t + i) % 3 {
                        0 => issuer.next_id().map(|id| vec![id]),
                        1 => issuer.try_next_id().map(|id| vec![id]),
                        _ => issuer.next_ids(1 + i % 70).map(|b| b.iter().collect()),
                    };
                    match got {
                        Ok(got) => ids.extend(got),
                        Err(IssueError::Refused(
                            GenError::ClockBehind { .. } | GenError::WouldBlock { .. },
                        )) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                ids
            })
        })
        .collect();
    let per_thread: Vec<Vec<u64>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut all = HashSet::new();
    for ids in &per_thread {
        check(&issuer, ids);
        for &id in ids {
            assert!(all.insert(id), "{id} issued twice across threads");
        }
    }
    assert!(all.len() > 10_000, "issued {}", all.len());
    let machines: HashSet<u64> = all.iter().map(|&id| issuer.explain(id).node()).collect();
    assert_eq!(machines.len(), 4, "every machine ID issued");
}
