//! The real `vesta` binary: explain, make, gen and layout, including every bad-input path.
//! Bad input must exit non-zero with exactly one line on stderr naming the field or token.

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
fn gen_issues_unique_increasing_ids_on_the_embedded_default() {
    let text = ok(&["gen", "-n", "20000"]);
    let ids: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 20000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let f = IdFields::decode(ids[0]);
    assert_eq!(
        (f.id_type, f.gen_method, f.machine),
        (IdType::MaxPeak, GenMethod::Embed, 0)
    );
}

/// Two runs one after the other on the same static machine ID, with no state file: the second
/// waits out the first's last unit (plus the rollback tolerance) instead of reissuing its IDs.
/// Before the fix both runs usually started in the same second and printed the same IDs.
#[test]
fn gen_run_twice_in_a_row_never_reissues() {
    for id_type in ["max-peak", "min-granularity"] {
        let runs: Vec<Vec<u64>> = (0..3)
            .map(|_| {
                ok(&["gen", "-n", "1000", "--type", id_type])
                    .lines()
                    .map(|l| l.parse().unwrap())
                    .collect()
            })
            .collect();
        for pair in runs.windows(2) {
            let (earlier, later) = (&pair[0], &pair[1]);
            assert!(
                later[0] > *earlier.last().unwrap(),
                "{id_type}: a later run began at {} below the earlier run's last {}",
                later[0],
                earlier.last().unwrap()
            );
        }
    }
}

#[test]
fn gen_takes_machine_type_and_config() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("v.toml");
    std::fs::write(
        &conf,
        "[id]\ntype = \"min-granularity\"\n[machine]\nid = 17\n",
    )
    .unwrap();
    let f = IdFields::decode(
        ok(&["gen", "--config", conf.to_str().unwrap()])
            .trim()
            .parse()
            .unwrap(),
    );
    assert_eq!((f.id_type, f.machine), (IdType::MinGranularity, 17));
    let f = IdFields::decode(
        ok(&[
            "gen",
            "--config",
            conf.to_str().unwrap(),
            "--machine",
            "923",
            "--type",
            "0",
        ])
        .trim()
        .parse()
        .unwrap(),
    );
    assert_eq!((f.id_type, f.machine), (IdType::MaxPeak, 923));
}

/// `vesta gen --format`: every form reads back (`vesta explain` takes each) and the
/// fixed-width forms sort as the IDs do.
#[test]
fn gen_writes_every_form_and_explain_reads_it() {
    use vesta_core::Form;
    for form in Form::ALL {
        let out = ok(&["gen", "-n", "50", "--format", form.name()]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 50);
        let ids: Vec<u64> = lines.iter().map(|l| form.decode(l).unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{form}");
        if form.sorts() {
            assert!(lines.windows(2).all(|w| w[0] < w[1]), "{form}: text sorts");
        }
        // Digits alone read as decimal (a base32/base62 text of only digits is rare, but
        // possible: it is then read in its form only when the form is named).
        let first = lines
            .iter()
            .zip(&ids)
            .find(|(l, _)| form == Form::Decimal || !l.bytes().all(|b| b.is_ascii_digit()));
        let (line, id) = first.expect("a line with a letter");
        let json = ok(&["explain", "--json", line]);
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["id"], id.to_string(), "{form}: {json}");
    }
    fails(&["gen", "--format", "b64"], &["b64", "base32"]);
}

/// `[machine] source = "ordinal"`: a StatefulSet pod's ordinal (from `$HOSTNAME`) plus the
/// offset is the machine ID; a name without one, or a result outside the pool, is one line.
#[test]
fn gen_takes_the_machine_id_from_a_statefulset_ordinal() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("v.toml");
    let gen_as = |host: &str, toml: &str| {
        std::fs::write(&conf, toml).unwrap();
        let mut cmd = vesta_cmd(["gen", "--config", conf.to_str().unwrap()]);
        cmd.env("HOSTNAME", host);
        cmd.output().expect("vesta gen")
    };
    let out = gen_as("vesta-7", "[machine]\nsource = \"ordinal\"\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u64 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(IdFields::decode(id).machine, 7);
    let offset = "[machine]\nsource = \"ordinal\"\nordinal_offset = 100\n";
    let out = gen_as("ids-eu-3", offset);
    let id: u64 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(IdFields::decode(id).machine, 103);
    for (host, needle) in [
        ("vesta", "no trailing number"),
        ("vesta-900", "outside the embed pool 0..=923"),
    ] {
        let out = gen_as(host, offset);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{host}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle) && err.contains(host), "{host}: {err}");
    }
}

