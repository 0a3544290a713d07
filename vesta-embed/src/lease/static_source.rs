//! The static source of the lease: a machine ID from config, kept honest across restarts by its
//! state file. At start the file's mark becomes the generator's floor (after the start guard);
//! while running, the file is rewritten every `machine.state_file_interval_ms` with a promise
//! three intervals ahead, and the generator issues only until that promise's deadline; at
//! shutdown a clean mark is written.
//!
//! So a crash (kill -9, power cut) can never have issued past the mark on file, and the next
//! start begins after it. If the file cannot be written for a whole term, issuing pauses with a
//! clear reason.

use std::path::PathBuf;
use std::time::Duration;

use vesta_core::{Clock, Epoch};

use super::rules::{Promise, STATE_FILE_INTERVALS_AHEAD};
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
}

impl StaticSource {
    /// The source for `machine`, its file at `path`.
    pub(crate) fn new(path: PathBuf, machine: u64, max_wait: Duration) -> Self {
        StaticSource {
            path,
            machine,
            max_wait,
        }
    }

    /// The window one write lets issuing go on for, given the rewrite interval.
    pub(crate) fn window(interval: Duration) -> Duration {
        interval * STATE_FILE_INTERVALS_AHEAD
    }

    fn record(&self, promise: &Promise) -> StateRecord {
        StateRecord {
            machine: self.machine,
            source: SOURCE.into(),
            mark_ms: promise.mark_ms,
            last_time: promise.last_time,
            clean: promise.clean,
            written_ms: promise.sent_ms,
        }
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
        // A record of another machine ID is not about this one.
        let mark_ms = state_file::read(&self.path)?
            .filter(|r| r.machine == self.machine)
            .map_or(0, |r| r.mark_ms);
        let floor = lease
            .guarded_floor(self.machine, mark_ms, self.max_wait)
            .await?;
        lease
            .leased
            .generator
            .raise_floor(floor.time)
            .map_err(|e| StartError::Lease(format!("cannot use machine {}: {e}", self.machine)))?;
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

    async fn finish(&mut self, _lease: &mut Lease<C>, last: Promise) -> Result<(), String> {
        state_file::write(&self.path, &self.record(&last)).map_err(|e| e.to_string())
    }
}
