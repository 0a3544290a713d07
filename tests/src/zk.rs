//! Real ZooKeeper servers for integration tests (Debian's `zookeeper` package): a standalone
//! server ([`ZkServer`]) or an ensemble ([`ZkEnsemble`]) on free loopback ports, each with its
//! own temp data dir, so tests run in parallel. Servers are killed by PID on drop.
//!
//! Timings are short so failure tests stay quick: `tickTime` 100 ms by default, and sessions
//! may ask for anything from 2 ticks up to a minute.
//!
//! ```no_run
//! let zk = vesta_tests::zk::ZkServer::start();
//! let connect = zk.connect(); // "127.0.0.1:PORT"
//! ```

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The server jar of Debian's `zookeeper` package (its manifest names the dependencies).
pub const JAR: &str = "/usr/share/java/zookeeper.jar";
/// Debian's ZooKeeper config dir, put on the class path for its logging config.
pub const CONF_DIR: &str = "/etc/zookeeper/conf";

/// How long a server or an ensemble may take to start serving.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Server settings for a test.
#[derive(Clone, Copy, Debug)]
pub struct ZkOptions {
    /// ZooKeeper's basic time unit; session expiry is checked once per tick.
    pub tick_ms: u64,
    /// Smallest session timeout the server grants.
    pub min_session_ms: u64,
    /// Largest session timeout the server grants.
    pub max_session_ms: u64,
}

impl Default for ZkOptions {
    fn default() -> Self {
        ZkOptions {
            tick_ms: 100,
            min_session_ms: 200,
            max_session_ms: 60_000,
        }
    }
}

/// Panics with the install command if ZooKeeper is not installed.
pub fn require_zookeeper() {
    assert!(
        Path::new(JAR).exists(),
        "ZooKeeper is not installed ({JAR} is missing): run `apt-get install -y zookeeper`"
    );
}

/// `n` distinct free TCP ports on 127.0.0.1 (held together while picked, so no duplicates).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("binding a free loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect()
}

/// Sends a four-letter command (`ruok`, `srvr`, `mntr`...) and returns the answer, if any.
pub fn four_letter(port: u16, command: &str) -> Option<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(command.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The `Mode:` line of `srvr` (`standalone`, `leader`, `follower`), once the node serves.
pub fn mode(port: u16) -> Option<String> {
    let answer = four_letter(port, "srvr")?;
    answer
        .lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_owned())
}

/// ZooKeeper's own Java client (`zkCli`) connected to `connect`, ready for arguments.
fn zk_cli_command(connect: &str) -> Command {
    require_zookeeper();
    let mut c = Command::new("java");
    c.args([
        "-Xmx64m",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        &format!("{CONF_DIR}:{JAR}"),
        "org.apache.zookeeper.ZooKeeperMain",
        "-server",
        connect,
    ]);
    c
}

