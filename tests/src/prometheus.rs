//! A real Prometheus server for the monitoring tests: Debian's `prometheus` binary on a free
//! loopback port with a throwaway config and data directory, killed by PID on drop, and a small
//! client for its HTTP API (`/api/v1/...`, JSON).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::zk::free_ports;

/// The Prometheus binary, if installed (Debian's `prometheus` package; scripts/test installs
/// it).
pub fn binary() -> Option<PathBuf> {
    ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// `promtool`, if installed (same package).
pub fn promtool() -> Option<PathBuf> {
    ["/usr/bin/promtool", "/usr/local/bin/promtool"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A running Prometheus; killed (and its data deleted) on drop.
#[derive(Debug)]
pub struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: TempDir,
}

impl Prometheus {
    /// Starts Prometheus with `config` (the text of a prometheus.yml) and waits until it is
    /// ready. Panics, with its log, if it does not get ready within 20 s.
    pub fn start(binary: &std::path::Path, config: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("writing prometheus.yml");
        let port = free_ports(1)[0];
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting prometheus");
        let p = Prometheus { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while p
            .raw_get("/-/ready")
            .is_none_or(|(status, _)| status != 200)
        {
            assert!(
                Instant::now() < deadline,
                "prometheus not ready: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its log so far (stderr), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET path` (with its query, already encoded) of the HTTP API: the JSON answer's `data`.
    /// Panics if the answer is not a `success`.
    pub fn api(&self, path_and_query: &str) -> serde_json::Value {
        let (status, body) = self
            .raw_get(path_and_query)
            .unwrap_or_else(|| panic!("no answer to {path_and_query}: {}", self.log()));
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path_and_query}: {e}: {body}"));
        assert!(
            status == 200 && v["status"] == "success",
            "{path_and_query}: {status} {body}"
        );
        v["data"].clone()
    }

    /// An HTTP/1.0 GET (no chunked answers): status and body, or `None` if not reachable.
    fn raw_get(&self, path_and_query: &str) -> Option<(u16, String)> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(
            s,
            "GET {path_and_query} HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.addr
        )
        .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let status = out.get(9..12)?.parse().ok()?;
        let body = out.split_once("\r\n\r\n")?.1.to_owned();
        Some((status, body))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query-string value (PromQL has `{`, `"`, spaces...).
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