#[test]
fn gen_survives_a_closed_pipe() {
    let mut child = vesta_cmd(["gen", "-n", "3000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

#[test]
fn explain_rejects_bad_ids_naming_the_token() {
    fails(&["explain", "12x"], &["id `12x`", "unsigned decimal"]);
    fails(
        &["explain", "18446744073709551616"],
        &["id `18446744073709551616`"],
    );
    fails(
        &["explain", "-9223372036854775809"],
        &["id `-9223372036854775809`"],
    );
    fails(
        &["explain", "0x1ffffffffffffffff"],
        &["id `0x1ffffffffffffffff`", "a leading 0x means hex"],
    );
    // `0x` and base62's width of characters is still hex: refused as hex when it is not.
    fails(
        &["explain", "0x12345678g"],
        &["id `0x12345678g`", "a leading 0x means hex"],
    );
    let line = ok(&["explain", "--json", "0x123456789"]);
    let v: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["id"], 0x1_2345_6789u64.to_string());
    fails(&["explain", "1", "two"], &["id `two`"]);
    fails_with_stdin(
        &["explain"],
        Some("1\nnope\n"),
        &["stdin line 2", "id `nope`"],
    );
    fails_with_stdin(&["explain"], Some(""), &["no ID given"]);
    fails(
        &["explain", "--epoch", "yesterday", "1"],
        &["epoch", "yesterday", "RFC 3339"],
    );
}

/// A field given twice (by its own flag and by `--field`, twice by `--field`, or whole and by a
/// part) is contradictory or redundant: refused in one line naming both, equal values too.
#[test]
fn make_refuses_a_field_given_twice() {
    let base = ["make", "--time", "1", "--seq", "1"];
    let with = |extra: &[&'static str]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    for (extra, said) in [
        (
            &["--field", "machine=1", "--machine", "2"][..],
            "--machine 2 and --field machine=1 both set machine",
        ),
        (
            &["--machine", "2", "--field", "machine=2"],
            "--machine 2 and --field machine=2 both set machine",
        ),
        (
            &["--machine", "2", "--field", "node=1"],
            "--machine 2 and --field node=1 both set machine",
        ),
        (
            &["--machine", "2", "--field", "time=5"],
            "--time 1 and --field time=5 both set time",
        ),
        (
            &["--machine", "2", "--field", "seq=1"],
            "--seq 1 and --field seq=1 both set seq",
        ),
        (
            &[
                "--machine",
                "2",
                "--gen-method",
                "server",
                "--field",
                "genMethod=1",
            ],
            "--gen-method server and --field genMethod=1 both set genMethod",
        ),
        (
            &["--machine", "2", "--version", "0", "--field", "version=1"],
            "--version 0 and --field version=1 both set version",
        ),
        (
            &["--machine", "2", "--type", "max-peak", "--field", "type=1"],
            "--type max-peak and --field type=1 both set type",
        ),
        (
            &["--field", "machine=3", "--field", "machine=4"],
            "--field machine=3 and --field machine=4 both set machine",
        ),
        (
            &[
                "--layout",
                "twitter",
                "--machine",
                "2",
                "--field",
                "workerId=3",
            ],
            "--machine 2 and --field workerId=3 both set node",
        ),
    ] {
        fails(&with(extra), &[said, ": give each field once"]);
    }
    // Once each, as before: a field by --field alone, the node by its parts.
    let id: u64 = ok(&with(&["--machine", "2", "--field", "genMethod=1"]))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        IdFields::decode(id).gen_method,
        GenMethod::Server,
        "genMethod by --field alone"
    );
    ok(&with(&[
        "--layout",
        "twitter",
        "--field",
        "datacenterId=1",
        "--field",
        "workerId=2",
    ]));
}

/// A custom layout that cannot be used is refused in one line that says why once (the
/// layout's error is not repeated as its cause).
#[test]
fn a_bad_custom_layout_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "[id.layout]\nunit_ms = 1\nepoch = 0\nfields = [\n  { kind = \"time\", bits = 41 },\n  \
         { kind = \"node\", bits = 10 },\n  { kind = \"seq\", bits = 30 },\n]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let why = "the fields take 81 bits: allowed at most 63";
    for args in [
        &["gen", "--config", config, "-n", "1"][..],
        &["layout", "--config", config],
        &["make", "--config", config, "--time", "1", "--seq", "1"],
    ] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert_eq!(err.matches(why).count(), 1, "{args:?}: {err}");
        assert!(err.contains("id.layout: "), "{args:?}: {err}");
    }
    // An epoch that is not one names the key and the forms.
    std::fs::write(dir.path().join("bad.toml"), "[id]\nepoch = -5\n").unwrap();
    fails(
        &["layout", "--config", config],
        &[
            "id.epoch `-5` is not valid",
            "ms since 1970 (0 or more) or an RFC 3339 date-time",
        ],
    );
}

