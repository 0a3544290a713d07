//! Locates the `vesta` binary of this workspace, building it first (once per test process) so
//! the tests always run the current code, whichever cargo command started them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The path of a freshly built `vesta` binary (same profile as the running tests): the one in
/// `VESTA_BIN` when set (scripts/test sets it to the binary its `cargo test --workspace` built,
/// with the workspace's features, so nothing is built twice), else built here first.
pub fn vesta() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(
        || match std::env::var_os("VESTA_BIN").filter(|p| !p.is_empty()) {
            Some(path) => {
                let path = PathBuf::from(path);
                assert!(path.is_file(), "VESTA_BIN {} is not a file", path.display());
                path
            }
            None => build(),
        },
    )
}

/// A `Command` for `vesta` with the given arguments.
pub fn vesta_cmd<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut c = vesta_command();
    c.args(args);
    c
}

/// The `vesta` binary as a command, its library log at `error` (`RUST_LOG`; a test may set
/// another): the tests read its own stderr lines (startup, stop, one-line errors), and a
/// test machine's state — e.g. a kernel that reports the clock unsynchronised, which a server
/// rightly warns about — must not move them. `vesta gen` keeps its state files in a directory
/// of this test process (`XDG_STATE_HOME`), not in the user's own.
pub fn vesta_command() -> Command {
    let mut c = Command::new(vesta());
    c.env("RUST_LOG", "error");
    c.env("XDG_STATE_HOME", state_home());
    c
}

/// This test process's `XDG_STATE_HOME` for the `vesta` processes it runs (kept: a test may
/// look at what a run left there).
pub fn state_home() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("vesta-tests-state")
            .tempdir()
            .expect("a temporary state directory")
            .keep()
    })
}

/// The target profile directory the running test binary lives in
/// (`target/<profile>/deps/<test-binary>` → `target/<profile>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target profile dir")
        .to_owned()
}

/// `cargo SUBCOMMAND ARGS...` building into this test's target directory and profile, so what
/// it builds is shared with the test run (the `vesta` binary, an example with other features).
///
/// Without the variables cargo sets for a test binary (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`,
/// ...): build scripts that track them (ring's, with `rerun-if-env-changed`) would see them
/// change, rerun, and rebuild every crate above them here, and again in the next test build.
pub fn cargo(subcommand: &str, args: &[&str]) -> Command {
    let profile_dir = profile_dir();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_for_a_test) {
            cmd.env_remove(name);
        }
    }
    cmd.arg(subcommand);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    cmd.args(args);
    if let Some(target_dir) = profile_dir.parent() {
        cmd.env("CARGO_TARGET_DIR", target_dir);
    }
    cmd
}

/// The package CI selects beside a build of a few packages (`.ci/host-deps`, `-p` it): the
/// proc macros and build scripts such a build compiles get the workspace build's features, so
/// they are the ones the workspace build compiled already instead of copies of their own. The
/// selected packages' features and their dependencies' are unchanged.
pub const HOST_DEPS: &str = "vesta-ci-host-deps";

/// The host's target triple (`rustc -vV`), which the builds made as a user's project makes them
/// name (`--target`): their programs then land in `target/<triple>/<profile>/`, apart from the
/// workspace build's (whose `debug/vesta`, the full one the other tests run, a lean `vesta` would
/// replace), while the proc macros and build scripts they compile are the workspace build's own,
/// in the same target directory (with CI's host-deps package in each of them, a build
/// dependency or `-p` it, their features are the workspace build's).
pub fn host_triple() -> &'static str {
    static TRIPLE: OnceLock<String> = OnceLock::new();
    TRIPLE.get_or_init(|| {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let out = Command::new(rustc).arg("-vV").output().expect("rustc -vV");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .expect("rustc -vV names the host")
            .to_owned()
    })
}

/// Where a build with `--target` [`host_triple`] ([`cargo`]'s target directory and profile)
/// puts its programs.
pub fn host_target_profile_dir() -> PathBuf {
    let profile_dir = profile_dir();
    profile_dir
        .parent()
        .expect("the target directory")
        .join(host_triple())
        .join(profile_dir.file_name().expect("the profile's directory"))
}

