//! The ZooKeeper source of the lease: claims a machine ID (EPHEMERAL node), passes the start
//! guard against the mark earlier holders left, confirms the lease by writing the mark every
//! beat, re-leases after a lost session or claim, and on stop writes the final mark and deletes
//! the claim. With `start_without_zookeeper` it may start from the state file, unregistered,
//! and registers once ZooKeeper answers.
//!
//! The timing (term, watchdog, beats) is the lease thread's ([`super::worker`]); this module
//! only says how a promise is written and what a ZooKeeper answer means.

use std::time::{Duration, Instant};

use vesta_core::{Clock, Epoch, Remedy};
use zookeeper_client::SessionState;

use super::ZkSettings;
use super::counted_in::CountedIn;
use super::hold::{self, StateLock};
use super::rules::{Floor, Promise, beat_interval, fence_window};
use super::state_file::{self, StateRecord};
use super::worker::{Lease, LeaseSource};
use super::zk::{self, LeaseError, ZkLease};
use super::znode::{Claim, Mark};
use crate::error::StartError;
use crate::status::LeaseState;

/// How old a state file may be for `start_without_zookeeper` to issue from it.
pub(crate) const STATE_FILE_MAX_AGE_MS: u64 = 10 * 60 * 1000;

/// The shortest pause between retries (re-leasing, failed writes).
const MIN_RETRY: Duration = Duration::from_millis(100);

/// The longest a shutdown waits for ZooKeeper per call.
const SHUTDOWN_CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// The window and beat before ZooKeeper granted a session timeout.
pub(crate) fn initial_timing(settings: &ZkSettings) -> (Duration, Duration) {
    let window = fence_window(settings.session_timeout);
    (window, beat_interval(settings.report_interval, window))
}

/// What a caller is told once a term runs out without a confirmed mark (docs/zookeeper.md).
fn unconfirmed_reason(machine: u64, confirmed_ms: Option<u64>, window: Duration) -> String {
    format!(
        "the lease of machine {machine} is not confirmed by ZooKeeper (last confirmed at {}, \
         allowed {} ms); not issuing until it is",
        confirmed_ms.map_or_else(|| "never".into(), Epoch::rfc3339),
        window.as_millis()
    )
}

/// A lease held in the current session.
struct Held {
    zk: ZkLease,
    machine: u64,
    claim_version: i32,
    mark_version: i32,
    watcher: zookeeper_client::StateWatcher,
}

/// The machine ID leased from ZooKeeper.
pub(crate) struct ZkSource {
    settings: ZkSettings,
    /// Who we are, as the claim node says (`claimed_ms` is set at each claim).
    claim: Claim,
    /// The state file's record from before this process, used once at the first claim.
    inherited: Option<StateRecord>,
    held: Option<Held>,
    /// The machine ID in use (kept across a lost session, to prefer it when re-leasing).
    machine: Option<u64>,
    /// The last mark this process wrote to ZooKeeper, to recognise its own mark.
    last_written: Option<(u64, Mark)>,
    /// Issuing from the state file, not registered in ZooKeeper (`start_without_zookeeper`).
    unregistered: bool,
    /// What this issuer's marks are counted in.
    counted_in: CountedIn,
    /// The state file's lock, held for the life of the source.
    /// `#slot` for each machine ID of an issuer of several, else empty: ends the holder name.
    tag: String,
    _lock: Option<StateLock>,
}

impl ZkSource {
    /// The source for `settings`; locks the state file (if any) and reads it for the ID to
    /// prefer, refusing a record counted in another layout or epoch.
    /// The source for `settings`, its marks counted in `counted_in`, its marks' holder name
    /// ending in `tag` (the machine ID's slot in an issuer of several, so a mark one member
    /// wrote is never taken for another's own).
    pub(crate) fn new(
        settings: ZkSettings,
        now_ms: u64,
        counted_in: CountedIn,
        tag: &str,
    ) -> Result<Self, StartError> {
        let (lock, inherited) = match &settings.state_file {
            Some(path) => {
                let lock = hold::lock_state_file(path, settings.hold_wait)?;
                let record = state_file::read(path)?;
                if let Some(r) = &record {
                    counted_in.check(
                        r.counted_in().as_ref(),
                        r.machine,
                        &format!("the state file {}", path.display()),
                        Remedy::RetireStateFile { path: path.clone() },
                    )?;
                }
                (Some(lock), record)
            }
            None => (None, None),
        };
        let claim = Claim {
            host: super::host_name(),
            pid: std::process::id(),
            instance: settings.instance.clone(),
            started_ms: now_ms,
            claimed_ms: now_ms,
        };
        Ok(ZkSource {
            settings,
            claim,
            inherited,
            held: None,
            machine: None,
            last_written: None,
            unregistered: false,
            counted_in,
            tag: tag.to_owned(),
            _lock: lock,
        })
    }

