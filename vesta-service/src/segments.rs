//! Segment mode in a server (`[segment] db`, `--segment-db`): the [`Store`] both servers take
//! numbers from, the start policy, and the give-back at shutdown.
//!
//! Start (before the issuer, so a bad segment setup never takes a machine-ID lease):
//!
//! - a bad URL is refused with the config; a missing SQLite file, a missing `leaf_alloc`
//!   table or a database that refuses us (credentials, no such database) fail the start with
//!   one line naming it;
//! - a database that cannot be reached at all (nothing answers, no answer within
//!   `segment.fetch_timeout_ms`) does *not* stop the server: its IDs work without it. It
//!   starts with segments unavailable — segment requests are refused at once ("not connected"),
//!   `/healthz` says `degraded` with the cause, `vesta_segment_up` is 0 — and keeps trying in
//!   the background (backoff 100 ms doubling to 5 s) until the store opens.
//!
//! Stop: after the connections drained, [`Segments::shutdown`] gives each tag's unused tail
//! back (`vesta_segment::Store::shutdown`), before the machine ID is released.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::Serialize;
use tokio::task::JoinHandle;
use vesta_segment::{
    GiveBack, GiveBackOutcome, Health, SegmentError, SegmentSection, Store, TagStatus,
};

use crate::error::ServeError;

/// First pause between connection attempts after an unreachable start.
const RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest pause between attempts.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// A server's segment store: open, or still being connected to in the background.
pub struct Segments {
    /// The database, password hidden.
    db: String,
    store: OnceLock<Arc<Store>>,
    /// Why the store is not open yet (while connecting).
    last_error: Mutex<Option<String>>,
    connector: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
    /// Numbers the server handed out, all tags.
    issued: AtomicU64,
}

impl std::fmt::Debug for Segments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Segments({})", self.db)
    }
}

/// The state of a server's segments, for `/healthz`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentsState {
    /// Open, and every tag in use fetched fine last time.
    Ok,
    /// Open, but some tag's last fetch failed (numbers still come from its buffers).
    Degraded,
    /// The database was not reachable yet: segment requests are refused; retrying.
    Connecting,
    /// Shut down.
    Closed,
}

/// What `/healthz` shows of the segments: the database, the state and each tag in use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SegmentsStatus {
    /// The database (password hidden).
    pub db: String,
    /// Overall state.
    pub state: SegmentsState,
    /// Why the store is not open (state `connecting`), or why the restore guard's state file
    /// could not be written (state `degraded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Each tag in use: buffered numbers, step, fetches, errors, last fetch latency.
    pub tags: Vec<TagStatus>,
}

impl Segments {
    /// Opens the store of `section` by the start policy above; `Ok(None)` when `section.db`
    /// is unset (segment mode off). Call within the tokio runtime that serves.
    pub async fn open(section: &SegmentSection) -> Result<Option<Arc<Segments>>, ServeError> {
        let Some(_) = &section.db else {
            return Ok(None);
        };
        let db = section
            .db_url()
            .map_err(|e| ServeError::Config(e.into()))?
            .redacted()
            .to_owned();
        match Store::open(section).await {
            Ok(store) => {
                tracing::info!(%db, "segment store open");
                Ok(Some(Arc::new(Self::from_parts(db, Some(store)))))
            }
            Err(e) if e.is_unreachable() => {
                tracing::warn!(
                    "segments unavailable: {e}; serving IDs without them and retrying in the \
                     background"
                );
                let segments = Arc::new(Self::from_parts(db, None));
                *lock(&segments.last_error) = Some(e.to_string());
                let task = tokio::spawn(connect(Arc::downgrade(&segments), section.clone()));
                *lock(&segments.connector) = Some(task);
                Ok(Some(segments))
            }
            Err(e) => Err(ServeError::Segments(e)),
        }
    }

    /// Segments over a store opened elsewhere (tests, embedding).
    pub fn from_store(store: Store) -> Arc<Segments> {
        let db = store.status().db;
        Arc::new(Self::from_parts(db, Some(store)))
    }

    fn from_parts(db: String, store: Option<Store>) -> Segments {
        let cell = OnceLock::new();
        if let Some(store) = store {
            let _ = cell.set(Arc::new(store));
        }
        Segments {
            db,
            store: cell,
            last_error: Mutex::new(None),
            connector: Mutex::new(None),
            closed: AtomicBool::new(false),
            issued: AtomicU64::new(0),
        }
    }

    /// The store, or why there is none: [`SegmentError::Unreachable`] while the database has
    /// not been reached, [`SegmentError::Closed`] after shutdown. One atomic load when open.
    #[inline]
    pub fn store(&self) -> Result<&Arc<Store>, SegmentError> {
        match self.store.get() {
            Some(store) => Ok(store),
            None => Err(self.not_open()),
        }
    }

    #[cold]
    fn not_open(&self) -> SegmentError {
        if self.closed.load(Ordering::SeqCst) {
            return SegmentError::Closed;
        }
        SegmentError::Unreachable {
            db: self.db.clone(),
            cause: lock(&self.last_error)
                .clone()
                .unwrap_or_else(|| "not connected yet".into()),
        }
    }

