//! A static machine ID's state file against an operator's mistakes, on an injected clock: a
//! clean stop continued at once, a restored or copied file never trusted backwards, two
//! holders of one file or one ID refused, a changed epoch or layout refused naming both, an
//! old file read and rewritten. Each test holds its own machine ID (the tests run at once and
//! the host hold is real).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use vesta_core::{Clock, Epoch, IdType, ManualClock};
use vesta_embed::{Issuer, IssuerConfig, StartError};

/// Mid-second, so "the same unit" really is one.
const T0: u64 = 1_700_000_000_400;

fn config(machine: u64, path: &Path, id_type: IdType) -> IssuerConfig {
    let mut c = IssuerConfig::default();
    c.id.id_type = Some(id_type);
    c.machine.id = Some(machine);
    c.machine.state_file = Some(path.to_owned());
    c
}

fn issue(issuer: &Issuer<Arc<ManualClock>>, n: u64) -> Vec<u64> {
    issuer.next_ids(n).unwrap().to_vec()
}

/// `vesta gen -n 1` twice in a row: the second start continues right after the first's last
/// ID, in the same second, without waiting.
#[test]
fn a_clean_stop_is_continued_at_once_in_the_same_unit() {
    for (machine, id_type) in [(10, IdType::MaxPeak), (10, IdType::MinGranularity)] {
        let dir = tempfile::tempdir().unwrap();
        let c = config(machine, &dir.path().join("v.state"), id_type);
        let clock = Arc::new(ManualClock::new(T0));
        let mut seen = HashSet::new();
        for round in 0..5 {
            let waits = clock.waits();
            let a = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
            let ids = issue(&a, 3);
            a.shutdown().unwrap();
            let x = a.explain(ids[0]);
            if round > 0 {
                assert_eq!(clock.waits(), waits, "{id_type}: round {round} waited");
                assert_eq!(
                    x.seq(),
                    3 * round,
                    "{id_type}: the next seq of the same unit"
                );
            }
            for id in ids {
                assert!(seen.insert(id), "{id_type}: {id} issued twice");
            }
        }
    }
}

/// A backup of the state file restored (a clean record, older than the last stop): it is not
/// the last word, so the start takes the floor it would take without any mark, and issues
/// nothing the runs after the backup issued.
#[test]
fn a_restored_older_clean_record_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.state");
    let c = config(11, &path, IdType::MaxPeak);
    let clock = Arc::new(ManualClock::new(T0));
    let a = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
    issue(&a, 2);
    drop(a);
    let backup = std::fs::read(&path).unwrap();
    // Later runs in the same second issue more.
    let waits = clock.waits();
    let mut later = Vec::new();
    for _ in 0..3 {
        let b = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
        later.extend(issue(&b, 100));
        drop(b);
    }
    assert_eq!(clock.waits(), waits, "clean restarts did not wait");
    std::fs::write(&path, backup).unwrap();
    let restored = Issuer::start_with_clock(c, clock.clone()).unwrap();
    assert!(
        clock.waits() > waits,
        "waited for the unit after now + tolerance"
    );
    let max = later.iter().max().unwrap();
    for id in issue(&restored, 1000) {
        assert!(id > *max, "{id} at or below {max}, issued after the backup");
    }
}

/// A restored crash record (a promise from ten seconds ago) and a copy of the file used from
/// another path: never worse than no mark at all, even with the clock stepped back within the
/// tolerance.
#[test]
fn a_stale_mark_is_never_trusted_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.state");
    let c = config(12, &path, IdType::MaxPeak);
    let clock = Arc::new(ManualClock::new(T0));
    let a = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
    let a_ids = issue(&a, 500);
    drop(a);
    // What a backup taken ten seconds earlier, while an issuer ran, holds.
    let stale_mark = T0 - 10_000;
    std::fs::write(
        &path,
        format!(
            "machine = 12\nsource = \"static\"\nmark_ms = {stale_mark}\nlast_time = 1\n\
             clean = false\nwritten_ms = {}\n\
             layout = \"time 30-59, seq 10-29, node 0-9, 1000 ms units\"\n\
             epoch_ms = 1420041600000\n",
            stale_mark - 3_000
        ),
    )
    .unwrap();
    clock.rewind(1_000);
    let b = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
    clock.rewind(1_000);
    let max = a_ids.iter().max().unwrap();
    for id in issue(&b, 100) {
        assert!(id > *max, "{id} at or below {max}");
    }
    drop(b);
    // The same file copied to another path: a second state file of machine 12.
    let copy = dir.path().join("copy.state");
    std::fs::copy(&path, &copy).unwrap();
    let d = Issuer::start_with_clock(config(12, &copy, IdType::MaxPeak), clock.clone()).unwrap();
    let e_ids = issue(&d, 10);
    drop(d);
    // The original file's clean record is no longer vouched for by the host.
    let waits = clock.waits();
    let e = Issuer::start_with_clock(c, clock.clone()).unwrap();
    assert!(
        clock.waits() > waits,
        "the copy's runs made the file's stop stale"
    );
    let f_ids = issue(&e, 10);
    assert!(
        f_ids.iter().min() > e_ids.iter().max(),
        "{f_ids:?} vs {e_ids:?}"
    );
}

