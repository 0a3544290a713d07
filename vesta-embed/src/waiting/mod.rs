//! Issuing for async callers (the servers, the client's fallback, tokio services): a call never
//! blocks a runtime worker. [`AsyncIssuer::start`] or [`Issuer::into_async`] make one. While the current time unit has sequence left a call is answered at
//! once, as `try_next_ids` would; once it is used up the call parks on a waiting list and one
//! clock thread per issuer, sleeping precisely to each unit boundary, hands the new unit out to
//! the parked calls — by flow (one per connection) in turns, so a greedy client cannot starve a
//! polite one, and each flow's calls in arrival order.
//!
//! Why a thread and not the async timer: tokio's timer has millisecond granularity and a wake-up
//! that lands a tick late skips a whole millisecond unit; a thread that sleeps to the boundary and
//! yields for the last microseconds (the [`Clock`] wait) fills every unit without burning a core.
//! Every wait is bounded: by the [`Clock`] contract at the boundary, and by `max_wait` in all
//! (then [`IssueError::Saturated`]).

mod queue;
mod unit_clock;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use vesta_core::{Clock, GenError, IdBatch};

use crate::config::IssuerConfig;
use crate::error::{IssueError, ShutdownError, StartError};
use crate::issuer::Issuer;
use queue::{WaitQueue, Waiter};

/// How long a call may wait for sequence space by default before [`IssueError::Saturated`].
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(3);

/// The flow of calls made through [`AsyncIssuer`] itself rather than through a [`Flow`].
const SHARED_FLOW: u64 = 0;

/// Counters of the waiting list, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitStats {
    /// Calls parked now.
    pub parked: u64,
    /// Calls that had to park, since start.
    pub parked_total: u64,
    /// Unit boundaries waited through, summed over calls (a call parked over three boundaries
    /// counts three), since start.
    pub unit_waits_total: u64,
    /// Calls answered [`IssueError::Saturated`] after `max_wait`, since start.
    pub expired_total: u64,
}

/// State shared by the handles and the clock thread.
struct Shared<C: Clock + 'static> {
    issuer: Arc<Issuer<C>>,
    max_wait: Duration,
    queue: Mutex<Parked>,
    /// Wakes the clock thread when the first call parks (or on stop).
    wake: Condvar,
    /// `queue.len()`, readable without the lock: calls take the fast path only when it is 0, so
    /// nobody overtakes the parked calls at a boundary.
    parked: AtomicUsize,
    parked_total: AtomicU64,
    unit_waits_total: AtomicU64,
    expired_total: AtomicU64,
    next_flow: AtomicU64,
}

/// The waiting list and the clock thread's state, under one lock.
#[derive(Default)]
struct Parked {
    queue: WaitQueue,
    idle: bool,
    stop: bool,
}

impl<C: Clock + 'static> Shared<C> {
    fn lock(&self) -> MutexGuard<'_, Parked> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Stops the clock thread when the last handle goes.
struct Owner<C: Clock + 'static> {
    shared: Arc<Shared<C>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl<C: Clock + 'static> Owner<C> {
    fn signal_stop(&self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
    }
}

impl<C: Clock + 'static> Drop for Owner<C> {
    fn drop(&mut self) {
        // Not joined here: the thread may be sleeping to a boundary (up to a unit).
        self.signal_stop();
    }
}

/// An issuer for async code: `next_id().await` and `next_ids(n).await` never block a runtime
/// worker, and waiting calls are served fairly across [`Flow`]s. Cheap to clone.
///
/// The blocking [`Issuer::next_id`] sleeps when a time unit's sequence is used up — up to a
/// whole second with max-peak — which would stall a tokio worker and every task on it. Here a
/// call is answered at once while the unit has sequence left, and otherwise parks on a waiting
/// list that a clock thread serves at the next unit boundary. Every wait is bounded by
/// `max_wait` ([`DEFAULT_MAX_WAIT`]), then [`IssueError::Saturated`].
///
/// ```
/// use vesta_embed::{AsyncIssuer, IssuerConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ids = AsyncIssuer::start(IssuerConfig::builder().machine(7).build()?).await?;
/// let id = ids.next_id().await?;
/// let batch = ids.next_ids(1_000).await?; // contiguous runs, one per time unit touched
/// assert!(batch.iter().all(|later| later > id));
/// println!("{}", ids.issuer().explain(id));
/// ids.shutdown().await?; // releases the machine ID, off the runtime's workers
/// # Ok(())
/// # }
/// ```
///
/// Dropping the last handle stops the clock thread; the [`Issuer`] inside is shut down when
/// its last `Arc` goes. Call [`shutdown`](Self::shutdown) to release the machine ID at a point
/// you choose and see whether the release was clean.
pub struct AsyncIssuer<C: Clock + 'static = crate::SystemClock> {
    owner: Arc<Owner<C>>,
}

