//! The lease thread, the same for every source: a thread with its own single-threaded tokio
//! runtime, owned by the issuer. It lets its [`LeaseSource`] take the machine ID (start guard,
//! floor, first promise), then renews at every beat, fences when the term lapses (the
//! generator's wall-clock deadline plus a monotonic watchdog here, since wall clocks jump), and
//! on stop writes the final, clean mark. [`LeaseThread`] is the issuer's one handle on it.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use vesta_core::{Clock, Layout};

use super::leased_generator::LeasedGenerator;
use super::rules::{self, Floor, Promise, Term};
use crate::error::{ShutdownError, StartError};
use crate::status::LeaseState;

/// Where a machine ID and its promises come from: a static ID's state file, ZooKeeper, an SQL
/// table or etcd. The lease thread calls these in order: `start` once, then `beat` at every beat (and
/// `on_lost` when `lost` resolves), then `finish` once.
pub(crate) trait LeaseSource<C: Clock + 'static>: Send + 'static {
    /// The thread's name.
    const THREAD: &'static str;

    /// Takes the machine ID: start guard, floor, and the first promise written before any ID
    /// is issued. The generator is fenced until this resumes it.
    async fn start(&mut self, lease: &mut Lease<C>) -> Result<(), StartError>;

    /// One beat: renew the promise (or re-lease, or retry).
    async fn beat(&mut self, lease: &mut Lease<C>);

    /// Resolves, with the reason, when the machine ID is lost outside a beat (a ZooKeeper
    /// session ending); never for a source that cannot lose it that way.
    async fn lost(&mut self) -> String;

    /// Acts on what `lost` reported.
    fn on_lost(&mut self, lease: &mut Lease<C>, reason: String);

    /// Writes `last`, the final clean mark (issuing has stopped), and gives the ID back.
    async fn finish(&mut self, lease: &mut Lease<C>, last: Promise) -> Result<(), String>;
}

/// What the lease thread and its source share: the generator with its lease state, the term,
/// and when the next beat is due.
pub(crate) struct Lease<C: Clock + 'static> {
    /// The generator and its lease state, shared with the issuer.
    pub leased: Arc<LeasedGenerator<C>>,
    /// The current term: what was promised, and the watchdog.
    pub term: Term,
    /// How often to renew.
    pub beat: Duration,
    /// When the next beat is due.
    pub next_beat: Instant,
}

