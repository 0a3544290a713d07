//! `vesta` as operators and shell scripts run it, for the tests of their mistakes
//! (`tests/it/operator_mistakes.rs`): a [`Seat`] is a host and a user — a host-hold directory
//! (`VESTA_HOLD_DIR`, so two seats with two directories are two hosts) and a state directory
//! (`XDG_STATE_HOME`, so two are two users) — and a [`Ledger`] counts every ID handed out and
//! each one handed out twice, naming the runs that did.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::bin::{ServerChild, fails_in_one_line, http, vesta_command};

/// Where a `vesta` process runs: on which host (its host holds) and as which user (its own
/// state files).
#[derive(Clone, Debug)]
pub struct Seat {
    /// The host's hold directory (`VESTA_HOLD_DIR`).
    pub hold_dir: PathBuf,
    /// The user's `XDG_STATE_HOME` (`vesta gen` keeps its own state file in `vesta/` there).
    pub state_home: PathBuf,
}

impl Seat {
    /// A host and a user of their own under `root` (created).
    pub fn new(root: &Path, host: &str, user: &str) -> Seat {
        let seat = Seat {
            hold_dir: root.join(format!("host-{host}")),
            state_home: root.join(format!("user-{user}")),
        };
        std::fs::create_dir_all(&seat.hold_dir).expect("a host-hold directory");
        std::fs::create_dir_all(&seat.state_home).expect("a state directory");
        seat
    }

    /// Another user on the same host.
    pub fn other_user(&self, root: &Path, user: &str) -> Seat {
        let seat = Seat {
            hold_dir: self.hold_dir.clone(),
            state_home: root.join(format!("user-{user}")),
        };
        std::fs::create_dir_all(&seat.state_home).expect("a state directory");
        seat
    }

    /// The environment of a process on this seat.
    pub fn envs(&self) -> [(&'static str, &str); 2] {
        [
            ("VESTA_HOLD_DIR", path_str(&self.hold_dir)),
            ("XDG_STATE_HOME", path_str(&self.state_home)),
        ]
    }

    /// `vesta ARGS` on this seat.
    pub fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut c = vesta_command();
        c.envs(self.envs()).args(args).stdin(Stdio::null());
        c
    }

