//! Machine IDs leased from a real etcd v3 (`[machine] source = "etcd"`, Debian's
//! `etcd-server`, started by each test):
//!
//! - issuers starting at once get distinct machine IDs, a full pool is refused naming it, a
//!   clean stop's ID is reused after its mark, and `vesta machine ls --etcd` shows it all;
//! - a SIGKILLed server keeps its ID until its TTL runs out (an immediate restart gets another
//!   ID); then the successor takes it and issues after the dead holder's mark;
//! - etcd killed under a holder fences it within ⅔ of the TTL; restarted, it issues again;
//! - a partition through a proxy (blackhole, cut) fences the holder before its ID can move to a
//!   successor, which starts after the holder's mark; healed, the old holder stays fenced;
//! - a static machine ID registered in etcd (`--machine N --etcd URL`) is refused to a second
//!   live holder;
//! - an unreachable etcd fails the start in one line;
//! - a start guard that waits longer than the lease (a mark ahead of the clock) keeps its claim
//!   alive through the wait and issues after the mark.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use vesta_core::{Epoch, IdFields};
use vesta_embed::lease::{EtcdClient, EtcdSettings, Mark};
use vesta_embed::{Issuer, IssuerConfig, MachineSource};
use vesta_tests::bin::{vesta_fails, vesta_ok};
use vesta_tests::etcd::Etcd;
use vesta_tests::lease;
use vesta_tests::proxy::Proxy;

/// An embedded issuer leasing from etcd at `url` under `root`: a 6 s TTL (fence window 4 s).
fn config(url: &str, root: &str, pool_size: u64) -> IssuerConfig {
    let mut c = IssuerConfig::default();
    c.machine.source = MachineSource::Etcd;
    c.machine.server_pool_start = Some(pool_size);
    c.machine.start_guard_max_wait_ms = 3_000;
    c.etcd.endpoints = vec![url.into()];
    c.etcd.root = root.into();
    c.etcd.ttl_ms = 6_000;
    c.etcd.timeout_ms = 3_000;
    c
}

#[test]
fn concurrent_claims_are_distinct_and_a_freed_id_is_reused_after_its_mark() {
    let etcd = Etcd::start();
    let url = etcd.url();
    let config = config(&url, "/vesta/concurrent", 4);
    let (issuers, mut ids) = lease::concurrent_claims_are_distinct(
        &config,
        "every machine ID of the embed pool 0..=3 under /vesta/concurrent is held",
    );
    let ls = [
        "machine",
        "ls",
        "--etcd",
        &url,
        "--root",
        "/vesta/concurrent",
    ];
    let listed = vesta_ok(&ls);
    assert!(listed.contains(": 4 machine IDs, 4 held"), "{listed}");
    lease::a_freed_id_is_reused_after_its_mark(issuers, &config, &mut ids);
    let listed = vesta_ok(&[&ls[..], &["--json"]].concat());
    assert_eq!(listed.lines().count(), 4, "{listed}");
    assert!(
        listed
            .lines()
            .all(|l| l.contains("\"holder\":null") && l.contains("\"mark_ms\":1")),
        "every ID released with its mark: {listed}"
    );
}

#[test]
fn a_killed_holder_keeps_its_id_until_its_lease_expires() {
    let etcd = Etcd::start();
    let url = etcd.url();
    lease::a_killed_server_keeps_its_id_until_its_lease_expires(
        "[machine]\nsource = \"etcd\"\n[etcd]\nroot = \"/vesta/killed\"\nttl_ms = 5000\n",
        &["--etcd", &url],
        &["--etcd", &url, "--root", "/vesta/killed"],
        Duration::from_millis(5_000),
    );
}

#[test]
fn a_duplicated_static_id_is_refused() {
    let etcd = Etcd::start();
    lease::a_duplicated_static_id_is_refused(&["--etcd", &etcd.url()], &["under /vesta/default"]);
}

#[test]
fn a_mark_of_another_epoch_is_refused_until_retired() {
    let etcd = Etcd::start();
    let url = etcd.url();
    // `config(&url, "/vesta/epochs", 1)` as a file, which `vesta gen --config` reads too.
    let toml = format!(
        "[machine]\nsource = \"etcd\"\nserver_pool_start = 1\nstart_guard_max_wait_ms = 3000\n\
         [etcd]\nendpoints = [\"{url}\"]\nroot = \"/vesta/epochs\"\nttl_ms = 6000\n\
         timeout_ms = 3000\n"
    );
    assert_eq!(
        IssuerConfig::from_toml_str(&toml).unwrap(),
        config(&url, "/vesta/epochs", 1)
    );
    lease::a_mark_of_another_epoch_is_refused_until_retired(
        &toml,
        0,
        vesta_core::MarkStore::Etcd {
            endpoints: url.clone(),
            root: "/vesta/epochs".into(),
        },
        &["--etcd", &url, "--root", "/vesta/epochs"],
        "/vesta/epochs/last/0",
    );
}

