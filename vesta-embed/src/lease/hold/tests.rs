use std::time::Duration;

use vesta_core::{Epoch, GenMethod, IdType, Layout, Preset};

use super::*;

/// A host of its own: a record directory and a claim namespace no other test shares.
fn host(dir: &Path) -> HoldPlace {
    HoldPlace {
        dir: dir.to_owned(),
        also: None,
        namespace: format!("vesta-rs/test-{}/{}", std::process::id(), dir.display()),
    }
}

fn hold(
    place: &HoldPlace,
    layout: &Layout,
    method: GenMethod,
    machine: u64,
) -> Result<HostHold, StartError> {
    HostHold::acquire_at(place, layout, method, machine, Duration::ZERO)
}

fn record_path(place: &HoldPlace) -> PathBuf {
    std::fs::read_dir(&place.dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "hold"))
        .unwrap()
}

#[test]
fn the_hold_hands_a_clean_stop_token_to_the_next_holder_only() {
    let dir = tempfile::tempdir().unwrap();
    let place = host(dir.path());
    let layout = IdType::MinGranularity.layout();
    let mut first = hold(&place, layout, GenMethod::Embed, 5).unwrap();
    first.begin().unwrap();
    assert_eq!(first.last_clean_stop(), None);
    let err = hold(&place, layout, GenMethod::Embed, 5)
        .unwrap_err()
        .to_string();
    assert!(err.contains("machine 5 of vesta min-granularity"), "{err}");
    assert!(err.contains("on this host is held by"), "{err}");
    if cfg!(target_os = "linux") {
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
    }
    first.stopped("t1").unwrap();
    drop(first);

    // The next holder reads the token, and clears it before issuing anything.
    let mut second = hold(&place, layout, GenMethod::Embed, 5).unwrap();
    assert_eq!(second.last_clean_stop(), Some("t1"));
    second.begin().unwrap();
    drop(second);
    let third = hold(&place, layout, GenMethod::Embed, 5).unwrap();
    assert_eq!(
        third.last_clean_stop(),
        None,
        "the second did not stop cleanly"
    );
    // Another machine ID is another hold; so are spaces that never meet: max-peak (the type
    // bit), a REST server (the genMethod).
    hold(&place, layout, GenMethod::Embed, 6).unwrap();
    let _max_peak = hold(&place, IdType::MaxPeak.layout(), GenMethod::Embed, 5).unwrap();
    let _rest = hold(&place, layout, GenMethod::Rest, 5).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(record_path(&place))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o666, "every user may hold it next");
    }
}

/// Leaf and Twitter are one space, whatever either calls its layout; so is a custom layout
/// with Leaf's bits, and a REST server with `vesta gen` (no genMethod in them).
#[test]
fn one_space_under_two_names_has_one_holder() {
    let dir = tempfile::tempdir().unwrap();
    let place = host(dir.path());
    let leaf = hold(&place, &Preset::Leaf.layout(), GenMethod::Embed, 311).unwrap();
    for (layout, method) in [
        (Preset::Twitter.layout(), GenMethod::Embed),
        (Preset::Leaf.layout(), GenMethod::Rest),
        (Preset::Twitter.layout(), GenMethod::Server),
    ] {
        let err = hold(&place, &layout, method, 311).unwrap_err().to_string();
        assert!(err.contains("machine 311 of"), "{err}");
        assert!(err.contains("node bits 12-21"), "{err}");
        assert!(err.contains("whatever it calls its layout"), "{err}");
    }
    drop(leaf);
    hold(&place, &Preset::Twitter.layout(), GenMethod::Rest, 311).unwrap();
}