    fn holder(&self) -> String {
        format!("{}:{}{}", self.claim.host, self.claim.pid, self.tag)
    }

    fn mark(&self, promise: &Promise) -> Mark {
        Mark::of(promise, self.holder(), &self.counted_in)
    }

    /// Connects, claims an ID (preferring the one in use, else the state file's), passes the
    /// start guard and confirms the lease with its first mark; then issuing resumes.
    async fn acquire<C: Clock>(
        &mut self,
        lease: &mut Lease<C>,
        initial: bool,
    ) -> Result<(), StartError> {
        let zk = zk::connect(&self.settings, self.settings.connect_timeout).await?;
        let window = fence_window(zk.session_timeout());
        lease.term.set_window(window);
        lease.beat = beat_interval(self.settings.report_interval, window);
        let preferred = self.machine.or_else(|| {
            self.inherited
                .as_ref()
                .filter(|r| r.source == self.settings.root)
                .map(|r| r.machine)
        });
        let mut claim = self.claim.clone();
        claim.claimed_ms = lease.now_ms();
        let (machine, claim_version) = zk.claim_any(&self.settings, preferred, &claim).await?;
        match self
            .take_over(lease, zk.clone(), machine, claim_version)
            .await
        {
            Ok(()) => {
                if !initial {
                    lease.leased.with_info(|info| info.reconnects += 1);
                }
                Ok(())
            }
            Err(e) => {
                let _ = zk.release(machine, claim_version).await;
                Err(e)
            }
        }
    }

    /// With the claim on `machine` made: read its mark, wait out the start guard, move the
    /// generator to it and write the first mark (before any ID is issued).
    async fn take_over<C: Clock>(
        &mut self,
        lease: &mut Lease<C>,
        zk: ZkLease,
        machine: u64,
        claim_version: i32,
    ) -> Result<(), StartError> {
        let zk_mark = zk.read_mark(machine).await?;
        // Our own last mark needs no waiting: the generator's state already covers our IDs.
        let theirs = match (&zk_mark, &self.last_written) {
            (Some((m, _)), Some((lm, lw))) if *lm == machine && m == lw => 0,
            (Some((m, _)), _) => {
                self.counted_in.check(
                    m.counted_in().as_ref(),
                    machine,
                    &format!("ZooKeeper {}", self.settings.mark_path(machine)),
                    Remedy::RetireMark {
                        machine,
                        store: self.settings.store(),
                    },
                )?;
                m.mark_ms
            }
            (None, _) => 0,
        };
        let inherited = self
            .inherited
            .take()
            .filter(|r| r.source == self.settings.root && r.machine == machine)
            .map_or(0, |r| r.mark_ms);
        let floor = lease
            .guarded_floor(
                machine,
                theirs.max(inherited),
                self.settings.start_guard_max_wait,
            )
            .await?;
        lease.take_machine(machine, &floor, self.machine)?;
        self.machine = Some(machine);
        let held = Held {
            watcher: zk.client.state_watcher(),
            zk,
            machine,
            claim_version,
            mark_version: -1,
        };
        let mark_version = zk_mark.map(|(_, v)| v);
        let promise = lease.renewal();
        let mark = self.mark(&promise);
        let version = held
            .zk
            .write_mark(machine, claim_version, mark_version, &mark)
            .await?;
        self.held = Some(Held {
            mark_version: version,
            ..held
        });
        self.unregistered = false;
        lease
            .leased
            .with_info(|info| info.held_since_ms = Some(promise.sent_ms));
        self.confirmed(lease, &promise, mark);
        Ok(())
    }

    /// A mark was written: issuing may go on until the promise's deadline (wall) and `window`
    /// after it was sent (monotonic), whichever comes first.
    fn confirmed<C: Clock>(&mut self, lease: &mut Lease<C>, promise: &Promise, mark: Mark) {
        let machine = self.machine.unwrap_or_default();
        self.save_state(machine, promise);
        self.last_written = Some((machine, mark));
        let on_expiry = unconfirmed_reason(machine, Some(promise.sent_ms), lease.term.window());
        lease.confirmed(promise, on_expiry);
    }

