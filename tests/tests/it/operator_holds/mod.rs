//! Issue 46's operator mistakes, with real processes: a static machine ID is held by its ID
//! space, not its layout's name (Leaf and Twitter, a custom layout with Leaf's bits), on the
//! harness's hold directory and on the host's default; the epoch check is not dodged by a
//! rename; a state file is held by the file, whatever path reaches it; deleting the files vesta
//! keeps lets no second process in; every `vesta` process with a static machine ID takes the
//! hold, state file or not; and the smaller items.
//!
//! Each test either asserts the one-line refusal (the machine ID or the file, the holder's PID,
//! the hint) or books every ID handed out in a [`Ledger`] and finds none twice, and both where
//! both apply. Each runs on hosts of its own ([`Seat`]: a hold directory is a host, its kernel
//! claims included), except the one on the host's default, which uses a machine ID no other
//! test uses (677). A `vesta gen` that finds its machine ID held waits 10 s before it is
//! refused: the one test of that runs its refused runs at once.

mod paths;
mod smaller;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use vesta_tests::bin::{ServerChild, vesta_command};
use vesta_tests::operator::{Ledger, Seat, genids, ids_of, server_ids};

/// Leaf's (and Twitter's) epoch, ms, and the same moved two seconds either way.
const LEAF_EPOCH: u64 = 1_288_834_974_657;
const LATER_EPOCH: &str = "1288834976657";
const EARLIER_EPOCH: &str = "1288834972657";

/// The hint of a refused second holder of a machine ID.
const ONE_HOLDER: &str = "another process issues with this machine ID in this ID space on this \
                          host, whatever it calls its layout";
/// The hint of a refused second process on one state file.
const ONE_FILE: &str = "give each process its own state file";

/// A custom layout with Leaf's bits under a name of its own.
const ORDERS: &str = "[id.layout]\nname = \"orders\"\nunit_ms = 1\nepoch = 1288834974657\n\
                      fields = [\n  { kind = \"time\", bits = 41 },\n  \
                      { kind = \"node\", name = \"workerId\", bits = 10 },\n  \
                      { kind = \"seq\", name = \"sequence\", bits = 12 },\n]\n";
const LEAF: &str = "[id]\nlayout = \"leaf\"\n";
const TWITTER: &str = "[id]\nlayout = \"twitter\"\n";
const MIN_GRANULARITY: &str = "[id]\ntype = \"min-granularity\"\n";

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

/// Writes a config at `path`: `id` (an `[id]` or `[id.layout]` section), `[machine] id =
/// machine` and, if given, its state file.
fn config(path: &Path, id: &str, machine: u64, state: Option<&Path>) -> PathBuf {
    let state = state.map_or_else(String::new, |s| format!("state_file = {:?}\n", path_str(s)));
    std::fs::write(path, format!("{id}\n[machine]\nid = {machine}\n{state}")).unwrap();
    path.to_owned()
}

/// The start of the refusal of a second holder of `machine` by one calling its layout
/// `layout` (Leaf's node field).
fn machine_held(machine: u64, layout: &str) -> String {
    format!("machine {machine} of {layout} (node bits 12-21")
}

/// The holder a refusal names: the server's process.
fn held_by(server: &ServerChild) -> String {
    format!("is held by pid {}", server.child.id())
}

/// `vesta serve KIND --listen 127.0.0.1:0 ARGS`, to be refused.
fn serve_args<'a>(kind: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    [&["serve", kind, "--listen", "127.0.0.1:0"][..], args].concat()
}

/// Starts every command at once (stdout and stderr piped, each read on a thread of its own so
/// that no run blocks on a full pipe while it holds what the others wait for), then waits for
/// them all.
fn all_at_once(cmds: Vec<Command>) -> Vec<(String, Output)> {
    let runs: Vec<_> = cmds
        .into_iter()
        .map(|mut c| {
            let shown = c
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            let child = c
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn vesta");
            (shown, std::thread::spawn(move || child.wait_with_output()))
        })
        .collect();
    runs.into_iter()
        .map(|(shown, run)| {
            let out = run.join().expect("a reader").expect("wait for vesta");
            (shown, out)
        })
        .collect()
}

