//! The static source of the lease: a machine ID from config, kept honest across restarts by its
//! state file. At start the file is locked and the machine ID held on the host (`hold`); the
//! file's mark becomes the generator's floor, never trusted backwards (after the start guard),
//! unless the file holds a clean stop the host hold vouches for, which is continued exactly;
//! while running, the file is rewritten every `machine.state_file_interval_ms` with a promise
//! three intervals ahead, and the generator issues only until that promise's deadline; at
//! shutdown a clean record with the exact position is written, then its token left in the host
//! hold.
//!
//! So a crash (kill -9, power cut) can never have issued past the mark on file, and the next
//! start begins after it; a clean stop lets the next start continue in the same unit at once.
//! If the file cannot be written for a whole term, issuing pauses with a clear reason.

use std::path::PathBuf;
use std::time::Duration;

use vesta_core::{Clock, Epoch, GenMethod, Layout};

use super::counted_in::{CountedIn, IdSpace};
use super::hold::{self, HostHold, Locked};
use super::rules::{self, Promise, STATE_FILE_INTERVALS_AHEAD};
use super::state_file::{self, StateRecord};
use super::worker::{Lease, LeaseSource};
use crate::error::StartError;
use crate::status::LeaseState;

/// The `source` recorded in a static machine ID's state file.
const SOURCE: &str = "static";

/// The state file of a static machine ID.
pub(crate) struct StaticSource {
    path: PathBuf,
    machine: u64,
    /// How long the start guard may wait for the clock to pass the file's mark.
    max_wait: Duration,
    counted_in: CountedIn,
    /// The record of this machine ID found at start (read under the lock).
    found: Option<StateRecord>,
    /// The state file's lock, held for the life of the source.
    _lock: Locked,
    /// The machine ID's hold on this host, held for the life of the source.
    hold: HostHold,
}

/// What a static source is started with.
pub(crate) struct StaticStart<'a> {
    /// The state file.
    pub path: PathBuf,
    /// The static machine ID.
    pub machine: u64,
    /// The layout with its epoch.
    pub layout: &'a Layout,
    /// The genMethod of the IDs (with the layout, the ID space the host hold is for).
    pub gen_method: GenMethod,
    /// The longest the start guard waits.
    pub max_wait: Duration,
    /// The longest the start waits for another process to let go of the file or the ID.
    pub hold_wait: Duration,
}

impl StaticSource {
    /// Locks the state file, holds the machine ID on this host, reads the file and checks that
    /// its mark was counted in this layout and epoch. Blocks at most `hold_wait` for another
    /// holder.
    pub(crate) fn new(start: StaticStart<'_>) -> Result<Self, StartError> {
        let StaticStart {
            path,
            machine,
            layout,
            gen_method,
            max_wait,
            hold_wait,
        } = start;
        let lock = hold::lock_state_file(&path, hold_wait)?;
        let counted_in = CountedIn::of(layout, gen_method);
        // A record of another machine ID is not about this one.
        let found = state_file::read(&path)?.filter(|r| r.machine == machine);
        if let Some(record) = &found {
            counted_in.check(
                record.counted_in().as_ref(),
                machine,
                &format!("the state file {}", path.display()),
                &format!("vesta machine retire --state-file {}", path.display()),
            )?;
        }
        // Then the host's hold: another user's state file of this machine ID, and its epoch.
        let space = IdSpace::of(layout, gen_method);
        let hold = HostHold::acquire(&space, machine, &counted_in, hold_wait)?;
        Ok(StaticSource {
            path,
            machine,
            max_wait,
            counted_in,
            found,
            _lock: lock,
            hold,
        })
    }

    /// The window one write lets issuing go on for, given the rewrite interval.
    pub(crate) fn window(interval: Duration) -> Duration {
        interval * STATE_FILE_INTERVALS_AHEAD
    }

    fn record(&self, promise: &Promise) -> StateRecord {
        StateRecord::of(self.machine, SOURCE, promise, &self.counted_in)
    }

