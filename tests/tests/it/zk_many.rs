//! A large run: several in-process issuers and `vesta gen` processes contend for a pool of four
//! machine IDs for several seconds, restarting over and over (clean shutdowns and SIGKILLs), so
//! IDs change hands within the same second again and again. Every ID is counted: no duplicate.

use std::fs;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use vesta_embed::{Issuer, IssuerConfig};
use vesta_tests::bin::vesta_cmd;
use vesta_tests::zk::ZkServer;

const RUN: Duration = Duration::from_secs(10);

fn config_toml(connect: &str) -> String {
    format!(
        "[machine]\nsource = \"zookeeper\"\nserver_pool_start = 4\nstart_guard_max_wait_ms = 5000\n\n\
         [zookeeper]\nconnect = \"{connect}\"\nroot = \"/vesta/many\"\nsession_timeout_ms = 1500\n\
         report_interval_ms = 300\nconnect_timeout_ms = 3000\n"
    )
}

/// Starts an issuer, retrying while the pool is exhausted (IDs held by killed processes free
/// up when their sessions expire).
fn start(config: &IssuerConfig, stop: &AtomicBool) -> Option<Issuer> {
    while !stop.load(Ordering::Relaxed) {
        match Issuer::start(config.clone()) {
            Ok(i) => return Some(i),
            Err(e) if e.to_string().contains("pool exhausted") => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("start failed: {e}"),
        }
    }
    None
}

fn read_ids(path: &std::path::Path, into: &mut Vec<u64>) {
    let file = BufReader::new(fs::File::open(path).unwrap());
    for line in file.lines() {
        let line = line.unwrap();
        // A SIGKILL may cut the last line; IDs here have 18 digits.
        if line.len() >= 18
            && let Ok(id) = line.parse()
        {
            into.push(id);
        }
    }
}

#[test]
fn many_issuers_with_restarts_and_kills_issue_no_duplicate() {
    let zk = ZkServer::start();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("vesta.toml");
    fs::write(&conf, config_toml(&zk.connect())).unwrap();
    let config = IssuerConfig::from_toml_file(&conf).unwrap();
    let stop = Arc::new(AtomicBool::new(false));

    // Three in-process issuers, each restarting every few hundred IDs-batches.
    let workers: Vec<_> = (0..3u64)
        .map(|w| {
            let (config, stop) = (config.clone(), stop.clone());
            thread::spawn(move || {
                let mut ids = Vec::new();
                let mut restarts = 0u64;
                let mut round = w;
                while let Some(issuer) = start(&config, &stop) {
                    restarts += 1;
                    for k in 0..(3 + round % 5) {
                        // Mix single IDs and batches of varying size.
                        ids.push(issuer.next_id().unwrap());
                        let batch = issuer.next_ids(1 + (round * 7919 + k) % 40_000).unwrap();
                        ids.extend(batch.iter());
                    }
                    round += 1;
                    issuer.shutdown().unwrap();
                }
                (ids, restarts)
            })
        })
        .collect();

    // Processes: `vesta gen` runs, every other one killed with SIGKILL midway.
    let mut files = Vec::new();
    let mut kills = 0;
    let mut completed = 0;
    let start_time = Instant::now();
    let mut n = 0;
    while start_time.elapsed() < RUN {
        let path = dir.path().join(format!("gen{n}.out"));
        let mut child: Child = vesta_cmd(["gen", "--config"])
            .arg(&conf)
            .args(["-n", "300000"])
            .stdout(fs::File::create(&path).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if n % 2 == 1 {
            thread::sleep(Duration::from_millis(400));
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap();
                kills += 1;
            }
        }
        if child.wait().unwrap().success() {
            completed += 1;
        }
        files.push(path);
        n += 1;
    }
    stop.store(true, Ordering::Relaxed);

    let mut all = Vec::new();
    let mut restarts = 0;
    for w in workers {
        let (ids, r) = w.join().unwrap();
        all.extend(ids);
        restarts += r;
    }
    let in_process = all.len();
    for f in &files {
        read_ids(f, &mut all);
    }
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    let duplicates = total - all.len();
    eprintln!(
        "{total} IDs ({in_process} in-process over {restarts} leases, {} from {} `vesta gen` \
         runs: {completed} completed, {kills} killed, the rest refused while the pool was \
         full): {duplicates} duplicates",
        total - in_process,
        files.len()
    );
    assert!(completed >= 1, "no `vesta gen` run completed");
    assert!(restarts >= 10, "only {restarts} leases");
    assert!(kills >= 2, "only {kills} kills");
    assert!(total > 1_000_000, "only {total} IDs");
    assert_eq!(duplicates, 0);
}
