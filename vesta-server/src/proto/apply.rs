//! What the server side of every op shares: the context an op's `apply` reads, what became of a
//! request ([`Outcome`]), and ID requests parked until the next time unit ([`Waiting`]). ID
//! requests that find their unit used up are parked instead of blocking: the connection retries
//! them after a timer while it goes on answering other ops.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use bytes::BytesMut;
use vesta_core::{Clock, IdRun};
use vesta_embed::{IssueError, Issuer};

use super::{ErrorCode, Response, next_id, next_ids};
use crate::config::ServerSection;

/// What every connection of a server shares, and every op's `apply` reads.
#[derive(Debug)]
pub(crate) struct ServerContext<C: Clock + 'static> {
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
    /// First in line but not answerable before the next time unit: park it at the front and
    /// retry after `wait_ms`.
    Wait {
        /// The parked request.
        waiting: Waiting,
        /// When to retry.
        wait_ms: u64,
    },
    /// ID requests of this connection are parked already: park this one behind them, so a
    /// connection's IDs come in the order they were asked for.
    Queued(Waiting),
}

impl Waiting {
    /// Tries the parked request again: answered, or parked again first in line (never
    /// `Queued`: it is the first of the line).
    pub(crate) fn retry<C: Clock>(self, ctx: &ServerContext<C>, out: &mut BytesMut) -> Outcome {
        match self {
            Waiting::One { request_id } => next_id::issue(ctx, request_id, out),
            Waiting::Many {
                request_id,
                left,
                runs,
            } => next_ids::issue(ctx, request_id, left, runs, out),
        }
    }
}

/// Appends the error frame for an issuer's refusal and answers the request with it.
pub(super) fn refused(request_id: u32, e: &IssueError, out: &mut BytesMut) -> Outcome {
    let code = ErrorCode::of_issue_error(e);
    Response::encode_error(request_id, code, &e.to_string(), out);
    Outcome::Done
}

/// A context on a manual clock, and the single answer an op appended, for the ops' unit tests.
#[cfg(test)]
pub(super) mod testing {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;

    use bytes::BytesMut;
    use vesta_core::{GenMethod, IdType, ManualClock};
    use vesta_embed::{Issuer, IssuerConfig};

    use super::ServerContext;
    use crate::config::ServerSection;
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
        config.id.id_type = id_type;
        config.machine.id = Some(930);
        config.gen_method = GenMethod::Server;
        let issuer = Issuer::start_with_clock(config, clock.clone()).unwrap();
        let limits = ServerSection {
            max_batch,
            ..ServerSection::default()
        };
        let ctx = ServerContext {
            issuer: Arc::new(issuer),
            limits,
            connections: AtomicU32::new(0),
        };
        (ctx, clock)
    }

    /// The one frame in `out`, parsed, with its request id; `out` must hold nothing else.
    pub(crate) fn answer(out: &mut BytesMut) -> (u32, Response) {
        let f = frame::decode(out, frame::MAX_MAX_FRAME_BYTES)
            .unwrap()
            .expect("a whole frame");
        assert!(out.is_empty(), "one frame only");
        (f.request_id, Response::parse(&f).unwrap())
    }
}
