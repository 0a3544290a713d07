//! The lease keeper: a thread with its own single-threaded tokio runtime, owned by the issuer.
//! It claims a machine ID, passes the start guard, confirms the lease by writing the mark every
//! beat, fences the generator when confirmation lapses (a wall-clock deadline inside the
//! generator plus a monotonic watchdog here, since wall clocks jump), re-leases after a lost
//! session, and on stop writes the final mark and deletes the claim.
//!
//! The hot path never sees any of this: the generator checks one atomic deadline per call.

use std::fmt;
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use vesta_core::{Clock, Epoch, Layout};
use zookeeper_client::SessionState;

use super::zk::{self, LeaseError, ZkLease};
use super::znode::{Claim, Mark};
use super::{
    Guard, LeaseSettings, beat_interval, fence_window, floor_for_mark, host_name, promise_mark_ms,
    start_guard,
};
use crate::error::{ShutdownError, StartError};
use crate::issuer::Shared;
use crate::state_file::{self, StateRecord};
use crate::status::LeaseState;

/// How old a state file may be for `start_without_zookeeper` to issue from it.
pub const STATE_FILE_MAX_AGE_MS: u64 = 10 * 60 * 1000;

/// The shortest pause between retries (re-leasing, failed writes).
const MIN_RETRY: Duration = Duration::from_millis(100);

/// The longest a shutdown waits for ZooKeeper per call.
const SHUTDOWN_CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// The issuer's handle on its keeper thread.
pub(crate) struct KeeperHandle {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl fmt::Debug for KeeperHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeeperHandle")
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl KeeperHandle {
    /// Starts the keeper and waits until it holds a lease (and passed its start guard) or
    /// failed to; the generator in `shared` must be fenced.
    pub(crate) fn spawn<C: Clock + 'static>(
        shared: Arc<Shared<C>>,
        settings: LeaseSettings,
    ) -> Result<Self, StartError> {
        let inherited = match &settings.state_file {
            Some(path) => state_file::read(path)?,
            None => None,
        };
        let (started_tx, started_rx) = sync_channel(1);
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("vesta-lease".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = started_tx.send(Err(StartError::Lease(format!(
                            "cannot start the lease runtime: {e}"
                        ))));
                        return Ok(());
                    }
                };
                let keeper = Keeper::new(shared, settings, inherited);
                runtime.block_on(keeper.run(started_tx, stop_rx))
            })
            .map_err(|e| StartError::Lease(format!("cannot start the lease thread: {e}")))?;
        match started_rx.recv() {
            Ok(Ok(())) => Ok(KeeperHandle {
                stop: Some(stop_tx),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(StartError::Lease(
                    "the lease thread ended before a lease was held".into(),
                ))
            }
        }
    }

    /// Stops the keeper: final mark, claim deleted, thread joined. Idempotent.
    pub(crate) fn stop(&mut self) -> Result<(), ShutdownError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => match t.join() {
                Ok(result) => result.map_err(ShutdownError),
                Err(_) => Err(ShutdownError("the lease thread panicked".into())),
            },
            None => Ok(()),
        }
    }
}

/// A lease held in the current session.
struct Held {
    zk: ZkLease,
    machine: u64,
    claim_version: i32,
    mark_version: i32,
    watcher: zookeeper_client::StateWatcher,
}

/// What woke the keeper.
enum Event {
    Stop,
    SessionEnded(SessionState),
    Lapsed,
    Beat,
}