/// A scratch crate outside the workspace, depending on the libraries as a user's own project
/// does: by path, with the features it names, none of their dev-dependencies (which the
/// workspace's builds unify into every feature set), built offline from the workspace's lock
/// file for [`host_triple`].
pub struct UsersCrate {
    dir: tempfile::TempDir,
}

impl UsersCrate {
    /// `dependencies`: the `[dependencies]` section's lines; `{root}` stands for the
    /// workspace's root directory.
    pub fn new(name: &str, dependencies: &str, main_rs: &str) -> Self {
        let root = crate::deploy::root();
        let dir = tempfile::Builder::new()
            .prefix(&format!("vesta-{name}-"))
            .tempdir()
            .expect("a scratch crate directory");
        let manifest = format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
             [dependencies]\n{}\n\n[build-dependencies]\n{HOST_DEPS} = {{ path = {:?} }}\n\n\
             [profile.dev]\ndebug = \"line-tables-only\"\n\n[workspace]\n",
            dependencies.replace("{root}", root.to_str().expect("a UTF-8 path")),
            root.join(".ci/host-deps"),
        );
        std::fs::write(dir.path().join("Cargo.toml"), manifest).unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), main_rs).unwrap();
        // The workspace's dev profile (Cargo.toml) too: the proc macros and build scripts are
        // then the workspace build's own. The workspace's versions, so the build needs nothing
        // from the network.
        std::fs::copy(root.join("Cargo.lock"), dir.path().join("Cargo.lock")).unwrap();
        Self { dir }
    }

    /// Its `Cargo.toml`.
    fn manifest(&self) -> PathBuf {
        self.dir.path().join("Cargo.toml")
    }

    /// Its [`dependency_tree`] (ARGS: e.g. `-p` one of its dependencies).
    pub fn dependency_tree(&self, args: &[&str]) -> Vec<String> {
        let manifest = self.manifest();
        dependency_tree(
            &[
                &["--offline", "--manifest-path", manifest.to_str().unwrap()][..],
                args,
            ]
            .concat(),
        )
    }

    /// `cargo SUBCOMMAND --offline --manifest-path <it> --target <host> ARGS...` ([`cargo`]).
    pub fn cargo(&self, subcommand: &str, args: &[&str]) -> Command {
        let manifest = self.manifest();
        cargo(
            subcommand,
            &[
                &[
                    "--offline",
                    "--manifest-path",
                    manifest.to_str().unwrap(),
                    "--target",
                    host_triple(),
                ][..],
                args,
            ]
            .concat(),
        )
    }
}

/// A variable cargo sets in a test binary's environment (not one a user sets to steer cargo,
/// such as `CARGO_HOME` or `CARGO_TARGET_DIR`).
fn set_by_cargo_for_a_test(name: &str) -> bool {
    const EXACT: [&str; 8] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
    ];
    EXACT.contains(&name)
        || ["CARGO_PKG_", "CARGO_BIN_EXE_", "CARGO_CFG_"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// The token [`config_with_token`] writes.
pub const TOKEN: &str = "s3cret-token";

/// A server config in `dir` (`rest.toml`) with `[machine] id = machine` and a bearer token
/// ([`TOKEN`], in the file `token`), plus `server_lines` in its `[server]` section; returns
/// the config's path and the token file's.
pub fn config_with_token(dir: &Path, machine: u64, server_lines: &str) -> (PathBuf, PathBuf) {
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("writing the token file");
    let config = dir.join("rest.toml");
    std::fs::write(
        &config,
        format!(
            "[machine]\nid = {machine}\n\n[server]\n{server_lines}\nauth_token_file = {:?}\n",
            token.display().to_string()
        ),
    )
    .expect("writing the config");
    (config, token)
}

/// Runs `cmd`, a program that prints `id N` lines (an example, a scratch crate): asserts it
/// succeeded; returns its stdout and the IDs it printed, checked to be strictly increasing.
pub fn run_printing_ids(cmd: &mut Command) -> (String, Vec<u64>) {
    let run = cmd.output().expect("running the program");
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let ids: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("id "))
        .map(|id| id.parse().expect("an ID"))
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "not increasing: {ids:?}"
    );
    (out, ids)
}