/// Books the IDs of runs that must all have succeeded.
fn book_all(ledger: &mut Ledger, runs: Vec<(String, Output)>) {
    for (i, (shown, out)) in runs.into_iter().enumerate() {
        assert!(
            out.status.success(),
            "vesta {shown}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ledger.add(format!("run {i}: vesta {shown}"), ids_of(&out));
    }
}

/// Asserts a run failed in one stderr line holding every needle, having printed no ID.
fn assert_refused(shown: &str, out: &Output, needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "vesta {shown} succeeded");
    assert!(out.stdout.is_empty(), "vesta {shown} printed IDs");
    assert_eq!(
        err.lines().count(),
        1,
        "vesta {shown}: not one line: {err:?}"
    );
    for n in needles {
        assert!(err.contains(n), "vesta {shown}: {err:?} lacks {n:?}");
    }
    err
}

/// The path a refusal names after `marker` (the rest of its line).
fn named_after<'a>(line: &'a str, marker: &str) -> &'a str {
    line.rsplit(marker).next().expect("the marker").trim()
}

// ---- One ID space, two names ----

/// `vesta gen --layout leaf --machine 311` twice beside the same with `--layout twitter`
/// twice, all at once on one host and user: one ID space, so they take turns on its hold and
/// on its one state file (named by the space), and none of the 100,000 IDs is handed out twice.
#[test]
fn gen_as_leaf_and_as_twitter_at_once_take_turns() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let runs = ["leaf", "twitter", "leaf", "twitter"]
        .map(|layout| {
            let mut c = seat.cmd(["gen", "--layout", layout, "--machine", "311"]);
            c.args(["-n", "25000"]);
            c
        })
        .into();
    let mut ledger = Ledger::new();
    book_all(&mut ledger, all_at_once(runs));
    assert_eq!(ledger.assert_none_twice("leaf and twitter"), 100_000);
    let own = seat.state_home.join("vesta");
    let states: Vec<String> = std::fs::read_dir(&own)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".state"))
        .collect();
    assert_eq!(states.len(), 1, "one state file of the space: {states:?}");
    assert!(states[0].starts_with("space-"), "{states:?}");
    assert!(
        seat.hold_dir.join("vesta-rs.node12-21.m311.hold").is_file(),
        "one record of machine 311 in the node field, whatever the name"
    );
}

/// The same with no `VESTA_HOLD_DIR` at all: the host's own hold (the kernel's names of the
/// host, the records in /var/lib/vesta/holds as root or where it exists, else
/// /var/tmp/vesta-rs). Machine 677, which no other test uses.
#[test]
fn gen_as_leaf_and_as_twitter_at_once_on_the_hosts_default_hold() {
    let state = tempfile::tempdir().unwrap();
    let runs = ["leaf", "twitter", "leaf", "twitter"]
        .map(|layout| {
            let mut c = vesta_command();
            c.env_remove("VESTA_HOLD_DIR")
                .env("XDG_STATE_HOME", state.path())
                .args(["gen", "--layout", layout, "--machine", "677", "-n", "25000"]);
            c
        })
        .into();
    let mut ledger = Ledger::new();
    book_all(&mut ledger, all_at_once(runs));
    assert_eq!(ledger.assert_none_twice("on the host's hold"), 100_000);
    let record = "vesta-rs.node12-21.m677.hold";
    assert!(
        ["/var/lib/vesta/holds", "/var/tmp/vesta-rs"]
            .iter()
            .any(|d| Path::new(d).join(record).is_file()),
        "{record} in neither default hold directory"
    );
}

/// A REST server `--layout leaf` and a TCP server `--layout twitter` on machine 950, each with
/// its own state file: whichever starts second is refused naming the machine ID and the first
/// one's PID; one after the other, their 50,000 IDs are all distinct.
#[test]
fn a_leaf_rest_server_and_a_twitter_tcp_server_on_one_machine_id_take_turns() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let file = |name: &str| root.path().join(name);
    let rest = config(&file("rest.toml"), LEAF, 950, Some(&file("rest.state")));
    let tcp = config(&file("tcp.toml"), TWITTER, 950, Some(&file("tcp.state")));
    let mut ledger = Ledger::new();

    let server = seat.serve("rest", &["--config", path_str(&rest)], &[]);
    seat.fails(
        &serve_args("tcp", &["--config", path_str(&tcp)]),
        &[&machine_held(950, "twitter"), &held_by(&server), ONE_HOLDER],
    );
    ledger.add("rest leaf", server_ids("rest", &server, 10_000));
    ledger.add("rest leaf, more", server_ids("rest", &server, 10_000));
    server.stop_cleanly();

    let server = seat.serve("tcp", &["--config", path_str(&tcp)], &[]);
    seat.fails(
        &serve_args("rest", &["--config", path_str(&rest)]),
        &[&machine_held(950, "leaf"), &held_by(&server), ONE_HOLDER],
    );
    ledger.add("tcp twitter", server_ids("tcp", &server, 20_000));
    server.stop_cleanly();

    let server = seat.serve("rest", &["--config", path_str(&rest)], &[]);
    ledger.add("rest leaf again", server_ids("rest", &server, 10_000));
    server.stop_cleanly();
    assert_eq!(ledger.assert_none_twice("rest leaf, tcp twitter"), 50_000);
}

