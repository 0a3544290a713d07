//! `NEXT_IDS`: exactly `count` IDs as contiguous runs (one per time unit touched), issued without
//! blocking: what the current unit has is taken at once, the rest after the next unit starts.

use bytes::BytesMut;
use vesta_core::{Clock, GenError, IdRun};
use vesta_embed::IssueError;

use super::{Ctx, Outcome, Waiting, issue_error};
use crate::proto::{ErrorCode, Response};

/// Checks the count against the cap, then issues.
pub(crate) fn apply<C: Clock>(
    ctx: &Ctx<C>,
    request_id: u32,
    count: u32,
    out: &mut BytesMut,
) -> Outcome {
    let max = ctx.limits.max_batch;
    if count == 0 || count > max {
        let msg = format!("NEXT_IDS count {count} is out of range: allowed 1..={max}");
        Response::encode_error(request_id, ErrorCode::InvalidArgument, &msg, out);
        return Outcome::Done;
    }
    issue(ctx, request_id, u64::from(count), Vec::new(), out)
}

/// Issues `left` more IDs after `runs`; answers when all are there, parks otherwise. An error
/// midway answers the error: the runs already taken are dropped (gaps, never duplicates).
pub(crate) fn issue<C: Clock>(
    ctx: &Ctx<C>,
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
                return Outcome::Wait {
                    waiting: Waiting::Many {
                        request_id,
                        left,
                        runs,
                    },
                    wait_ms,
                };
            }
            Err(e) => {
                issue_error(request_id, &e, out);
                return Outcome::Done;
            }
        }
    }
    Response::encode_ids(request_id, &runs, out);
    Outcome::Done
}
