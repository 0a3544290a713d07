//! vesta.v1's methods, each the vesta-service op of the same name with its answer or refusal
//! mapped ([`status`](super::status)): the REST endpoints' behaviour, over gRPC. Waits (a
//! used-up time unit, an empty segment buffer) end at the call's deadline, if it is sooner
//! than the server's own bound.

use std::future::Future;
use std::sync::Arc;

use tonic::{Request, Response, Status};
use vesta_core::{Clock, IdBatch};
use vesta_embed::Flow;
use vesta_service::{Answer, OpError, Service, Turn};

use super::stream::IdStream;
use super::{deadline, status};
use crate::pb::{self, vesta_server::Vesta};

/// The vesta.v1 service of one connection: the server's ops and the connection's share of
/// the issuer (it takes turns with other connections as a REST or TCP connection does).
pub struct Ops<C: Clock + 'static> {
    service: Arc<Service<C>>,
    flow: Flow<C>,
}

impl<C: Clock + 'static> Ops<C> {
    pub fn new(service: Arc<Service<C>>, flow: Flow<C>) -> Self {
        Ops { service, flow }
    }

    /// `count` IDs, waiting at most until the call's deadline.
    async fn ids<T>(&self, req: &Request<T>, count: u64) -> Result<IdBatch, Status> {
        answered(req, self.service.ids(&self.flow, count)).await
    }
}

/// An op's `answer`, now or once it comes (at most until the deadline `req` carries), its
/// refusal mapped: the one place a gRPC method turns "now or later" into a result.
async fn answered<T, V, L>(req: &Request<T>, answer: Answer<V, L>) -> Result<V, Status>
where
    L: Future<Output = Result<V, OpError>>,
{
    match answer {
        Answer::Now(r) => r.map_err(|e| status::of(&e)),
        Answer::Later(later) => until_deadline(req, later).await,
    }
}

/// `answer`, or DEADLINE_EXCEEDED at the deadline `req` carries (dropping `answer` takes
/// nothing: a waiting ID request leaves the queue unissued).
async fn until_deadline<T, V>(
    req: &Request<T>,
    answer: impl Future<Output = Result<V, OpError>>,
) -> Result<V, Status> {
    let r = match deadline::of(req.metadata()) {
        Some(at) => tokio::time::timeout_at(at, answer)
            .await
            .map_err(|_| Status::deadline_exceeded("the call's deadline passed while waiting"))?,
        None => answer.await,
    };
    r.map_err(|e| status::of(&e))
}

#[tonic::async_trait]
impl<C: Clock + 'static> Vesta for Ops<C> {
    async fn next_id(
        &self,
        req: Request<pb::NextIdRequest>,
    ) -> Result<Response<pb::NextIdResponse>, Status> {
        let batch = self.ids(&req, 1).await?;
        let id = batch
            .iter()
            .next()
            .ok_or_else(|| Status::internal("no ID"))?;
        Ok(Response::new(pb::NextIdResponse {
            id,
            id_text: id.to_string(),
        }))
    }

    async fn next_ids(
        &self,
        req: Request<pb::NextIdsRequest>,
    ) -> Result<Response<pb::NextIdsResponse>, Status> {
        let count = req.get_ref().count;
        let batch = self.ids(&req, count).await?;
        Ok(Response::new(pb::NextIdsResponse {
            ids: batch.to_vec(),
        }))
    }

    type StreamIdsStream = IdStream<C>;

    async fn stream_ids(
        &self,
        req: Request<pb::StreamIdsRequest>,
    ) -> Result<Response<Self::StreamIdsStream>, Status> {
        let stream = IdStream::new(
            Arc::clone(&self.service),
            self.flow.clone(),
            req.get_ref().count,
            deadline::of(req.metadata()),
        )?;
        Ok(Response::new(stream))
    }

    async fn explain(
        &self,
        req: Request<pb::ExplainRequest>,
    ) -> Result<Response<pb::ExplainResponse>, Status> {
        let x = self.service.explain(req.get_ref().id);
        Ok(Response::new(pb::ExplainResponse {
            id: x.id,
            id_text: x.id.to_string(),
            layout: x.layout().name().to_owned(),
            fields: x
                .values()
                .into_iter()
                .map(|(name, value)| pb::Field {
                    name: name.to_owned(),
                    value,
                })
                .collect(),
            unix_ms: x.unix_ms,
            timestamp: x.timestamp(),
            warning: x.warning().unwrap_or_default(),
        }))
    }

    async fn make(
        &self,
        req: Request<pb::MakeRequest>,
    ) -> Result<Response<pb::MakeResponse>, Status> {
        let id = self
            .service
            .make_from_fields(&req.get_ref().fields)
            .map_err(|e| status::of(&e))?;
        Ok(Response::new(pb::MakeResponse {
            id,
            id_text: id.to_string(),
        }))
    }

    async fn trans_time(
        &self,
        req: Request<pb::TransTimeRequest>,
    ) -> Result<Response<pb::TransTimeResponse>, Status> {
        let at = self
            .service
            .trans_time(req.get_ref().time)
            .map_err(|e| status::of(&e))?;
        Ok(Response::new(pb::TransTimeResponse {
            unix_ms: u64::try_from(at.timestamp_millis()).unwrap_or_default(),
            timestamp: at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }))
    }

    async fn segment(
        &self,
        req: Request<pb::SegmentRequest>,
    ) -> Result<Response<pb::SegmentResponse>, Status> {
        let number = self.service.segment_number(&req.get_ref().tag, Turn::Now);
        let number = answered(&req, number).await?;
        Ok(Response::new(pb::SegmentResponse { number }))
    }

    async fn segments(
        &self,
        req: Request<pb::SegmentsRequest>,
    ) -> Result<Response<pb::SegmentsResponse>, Status> {
        let r = req.get_ref();
        let ranges = answered(
            &req,
            self.service
                .segment_numbers(&r.tag, r.count, None, Turn::Now),
        )
        .await?;
        Ok(Response::new(pb::SegmentsResponse {
            numbers: ranges.into_iter().flatten().collect(),
        }))
    }

    async fn seq_next(
        &self,
        req: Request<pb::SeqNextRequest>,
    ) -> Result<Response<pb::SeqNextResponse>, Status> {
        let r = req.get_ref();
        let count = r.count.unwrap_or(1);
        let numbers = answered(
            &req,
            self.service.seq_next(r.key.as_bytes(), count, Turn::Now),
        )
        .await?;
        let (first, last) = (numbers.first(), numbers.last);
        Ok(Response::new(pb::SeqNextResponse {
            first,
            last,
            first_text: first.to_string(),
            last_text: last.to_string(),
        }))
    }

    async fn seq_current(
        &self,
        req: Request<pb::SeqCurrentRequest>,
    ) -> Result<Response<pb::SeqCurrentResponse>, Status> {
        let current = answered(
            &req,
            self.service
                .seq_current(req.get_ref().key.as_bytes(), Turn::Now),
        )
        .await?;
        Ok(Response::new(pb::SeqCurrentResponse {
            current,
            current_text: current.to_string(),
        }))
    }
}