/// A custom `[id.layout]` named `orders` with Leaf's bits is Leaf's space: `vesta gen` with it
/// and with `--layout leaf` at once take turns (100,000 IDs, none twice); a REST server with it
/// refuses a TCP server `--layout leaf` on its machine ID, which then issues after it.
#[test]
fn a_custom_layout_with_leafs_bits_is_one_space_with_leaf() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let orders = config(&root.path().join("orders.toml"), ORDERS, 312, None);
    let runs = [true, false, true, false]
        .map(|custom| {
            let mut c = seat.cmd(["gen"]);
            if custom {
                c.args(["--config", path_str(&orders)]);
            } else {
                c.args(["--layout", "leaf", "--machine", "312"]);
            }
            c.args(["-n", "25000"]);
            c
        })
        .into();
    let mut ledger = Ledger::new();
    book_all(&mut ledger, all_at_once(runs));

    let state = root.path().join("orders.state");
    let serving = config(&root.path().join("serve.toml"), ORDERS, 951, Some(&state));
    let server = seat.serve("rest", &["--config", path_str(&serving)], &[]);
    seat.fails(
        &serve_args("tcp", &["--layout", "leaf", "--machine", "951"]),
        &[&machine_held(951, "leaf"), &held_by(&server), ONE_HOLDER],
    );
    ledger.add("rest orders", genids(&server, 10_000));
    server.stop_cleanly();
    let server = seat.serve("tcp", &["--layout", "leaf", "--machine", "951"], &[]);
    ledger.add("tcp leaf", server_ids("tcp", &server, 10_000));
    server.stop_cleanly();
    assert_eq!(ledger.assert_none_twice("orders and leaf"), 120_000);
}

// ---- The epoch check is not dodged by a rename ----

/// The needles of a refusal of `machine`'s mark in `where_` (counted in Leaf's epoch) by a
/// start counted in `epoch`.
fn epoch_needles(machine: u64, where_: &str, epoch: &str) -> [String; 4] {
    [
        format!("machine {machine}'s mark in {where_}"),
        format!("({LEAF_EPOCH} ms)"),
        format!("({epoch} ms)"),
        "IDs of the two can be equal".into(),
    ]
}

fn strs(n: &[String]) -> Vec<&str> {
    n.iter().map(String::as_str).collect()
}

/// `vesta gen --layout LAYOUT --machine 313 -n N [--epoch EPOCH]`'s arguments, `gen` first.
fn gen_args(layout: &str, epoch: Option<&str>, n: &str) -> Vec<String> {
    let mut args = vec!["gen", "--layout", layout, "--machine", "313", "-n", n];
    args.extend(epoch.map(|e| ["--epoch", e]).into_iter().flatten());
    args.into_iter().map(str::to_owned).collect()
}

