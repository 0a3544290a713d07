//! Real database servers for the segment tests (Debian's `postgresql` and `mariadb-server`
//! packages): a throwaway PostgreSQL ([`Postgres`]) or MariaDB ([`MariaDb`]) on a free loopback
//! port with its own temp data dir, killed by PID on drop, with `stop`/`restart` for outage
//! tests. Data dirs are copied from a template made once per build under `target/tmp/`
//! (`initdb` and `mariadb-install-db` take seconds; a copy takes milliseconds).
//!
//! We run as root: PostgreSQL runs as the `postgres` user (data dir owned by it, trust auth
//! for the superuser `vesta`); MariaDB runs as root with `root@127.0.0.1` and no password.
//!
//! ```no_run
//! let pg = vesta_tests::db::Postgres::start();
//! let url = pg.create_database("orders"); // postgres://vesta@127.0.0.1:PORT/orders
//! ```

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use tempfile::TempDir;

use crate::zk::{free_ports, wait_until};

/// How long a server may take to accept connections.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The newest installed PostgreSQL's `bin` dir; panics with the install command if none.
pub fn require_postgres() -> PathBuf {
    let newest = fs::read_dir("/usr/lib/postgresql")
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        })
        .max();
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): \
             run `apt-get install -y postgresql`"
        ),
    }
}

