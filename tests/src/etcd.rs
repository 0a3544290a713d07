//! A single-member etcd (Debian's `etcd-server`) on free loopback ports, in a temporary data
//! directory; stopped with SIGKILL and restarted on the same ports and data; killed on drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::zk::{free_ports, wait_until};

/// How long etcd may take to answer `/health`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The `etcd` binary; panics with the install command if it is missing.
pub fn require_etcd() -> PathBuf {
    ["/usr/bin/etcd", "/usr/local/bin/etcd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("etcd is not installed: run `apt-get install -y etcd-server`"))
}

/// A running etcd member.
pub struct Etcd {
    child: Option<Child>,
    dir: TempDir,
    client: u16,
    peer: u16,
}

impl Etcd {
    /// Starts a fresh member and waits until it is healthy.
    pub fn start() -> Etcd {
        let ports = free_ports(2);
        let mut etcd = Etcd {
            child: None,
            dir: tempfile::Builder::new()
                .prefix("vesta-etcd-")
                .tempdir()
                .unwrap(),
            client: ports[0],
            peer: ports[1],
        };
        etcd.launch();
        etcd
    }

    fn launch(&mut self) {
        let client = format!("http://127.0.0.1:{}", self.client);
        let peer = format!("http://127.0.0.1:{}", self.peer);
        let log = std::fs::File::create(self.dir.path().join("etcd.log")).unwrap();
        let child = Command::new(require_etcd())
            .args(["--name", "n", "--data-dir"])
            .arg(self.dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("n={peer}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawning etcd");
        self.child = Some(child);
        assert!(
            wait_until(START_TIMEOUT, || self.healthy()),
            "etcd on port {} did not become healthy within {START_TIMEOUT:?}; log: {}",
            self.client,
            self.dir.path().join("etcd.log").display()
        );
    }

    fn healthy(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.client)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        if s.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.contains("\"health\":\"true\"")
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.client
    }

    /// The member's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the member (SIGKILL: no goodbye to clients).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}
