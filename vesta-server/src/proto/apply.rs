//! What the server side of every op shares: the context an op's `apply` reads, and requests
//! whose answer is on its way ([`Pending`]): ID requests waiting for sequence space, and
//! segment requests waiting for a segment. An ID request is answered at once while the time
//! unit has sequence left; otherwise it waits on the issuer's waiting list (served fairly across
//! connections at each unit boundary) while the connection goes on answering other ops. A
//! segment request is answered at once from a warm buffer; otherwise it waits on the store (at
//! most `segment.wait_ms`). Either way its answer goes out in the order the connection asked.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use vesta_core::{Clock, IdBatch};
use vesta_embed::{AsyncIssuer, Flow, Issue, IssueError, Issuer};
use vesta_segment::SegmentError;
use vesta_service::Segments;

use super::{ErrorCode, Response};
use crate::config::TcpSection;
use crate::metrics::TcpMetrics;

/// What every connection of a server shares, and every op's `apply` reads.
#[derive(Debug)]
pub(crate) struct ServerContext<C: Clock + 'static> {
    /// The issuer (genMethod server): explain, make, status.
    pub issuer: Arc<Issuer<C>>,
    /// The same issuer behind its waiting list; each connection issues through a flow of it.
    pub ids: AsyncIssuer<C>,
    /// Limits and listen address.
    pub limits: TcpSection,
    /// What the metrics listener exposes (and `INFO` reads connections from).
    pub metrics: Arc<TcpMetrics>,
    /// The segment store, when segment mode is on.
    pub segments: Option<Arc<Segments>>,
}

/// Writes the answer of an ID op from its IDs.
pub(crate) type EncodeIds = fn(u32, &IdBatch, &mut BytesMut);

/// Writes the answer of a segment op from its numbers.
pub(crate) type EncodeNumbers = fn(u32, &[Range<u64>], &mut BytesMut);

/// Segment numbers on their way (a fetch under way, or the tag's first lookup).
pub(crate) type Numbers =
    Pin<Box<dyn Future<Output = Result<Vec<Range<u64>>, SegmentError>> + Send>>;

/// A request whose answer is on its way, answered in the order the connection asked.
pub(crate) struct Pending {
    request_id: u32,
    kind: Kind,
}

enum Kind {
    /// IDs arriving at a unit boundary, or already there behind earlier requests.
    Ids { encode: EncodeIds, ids: Issue },
    /// Segment numbers arriving with a segment.
    Numbers {
        encode: EncodeNumbers,
        numbers: Numbers,
        segments: Arc<Segments>,
    },
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Ids { .. } => "ids",
            Kind::Numbers { .. } => "numbers",
        };
        write!(f, "Pending({}, {kind})", self.request_id)
    }
}

/// What a pending request got.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// IDs, or the issuer's refusal.
    Ids(Result<IdBatch, IssueError>),
    /// Segment numbers, or the store's refusal.
    Numbers(Result<Vec<Range<u64>>, SegmentError>),
}

impl Pending {
    /// A segment request waiting on `numbers`.
    pub(crate) fn numbers(
        request_id: u32,
        encode: EncodeNumbers,
        numbers: Numbers,
        segments: Arc<Segments>,
    ) -> Pending {
        Pending {
            request_id,
            kind: Kind::Numbers {
                encode,
                numbers,
                segments,
            },
        }
    }

    /// Its outcome, once there.
    pub(crate) async fn outcome(&mut self) -> Outcome {
        poll_fn(|cx| self.poll_outcome(cx)).await
    }

    fn poll_outcome(&mut self, cx: &mut Context<'_>) -> Poll<Outcome> {
        match &mut self.kind {
            Kind::Ids { ids, .. } => Pin::new(ids).poll(cx).map(Outcome::Ids),
            Kind::Numbers { numbers, .. } => numbers.as_mut().poll(cx).map(Outcome::Numbers),
        }
    }

    /// Its outcome if it is there, without waiting.
    pub(crate) fn try_take(&mut self) -> Option<Outcome> {
        match &mut self.kind {
            Kind::Ids { ids, .. } => ids.try_take().map(Outcome::Ids),
            Kind::Numbers { .. } => {
                match self.poll_outcome(&mut Context::from_waker(Waker::noop())) {
                    Poll::Ready(o) => Some(o),
                    Poll::Pending => None,
                }
            }
        }
    }

