//! The client packages (`clients/python`, `clients/node`) under test: the cases their offline
//! explanations are checked against (every preset and two custom layouts as `vesta layout
//! --json` describes them, 10,000 IDs each as `vesta explain --json` reads them), the Python
//! package installed into the gRPC tests' venv (built from a copy of its directory, as
//! `pip install ./clients/python` builds it), and each package's own tests run with the
//! servers' addresses in their environment.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::bin::vesta_command;
use crate::db::target_dir;
use crate::grpc_clients::{installed, node_modules, python, run};

/// IDs explained per case.
pub const IDS_PER_CASE: usize = 10_000;
/// Longest one package's tests may take (they take seconds).
const TESTS_LIMIT: Duration = Duration::from_secs(300);

/// `clients/` in the repository.
pub fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients")
}

/// One layout to explain with: how `vesta` is told it, and the preset the packages build
/// themselves (`None` for a custom layout).
struct Case {
    name: &'static str,
    args: Vec<String>,
    config: Option<&'static str>,
    preset: Option<Value>,
}

/// Every preset (Vesta's two types, one of them with version 1 and an epoch of its own; the
/// peers', Leaf's also with another epoch) and two custom layouts: the node parts and a fixed
/// field of docs/migrate.md's "orders", and an unsigned layout of days whose times pass the
/// year 9999 and the last instant a timestamp shows.
fn cases() -> Vec<Case> {
    let preset = |name: &'static str| Case {
        name,
        args: vec!["--layout".into(), name.into()],
        config: None,
        preset: Some(json!({ "name": name })),
    };
    let mut cases = vec![
        Case {
            name: "vesta",
            args: vec![],
            config: None,
            preset: Some(json!({ "name": "vesta" })),
        },
        Case {
            name: "vesta-min-granularity-v1",
            args: vec![],
            config: Some("[id]\ntype = \"min-granularity\"\nversion = 1\nepoch = 1600000000000\n"),
            preset: Some(json!({
                "name": "vesta", "type": "min-granularity", "version": 1,
                "epoch_ms": 1_600_000_000_000u64,
            })),
        },
    ];
    for name in [
        "leaf",
        "twitter",
        "sonyflake",
        "sonyflake-v2",
        "uid-generator",
    ] {
        cases.push(preset(name));
    }
    cases.push(Case {
        name: "leaf-own-epoch",
        args: vec![
            "--layout".into(),
            "leaf".into(),
            "--epoch".into(),
            "2020-01-01T00:00:00Z".into(),
        ],
        config: None,
        preset: Some(json!({ "name": "leaf", "epoch_ms": 1_577_836_800_000u64 })),
    });
    cases.push(Case {
        name: "custom-orders",
        args: vec![],
        config: Some(
            "[id.layout]\nname = \"orders\"\nunit_ms = 1\nepoch = 1288834974657\nfields = [\n  \
             { kind = \"fixed\", name = \"region\", bits = 2, value = 1 },\n  \
             { kind = \"time\", bits = 41 },\n  \
             { kind = \"node\", parts = [{ name = \"idc\", bits = 4 }, { name = \"business\", bits = 6 }] },\n  \
             { kind = \"seq\", bits = 10 },\n]\n",
        ),
        preset: None,
    });
    cases.push(Case {
        name: "custom-days",
        args: vec![],
        config: Some(
            "[id.layout]\nname = \"days\"\nunit_ms = 86400000\nepoch = \"2000-01-01T00:00:00Z\"\n\
             signed = false\nfields = [\n  \
             { kind = \"time\", bits = 27 },\n  \
             { kind = \"fixed\", name = \"zone\", bits = 3, value = 5 },\n  \
             { kind = \"method\", bits = 2 },\n  \
             { kind = \"seq\", name = \"n\", bits = 22 },\n  \
             { kind = \"node\", name = \"worker\", bits = 10 },\n]\n",
        ),
        preset: None,
    });
    cases
}

