//! Lease scenarios every leasing source must pass, run by each source's tests against its
//! real store.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use vesta_embed::{Issuer, IssuerConfig};

use crate::bin::{ServerChild, http, vesta_ok};
use crate::proxy::Proxy;

fn machine_of(id: u64) -> u64 {
    vesta_core::IdFields::decode(id).machine
}

/// Six issuers of `config` (a pool of four machine IDs, 0..=3) start at once: four get
/// distinct IDs, two are refused with `full` in the message; each issues 2,000 IDs, none twice.
/// Returns the four and every ID they issued.
pub fn concurrent_claims_are_distinct(
    config: &IssuerConfig,
    full: &str,
) -> (Vec<Issuer>, HashSet<u64>) {
    let barrier = Arc::new(Barrier::new(6));
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let (config, barrier) = (config.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                Issuer::start(config)
            })
        })
        .collect();
    let mut issuers = Vec::new();
    let mut refused = 0;
    for result in handles.into_iter().map(|h| h.join().unwrap()) {
        match result {
            Ok(issuer) => issuers.push(issuer),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(full), "{msg}");
                refused += 1;
            }
        }
    }
    assert_eq!((issuers.len(), refused), (4, 2), "a pool of 4 serves 4");
    let machines: HashSet<u64> = issuers.iter().map(|i| i.status().machine).collect();
    assert_eq!(machines, HashSet::from([0, 1, 2, 3]));
    let mut ids = HashSet::new();
    for issuer in &issuers {
        for _ in 0..2_000 {
            let id = issuer.next_id().unwrap();
            assert_eq!(machine_of(id), issuer.status().machine);
            assert!(ids.insert(id), "{id} issued twice");
        }
    }
    (issuers, ids)
}

/// A clean stop of one of `issuers` frees its ID at once: the next issuer of `config` takes
/// it and issues after its mark. Then all stop.
pub fn a_freed_id_is_reused_after_its_mark(
    mut issuers: Vec<Issuer>,
    config: &IssuerConfig,
    ids: &mut HashSet<u64>,
) {
    let gone = issuers.pop().unwrap();
    let gone_machine = gone.status().machine;
    let last = gone.next_id().unwrap();
    gone.shutdown().unwrap();
    let successor = Issuer::start(config.clone()).unwrap();
    assert_eq!(
        successor.status().machine,
        gone_machine,
        "the freed ID is reused"
    );
    let first = successor.next_id().unwrap();
    assert!(
        first > last,
        "{first} after {last}: the successor waited out the mark"
    );
    assert!(ids.insert(first));
    for issuer in issuers.iter().chain([&successor]) {
        issuer.shutdown().unwrap();
    }
}