    /// One heartbeat: write the mark, which confirms the lease.
    async fn beat_held<C: Clock>(&mut self, lease: &mut Lease<C>) {
        let promise = lease.renewal();
        let mark = self.mark(&promise);
        let Some(h) = &self.held else { return };
        let (zk, machine, claim_version, mark_version) =
            (h.zk.clone(), h.machine, h.claim_version, h.mark_version);
        let limit = lease.write_limit(&promise, zk.session_timeout(), MIN_RETRY);
        let write = zk.write_mark(machine, claim_version, Some(mark_version), &mark);
        let Ok(result) = tokio::time::timeout(limit, write).await else {
            lease.retry_soon(MIN_RETRY);
            return;
        };
        match result {
            Ok(version) => {
                if let Some(h) = &mut self.held {
                    h.mark_version = version;
                }
                self.confirmed(lease, &promise, mark);
            }
            Err(e) if e.session_lost() => self.lease_lost(
                lease,
                format!("the lease of machine {machine} was lost ({e}); re-leasing"),
            ),
            Err(e) if e.lease_taken() => self.recheck_claim(lease, zk, machine, e).await,
            Err(e) => {
                tracing::warn!(error = %e, "writing the mark failed; retrying");
                lease.retry_soon(MIN_RETRY);
            }
        }
    }

    /// A version conflict: the claim is still ours if our session owns it (a write whose
    /// answer was lost went through); then pick up the mark's version. Else the ID is gone.
    async fn recheck_claim<C: Clock>(
        &mut self,
        lease: &mut Lease<C>,
        zk: ZkLease,
        machine: u64,
        cause: LeaseError,
    ) {
        let session = zk.client.session_id().0;
        match zk.claim_owner(machine).await {
            Ok(Some(owner)) if owner == session => {
                if let Ok(Some((mark, version))) = zk.read_mark(machine).await {
                    // A mark by someone else (not our own write whose answer was lost): keep
                    // below the floor whatever it says was issued (our own is a promise ahead
                    // of the clock, which must not stall issuing).
                    if mark.holder != self.holder() {
                        let floor = Floor::after_mark(lease.layout(), mark.mark_ms);
                        let _ = lease.leased.generator.raise_floor(floor.time);
                    }
                    lease.term.adopt_mark(mark.mark_ms);
                    if let Some(h) = &mut self.held {
                        h.mark_version = version;
                    }
                }
                lease.retry_soon(MIN_RETRY);
            }
            Ok(_) => self.lease_lost(
                lease,
                format!("machine {machine} is no longer ours in ZooKeeper ({cause}); re-leasing"),
            ),
            Err(_) => lease.retry_soon(MIN_RETRY),
        }
    }

    /// The session or the claim is gone: stop issuing, drop the session, re-lease at once.
    fn lease_lost<C: Clock>(&mut self, lease: &mut Lease<C>, reason: String) {
        tracing::warn!(%reason, "lease lost");
        lease.fence(LeaseState::Fenced, reason);
        self.held = None;
        lease.next_beat = Instant::now();
    }

    async fn reacquire<C: Clock>(&mut self, lease: &mut Lease<C>) {
        match self.acquire(lease, false).await {
            Ok(()) => tracing::info!(machine = ?self.machine, "lease re-established"),
            Err(e) => {
                lease.fence(
                    LeaseState::Fenced,
                    format!("the machine-ID lease was lost and re-leasing failed: {e}; retrying"),
                );
                lease.next_beat = Instant::now() + lease.beat.max(MIN_RETRY);
            }
        }
    }