/// The directory of the explain cases, made once per test process: `cases.json` (each case's
/// name, its preset, and its files), `NAME.layout.json` (`vesta layout --json`), `NAME.ids`
/// (one ID a line) and `NAME.explained` (`vesta explain --json`, one object a line).
pub fn explain_cases() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("vesta-explain-cases")
            .tempdir()
            .expect("a temporary directory");
        let mut manifest = Vec::new();
        for case in cases() {
            manifest.push(write_case(dir.path(), &case));
        }
        fs::write(
            dir.path().join("cases.json"),
            serde_json::to_string_pretty(&manifest).unwrap(),
        )
        .unwrap();
        dir
    })
    .path()
}

fn write_case(dir: &Path, case: &Case) -> Value {
    let mut args = case.args.clone();
    if let Some(toml) = case.config {
        let file = dir.join(format!("{}.toml", case.name));
        fs::write(&file, toml).unwrap();
        args.extend(["--config".into(), file.display().to_string()]);
    }
    let layout_out = vesta_command()
        .arg("layout")
        .arg("--json")
        .args(&args)
        .output()
        .expect("running vesta layout --json");
    assert!(
        layout_out.status.success(),
        "vesta layout --json {args:?}: {}",
        String::from_utf8_lossy(&layout_out.stderr)
    );
    let layout: Value = serde_json::from_slice(&layout_out.stdout).expect("layout JSON");
    let ids = ids_for(&layout, case.name);
    let mut text = String::new();
    for id in &ids {
        writeln!(text, "{id}").unwrap();
    }
    let explained = explain_all(&args, &text);
    assert_eq!(explained.lines().count(), ids.len(), "{}", case.name);
    let files = [
        (
            "layout",
            format!("{}.layout.json", case.name),
            layout_out.stdout,
        ),
        ("ids", format!("{}.ids", case.name), text.into_bytes()),
        (
            "explained",
            format!("{}.explained", case.name),
            explained.into_bytes(),
        ),
    ];
    let mut entry = BTreeMap::new();
    entry.insert("name", json!(case.name));
    entry.insert("preset", case.preset.clone().unwrap_or(Value::Null));
    for (key, file, bytes) in files {
        fs::write(dir.join(&file), bytes).unwrap();
        entry.insert(key, json!(file));
    }
    json!(entry)
}

/// `vesta explain --json ARGS` of the IDs in `text` (one a line, on stdin).
fn explain_all(args: &[String], text: &str) -> String {
    let mut child = vesta_command()
        .arg("explain")
        .arg("--json")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running vesta explain --json");
    let mut stdin = child.stdin.take().unwrap();
    let input = text.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "vesta explain --json {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// [`IDS_PER_CASE`] IDs for a layout, the same every run: the edges (0, around 2^53 where a
/// JavaScript number stops being exact, 2^63, the largest), then by turns any 64 bits, an ID
/// the layout could issue (the bits it uses, its fixed values), one below 2^53, and one the
/// layout could issue with the time field's top two bits set (times near the end of life).
fn ids_for(layout: &Value, seed: &str) -> Vec<u64> {
    let mut used = 0u64;
    let mut fixed = 0u64;
    let mut time_mask = 0u64;
    for f in layout["fields"].as_array().expect("fields") {
        let bits = f["bits"].as_u64().unwrap();
        let low = f["low_bit"].as_u64().unwrap();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            ((1u64 << bits) - 1) << low
        };
        used |= mask;
        if let Some(v) = f["value"].as_u64() {
            fixed |= v << low;
        }
        if f["kind"] == "time" {
            time_mask = mask;
        }
    }
    let mut state = seed.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut next = move || {
        // xorshift64*: deterministic, good enough to spread bits.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut ids = vec![
        0,
        1,
        (1 << 53) - 1,
        1 << 53,
        (1 << 53) + 1,
        (1 << 63) - 1,
        1 << 63,
        u64::MAX,
        used,
        fixed,
        time_mask | fixed,
    ];
    while ids.len() < IDS_PER_CASE {
        let r = next();
        ids.push(match ids.len() % 4 {
            0 => r,
            1 => (r & used & !fixed_mask(layout)) | fixed,
            2 => r >> 11,
            _ => (r & used & !fixed_mask(layout)) | fixed | (time_mask & !(time_mask >> 2)),
        });
    }
    ids
}