impl<C: Clock + 'static> Clone for AsyncIssuer<C> {
    fn clone(&self) -> Self {
        AsyncIssuer {
            owner: self.owner.clone(),
        }
    }
}

impl<C: Clock + 'static> std::fmt::Debug for AsyncIssuer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncIssuer")
            .field("max_wait", &self.shared().max_wait)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl AsyncIssuer {
    /// Starts an [`Issuer`] for `config` on the system clock (on a blocking thread: a
    /// ZooKeeper lease or a start guard may take seconds) and wraps it, with calls waiting at
    /// most [`DEFAULT_MAX_WAIT`]. Needs a tokio runtime; outside one, use
    /// `Issuer::start(config)?.into_async()`.
    pub async fn start(config: IssuerConfig) -> Result<Self, StartError> {
        let started = tokio::task::spawn_blocking(move || Issuer::start(config)).await;
        let issuer = match started {
            Ok(issuer) => issuer?,
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(e) => {
                    return Err(StartError::Thread {
                        name: "issuer start",
                        cause: std::io::Error::other(e),
                    });
                }
            },
        };
        Self::new(Arc::new(issuer), DEFAULT_MAX_WAIT)
    }
}

impl<C: Clock + 'static> Issuer<C> {
    /// This issuer for async code, with calls waiting at most [`DEFAULT_MAX_WAIT`] for sequence
    /// space (see [`AsyncIssuer`]); [`AsyncIssuer::issuer`] still reaches the blocking API.
    pub fn into_async(self) -> Result<AsyncIssuer<C>, StartError> {
        AsyncIssuer::new(Arc::new(self), DEFAULT_MAX_WAIT)
    }
}