/// `vesta gen --layout leaf --machine 313`, then `--layout twitter` with the epoch moved 2 s
/// either way, on `gen`'s default state file (one per space, so the same file): refused naming
/// it and `vesta machine retire --state-file`; that retired, refused naming this host's hold
/// record (which remembers the leaf run's epoch) and `vesta machine retire --host-hold`; that
/// retired too, the earlier epoch (whose IDs lie above every one issued before) issues, and no
/// ID of the two runs is handed out twice.
#[test]
fn gen_under_another_name_and_epoch_is_refused_until_retired() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let mut ledger = Ledger::new();
    ledger.add(
        "leaf",
        seat.run_gen(&strs(&gen_args("leaf", None, "20000"))[1..]),
    );

    let mut state_line = String::new();
    for epoch in [LATER_EPOCH, EARLIER_EPOCH] {
        let mut needles = epoch_needles(313, "the state file ", epoch).to_vec();
        needles.push("vesta machine retire --state-file ".into());
        state_line = seat.fails(
            &strs(&gen_args("twitter", Some(epoch), "20000")),
            &strs(&needles),
        );
    }
    let state = named_after(&state_line, "vesta machine retire --state-file ");
    assert!(
        Path::new(state).starts_with(&seat.state_home),
        "{state_line}"
    );
    let said = seat.succeeds(&["machine", "retire", "--state-file", state]);
    assert!(said.starts_with("retired the state file"), "{said}");

    let mut needles = epoch_needles(313, "this host's hold record ", LATER_EPOCH).to_vec();
    needles.push("(its last holder's, leaf)".into());
    needles.push("vesta machine retire --host-hold ".into());
    let line = seat.fails(
        &strs(&gen_args("twitter", Some(LATER_EPOCH), "20000")),
        &strs(&needles),
    );
    let record = named_after(&line, "vesta machine retire --host-hold ");
    assert!(Path::new(record).starts_with(&seat.hold_dir), "{line}");
    let said = seat.succeeds(&["machine", "retire", "--host-hold", record]);
    assert!(said.starts_with("retired the host hold"), "{said}");

    let twitter = gen_args("twitter", Some(EARLIER_EPOCH), "20000");
    ledger.add(
        "twitter, 2 s earlier epoch",
        seat.run_gen(&strs(&twitter)[1..]),
    );
    assert_eq!(ledger.assert_none_twice("leaf, then twitter"), 40_000);
    // The leaf run's epoch is now the other one.
    seat.fails(
        &strs(&gen_args("leaf", None, "1")),
        &["machine 313's mark in ", "IDs of the two can be equal"],
    );
}

/// A REST server `--layout leaf` with its state file, then one `--layout twitter` with its own
/// and the epoch moved 2 s later: its state file is new, so this host's hold record refuses it,
/// naming itself and `vesta machine retire --host-hold`. Retired, the twitter server starts 2 s
/// earlier instead; the leaf one is then refused by the record in turn. Every ID distinct.
#[test]
fn rest_servers_under_another_name_and_epoch_are_refused_until_retired() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let file = |name: &str| root.path().join(name);
    let leaf = config(&file("leaf.toml"), LEAF, 952, Some(&file("leaf.state")));
    let twitter = config(&file("tw.toml"), TWITTER, 952, Some(&file("tw.state")));
    let mut ledger = Ledger::new();
    let server = seat.serve("rest", &["--config", path_str(&leaf)], &[]);
    ledger.add("leaf", genids(&server, 10_000));
    ledger.add("leaf, more", genids(&server, 10_000));
    server.stop_cleanly();

    let mut needles = epoch_needles(952, "this host's hold record ", LATER_EPOCH).to_vec();
    needles.push("(its last holder's, leaf)".into());
    needles.push("vesta machine retire --host-hold ".into());
    let later = ["--config", path_str(&twitter), "--epoch", LATER_EPOCH];
    let line = seat.fails(&serve_args("rest", &later), &strs(&needles));
    let record = named_after(&line, "vesta machine retire --host-hold ");
    assert!(Path::new(record).starts_with(&seat.hold_dir), "{line}");
    let said = seat.succeeds(&["machine", "retire", "--host-hold", record]);
    assert!(said.starts_with("retired the host hold"), "{said}");

    let earlier = ["--config", path_str(&twitter), "--epoch", EARLIER_EPOCH];
    let server = seat.serve("rest", &earlier, &[]);
    ledger.add("twitter, 2 s earlier epoch", genids(&server, 10_000));
    ledger.add("twitter, more", genids(&server, 10_000));
    server.stop_cleanly();
    assert_eq!(ledger.assert_none_twice("leaf, then twitter"), 40_000);
    let mut needles = epoch_needles(952, "this host's hold record ", "").to_vec();
    needles.truncate(2);
    needles.push("(its last holder's, twitter)".into());
    seat.fails(
        &serve_args("rest", &["--config", path_str(&leaf)]),
        &strs(&needles),
    );
}

// ---- Every process with a static machine ID holds it ----