    /// `start_without_zookeeper`: issue with the state file's machine ID if its record is recent,
    /// from this root, and the clock is past its mark; keep trying to register.
    async fn start_unregistered<C: Clock>(
        &mut self,
        lease: &mut Lease<C>,
        cause: &LeaseError,
    ) -> Result<(), StartError> {
        let refuse = |why: String| {
            StartError::Lease(format!(
                "{cause}; start_without_zookeeper cannot start from the state file: {why}"
            ))
        };
        let Some(record) = self.inherited.take() else {
            return Err(refuse(match &self.settings.state_file {
                Some(p) => format!("{} holds no record yet", p.display()),
                None => "machine.state_file is not set".into(),
            }));
        };
        if record.source != self.settings.root {
            return Err(refuse(format!(
                "it records machine {} of `{}`, not of `{}`",
                record.machine, record.source, self.settings.root
            )));
        }
        let age = lease.now_ms().saturating_sub(record.written_ms);
        if age > STATE_FILE_MAX_AGE_MS {
            return Err(refuse(format!(
                "it was written {} s ago, more than the {} s allowed",
                age / 1000,
                STATE_FILE_MAX_AGE_MS / 1000
            )));
        }
        let floor = lease
            .guarded_floor(
                record.machine,
                record.mark_ms,
                self.settings.start_guard_max_wait,
            )
            .await?;
        lease
            .leased
            .generator
            .switch_machine(record.machine, floor.time)
            .map_err(|e| refuse(e.to_string()))?;
        self.machine = Some(record.machine);
        self.unregistered = true;
        let now = lease.now_ms();
        lease
            .leased
            .with_info(|info| info.held_since_ms = Some(now));
        if !self.renew_unregistered(lease) {
            return Err(refuse("the state file cannot be written".into()));
        }
        Ok(())
    }

    /// While unregistered, the state file carries the promise: write it, then extend issuing.
    /// False (and fenced) if it cannot be written.
    fn renew_unregistered<C: Clock>(&mut self, lease: &mut Lease<C>) -> bool {
        let promise = lease.renewal();
        let machine = self.machine.unwrap_or_default();
        let Some(path) = &self.settings.state_file else {
            return false;
        };
        if let Err(e) = state_file::write(path, &self.record(machine, &promise)) {
            lease.fence(
                LeaseState::Fenced,
                format!("not registered in ZooKeeper and the state file cannot be written: {e}"),
            );
            return false;
        }
        lease.leased.with_info(|info| {
            info.note = Some(format!(
                "issuing machine {machine} from the state file: ZooKeeper was unreachable at \
                 start (start_without_zookeeper); not registered yet"
            ));
        });
        let confirmed = lease.leased.with_info(|info| info.confirmed_ms);
        let on_expiry = unconfirmed_reason(machine, confirmed, lease.term.window());
        lease.renewed(&promise, LeaseState::Held, on_expiry);
        true
    }

    /// While unregistered: try to claim the same machine ID. Taken by another → stop issuing
    /// with it and lease another one (start guard included).
    async fn try_register<C: Clock>(&mut self, lease: &mut Lease<C>) {
        let limit = self.settings.connect_timeout.min(lease.beat);
        let Ok(zk) = zk::connect(&self.settings, limit).await else {
            return;
        };
        let machine = self.machine.unwrap_or_default();
        let mut claim = self.claim.clone();
        claim.claimed_ms = lease.now_ms();
        let claimed = match zk.ensure_dirs().await {
            Ok(()) => zk.try_claim(machine, &claim).await,
            Err(e) => Err(e),
        };
        match claimed {
            Ok(Some(version)) => {
                lease.fence(
                    LeaseState::Acquiring,
                    "registering the machine ID in ZooKeeper",
                );
                if let Err(e) = self.take_over(lease, zk.clone(), machine, version).await {
                    let _ = zk.release(machine, version).await;
                    self.unregistered = false;
                    lease.fence(
                        LeaseState::Fenced,
                        format!("registering machine {machine} in ZooKeeper failed: {e}"),
                    );
                    lease.next_beat = Instant::now() + lease.beat;
                } else {
                    tracing::info!(machine, "registered in ZooKeeper");
                }
            }
            Ok(None) => {
                self.unregistered = false;
                self.lease_lost(
                    lease,
                    format!(
                        "machine {machine} (from the state file) is held by another issuer in \
                         ZooKeeper; leasing another one"
                    ),
                );
            }
            Err(e) => tracing::warn!(error = %e, "registering in ZooKeeper failed; retrying"),
        }
    }

    fn record(&self, machine: u64, promise: &Promise) -> StateRecord {
        StateRecord::of(machine, &self.settings.root, promise, &self.counted_in)
    }

    fn save_state(&self, machine: u64, promise: &Promise) {
        if let Some(path) = &self.settings.state_file
            && let Err(e) = state_file::write(path, &self.record(machine, promise))
        {
            tracing::warn!(error = %e, "writing the state file failed");
        }
    }
}