/// The path of a MariaDB program (`mariadbd`, `mariadb-install-db`, `mariadb`); panics with
/// the install command if MariaDB is not installed.
pub fn require_mariadb(tool: &str) -> PathBuf {
    which(tool).unwrap_or_else(|| {
        panic!(
            "MariaDB is not installed ({tool} not found): run `apt-get install -y mariadb-server`"
        )
    })
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .chain(["/usr/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.exists())
}

/// `target/tmp/db-templates`, next to the test binaries and the soak's.
fn templates_dir() -> PathBuf {
    let dir = target_dir().join("tmp").join("db-templates");
    fs::create_dir_all(&dir).expect("creating target/tmp/db-templates");
    dir
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set, else the nearest directory above the
/// running executable that holds cargo's `CACHEDIR.TAG` (a test binary sits in
/// `target/<profile>/deps`, the soak in `target/<profile>`: counting parents is not enough).
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        if dir.is_absolute() {
            return dir;
        }
    }
    let exe = std::env::current_exe().expect("the running executable's path");
    exe.ancestors()
        .skip(1)
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .unwrap_or_else(|| panic!("no cargo target directory above {}", exe.display()))
        .to_owned()
}

/// The template `name` under [`templates_dir`], made by `make(dir)` if missing. Made in a temp
/// dir and renamed into place, so a crash or a parallel test never leaves a half-made one.
fn template(name: &str, make: impl FnOnce(&Path)) -> PathBuf {
    let path = templates_dir().join(name);
    if !path.exists() {
        let tmp = templates_dir().join(format!("{name}.tmp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(&tmp).expect("template dir");
        make(&tmp);
        if fs::rename(&tmp, &path).is_err() {
            // Another test process made it first.
            let _ = fs::remove_dir_all(&tmp);
        }
    }
    path
}

/// `cp -a from to` (keeps owners and modes; PostgreSQL insists on both).
fn copy_dir(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("running cp");
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

fn run_ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed: {text}");
    text
}

/// A server process we started: stopped by PID with its own signal, SIGKILL if it lingers,
/// and always on drop.
#[derive(Debug)]
struct ServerProcess {
    child: Option<Child>,
    stop_signal: Signal,
}

impl ServerProcess {
    fn new(stop_signal: Signal) -> Self {
        ServerProcess {
            child: None,
            stop_signal,
        }
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = Pid::from_raw(child.id() as i32) {
            let _ = kill_process(pid, self.stop_signal);
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn id_of(flag: &str) -> u32 {
    run_ok(Command::new("id").args([flag, "postgres"]), "id postgres")
        .trim()
        .parse()
        .expect("numeric id")
}

/// A throwaway PostgreSQL server on a free loopback port (superuser `vesta`, trust auth).
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    dir: TempDir,
    port: u16,
    process: ServerProcess,
    /// TLS only (`hostssl`), with this certificate and key: see [`start_tls`](Self::start_tls).
    tls: bool,
}

impl Postgres {
    /// Starts a server and waits until it accepts connections.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// Starts a server that accepts TCP connections over TLS only (`hostssl`; plain TCP is
    /// rejected), presenting `cert` and `key` (PEM; copied into its data directory).
    pub fn start_tls(cert: &Path, key: &Path) -> Self {
        Self::start_with(Some((cert, key)))
    }

    fn start_with(tls: Option<(&Path, &Path)>) -> Self {
        let bin = require_postgres();
        let template = postgres_template(&bin);
        let dir = tempfile::Builder::new()
            .prefix("vesta-pg-")
            .tempdir()
            .expect("temp dir");
        std::os::unix::fs::chown(dir.path(), Some(id_of("-u")), Some(id_of("-g")))
            .expect("chown the temp dir to postgres");
        let data = dir.path().join("data");
        copy_dir(&template, &data);
        if let Some((cert, key)) = tls {
            // The server reads them as its own user; it refuses a key others can read.
            for (from, name) in [(cert, "server.crt"), (key, "server.key")] {
                let to = data.join(name);
                fs::copy(from, &to).expect("copy the TLS files");
                std::os::unix::fs::chown(&to, Some(id_of("-u")), Some(id_of("-g")))
                    .expect("chown the TLS files");
                fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                    .expect("chmod the TLS files");
            }
            fs::write(
                data.join("pg_hba.conf"),
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\n\
                 hostnossl all all 127.0.0.1/32 reject\n",
            )
            .expect("pg_hba.conf");
        }
        let mut pg = Postgres {
            bin,
            port: free_ports(1)[0],
            dir,
            // Immediate shutdown: no checkpoint, every backend gone at once, like a crash.
            process: ServerProcess::new(Signal::QUIT),
            tls: tls.is_some(),
        };
        pg.spawn();
        pg
    }

    fn spawn(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("postgres.log"))
            .expect("log file");
        let child = Command::new(self.bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                // Durable against a killed server (what the tests do), not a power cut.
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ])
            .args(if self.tls { &["-c", "ssl=on"][..] } else { &[] })
            .uid(id_of("-u"))
            .gid(id_of("-g"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("starting postgres");
        self.process.child = Some(child);
        let port = self.port;
        let ready = self.bin.join("pg_isready");
        assert!(
            wait_until(START_TIMEOUT, || Command::new(&ready)
                .args([
                    "-q",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-U",
                    "vesta"
                ])
                .status()
                .is_ok_and(|s| s.success())),
            "PostgreSQL on port {port} did not start within {START_TIMEOUT:?}; log: {}",
            self.dir.path().join("postgres.log").display()
        );
    }

    /// The URL of `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://vesta@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates an empty database and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(name)
    }

    /// Runs SQL with `psql`; returns its output (unaligned, tuples only).
    pub fn psql(&self, database: &str, sql: &str) -> String {
        run_ok(
            Command::new(self.bin.join("psql"))
                .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "vesta",
                ])
                .args(["-d", database, "-c", sql]),
            "psql",
        )
    }

    /// Backs `table` of `database` up with `pg_dump` (DROP + CREATE + data) into a file.
    pub fn backup_table(&self, database: &str, table: &str) -> PathBuf {
        let file = self.dir.path().join(format!("{database}.{table}.sql"));
        run_ok(
            Command::new(self.bin.join("pg_dump"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "vesta",
                ])
                .args(["-d", database, "-t", table, "--clean", "--if-exists", "-f"])
                .arg(&file),
            "pg_dump",
        );
        file
    }

    /// Restores a backup of [`Postgres::backup_table`] with `psql -1 -f`: in one transaction,
    /// so a server using the table meanwhile waits for it rather than seeing it half made.
    pub fn restore(&self, database: &str, backup: &Path) {
        run_ok(
            Command::new(self.bin.join("psql"))
                .args(["-X", "-q", "-1", "-v", "ON_ERROR_STOP=1"])
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "vesta",
                ])
                .args(["-d", database, "-f"])
                .arg(backup),
            "psql -f (restore)",
        );
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Stops the server like a crash: an immediate shutdown (SIGQUIT: no checkpoint, every
    /// backend gone at once), SIGKILL if it lingers. Data stays; [`restart`](Self::restart)
    /// recovers it.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Starts the stopped server again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

fn postgres_template(bin: &Path) -> PathBuf {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let version = bin
                .parent()
                .and_then(Path::file_name)
                .and_then(|v| v.to_str())
                .unwrap_or("x")
                .to_owned();
            template(&format!("postgres-{version}"), |dir| {
                std::os::unix::fs::chown(dir, Some(id_of("-u")), Some(id_of("-g")))
                    .expect("chown template dir");
                run_ok(
                    Command::new("runuser")
                        .args(["-u", "postgres", "--"])
                        .arg(bin.join("initdb"))
                        .arg("-D")
                        .arg(dir)
                        .args(["-A", "trust", "-U", "vesta", "-E", "UTF8", "--no-sync"]),
                    "initdb",
                );
            })
        })
        .clone()
}

/// A throwaway MariaDB server on a free loopback port (`root@127.0.0.1`, no password).
#[derive(Debug)]
pub struct MariaDb {
    dir: TempDir,
    port: u16,
    process: ServerProcess,
    /// TLS only (`require_secure_transport`) with these PEM certificate, key and CA files.
    tls: Option<[PathBuf; 3]>,
}

/// Server options shared by the template bootstrap and the servers.
const MARIADB_OPTS: &[&str] = &[
    "--innodb-log-file-size=8M",
    "--innodb-buffer-pool-size=32M",
    // Durable against a killed server (the log reaches the OS at each commit), not a power cut.
    "--innodb-flush-log-at-trx-commit=2",
];

impl MariaDb {
    /// Starts a server and waits until it accepts connections.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// Starts a server that accepts TCP connections over TLS only
    /// (`require_secure_transport`), presenting `cert` and `key` issued by `ca`.
    pub fn start_tls(cert: &Path, key: &Path, ca: &Path) -> Self {
        Self::start_with(Some([cert.to_owned(), key.to_owned(), ca.to_owned()]))
    }

    fn start_with(tls: Option<[PathBuf; 3]>) -> Self {
        let template = mariadb_template();
        let dir = tempfile::Builder::new()
            .prefix("vesta-mariadb-")
            .tempdir()
            .expect("temp dir");
        copy_dir(&template, &dir.path().join("data"));
        let mut db = MariaDb {
            port: free_ports(1)[0],
            dir,
            process: ServerProcess::new(Signal::KILL),
            tls,
        };
        db.spawn();
        db
    }

    fn spawn(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("mariadb.log"))
            .expect("log file");
        let data = self.dir.path().join("data");
        let child = Command::new(require_mariadb("mariadbd"))
            .arg("--no-defaults")
            .arg("--user=root")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!(
                "--socket={}",
                self.dir.path().join("sock").display()
            ))
            .arg(format!("--port={}", self.port))
            .args(["--bind-address=127.0.0.1", "--skip-name-resolve"])
            .args(MARIADB_OPTS)
            .args(self.tls.iter().flat_map(|[cert, key, ca]| {
                [
                    format!("--ssl-cert={}", cert.display()),
                    format!("--ssl-key={}", key.display()),
                    format!("--ssl-ca={}", ca.display()),
                    "--require-secure-transport=ON".to_owned(),
                ]
            }))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("starting mariadbd");
        self.process.child = Some(child);
        assert!(
            wait_until(START_TIMEOUT, || self.try_sql("SELECT 1").is_ok()),
            "MariaDB on port {} did not start within {START_TIMEOUT:?}; log: {}",
            self.port,
            self.dir.path().join("mariadb.log").display()
        );
    }

    fn try_sql(&self, sql: &str) -> Result<String, String> {
        let mut cmd = Command::new(require_mariadb("mariadb"));
        cmd.args(["--no-defaults", "-u", "root", "-N", "-B"]);
        if self.tls.is_some() {
            // A socket counts as secure transport: the admin path needs no certificate.
            cmd.arg(format!(
                "--socket={}",
                self.dir.path().join("sock").display()
            ));
        } else {
            cmd.args(["-h", "127.0.0.1"])
                .arg(format!("--port={}", self.port));
        }
        let out = cmd
            .args(["-e", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(text)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs SQL with the `mariadb` client; returns its output (tab-separated, no headers).
    pub fn sql(&self, sql: &str) -> String {
        self.try_sql(sql)
            .unwrap_or_else(|e| panic!("mariadb -e {sql:?} failed: {e}"))
    }

    /// The URL of `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates an empty database and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        self.sql(&format!("CREATE DATABASE {name}"));
        self.url(name)
    }

    /// Backs `table` of `database` up with `mariadb-dump` (DROP + CREATE + data) into a file.
    pub fn backup_table(&self, database: &str, table: &str) -> PathBuf {
        let file = self.dir.path().join(format!("{database}.{table}.sql"));
        run_ok(
            Command::new(require_mariadb("mariadb-dump"))
                .args(["--no-defaults", "-h", "127.0.0.1", "-u", "root"])
                .arg(format!("--port={}", self.port))
                .arg(format!("--result-file={}", file.display()))
                .args([database, table]),
            "mariadb-dump",
        );
        file
    }

    /// Restores a backup of [`MariaDb::backup_table`]: the file fed to the `mariadb` client.
    pub fn restore(&self, database: &str, backup: &Path) {
        let out = Command::new(require_mariadb("mariadb"))
            .args(["--no-defaults", "-h", "127.0.0.1", "-u", "root"])
            .arg(format!("--port={}", self.port))
            .arg(database)
            .stdin(fs::File::open(backup).expect("the backup file"))
            .output()
            .expect("running mariadb");
        assert!(
            out.status.success(),
            "restoring {}: {}",
            backup.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Kills the server (SIGKILL), like a crash; data stays and InnoDB recovers it on
    /// [`restart`](Self::restart).
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Starts the stopped server again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

fn mariadb_template() -> PathBuf {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let version = run_ok(
                Command::new(require_mariadb("mariadbd")).arg("--version"),
                "mariadbd",
            )
            .split_whitespace()
            .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .unwrap_or("x")
            .to_owned();
            template(&format!("mariadb-{version}"), |dir| {
                run_ok(
                    Command::new(require_mariadb("mariadb-install-db"))
                        .arg("--no-defaults")
                        .arg("--user=root")
                        .arg(format!("--datadir={}", dir.display()))
                        .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
                        .args(MARIADB_OPTS),
                    "mariadb-install-db",
                );
            })
        })
        .clone()
}