/// A partition between a holder and its lease store, through a proxy (`blackhole`:
/// nothing answers; or `cut`: connections closed). The holder stops issuing within ⅔ of the
/// lease; a successor reaching the store takes the same ID (a pool of one) only once the
/// lease expired by the store's clock, and issues after the holder's mark; healed, the old
/// holder finds the ID gone and stays fenced. No ID is issued twice. Both configs lease for
/// 3 s (a fence window of 2 s) from a pool of one machine ID.
pub fn a_partitioned_holder_is_fenced_before_its_id_moves(
    direct: &IssuerConfig,
    proxied: &IssuerConfig,
    proxy: &Proxy,
    blackhole: bool,
) {
    let holder = Issuer::start(proxied.clone()).unwrap();
    let mut ids = HashSet::new();
    for _ in 0..1_000 {
        assert!(ids.insert(holder.next_id().unwrap()));
    }
    if blackhole {
        proxy.blackhole();
    } else {
        proxy.cut();
    }
    let partitioned = Instant::now();
    let refusal = loop {
        match holder.next_id() {
            Ok(id) => assert!(ids.insert(id), "{id} issued twice"),
            Err(e) => break e.to_string(),
        }
        // The fence window is ⅔ of a 3 s lease; the margin tells "never" from "late".
        assert!(
            partitioned.elapsed() < Duration::from_millis(2_000) + Duration::from_secs(5),
            "still issuing {:?} into the partition",
            partitioned.elapsed()
        );
    };
    assert!(refusal.contains("is not confirmed by"), "{refusal}");
    let holder_last = *ids.iter().max().unwrap();

    // The successor: refused while the lease lives, then it takes the same ID.
    let deadline = Instant::now() + Duration::from_secs(30);
    let successor = loop {
        match Issuer::start(direct.clone()) {
            Ok(issuer) => break issuer,
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("is held"), "{msg}");
                assert!(Instant::now() < deadline, "the lease never expired: {msg}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    };
    assert!(
        partitioned.elapsed() >= Duration::from_millis(2_000),
        "the ID moved {:?} after the partition, before the holder's fence window",
        partitioned.elapsed()
    );
    assert_eq!(successor.status().machine, 0);
    for _ in 0..1_000 {
        let id = successor.next_id().unwrap();
        assert!(
            id > holder_last,
            "{id} not after the holder's mark ({holder_last})"
        );
        assert!(ids.insert(id), "{id} issued twice");
    }

    // Healed: the old holder learns the ID is gone and stays fenced (the pool of one is held).
    proxy.heal();
    let healed = Instant::now();
    while healed.elapsed() < Duration::from_secs(3) {
        assert!(holder.next_id().is_err(), "the old holder issued again");
        thread::sleep(Duration::from_millis(20));
    }
    successor.shutdown().unwrap();
    let _ = holder.shutdown();
}

/// The store goes away under a holder of `config` (a 3 s lease): it stops issuing within ⅔ of
/// the lease (its own monotonic deadline), says why (`reason` in the refusal), and issues
/// again once `restart` brings the store back.
pub fn a_lost_store_fences_the_holder(
    config: IssuerConfig,
    reason: &str,
    stop: &mut dyn FnMut(),
    restart: &mut dyn FnMut(),
) {
    let issuer = Issuer::start(config).unwrap();
    let before = issuer.next_id().unwrap();
    stop();
    let stopped = Instant::now();
    let refusal = loop {
        match issuer.next_id() {
            Ok(_) => {}
            Err(e) => break e.to_string(),
        }
        // The fence window is ⅔ of 3 s; the margin tells "never" from "late".
        assert!(
            stopped.elapsed() < Duration::from_millis(2_000) + Duration::from_secs(5),
            "still issuing {:?} after the store stopped",
            stopped.elapsed()
        );
        thread::sleep(Duration::from_millis(10));
    };
    assert!(
        refusal.contains(reason) && refusal.contains("not issuing until it is"),
        "{refusal}"
    );
    restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        if let Ok(id) = issuer.next_id() {
            break id;
        }
        assert!(Instant::now() < deadline, "never issued again");
        thread::sleep(Duration::from_millis(50));
    };
    assert!(after > before);
    issuer.shutdown().unwrap();
}

/// An ID from `/genid` of a REST server.
pub fn genid(server: &ServerChild) -> u64 {
    let (status, body) = http(&server.addr, "GET", "/genid");
    assert_eq!(status, 200, "{body}");
    body.trim().parse().unwrap()
}

/// True if `vesta machine ls LS --json` shows `machine` free: no row, no holder, or a lease
/// with nothing left.
fn free_in_listing(ls: &[&str], machine: u64) -> bool {
    let listed = vesta_ok(&[&["machine", "ls"], ls, &["--json"]].concat());
    let row = format!("\"machine\":{machine},");
    listed.lines().filter(|l| l.contains(&row)).all(|l| {
        l.contains("\"holder\":null")
            || l.contains("\"holder\":\"\"")
            || l.contains("\"lease_left_ms\":0,")
    })
}

/// A `vesta serve rest` leasing with `conf` (a config file's text) and `args`, SIGKILLed: its
/// ID stays held while its lease lives (an immediate restart gets another ID), and frees up
/// once the lease (`lease`, by the store's clock) expired, at least half of it after the kill
/// (the last renewal was at most a beat before); the next server takes it and issues above
/// everything the dead one issued. `ls` are the `vesta machine ls` arguments of the store.
pub fn a_killed_server_keeps_its_id_until_its_lease_expires(
    conf: &str,
    args: &[&str],
    ls: &[&str],
    lease: Duration,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rest.toml");
    std::fs::write(&path, conf).unwrap();
    let args = [&["--config", path.to_str().unwrap()], args].concat();
    let server = || ServerChild::start("rest", &args, &[]);
    let mut first = server();
    let mut issued = HashSet::new();
    let mut dead_last = 0;
    for _ in 0..200 {
        dead_last = genid(&first);
        assert!(issued.insert(dead_last));
    }
    let dead_machine = machine_of(dead_last);
    assert_eq!(dead_machine, 924, "the lowest ID of the server pool");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let killed = Instant::now();

    // At once: the dead holder's lease lives, so the new server takes another ID.
    let second = server();
    let id = genid(&second);
    assert_ne!(
        machine_of(id),
        dead_machine,
        "a live lease is never taken over"
    );
    assert!(issued.insert(id));

    // Once the lease expired by the store's clock, the dead one's ID is free again.
    while !free_in_listing(ls, dead_machine) {
        assert!(
            killed.elapsed() < lease + Duration::from_secs(10),
            "the dead holder's lease of {lease:?} never expired"
        );
        thread::sleep(Duration::from_millis(100));
    }
    assert!(
        killed.elapsed() >= lease / 2,
        "machine {dead_machine} was free {:?} after the kill, inside its lease of {lease:?}",
        killed.elapsed()
    );
    let third = server();
    let id = genid(&third);
    assert_eq!(machine_of(id), dead_machine, "an expired lease is taken");
    assert!(
        id > dead_last,
        "{id} after {dead_last}: the mark was waited out"
    );
    assert!(issued.insert(id));
    for server in [second, third] {
        let rest = server.stop_cleanly();
        assert!(rest.contains("released"), "{rest}");
    }
}

/// A static machine ID registered in a lease store (`--machine N` with the store's `args`): a
/// second server started with the same ID (a copied config) is refused at start in one line
/// naming the holder and each of `named` (the scope or root, the remedy); another ID starts;
/// once the first stops cleanly, the ID starts again after its mark.
pub fn a_duplicated_static_id_is_refused(args: &[&str], named: &[&str]) {
    let server = |id: &str| ServerChild::start("rest", &[&["--machine", id], args].concat(), &[]);
    let first = server("930");
    let last = genid(&first);
    assert_eq!(machine_of(last), 930);
    let line = crate::bin::vesta_fails(
        &[
            &[
                "serve",
                "rest",
                "--listen",
                "127.0.0.1:0",
                "--machine",
                "930",
            ],
            args,
        ]
        .concat(),
        &[
            "machine 930 is held by",
            "another issuer runs with this static machine ID",
        ],
    );
    for named in named {
        assert!(line.contains(named), "{named:?} not in {line}");
    }
    let other = server("931");
    assert_eq!(machine_of(genid(&other)), 931, "another static ID starts");
    first.stop_cleanly();
    let again = server("930");
    let id = genid(&again);
    assert!(id > last, "{id} after {last}: the mark was waited out");
    for server in [other, again] {
        server.stop_cleanly();
    }
}

/// A store's mark counted in another epoch (issue 30): an issuer of `config_toml` (a pool of
/// one machine ID, `machine`, in `store`) stops cleanly, leaving its mark; the same config with
/// a later epoch is refused in one line naming both epochs and the remedy: as data and words
/// by the library (`held_in` names the store), as the command `vesta machine retire MACHINE
/// RETIRE_ARGS` by `vesta gen`. That command is refused while the ID is held, then retires the
/// mark, after which the new epoch starts (and a second retire finds its new mark).
pub fn a_mark_of_another_epoch_is_refused_until_retired(
    config_toml: &str,
    machine: u64,
    store: vesta_core::MarkStore,
    retire_args: &[&str],
    held_in: &str,
) {
    let config = IssuerConfig::from_toml_str(config_toml).unwrap();
    let first = Issuer::start(config.clone()).unwrap();
    assert_eq!(first.status().machine, machine);
    first.next_id().unwrap();
    first.shutdown().unwrap();
    drop(first);

    const LATER: u64 = 1_451_606_400_000;
    let mut moved = config.clone();
    moved.id.epoch = Some(vesta_core::Epoch::from_unix_ms(LATER));
    let refused = Issuer::start(moved.clone()).expect_err("started under another epoch");
    let remedy = vesta_core::Remedy::RetireMark { machine, store };
    assert_eq!(refused.remedy(), Some(&remedy));
    let err = refused.to_string();
    for needle in [
        &format!("machine {machine}'s mark in"),
        held_in,
        "2014-12-31T16:00:00.000Z",
        "2016-01-01T00:00:00.000Z",
    ] {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    assert!(err.ends_with(&remedy.words().to_string()), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // The command line says the command to run: exactly the one run below.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vesta.toml");
    std::fs::write(&file, config_toml).unwrap();
    let command = format!("vesta machine retire {machine} {}", retire_args.join(" "));
    let line = crate::bin::vesta_fails(
        &[
            "gen",
            "--config",
            file.to_str().unwrap(),
            "--epoch",
            &LATER.to_string(),
        ],
        &[&format!("machine {machine}'s mark in"), held_in, &command],
    );
    assert!(line.trim_end().ends_with(&command), "{line}");

    let machine_arg = machine.to_string();
    let retire = [
        &["machine", "retire", machine_arg.as_str()][..],
        retire_args,
    ]
    .concat();
    let holder = Issuer::start(config.clone()).unwrap();
    crate::bin::vesta_fails(&retire, &["held by"]);
    holder.shutdown().unwrap();
    drop(holder);
    let said = vesta_ok(&retire);
    assert!(
        said.contains(&format!("retired the mark of machine {machine}")),
        "{said}"
    );
    let again = Issuer::start(moved).unwrap();
    again.next_id().unwrap();
    again.shutdown().unwrap();
}
