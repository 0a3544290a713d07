//! `run-tests`: runs the workspace's test binaries (built by `cargo test --workspace --no-run`)
//! several at a time, as `scripts/test` does by default. Most binaries wait far more than they
//! compute (ZooKeeper's JVM, initdb, servers starting, start guards), so two cores run three or
//! four of them at once in the time of one; inside each, libtest runs its tests in parallel as
//! `cargo test` would.
//!
//! A package's integration tests are one binary (`tests/it/`, each file a module, compiled and
//! linked once); each of its top modules runs as a job of its own (`--exact` with the module's
//! tests), so the jobs are the test files, as when each file was a binary.
//!
//! Each job runs as cargo runs it (working directory its package, `CARGO_MANIFEST_DIR`,
//! `CARGO_PKG_NAME`, `CARGO`), plus one thing: a host-hold directory of its own
//! (`VESTA_HOLD_DIR`), so two binaries' issuers of one static machine ID are two hosts, as they
//! are two test processes. Its output goes to `target/tmp/test-logs/NAME.log`, printed whole
//! when it fails. The doc tests run as one more job (`cargo test --doc`). The slowest binaries
//! of the last run (`target/tmp/test-times.tsv`) start first. Ends with each binary's wall time
//! and CPU time (user + system of the binary and of every process it waited for: servers it
//! started and stopped, cargo and rustc in the builds it ran; not a daemon that left it), the
//! slowest first, and exits non-zero if any failed.
//!
//! `run-tests [JOBS]` (default `VESTA_TEST_JOBS`, else 3).

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use vesta_tests::db::target_dir;

/// Used on a fresh clone, before any run recorded its times: the binaries that took longest.
const SLOW_FIRST: &[&str] = &[
    "lean_builds",
    "tcp_cli",
    "sql_lease",
    "operator_mistakes",
    "console",
    "package",
    "zk_lease",
    "etcd_lease",
    "client",
    "zk_failover",
];

/// One job: a test binary, or the doc tests.
#[derive(Clone, Debug)]
struct Job {
    /// `package/target`, e.g. `vesta-tests/sql_lease`; `doc-tests` for the doc tests.
    name: String,
    command: Vec<String>,
    dir: PathBuf,
    package: String,
}

/// What a finished job did.
struct Done {
    name: String,
    ok: bool,
    took: Duration,
    /// CPU seconds of the process and its waited-for descendants; `None` when unreadable.
    cpu: Option<f64>,
    summary: String,
}

