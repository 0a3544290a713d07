//! The real `vesta` binary: explain, make, gen and layout, including every bad-input path.
//! Bad input must exit non-zero with exactly one line on stderr naming the field or token.
//!
//! This file has the helpers and explain, make and layout on good input; `generate.rs` has `vesta
//! gen`, `refusals.rs` every bad input and its one line.

mod generate;
mod refusals;

use std::io::Write;
use std::process::{Output, Stdio};

use serde_json::Value;
use vesta_core::{GenMethod, IdFields, IdType};
use vesta_tests::bin::vesta_cmd;

fn run(args: &[&str]) -> Output {
    run_with_stdin(args, None)
}

fn run_with_stdin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = vesta_cmd(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn vesta");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("vesta output")
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "{args:?} wrote to stderr");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Asserts a failure with one stderr line containing every needle.
fn fails(args: &[&str], needles: &[&str]) {
    fails_with_stdin(args, None, needles)
}

fn fails_with_stdin(args: &[&str], stdin: Option<&str>, needles: &[&str]) {
    let out = run_with_stdin(args, stdin);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(
        err.lines().count(),
        1,
        "{args:?}: stderr is not one line: {err:?}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
    }
}

fn make(args: &[&str]) -> u64 {
    let mut all = vec!["make"];
    all.extend_from_slice(args);
    ok(&all).trim().parse().expect("make prints a u64")
}

#[test]
fn make_then_explain_round_trips_every_field() {
    let id = make(&[
        "--time",
        "1000",
        "--seq",
        "7",
        "--machine",
        "1001",
        "--type",
        "min-granularity",
        "--gen-method",
        "rest",
        "--version",
        "0",
    ]);
    let line = ok(&["explain", "--json", &id.to_string()]);
    let v: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["id"], id.to_string());
    assert_eq!(v["version"], 0);
    assert_eq!(v["type"], 1);
    assert_eq!(v["genMethod"], 2);
    assert_eq!(v["time"], 1000);
    assert_eq!(v["seq"], 7);
    assert_eq!(v["machine"], 1001);
    assert_eq!(v["timestamp"], "2014-12-31T16:00:01.000Z");
}

#[test]
fn make_uses_vesta_defaults_and_takes_rfc3339_time() {
    let id = make(&[
        "--time",
        "2024-01-01T00:00:00.999Z",
        "--seq",
        "1",
        "--machine",
        "2",
    ]);
    let f = IdFields::decode(id);
    assert_eq!(
        (f.id_type, f.gen_method, f.version),
        (IdType::MaxPeak, GenMethod::Embed, 0)
    );
    assert_eq!(f.time, (1_704_067_200_000 - 1_420_041_600_000) / 1000);
    assert_eq!((f.seq, f.machine), (1, 2));
}

#[test]
fn version_one_ids_explain_from_their_java_long_view() {
    let id = make(&[
        "--time",
        "5",
        "--seq",
        "0",
        "--machine",
        "0",
        "--version",
        "1",
    ]);
    let java = (id as i64).to_string();
    assert!(java.starts_with('-'));
    let table = ok(&["explain", &java]);
    assert!(table.contains(&format!("id         {id}")), "{table}");
    assert!(table.contains(&format!("java long  {java}")), "{table}");
    assert!(table.contains("version    1"), "{table}");
}

#[test]
fn explain_table_names_fields_types_and_layout() {
    let table = ok(&["explain", "0x4000000000100401"]);
    for needle in [
        "type       1 (min-granularity)",
        "genMethod  0 (embed)",
        "time       1 milliseconds since the epoch",
        "timestamp  2014-12-31T16:00:00.001Z",
        "seq        1",
        "machine    1",
        "layout     min-granularity: version 63-63, type 62-62, genMethod 60-61, time 20-59, seq 10-19, machine 0-9",
    ] {
        assert!(table.contains(needle), "{table} lacks {needle}");
    }
}

#[test]
fn explain_reads_stdin_one_id_per_line_and_honours_the_epoch() {
    let out = run_with_stdin(
        &["explain", "--json", "--epoch", "0"],
        Some("1073741824\n\n0x40000000\n"),
    );
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for v in lines {
        assert_eq!(v["time"], 1);
        assert_eq!(v["timestamp"], "1970-01-01T00:00:01.000Z");
    }
}

#[test]
fn layout_shows_bits_capacity_and_end_of_life() {
    let text = ok(&["layout"]);
    for needle in [
        "epoch  2014-12-31T16:00:00.000Z (1420041600000 ms since 1970)",
        "time       bits 30-59 (30 bits, max 1073741823)",
        "seq        bits 10-29 (20 bits, max 1048575)",
        "capacity   1048576 IDs per second per machine",
        "capacity   1024 IDs per millisecond per machine (1024000 per second)",
        "end of life 2049-01-09T05:37:03.999Z",
    ] {
        assert!(text.contains(needle), "{text} lacks {needle}");
    }
}