#[test]
fn make_rejects_each_field_out_of_range_by_name() {
    let base = ["make", "--time", "1", "--seq", "1", "--machine", "1"];
    let with = |extra: &[&'static str]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    fails(
        &["make", "--time", "1", "--seq", "1048576", "--machine", "1"],
        &["seq 1048576", "0..=1048575"],
    );
    fails(
        &[
            "make",
            "--time",
            "1",
            "--seq",
            "1024",
            "--machine",
            "1",
            "--type",
            "1",
        ],
        &["seq 1024", "min-granularity", "0..=1023"],
    );
    fails(
        &["make", "--time", "1", "--seq", "1", "--machine", "1024"],
        &["machine 1024", "0..=1023"],
    );
    fails(
        &[
            "make",
            "--time",
            "1073741824",
            "--seq",
            "0",
            "--machine",
            "0",
        ],
        &["time 1073741824", "0..=1073741823"],
    );
    fails(
        &[
            "make",
            "--time",
            "99999999999999999999",
            "--seq",
            "0",
            "--machine",
            "0",
        ],
        &["time 99999999999999999999", "0..=1073741823"],
    );
    fails(&with(&["--version", "2"]), &["version 2", "0..=1"]);
    fails(
        &with(&["--gen-method", "4"]),
        &["--gen-method", "genMethod `4`", "embed, server, rest"],
    );
    fails(
        &with(&["--type", "fast"]),
        &["--type", "type `fast`", "max-peak"],
    );
    fails(
        &[
            "make",
            "--time",
            "yesterday",
            "--seq",
            "0",
            "--machine",
            "0",
        ],
        &["--time `yesterday`", "RFC 3339"],
    );
    fails(
        &[
            "make",
            "--time",
            "2014-01-01T00:00:00Z",
            "--seq",
            "0",
            "--machine",
            "0",
        ],
        &["time", "between the epoch"],
    );
    fails(
        &["make", "--time", "1", "--seq", "-1", "--machine", "0"],
        &["--seq"],
    );
    fails(
        &["make", "--time", "1", "--seq", "x", "--machine", "0"],
        &["--seq", "'x'"],
    );
    fails(&["make", "--seq", "1"], &["required", "--time"]);
    fails(
        &["make", "--time", "1", "--seq", "1"],
        &["machine is missing: the vesta layout needs it to make an ID"],
    );
}

#[test]
fn gen_rejects_bad_arguments_and_configs() {
    fails(
        &["gen", "--machine", "924"],
        &["machine 924", "embed pool 0..=923"],
    );
    fails(&["gen", "--machine", "5000"], &["machine 5000"]);
    fails(&["gen", "-n", "lots"], &["'lots'", "--count"]);
    fails(&["gen", "--type", "2"], &["type `2`"]);
    fails(
        &["gen", "--config", "/nonexistent/vesta.toml"],
        &["/nonexistent/vesta.toml"],
    );
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.toml");
    std::fs::write(&conf, "[id]\ntype = \"max-peak\"\nepoc = 0\n").unwrap();
    fails(
        &["gen", "--config", conf.to_str().unwrap()],
        &["unknown field `epoc`", "line 3"],
    );
    std::fs::write(&conf, "[clock]\nrollback_tolerance_ms = 999999\n").unwrap();
    fails(
        &["gen", "--config", conf.to_str().unwrap()],
        &["rollback_tolerance_ms 999999", "0..=60000"],
    );
}

#[test]
fn unknown_commands_and_flags_are_one_line_errors() {
    fails(&["frobnicate"], &["frobnicate"]);
    fails(&["explain", "--jsn"], &["--jsn"]);
}

#[test]
fn help_and_version_succeed() {
    assert!(ok(&["--version"]).starts_with("vesta "));
    assert!(ok(&["make", "--help"]).contains("--version <0|1>"));
}
