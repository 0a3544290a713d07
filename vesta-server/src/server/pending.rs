//! Requests whose answer is on its way ([`Pending`]), kept by their connection in the order
//! they came: ID requests waiting for a unit boundary, segment requests waiting for the store,
//! and answers that were there at once but come after those. The connection answers the
//! first as soon as it is there, then every following one that is there too.

use std::future::{Future, poll_fn};
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use vesta_core::IdBatch;
use vesta_service::ops::{IdsLater, Later, SeqNumbers};
use vesta_service::{Answer, OpError};

use super::refusal;
use crate::metrics::TcpMetrics;
use crate::proto::{Response, op};

/// A request whose answer is on its way, answered in the order the connection asked.
pub(crate) struct Pending {
    request_id: u32,
    /// The request's op: how its answer is written (`ID` or `IDS`) and named in an error.
    op: u8,
    kind: Kind,
}

enum Kind {
    /// IDs arriving at a unit boundary.
    Ids(IdsLater),
    /// A segment number arriving with a segment.
    Number(Later<u64>),
    /// Segment numbers arriving with a segment.
    Numbers(Later<Vec<Range<u64>>>),
    /// A key's numbers arriving with its section's load or raise.
    Seq(Later<SeqNumbers>),
    /// There at once, behind earlier requests.
    Done(Option<Outcome>),
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Ids(_) => "ids",
            Kind::Number(_) => "number",
            Kind::Numbers(_) => "numbers",
            Kind::Seq(_) => "seq",
            Kind::Done(_) => "done",
        };
        write!(f, "Pending({}, {kind})", self.request_id)
    }
}

/// What a request got.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// IDs, or the issuer's refusal.
    Ids(Result<IdBatch, OpError>),
    /// A segment number or a key's current number, or the store's refusal.
    Number(Result<u64, OpError>),
    /// Segment numbers, or the store's refusal.
    Numbers(Result<Vec<Range<u64>>, OpError>),
    /// A key's numbers, or the sequences' refusal.
    Seq(Result<SeqNumbers, OpError>),
}

impl Pending {
    /// The ID request `request_id` of `op` (`NEXT_ID`, `NEXT_IDS`).
    pub(crate) fn ids(request_id: u32, op: u8, answer: Answer<IdBatch, IdsLater>) -> Pending {
        Self::of(request_id, op, answer, Outcome::Ids, Kind::Ids)
    }

    /// The `SEGMENT` or `SEQ_CURRENT` (`op`) request `request_id`.
    pub(crate) fn number(request_id: u32, op: u8, answer: Answer<u64>) -> Pending {
        Self::of(request_id, op, answer, Outcome::Number, Kind::Number)
    }

    /// The `SEQ_NEXT` request `request_id`.
    pub(crate) fn seq(request_id: u32, answer: Answer<SeqNumbers>) -> Pending {
        Self::of(request_id, op::SEQ_NEXT, answer, Outcome::Seq, Kind::Seq)
    }

    /// The `SEGMENTS` request `request_id`.
    pub(crate) fn numbers(request_id: u32, answer: Answer<Vec<Range<u64>>>) -> Pending {
        Self::of(
            request_id,
            op::SEGMENTS,
            answer,
            Outcome::Numbers,
            Kind::Numbers,
        )
    }

    /// A request whose `answer` is there (`outcome`) or on its way (`waiting`).
    fn of<T, L>(
        request_id: u32,
        op: u8,
        answer: Answer<T, L>,
        outcome: fn(Result<T, OpError>) -> Outcome,
        waiting: fn(L) -> Kind,
    ) -> Pending {
        let kind = match answer {
            Answer::Now(r) => Kind::Done(Some(outcome(r))),
            Answer::Later(later) => waiting(later),
        };
        Pending {
            request_id,
            op,
            kind,
        }
    }

    /// Its outcome, once there.
    pub(crate) async fn outcome(&mut self) -> Outcome {
        poll_fn(|cx| self.poll_outcome(cx)).await
    }

    fn poll_outcome(&mut self, cx: &mut Context<'_>) -> Poll<Outcome> {
        match &mut self.kind {
            Kind::Ids(ids) => Pin::new(ids).poll(cx).map(Outcome::Ids),
            Kind::Number(n) => Pin::new(n).poll(cx).map(Outcome::Number),
            Kind::Numbers(n) => Pin::new(n).poll(cx).map(Outcome::Numbers),
            Kind::Seq(n) => Pin::new(n).poll(cx).map(Outcome::Seq),
            Kind::Done(o) => match o.take() {
                Some(o) => Poll::Ready(o),
                None => Poll::Ready(Outcome::Ids(Err(OpError::internal(
                    "an answer was taken twice",
                )))),
            },
        }
    }

    /// Its outcome if it is there, without waiting.
    pub(crate) fn try_take(&mut self) -> Option<Outcome> {
        match &mut self.kind {
            Kind::Ids(ids) => ids.try_take().map(Outcome::Ids),
            Kind::Number(n) => n.try_take().map(Outcome::Number),
            Kind::Numbers(n) => n.try_take().map(Outcome::Numbers),
            Kind::Seq(n) => n.try_take().map(Outcome::Seq),
            Kind::Done(o) => o.take(),
        }
    }

    /// Appends the answer (or the refusal) for `outcome`.
    pub(crate) fn answer(self, outcome: Outcome, metrics: &TcpMetrics, out: &mut BytesMut) {
        answer(self.request_id, self.op, outcome, metrics, out);
    }
}

/// Appends the answer of request `request_id` of `op` for `outcome`, or its refusal.
#[inline]
pub(crate) fn answer(
    request_id: u32,
    op: u8,
    outcome: Outcome,
    metrics: &TcpMetrics,
    out: &mut BytesMut,
) {
    let refused = match outcome {
        Outcome::Ids(Ok(batch)) if op == op::NEXT_ID => match batch.iter().next() {
            Some(id) => return Response::encode_id(request_id, id, out),
            None => OpError::internal("the issuer answered no ID"),
        },
        Outcome::Ids(Ok(batch)) => return Response::encode_ids(request_id, batch.runs(), out),
        Outcome::Number(Ok(n)) if op == op::SEQ_CURRENT => {
            return Response::encode_seq_current(request_id, n, out);
        }
        Outcome::Number(Ok(n)) => return Response::encode_number(request_id, n, out),
        Outcome::Numbers(Ok(ranges)) => {
            return Response::encode_numbers(request_id, &ranges, out);
        }
        // A call's count is at most the step, which a u32 count on the wire bounds.
        Outcome::Seq(Ok(n)) => match u32::try_from(n.count) {
            Ok(count) => return Response::encode_seq(request_id, n.last, count, out),
            Err(_) => OpError::internal("a sequence call took more numbers than it asked"),
        },
        Outcome::Ids(Err(e))
        | Outcome::Number(Err(e))
        | Outcome::Numbers(Err(e))
        | Outcome::Seq(Err(e)) => e,
    };
    refusal::refuse(request_id, op, &refused, metrics, out);
}