    /// Appends the answer (or the refusal) for `outcome`, and counts it.
    pub(crate) fn answer(self, outcome: Outcome, metrics: &TcpMetrics, out: &mut BytesMut) {
        let id = self.request_id;
        match (self.kind, outcome) {
            (Kind::Ids { encode, .. }, Outcome::Ids(Ok(batch))) => {
                metrics.issued(batch.len());
                encode(id, &batch, out)
            }
            (Kind::Ids { .. }, Outcome::Ids(Err(e))) => refused(id, &e, metrics, out),
            (
                Kind::Numbers {
                    encode, segments, ..
                },
                Outcome::Numbers(Ok(ranges)),
            ) => {
                segments.issued(ranges.iter().map(|r| r.end - r.start).sum());
                encode(id, &ranges, out)
            }
            (Kind::Numbers { .. }, Outcome::Numbers(Err(e))) => {
                super::segment::refused(id, &e, metrics, out)
            }
            _ => {
                metrics.error(ErrorCode::Internal);
                Response::encode_error(id, ErrorCode::Internal, "answer of another kind", out)
            }
        }
    }
}

/// Issues `count` IDs through the connection's `flow`: answered now if nothing of this
/// connection waits and the unit has them, else queued in `pending` behind earlier requests.
pub(crate) fn issue<C: Clock>(
    ctx: &ServerContext<C>,
    flow: &Flow<C>,
    request_id: u32,
    count: u64,
    encode: EncodeIds,
    pending: &mut VecDeque<Pending>,
    out: &mut BytesMut,
) {
    let mut ids = flow.issue(count);
    let ready = if pending.is_empty() {
        ids.ready()
    } else {
        None
    };
    let p = Pending {
        request_id,
        kind: Kind::Ids { encode, ids },
    };
    match ready {
        Some(ready) => p.answer(Outcome::Ids(ready), &ctx.metrics, out),
        None => pending.push_back(p),
    }
}

/// Appends the error frame for an issuer's refusal, and counts it.
pub(super) fn refused(request_id: u32, e: &IssueError, metrics: &TcpMetrics, out: &mut BytesMut) {
    let code = ErrorCode::of_issue_error(e);
    metrics.error(code);
    Response::encode_error(request_id, code, &e.to_string(), out);
}

/// A context on a manual clock, and the single answer an op appended, for the ops' unit tests.
#[cfg(test)]
pub(super) mod testing {
    use std::sync::Arc;

    use bytes::BytesMut;
    use vesta_core::{GenMethod, IdType, ManualClock};
    use vesta_embed::{AsyncIssuer, Issuer, IssuerConfig};
    use vesta_service::ServerSection;

    use super::ServerContext;
    use crate::config::TcpSection;
    use crate::frame;
    use crate::proto::Response;

    /// A server context with static machine 930, layout `id_type` and `max_batch`, on a clock
    /// that stands still until the test moves it.
    pub(crate) fn context(
        id_type: IdType,
        max_batch: u32,
    ) -> (ServerContext<Arc<ManualClock>>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let mut config = IssuerConfig::default();
        config.id.id_type = Some(id_type);
        config.machine.id = Some(930);
        config.gen_method = GenMethod::Server;
        let issuer = Arc::new(Issuer::start_with_clock(config, clock.clone()).unwrap());
        clock.hold_waits(true);
        let limits = TcpSection {
            max_batch: u64::from(max_batch),
            ..TcpSection::default()
        };
        let ids = AsyncIssuer::new(issuer.clone(), limits.common().max_wait()).unwrap();
        let ctx = ServerContext {
            metrics: Arc::new(crate::metrics::TcpMetrics::new(&ids, None, 1)),
            ids,
            issuer,
            limits,
            segments: None,
        };
        (ctx, clock)
    }

    /// The one frame in `out`, parsed, with its request id; `out` must hold nothing else.
    pub(crate) fn answer(out: &mut BytesMut) -> (u32, Response) {
        let f = frame::decode(out, frame::MAX_MAX_FRAME_BYTES)
            .unwrap()
            .expect("a whole frame");
        assert!(out.is_empty(), "one frame only");
        (
            f.request_id,
            Response::parse(&f, &crate::proto::Dialect::v1()).unwrap(),
        )
    }
}