struct Keeper<C: Clock + 'static> {
    shared: Arc<Shared<C>>,
    s: LeaseSettings,
    layout: &'static Layout,
    epoch: Epoch,
    claim: Claim,
    /// The state file's record from before this process, used once at the first claim.
    inherited: Option<StateRecord>,
    held: Option<Held>,
    /// The machine ID in use (kept across a lost session, to prefer it when re-leasing).
    machine: Option<u64>,
    /// The last mark this process wrote to ZooKeeper, to recognise its own mark.
    last_written: Option<(u64, Mark)>,
    /// The highest mark this process promised for `machine`.
    mark_ms: u64,
    /// Issuing from the state file, not registered in ZooKeeper (`start_without_zookeeper`).
    unregistered: bool,
    /// Monotonic end of the current confirmation; `None` when fenced or not held.
    watchdog: Option<Instant>,
    next_beat: Instant,
    window: Duration,
    beat: Duration,
}

impl<C: Clock + 'static> Keeper<C> {
    fn new(shared: Arc<Shared<C>>, s: LeaseSettings, inherited: Option<StateRecord>) -> Self {
        let c = shared.generator.config();
        let (layout, epoch) = (c.id_type.layout(), c.epoch);
        let now = shared.generator.clock().now_ms();
        let claim = Claim {
            host: host_name(),
            pid: std::process::id(),
            instance: s.instance.clone(),
            started_ms: now,
            claimed_ms: now,
        };
        let window = fence_window(s.session_timeout);
        let beat = beat_interval(s.report_interval, window);
        Keeper {
            shared,
            layout,
            epoch,
            claim,
            inherited,
            held: None,
            machine: None,
            last_written: None,
            mark_ms: 0,
            unregistered: false,
            watchdog: None,
            next_beat: Instant::now(),
            window,
            beat,
            s,
        }
    }

    fn now_ms(&self) -> u64 {
        self.shared.generator.clock().now_ms()
    }

    async fn run(
        mut self,
        started: SyncSender<Result<(), StartError>>,
        mut stop: oneshot::Receiver<()>,
    ) -> Result<(), String> {
        self.shared.fence(
            LeaseState::Acquiring,
            "claiming a machine ID from ZooKeeper",
        );
        let first = match self.acquire(true).await {
            Err(StartError::ZooKeeper(e @ LeaseError::Unreachable { .. }))
                if self.s.start_without_zookeeper =>
            {
                self.start_unregistered(&e).await
            }
            other => other,
        };
        if let Err(e) = first {
            self.shared.fence(LeaseState::Released, e.to_string());
            let _ = started.send(Err(e));
            return Ok(());
        }
        let _ = started.send(Ok(()));
        drop(started);
        loop {
            let watchdog = self.watchdog;
            let next_beat = self.next_beat;
            let held = &mut self.held;
            let session_end = async {
                match held {
                    Some(h) => loop {
                        let st = h.watcher.changed().await;
                        if matches!(
                            st,
                            SessionState::Expired | SessionState::Closed | SessionState::AuthFailed
                        ) {
                            return st;
                        }
                    },
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                biased;
                _ = &mut stop => Event::Stop,
                st = session_end => Event::SessionEnded(st),
                _ = sleep_until_opt(watchdog) => Event::Lapsed,
                _ = tokio::time::sleep_until(next_beat) => Event::Beat,
            };
            match event {
                Event::Stop => break,
                Event::SessionEnded(st) => {
                    let machine = self.machine.unwrap_or_default();
                    self.lease_lost(format!(
                        "the ZooKeeper session holding machine {machine} ended ({st}); re-leasing"
                    ));
                }
                Event::Lapsed => self.lapse(),
                // A stop cancels a slow re-lease or write; the session then closes on drop,
                // which deletes any claim it made.
                Event::Beat => tokio::select! {
                    biased;
                    _ = &mut stop => break,
                    () = self.tick() => {}
                },
            }
        }
        self.shutdown().await
    }

    async fn tick(&mut self) {
        if self.held.is_some() {
            self.beat_once().await;
        } else if self.unregistered {
            self.renew_unregistered();
            self.try_register().await;
        } else {
            self.reacquire().await;
        }
    }

    /// Connects, claims an ID (preferring the one in use, else the state file's), passes the
    /// start guard and confirms the lease with its first mark; then issuing resumes.
    async fn acquire(&mut self, initial: bool) -> Result<(), StartError> {
        let zk = zk::connect(&self.s, self.s.connect_timeout).await?;
        self.window = fence_window(zk.session_timeout());
        self.beat = beat_interval(self.s.report_interval, self.window);
        let preferred = self.machine.or_else(|| {
            self.inherited
                .as_ref()
                .filter(|r| r.source == self.s.root)
                .map(|r| r.machine)
        });
        let mut claim = self.claim.clone();
        claim.claimed_ms = self.now_ms();
        let (machine, claim_version) = zk.claim_any(&self.s, preferred, &claim).await?;
        match self.take_over(zk.clone(), machine, claim_version).await {
            Ok(()) => {
                if !initial {
                    self.shared.lease().reconnects += 1;
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
    async fn take_over(
        &mut self,
        zk: ZkLease,
        machine: u64,
        claim_version: i32,
    ) -> Result<(), StartError> {
        let zk_mark = zk.read_mark(machine).await?;
        // Our own last mark needs no waiting: the generator's state already covers our IDs.
        let theirs = match (&zk_mark, &self.last_written) {
            (Some((m, _)), Some((lm, lw))) if *lm == machine && m == lw => 0,
            (Some((m, _)), _) => m.mark_ms,
            (None, _) => 0,
        };
        let inherited = self
            .inherited
            .take()
            .filter(|r| r.source == self.s.root && r.machine == machine)
            .map_or(0, |r| r.mark_ms);
        let mark_ms = theirs.max(inherited);
        let floor = floor_for_mark(self.layout, self.epoch, mark_ms);
        if mark_ms > 0 {
            let target = self.epoch.unix_ms_of(self.layout, floor + 1);
            self.pass_guard(machine, target).await?;
        }
        let g = &self.shared.generator;
        g.switch_machine(machine, floor)
            .map_err(|e| StartError::Lease(format!("cannot use machine {machine}: {e}")))?;
        if self.machine != Some(machine) {
            self.mark_ms = 0;
        }
        self.machine = Some(machine);
        let held = Held {
            watcher: zk.client.state_watcher(),
            zk,
            machine,
            claim_version,
            mark_version: -1,
        };
        let mark_version = zk_mark.map(|(_, v)| v);
        let (mark, send_wall, send_mono, deadline) = self.next_mark();
        let version = held
            .zk
            .write_mark(machine, claim_version, mark_version, &mark)
            .await?;
        self.held = Some(Held {
            mark_version: version,
            ..held
        });
        self.unregistered = false;
        self.shared.lease().held_since_ms = Some(send_wall);
        self.confirmed(mark, send_wall, send_mono, deadline);
        Ok(())
    }

    /// Waits until the clock reads `target` if that is within the allowed wait; else refuses.
    async fn pass_guard(&self, machine: u64, target: u64) -> Result<(), StartError> {
        for _ in 0..4 {
            let now = self.now_ms();
            match start_guard(now, target, self.s.start_guard_max_wait) {
                Guard::Ready => return Ok(()),
                Guard::Wait(ms) => {
                    tracing::info!(machine, wait_ms = ms, "start guard: waiting for the clock");
                    let shared = self.shared.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        shared.generator.clock().wait_until_ms(target)
                    })
                    .await;
                }
                Guard::Refuse(_) => break,
            }
        }
        Err(StartError::ClockBehindMark {
            machine,
            now: Epoch::rfc3339(self.now_ms()),
            mark: Epoch::rfc3339(target),
        })
    }

    /// The mark to write now, and the deadline it promises: the end of the later of the last
    /// issued unit and the unit holding the deadline's last ms, never below an earlier promise.
    fn next_mark(&self) -> (Mark, u64, Instant, u64) {
        let send_mono = Instant::now();
        let send_wall = self.now_ms();
        let deadline = send_wall.saturating_add(self.window.as_millis() as u64);
        let last = self.shared.generator.last_issued_time();
        let mark_ms = promise_mark_ms(self.layout, self.epoch, last, deadline).max(self.mark_ms);
        (
            self.mark(mark_ms, last, false, send_wall),
            send_wall,
            send_mono,
            deadline,
        )
    }

    fn mark(&self, mark_ms: u64, last_time: u64, clean: bool, written_ms: u64) -> Mark {
        Mark {
            mark_ms,
            last_time,
            clean,
            written_ms,
            holder: format!("{}:{}", self.claim.host, self.claim.pid),
        }
    }

    /// A mark was written: issuing may go on until `deadline` (wall) and `window` after
    /// `send_mono` (monotonic), whichever comes first.
    fn confirmed(&mut self, mark: Mark, send_wall: u64, send_mono: Instant, deadline: u64) {
        self.mark_ms = self.mark_ms.max(mark.mark_ms);
        let machine = self.machine.unwrap_or_default();
        self.save_state(machine, &mark);
        self.last_written = Some((machine, mark));
        self.watchdog = Some(send_mono + self.window);
        self.next_beat = send_mono + self.beat;
        {
            let mut lease = self.shared.lease();
            lease.confirmed_ms = Some(send_wall);
            lease.note = None;
        }
        self.shared.resume(LeaseState::Held, deadline);
    }

    /// One heartbeat: write the mark, which confirms the lease.
    async fn beat_once(&mut self) {
        let (mark, send_wall, send_mono, deadline) = self.next_mark();
        let Some(h) = &self.held else { return };
        let (zk, machine, claim_version, mark_version) =
            (h.zk.clone(), h.machine, h.claim_version, h.mark_version);
        // Never let a slow call hold the watchdog back.
        let limit = self
            .watchdog
            .map_or(zk.session_timeout(), |w| {
                w.saturating_duration_since(send_mono)
            })
            .max(MIN_RETRY);
        let write = zk.write_mark(machine, claim_version, Some(mark_version), &mark);
        let Ok(result) = tokio::time::timeout(limit, write).await else {
            self.retry_soon();
            return;
        };
        match result {
            Ok(version) => {
                if let Some(h) = &mut self.held {
                    h.mark_version = version;
                }
                self.confirmed(mark, send_wall, send_mono, deadline);
            }
            Err(e) if e.session_lost() => self.lease_lost(format!(
                "the lease of machine {machine} was lost ({e}); re-leasing"
            )),
            Err(e) if e.lease_taken() => self.recheck_claim(zk, machine, e).await,
            Err(e) => {
                tracing::warn!(error = %e, "writing the mark failed; retrying");
                self.retry_soon();
            }
        }
    }

    /// A version conflict: the claim is still ours if our session owns it (a write whose
    /// answer was lost went through); then pick up the mark's version. Else the ID is gone.
    async fn recheck_claim(&mut self, zk: ZkLease, machine: u64, cause: LeaseError) {
        let session = zk.client.session_id().0;
        match zk.claim_owner(machine).await {
            Ok(Some(owner)) if owner == session => {
                if let Ok(Some((mark, version))) = zk.read_mark(machine).await {
                    // A mark by someone else (not our own write whose answer was lost): keep
                    // below the floor whatever it says was issued (our own is a promise ahead
                    // of the clock, which must not stall issuing).
                    if mark.holder != self.mark(0, 0, false, 0).holder {
                        let floor = floor_for_mark(self.layout, self.epoch, mark.mark_ms);
                        let _ = self.shared.generator.raise_floor(floor);
                    }
                    self.mark_ms = self.mark_ms.max(mark.mark_ms);
                    if let Some(h) = &mut self.held {
                        h.mark_version = version;
                    }
                }
                self.retry_soon();
            }
            Ok(_) => self.lease_lost(format!(
                "machine {machine} is no longer ours in ZooKeeper ({cause}); re-leasing"
            )),
            Err(_) => self.retry_soon(),
        }
    }

    fn retry_soon(&mut self) {
        self.next_beat = Instant::now() + (self.beat / 4).max(MIN_RETRY);
    }

    /// The watchdog fired: no confirmation within the window. Stop issuing, keep trying.
    fn lapse(&mut self) {
        self.watchdog = None;
        let machine = self.machine.unwrap_or_default();
        let since = self
            .shared
            .lease()
            .confirmed_ms
            .map(Epoch::rfc3339)
            .unwrap_or_else(|| "never".into());
        self.shared.fence(
            LeaseState::Fenced,
            format!(
                "the lease of machine {machine} is not confirmed by ZooKeeper (last confirmed at \
                 {since}, allowed {} ms); not issuing until it is",
                self.window.as_millis()
            ),
        );
    }

    /// The session or the claim is gone: stop issuing, drop the session, re-lease at once.
    fn lease_lost(&mut self, reason: String) {
        tracing::warn!(%reason, "lease lost");
        self.shared.fence(LeaseState::Fenced, reason);
        self.held = None;
        self.watchdog = None;
        self.next_beat = Instant::now();
    }

    async fn reacquire(&mut self) {
        match self.acquire(false).await {
            Ok(()) => tracing::info!(machine = ?self.machine, "lease re-established"),
            Err(e) => {
                self.shared.fence(
                    LeaseState::Fenced,
                    format!("the machine-ID lease was lost and re-leasing failed: {e}; retrying"),
                );
                self.next_beat = Instant::now() + self.beat.max(MIN_RETRY);
            }
        }
    }

    /// `start_without_zookeeper`: issue with the state file's machine ID if its record is recent,
    /// from this root, and the clock is past its mark; keep trying to register.
    async fn start_unregistered(&mut self, cause: &LeaseError) -> Result<(), StartError> {
        let refuse = |why: String| {
            StartError::Lease(format!(
                "{cause}; start_without_zookeeper cannot start from the state file: {why}"
            ))
        };
        let Some(record) = self.inherited.take() else {
            return Err(refuse(match &self.s.state_file {
                Some(p) => format!("{} holds no record yet", p.display()),
                None => "machine.state_file is not set".into(),
            }));
        };
        if record.source != self.s.root {
            return Err(refuse(format!(
                "it records machine {} of `{}`, not of `{}`",
                record.machine, record.source, self.s.root
            )));
        }
        let age = self.now_ms().saturating_sub(record.written_ms);
        if age > STATE_FILE_MAX_AGE_MS {
            return Err(refuse(format!(
                "it was written {} s ago, more than the {} s allowed",
                age / 1000,
                STATE_FILE_MAX_AGE_MS / 1000
            )));
        }
        let floor = floor_for_mark(self.layout, self.epoch, record.mark_ms);
        let target = self.epoch.unix_ms_of(self.layout, floor + 1);
        self.pass_guard(record.machine, target).await?;
        self.shared
            .generator
            .switch_machine(record.machine, floor)
            .map_err(|e| refuse(e.to_string()))?;
        self.machine = Some(record.machine);
        self.unregistered = true;
        self.shared.lease().held_since_ms = Some(self.now_ms());
        self.renew_unregistered();
        if self.watchdog.is_none() {
            return Err(refuse("the state file cannot be written".into()));
        }
        Ok(())
    }

    /// While unregistered, the state file carries the promise: write it, then extend issuing.
    fn renew_unregistered(&mut self) {
        let (mark, send_wall, send_mono, deadline) = self.next_mark();
        let machine = self.machine.unwrap_or_default();
        let Some(path) = &self.s.state_file else {
            return;
        };
        let record = self.record(machine, &mark);
        if let Err(e) = state_file::write(path, &record) {
            self.shared.fence(
                LeaseState::Fenced,
                format!("not registered in ZooKeeper and the state file cannot be written: {e}"),
            );
            self.watchdog = None;
            return;
        }
        self.mark_ms = self.mark_ms.max(mark.mark_ms);
        self.watchdog = Some(send_mono + self.window);
        self.next_beat = send_mono + self.beat;
        self.shared.lease().note = Some(format!(
            "issuing machine {machine} from the state file: ZooKeeper was unreachable at start \
             (start_without_zookeeper); not registered yet"
        ));
        self.shared.resume(LeaseState::Held, deadline);
        let _ = send_wall;
    }

    /// While unregistered: try to claim the same machine ID. Taken by another → stop issuing
    /// with it and lease another one (start guard included).
    async fn try_register(&mut self) {
        let limit = self.s.connect_timeout.min(self.beat);
        let Ok(zk) = zk::connect(&self.s, limit).await else {
            return;
        };
        let machine = self.machine.unwrap_or_default();
        let mut claim = self.claim.clone();
        claim.claimed_ms = self.now_ms();
        let claimed = match zk.ensure_dirs().await {
            Ok(()) => zk.try_claim(machine, &claim).await,
            Err(e) => Err(e),
        };
        match claimed {
            Ok(Some(version)) => {
                self.shared.fence(
                    LeaseState::Acquiring,
                    "registering the machine ID in ZooKeeper",
                );
                if let Err(e) = self.take_over(zk.clone(), machine, version).await {
                    let _ = zk.release(machine, version).await;
                    self.unregistered = false;
                    self.shared.fence(
                        LeaseState::Fenced,
                        format!("registering machine {machine} in ZooKeeper failed: {e}"),
                    );
                    self.next_beat = Instant::now() + self.beat;
                } else {
                    tracing::info!(machine, "registered in ZooKeeper");
                }
            }
            Ok(None) => {
                self.unregistered = false;
                self.lease_lost(format!(
                    "machine {machine} (from the state file) is held by another issuer in \
                     ZooKeeper; leasing another one"
                ));
            }
            Err(e) => tracing::warn!(error = %e, "registering in ZooKeeper failed; retrying"),
        }
    }

    fn record(&self, machine: u64, mark: &Mark) -> StateRecord {
        StateRecord {
            machine,
            source: self.s.root.clone(),
            mark_ms: mark.mark_ms,
            last_time: mark.last_time,
            clean: mark.clean,
            written_ms: mark.written_ms,
        }
    }

    fn save_state(&self, machine: u64, mark: &Mark) {
        if let Some(path) = &self.s.state_file {
            if let Err(e) = state_file::write(path, &self.record(machine, mark)) {
                tracing::warn!(error = %e, "writing the state file failed");
            }
        }
    }

    /// Clean shutdown: stop issuing, write the final (clean) mark, delete the claim.
    async fn shutdown(&mut self) -> Result<(), String> {
        self.shared
            .fence(LeaseState::Released, "the issuer was shut down");
        self.watchdog = None;
        let now = self.now_ms();
        let last = self.shared.generator.last_issued_time();
        // The unit of `now` too: a call that passed the deadline check just before the fence
        // may still land an ID in it.
        let mark_ms = promise_mark_ms(self.layout, self.epoch, last, now.saturating_add(1));
        let mark = self.mark(mark_ms, last, true, now);
        let mut problems = Vec::new();
        if let Some(h) = self.held.take() {
            let write =
                h.zk.write_mark(h.machine, h.claim_version, Some(h.mark_version), &mark);
            match tokio::time::timeout(SHUTDOWN_CALL_TIMEOUT, write).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => problems.push(format!("final mark not written: {e}")),
                Err(_) => problems.push("final mark not written: ZooKeeper did not answer".into()),
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
            self.save_state(machine, &mark);
        }
        {
            let mut lease = self.shared.lease();
            lease.held_since_ms = None;
            lease.note = None;
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
