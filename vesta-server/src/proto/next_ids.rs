//! `NEXT_IDS` → `IDS`: exactly `count` IDs as contiguous runs (one per time unit touched), issued
//! without blocking: what the current unit has is taken at once, the rest after the next unit
//! starts. The count is checked against the server's cap here, and only here.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::{Clock, GenError, IdRun};
use vesta_embed::IssueError;

use super::apply::refused;
use super::{ErrorCode, Outcome, ParseError, Request, Response, ServerContext, Waiting, exact, op};
use crate::frame;

/// `NEXT_IDS`: count u32.
const REQUEST_LEN: usize = 4;
/// `IDS` starts with run_count u16 ...
const RUN_COUNT_LEN: usize = 2;
/// ... then run_count × (first u64, count u32).
const RUN_LEN: usize = 8 + 4;

/// Bytes of an `IDS` payload with `runs` runs.
pub const fn ids_payload_len(runs: usize) -> usize {
    RUN_COUNT_LEN + runs * RUN_LEN
}

pub(super) fn parse_request(payload: &Bytes) -> Result<Request, ParseError> {
    let mut b = exact("NEXT_IDS", payload, REQUEST_LEN)?;
    Ok(Request::NextIds { count: b.get_u32() })
}

pub(super) fn encode_request(request_id: u32, count: u32, out: &mut BytesMut) {
    frame::put_header(out, op::NEXT_IDS, request_id, REQUEST_LEN);
    out.put_u32(count);
}

pub(super) fn encode_answer(request_id: u32, runs: &[IdRun], out: &mut BytesMut) {
    let len = ids_payload_len(runs.len());
    frame::put_header(out, op::NEXT_IDS | op::ANSWER, request_id, len);
    out.put_u16(runs.len() as u16);
    for r in runs {
        out.put_u64(r.first);
        out.put_u32(r.count as u32);
    }
}

pub(super) fn parse_answer(payload: &Bytes) -> Result<Response, ParseError> {
    let bad = |expected: String| ParseError::BadLength {
        name: "IDS",
        expected,
        got: payload.len(),
    };
    if payload.len() < RUN_COUNT_LEN {
        return Err(bad(format!("{RUN_COUNT_LEN} + {RUN_LEN} * run_count")));
    }
    let mut b = payload.clone();
    let n = b.get_u16() as usize;
    if payload.len() != ids_payload_len(n) {
        return Err(bad(ids_payload_len(n).to_string()));
    }
    let runs = (0..n)
        .map(|_| IdRun {
            first: b.get_u64(),
            count: u64::from(b.get_u32()),
        })
        .collect();
    Ok(Response::Ids(runs))
}

/// Checks the count against the cap (0 or above it: `INVALID_ARGUMENT`), then issues, or queues
/// the request behind the connection's parked ID requests (`after_parked`) so a connection's
/// IDs come in order.
pub(crate) fn apply<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    count: u32,
    after_parked: bool,
    out: &mut BytesMut,
) -> Outcome {
    let max = ctx.limits.max_batch;
    if count == 0 || count > max {
        let msg = format!("NEXT_IDS count {count} is out of range: allowed 1..={max}");
        Response::encode_error(request_id, ErrorCode::InvalidArgument, &msg, out);
        return Outcome::Done;
    }
    let (left, runs) = (u64::from(count), Vec::new());
    if after_parked {
        return Outcome::Queued(Waiting::Many {
            request_id,
            left,
            runs,
        });
    }
    issue(ctx, request_id, left, runs, out)
}

/// Issues `left` more IDs after `runs`; answers when all are there, parks otherwise. An error
/// midway answers the error: the runs already taken are dropped (gaps, never duplicates).
pub(crate) fn issue<C: Clock>(
    ctx: &ServerContext<C>,
    request_id: u32,
    mut left: u64,
    mut runs: Vec<IdRun>,
    out: &mut BytesMut,
) -> Outcome {
    while left > 0 {
        match ctx.issuer.try_next_ids(left) {
            Ok(batch) => {
                left -= batch.len();
                runs.extend_from_slice(batch.runs());
            }
            Err(IssueError::Refused(GenError::WouldBlock { wait_ms, .. })) => {
                let waiting = Waiting::Many {
                    request_id,
                    left,
                    runs,
                };
                return Outcome::Wait { waiting, wait_ms };
            }
            Err(e) => return refused(request_id, &e, out),
        }
    }
    encode_answer(request_id, &runs, out);
    Outcome::Done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::apply::testing::{answer, context};
    use vesta_core::IdType;

    #[test]
    fn a_count_of_zero_or_above_the_cap_is_refused_whether_or_not_requests_are_parked() {
        let (ctx, _clock) = context(IdType::MaxPeak, 10);
        for after_parked in [false, true] {
            for count in [0, 11] {
                let mut out = BytesMut::new();
                let outcome = apply(&ctx, 7, count, after_parked, &mut out);
                assert!(matches!(outcome, Outcome::Done), "{outcome:?}");
                let message = format!("NEXT_IDS count {count} is out of range: allowed 1..=10");
                let code = ErrorCode::InvalidArgument;
                assert_eq!(answer(&mut out), (7, Response::Error { code, message }));
            }
        }
    }

    #[test]
    fn a_valid_count_behind_parked_requests_is_queued_unissued() {
        let (ctx, _clock) = context(IdType::MaxPeak, 10);
        let mut out = BytesMut::new();
        let outcome = apply(&ctx, 7, 10, true, &mut out);
        let Outcome::Queued(Waiting::Many {
            request_id,
            left,
            runs,
        }) = outcome
        else {
            panic!("not queued: {outcome:?}");
        };
        assert_eq!((request_id, left, runs.len()), (7, 10, 0));
        assert!(out.is_empty());
        let first = ctx.issuer.try_next_id().unwrap();
        assert_eq!(
            vesta_core::IdFields::decode(first).seq,
            0,
            "nothing was issued before"
        );
    }

    #[test]
    fn a_batch_larger_than_the_unit_parks_and_finishes_in_the_next_unit() {
        // Min-granularity: 1024 IDs per millisecond, and the manual clock stands still.
        let (ctx, clock) = context(IdType::MinGranularity, 1500);
        let mut out = BytesMut::new();
        let outcome = apply(&ctx, 7, 1500, false, &mut out);
        let Outcome::Wait { waiting, wait_ms } = outcome else {
            panic!("not parked: {outcome:?}");
        };
        let Waiting::Many { left, runs, .. } = &waiting else {
            panic!("not a batch: {waiting:?}");
        };
        assert_eq!(
            (*left, runs.iter().map(|r| r.count).sum::<u64>()),
            (476, 1024)
        );
        assert!(wait_ms >= 1 && out.is_empty(), "nothing answered yet");

        clock.advance(wait_ms);
        assert!(matches!(waiting.retry(&ctx, &mut out), Outcome::Done));
        let (7, Response::Ids(runs)) = answer(&mut out) else {
            panic!("not IDS");
        };
        let ids: Vec<u64> = runs.iter().flat_map(|r| r.iter()).collect();
        assert_eq!(ids.len(), 1500);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing");
    }
}