/// Two issuers on one state file, or two state files of one machine ID on one host: the second
/// is refused in one line naming the holder, or waits its turn when told to.
#[test]
fn a_second_holder_is_refused_or_waits_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.state");
    let c = config(13, &path, IdType::MinGranularity);
    let clock = Arc::new(ManualClock::new(T0));
    let a = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
    let held = |r: Result<Issuer<Arc<ManualClock>>, StartError>| match r {
        Err(e @ StartError::Held { .. }) => e.to_string(),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("a second holder started"),
    };
    let same_file = held(Issuer::start_with_clock(c.clone(), clock.clone()));
    assert!(same_file.contains("v.state"), "{same_file}");
    assert!(
        same_file.contains(&format!("pid {} on host", std::process::id())),
        "{same_file}"
    );
    let other = dir.path().join("other.state");
    let same_id = held(Issuer::start_with_clock(
        config(13, &other, IdType::MinGranularity),
        clock.clone(),
    ));
    assert!(same_id.contains("machine 13"), "{same_id}");
    assert!(same_id.contains("on this host"), "{same_id}");
    // Another machine ID on its own file starts; another layout of the same ID too.
    Issuer::start_with_clock(config(14, &other, IdType::MinGranularity), clock.clone()).unwrap();
    let third = dir.path().join("third.state");
    Issuer::start_with_clock(config(13, &third, IdType::MaxPeak), clock.clone()).unwrap();

    // Told to wait (as `vesta gen` is), the second starts once the first stops.
    let mut waiting = c.clone();
    waiting.hold_wait = Duration::from_secs(30);
    let last = issue(&a, 1)[0];
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        drop(a);
    });
    let b = Issuer::start_with_clock(waiting, clock.clone()).unwrap();
    stopper.join().unwrap();
    assert!(issue(&b, 1)[0] > last);
}

/// The epoch changed under one state file (`--epoch` once, or `Z` written for Vesta's `+08:00`),
/// or the layout to one whose IDs may meet: refused in one line naming both and the way
/// forward. Vesta's other type, whose IDs never meet these, starts.
#[test]
fn another_epoch_or_layout_under_one_state_file_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.state");
    let c = config(15, &path, IdType::MaxPeak);
    let clock = Arc::new(ManualClock::new(T0));
    let first = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
    issue(&first, 1);
    drop(first);
    let mut moved = c.clone();
    moved.id.epoch = Some(Epoch::from_unix_ms(1_420_070_400_000));
    let refused =
        Issuer::start_with_clock(moved, clock.clone()).expect_err("started under another epoch");
    // The way forward, as data (the `vesta` binary spells it as its command line).
    assert_eq!(
        refused.remedy(),
        Some(&vesta_core::Remedy::RetireStateFile { path: path.clone() })
    );
    let err = refused.to_string();
    assert!(err.contains("machine 15"), "{err}");
    assert!(err.contains("2014-12-31T16:00:00.000Z"), "ours: {err}");
    assert!(err.contains("2015-01-01T00:00:00.000Z"), "theirs: {err}");
    assert!(
        err.ends_with(&format!("retire the state file {}", path.display())),
        "{err}"
    );
    // Leaf's layout on machine 15: its IDs may equal Vesta's, refused.
    let mut leaf = c.clone();
    leaf.id.layout = vesta_embed::config::LayoutChoice::Preset(vesta_core::Preset::Leaf);
    leaf.id.id_type = None;
    let err = Issuer::start_with_clock(leaf, clock.clone())
        .expect_err("started in another layout")
        .to_string();
    assert!(err.contains("time 22-62, seq 0-11"), "{err}");
    // The file is untouched by the refusals: the original start continues.
    drop(Issuer::start_with_clock(c.clone(), clock.clone()).unwrap());
    // Vesta's other type starts on it: its IDs never equal max-peak's (the type bit).
    let mut millis = c;
    millis.id.id_type = Some(IdType::MinGranularity);
    drop(Issuer::start_with_clock(millis, clock).unwrap());
}