/// The bits of the fixed fields.
fn fixed_mask(layout: &Value) -> u64 {
    layout["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "fixed")
        .map(|f| ((1u64 << f["bits"].as_u64().unwrap()) - 1) << f["low_bit"].as_u64().unwrap())
        .fold(0, |a, m| a | m)
}

/// The venv's Python (`grpc_clients::python`) with `clients/python` installed in it: built
/// from a copy of the directory (the source tree stays clean) with the venv's pinned
/// setuptools, reinstalled whenever a file of the package changed.
pub fn python_with_package() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let python = python().to_owned();
        let package = clients_dir().join("python");
        let files = package_files(&package, &["tests"]);
        let pins: String = files
            .iter()
            .map(|(rel, text)| format!("{rel}\n{}\n", text.len()) + text)
            .collect();
        // This process's own file: another test process may be writing its own meanwhile.
        let pins_file = target_dir()
            .join("tmp")
            .join(format!("vesta-client-py.pins.{}", std::process::id()));
        fs::write(&pins_file, &pins).unwrap();
        installed("vesta-client-py", &pins_file, |dir| {
            let src = dir.join("src-copy");
            for (rel, text) in &files {
                let to = src.join(rel);
                fs::create_dir_all(to.parent().unwrap()).unwrap();
                fs::write(to, text).unwrap();
            }
            let (status, out, err) = run(
                Command::new(&python)
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--disable-pip-version-check",
                        "--no-input",
                        "--quiet",
                        "--no-deps",
                        "--no-build-isolation",
                        "--force-reinstall",
                    ])
                    .arg(&src),
                TESTS_LIMIT,
                "pip install clients/python",
            );
            assert!(
                status.success(),
                "pip install clients/python: {status}\n{out}\n{err}"
            );
        });
        let _ = fs::remove_file(&pins_file);
        python
    })
}

/// The files of a package directory, by relative path, but for `skip`'s top directories and
/// what a build or a run leaves (`build/`, `*.egg-info`, `__pycache__`, `node_modules`).
fn package_files(root: &Path, skip: &[&str]) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<String, String>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let left_out = ["build", "__pycache__", "node_modules", "dist"]
                .contains(&name.as_str())
                || name.ends_with(".egg-info")
                || skip.contains(&rel.as_str());
            if left_out {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, skip, out);
            } else {
                out.insert(rel, fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

/// What a package's test run printed, once it succeeded.
#[derive(Debug)]
pub struct TestRun {
    /// stdout and stderr, for messages.
    pub output: String,
}

/// Runs `cmd` (a package's test command), bounded in time, with `env`; it must succeed.
pub fn run_package_tests(what: &str, cmd: &mut Command, env: &[(&str, String)]) -> TestRun {
    for var in crate::grpc_clients::PROXY_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let (status, out, err) = run(cmd, TESTS_LIMIT, what);
    let output = format!("{out}\n{err}");
    assert!(status.success(), "{what}: {status}\n{output}");
    TestRun { output }
}

/// `python -m unittest discover` over `clients/python/tests` with the installed package.
pub fn python_tests(env: &[(&str, String)]) -> TestRun {
    let mut cmd = Command::new(python_with_package());
    cmd.args(["-m", "unittest", "discover", "-v", "-s"])
        .arg(clients_dir().join("python/tests"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_package_tests("clients/python's tests", &mut cmd, env)
}

/// `node --test` over `clients/node/test` with the installed `node_modules`.
pub fn node_tests(env: &[(&str, String)]) -> TestRun {
    let mut cmd = Command::new("node");
    cmd.arg("--test")
        .arg("--test-reporter=spec")
        .current_dir(clients_dir().join("node"))
        .env("NODE_PATH", node_modules());
    run_package_tests("clients/node's tests", &mut cmd, env)
}