impl<C: Clock + 'static> Lease<C> {
    /// A lease with nothing promised yet: renewals let issuing go on for `window`, one per
    /// `beat`.
    pub(crate) fn new(leased: Arc<LeasedGenerator<C>>, window: Duration, beat: Duration) -> Self {
        let term = Term::new(leased.generator.layout().clone(), window);
        Lease {
            leased,
            term,
            beat,
            next_beat: Instant::now(),
        }
    }

    /// The wall clock the generator reads.
    pub(crate) fn now_ms(&self) -> u64 {
        self.leased.generator.clock().now_ms()
    }

    /// The layout (with its epoch) of the issued IDs.
    pub(crate) fn layout(&self) -> &Layout {
        self.term.layout()
    }

    /// The promise to write now (monotonic clock, wall clock, then the last issued time).
    pub(crate) fn renewal(&self) -> Promise {
        let sent_at = Instant::now();
        let now_ms = self.now_ms();
        let last = self.leased.generator.last_issued_time();
        self.term.renewal(sent_at, now_ms, last)
    }

    /// `promise` was written: the term ends `window` after it was sent, the next beat is due a
    /// beat after it, and the generator may issue until its deadline. Once that passes,
    /// callers are told `on_expiry` (the same words the watchdog fences with).
    pub(crate) fn renewed(&mut self, promise: &Promise, state: LeaseState, on_expiry: String) {
        self.term.renewed(promise);
        let (latency, window) = (promise.sent_at.elapsed(), self.term.window());
        self.leased.with_info(|info| {
            info.renew_latency_ms = Some(latency.as_millis() as u64);
            info.fence_window_ms = Some(window.as_millis() as u64);
        });
        self.next_beat = promise.sent_at + self.beat;
        self.leased.resume(state, promise.deadline_ms, on_expiry);
    }

    /// The store confirmed `promise` (ZooKeeper, SQL, etcd): record when, clear any note, and
    /// renew as held.
    pub(crate) fn confirmed(&mut self, promise: &Promise, on_expiry: String) {
        self.leased.with_info(|info| {
            info.confirmed_ms = Some(promise.sent_ms);
            info.note = None;
        });
        self.renewed(promise, LeaseState::Held, on_expiry);
    }

    /// Stops issuing for `reason`; no watchdog until the next renewal.
    pub(crate) fn fence(&mut self, state: LeaseState, reason: impl Into<String>) {
        self.term.end();
        self.leased.fence(state, reason);
    }

    /// Tries again soon: a quarter beat, at least `min`.
    pub(crate) fn retry_soon(&mut self, min: Duration) {
        self.next_beat = Instant::now() + (self.beat / 4).max(min);
    }

    /// The floor that keeps this holder after `mark_ms` (0: no mark known), once the start
    /// guard has let the clock get there ([`rules::guarded_floor`]; waited on a blocking
    /// thread: the runtime's other tasks, such as a ZooKeeper session, go on meanwhile).
    pub(crate) async fn guarded_floor(
        &self,
        machine: u64,
        mark_ms: u64,
        max_wait: Duration,
    ) -> Result<Floor, StartError> {
        let leased = self.leased.clone();
        tokio::task::spawn_blocking(move || {
            let generator = &leased.generator;
            rules::guarded_floor(
                generator.clock(),
                generator.config(),
                machine,
                mark_ms,
                max_wait,
            )
        })
        .await
        .map_err(|e| StartError::Lease(format!("the start guard failed: {e}")))?
    }

    /// The start guard of a holder continuing exactly after `at` ([`rules::guard_continuation`],
    /// on a blocking thread).
    pub(crate) async fn guard_continuation(
        &self,
        machine: u64,
        at: vesta_core::Position,
        max_wait: Duration,
    ) -> Result<(), StartError> {
        let leased = self.leased.clone();
        tokio::task::spawn_blocking(move || {
            let generator = &leased.generator;
            rules::guard_continuation(generator.clock(), generator.layout(), machine, at, max_wait)
        })
        .await
        .map_err(|e| StartError::Lease(format!("the start guard failed: {e}")))?
    }

    /// Moves the generator to `machine` from `floor` (the start guard passed) and, when it is
    /// not the machine `previous` held, forgets the old machine's promises and counts the
    /// change (for `VestaMachineIdChanged`). Every leasing source calls it once it holds a
    /// claim and before its first promise.
    pub(crate) fn take_machine(
        &mut self,
        machine: u64,
        floor: &Floor,
        previous: Option<u64>,
    ) -> Result<(), StartError> {
        self.leased
            .generator
            .switch_machine(machine, floor.time)
            .map_err(|e| StartError::Lease(format!("cannot use machine {machine}: {e}")))?;
        if previous != Some(machine) {
            self.term.forget_promises();
            if previous.is_some() {
                self.leased.with_info(|info| info.machine_changes += 1);
            }
        }
        Ok(())
    }

    /// After a lost lease, the claim was tried again with `result`: counted when it worked, else
    /// the reason noted for the status and the next try a beat later. Returns whether it did.
    pub(crate) fn reclaimed(
        &mut self,
        result: Result<(), StartError>,
        min_retry: Duration,
    ) -> bool {
        match result {
            Ok(()) => {
                self.leased.with_info(|info| info.reconnects += 1);
                true
            }
            Err(e) => {
                self.leased.with_info(|info| {
                    info.note = Some(format!("re-claiming a machine ID failed: {e}"));
                });
                self.next_beat = Instant::now() + self.beat.max(min_retry);
                false
            }
        }
    }

    /// How long the write of `promise` may take: until the term ends, so a slow store never
    /// holds the watchdog back (`fallback` when no term runs), and at least `min`.
    pub(crate) fn write_limit(
        &self,
        promise: &Promise,
        fallback: Duration,
        min: Duration,
    ) -> Duration {
        self.term
            .ends_at()
            .map_or(fallback, |end| {
                end.saturating_duration_since(promise.sent_at)
            })
            .max(min)
    }

    /// The watchdog fired (if the term is really over): fence with the promised reason.
    fn check_lapse(&mut self) {
        if self.term.lapsed(Instant::now()) {
            self.leased.lapse();
        }
    }

    /// Stops issuing for good and returns the final, clean mark to write, with the exact
    /// position of the last ID issued.
    fn final_promise(&mut self) -> Promise {
        self.fence(LeaseState::Released, "the issuer was shut down");
        let stopped_at = self.leased.generator.stop();
        let sent_at = Instant::now();
        let now_ms = self.now_ms();
        self.term.final_promise(sent_at, now_ms, stopped_at)
    }
}

