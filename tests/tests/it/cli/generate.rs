//! `vesta gen` on the embedded default: unique increasing IDs, runs in a row, its machine ID
//! from flags, a config or a StatefulSet ordinal, every output form, a closed pipe, and its bad
//! arguments.

use super::*;

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
