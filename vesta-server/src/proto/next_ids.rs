//! `NEXT_IDS` → `IDS`: exactly `count` IDs as contiguous runs (one per time unit touched), issued
//! without blocking: what the current unit has is taken at once, the rest at later unit
//! boundaries, in turns with other connections. The count is checked against the server's cap
//! here, and only here.

#[cfg(feature = "server")]
use std::collections::VecDeque;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::IdRun;
#[cfg(feature = "server")]
use vesta_core::{Clock, IdBatch};
#[cfg(feature = "server")]
use vesta_embed::Flow;

#[cfg(feature = "server")]
use super::ErrorCode;
#[cfg(feature = "server")]
use super::apply::{self, Pending, ServerContext};
use super::{Dialect, ParseError, Request, Response, exact, op};
use crate::frame;

/// `NEXT_IDS`: count u32.
const REQUEST_LEN: usize = 4;
/// `IDS` starts with run_count u16 ...
const RUN_COUNT_LEN: usize = 2;
/// ... then run_count × (first u64, count u32).
const RUN_LEN: usize = 8 + 4;

/// Bytes of an `IDS` payload with `runs` runs.
pub(crate) const fn ids_payload_len(runs: usize) -> usize {
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

pub(super) fn parse_answer(payload: &Bytes, dialect: &Dialect) -> Result<Response, ParseError> {
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
    let mut runs = Vec::with_capacity(n);
    for i in 0..n {
        let first = b.get_u64();
        let count = u64::from(b.get_u32());
        runs.push(checked_run(i, first, count, dialect)?);
    }
    Ok(Response::Ids(runs))
}

/// A run must hold at least one ID and stay in the time unit of its first ID (consecutive
/// sequence numbers up to the layout's last): otherwise "the k-th ID is `first + k * step`"
/// would carry the sequence into the next field and hand out IDs the server never issued.
/// The step is the layout's (1024 in Vesta's, 1 where the sequence is the lowest field).
fn checked_run(
    index: usize,
    first: u64,
    count: u64,
    dialect: &Dialect,
) -> Result<IdRun, ParseError> {
    let layout = dialect.layout.for_id(first);
    let seq = layout.seq_span().get(first);
    let max_seq = layout.max_seq();
    let run = IdRun {
        first,
        count,
        step: layout.seq_step(),
    };
    if run.count == 0 || seq + (run.count - 1) > max_seq {
        return Err(ParseError::BadValue {
            name: "IDS",
            reason: format!(
                "run {index} (first {}, count {}) must hold 1..={} IDs: its first has sequence \
                 {} of 0..={max_seq}, and a run never leaves its time unit",
                run.first,
                run.count,
                max_seq + 1 - seq,
                seq
            ),
        });
    }
    Ok(run)
}

#[cfg(feature = "server")]
/// Checks the count against the cap (0 or above it: `INVALID_ARGUMENT`), then issues through
/// the connection's flow: answered now, or queued behind the connection's waiting requests
/// until unit boundaries bring all `count` IDs.
pub(crate) fn apply<C: Clock>(
    ctx: &ServerContext<C>,
    flow: &Flow<C>,
    request_id: u32,
    count: u32,
    pending: &mut VecDeque<Pending>,
    out: &mut BytesMut,
) {
    let max_batch = ctx.limits.max_batch;
    if count == 0 || u64::from(count) > max_batch {
        let msg = format!("NEXT_IDS count {count} is out of range: allowed 1..={max_batch}");
        ctx.metrics.error(ErrorCode::InvalidArgument);
        return Response::encode_error(request_id, ErrorCode::InvalidArgument, &msg, out);
    }
    let count = u64::from(count);
    apply::issue(ctx, flow, request_id, count, encode_batch, pending, out);
}

#[cfg(feature = "server")]
fn encode_batch(request_id: u32, batch: &IdBatch, out: &mut BytesMut) {
    encode_answer(request_id, batch.runs(), out);
}

#[cfg(all(test, feature = "server"))]
mod tests {
    use super::*;
    use crate::proto::apply::testing::{answer, context};
    use vesta_core::IdType;

    #[tokio::test]
    async fn a_count_of_zero_or_above_the_cap_is_refused_whether_or_not_requests_wait() {
        let (ctx, clock) = context(IdType::MinGranularity, 10);
        let flow = ctx.ids.flow();
        ctx.issuer.try_next_ids(1024).unwrap();
        let mut waiting = VecDeque::new();
        let mut out = BytesMut::new();
        apply(&ctx, &flow, 1, 5, &mut waiting, &mut out);
        assert_eq!(waiting.len(), 1, "the unit is used up: it waits");
        for pending in [VecDeque::new(), waiting] {
            let mut pending = pending;
            let before = pending.len();
            for count in [0, 11] {
                apply(&ctx, &flow, 7, count, &mut pending, &mut out);
                let message = format!("NEXT_IDS count {count} is out of range: allowed 1..=10");
                let code = ErrorCode::InvalidArgument;
                assert_eq!(answer(&mut out), (7, Response::Error { code, message }));
                assert_eq!(pending.len(), before, "nothing queued");
            }
        }
        clock.advance(1);
    }

    #[tokio::test]
    async fn a_batch_larger_than_the_unit_waits_and_finishes_in_the_next_unit() {
        // Min-granularity: 1024 IDs per millisecond, and the manual clock stands still.
        let (ctx, clock) = context(IdType::MinGranularity, 1500);
        let flow = ctx.ids.flow();
        let (mut pending, mut out) = (VecDeque::new(), BytesMut::new());
        apply(&ctx, &flow, 7, 1500, &mut pending, &mut out);
        assert!(out.is_empty() && pending.len() == 1, "nothing answered yet");
        clock.advance(1);
        let mut p = pending.pop_front().unwrap();
        let ids = p.outcome().await;
        p.answer(ids, &ctx.metrics, &mut out);
        let (7, Response::Ids(runs)) = answer(&mut out) else {
            panic!("not IDS");
        };
        assert_eq!(runs.len(), 2, "one run per unit");
        let ids: Vec<u64> = runs.iter().flat_map(|r| r.iter()).collect();
        assert_eq!(ids.len(), 1500);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing");
    }
}
