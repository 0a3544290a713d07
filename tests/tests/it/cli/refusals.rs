//! Bad input to explain, make, a custom layout and the command line itself: each exits non-zero
//! with one line on stderr naming the field or token; `--help` and `--version` succeed.

use super::*;

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
fn unknown_commands_and_flags_are_one_line_errors() {
    fails(&["frobnicate"], &["frobnicate"]);
    fails(&["explain", "--jsn"], &["--jsn"]);
}

#[test]
fn help_and_version_succeed() {
    assert!(ok(&["--version"]).starts_with("vesta "));
    assert!(ok(&["make", "--help"]).contains("--version <0|1>"));
}
