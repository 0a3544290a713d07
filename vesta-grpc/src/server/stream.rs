//! `StreamIds`: a large count of IDs as a stream of chunks, each issued only when the
//! transport asks for the next (tonic polls the stream as HTTP/2 flow control lets it send),
//! so a client that stops reading stops the issuing too: what the server holds for it is the
//! chunk being sent and the next, never the rest of the count.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};
use tonic::Status;
use tonic::codegen::tokio_stream::Stream;
use vesta_core::Clock;
use vesta_embed::Flow;
use vesta_service::{Answer, IdsLater, OpError, Service};

use super::status;
use crate::pb::IdChunk;

/// Most IDs one `StreamIds` call may ask for.
pub const MAX_STREAM_IDS: u64 = 1_000_000_000;
/// Most IDs in one chunk (at most ~20 KB encoded: one HTTP/2 DATA frame or two).
pub const CHUNK_IDS: u64 = 2048;

/// The rest of a `StreamIds` call.
pub struct IdStream<C: Clock + 'static> {
    service: Arc<Service<C>>,
    flow: Flow<C>,
    /// IDs not yet in a chunk.
    remaining: u64,
    /// The chunk being issued, waiting for a later time unit.
    waiting: Option<IdsLater>,
    /// The call's deadline.
    deadline: Option<Pin<Box<Sleep>>>,
    done: bool,
}

impl<C: Clock + 'static> IdStream<C> {
    /// A stream of `count` IDs (1..=[`MAX_STREAM_IDS`]) through `flow`, ending at `deadline`.
    pub fn new(
        service: Arc<Service<C>>,
        flow: Flow<C>,
        count: u64,
        deadline: Option<Instant>,
    ) -> Result<Self, Status> {
        if !(1..=MAX_STREAM_IDS).contains(&count) {
            return Err(status::of(&OpError::count_out_of_range(
                count,
                MAX_STREAM_IDS,
            )));
        }
        Ok(IdStream {
            service,
            flow,
            remaining: count,
            waiting: None,
            deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at))),
            done: false,
        })
    }

    /// The chunk `r` answers, or the stream's end with its refusal.
    fn chunk(
        &mut self,
        r: Result<vesta_core::IdBatch, OpError>,
    ) -> Poll<Option<Result<IdChunk, Status>>> {
        match r {
            Ok(batch) => {
                self.remaining -= batch.len();
                Poll::Ready(Some(Ok(IdChunk {
                    ids: batch.to_vec(),
                })))
            }
            Err(e) => {
                self.done = true;
                Poll::Ready(Some(Err(status::of(&e))))
            }
        }
    }
}

impl<C: Clock + 'static> Stream for IdStream<C> {
    type Item = Result<IdChunk, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done || this.remaining == 0 {
            return Poll::Ready(None);
        }
        if let Some(deadline) = &mut this.deadline
            && deadline.as_mut().poll(cx).is_ready()
        {
            // Dropping a waiting chunk takes nothing.
            this.waiting = None;
            this.done = true;
            return Poll::Ready(Some(Err(Status::deadline_exceeded(
                "the call's deadline passed before the stream's last ID",
            ))));
        }
        if this.waiting.is_none() {
            let n = this
                .remaining
                .min(CHUNK_IDS)
                .min(this.service.limits().max_batch);
            match this.service.ids(&this.flow, n) {
                Answer::Now(r) => return this.chunk(r),
                Answer::Later(later) => this.waiting = Some(later),
            }
        }
        let waiting = this.waiting.as_mut().expect("set above");
        match Pin::new(waiting).poll(cx) {
            Poll::Ready(r) => {
                this.waiting = None;
                this.chunk(r)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