/// The crates in a package's normal dependency tree: `cargo tree ARGS -e normal --prefix none`
/// (ARGS choose the package and features), each `name vX.Y.Z` once, sorted, the package itself
/// included.
pub fn dependency_tree(args: &[&str]) -> Vec<String> {
    let tree = cargo(
        "tree",
        &[args, &["-e", "normal", "--prefix", "none"]].concat(),
    )
    .output()
    .expect("cargo tree");
    assert!(
        tree.status.success(),
        "{}",
        String::from_utf8_lossy(&tree.stderr)
    );
    let mut crates: Vec<String> = String::from_utf8_lossy(&tree.stdout)
        .lines()
        .map(|l| l.trim_end_matches(" (*)").to_owned())
        .collect();
    crates.sort();
    crates.dedup();
    crates
}

/// Asserts that none of the crates named in `heavy` is in `crates` (from [`dependency_tree`]).
pub fn assert_not_in_tree(crates: &[String], heavy: &[&str]) {
    for name in heavy {
        assert!(
            !crates.iter().any(|c| c.starts_with(&format!("{name} "))),
            "{name} is in the tree: {crates:#?}"
        );
    }
}

fn build() -> PathBuf {
    let profile_dir = profile_dir();
    let status = cargo("build", &["--quiet", "-p", "vesta-cli", "--bin", "vesta"])
        .status()
        .expect("running cargo build for the vesta binary");
    assert!(
        status.success(),
        "cargo build -p vesta-cli --bin vesta failed"
    );
    let path = profile_dir.join(format!("vesta{}", std::env::consts::EXE_SUFFIX));
    assert!(path.exists(), "{} missing after build", path.display());
    path
}

/// Runs `vesta` with `args`; asserts success and a silent stderr; returns stdout.
pub fn vesta_ok<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = vesta_cmd(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running vesta");
    let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    assert!(
        out.status.success(),
        "vesta {shown:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "vesta {shown:?} wrote to stderr");
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs `vesta` with `args`; asserts failure with exactly one stderr line, no panic, containing
/// every needle; returns that line.
pub fn vesta_fails<S: AsRef<std::ffi::OsStr>>(args: &[S], needles: &[&str]) -> String {
    fails_in_one_line(&mut vesta_cmd(args), needles)
}

/// How long a command that must fail may run: a server that should have been refused but
/// started serves until it is killed, which fails the test instead of hanging it.
pub const REFUSAL_LIMIT: Duration = Duration::from_secs(60);

/// Runs `cmd` (a `vesta` command with its environment); asserts failure with exactly one
/// stderr line, no panic, containing every needle; returns that line. Still running after
/// [`REFUSAL_LIMIT`] (a server that was not refused, say): killed, and the test fails.
pub fn fails_in_one_line(cmd: &mut Command, needles: &[&str]) -> String {
    let shown: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running vesta");
    // Not reaped before the thread's wait returns: the PID stays this child's until then.
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(REFUSAL_LIMIT) {
        Ok(out) => out.expect("running vesta"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("vesta {shown:?} still ran after {REFUSAL_LIMIT:?}: not refused");
        }
    };
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "vesta {shown:?} succeeded");
    assert_eq!(
        err.lines().count(),
        1,
        "vesta {shown:?}: not one line: {err:?}"
    );
    assert!(!err.contains("panicked"), "vesta {shown:?} panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "vesta {shown:?}: {err:?} lacks {n:?}");
    }
    err
}

/// Waits for `child` to exit, at most `limit`: past it the child is killed and the test fails.
pub fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for vesta") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("vesta did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM (a clean stop: drain, give back, release), then the exit status within `limit`.
pub fn sigterm_and_wait(child: &mut Child, limit: Duration) -> ExitStatus {
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success(), "kill -TERM {}", child.id());
    wait_exit(child, limit)
}