/// The issuer's handle on its lease thread: one stop, one join, for any source.
pub(crate) struct LeaseThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), String>>>,
    name: &'static str,
}

impl fmt::Debug for LeaseThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseThread")
            .field("name", &self.name)
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl LeaseThread {
    /// Starts the thread and waits until `source` holds the machine ID (start guard passed,
    /// first promise written) or failed to; the generator must be fenced until then.
    pub(crate) fn spawn<C: Clock + 'static, S: LeaseSource<C>>(
        lease: Lease<C>,
        source: S,
    ) -> Result<Self, StartError> {
        let (started_tx, started_rx) = sync_channel(1);
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(S::THREAD.into())
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
                runtime.block_on(run(lease, source, started_tx, stop_rx))
            })
            .map_err(|e| {
                StartError::Lease(format!("cannot start the {} thread: {e}", S::THREAD))
            })?;
        match started_rx.recv() {
            Ok(Ok(())) => Ok(LeaseThread {
                stop: Some(stop_tx),
                thread: Some(thread),
                name: S::THREAD,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(StartError::Lease(format!(
                    "the {} thread ended before the machine ID was held",
                    S::THREAD
                )))
            }
        }
    }

    /// Stops issuing, writes the final mark, gives the ID back, joins the thread. Idempotent.
    pub(crate) fn stop(&mut self) -> Result<(), ShutdownError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => match t.join() {
                Ok(result) => result.map_err(ShutdownError),
                Err(_) => Err(ShutdownError(format!("the {} thread panicked", self.name))),
            },
            None => Ok(()),
        }
    }
}

/// What woke the lease thread.
enum Event {
    Stop,
    Lost(String),
    Lapsed,
    Beat,
}

async fn run<C: Clock + 'static, S: LeaseSource<C>>(
    mut lease: Lease<C>,
    mut source: S,
    started: SyncSender<Result<(), StartError>>,
    mut stop: oneshot::Receiver<()>,
) -> Result<(), String> {
    if let Err(e) = source.start(&mut lease).await {
        lease.fence(LeaseState::Released, e.to_string());
        let _ = started.send(Err(e));
        return Ok(());
    }
    let _ = started.send(Ok(()));
    drop(started);
    loop {
        let ends_at = lease.term.ends_at();
        let next_beat = lease.next_beat;
        // A message or the sender's drop (the issuer stopping) both end the loop. Polled in
        // this order (a stop first), as a biased select.
        let event = {
            let mut lost = pin!(source.lost());
            let mut lapse = pin!(sleep_until(ends_at));
            let mut beat = pin!(tokio::time::sleep_until(next_beat.into()));
            poll_fn(|cx| {
                if Pin::new(&mut stop).poll(cx).is_ready() {
                    Poll::Ready(Event::Stop)
                } else if let Poll::Ready(reason) = lost.as_mut().poll(cx) {
                    Poll::Ready(Event::Lost(reason))
                } else if lapse.as_mut().poll(cx).is_ready() {
                    Poll::Ready(Event::Lapsed)
                } else if beat.as_mut().poll(cx).is_ready() {
                    Poll::Ready(Event::Beat)
                } else {
                    Poll::Pending
                }
            })
            .await
        };
        match event {
            Event::Stop => break,
            Event::Lost(reason) => source.on_lost(&mut lease, reason),
            Event::Lapsed => lease.check_lapse(),
            // A stop cancels a slow beat (a re-lease, a write); a ZooKeeper session then
            // closes on drop, which deletes any claim it made.
            Event::Beat => {
                let mut beat = pin!(source.beat(&mut lease));
                let stopped = poll_fn(|cx| {
                    if Pin::new(&mut stop).poll(cx).is_ready() {
                        Poll::Ready(true)
                    } else {
                        beat.as_mut().poll(cx).map(|()| false)
                    }
                })
                .await;
                if stopped {
                    break;
                }
            }
        }
    }
    let last = lease.final_promise();
    source.finish(&mut lease, last).await
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
