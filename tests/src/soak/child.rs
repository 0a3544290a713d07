//! Child processes of the soak: spawned with their output in a log file, signalled by PID
//! (SIGKILL for a crash, SIGTERM for a clean stop), killed on drop, and listed in a PID file with
//! their kernel start times so `scripts/soak` can clean up after an orchestrator that was itself
//! killed, without ever touching a process that merely reuses a PID.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// `pid start_time name` lines of every process the soak started (appended, never rewritten).
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
}

impl PidFile {
    /// The list at `path` (created on first use).
    pub fn new(path: PathBuf) -> Self {
        PidFile { path }
    }

    /// Records a started process.
    pub fn record(&self, pid: u32, name: &str) {
        let start = start_time(pid).unwrap_or(0);
        let line = format!("{pid} {start} {name}\n");
        if let Ok(mut f) = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The kernel's start time of `pid` (clock ticks after boot: field 22 of `/proc/PID/stat`).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; it ends at the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// One running child.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    started: Instant,
    exit: Option<ExitStatus>,
}

impl Proc {
    /// Spawns `cmd` with stderr (and stdout, unless `stdout` is given) appended to `log`; with
    /// `piped_stdin`, lines can be sent to it with [`send`](Self::send). It gets a process
    /// group of its own, so a Ctrl-C at the terminal reaches only the soak, which then stops it
    /// in order.
    pub fn spawn(
        name: impl Into<String>,
        mut cmd: Command,
        log: &Path,
        stdout: Option<File>,
        piped_stdin: bool,
        pids: &PidFile,
    ) -> io::Result<Proc> {
        let name = name.into();
        let log_file = OpenOptions::new().create(true).append(true).open(log)?;
        let out = match stdout {
            Some(f) => Stdio::from(f),
            None => Stdio::from(log_file.try_clone()?),
        };
        cmd.stdout(out).stderr(log_file).process_group(0);
        cmd.stdin(if piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd.spawn()?;
        pids.record(child.id(), &name);
        Ok(Proc {
            name,
            stdin: child.stdin.take(),
            child,
            log: log.to_owned(),
            started: Instant::now(),
            exit: None,
        })
    }

    /// The name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// When it was started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Sends one line to its stdin; false if it cannot take it (exited, or no pipe).
    pub fn send(&mut self, line: &str) -> bool {
        match &mut self.stdin {
            Some(stdin) => writeln!(stdin, "{line}")
                .and_then(|()| stdin.flush())
                .is_ok(),
            None => false,
        }
    }

    /// Closes its stdin (a worker takes that as "stop").
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Its exit status, if it has exited (reaped without blocking).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// True while it runs.
    pub fn running(&mut self) -> bool {
        self.try_wait().is_none()
    }

    /// Waits up to `timeout` for it to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            if Instant::now() >= until {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL by PID, like a crash, and reaps it.
    pub fn kill(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            self.exit = self.child.wait().ok();
        }
    }

    /// SIGTERM by PID: a clean stop request.
    pub fn terminate(&mut self) -> io::Result<()> {
        if !self.running() {
            return Ok(());
        }
        let pid = Pid::from_raw(self.child.id() as i32)
            .ok_or_else(|| io::Error::other("PID 0 cannot be signalled"))?;
        kill_process(pid, Signal::TERM).map_err(io::Error::from)
    }

    /// The last `n` lines of its log, for evidence.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log, n)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of a text file ("" if unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let text = fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_send_terminate_kill_and_record() {
        let dir = tempfile::tempdir().unwrap();
        let pids = PidFile::new(dir.path().join("pids"));
        let log = dir.path().join("cat.log");
        // `cat` echoes stdin into the log and exits 0 when its stdin closes.
        let mut cat =
            Proc::spawn("cat", Command::new("cat"), &log, None, true, &pids).expect("cat runs");
        assert!(cat.send("hello"));
        cat.close_stdin();
        assert!(cat.wait_timeout(Duration::from_secs(10)).unwrap().success());
        assert_eq!(tail(&log, 5), "hello");
        assert!(!cat.send("gone"));

        let mut sleep = Command::new("sleep");
        sleep.arg("30");
        let mut p = Proc::spawn("sleep", sleep, &log, None, false, &pids).unwrap();
        let pid = p.pid();
        assert!(start_time(pid).is_some());
        p.terminate().unwrap();
        let status = p
            .wait_timeout(Duration::from_secs(10))
            .expect("SIGTERM ends sleep");
        assert!(!status.success());

        let mut sleep = Command::new("sleep");
        sleep.arg("30");
        let mut p = Proc::spawn("sleep2", sleep, &log, None, false, &pids).unwrap();
        p.kill();
        assert!(!p.running());
        let listed = fs::read_to_string(dir.path().join("pids")).unwrap();
        assert_eq!(listed.lines().count(), 3, "{listed}");
        assert!(listed.contains(&format!("{pid} ")), "{listed}");
    }
}