fn main() -> ExitCode {
    let jobs: usize = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("VESTA_TEST_JOBS").ok())
        .map_or(3, |j| {
            j.parse().expect("JOBS: a number of parallel test binaries")
        })
        .max(1);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = target_dir();
    let logs = target.join("tmp").join("test-logs");
    fs::create_dir_all(&logs).expect("creating target/tmp/test-logs");
    let times_file = target.join("tmp").join("test-times.tsv");
    let ticks = clock_ticks_per_second();

    let mut queue = test_binaries(&cargo);
    let workspace = queue
        .first()
        .map(|j| j.dir.parent().unwrap_or(&j.dir).to_owned())
        .unwrap_or_default();
    queue.push(Job {
        name: "doc-tests".into(),
        command: vec![
            cargo,
            "test".into(),
            "--workspace".into(),
            "--locked".into(),
            "--doc".into(),
        ],
        dir: workspace,
        package: String::new(),
    });
    order_slowest_first(
        &mut queue,
        &fs::read_to_string(&times_file).unwrap_or_default(),
    );
    println!(
        "run-tests: {} jobs, {jobs} at a time (logs in {})",
        queue.len(),
        logs.display()
    );

    let started = Instant::now();
    let queue = Arc::new(Mutex::new(VecDeque::from(queue)));
    let done = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..jobs)
        .map(|_| {
            let (queue, done, logs) = (queue.clone(), done.clone(), logs.clone());
            thread::spawn(move || {
                loop {
                    let Some(job) = queue.lock().unwrap().pop_front() else {
                        return;
                    };
                    let finished = run(&job, &logs, ticks);
                    report(&finished, &logs);
                    done.lock().unwrap().push(finished);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a runner thread");
    }

    let mut done = std::mem::take(&mut *done.lock().unwrap());
    done.sort_by_key(|d| std::cmp::Reverse(d.took));
    let table: String = done
        .iter()
        .map(|d| format!("{}\t{:.1}\t{}\n", d.name, d.took.as_secs_f64(), cpu(d.cpu)))
        .collect();
    let _ = fs::write(&times_file, &table);
    println!("\nrun-tests: time per binary, slowest first (wall, CPU)");
    for d in &done {
        println!(
            "  {:>6.1} s {:>6} s CPU  {} {}",
            d.took.as_secs_f64(),
            cpu(d.cpu),
            if d.ok { "ok    " } else { "FAILED" },
            d.name
        );
    }
    let total_cpu: f64 = done.iter().filter_map(|d| d.cpu).sum();
    let failed: Vec<&str> = done
        .iter()
        .filter(|d| !d.ok)
        .map(|d| d.name.as_str())
        .collect();
    println!(
        "run-tests: {} jobs in {:.0} s ({total_cpu:.0} s CPU), {} failed{}",
        done.len(),
        started.elapsed().as_secs_f64(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {}", failed.join(", "))
        }
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The test executables of the workspace's last `cargo test --no-run` build (built already:
/// this only lists them), with the package each belongs to.
fn test_binaries(cargo: &str) -> Vec<Job> {
    let out = Command::new(cargo)
        .args([
            "test",
            "--workspace",
            "--locked",
            "--no-run",
            "--message-format=json",
        ])
        .stderr(Stdio::inherit())
        .output()
        .expect("running cargo test --no-run");
    assert!(out.status.success(), "cargo test --no-run failed");
    let mut jobs = Vec::new();
    for line in out.stdout.lines() {
        let line = line.expect("cargo's output");
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let manifest = Path::new(msg["manifest_path"].as_str().expect("a manifest path"));
        let package = package_name(manifest);
        let dir = manifest.parent().expect("a package dir").to_owned();
        let target = msg["target"]["name"].as_str().unwrap_or("?");
        if target == MERGED {
            for (module, tests) in tests_by_module(exe) {
                let mut command = vec![exe.to_owned(), "--exact".to_owned()];
                command.extend(tests);
                jobs.push(Job {
                    name: format!("{package}/{module}"),
                    command,
                    dir: dir.clone(),
                    package: package.clone(),
                });
            }
        } else {
            jobs.push(Job {
                name: format!("{package}/{target}"),
                command: vec![exe.to_owned()],
                dir,
                package,
            });
        }
    }
    jobs
}

/// The integration-test target that holds a package's test files as modules (`tests/it/`).
const MERGED: &str = "it";

/// The tests of a merged binary (`EXE --list`), grouped by their top module: each group runs
/// as one job, a process of its own, as when each file was a binary.
fn tests_by_module(exe: &str) -> BTreeMap<String, Vec<String>> {
    let out = Command::new(exe)
        .args(["--list", "--format", "terse"])
        .stderr(Stdio::inherit())
        .output()
        .expect("listing a test binary's tests");
    assert!(out.status.success(), "{exe} --list failed");
    let mut modules: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(test) = line.strip_suffix(": test") else {
            continue;
        };
        let module = test.split_once("::").map_or(MERGED, |(m, _)| m);
        modules
            .entry(module.to_owned())
            .or_default()
            .push(test.to_owned());
    }
    modules
}

/// The package's name, from its manifest's `name = "..."`.
fn package_name(manifest: &Path) -> String {
    let text = fs::read_to_string(manifest).expect("reading a package manifest");
    text.lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("name")?.trim().strip_prefix('=')?;
            Some(rest.trim().trim_matches('"').to_owned())
        })
        .expect("a package name")
}

/// The last run's slowest first; binaries it did not time, by the built-in list, then in
/// cargo's order.
fn order_slowest_first(queue: &mut [Job], last_times: &str) {
    let times: BTreeMap<&str, f64> = last_times
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once('\t')?;
            let wall = rest.split('\t').next()?;
            Some((name, wall.trim().parse().ok()?))
        })
        .collect();
    let hint = |job: &Job| -> f64 {
        if let Some(t) = times.get(job.name.as_str()) {
            return *t;
        }
        let short = job.name.rsplit('/').next().unwrap_or("");
        SLOW_FIRST
            .iter()
            .position(|s| *s == short)
            .map_or(0.0, |i| 1000.0 - i as f64)
    };
    queue.sort_by(|a, b| hint(b).total_cmp(&hint(a)));
}

