//! The fetcher: one task per tag in use, filling the tag's next segment in the background.
//!
//! It sleeps until a take crosses the prefetch point (or finds both segments empty), then takes
//! a segment from the database with the step the [`StepPolicy`] picks, and installs it. A failed
//! fetch is retried with capped exponential backoff for as long as a segment is needed, so a
//! tag recovers by itself when the database returns. It stops at shutdown, after finishing a
//! fetch under way (each is bounded by `segment.fetch_timeout_ms`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::buffer::TagBuffer;
use crate::clock::Clock;
use crate::db::{Database, StepRequest};
use crate::floors::Floors;
use crate::step::StepPolicy;

/// First retry delay after a failed fetch.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// Longest retry delay: a returned database is noticed within this.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What the fetcher remembers of its previous fetch (Leaf's `SegmentBuffer` step fields).
#[derive(Clone, Copy, Debug)]
struct Previous {
    at: Duration,
    step: u32,
    table_step: u32,
}

/// Everything a fetcher needs besides its buffer.
pub(crate) struct FetcherContext {
    pub db: Arc<Database>,
    /// The restore guard's file: each new floor is saved before its segment is installed.
    pub floors: Option<Arc<Floors>>,
    pub policy: StepPolicy,
    pub clock: Arc<dyn Clock>,
    pub shutdown: watch::Receiver<bool>,
}

/// Runs until shutdown.
pub(crate) async fn run(buffer: Arc<TagBuffer>, mut ctx: FetcherContext) {
    let mut previous: Option<Previous> = None;
    let mut backoff = MIN_BACKOFF;
    loop {
        if *ctx.shutdown.borrow() {
            return;
        }
        if !buffer.needs_fetch() {
            tokio::select! {
                _ = buffer.wake.notified() => {}
                _ = ctx.shutdown.changed() => return,
            }
            continue;
        }
        let request = match previous {
            None => StepRequest::Table,
            Some(_) if !ctx.policy.adaptive => StepRequest::Table,
            Some(p) => StepRequest::Custom(ctx.policy.next_step(
                p.step,
                p.table_step,
                ctx.clock.now().saturating_sub(p.at),
            )),
        };
        let floor = buffer.begin_fetch();
        let started = Instant::now();
        let result = ctx.db.fetch(&buffer.name, request, floor).await;
        let latency = started.elapsed();
        match result {
            Ok(fetched) => {
                let at = ctx.clock.now();
                previous = Some(Previous {
                    at,
                    step: fetched.step,
                    table_step: fetched.table_step,
                });
                tracing::debug!(tag = %buffer.name, range = ?fetched.range, step = fetched.step, "segment fetched");
                // Saved before a number of the segment is issued: a crash cannot have issued
                // past the floor on file.
                if let Some(floors) = &ctx.floors {
                    crate::store::save_floor(floors, &buffer.name, fetched.range.end).await;
                }
                buffer.install(fetched, latency);
                backoff = MIN_BACKOFF;
            }
            Err(error) => {
                // Said as the error is (a remedy it names, as the program says remedies).
                let shown = buffer.error_for(&error);
                tracing::warn!(tag = %buffer.name, error = %shown, "segment fetch failed; retrying in {backoff:?}");
                buffer.record_failure(error, latency);
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = ctx.shutdown.changed() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}