/// A file written before marks carried their layout and epoch: read as before (its mark
/// floors the start), and rewritten with them.
#[test]
fn an_old_state_file_is_read_and_rewritten_with_layout_and_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.state");
    let mark_ms = T0 + 1_600;
    std::fs::write(
        &path,
        format!(
            "machine = 16\nsource = \"static\"\nmark_ms = {mark_ms}\nlast_time = 5\n\
             clean = true\nwritten_ms = {T0}\n"
        ),
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let a = Issuer::start_with_clock(config(16, &path, IdType::MaxPeak), clock.clone()).unwrap();
    let first = issue(&a, 1)[0];
    assert!(
        Epoch::VESTA.unix_ms() + a.explain(first).time() * 1000 >= mark_ms,
        "issued inside the old mark"
    );
    drop(a);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("layout = \"time 30-59, seq 10-29, node 0-9, 1000 ms units\""),
        "{text}"
    );
    assert!(text.contains("epoch_ms = 1420041600000"), "{text}");
}

/// A custom layout counting minutes or hours: its default rollback tolerance follows the unit
/// (capped at a minute) instead of failing on `rollback_tolerance_ms`, a key nobody set; a
/// start without a mark waits for the next unit (at most the tolerance plus one unit) and a
/// clean restart continues at once.
#[test]
fn a_layout_of_minutes_or_hours_starts_and_continues() {
    for (machine, unit_ms) in [(20, 60_000u64), (21, 3_600_000)] {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[id.layout]\nname = \"slow\"\nunit_ms = {unit_ms}\nepoch = \"2020-01-01T00:00:00Z\"\n\
             fields = [{{ kind = \"time\", bits = 31 }}, {{ kind = \"node\", bits = 10 }}, \
             {{ kind = \"seq\", bits = 22 }}]\n[machine]\nid = {machine}\nstate_file = {:?}\n",
            dir.path().join("slow.state")
        );
        let c = IssuerConfig::from_toml_str(&text).unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let a = Issuer::start_with_clock(c.clone(), clock.clone()).unwrap();
        let waited = clock.now_ms() - T0;
        assert!(waited <= 60_000 + unit_ms, "{unit_ms}: waited {waited} ms");
        let first = issue(&a, 2);
        drop(a);
        let waits = clock.waits();
        let b = Issuer::start_with_clock(c, clock.clone()).unwrap();
        assert_eq!(clock.waits(), waits, "{unit_ms}: a clean restart waited");
        assert!(issue(&b, 1)[0] > first[1]);
    }
}

/// A start that issued nothing (a layout already full, a run stopped at once) leaves the state
/// file and the host's record as it found them: a start in another epoch is not refused by
/// it, and a clean stop found before is still continued.
#[test]
fn a_run_that_issued_nothing_leaves_nothing_to_retire() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.state");
    let c = config(22, &path, IdType::MaxPeak);
    let clock = Arc::new(ManualClock::new(T0));
    drop(Issuer::start_with_clock(c.clone(), clock.clone()).unwrap());
    let mut moved = c.clone();
    moved.id.epoch = Some(Epoch::from_unix_ms(1_420_070_400_000));
    let b = Issuer::start_with_clock(moved.clone(), clock.clone()).unwrap();
    let last = issue(&b, 3)[2];
    drop(b);
    // Issued nothing after a clean stop: the clean stop is still the last word.
    drop(Issuer::start_with_clock(moved.clone(), clock.clone()).unwrap());
    let d = Issuer::start_with_clock(moved, clock.clone()).unwrap();
    let next = issue(&d, 1)[0];
    assert_eq!(
        next,
        last + (1 << 10),
        "continued right after the last ID, in the same second"
    );
}

/// The state file reached through a symlink or as a copy taken while it is in use: refused;
/// the symlink stays a symlink.
#[cfg(unix)]
#[test]
fn a_state_file_through_a_link_or_copied_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.state");
    let link = dir.path().join("link.state");
    std::os::unix::fs::symlink("v.state", &link).unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    // Started through the link: the file is written at its target.
    let a =
        Issuer::start_with_clock(config(23, &link, IdType::MinGranularity), clock.clone()).unwrap();
    issue(&a, 1);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(path.is_file());
    let copy = dir.path().join("copy.state");
    std::fs::copy(&path, &copy).unwrap();
    // Another machine ID, so only the file can refuse it.
    for (other, needle) in [(&path, "v.state"), (&copy, "or a copy of it")] {
        let err =
            Issuer::start_with_clock(config(24, other, IdType::MinGranularity), clock.clone())
                .expect_err("a second process on one state file")
                .to_string();
        assert!(err.contains(needle), "{err}");
        assert!(err.contains("its own state file"), "{err}");
    }
    drop(a);
}
