//! One module per operation, each turning a parsed request into an answer appended to the
//! connection's write buffer (mini-redis's `cmd`). ID requests that find their time unit used up
//! come back as [`Outcome::Wait`] instead of blocking: the connection retries them after a timer.

pub(crate) mod explain;
pub(crate) mod hello;
pub(crate) mod info;
pub(crate) mod make;
pub(crate) mod next_id;
pub(crate) mod next_ids;
pub(crate) mod ping;
pub(crate) mod trans_time;

use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use bytes::BytesMut;
use vesta_core::{Clock, GenError, IdRun};
use vesta_embed::{IssueError, Issuer};

use crate::config::ServerSection;
use crate::proto::{ErrorCode, Response};

/// What every connection of a server shares.
#[derive(Debug)]
pub(crate) struct Ctx<C: Clock + 'static> {
    /// The issuer (genMethod server).
    pub issuer: Arc<Issuer<C>>,
    /// Limits and listen address.
    pub limits: ServerSection,
    /// Connections open now (for `INFO`).
    pub connections: AtomicU32,
}

/// An ID request parked until the next time unit.
#[derive(Debug)]
pub(crate) enum Waiting {
    /// `NEXT_ID`.
    One {
        /// Its request id.
        request_id: u32,
    },
    /// `NEXT_IDS`, with the runs issued so far.
    Many {
        /// Its request id.
        request_id: u32,
        /// IDs still to issue.
        left: u64,
        /// Runs issued so far.
        runs: Vec<IdRun>,
    },
}

/// What became of a request.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Answered (an answer or an error frame was appended).
    Done,
    /// Not answerable before the next time unit: retry after `wait_ms`.
    Wait {
        /// The parked request.
        waiting: Waiting,
        /// When to retry.
        wait_ms: u64,
    },
}

impl Waiting {
    /// Tries the parked request again.
    pub(crate) fn retry<C: Clock>(self, ctx: &Ctx<C>, out: &mut BytesMut) -> Outcome {
        match self {
            Waiting::One { request_id } => next_id::apply(ctx, request_id, out),
            Waiting::Many {
                request_id,
                left,
                runs,
            } => next_ids::issue(ctx, request_id, left, runs, out),
        }
    }
}

/// The error frame for an issuer refusal; `WouldBlock` never gets here (it is waited out).
pub(crate) fn issue_error(request_id: u32, e: &IssueError, out: &mut BytesMut) {
    let code = match e {
        IssueError::Unavailable(_) => ErrorCode::Unavailable,
        IssueError::Refused(g) => match g {
            GenError::ClockBehind { .. } => ErrorCode::ClockBehind,
            GenError::TimeOverflow { .. } => ErrorCode::TimeExhausted,
            GenError::BeforeEpoch { .. } => ErrorCode::BeforeEpoch,
            GenError::Fenced { .. } => ErrorCode::Unavailable,
            GenError::WouldBlock { .. } => ErrorCode::Internal,
        },
    };
    Response::encode_error(request_id, code, &e.to_string(), out);
}