    /// `vesta gen ARGS`: asserts success; returns the IDs it printed (decimal) and its stderr.
    pub fn run_gen_logged(&self, args: &[&str]) -> (Vec<u64>, String) {
        let out = self
            .cmd(["gen"])
            .args(args)
            .output()
            .expect("running vesta gen");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "vesta gen {args:?}: {stderr}");
        (ids_of(&out), stderr)
    }

    /// `vesta gen ARGS`: asserts success; returns the IDs it printed (decimal).
    pub fn run_gen(&self, args: &[&str]) -> Vec<u64> {
        self.run_gen_logged(args).0
    }

    /// `vesta ARGS`: asserts success; returns what it printed on stdout.
    pub fn succeeds(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().expect("running vesta");
        assert!(
            out.status.success(),
            "vesta {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `vesta ARGS`: asserts a failure in one stderr line holding every needle; returns it.
    pub fn fails(&self, args: &[&str], needles: &[&str]) -> String {
        fails_in_one_line(&mut self.cmd(args), needles)
    }

    /// `vesta serve KIND ARGS` on this seat (`envs` added), once it listens.
    pub fn serve(&self, kind: &str, args: &[&str], envs: &[(&str, &str)]) -> ServerChild {
        ServerChild::start(kind, args, &[&self.envs()[..], envs].concat())
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

/// The decimal IDs of a `vesta gen` run's stdout.
pub fn ids_of(out: &Output) -> Vec<u64> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap_or_else(|_| panic!("not an ID: {l:?}")))
        .collect()
}

/// `count` IDs from a REST server's `/genids` (at most its `max_batch`).
pub fn genids(server: &ServerChild, count: u64) -> Vec<u64> {
    let (status, body) = http(&server.addr, "GET", &format!("/genids?count={count}"));
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("a JSON answer");
    v["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|id| id.as_str().and_then(|s| s.parse().ok()).expect("an ID"))
        .collect()
}

/// `count` IDs from a server: `/genids` of REST (at most its `max_batch`), `vesta gen --server`
/// of TCP (`kind`: `rest` or `tcp`).
pub fn server_ids(kind: &str, server: &ServerChild, count: u64) -> Vec<u64> {
    if kind == "rest" {
        return genids(server, count);
    }
    let out = vesta_command()
        .args(["gen", "--server", &server.addr, "-n", &count.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("running vesta gen --server");
    assert!(
        out.status.success(),
        "vesta gen --server {}: {}",
        server.addr,
        String::from_utf8_lossy(&out.stderr)
    );
    ids_of(&out)
}

/// Every ID handed out in a test, by the run that handed it out: [`Ledger::assert_none_twice`]
/// counts the IDs seen twice and names the runs of the first few.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Each run's name and IDs, sorted.
    runs: Vec<(String, Vec<u64>)>,
}

impl Ledger {
    /// A new, empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Books the IDs `run` handed out.
    pub fn add(&mut self, run: impl Into<String>, ids: impl IntoIterator<Item = u64>) {
        let mut ids: Vec<u64> = ids.into_iter().collect();
        if !ids.is_sorted() {
            ids.sort_unstable();
        }
        self.runs.push((run.into(), ids));
    }

    /// IDs booked.
    pub fn total(&self) -> usize {
        self.runs.iter().map(|(_, ids)| ids.len()).sum()
    }

    /// The IDs booked more than once (each extra copy once), with the two runs of each.
    fn twice(&self) -> Vec<(u64, usize, usize)> {
        let mut twice = Vec::new();
        for (r, (_, ids)) in self.runs.iter().enumerate() {
            twice.extend(
                ids.windows(2)
                    .filter(|w| w[0] == w[1])
                    .map(|w| (w[0], r, r)),
            );
        }
        // Runs one after another hand out ranges that do not overlap: only overlapping pairs
        // are merged (the whole check stays linear in the usual case, even unoptimised).
        let mut order: Vec<usize> = (0..self.runs.len())
            .filter(|&r| !self.runs[r].1.is_empty())
            .collect();
        order.sort_by_key(|&r| self.runs[r].1[0]);
        for (i, &a) in order.iter().enumerate() {
            let a_last = *self.runs[a].1.last().unwrap_or(&0);
            for &b in order[i + 1..].iter() {
                if self.runs[b].1[0] > a_last {
                    break;
                }
                let (mut x, mut y) = (self.runs[a].1.iter().peekable(), self.runs[b].1.iter());
                for id in y.by_ref() {
                    while x.next_if(|v| *v < id).is_some() {}
                    if x.peek() == Some(&id) {
                        twice.push((*id, a, b));
                    }
                }
            }
        }
        twice
    }

    /// IDs booked more than once (each extra copy counts once).
    pub fn duplicates(&self) -> usize {
        self.twice().len()
    }

    /// Asserts that no ID was handed out twice; returns how many were booked.
    pub fn assert_none_twice(&self, what: &str) -> usize {
        let twice = self.twice();
        if !twice.is_empty() {
            let mut shown = String::new();
            for (id, a, b) in twice.iter().take(5) {
                let _ = write!(
                    shown,
                    "\n  {id} by {} and by {}",
                    self.runs[*a].0, self.runs[*b].0
                );
            }
            panic!(
                "{what}: {} of {} IDs handed out twice, e.g.:{shown}",
                twice.len(),
                self.total()
            );
        }
        self.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_counts_and_names_ids_seen_twice() {
        let mut l = Ledger::new();
        l.add("a", [1, 2, 3]);
        l.add("b", [5, 4]);
        assert_eq!(l.assert_none_twice("distinct"), 5);
        l.add("c", [3, 5, 6]);
        assert_eq!(l.duplicates(), 2);
        l.add("d", [9, 9]);
        assert_eq!(l.duplicates(), 3);
        let err =
            std::panic::catch_unwind(move || l.assert_none_twice("x")).expect_err("two IDs twice");
        let text = err.downcast_ref::<String>().unwrap();
        assert!(text.contains("3 of 10 IDs handed out twice"), "{text}");
        assert!(text.contains("3 by a and by c"), "{text}");
        assert!(text.contains("9 by d and by d"), "{text}");
    }
}