/// A `vesta serve tcp|rest` child process on a free loopback port, killed on drop if still
/// running; its stderr is read line by line on a thread of its own.
pub struct ServerChild {
    /// The process.
    pub child: Child,
    /// `host:port` it listens on (from its startup line).
    pub addr: String,
    /// The startup line.
    pub startup: String,
    /// What it printed before the startup line (log lines a test asked for with `RUST_LOG`,
    /// e.g. the start guard's wait).
    pub before_startup: Vec<String>,
    /// What it printed after the startup line.
    pub stderr: std::sync::mpsc::Receiver<String>,
    /// The host of its own it runs on, unless the test named one (`VESTA_HOLD_DIR`).
    _host: Option<tempfile::TempDir>,
}

impl ServerChild {
    /// Starts `vesta serve KIND --listen 127.0.0.1:0 ARGS...` with `envs` set, and waits (up to
    /// 30 s) for its startup line (the first naming where it listens; lines before it are kept).
    ///
    /// A server whose layout the test leaves open (no `--type`, `--layout` or `--config` in
    /// `ARGS`) runs min-granularity (milliseconds): its start guard then waits for a
    /// millisecond unit past its machine's last mark, not for a second or two as max-peak's
    /// does, and a test that restarts servers does not spend its time waiting. A test of the
    /// default layout names it (`--type max-peak`).
    pub fn start(kind: &str, args: &[&str], envs: &[(&str, &str)]) -> ServerChild {
        Self::start_in(None, kind, args, envs)
    }

    /// [`start`](Self::start) in the working directory `dir` (relative paths in `args`, such
    /// as `sqlite://seq.db`, are its), or the test's own with `None`.
    pub fn start_in(
        dir: Option<&Path>,
        kind: &str,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> ServerChild {
        use std::io::BufRead;
        let names_layout = args
            .iter()
            .any(|a| ["--type", "--layout", "--config"].contains(a));
        let layout: &[&str] = if names_layout {
            &[]
        } else {
            &["--type", "min-granularity"]
        };
        // Every `vesta serve` holds its static machine ID on its host: a server on a host of
        // its own (a hold directory, and so a namespace of holds), as if each test server ran
        // on a machine of its own, unless the test says which host.
        let host = (!envs.iter().any(|(k, _)| *k == "VESTA_HOLD_DIR"))
            .then(|| tempfile::tempdir().expect("a host-hold directory"));
        let mut command = vesta_command();
        if let Some(host) = &host {
            command.env("VESTA_HOLD_DIR", host.path());
        }
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let mut child = command
            .args(["serve", kind, "--listen", "127.0.0.1:0"])
            .args(layout)
            .args(args)
            .envs(envs.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn vesta serve");
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut before_startup = Vec::new();
        let line = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains(" listening on ") => break line,
                Ok(line) => before_startup.push(line),
                Err(_) => panic!("no startup line from vesta serve {kind}: {before_startup:?}"),
            }
        };
        let addr = line
            .split_once(" listening on ")
            .map(|(_, rest)| {
                ["http://", "https://", "tls://"]
                    .iter()
                    .fold(rest, |r, p| r.trim_start_matches(p))
            })
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("unexpected startup line: {line}"))
            .to_owned();
        ServerChild {
            child,
            addr,
            startup: line,
            before_startup,
            stderr: rx,
            _host: host,
        }
    }

    /// [`terminate`](Self::terminate), asserting a clean exit (status 0); returns what it
    /// printed after the startup line.
    pub fn stop_cleanly(self) -> String {
        let (status, rest) = self.terminate();
        assert!(status.success(), "{status}: {rest}");
        rest
    }

    /// SIGTERM, then the exit status (within 30 s) and everything it printed after the
    /// startup line: read to the end of its stderr, not only what the reader thread had passed
    /// on when the process was reaped.
    pub fn terminate(mut self) -> (ExitStatus, String) {
        let status = sigterm_and_wait(&mut self.child, Duration::from_secs(30));
        let mut rest = Vec::new();
        // The pipe closes with the process; the reader thread then ends and the channel with it.
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(10)) {
            rest.push(line);
        }
        (status, rest.join("\n"))
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on a fresh connection: the status code and the body.
pub fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {out:?}"));
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}