    /// The exact position to continue from: the found record is a clean stop whose token the
    /// host hold still has (no one issued with the ID on this host since it was written).
    fn vouched_stop(&self) -> Option<vesta_core::Position> {
        let record = self.found.as_ref()?;
        // A position is in the writer's units: only this very layout and epoch may use it.
        if record.counted_in().as_ref() != Some(&self.counted_in) {
            return None;
        }
        let token = record.clean_stop.as_deref()?;
        (self.hold.last_clean_stop() == Some(token))
            .then(|| record.stopped_at())
            .flatten()
    }

    /// What a caller is told once a term runs out without a new write.
    fn on_expiry(&self, promise: &Promise, window: Duration) -> String {
        format!(
            "the state file {} was not rewritten in time (last written at {}, allowed {} ms); \
             not issuing until it is",
            self.path.display(),
            Epoch::rfc3339(promise.sent_ms),
            window.as_millis()
        )
    }

    /// Writes a promise reaching a window ahead, then lets the generator issue until then.
    fn renew<C: Clock + 'static>(&self, lease: &mut Lease<C>) -> Result<(), StartError> {
        let promise = lease.renewal();
        state_file::write(&self.path, &self.record(&promise))?;
        let on_expiry = self.on_expiry(&promise, lease.term.window());
        lease.renewed(&promise, LeaseState::Static, on_expiry);
        Ok(())
    }
}

impl<C: Clock + 'static> LeaseSource<C> for StaticSource {
    const THREAD: &'static str = "vesta-state-file";

    async fn start(&mut self, lease: &mut Lease<C>) -> Result<(), StartError> {
        let cannot = |e: vesta_core::FieldError| {
            StartError::Lease(format!("cannot use machine {}: {e}", self.machine))
        };
        if let Some(at) = self.vouched_stop() {
            lease
                .guard_continuation(self.machine, at, self.max_wait)
                .await?;
            // In place within the stopped unit; after it, only beyond what another host with a
            // copy of the file could have issued since the stop (the floor of a start without
            // a mark, now).
            let generator = &lease.leased.generator;
            let beyond = rules::Floor::unknown_past(
                generator.layout(),
                generator.clock().now_ms(),
                generator.config().rollback_tolerance_ms(),
            );
            generator.continue_after(at, beyond.time).map_err(cannot)?;
        } else {
            let mark_ms = self.found.as_ref().map_or(0, |r| r.mark_ms);
            let floor = lease
                .guarded_floor(self.machine, mark_ms, self.max_wait)
                .await?;
            lease
                .leased
                .generator
                .raise_floor(floor.time)
                .map_err(cannot)?;
        }
        self.renew(lease)
    }

    async fn beat(&mut self, lease: &mut Lease<C>) {
        match self.renew(lease) {
            Ok(()) => lease.leased.with_info(|info| info.note = None),
            Err(e) => {
                // The watchdog fences once the term runs out; until then one failure is fine.
                tracing::warn!(error = %e, "writing the state file failed");
                lease.next_beat = std::time::Instant::now() + lease.beat;
                lease.leased.with_info(|info| {
                    info.note = Some(format!("writing the state file failed: {e}; retrying"));
                });
            }
        }
    }

    async fn lost(&mut self) -> String {
        std::future::pending().await
    }

    fn on_lost(&mut self, _lease: &mut Lease<C>, _reason: String) {}

    /// The clean record with its exact position and a fresh token, then the token in the host
    /// hold: in this order, so a crash between the two leaves a record nothing vouches for.
    async fn finish(&mut self, _lease: &mut Lease<C>, last: Promise) -> Result<(), String> {
        let token = hold::clean_stop_token();
        let record = StateRecord {
            clean_stop: Some(token.clone()),
            ..self.record(&last)
        };
        state_file::write(&self.path, &record).map_err(|e| e.to_string())?;
        self.hold.record(Some(&token)).map_err(|e| e.to_string())
    }
}
