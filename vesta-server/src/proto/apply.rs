//! What the server side of every op shares: the context an op's `apply` reads, and ID requests
//! whose IDs are on their way ([`Pending`]). An ID request is answered at once while the time
//! unit has sequence left; otherwise it waits on the issuer's waiting list (served fairly across
//! connections at each unit boundary) while the connection goes on answering other ops, and its
//! answer goes out in the order the connection asked.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::BytesMut;
use vesta_core::{Clock, IdBatch};
use vesta_embed::{AsyncIssuer, Flow, Issue, IssueError, Issuer};

use super::{ErrorCode, Response};
use crate::config::TcpSection;
use crate::metrics::TcpMetrics;

/// What every connection of a server shares, and every op's `apply` reads.
#[derive(Debug)]
pub(crate) struct ServerContext<C: Clock + 'static> {
    /// The issuer (genMethod server): explain, make, status.
    pub issuer: Arc<Issuer<C>>,
    /// The same issuer behind its waiting list; each connection issues through a flow of it.
    pub ids: AsyncIssuer<C>,
    /// Limits and listen address.
    pub limits: TcpSection,
    /// What the metrics listener exposes (and `INFO` reads connections from).
    pub metrics: Arc<TcpMetrics>,
}

/// Writes the answer of an ID op from its IDs.
pub(crate) type EncodeIds = fn(u32, &IdBatch, &mut BytesMut);

/// An ID request whose IDs are on their way, answered in the order the connection asked.
#[derive(Debug)]
pub(crate) struct Pending {
    request_id: u32,
    encode: EncodeIds,
    /// The IDs: arriving at a unit boundary, or already there behind earlier requests.
    pub ids: Issue,
}

impl Pending {
    /// Appends the answer (or the issuer's refusal) for `ids`, and counts it.
    pub(crate) fn answer(
        self,
        ids: Result<IdBatch, IssueError>,
        metrics: &TcpMetrics,
        out: &mut BytesMut,
    ) {
        match ids {
            Ok(batch) => {
                metrics.issued(batch.len());
                (self.encode)(self.request_id, &batch, out)
            }
            Err(e) => refused(self.request_id, &e, metrics, out),
        }
    }
}

/// Issues `count` IDs through the connection's `flow`: answered now if nothing of this
/// connection waits and the unit has them, else queued in `pending` behind earlier requests.
pub(crate) fn issue<C: Clock>(
    ctx: &ServerContext<C>,
    flow: &Flow<C>,
    request_id: u32,
    count: u64,
    encode: EncodeIds,
    pending: &mut VecDeque<Pending>,
    out: &mut BytesMut,
) {
    let mut ids = flow.issue(count);
    if pending.is_empty()
        && let Some(ready) = ids.ready()
    {
        let p = Pending {
            request_id,
            encode,
            ids,
        };
        return p.answer(ready, &ctx.metrics, out);
    }
    pending.push_back(Pending {
        request_id,
        encode,
        ids,
    });
}

/// Appends the error frame for an issuer's refusal, and counts it.
pub(super) fn refused(request_id: u32, e: &IssueError, metrics: &TcpMetrics, out: &mut BytesMut) {
    let code = ErrorCode::of_issue_error(e);
    metrics.error(code);
    Response::encode_error(request_id, code, &e.to_string(), out);
}

/// A context on a manual clock, and the single answer an op appended, for the ops' unit tests.
#[cfg(test)]
pub(super) mod testing {
    use std::sync::Arc;

    use bytes::BytesMut;
    use vesta_core::{GenMethod, IdType, ManualClock};
    use vesta_embed::{AsyncIssuer, Issuer, IssuerConfig};
    use vesta_service::ServerSection;

    use super::ServerContext;
    use crate::config::TcpSection;
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
        let issuer = Arc::new(Issuer::start_with_clock(config, clock.clone()).unwrap());
        clock.hold_waits(true);
        let limits = TcpSection {
            max_batch: u64::from(max_batch),
            ..TcpSection::default()
        };
        let ids = AsyncIssuer::new(issuer.clone(), limits.common().max_wait()).unwrap();
        let ctx = ServerContext {
            metrics: Arc::new(crate::metrics::TcpMetrics::new(&ids, 1)),
            ids,
            issuer,
            limits,
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
