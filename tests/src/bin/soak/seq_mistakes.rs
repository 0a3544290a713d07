//! The sequence group's operators' mistakes (issue 47): a second server on the group's table —
//! a standalone `vesta serve tcp` and a `vesta seq next --db` — each refused in one line (one
//! that serves is a finding); and the table backed up with `pg_dump` at one turn of the fault,
//! put back under the running members at the next (`psql -1`), and raised back with `vesta seq
//! raise` (on the members' host) a few seconds later. Meanwhile the members refuse the sections
//! that went back (the workers count those calls as failed); the history checker at the end
//! finds no number twice.

use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::Ctx;
use crate::seqs::{FIRST_MACHINE, SeqGroup};

/// How long after a put back the table is raised back: the members refuse its sections for
/// about that long.
const RAISE_AFTER: Duration = Duration::from_secs(3);
/// How long a refused process may take to say so.
const REFUSED_WITHIN: Duration = Duration::from_secs(30);

impl SeqGroup {
    /// Writes the config `vesta seq` runs use: the table and the coordination, reached directly.
    pub(crate) fn write_tool_conf(&self, conf: &str, ctx: &Ctx) -> anyhow::Result<PathBuf> {
        let mut text = format!("{conf}db = \"{}\"\n", ctx.seq_url);
        // `conf` ends inside [seq]: the sections of the coordination follow.
        if conf.contains("coordination = \"etcd\"") {
            let _ = write!(
                text,
                "[etcd]\nendpoints = [\"{}\"]\nroot = \"/vesta/soak-seq\"\n",
                ctx.etcd_url
            );
        } else if conf.contains("coordination = \"zookeeper\"") {
            let _ = write!(
                text,
                "[zookeeper]\nconnect = \"{}\"\nroot = \"/vesta/soak-seq\"\n",
                ctx.zk_connect
            );
        }
        let path = self.dir().join("tool.toml");
        fs::write(&path, text)?;
        Ok(path)
    }

    /// The fault: a standalone server and a `vesta seq next --db` on the table, on another
    /// host: each must be refused in one line.
    pub fn second_server(&mut self, ctx: &mut Ctx) -> bool {
        let host = ctx.dir.join("hold-second");
        let machine = (FIRST_MACHINE + 10).to_string();
        let mut serve = Command::new(&ctx.vesta);
        serve.env("VESTA_HOLD_DIR", &host).args([
            "serve",
            "tcp",
            "--listen",
            "127.0.0.1:0",
            "--machine",
            &machine,
            "--seq-db",
            &ctx.seq_url,
        ]);
        let mut next = Command::new(&ctx.vesta);
        next.env("VESTA_HOLD_DIR", &host)
            .args(["seq", "next", "0", "--config"])
            .arg(&self.tool_conf);
        for (what, cmd) in [("a standalone server", serve), ("vesta seq next", next)] {
            match refused(cmd) {
                Ok(line) => ctx.event(format!("{what} on the seq table refused: {line}")),
                Err(e) => ctx.finding(format!("{what} on the seq table: {e}")),
            }
        }
        true
    }

    /// The fault: a backup of the table the first time, the backup put back under the members
    /// the next (raised back [`RAISE_AFTER`] later, in [`SeqGroup::raise_when_due`]).
    pub fn backup_or_put_back(&mut self, ctx: &mut Ctx) -> bool {
        if self.raise_at.is_some() {
            return false;
        }
        let (port, db) = (ctx.pg_port.to_string(), db_name(&ctx.seq_url));
        let bin = vesta_tests::db::require_postgres();
        let Some(backup) = self.backup.take() else {
            let file = self.dir().join("vesta_seq.sql");
            let mut dump = Command::new(bin.join("pg_dump"));
            dump.args(["-h", "127.0.0.1", "-p", &port, "-U", "vesta", "-d", &db])
                .args(["-t", "vesta_seq", "--clean", "--if-exists", "-f"])
                .arg(&file);
            match run(dump) {
                Ok(()) => {
                    ctx.event("backed the seq table up (pg_dump -t vesta_seq)");
                    self.backup = Some(file);
                    return true;
                }
                // PostgreSQL crashed by another fault: try again at the next turn.
                Err(e) => {
                    ctx.event(format!("backing the seq table up failed: {e}"));
                    return false;
                }
            }
        };
        let mut restore = Command::new(bin.join("psql"));
        restore
            .args(["-X", "-q", "-1", "-v", "ON_ERROR_STOP=1"])
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "vesta",
                "-d",
                &db,
                "-f",
            ])
            .arg(&backup);
        match run(restore) {
            Ok(()) => {
                ctx.event(format!(
                    "put the seq table's backup back under the members; raised back in {} s",
                    RAISE_AFTER.as_secs()
                ));
                self.raise_at = Some(Instant::now() + RAISE_AFTER);
                true
            }
            Err(e) => {
                ctx.event(format!("putting the seq table back failed: {e}"));
                self.backup = Some(backup);
                false
            }
        }
    }

    /// Runs `vesta seq raise` on the members' host once due (again at each tick while it fails,
    /// e.g. while PostgreSQL is down).
    pub(crate) fn raise_when_due(&mut self, ctx: &mut Ctx) {
        if self.raise_at.is_none_or(|at| Instant::now() < at) {
            return;
        }
        let out = Command::new(&ctx.vesta)
            .env("VESTA_HOLD_DIR", ctx.dir.join("hold"))
            .args(["seq", "raise", "--config"])
            .arg(&self.tool_conf)
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let rows = String::from_utf8_lossy(&o.stdout).lines().count();
                ctx.event(format!("vesta seq raise: {rows} rows raised back"));
                self.raise_at = None;
            }
            Ok(o) => {
                ctx.event(format!(
                    "vesta seq raise failed (tried again): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                self.raise_at = Some(Instant::now() + Duration::from_secs(1));
            }
            Err(e) => ctx.finding(format!("vesta seq raise could not run: {e}")),
        }
    }
}

/// Runs `cmd`, which must be refused: its one stderr line, or why it is a finding (it served,
/// said more than a line, or did not stop in time; then it is killed).
fn refused(mut cmd: Command) -> Result<String, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run: {e}"))?;
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + REFUSED_WITHIN;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(" listening on ") => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("it served beside the members: {line}"));
            }
            Ok(line) => lines.push(line),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("not refused within {} s", REFUSED_WITHIN.as_secs()));
            }
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let errors: Vec<&String> = lines.iter().filter(|l| l.starts_with("error:")).collect();
    match (status.success(), errors.as_slice()) {
        (false, [line]) if line.contains("served") => Ok((*line).clone()),
        _ => Err(format!("exited {status}, said {lines:?}")),
    }
}

/// Runs a tool to completion; its stderr when it fails.
fn run(mut cmd: Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// The database of a `postgres://.../DB` URL.
fn db_name(url: &str) -> String {
    url.rsplit('/')
        .next()
        .unwrap_or_default()
        .split('?')
        .next()
        .unwrap_or_default()
        .to_owned()
}