impl<C: Clock + 'static> AsyncIssuer<C> {
    /// Wraps `issuer`; a call waits at most `max_wait` for sequence space. Starts the clock
    /// thread (it sleeps until a call parks).
    pub fn new(issuer: Arc<Issuer<C>>, max_wait: Duration) -> Result<Self, StartError> {
        let shared = Arc::new(Shared {
            issuer,
            max_wait,
            queue: Mutex::new(Parked::default()),
            wake: Condvar::new(),
            parked: AtomicUsize::new(0),
            parked_total: AtomicU64::new(0),
            unit_waits_total: AtomicU64::new(0),
            expired_total: AtomicU64::new(0),
            next_flow: AtomicU64::new(SHARED_FLOW + 1),
        });
        let thread = unit_clock::spawn(shared.clone()).map_err(|cause| StartError::Thread {
            name: "unit clock",
            cause,
        })?;
        Ok(AsyncIssuer {
            owner: Arc::new(Owner {
                shared,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    fn shared(&self) -> &Shared<C> {
        &self.owner.shared
    }

    /// The issuer behind it (explain, make, status, shutdown).
    pub fn issuer(&self) -> &Arc<Issuer<C>> {
        &self.shared().issuer
    }

    /// A new flow: calls through it share the unit fairly with other flows' calls. Give each
    /// client connection its own.
    pub fn flow(&self) -> Flow<C> {
        Flow {
            owner: self.clone(),
            id: self.shared().next_flow.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The next ID; waits on the runtime, not a thread, when the unit is used up.
    pub async fn next_id(&self) -> Result<u64, IssueError> {
        first_id(self.issue(SHARED_FLOW, 1).await)
    }

    /// Exactly `n` IDs as contiguous runs (one per time unit touched), waiting as needed.
    pub async fn next_ids(&self, n: u64) -> Result<IdBatch, IssueError> {
        self.issue(SHARED_FLOW, n).await
    }

    /// Stops the clock thread and waits for it (at most about one time unit): calls still
    /// waiting are answered `Unavailable`, later calls get IDs only while the unit has them.
    /// Blocking: call it off the async workers, e.g. when a server releases its machine ID.
    pub fn stop(&self) {
        self.owner.signal_stop();
        let thread = self
            .owner
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    /// Releases the machine ID ([`Issuer::shutdown`]: final mark and claim deleted for a
    /// lease) and stops the clock thread ([`stop`](Self::stop)), on a blocking thread so the
    /// runtime's workers never wait on ZooKeeper or a unit boundary. Afterwards no call gets an
    /// ID, through any handle. Needs a tokio runtime.
    pub async fn shutdown(&self) -> Result<(), ShutdownError> {
        let ids = self.clone();
        let released = tokio::task::spawn_blocking(move || {
            let released = ids.issuer().shutdown();
            ids.stop();
            released
        })
        .await;
        match released {
            Ok(released) => released,
            Err(e) => Err(ShutdownError(format!(
                "releasing the machine ID failed: {e}"
            ))),
        }
    }

    /// Counters of the waiting list.
    pub fn stats(&self) -> WaitStats {
        let s = self.shared();
        WaitStats {
            parked: s.parked.load(Ordering::Relaxed) as u64,
            parked_total: s.parked_total.load(Ordering::Relaxed),
            unit_waits_total: s.unit_waits_total.load(Ordering::Relaxed),
            expired_total: s.expired_total.load(Ordering::Relaxed),
        }
    }

    fn issue(&self, flow: u64, n: u64) -> Issue {
        let s = self.shared();
        if n == 0 {
            return Issue::answered(Ok(IdBatch::default()));
        }
        let mut runs = Vec::new();
        let mut left = n;
        if s.parked.load(Ordering::Relaxed) == 0 {
            match s.issuer.try_next_ids(n) {
                Ok(batch) if batch.len() == n => return Issue::answered(Ok(batch)),
                Ok(batch) => {
                    left -= batch.len();
                    runs.extend_from_slice(batch.runs());
                }
                Err(IssueError::Refused(GenError::WouldBlock { .. })) => {}
                Err(e) => return Issue::answered(Err(e)),
            }
        }
        let (tx, rx) = oneshot::channel();
        let mut p = s.lock();
        if p.stop {
            return Issue::answered(Err(shut_down()));
        }
        p.queue
            .push(flow, Waiter::new(left, runs, Instant::now(), tx));
        s.parked.store(p.queue.len(), Ordering::Relaxed);
        s.parked_total.fetch_add(1, Ordering::Relaxed);
        s.unit_waits_total.fetch_add(1, Ordering::Relaxed);
        if p.idle {
            s.wake.notify_one();
        }
        Issue(Pending::Waiting(rx))
    }
}

/// A client's share of an [`AsyncIssuer`]: its parked calls are answered in the order they were
/// made, and take turns with other flows' at each unit boundary.
pub struct Flow<C: Clock + 'static = crate::SystemClock> {
    owner: AsyncIssuer<C>,
    id: u64,
}

/// A clone is the same flow (one connection's calls made from several tasks, as a gRPC
/// connection's are): its calls keep one order and one turn.
impl<C: Clock + 'static> Clone for Flow<C> {
    fn clone(&self) -> Self {
        Flow {
            owner: self.owner.clone(),
            id: self.id,
        }
    }
}

impl<C: Clock + 'static> std::fmt::Debug for Flow<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow").field("id", &self.id).finish()
    }
}

impl<C: Clock + 'static> Flow<C> {
    /// `n` IDs: ready at once when the unit has them and nobody waits, else a future that
    /// resolves at a later unit boundary. Poll-free callers can check [`Issue::ready`] first.
    pub fn issue(&self, n: u64) -> Issue {
        self.owner.issue(self.id, n)
    }

    /// The next ID.
    pub async fn next_id(&self) -> Result<u64, IssueError> {
        first_id(self.issue(1).await)
    }

    /// Exactly `n` IDs as contiguous runs.
    pub async fn next_ids(&self, n: u64) -> Result<IdBatch, IssueError> {
        self.issue(n).await
    }

    /// The issuer this flow issues from.
    pub fn issuer(&self) -> &AsyncIssuer<C> {
        &self.owner
    }
}

/// A call's IDs: answered at once, or parked until a later unit boundary. Await it, or take
/// the answer without waiting with [`ready`](Issue::ready) / [`try_take`](Issue::try_take).
#[derive(Debug)]
pub struct Issue(Pending);

/// What an [`Issue`] holds (private: the channel type is tokio's).
#[derive(Debug)]
enum Pending {
    /// Answered without waiting (taken on the first poll).
    Ready(Option<Result<IdBatch, IssueError>>),
    /// Parked; resolves when the clock thread serves it.
    Waiting(oneshot::Receiver<Result<IdBatch, IssueError>>),
}

impl Issue {
    fn answered(r: Result<IdBatch, IssueError>) -> Self {
        Issue(Pending::Ready(Some(r)))
    }
}

impl Issue {
    /// The answer if it needed no waiting (a server writes it without a task switch).
    pub fn ready(&mut self) -> Option<Result<IdBatch, IssueError>> {
        match &mut self.0 {
            Pending::Ready(r) => r.take(),
            Pending::Waiting(_) => None,
        }
    }

    /// The answer if it has arrived, without waiting.
    pub fn try_take(&mut self) -> Option<Result<IdBatch, IssueError>> {
        match &mut self.0 {
            Pending::Ready(r) => r.take(),
            Pending::Waiting(rx) => match rx.try_recv() {
                Ok(r) => Some(r),
                Err(oneshot::error::TryRecvError::Empty) => None,
                Err(oneshot::error::TryRecvError::Closed) => Some(Err(shut_down())),
            },
        }
    }
}

impl Future for Issue {
    type Output = Result<IdBatch, IssueError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().0 {
            Pending::Ready(r) => Poll::Ready(r.take().unwrap_or_else(|| Err(shut_down()))),
            Pending::Waiting(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or_else(|_| Err(shut_down()))),
        }
    }
}

fn first_id(batch: Result<IdBatch, IssueError>) -> Result<u64, IssueError> {
    batch?
        .iter()
        .next()
        .ok_or_else(|| IssueError::Unavailable("no ID was issued".into()))
}

fn shut_down() -> IssueError {
    IssueError::Unavailable("the issuer's waiting list was shut down".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IssuerConfig;
    use vesta_core::{IdType, ManualClock};

    const T0: u64 = 1_700_000_000_000;

    fn async_issuer(id_type: IdType) -> (AsyncIssuer<Arc<ManualClock>>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(T0));
        let mut config = IssuerConfig::default();
        config.id.id_type = Some(id_type);
        let issuer = Issuer::start_with_clock(config, clock.clone()).unwrap();
        let a = AsyncIssuer::new(Arc::new(issuer), DEFAULT_MAX_WAIT).unwrap();
        (a, clock)
    }

    #[tokio::test]
    async fn calls_are_answered_at_once_while_the_unit_has_room() {
        let (a, clock) = async_issuer(IdType::MinGranularity);
        let started = clock.waits();
        let flow = a.flow();
        let mut issue = flow.issue(10);
        let batch = issue.ready().expect("no wait").unwrap();
        assert_eq!(batch.len(), 10);
        assert_eq!(clock.waits(), started);
        assert_eq!(a.stats().parked_total, 0);
    }

    #[tokio::test]
    async fn a_used_up_unit_parks_the_call_until_the_next_one() {
        let (a, _clock) = async_issuer(IdType::MinGranularity);
        let first = a.next_ids(1024).await.unwrap();
        let more = a.next_ids(3000).await.unwrap();
        assert_eq!(more.len(), 3000);
        let all: Vec<u64> = first.iter().chain(more.iter()).collect();
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        assert!(a.stats().parked_total >= 1);
        // The count is updated just after the answers are sent.
        for _ in 0..100 {
            if a.stats().parked == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(a.stats().parked, 0);
    }

    #[tokio::test]
    async fn a_fenced_issuer_fails_parked_calls_with_its_reason() {
        let (a, _clock) = async_issuer(IdType::MinGranularity);
        a.issuer()
            .fence_for_test(crate::LeaseState::Fenced, "lease lost");
        let err = a.next_id().await.unwrap_err();
        assert_eq!(err, IssueError::Unavailable("lease lost".into()));
    }
}
