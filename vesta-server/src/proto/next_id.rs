//! `NEXT_ID` → `ID`: one ID, without ever blocking the connection's task: a used-up time unit
//! parks the request until the next one starts. The hot path of the protocol.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{Clock, GenError};
use vesta_embed::IssueError;

use super::apply::refused;
use super::{Outcome, ParseError, Request, Response, ServerContext, Waiting, exact, op};
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

/// Issues one ID, or queues the request behind the connection's parked ID requests
/// (`after_parked`), so a connection's IDs come in order.
#[inline]
pub(crate) fn apply<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    after_parked: bool,
    out: &mut BytesMut,
) -> Outcome {
    if after_parked {
        return Outcome::Queued(Waiting::One { request_id });
    }
    issue(ctx, request_id, out)
}

/// Issues one ID, or parks the request when this unit's sequence is used up.
#[inline]
pub(crate) fn issue<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    out: &mut BytesMut,
) -> Outcome {
    match ctx.issuer.try_next_id() {
        Ok(id) => {
            encode_answer(request_id, id, out);
            Outcome::Done
        }
        Err(IssueError::Refused(GenError::WouldBlock { wait_ms, .. })) => Outcome::Wait {
            waiting: Waiting::One { request_id },
            wait_ms,
        },
        Err(e) => refused(request_id, &e, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::apply::testing::{answer, context};
    use vesta_core::{IdFields, IdType};

    #[test]
    fn behind_parked_requests_it_is_queued_unissued() {
        let (ctx, _clock) = context(IdType::MaxPeak, 10);
        let mut out = BytesMut::new();
        let outcome = apply(&ctx, 3, true, &mut out);
        assert!(
            matches!(outcome, Outcome::Queued(Waiting::One { request_id: 3 })),
            "{outcome:?}"
        );
        assert!(out.is_empty());
    }

    #[test]
    fn a_used_up_unit_parks_it_until_the_next_unit() {
        // Min-granularity: 1024 IDs per millisecond, and the manual clock stands still.
        let (ctx, clock) = context(IdType::MinGranularity, 1024);
        let batch = ctx.issuer.try_next_ids(1024).unwrap();
        assert_eq!(batch.len(), 1024);
        let mut out = BytesMut::new();
        let Outcome::Wait { waiting, wait_ms } = apply(&ctx, 3, false, &mut out) else {
            panic!("not parked");
        };
        assert!(wait_ms >= 1 && out.is_empty(), "nothing answered yet");

        clock.advance(wait_ms);
        assert!(matches!(waiting.retry(&ctx, &mut out), Outcome::Done));
        let (3, Response::Id(id)) = answer(&mut out) else {
            panic!("not ID");
        };
        let last = batch.runs().last().unwrap();
        assert!(id > last.first, "after the batch");
        assert_eq!(IdFields::decode(id).seq, 0, "first of the next unit");
    }
}
