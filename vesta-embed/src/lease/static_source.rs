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

use vesta_core::{Clock, Epoch, GenMethod, Layout, Position, Remedy};

use super::counted_in::CountedIn;
use super::hold::{self, HostHold, StateLock};
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
    /// The file as found (whatever machine ID it was of), put back if this run issues nothing.
    found_file: Option<StateRecord>,
    /// The file's identity, kept across rewrites (a copy carries it too).
    file_id: String,
    /// The state file's lock, held for the life of the source.
    _lock: StateLock,
    /// The machine ID's hold on this host, held for the life of the source.
    hold: HostHold,
    /// Where issuing began (the floor, or the stop continued): the same at the stop means
    /// this run issued nothing.
    began_at: Option<Position>,
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
        let mut lock = hold::lock_state_file(&path, hold_wait)?;
        let counted_in = CountedIn::of(layout, gen_method);
        let found_file = state_file::read(lock.real_path())?;
        // The file's identity: a copy of a file in use is refused.
        let file_id = found_file
            .as_ref()
            .and_then(|r| r.file_id.clone())
            .unwrap_or_else(hold::new_file_id);
        lock.claim_identity(&file_id, &path, hold_wait)?;
        // A record of another machine ID is not about this one.
        let found = found_file.clone().filter(|r| r.machine == machine);
        if let Some(record) = &found {
            counted_in.check(
                record.counted_in().as_ref(),
                machine,
                &format!("the state file {}", path.display()),
                Remedy::RetireStateFile { path: path.clone() },
            )?;
        }
        // Then the host's hold: another user's state file of this machine ID, and its epoch.
        let hold = HostHold::acquire(layout, gen_method, machine, hold_wait)?;
        Ok(StaticSource {
            path,
            machine,
            max_wait,
            counted_in,
            found,
            found_file,
            file_id,
            _lock: lock,
            hold,
            began_at: None,
        })
    }

    /// The window one write lets issuing go on for, given the rewrite interval.
    pub(crate) fn window(interval: Duration) -> Duration {
        interval * STATE_FILE_INTERVALS_AHEAD
    }

    fn record(&self, promise: &Promise) -> StateRecord {
        StateRecord {
            file_id: Some(self.file_id.clone()),
            ..StateRecord::of(self.machine, SOURCE, promise, &self.counted_in)
        }
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
        // Recorded on the host before anything is issued.
        self.began_at = Some(lease.leased.generator.position());
        self.hold.begin()?;
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
    /// hold: in this order, so a crash between the two leaves a record nothing vouches for. A
    /// run that issued nothing puts the file and the host's record back as it found them
    /// instead, so it leaves nothing to retire (a start whose layout was already full, say).
    async fn finish(&mut self, _lease: &mut Lease<C>, last: Promise) -> Result<(), String> {
        if last.stopped_at.is_some() && last.stopped_at == self.began_at {
            let restored = match &self.found_file {
                Some(record) => record.clone(),
                None => StateRecord::unused(self.machine, SOURCE, &self.file_id),
            };
            state_file::write(&self.path, &restored).map_err(|e| e.to_string())?;
            return self.hold.unused().map_err(|e| e.to_string());
        }
        let token = hold::clean_stop_token();
        let record = StateRecord {
            clean_stop: Some(token.clone()),
            ..self.record(&last)
        };
        state_file::write(&self.path, &record).map_err(|e| e.to_string())?;
        self.hold.stopped(&token).map_err(|e| e.to_string())
    }
}
