//! A throwaway Redis (Debian's `redis-server`) on a free loopback port, nothing saved to disk,
//! in a temporary directory; killed by PID on drop. The peer of the per-key sequence load
//! (`vesta bench tcp --peer redis`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::zk::{free_ports, wait_until};

/// How long Redis may take to answer `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The `redis-server` binary; panics with the install command if it is missing.
pub fn require_redis() -> PathBuf {
    ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("Redis is not installed: run `apt-get install -y redis-server`"))
}

/// A running Redis server.
pub struct Redis {
    child: Option<Child>,
    dir: TempDir,
    port: u16,
}

impl Redis {
    /// Starts a fresh, empty server and waits until it answers.
    pub fn start() -> Redis {
        let port = free_ports(1)[0];
        let dir = tempfile::Builder::new()
            .prefix("vesta-redis-")
            .tempdir()
            .unwrap();
        let log = std::fs::File::create(dir.path().join("redis.log")).unwrap();
        let child = Command::new(require_redis())
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawning redis-server");
        let redis = Redis {
            child: Some(child),
            dir,
            port,
        };
        assert!(
            wait_until(START_TIMEOUT, || redis
                .command(&["PING"])
                .is_some_and(|r| r == "+PONG")),
            "redis-server on port {port} did not answer within {START_TIMEOUT:?}; log: {}",
            redis.dir.path().join("redis.log").display()
        );
        redis
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends one command (as a RESP array of bulk strings) on a connection of its own and
    /// returns the reply's first line without its `\r\n` (`+PONG`, `:42`, `-ERR ...`); `None`
    /// when the server cannot be reached.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for a in args {
            request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(request.as_bytes()).ok()?;
        let mut out = Vec::new();
        let mut byte = [0u8; 1];
        while !out.ends_with(b"\r\n") {
            match s.read(&mut byte) {
                Ok(1) => out.push(byte[0]),
                _ => return None,
            }
        }
        out.truncate(out.len() - 2);
        String::from_utf8(out).ok()
    }

    /// The sum of the integer values of the keys `0..n` (a missing key counts 0), added up by
    /// the server in one Lua script.
    pub fn sum_of_keys(&self, n: u64) -> i64 {
        let script = "local s = 0 for i = 0, tonumber(ARGV[1]) - 1 do \
                      s = s + (tonumber(redis.call('GET', tostring(i))) or 0) end return s";
        let reply = self
            .command(&["EVAL", script, "0", &n.to_string()])
            .expect("redis answers EVAL");
        reply
            .strip_prefix(':')
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("EVAL answered {reply}"))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
