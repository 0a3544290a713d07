//! Lease scenarios every leasing source must pass, run by each source's tests against its
//! real store.

use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant};

use vesta_embed::{Issuer, IssuerConfig};

use crate::proxy::Proxy;

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
