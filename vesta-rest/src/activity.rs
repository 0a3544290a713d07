//! What one connection is doing ([`Activity`]: requests open, requests waiting for IDs, bytes
//! taken), and the watcher that reads it ([`watch`]) to tell an idle or stalled connection from a
//! busy one. The request path updates it with a few relaxed atomic operations per request.
//!
//! It sits below the request path (`ctx`, `body`, `router`), the metrics (which count each
//! [`CloseReason`]) and the connection driver (`connection`), so that each of them depends on it
//! and none on another above it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::{Instant, sleep};
use vesta_core::Clock;
use vesta_embed::Flow;

/// What one connection is doing, read by its watcher.
#[derive(Debug, Default)]
pub struct Activity {
    /// Requests whose response is not yet fully taken by hyper (or dropped).
    open: AtomicUsize,
    /// Open requests waiting for sequence space (bounded by `max_wait_ms`, so not a stall).
    waiting: AtomicUsize,
    /// Bumped whenever a request starts or ends or a piece of a response is sent.
    progress: AtomicU64,
}

impl Activity {
    /// Counts a request as open until the guard (which travels with its response) is dropped.
    pub fn request(self: &Arc<Self>) -> RequestGuard {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.progress();
        RequestGuard(Arc::clone(self))
    }

    /// Records that a piece of a response was sent.
    pub fn progress(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests open now.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// An open request; dropped with the last piece of its response.
#[derive(Debug)]
pub struct RequestGuard(Arc<Activity>);

impl RequestGuard {
    /// The connection's activity.
    pub fn activity(&self) -> &Activity {
        &self.0
    }

    /// Marks the request as waiting for IDs while the returned guard lives.
    pub fn waiting(&self) -> WaitingGuard<'_> {
        self.0.waiting.fetch_add(1, Ordering::Relaxed);
        WaitingGuard(&self.0)
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
        self.0.progress();
    }
}

/// A request parked for sequence space.
#[derive(Debug)]
pub struct WaitingGuard<'a>(&'a Activity);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        self.0.progress();
    }
}

/// What the request path needs of its connection: its flow of the issuer (fair waiting) and
/// its activity.
#[derive(Debug)]
pub struct ConnContext<C: Clock + 'static> {
    /// This connection's share of the issuer.
    pub flow: Flow<C>,
    /// Read by the watcher.
    pub activity: Arc<Activity>,
}

/// Why the watcher ends a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// No request open for `header_read_timeout_ms`.
    Idle,
    /// Responses made no progress for `send_timeout_ms`.
    Stalled,
    /// Older than `max_connection_age_ms`.
    Aged,
    /// The TLS handshake failed or did not finish within `header_read_timeout_ms`.
    Handshake,
}

impl CloseReason {
    /// All reasons, in metrics order.
    pub const ALL: [CloseReason; 4] = [
        CloseReason::Idle,
        CloseReason::Stalled,
        CloseReason::Aged,
        CloseReason::Handshake,
    ];

    /// The metrics label.
    pub const fn label(self) -> &'static str {
        match self {
            CloseReason::Idle => "idle",
            CloseReason::Stalled => "stalled",
            CloseReason::Aged => "aged",
            CloseReason::Handshake => "handshake",
        }
    }
}

/// Resolves when the connection has been idle for `idle` or stalled for `send` (never while it
/// is busy).
pub async fn watch(activity: &Activity, idle: Duration, send: Duration) -> CloseReason {
    let tick = (idle.min(send) / 4).max(Duration::from_millis(1));
    let mut seen = activity.progress.load(Ordering::Relaxed);
    let mut since = Instant::now();
    loop {
        sleep(tick).await;
        let now = Instant::now();
        let progress = activity.progress.load(Ordering::Relaxed);
        if progress != seen {
            seen = progress;
            since = now;
            continue;
        }
        let open = activity.open.load(Ordering::Relaxed);
        let waiting = activity.waiting.load(Ordering::Relaxed);
        let quiet = now - since;
        if open == 0 {
            if quiet >= idle {
                return CloseReason::Idle;
            }
        } else if open > waiting {
            if quiet >= send {
                return CloseReason::Stalled;
            }
        } else {
            // Every open request waits for IDs: not the client's doing, and bounded.
            since = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::timeout;

    /// Watches `a` with these timeouts.
    async fn watch_ms(a: &Activity, idle_ms: u64, send_ms: u64) -> CloseReason {
        watch(
            a,
            Duration::from_millis(idle_ms),
            Duration::from_millis(send_ms),
        )
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_requests_is_idle_after_the_timeout() {
        let a = Activity::default();
        let started = Instant::now();
        assert_eq!(watch_ms(&a, 400, 10_000).await, CloseReason::Idle);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(400) && took <= Duration::from_millis(600));
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_request_without_progress_is_a_stall_but_waiting_for_ids_is_not() {
        let a = Arc::new(Activity::default());
        let request = a.request();
        let waiting = request.waiting();
        // Waiting for IDs for longer than the send timeout is not a stall.
        let w = watch_ms(&a, 100, 200);
        tokio::pin!(w);
        assert!(timeout(Duration::from_secs(5), w.as_mut()).await.is_err());
        drop(waiting);
        let started = Instant::now();
        assert_eq!(w.await, CloseReason::Stalled);
        assert!(started.elapsed() <= Duration::from_millis(300));
        drop(request);
        assert_eq!(a.open(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn progress_keeps_a_connection_open() {
        let a = Arc::new(Activity::default());
        let request = a.request();
        let w = watch_ms(&a, 100, 200);
        tokio::pin!(w);
        for _ in 0..20 {
            tokio::select! {
                r = w.as_mut() => panic!("closed while sending: {r:?}"),
                () = sleep(Duration::from_millis(100)) => a.progress(),
            }
        }
        drop(request);
        assert_eq!(w.await, CloseReason::Idle);
    }
}
