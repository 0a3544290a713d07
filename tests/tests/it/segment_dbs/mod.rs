//! Segment mode against real databases — an SQLite file, a PostgreSQL server and a MariaDB
//! server, each started by the test — with real `vesta` processes and a raw Leaf-style
//! allocator on the same tag:
//!
//! - two `vesta segment get` processes (one adaptive, one fixed step), a third one killed with
//!   SIGKILL mid-run, and Leaf's own fetch code interleaved: 0 duplicates in over 10M
//!   numbers, each process's numbers increasing;
//! - the database stopped mid-run: numbers keep coming from the buffers, calls fail cleanly
//!   and fast once they are drained, and issuing resumes by itself after a restart;
//! - clean shutdown gives the unused tail back, and leaves `max_id` alone when another
//!   allocator moved it;
//! - bad input (unknown tag, tag too long, bad count or step, missing table, wrong or
//!   unreachable database): one-line error, nothing written;
//! - the restore guard: `leaf_alloc` restored from a real backup (a copy of the SQLite file,
//!   `pg_dump`, `mariadb-dump`) is refused by a process with a state file, naming the floor,
//!   until `vesta segment raise` moves the tag past it; no number is issued twice.
//!
//! Each scenario is written once (`scenarios.rs`) and run on each database by its module
//! (`sqlite.rs`, `postgres.rs`, `mariadb.rs`, which start it and add what only it has); this
//! file holds what they share.

mod mariadb;
mod postgres;
mod scenarios;
mod sqlite;

use scenarios::{bad_input, give_back, outage, processes_and_leaf_never_duplicate, restore_guard};

use std::fs;
use std::ops::Range;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use vesta_segment::{GiveBackOutcome, Health, SegmentError, SegmentSection, Store, TagState};
use vesta_tests::bin::{vesta_cmd, vesta_fails, vesta_ok};
use vesta_tests::leaf::LeafAllocator;

/// Numbers each of the two long-running processes prints.
const PER_PROCESS: u64 = 5_000_000;

fn spawn_get(url: &str, tag: &str, count: u64, config: &Path, out: &Path) -> Child {
    let mut cmd = vesta_cmd(["segment", "get", tag, "--db", url, "-n", &count.to_string()]);
    cmd.arg("--config").arg(config);
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(out).expect("output file"))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning vesta segment get")
}

/// The complete lines of a process's output (a SIGKILL may cut the last one), checked to be
/// strictly increasing, as runs of consecutive numbers (one per segment, so the overlap checks
/// below are cheap even unoptimised).
fn read_runs(path: &Path) -> Vec<Range<u64>> {
    let text = fs::read(path).expect("reading output");
    let complete = match text.iter().rposition(|&b| b == b'\n') {
        Some(i) => &text[..=i],
        None => &[][..],
    };
    let mut runs: Vec<Range<u64>> = Vec::new();
    let mut n: u64 = 0;
    for &b in complete {
        if b != b'\n' {
            assert!(
                b.is_ascii_digit(),
                "not a number line in {}",
                path.display()
            );
            n = n * 10 + u64::from(b - b'0');
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.end == n => run.end = n + 1,
            Some(run) if run.end > n => {
                panic!(
                    "{}: {n} after {}: not increasing",
                    path.display(),
                    run.end - 1
                )
            }
            _ => runs.push(n..n + 1),
        }
        n = 0;
    }
    runs
}

/// No number in two processes' runs or in a Leaf segment: sorted by start, every range must
/// end before the next begins.
fn assert_disjoint(mut ranges: Vec<(Range<u64>, &str)>) {
    ranges.sort_by_key(|(r, _)| r.start);
    for w in ranges.windows(2) {
        assert!(
            w[0].0.end <= w[1].0.start,
            "{:?} ({}) and {:?} ({}) overlap: numbers issued twice",
            w[0].0,
            w[0].1,
            w[1].0,
            w[1].1
        );
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