/// Two users' state files of one machine ID know nothing of each other: the host's record
/// refuses a start counted from another epoch than its last holder's, whatever the layout is
/// called, until retired.
#[test]
fn another_epoch_is_refused_under_any_name_until_retired() {
    let dir = tempfile::tempdir().unwrap();
    let place = host(dir.path());
    let leaf = Preset::Leaf.layout();
    let moved = Preset::Twitter
        .layout()
        .with_epoch(Epoch::from_unix_ms(leaf.epoch().unix_ms() + 2_000));
    let mut first = hold(&place, &leaf, GenMethod::Embed, 7).unwrap();
    first.begin().unwrap();
    drop(first);
    let refused = hold(&place, &moved, GenMethod::Embed, 7).unwrap_err();
    let path = record_path(&place);
    assert_eq!(
        refused.remedy(),
        Some(&vesta_core::Remedy::RetireHostHold { path: path.clone() })
    );
    let err = refused.to_string();
    assert!(err.contains("this host's hold record"), "{err}");
    assert!(err.contains("its last holder's, leaf"), "{err}");
    assert!(
        err.ends_with(&format!(
            "retire this host's hold record {}",
            path.display()
        )),
        "{err}"
    );
    let held = hold(&place, &leaf, GenMethod::Embed, 7).unwrap();
    let err = retire_at(&place, &path).unwrap_err().to_string();
    assert!(err.contains("stop it first"), "{err}");
    drop(held);
    assert!(retire_at(&place, &path).unwrap());
    hold(&place, &moved, GenMethod::Embed, 7).unwrap();
    assert!(!retire_at(&place, &dir.path().join("none")).unwrap());
}

/// A holder that issued nothing leaves the record as it found it: a later start in another
/// epoch is not refused, and an earlier clean stop is still continued.
#[test]
fn a_holder_that_issued_nothing_leaves_nothing_to_retire() {
    let dir = tempfile::tempdir().unwrap();
    let place = host(dir.path());
    let layout = Preset::UidGenerator.layout();
    let mut tried = hold(&place, &layout, GenMethod::Embed, 0).unwrap();
    tried.begin().unwrap();
    tried.unused().unwrap();
    drop(tried);
    let later = layout.with_epoch(Epoch::from_unix_ms(1_767_225_600_000));
    let mut moved = hold(&place, &later, GenMethod::Embed, 0).unwrap();
    moved.begin().unwrap();
    moved.stopped("kept").unwrap();
    drop(moved);
    let mut again = hold(&place, &later, GenMethod::Embed, 0).unwrap();
    assert_eq!(again.last_clean_stop(), Some("kept"));
    again.begin().unwrap();
    again.unused().unwrap();
    drop(again);
    let after = hold(&place, &later, GenMethod::Embed, 0).unwrap();
    assert_eq!(after.last_clean_stop(), Some("kept"), "put back as found");
}

/// A holder of a space that meets another's forgets that one's clean stop: its position is
/// no longer the last word once IDs of both may have been issued.
#[test]
fn a_meeting_space_forgets_the_others_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let place = host(dir.path());
    let leaf = Preset::Leaf.layout();
    let mut first = hold(&place, &leaf, GenMethod::Embed, 9).unwrap();
    first.begin().unwrap();
    first.stopped("leaf").unwrap();
    drop(first);
    let spec = vesta_core::LayoutSpec {
        name: "unsigned".into(),
        unit_ms: 1,
        epoch: leaf.epoch(),
        signed: false,
        fields: vec![
            vesta_core::FieldSpec::new("time", vesta_core::FieldKind::Time, 42),
            vesta_core::FieldSpec::new("worker", vesta_core::FieldKind::Node, 10),
            vesta_core::FieldSpec::new("seq", vesta_core::FieldKind::Seq, 12),
        ],
    };
    let unsigned = spec.build().unwrap();
    // Counted in other fields (time 22-63): refused until retired.
    let err = hold(&place, &unsigned, GenMethod::Embed, 9)
        .unwrap_err()
        .to_string();
    assert!(err.contains("counted in"), "{err}");
    assert!(retire_at(&place, &record_path(&place)).unwrap());
    let mut other = hold(&place, &unsigned, GenMethod::Embed, 9).unwrap();
    let err = hold(&place, &leaf, GenMethod::Embed, 9)
        .unwrap_err()
        .to_string();
    assert!(err.contains("held by"), "one at a time: {err}");
    other.begin().unwrap();
    drop(other);
    let err = hold(&place, &leaf, GenMethod::Embed, 9)
        .unwrap_err()
        .to_string();
    assert!(err.contains("counted in"), "{err}");
}

#[test]
fn tokens_differ() {
    assert_ne!(clean_stop_token(), clean_stop_token());
    assert_eq!(clean_stop_token().len(), 32);
}
