//! A holder process killed with SIGKILL (the real `vesta gen --zk` binary): its machine ID stays
//! claimed until its session expires, then a new holder takes it, waits out the crashed holder's
//! stale-mark window on a clock that runs behind, and issues nothing the dead one issued.

use std::fs;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vesta_core::{Clock, ManualClock};
use vesta_embed::lease::{ZkSettings, inspect};
use vesta_embed::{Issuer, IssuerConfig, MachineSource, SystemClock};
use vesta_tests::bin::vesta_cmd;
use vesta_tests::zk::ZkServer;

const ROOT: &str = "/vesta/crash";

fn config_toml(connect: &str) -> String {
    format!(
        "[machine]\nsource = \"zookeeper\"\nserver_pool_start = 1\nstart_guard_max_wait_ms = 5000\n\n\
         [zookeeper]\nconnect = \"{connect}\"\nroot = \"{ROOT}\"\nsession_timeout_ms = 1500\n\
         report_interval_ms = 300\nconnect_timeout_ms = 3000\n"
    )
}

#[test]
fn killed_holder_frees_its_id_after_the_session_timeout_and_no_id_repeats() {
    let zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("vesta.toml");
    fs::write(&conf, config_toml(&zk.connect())).unwrap();
    let config = IssuerConfig::from_toml_file(&conf).unwrap();
    assert_eq!(config.machine.source, MachineSource::Zookeeper);
    let settings = ZkSettings::from_config(&config).unwrap();

    // The holder: a real `vesta gen` process issuing for far longer than the test runs.
    let out_path = dir.path().join("holder.out");
    let mut holder = vesta_cmd(["gen", "--config"])
        .arg(&conf)
        .args(["-n", "50000000"])
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = holder.id();
    let start = Instant::now();
    loop {
        let held = inspect(&settings)
            .map(|rows| {
                rows.iter()
                    .any(|r| r.held && r.claim.as_ref().is_some_and(|c| c.pid == pid))
            })
            .unwrap_or(false);
        if held && fs::metadata(&out_path).map(|m| m.len()).unwrap_or(0) > 1_000_000 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the holder never issued"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(700));
    holder.kill().unwrap(); // SIGKILL: no final mark, no release
    let killed = Instant::now();
    let killed_wall = SystemClock::precise().now_ms();
    holder.wait().unwrap();

    // Right after the crash the ID is still claimed by the dead session.
    let err = Issuer::start(config.clone()).unwrap_err().to_string();
    assert!(err.contains("pool exhausted"), "{err}");
    let rows = inspect(&settings).unwrap();
    let stale = rows[0].mark.clone().unwrap();
    assert!(!stale.clean, "a crashed holder leaves an unclean mark");
    assert!(stale.mark_ms > killed_wall - 1500, "the mark is recent");

    // A new holder on a clock one second behind the dead one's: it gets the ID once the
    // session expires, then must wait out the window the dead holder promised.
    let clock = Arc::new(ManualClock::new(killed_wall - 1000));
    let successor = loop {
        match Issuer::start_with_clock(config.clone(), clock.clone()) {
            Ok(i) => break i,
            Err(e) => {
                assert!(e.to_string().contains("pool exhausted"), "{e}");
                assert!(
                    killed.elapsed() < Duration::from_secs(15),
                    "the ID never came free"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let freed_after = killed.elapsed();
    assert!(
        freed_after >= Duration::from_millis(1000),
        "freed after {freed_after:?}, before the 1.5 s session could expire"
    );
    assert!(clock.waits() >= 1, "the start guard did not wait");
    assert!(
        clock.now_ms() >= stale.mark_ms,
        "issuing began before the stale mark"
    );
    let new_ids = successor.next_ids(100_000).unwrap().to_vec();

    // Every ID the dead holder got out (a SIGKILL loses its unflushed buffer) is below the
    // successor's first, on the same machine ID, and none repeats.
    let file = BufReader::new(fs::File::open(&out_path).unwrap());
    let mut old_max = 0;
    let mut old_count = 0u64;
    for line in file.lines() {
        let line = line.unwrap();
        // The last line may be cut mid-number by the kill.
        let Ok(id) = line.parse::<u64>() else {
            continue;
        };
        if line.len() < 18 {
            continue;
        }
        old_max = old_max.max(id);
        old_count += 1;
    }
    assert!(old_count > 50_000, "only {old_count} IDs from the holder");
    let machine = |id| vesta_core::IdFields::decode(id).machine;
    assert_eq!(machine(old_max), 0);
    assert!(new_ids.iter().all(|&id| machine(id) == 0));
    assert!(
        new_ids[0] > old_max,
        "successor's first ID {} not above the dead holder's last {old_max}",
        new_ids[0]
    );
}
