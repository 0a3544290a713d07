//! The state file for a static machine ID: at start the file's mark becomes the generator's
//! floor (and the start guard waits the clock past it); while running, a small thread rewrites
//! the mark every `zookeeper.report_interval_ms`, and at shutdown writes a clean one.
//!
//! As with a lease, each mark is a promise: the generator may issue only until a deadline three
//! intervals after the last successful write, and the mark covers that deadline. So a crash
//! (kill -9, power cut) can never have issued past the mark on file, and the next start begins
//! after it. If the file cannot be written for that long, issuing pauses with a clear reason.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vesta_core::{Clock, Epoch, Layout};

use crate::error::{ShutdownError, StartError};
use crate::issuer::Shared;
use crate::lease::{Guard, floor_for_mark, promise_mark_ms, start_guard};
use crate::state_file::{self, StateRecord};
use crate::status::LeaseState;

/// How many write intervals the promise reaches ahead.
const INTERVALS_AHEAD: u32 = 3;

/// What the state file says about a static machine ID at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Inherited {
    /// The generator floor: nothing at or below this time is issued.
    pub floor: u64,
    /// The first instant the start guard lets issuing begin (0: at once).
    pub target_ms: u64,
}

/// Reads the file's mark for `machine` (a record of another machine ID is ignored).
pub(crate) fn inherited(
    path: &std::path::Path,
    machine: u64,
    layout: &Layout,
    epoch: Epoch,
) -> Result<Option<Inherited>, StartError> {
    Ok(state_file::read(path)?
        .filter(|r| r.machine == machine)
        .map(|r| {
            let floor = floor_for_mark(layout, epoch, r.mark_ms);
            Inherited {
                floor,
                target_ms: epoch.unix_ms_of(layout, floor + 1),
            }
        }))
}

/// Waits (bounded) for the clock to pass `target_ms`, or refuses with both times.
pub(crate) fn pass_guard<C: Clock>(
    clock: &C,
    machine: u64,
    target_ms: u64,
    max_wait: Duration,
) -> Result<(), StartError> {
    for _ in 0..4 {
        match start_guard(clock.now_ms(), target_ms, max_wait) {
            Guard::Ready => return Ok(()),
            Guard::Wait(_) => clock.wait_until_ms(target_ms),
            Guard::Refuse(_) => break,
        }
    }
    Err(StartError::ClockBehindMark {
        machine,
        now: Epoch::rfc3339(clock.now_ms()),
        mark: Epoch::rfc3339(target_ms),
    })
}

/// The thread keeping the state file of a static machine ID.
pub(crate) struct StateKeeper {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl std::fmt::Debug for StateKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateKeeper")
            .field("running", &self.thread.is_some())
            .finish()
    }
}

struct Writer<C: Clock + 'static> {
    shared: Arc<Shared<C>>,
    path: PathBuf,
    machine: u64,
    interval: Duration,
    window: Duration,
    mark_ms: u64,
    /// Monotonic end of the last promise; `None` once fenced for it.
    watchdog: Option<Instant>,
}

impl StateKeeper {
    /// Writes the first promise (before any ID is issued) and starts the writer thread.
    pub(crate) fn start<C: Clock + 'static>(
        shared: Arc<Shared<C>>,
        path: PathBuf,
        interval: Duration,
    ) -> Result<Self, StartError> {
        let machine = shared.generator.machine();
        let mut writer = Writer {
            shared,
            path,
            machine,
            interval,
            window: interval * INTERVALS_AHEAD,
            mark_ms: 0,
            watchdog: None,
        };
        writer.renew()?;
        let (stop_tx, stop_rx) = channel();
        let thread = std::thread::Builder::new()
            .name("vesta-state-file".into())
            .spawn(move || writer.run(stop_rx))
            .map_err(|e| StartError::Lease(format!("cannot start the state-file thread: {e}")))?;
        Ok(StateKeeper {
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Stops issuing, writes the clean mark, joins the thread. Idempotent.
    pub(crate) fn stop(&mut self) -> Result<(), ShutdownError> {
        drop(self.stop.take());
        match self.thread.take() {
            Some(t) => match t.join() {
                Ok(r) => r.map_err(ShutdownError),
                Err(_) => Err(ShutdownError("the state-file thread panicked".into())),
            },
            None => Ok(()),
        }
    }
}

impl<C: Clock + 'static> Writer<C> {
    fn layout_epoch(&self) -> (&'static Layout, Epoch) {
        let c = self.shared.generator.config();
        (c.id_type.layout(), c.epoch)
    }

    fn record(&self, mark_ms: u64, clean: bool, now: u64) -> StateRecord {
        StateRecord {
            machine: self.machine,
            source: "static".into(),
            mark_ms,
            last_time: self.shared.generator.last_issued_time(),
            clean,
            written_ms: now,
        }
    }

    /// Writes a promise reaching one window ahead, then lets the generator issue until then.
    fn renew(&mut self) -> Result<(), StartError> {
        let (layout, epoch) = self.layout_epoch();
        let sent = Instant::now();
        let now = self.shared.generator.clock().now_ms();
        let deadline = now.saturating_add(self.window.as_millis() as u64);
        let last = self.shared.generator.last_issued_time();
        let mark_ms = promise_mark_ms(layout, epoch, last, deadline).max(self.mark_ms);
        state_file::write(&self.path, &self.record(mark_ms, false, now))?;
        self.mark_ms = mark_ms;
        self.watchdog = Some(sent + self.window);
        self.shared.resume(LeaseState::Static, deadline);
        Ok(())
    }

    fn run(mut self, stop: Receiver<()>) -> Result<(), String> {
        // A message or the sender's drop (the issuer stopping) ends the loop.
        while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(self.interval) {
            if let Err(e) = self.renew() {
                tracing::warn!(error = %e, "writing the state file failed");
                if self.watchdog.is_some_and(|w| Instant::now() >= w) {
                    self.watchdog = None;
                    self.shared.fence(
                        LeaseState::Fenced,
                        format!("the state file cannot be written ({e}); not issuing until it can"),
                    );
                }
            }
        }
        self.shared
            .fence(LeaseState::Released, "the issuer was shut down");
        let (layout, epoch) = self.layout_epoch();
        let now = self.shared.generator.clock().now_ms();
        let last = self.shared.generator.last_issued_time();
        // The unit of `now` too: a call racing the fence may still land an ID in it.
        let mark_ms = promise_mark_ms(layout, epoch, last, now.saturating_add(1));
        state_file::write(&self.path, &self.record(mark_ms, true, now)).map_err(|e| e.to_string())
    }
}
