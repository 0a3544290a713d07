//! The non-Rust gRPC clients of the end-to-end tests (`tests/grpc/`): `client.py` on grpcio in
//! a Python venv, `client.js` on @grpc/grpc-js in a `node_modules`, each installed once under
//! `target/tmp` from its pinned versions (`requirements.txt`, `package-lock.json`) and reused
//! while that file is unchanged; and a client run, bounded in time, whose JSON lines come back
//! by step for the test to check.
//!
//! An install holds a lock file (another test process waits for it) and ends by writing its
//! marker, a copy of the pins it installed: a half-finished or outdated install has none, or
//! another, and is redone from scratch.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::db::target_dir;

/// Longest an install (`python3 -m venv` and `pip install`, or `npm ci`) may take.
const INSTALL_LIMIT: Duration = Duration::from_secs(15 * 60);
/// Longest one client run may take (its calls have 30 s deadlines of their own).
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// Variables that would send a client's loopback calls through a proxy.
pub const PROXY_VARS: [&str; 7] = [
    "http_proxy",
    "https_proxy",
    "grpc_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
];

/// `tests/grpc/`: the clients and their pins.
pub fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("grpc")
}

/// The Python of a venv with the pinned grpcio packages (`target/tmp/grpc-venv`).
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let pins = clients_dir().join("requirements.txt");
        let dir = installed("grpc-venv", &pins, |dir| {
            run_bounded(
                Command::new("python3").arg("-m").arg("venv").arg(dir),
                INSTALL_LIMIT,
                "python3 -m venv (Debian: python3 and python3-venv; scripts/test installs them)",
            );
            run_bounded(
                Command::new(dir.join("bin/python"))
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--disable-pip-version-check",
                        "--no-input",
                        "--quiet",
                        "-r",
                    ])
                    .arg(&pins),
                INSTALL_LIMIT,
                "pip install -r tests/grpc/requirements.txt",
            );
        });
        dir.join("bin/python")
    })
}

/// The `node_modules` of the Node client's pinned packages (`target/tmp/grpc-node`), for
/// `NODE_PATH`.
pub fn node_modules() -> &'static Path {
    static MODULES: OnceLock<PathBuf> = OnceLock::new();
    MODULES.get_or_init(|| {
        let pins = clients_dir().join("package-lock.json");
        let dir = installed("grpc-node", &pins, |dir| {
            for file in ["package.json", "package-lock.json"] {
                fs::copy(clients_dir().join(file), dir.join(file))
                    .unwrap_or_else(|e| panic!("copying tests/grpc/{file}: {e}"));
            }
            run_bounded(
                Command::new("npm")
                    .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
                    .current_dir(dir),
                INSTALL_LIMIT,
                "npm ci (Debian: nodejs and npm; scripts/test installs them)",
            );
        });
        dir.join("node_modules")
    })
}

/// `target/tmp/NAME`, made by `install(dir)` unless its marker holds the pins in `pins` (a
/// file's text) already.
pub fn installed(name: &str, pins: &Path, install: impl FnOnce(&Path)) -> PathBuf {
    let pinned = fs::read(pins).unwrap_or_else(|e| panic!("reading {}: {e}", pins.display()));
    let tmp = target_dir().join("tmp");
    fs::create_dir_all(&tmp).expect("creating target/tmp");
    let lock_path = tmp.join(format!("{name}.lock"));
    let lock = fs::File::create(&lock_path)
        .unwrap_or_else(|e| panic!("creating {}: {e}", lock_path.display()));
    // Held until this function returns: another process installing meanwhile is waited for.
    lock.lock()
        .unwrap_or_else(|e| panic!("locking {}: {e}", lock_path.display()));
    let dir = tmp.join(name);
    let marker = dir.join(".installed-from");
    if fs::read(&marker).is_ok_and(|m| m == pinned) {
        return dir;
    }
    match fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("removing the old {}: {e}", dir.display()),
    }
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    install(&dir);
    fs::write(&marker, &pinned).unwrap_or_else(|e| panic!("writing {}: {e}", marker.display()));
    dir
}

/// Runs `cmd` (stdin closed, output captured) to its end, at most `limit`: past it the process
/// is killed and the test fails. Returns its exit status, stdout and stderr.
pub fn run(cmd: &mut Command, limit: Duration, what: &str) -> (ExitStatus, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start it: {e}"));
    // Read on threads of their own, so a full pipe never stalls the child.
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("stdout")));
    let stderr = reader(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (
        stdout.join().expect("stdout reader"),
        stderr.join().expect("stderr reader"),
    );
    let status =
        status.unwrap_or_else(|| panic!("{what}: not done within {limit:?}, killed\n{out}\n{err}"));
    (status, out, err)
}

/// [`run`], asserting success.
fn run_bounded(cmd: &mut Command, limit: Duration, what: &str) {
    let (status, out, err) = run(cmd, limit, what);
    assert!(status.success(), "{what}: {status}\n{out}\n{err}");
}

/// What a client printed: its JSON lines by step.
#[derive(Debug)]
pub struct Steps {
    /// The client, for messages.
    pub client: String,
    steps: BTreeMap<String, Value>,
}

impl Steps {
    /// The outcome of `step` (`{"ok": ...}` or `{"error": ...}`), which must be there.
    pub fn get(&self, step: &str) -> &Value {
        self.steps.get(step).unwrap_or_else(|| {
            panic!(
                "{}: no step {step:?} among {:?}",
                self.client,
                self.steps.keys().collect::<Vec<_>>()
            )
        })
    }

    /// The answer of `step`, which must have succeeded.
    pub fn ok(&self, step: &str) -> &Value {
        let v = self.get(step);
        v.get("ok")
            .unwrap_or_else(|| panic!("{}: {step} failed: {v}", self.client))
    }

    /// The error of `step` (`code`, `message`, `trailing`), which must have failed.
    pub fn error(&self, step: &str) -> &Value {
        let v = self.get(step);
        v.get("error")
            .unwrap_or_else(|| panic!("{}: {step} did not fail: {v}", self.client))
    }
}

/// Runs `client.py ARGS` with the venv's Python.
pub fn run_python(args: &[&str]) -> Steps {
    let mut cmd = Command::new(python());
    cmd.arg(clients_dir().join("client.py"))
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_client("client.py", &mut cmd)
}

/// Runs `node client.js ARGS` with the installed packages.
pub fn run_node(args: &[&str]) -> Steps {
    let modules = node_modules();
    let mut cmd = Command::new("node");
    cmd.arg(clients_dir().join("client.js"))
        .args(args)
        .env("NODE_PATH", modules);
    run_client("client.js", &mut cmd)
}

fn run_client(name: &str, cmd: &mut Command) -> Steps {
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    let (status, out, err) = run(cmd, RUN_LIMIT, name);
    assert!(status.success(), "{name}: {status}\n{out}\n{err}");
    let mut steps = BTreeMap::new();
    for line in out.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{name}: not a JSON line ({e}): {line}\n{err}"));
        let step = v["step"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: a line without a step: {line}"))
            .to_owned();
        assert!(
            steps.insert(step.clone(), v).is_none(),
            "{name}: step {step} twice"
        );
    }
    Steps {
        client: name.to_owned(),
        steps,
    }
}
