//! `NEXT_IDS` → `IDS`: a count, and exactly that many IDs as contiguous runs (one per time
//! unit touched). A run that would leave its time unit is refused on parse: a broken server's
//! answer is never handed on as IDs.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use vesta_core::IdRun;

use super::{Dialect, ParseError, Request, Response, exact, op};
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