/// Its stdout and stderr, as one text.
fn combined(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Runs one `zkCli` command (e.g. `delete /vesta/x/machines/0`) against `connect` with
/// ZooKeeper's own Java client; returns its combined output. For tests that tamper with znodes.
pub fn zk_cli(connect: &str, command: &str) -> String {
    let out = zk_cli_command(connect)
        .args(command.split_whitespace())
        .stdin(Stdio::null())
        .output()
        .expect("running ZooKeeper's CLI");
    combined(&out)
}

/// Runs several `zkCli` commands in one client session, back to back (fed on its stdin), so
/// they land within milliseconds of each other: e.g. replace a claim before its holder's next
/// beat. Returns the combined output.
pub fn zk_cli_script(connect: &str, commands: &[&str]) -> String {
    let mut child = zk_cli_command(connect)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running ZooKeeper's CLI");
    let script = commands.join("\n") + "\nquit\n";
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("writing to ZooKeeper's CLI");
    combined(&child.wait_with_output().expect("ZooKeeper's CLI"))
}

/// One ZooKeeper JVM: its config, data dir and process.
#[derive(Debug)]
struct Node {
    client_port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    main_class: &'static str,
}

impl Node {
    fn spawn(&mut self) {
        require_zookeeper();
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("creating the ZooKeeper log file");
        let child = Command::new("java")
            .args([
                "-Xmx96m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.admin.enableServer=false",
                "-cp",
                &format!("{CONF_DIR}:{JAR}"),
                self.main_class,
            ])
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("starting java (is a JRE installed? `apt-get install -y zookeeper`)");
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL by PID: no clean shutdown, like a crash.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

fn write_config(path: &Path, data_dir: &Path, client_port: u16, opts: ZkOptions, extra: &str) {
    let text = format!(
        "tickTime={tick}\n\
         initLimit=20\n\
         syncLimit=10\n\
         dataDir={data}\n\
         clientPort={client_port}\n\
         clientPortAddress=127.0.0.1\n\
         minSessionTimeout={min}\n\
         maxSessionTimeout={max}\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=*\n\
         maxClientCnxns=0\n\
         {extra}",
        tick = opts.tick_ms,
        data = data_dir.display(),
        min = opts.min_session_ms,
        max = opts.max_session_ms,
    );
    fs::write(path, text).expect("writing zoo.cfg");
}

/// Polls `ready` every 50 ms until it holds (true) or `timeout` passes (false).
pub(crate) fn wait_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if ready() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A standalone ZooKeeper server on a free loopback port.
#[derive(Debug)]
pub struct ZkServer {
    node: Node,
    dir: TempDir,
}

impl ZkServer {
    /// Starts a server with the default (short) timings and waits until it serves.
    pub fn start() -> Self {
        Self::start_with(ZkOptions::default())
    }

    /// Starts a server with `opts` and waits until it serves.
    pub fn start_with(opts: ZkOptions) -> Self {
        require_zookeeper();
        let dir = tempfile::Builder::new()
            .prefix("vesta-zk-")
            .tempdir()
            .expect("temp dir");
        let data = dir.path().join("data");
        fs::create_dir_all(&data).expect("data dir");
        let port = free_ports(1)[0];
        let config = dir.path().join("zoo.cfg");
        write_config(&config, &data, port, opts, "");
        let mut server = ZkServer {
            node: Node {
                client_port: port,
                config,
                log: dir.path().join("zookeeper.log"),
                child: None,
                main_class: "org.apache.zookeeper.server.ZooKeeperServerMain",
            },
            dir,
        };
        server.node.spawn();
        server.wait_serving();
        server
    }

    /// The connect string, `127.0.0.1:PORT`.
    pub fn connect(&self) -> String {
        format!("127.0.0.1:{}", self.node.client_port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.node.client_port
    }

    /// The server's process ID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.node.pid()
    }

    /// The temp dir with `zoo.cfg`, `data/` and `zookeeper.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills the server (SIGKILL); its data stays, so [`restart`](Self::restart) resumes the
    /// same sessions and znodes, as after a crash.
    pub fn stop(&mut self) {
        self.node.kill();
    }

    /// Starts the stopped server again on the same port and data, and waits until it serves.
    pub fn restart(&mut self) {
        self.node.kill();
        self.node.spawn();
        self.wait_serving();
    }

    /// True while the process runs.
    pub fn is_running(&self) -> bool {
        self.node.child.is_some()
    }

    fn wait_serving(&self) {
        let port = self.node.client_port;
        assert!(
            wait_until(START_TIMEOUT, || mode(port).is_some()),
            "ZooKeeper on port {port} did not start serving within {START_TIMEOUT:?}; log: {}",
            self.node.log.display()
        );
    }
}

/// A ZooKeeper ensemble of `n` nodes on loopback ports.
#[derive(Debug)]
pub struct ZkEnsemble {
    nodes: Vec<Node>,
    dir: TempDir,
}

impl ZkEnsemble {
    /// Starts a 3-node ensemble with the default timings and waits for a quorum.
    pub fn start() -> Self {
        Self::start_with(3, ZkOptions::default())
    }

    /// Starts an `n`-node ensemble with `opts` and waits until every node serves.
    pub fn start_with(n: usize, opts: ZkOptions) -> Self {
        require_zookeeper();
        let dir = tempfile::Builder::new()
            .prefix("vesta-zk-ensemble-")
            .tempdir()
            .expect("temp dir");
        let ports = free_ports(3 * n);
        let servers: String = (0..n)
            .map(|i| {
                format!(
                    "server.{}=127.0.0.1:{}:{}\n",
                    i + 1,
                    ports[3 * i + 1],
                    ports[3 * i + 2]
                )
            })
            .collect();
        let nodes = (0..n)
            .map(|i| {
                let node_dir = dir.path().join(format!("node{}", i + 1));
                let data = node_dir.join("data");
                fs::create_dir_all(&data).expect("data dir");
                fs::write(data.join("myid"), format!("{}\n", i + 1)).expect("myid");
                let config = node_dir.join("zoo.cfg");
                write_config(&config, &data, ports[3 * i], opts, &servers);
                Node {
                    client_port: ports[3 * i],
                    config,
                    log: node_dir.join("zookeeper.log"),
                    child: None,
                    main_class: "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                }
            })
            .collect();
        let mut ensemble = ZkEnsemble { nodes, dir };
        for node in &mut ensemble.nodes {
            node.spawn();
        }
        for i in 0..n {
            ensemble.wait_serving(i);
        }
        ensemble
    }

    /// The connect string of all nodes, `127.0.0.1:P1,127.0.0.1:P2,...`.
    pub fn connect(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The client port of node `i` (0-based).
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].client_port
    }

    /// The process ID of node `i` while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.nodes[i].pid()
    }

    /// The temp dir holding `nodeN/{zoo.cfg,data,zookeeper.log}`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The index of the node that is leader now, if any.
    pub fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| {
            self.nodes[i].child.is_some()
                && mode(self.nodes[i].client_port).as_deref() == Some("leader")
        })
    }

    /// Kills node `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Restarts node `i` and waits until it serves again.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].kill();
        self.nodes[i].spawn();
        self.wait_serving(i);
    }

    /// The running node that is leader, waited for: after a leader was killed, and after the
    /// start too (a loaded machine can delay an election, or a `srvr` answer, past the start's
    /// wait for every node to serve). `None` on timeout.
    pub fn wait_leader(&self, timeout: Duration) -> Option<usize> {
        let mut leader = None;
        wait_until(timeout, || {
            leader = self.leader();
            leader.is_some()
        });
        leader
    }

    fn wait_serving(&self, i: usize) {
        let port = self.nodes[i].client_port;
        assert!(
            wait_until(START_TIMEOUT, || mode(port).is_some()),
            "ZooKeeper node {} on port {port} did not start serving within {START_TIMEOUT:?}; \
             log: {}",
            i + 1,
            self.nodes[i].log.display()
        );
    }
}
