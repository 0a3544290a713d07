//! The gRPC baseline: the `vesta.v1.Vesta` service as tonic generates it, with a bare handler
//! that answers `NextId` with an incrementing counter (`NextIds` and `StreamIds` with runs of
//! it, in chunks as vesta's), served by hyper's auto connection builder on the same runtime as
//! vesta-rest. `vesta bench grpc --baseline` measures it in the same run as the real service
//! (binary `bare-tonic`, docs/bench/grpc.md), so what vesta adds to tonic shows: routing by
//! content type, the token check, the operations layer and the issuer.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use hyper::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tonic::codegen::Service as _;
use tonic::codegen::tokio_stream::Stream;
use tonic::{Response, Status};
use vesta_grpc::pb::vesta_server::{Vesta, VestaServer};
use vesta_grpc::pb::{self, IdChunk};

/// Numbers per `StreamIds` chunk, as vesta's stream sends them.
const CHUNK: u64 = 2048;
/// Most numbers one `NextIds` or `StreamIds` call may ask for (vesta's caps).
const MAX_BATCH: u64 = 100_000;
const MAX_STREAM: u64 = 1_000_000_000;

/// Serves `listener` until `shutdown` completes; returns how many numbers were handed out.
pub async fn serve(listener: TcpListener, shutdown: impl Future<Output = ()>) -> u64 {
    let counter = Arc::new(AtomicU64::new(0));
    let server = VestaServer::new(Bare {
        counter: Arc::clone(&counter),
    });
    let service = service_fn(move |req: Request<Incoming>| {
        let mut server = server.clone();
        async move { server.call(req).await }
    });
    super::accept(
        listener,
        auto::Builder::new(TokioExecutor::new()),
        service,
        shutdown,
    )
    .await;
    counter.load(Ordering::Relaxed)
}

/// The bare handler: a counter.
struct Bare {
    counter: Arc<AtomicU64>,
}

impl Bare {
    /// `count` numbers from the counter: the first of the run.
    fn take(&self, count: u64, max: u64) -> Result<u64, Status> {
        if !(1..=max).contains(&count) {
            return Err(Status::invalid_argument(format!(
                "count {count} is out of range: allowed 1..={max}"
            )));
        }
        Ok(self.counter.fetch_add(count, Ordering::Relaxed))
    }
}

#[tonic::async_trait]
impl Vesta for Bare {
    async fn next_id(
        &self,
        _: tonic::Request<pb::NextIdRequest>,
    ) -> Result<Response<pb::NextIdResponse>, Status> {
        let id = self.take(1, 1)?;
        Ok(Response::new(pb::NextIdResponse {
            id,
            id_text: String::new(),
        }))
    }

    async fn next_ids(
        &self,
        req: tonic::Request<pb::NextIdsRequest>,
    ) -> Result<Response<pb::NextIdsResponse>, Status> {
        let count = req.get_ref().count;
        let first = self.take(count, MAX_BATCH)?;
        Ok(Response::new(pb::NextIdsResponse {
            ids: (first..first + count).collect(),
        }))
    }

    type StreamIdsStream = Numbers;

    async fn stream_ids(
        &self,
        req: tonic::Request<pb::StreamIdsRequest>,
    ) -> Result<Response<Numbers>, Status> {
        let count = req.get_ref().count;
        if !(1..=MAX_STREAM).contains(&count) {
            return Err(Status::invalid_argument(format!(
                "count {count} is out of range: allowed 1..={MAX_STREAM}"
            )));
        }
        Ok(Response::new(Numbers {
            counter: Arc::clone(&self.counter),
            remaining: count,
        }))
    }

    async fn explain(
        &self,
        _: tonic::Request<pb::ExplainRequest>,
    ) -> Result<Response<pb::ExplainResponse>, Status> {
        Err(not_here())
    }

    async fn make(
        &self,
        _: tonic::Request<pb::MakeRequest>,
    ) -> Result<Response<pb::MakeResponse>, Status> {
        Err(not_here())
    }

    async fn trans_time(
        &self,
        _: tonic::Request<pb::TransTimeRequest>,
    ) -> Result<Response<pb::TransTimeResponse>, Status> {
        Err(not_here())
    }

    async fn segment(
        &self,
        _: tonic::Request<pb::SegmentRequest>,
    ) -> Result<Response<pb::SegmentResponse>, Status> {
        Err(not_here())
    }

    async fn segments(
        &self,
        _: tonic::Request<pb::SegmentsRequest>,
    ) -> Result<Response<pb::SegmentsResponse>, Status> {
        Err(not_here())
    }

    async fn seq_next(
        &self,
        _: tonic::Request<pb::SeqNextRequest>,
    ) -> Result<Response<pb::SeqNextResponse>, Status> {
        Err(not_here())
    }

    async fn seq_current(
        &self,
        _: tonic::Request<pb::SeqCurrentRequest>,
    ) -> Result<Response<pb::SeqCurrentResponse>, Status> {
        Err(not_here())
    }
}

fn not_here() -> Status {
    Status::unimplemented("the baseline answers NextId, NextIds and StreamIds only")
}

/// A `StreamIds` answer of the baseline: chunks taken from the counter as they are polled.
pub struct Numbers {
    counter: Arc<AtomicU64>,
    remaining: u64,
}

impl Stream for Numbers {
    type Item = Result<IdChunk, Status>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        let n = self.remaining.min(CHUNK);
        self.remaining -= n;
        let first = self.counter.fetch_add(n, Ordering::Relaxed);
        Poll::Ready(Some(Ok(IdChunk {
            ids: (first..first + n).collect(),
        })))
    }
}
