//! `NEXT_ID` → `ID`: one ID, without ever blocking the connection's task: a used-up time unit
//! queues the request until a unit boundary serves it. The hot path of the protocol.

#[cfg(feature = "server")]
use std::collections::VecDeque;

use bytes::{Buf, BufMut, Bytes, BytesMut};
#[cfg(feature = "server")]
use vesta_core::{Clock, IdBatch};
#[cfg(feature = "server")]
use vesta_embed::Flow;

#[cfg(feature = "server")]
use super::ErrorCode;
#[cfg(feature = "server")]
use super::apply::{self, Pending, ServerContext};
use super::{ParseError, Request, Response, exact, op};
use crate::frame;

/// `ID`: id u64 (the request is empty).
const ANSWER_LEN: usize = 8;

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    exact("NEXT_ID", payload, 0)?;
    Ok(Request::NextId)
}

pub(super) fn encode_request(request_id: u32, out: &mut BytesMut) {
    frame::put_header(out, op::NEXT_ID, request_id, 0);
}

#[inline]
pub(super) fn encode_answer(request_id: u32, id: u64, out: &mut BytesMut) {
    frame::put_header(out, op::NEXT_ID | op::ANSWER, request_id, ANSWER_LEN);
    out.put_u64(id);
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let mut b = exact("ID", payload, ANSWER_LEN)?;
    Ok(Response::Id(b.get_u64()))
}

#[cfg(feature = "server")]
/// Issues one ID through the connection's flow: answered now, or queued behind the
/// connection's waiting requests (in order) until a unit boundary brings it.
#[inline]
pub(crate) fn apply<C: Clock>(
    ctx: &ServerContext<C>,
    flow: &Flow<C>,
    request_id: u32,
    pending: &mut VecDeque<Pending>,
    out: &mut BytesMut,
) {
    apply::issue(ctx, flow, request_id, 1, encode_batch, pending, out);
}

#[cfg(feature = "server")]
/// The `ID` answer from a batch of one.
fn encode_batch(request_id: u32, batch: &IdBatch, out: &mut BytesMut) {
    match batch.iter().next() {
        Some(id) => encode_answer(request_id, id, out),
        None => Response::encode_error(
            request_id,
            ErrorCode::Internal,
            "the issuer answered no ID",
            out,
        ),
    }
}

#[cfg(all(test, feature = "server"))]
mod tests {
    use super::*;
    use crate::proto::apply::testing::{answer, context};
    use vesta_core::{IdFields, IdType};

    #[tokio::test]
    async fn answered_at_once_while_the_unit_has_room() {
        let (ctx, _clock) = context(IdType::MaxPeak, 10);
        let flow = ctx.ids.flow();
        let (mut pending, mut out) = (VecDeque::new(), BytesMut::new());
        apply(&ctx, &flow, 3, &mut pending, &mut out);
        assert!(pending.is_empty());
        let (3, Response::Id(id)) = answer(&mut out) else {
            panic!("not ID");
        };
        assert_eq!(IdFields::decode(id).machine, 930);
    }

    #[tokio::test]
    async fn a_used_up_unit_queues_it_until_the_next_unit() {
        // Min-granularity: 1024 IDs per millisecond, and the manual clock stands still.
        let (ctx, clock) = context(IdType::MinGranularity, 1024);
        let batch = ctx.issuer.try_next_ids(1024).unwrap();
        assert_eq!(batch.len(), 1024);
        let flow = ctx.ids.flow();
        let (mut pending, mut out) = (VecDeque::new(), BytesMut::new());
        apply(&ctx, &flow, 3, &mut pending, &mut out);
        assert!(out.is_empty() && pending.len() == 1, "nothing answered yet");
        // A later request of the same connection queues behind it.
        apply(&ctx, &flow, 4, &mut pending, &mut out);
        assert_eq!(pending.len(), 2);

        clock.advance(1);
        for expected in [3, 4] {
            let mut p = pending.pop_front().unwrap();
            let ids = p.outcome().await;
            p.answer(ids, &ctx.metrics, &mut out);
            let (id, Response::Id(x)) = answer(&mut out) else {
                panic!("not ID");
            };
            assert_eq!(id, expected);
            assert!(x > batch.runs()[0].first, "after the batch");
        }
    }
}
