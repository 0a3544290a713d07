//! Issue 30's operator mistakes, with real processes: two processes on one state file, an older
//! copy of the state file restored, the epoch changed under it, `vesta gen` run in parallel as
//! `xargs -P4` runs it (by one user and by two), and a clean restart against a crash. Each test
//! either asserts the one-line refusal or books every ID handed out in a [`Ledger`] and finds
//! none twice, for Vesta's two layouts and a peer's (Leaf) where it applies. Each test runs on
//! hosts and users of its own ([`Seat`]: a host-hold directory and a state directory), so tests
//! running at once never share a hold. Nothing asserts wall time: a wait shows as the start
//! guard's log line and in the IDs' time fields.
//!
//! This file holds the layouts and helpers the tests share; `state_files.rs` has the mistakes
//! made on one state file (two processes, a restored copy, a changed epoch), `parallel.rs` the
//! parallel `vesta gen` runs, `restarts.rs` restarts and moves of a static machine ID.

mod parallel;
mod restarts;
mod state_files;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use vesta_core::IdFields;
use vesta_tests::bin::{ServerChild, http, vesta};
use vesta_tests::operator::{Ledger, Seat, genids, ids_of, server_ids};

/// A layout family: its `[id]` section and the same as `vesta gen` flags.
#[derive(Clone, Copy, Debug)]
struct Family {
    name: &'static str,
    id_section: &'static str,
    flags: [&'static str; 2],
}

const MAX_PEAK: Family = Family {
    name: "max-peak",
    id_section: "[id]\ntype = \"max-peak\"\n",
    flags: ["--type", "max-peak"],
};
const MIN_GRANULARITY: Family = Family {
    name: "min-granularity",
    id_section: "[id]\ntype = \"min-granularity\"\n",
    flags: ["--type", "min-granularity"],
};
const LEAF: Family = Family {
    name: "leaf",
    id_section: "[id]\nlayout = \"leaf\"\n",
    flags: ["--layout", "leaf"],
};

/// Vesta's epoch (2015-01-01T00:00:00+08:00) as the refusal names it, and the one an operator
/// gets by writing `Z` for `+08:00`.
const VESTA_EPOCH: &str = "2014-12-31T16:00:00.000Z (1420041600000 ms)";
const Z_EPOCH: &str = "2015-01-01T00:00:00.000Z (1420070400000 ms)";

/// The log a test reads a start's wait from: errors, and the start guard's lines (info).
const GUARD_LOG: &str = "error,vesta_embed::lease::rules=info";
/// What the start guard logs when it waits (nothing when a start continues a clean stop).
const GUARD_WAITS: &str = "start guard: waiting";

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Writes a config: `family`'s `[id]` (plus `id_extra`), machine `machine` with the state file
/// `state` (rewritten every second, as by default: a running issuer's promise reaches 3 s
/// ahead, which a restart after a crash, or on a copy taken while it ran, waits out).
fn config(path: &Path, family: Family, id_extra: &str, machine: u64, state: &Path) -> PathBuf {
    std::fs::write(
        path,
        format!(
            "{}{id_extra}\n[machine]\nid = {machine}\nstate_file = {:?}\n",
            family.id_section,
            path_str(state)
        ),
    )
    .unwrap();
    path.to_owned()
}

/// Starts `vesta gen ARGS` on `seat` with its stdout piped.
fn spawn_gen(seat: &Seat, args: &[&str]) -> std::process::Child {
    seat.cmd(["gen"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}