fn run(job: &Job, logs: &Path, ticks: Option<f64>) -> Done {
    let log_path = logs.join(log_name(&job.name));
    let log = fs::File::create(&log_path).expect("creating a test log");
    let hold = tempfile::tempdir().expect("a host-hold directory");
    let mut cmd = Command::new(&job.command[0]);
    cmd.args(&job.command[1..])
        .current_dir(&job.dir)
        .env("VESTA_HOLD_DIR", hold.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("the log"))
        .stderr(log);
    if !job.package.is_empty() {
        cmd.env("CARGO_MANIFEST_DIR", &job.dir)
            .env("CARGO_PKG_NAME", &job.package);
    }
    let started = Instant::now();
    let (status, cpu) = match cmd.spawn() {
        Ok(mut child) => {
            let cpu = cpu_at_exit(&child, ticks);
            (child.wait(), cpu)
        }
        Err(e) => (Err(e), None),
    };
    let took = started.elapsed();
    let text = fs::read_to_string(&log_path).unwrap_or_default();
    let summary = text
        .lines()
        .filter(|l| l.starts_with("test result:"))
        .map(|l| l.trim_start_matches("test result: "))
        .collect::<Vec<_>>()
        .join("; ");
    Done {
        name: job.name.clone(),
        ok: matches!(status, Ok(s) if s.success()),
        took,
        cpu,
        summary,
    }
}

/// Waits for `child` to exit, leaving it unreaped, and returns its CPU seconds: user + system
/// time of its own and of the descendants it waited for (`/proc/PID/stat` fields 14 to 17,
/// still there while it is a zombie). Each job's own, where the `RUSAGE_CHILDREN` of this
/// process would mix the jobs running beside it.
fn cpu_at_exit(child: &std::process::Child, ticks: Option<f64>) -> Option<f64> {
    use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};
    let pid = Pid::from_child(child);
    loop {
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return None,
            Ok(_) => break,
        }
    }
    let stat = fs::read_to_string(format!("/proc/{}/stat", child.id())).ok()?;
    // After the command's name, in parentheses (which may hold spaces): field 3 on.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let sum: u64 = fields
        .get(11..15)?
        .iter()
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Some(sum as f64 / ticks?)
}

/// The unit of `/proc`'s times (`getconf CLK_TCK`).
fn clock_ticks_per_second() -> Option<f64> {
    let out = Command::new("getconf").arg("CLK_TCK").output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn cpu(secs: Option<f64>) -> String {
    secs.map_or_else(|| "?".to_owned(), |s| format!("{s:.1}"))
}

fn report(done: &Done, logs: &Path) {
    if done.ok {
        println!(
            "ok     {:>6.1} s {:>6} s CPU  {}: {}",
            done.took.as_secs_f64(),
            cpu(done.cpu),
            done.name,
            done.summary
        );
    } else {
        let text = fs::read_to_string(logs.join(log_name(&done.name))).unwrap_or_default();
        println!(
            "FAILED {:>6.1} s {:>6} s CPU  {}\n{text}\n---- end of {} ----",
            done.took.as_secs_f64(),
            cpu(done.cpu),
            done.name,
            done.name
        );
    }
}

fn log_name(name: &str) -> String {
    format!("{}.log", name.replace('/', "__"))
}
