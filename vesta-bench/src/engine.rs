//! The run both engines share: connect every connection first, then start the clock and run one
//! thread per connection until the duration ends, report progress from the calling thread, and
//! merge what the connections measured. A connection that fails stops the others early.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use vesta_core::Layout;

use crate::config::{BenchError, Load};
use crate::report::{Protocol, Report, Target};
use crate::schedule::{Schedule, sleep_until};
use crate::tally::Tally;

/// How long answers still in flight are waited for after the duration ends.
pub(crate) const DRAIN: Duration = Duration::from_secs(3);

/// Progress so far, as read while the run goes on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Time since the start.
    pub elapsed: Duration,
    /// Answers received (IDs or errors).
    pub requests: u64,
    /// IDs received.
    pub ids: u64,
    /// Error answers received.
    pub errors: u64,
}

/// Counters every connection adds to, read for progress and for the totals.
#[derive(Debug, Default)]
pub(crate) struct Live {
    requests: AtomicU64,
    ids: AtomicU64,
    errors: AtomicU64,
    stop: AtomicBool,
}

impl Live {
    /// Adds what a connection just received.
    pub(crate) fn add(&self, requests: u64, ids: u64, errors: u64) {
        self.requests.fetch_add(requests, Ordering::Relaxed);
        self.ids.fetch_add(ids, Ordering::Relaxed);
        self.errors.fetch_add(errors, Ordering::Relaxed);
    }

    /// True once a connection failed: the others stop sending.
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn progress(&self, elapsed: Duration) -> Progress {
        Progress {
            elapsed,
            requests: self.requests.load(Ordering::Relaxed),
            ids: self.ids.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// What a connection's thread is given.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    /// When the run started (after every connection was made).
    pub start: Instant,
    /// When sending stops.
    pub deadline: Instant,
    /// Open loop: this connection's due times.
    pub schedule: Option<Schedule>,
    /// The shared counters.
    pub live: &'a Live,
}

impl Ctx<'_> {
    /// When the next request of a connection with one request in flight is intended: on
    /// `schedule` (sleeping until it is due) or now; `None` once the run is over or stopped.
    pub(crate) fn next_send(&self, schedule: &mut Option<Schedule>) -> Option<Instant> {
        if self.live.stopped() {
            return None;
        }
        match schedule {
            Some(s) => {
                let due = s.due();
                if due >= self.deadline {
                    return None;
                }
                sleep_until(due);
                s.advance();
                Some(due)
            }
            None => Some(Instant::now()).filter(|now| *now < self.deadline),
        }
    }
}

/// One connected connection, ready to run.
pub(crate) trait Worker: Send {
    /// Sends until the deadline, waits for the answers in flight, returns what it measured.
    fn run(self, ctx: &Ctx<'_>) -> Result<Tally, String>;
}

/// Everything the connections measured together.
#[derive(Debug)]
pub(crate) struct Outcome {
    tally: Tally,
    totals: Progress,
}

impl Outcome {
    /// The report of a run of `load` against `targets`.
    pub(crate) fn into_report(
        self,
        protocol: Protocol,
        load: Load,
        targets: Vec<Target>,
    ) -> Report {
        Report {
            protocol,
            load,
            targets,
            requests: self.totals.requests,
            ids: self.totals.ids,
            errors: self.totals.errors,
            errors_by_kind: self.tally.errors,
            first_error: self.tally.first_error,
            elapsed: self.totals.elapsed,
            latency: self.tally.latency,
            service: self.tally.service,
            per_unit: self.tally.per_unit,
            segment: None,
            request: None,
            seq_keys: None,
            seq_shape: crate::seq::KeyShape::Dense,
            moves: self.tally.moves,
            moving: self.tally.moving,
            served: self.tally.served,
        }
    }
}

/// Asks every server of `load` what it is with `describe`; the first that cannot say fails
/// the run, named.
pub(crate) fn describe_targets(
    load: &Load,
    describe: impl Fn(&str) -> Result<Target, String>,
) -> Result<Vec<Target>, BenchError> {
    load.targets
        .iter()
        .map(|address| {
            describe(address).map_err(|message| BenchError::Target {
                target: address.clone(),
                message,
            })
        })
        .collect()
}

/// The layout the server at `address` gave, if any.
pub(crate) fn layout_of(targets: &[Target], address: &str) -> Option<Layout> {
    targets
        .iter()
        .find(|t| t.address == address)
        .and_then(|t| t.layout.clone())
}

/// Connects `load.connections` workers with `connect(conn, target)`, runs them and merges their
/// tallies; `progress` is called about every `tick`.
pub(crate) fn drive<W: Worker>(
    load: &Load,
    tick: Duration,
    mut progress: impl FnMut(Progress),
    connect: impl Fn(usize, &str) -> Result<W, String>,
) -> Result<Outcome, BenchError> {
    let mut workers = Vec::with_capacity(load.connections);
    for conn in 0..load.connections {
        let target = load.target_of(conn);
        let w = connect(conn, target).map_err(|message| BenchError::Connection {
            conn,
            target: target.to_owned(),
            message,
        })?;
        workers.push(w);
    }
    let live = Live::default();
    let start = Instant::now();
    let deadline = start + load.duration;
    let results = thread::scope(|scope| {
        let mut handles = Vec::with_capacity(workers.len());
        for (conn, worker) in workers.into_iter().enumerate() {
            let ctx = Ctx {
                start,
                deadline,
                schedule: load
                    .rate
                    .map(|rate| Schedule::new(start, rate, load.connections, conn)),
                live: &live,
            };
            let h = thread::Builder::new()
                .name(format!("bench-{conn}"))
                .spawn_scoped(scope, move || {
                    let r = worker.run(&ctx);
                    if r.is_err() {
                        ctx.live.stop.store(true, Ordering::Relaxed);
                    }
                    r
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    live.stop.store(true, Ordering::Relaxed);
                    return vec![Err(BenchError::Tool(format!(
                        "cannot start a load thread: {e}"
                    )))];
                }
            }
        }
        let mut last_tick = start;
        while handles.iter().any(|h| !h.is_finished()) {
            thread::sleep(Duration::from_millis(20));
            if last_tick.elapsed() >= tick {
                last_tick = Instant::now();
                progress(live.progress(start.elapsed()));
            }
        }
        handles
            .into_iter()
            .enumerate()
            .map(|(conn, h)| match h.join() {
                Ok(Ok(t)) => Ok(t),
                Ok(Err(message)) => Err(BenchError::Connection {
                    conn,
                    target: load.target_of(conn).to_owned(),
                    message,
                }),
                Err(_) => Err(BenchError::Tool("a load thread panicked".into())),
            })
            .collect::<Vec<_>>()
    });
    let mut tally = Tally::new(load.rate.is_some());
    for r in results {
        tally.merge(r?);
    }
    let tally = tally.finish();
    let elapsed = tally
        .last_answer
        .map_or(Duration::ZERO, |t| t.saturating_duration_since(start));
    Ok(Outcome {
        tally,
        totals: live.progress(elapsed),
    })
}