/// Two servers with one static machine ID and no state file — REST and REST, TCP and TCP
/// (Vesta min-granularity), Leaf over REST and over TCP: the second is refused naming the
/// machine ID and the first one's PID.
#[test]
fn a_second_server_without_a_state_file_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str], &str); 3] = [
        (
            "rest",
            "rest",
            &["--type", "min-granularity"],
            "vesta min-granularity",
        ),
        (
            "tcp",
            "tcp",
            &["--type", "min-granularity"],
            "vesta min-granularity",
        ),
        ("rest", "tcp", &["--layout", "leaf"], "leaf"),
    ];
    for (i, (first, second, layout, name)) in cases.into_iter().enumerate() {
        let seat = Seat::new(root.path(), &i.to_string(), &i.to_string());
        let args = [layout, &["--machine", "956"]].concat();
        let server = seat.serve(first, &args, &[]);
        seat.fails(
            &serve_args(second, &args),
            &[
                &format!("machine 956 of {name} ("),
                &held_by(&server),
                ONE_HOLDER,
            ],
        );
        server.stop_cleanly();
    }
}

/// Vesta REST and TCP servers on one machine ID, and a REST server of the other type: their
/// genMethod (or type) bits differ, so the spaces never meet and all three run at once; their
/// 40,000 IDs are all distinct.
#[test]
fn vesta_servers_of_other_spaces_share_a_machine_id() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let min = ["--type", "min-granularity", "--machine", "957"];
    let rest = seat.serve("rest", &min, &[]);
    let tcp = seat.serve("tcp", &min, &[]);
    let peak = seat.serve("rest", &["--type", "max-peak", "--machine", "957"], &[]);
    let mut ledger = Ledger::new();
    for round in 0..2 {
        ledger.add(format!("rest {round}"), server_ids("rest", &rest, 5_000));
        ledger.add(format!("tcp {round}"), server_ids("tcp", &tcp, 10_000));
        ledger.add(format!("rest max-peak {round}"), genids(&peak, 5_000));
    }
    for s in [rest, tcp, peak] {
        s.stop_cleanly();
    }
    assert_eq!(ledger.assert_none_twice("three spaces"), 40_000);
}

/// `vesta gen` beside a Leaf REST server without a state file, after the hold directory's
/// files were deleted: `--layout leaf`, `--layout twitter`, the custom `orders` and one with a
/// state file of its own all wait their turn (10 s, at once) and are refused naming the
/// machine ID and the server's PID, printing no ID.
#[test]
fn gen_beside_a_server_without_a_state_file_is_refused_after_its_wait() {
    let root = tempfile::tempdir().unwrap();
    let seat = Seat::new(root.path(), "h", "u");
    let server = seat.serve("rest", &["--layout", "leaf", "--machine", "954"], &[]);
    let before = genids(&server, 1000);
    let deleted = paths::delete_files_in(&seat.hold_dir);
    assert!(deleted > 0, "the server's hold record was there to delete");
    let orders = config(&root.path().join("orders.toml"), ORDERS, 954, None);
    // Each a state file of its own (one the user's default), so that each waits for the
    // machine ID itself: runs on one state file wait for it first, and are refused naming it.
    let own = |name: &str| path_str(&root.path().join(name)).to_owned();
    let (own_1, own_2, own_3) = (own("1.state"), own("2.state"), own("3.state"));
    let runs: [(&str, Vec<&str>); 4] = [
        ("leaf", vec!["--layout", "leaf", "--machine", "954"]),
        (
            "twitter",
            vec![
                "--layout",
                "twitter",
                "--machine",
                "954",
                "--state-file",
                &own_1,
            ],
        ),
        (
            "orders",
            vec!["--config", path_str(&orders), "--state-file", &own_2],
        ),
        (
            "leaf",
            vec![
                "--layout",
                "leaf",
                "--machine",
                "954",
                "--state-file",
                &own_3,
            ],
        ),
    ];
    let cmds = runs
        .iter()
        .map(|(_, args)| {
            let mut c = seat.cmd(["gen"]);
            c.args(args).args(["-n", "1000"]);
            c
        })
        .collect();
    let held = held_by(&server);
    for ((name, _), (shown, out)) in runs.iter().zip(all_at_once(cmds)) {
        assert_refused(&shown, &out, &[&machine_held(954, name), &held, ONE_HOLDER]);
    }
    let mut ledger = Ledger::new();
    ledger.add("the server", before);
    ledger.add("the server, after", genids(&server, 1000));
    server.stop_cleanly();
    ledger.assert_none_twice("the server alone");
}
