//! `NEXT_ID`: one ID, without ever blocking the connection's task: a used-up time unit parks the
//! request until the next one starts.

use bytes::BytesMut;
use vesta_core::{Clock, GenError};
use vesta_embed::IssueError;

use super::{Ctx, Outcome, Waiting, issue_error};
use crate::proto::Response;

/// Issues one ID, or parks the request when this unit's sequence is used up.
#[inline]
pub(crate) fn apply<C: Clock>(ctx: &Ctx<C>, request_id: u32, out: &mut BytesMut) -> Outcome {
    match ctx.issuer.try_next_id() {
        Ok(id) => {
            Response::encode_id(request_id, id, out);
            Outcome::Done
        }
        Err(IssueError::Refused(GenError::WouldBlock { wait_ms, .. })) => Outcome::Wait {
            waiting: Waiting::One { request_id },
            wait_ms,
        },
        Err(e) => {
            issue_error(request_id, &e, out);
            Outcome::Done
        }
    }
}