    /// Counts `n` numbers handed to a client (`vesta_segment_numbers_issued_total`).
    #[inline]
    pub fn issued(&self, n: u64) {
        self.issued.fetch_add(n, Ordering::Relaxed);
    }

    /// Numbers handed to clients so far, all tags.
    pub fn numbers_issued(&self) -> u64 {
        self.issued.load(Ordering::Relaxed)
    }

    /// The database (password hidden).
    pub fn db(&self) -> &str {
        &self.db
    }

    /// True while the store is open.
    pub fn is_up(&self) -> bool {
        self.store.get().is_some() && !self.closed.load(Ordering::SeqCst)
    }

    /// The state for `/healthz` and the metrics.
    pub fn status(&self) -> SegmentsStatus {
        let Some(store) = self.store.get() else {
            let closed = self.closed.load(Ordering::SeqCst);
            return SegmentsStatus {
                db: self.db.clone(),
                state: if closed {
                    SegmentsState::Closed
                } else {
                    SegmentsState::Connecting
                },
                error: (!closed).then(|| self.not_open().to_string()),
                tags: Vec::new(),
            };
        };
        let s = store.status();
        SegmentsStatus {
            db: s.db,
            state: match s.health {
                Health::Ok => SegmentsState::Ok,
                Health::Degraded => SegmentsState::Degraded,
                Health::Closed => SegmentsState::Closed,
            },
            error: s.state_file_error,
            tags: s.tags,
        }
    }

    /// Stops issuing and gives each tag's unused tail back (logged, one line per tag); stops
    /// the background connector first. Only the first call does anything.
    pub async fn shutdown(&self) -> Vec<GiveBack> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Vec::new();
        }
        let connector = lock(&self.connector).take();
        if let Some(task) = connector {
            task.abort();
            let _ = task.await;
        }
        let Some(store) = self.store.get() else {
            return Vec::new();
        };
        let given = store.shutdown().await;
        for g in &given {
            match &g.outcome {
                GiveBackOutcome::Returned { max_id, numbers } => {
                    tracing::info!(tag = %g.tag, max_id, numbers, "unused numbers given back");
                }
                GiveBackOutcome::NothingUnused => {}
                GiveBackOutcome::Moved => tracing::info!(
                    tag = %g.tag,
                    "tail not given back: another allocator took a segment after ours (a gap)"
                ),
                GiveBackOutcome::Failed { error } => {
                    tracing::warn!(tag = %g.tag, "tail not given back (a gap): {error}");
                }
            }
        }
        given
    }
}

/// Retries [`Store::open`] until it works or the segments are shut down (or dropped).
async fn connect(segments: std::sync::Weak<Segments>, section: SegmentSection) {
    let mut pause = RETRY_MIN;
    loop {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
        let result = Store::open(&section).await;
        let Some(segments) = segments.upgrade() else {
            if let Ok(store) = result {
                store.shutdown().await;
            }
            return;
        };
        match result {
            Ok(store) if segments.closed.load(Ordering::SeqCst) => {
                store.shutdown().await;
                return;
            }
            Ok(store) => {
                tracing::info!(db = %segments.db, "segment store open: segments available");
                let _ = segments.store.set(Arc::new(store));
                *lock(&segments.last_error) = None;
                return;
            }
            Err(e) => {
                tracing::warn!("segments still unavailable: {e}; retrying in {pause:?}");
                *lock(&segments.last_error) = Some(e.to_string());
            }
        }
    }
}

/// A poisoned lock still holds a whole value here (each update is one assignment).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(db: &str) -> SegmentSection {
        SegmentSection {
            db: Some(db.into()),
            fetch_timeout_ms: 500,
            ..SegmentSection::default()
        }
    }

    #[tokio::test]
    async fn no_database_means_segment_mode_off() {
        assert!(
            Segments::open(&SegmentSection::default())
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_missing_file_fails_the_start_and_an_unreachable_server_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let missing = format!("sqlite://{}/none.db", dir.path().display());
        let err = Segments::open(&section(&missing)).await.unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        // A database without leaf_alloc: a loud start failure too.
        let empty = format!("sqlite://{}/empty.db", dir.path().display());
        let url = vesta_segment::DbUrl::parse(&empty).unwrap();
        let db = vesta_segment::Database::connect_or_create(&url, Duration::from_secs(1))
            .await
            .unwrap();
        db.close().await;
        let err = Segments::open(&section(&empty)).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "segments: table leaf_alloc does not exist at {empty} (to create it: create \
                 table leaf_alloc at {empty})"
            )
        );

        // Nothing listens on port 1: the server starts, segments unavailable, retrying.
        let s = Segments::open(&section("postgres://u:pw@127.0.0.1:1/db"))
            .await
            .unwrap()
            .unwrap();
        assert!(!s.is_up());
        let status = s.status();
        assert_eq!(status.state, SegmentsState::Connecting);
        let error = status.error.unwrap();
        assert!(
            error.contains("postgres://u:***@127.0.0.1:1/db: connecting"),
            "{error}"
        );
        assert!(matches!(s.store(), Err(SegmentError::Unreachable { .. })));
        assert!(s.shutdown().await.is_empty());
        assert_eq!(s.status().state, SegmentsState::Closed);
        assert!(matches!(s.store(), Err(SegmentError::Closed)));
    }
}