impl<C: Clock + 'static> LeaseSource<C> for ZkSource {
    const THREAD: &'static str = "vesta-lease";

    async fn start(&mut self, lease: &mut Lease<C>) -> Result<(), StartError> {
        match self.acquire(lease, true).await {
            Err(StartError::ZooKeeper(e @ LeaseError::Unreachable { .. }))
                if self.settings.start_without_zookeeper =>
            {
                self.start_unregistered(lease, &e).await
            }
            other => other,
        }
    }

    async fn beat(&mut self, lease: &mut Lease<C>) {
        if self.held.is_some() {
            self.beat_held(lease).await;
        } else if self.unregistered {
            if !self.renew_unregistered(lease) {
                lease.next_beat = Instant::now() + lease.beat;
            }
            self.try_register(lease).await;
        } else {
            self.reacquire(lease).await;
        }
    }

    async fn lost(&mut self) -> String {
        let Some(h) = &mut self.held else {
            return std::future::pending().await;
        };
        loop {
            let state = h.watcher.changed().await;
            if matches!(
                state,
                SessionState::Expired | SessionState::Closed | SessionState::AuthFailed
            ) {
                return format!(
                    "the ZooKeeper session holding machine {} ended ({state}); re-leasing",
                    h.machine
                );
            }
        }
    }

    fn on_lost(&mut self, lease: &mut Lease<C>, reason: String) {
        self.lease_lost(lease, reason);
    }

    /// Clean shutdown (issuing has stopped): write the final (clean) mark, delete the claim.
    async fn finish(&mut self, lease: &mut Lease<C>, last: Promise) -> Result<(), String> {
        let mark = self.mark(&last);
        let mut problems = Vec::new();
        if let Some(h) = self.held.take() {
            if let Err(e) = write_final_mark(&h, &mark).await {
                problems.push(format!("final mark not written: {e}"));
            }
            let release = h.zk.release(h.machine, h.claim_version);
            match tokio::time::timeout(SHUTDOWN_CALL_TIMEOUT, release).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => problems.push(format!(
                    "claim not deleted ({e}); it expires with the session"
                )),
                Err(_) => problems.push(
                    "claim not deleted: ZooKeeper did not answer; it expires with the session"
                        .into(),
                ),
            }
            drop(h);
        }
        // Let the session tasks send their close requests before the runtime goes.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Some(machine) = self.machine {
            self.save_state(machine, &last);
        }
        lease.leased.with_info(|info| {
            info.held_since_ms = None;
            info.note = None;
        });
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// Writes the final mark over the last one. A version conflict while the claim is still
/// this session's means a beat whose answer was lost did go through (only the claim's
/// holder can write the mark): write over that one instead, as a beat would.
async fn write_final_mark(h: &Held, mark: &Mark) -> Result<(), String> {
    let call = |version| {
        tokio::time::timeout(
            SHUTDOWN_CALL_TIMEOUT,
            h.zk.write_mark(h.machine, h.claim_version, Some(version), mark),
        )
    };
    let unanswered = || "ZooKeeper did not answer".to_owned();
    match call(h.mark_version).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.lease_taken() => {
            let session = h.zk.client.session_id().0;
            let owner = tokio::time::timeout(SHUTDOWN_CALL_TIMEOUT, h.zk.claim_owner(h.machine));
            let Ok(Ok(Some(owner))) = owner.await else {
                return Err(e.to_string());
            };
            let read = tokio::time::timeout(SHUTDOWN_CALL_TIMEOUT, h.zk.read_mark(h.machine));
            match (owner == session, read.await) {
                (true, Ok(Ok(Some((_, version))))) => match call(version).await {
                    Ok(r) => r.map(drop).map_err(|e| e.to_string()),
                    Err(_) => Err(unanswered()),
                },
                _ => Err(e.to_string()),
            }
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(unanswered()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words docs/zookeeper.md documents for a lease whose confirmation lapsed.
    #[test]
    fn the_lapse_reason_is_the_documented_one() {
        let reason = unconfirmed_reason(7, Some(1_700_000_000_000), Duration::from_millis(6_666));
        assert_eq!(
            reason,
            "the lease of machine 7 is not confirmed by ZooKeeper (last confirmed at \
             2023-11-14T22:13:20.000Z, allowed 6666 ms); not issuing until it is"
        );
        let doc = include_str!("../../../docs/zookeeper.md");
        assert!(
            doc.contains(
                "the lease of machine N is not confirmed by ZooKeeper (last confirmed at …, \
                 allowed … ms); not issuing until it is"
            ),
            "docs/zookeeper.md documents another message"
        );
        assert!(!reason.contains("waiting"));
    }
}