#[test]
fn a_killed_etcd_fences_the_holder_and_a_restarted_one_lets_it_issue_again() {
    let etcd = std::cell::RefCell::new(Etcd::start());
    let mut c = config(&etcd.borrow().url(), "/vesta/fenced", 4);
    c.etcd.ttl_ms = 3_000;
    c.etcd.timeout_ms = 1_000;
    lease::a_lost_store_fences_the_holder(
        c,
        "is not confirmed by etcd",
        &mut || etcd.borrow_mut().stop(),
        &mut || etcd.borrow_mut().restart(),
    );
}

fn partition(blackhole: bool) {
    let etcd = Etcd::start();
    let proxy = Proxy::start(([127, 0, 0, 1], etcd.port()).into());
    let config = |url: &str| {
        let mut c = config(url, "/vesta/partition", 1);
        c.etcd.ttl_ms = 3_000;
        c.etcd.timeout_ms = 1_000;
        c
    };
    vesta_tests::lease::a_partitioned_holder_is_fenced_before_its_id_moves(
        &config(&etcd.url()),
        &config(&format!("http://127.0.0.1:{}", proxy.port())),
        &proxy,
        blackhole,
    );
}

#[test]
fn a_blackholed_holder_is_fenced_before_its_id_moves() {
    partition(true);
}

#[test]
fn a_cut_off_holder_is_fenced_before_its_id_moves() {
    partition(false);
}

#[test]
fn an_unreachable_etcd_fails_the_start_in_one_line() {
    vesta_fails(
        &["gen", "--etcd", "http://127.0.0.1:1"],
        &["etcd http://127.0.0.1:1: /v3/lease/grant: connecting to 127.0.0.1:1"],
    );
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .try_into()
        .unwrap()
}

/// A mark left 5 s ahead of the clock (a holder whose clock ran ahead, or one whose lease ran
/// that far ahead) makes the successor's start guard wait about 5 s, more than twice etcd's
/// shortest lease (2 s): the claim must be kept alive through the wait, or the start fails with
/// "lost right after it was claimed" (found by CI, where a max-peak guard waited 2 s).
#[test]
fn a_start_guard_longer_than_the_lease_keeps_the_claim_alive() {
    let etcd = Etcd::start();
    let mut c = config(&etcd.url(), "/vesta/long-guard", 4);
    c.etcd.ttl_ms = 2_000;
    c.machine.start_guard_max_wait_ms = 10_000;
    let settings = EtcdSettings::from_config(&c).unwrap();
    let ahead = Duration::from_secs(5);
    let mark_ms = now_ms() + ahead.as_millis() as u64;
    let mark = Mark {
        mark_ms,
        last_time: 0,
        clean: true,
        written_ms: now_ms(),
        holder: "elsewhere:1".into(),
        layout: None,
        epoch_ms: None,
        fixed: None,
    };
    let client = EtcdClient::new(settings.clone());
    let written = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(client.create(
            &settings.mark_key(0),
            &serde_json::to_string(&mark).unwrap(),
            0,
        ));
    assert_eq!(written, Ok(true));

    let issuer = Issuer::start(c).expect("the start outlasts etcd's lease");
    let started_ms = now_ms();
    assert!(
        started_ms >= mark_ms,
        "started {} ms before the mark",
        mark_ms - started_ms
    );
    let id = issuer.next_id().unwrap();
    let fields = IdFields::decode(id);
    assert_eq!(fields.machine, 0, "{id}");
    assert!(
        fields.unix_ms(Epoch::VESTA) >= mark_ms,
        "{id}: in a unit before the mark"
    );
    // Still ours after more than a lease: the beats took over from the guard's keep-alives.
    std::thread::sleep(Duration::from_secs(3));
    let later = IdFields::decode(issuer.next_id().unwrap());
    assert_eq!(later.machine, 0);
    let listed = vesta_ok(&[
        "machine",
        "ls",
        "--etcd",
        &etcd.url(),
        "--root",
        "/vesta/long-guard",
        "--json",
    ]);
    assert!(
        listed
            .lines()
            .any(|l| l.contains("\"machine\":0") && !l.contains("\"holder\":null")),
        "{listed}"
    );
}
