//! `grpc.health.v1.Health`, the standard health service load balancers and `grpc_health_probe`
//! call: SERVING exactly when `/healthz` answers 200 ([`Service::health`]: the issuer issues,
//! its lease held, not fenced, not shut down), read at each `Check`; `Watch` sends the status at once, then each change (read every 250 ms).
//! The server as a whole (`""`) and `vesta.v1.Vesta` are known; any other name is NOT_FOUND
//! (`Check`) or SERVICE_UNKNOWN (`Watch`), as the protocol says.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Interval, MissedTickBehavior};
use tonic::codegen::tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_server::{Health as HealthService, HealthServer};
use tonic_health::pb::{
    HealthCheckRequest, HealthCheckResponse, health_check_response::ServingStatus,
};
use vesta_core::Clock;
use vesta_service::Service;
use vesta_service::health::Health as Healthz;

/// How often `Watch` reads the issuer.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// The health of one server's issuer.
pub struct Health<C: Clock + 'static> {
    server: HealthServer<Reader<C>>,
}

impl<C: Clock + 'static> Health<C> {
    pub fn new(service: &Arc<Service<C>>) -> Self {
        Health {
            server: HealthServer::new(Reader {
                service: Arc::clone(service),
            })
            .max_decoding_message_size(super::MAX_REQUEST_BYTES),
        }
    }

    /// The tonic service answering `grpc.health.v1.Health` requests.
    pub fn server(&self) -> HealthServer<Reader<C>> {
        self.server.clone()
    }
}

/// Reads the issuer's status for each call.
pub struct Reader<C: Clock + 'static> {
    service: Arc<Service<C>>,
}

/// The status of `name` (`None`: not a service of this server).
fn status_of<C: Clock + 'static>(service: &Service<C>, name: &str) -> Option<ServingStatus> {
    if !name.is_empty() && name != crate::SERVICE_NAME {
        return None;
    }
    Some(match service.health() {
        Healthz::Issuing(_) => ServingStatus::Serving,
        Healthz::NotIssuing(_) => ServingStatus::NotServing,
    })
}

#[tonic::async_trait]
impl<C: Clock + 'static> HealthService for Reader<C> {
    async fn check(
        &self,
        req: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let name = &req.get_ref().service;
        let status = status_of(&self.service, name)
            .ok_or_else(|| Status::not_found(format!("no service {name:?} here")))?;
        Ok(Response::new(HealthCheckResponse {
            status: status.into(),
        }))
    }

    type WatchStream = Watch<C>;

    async fn watch(
        &self,
        req: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let mut every = tokio::time::interval(WATCH_EVERY);
        every.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ok(Response::new(Watch {
            service: Arc::clone(&self.service),
            name: req.into_inner().service,
            every,
            last: None,
        }))
    }
}

/// A `Watch` call: the status now, then each change.
pub struct Watch<C: Clock + 'static> {
    service: Arc<Service<C>>,
    name: String,
    every: Interval,
    last: Option<ServingStatus>,
}

impl<C: Clock + 'static> Stream for Watch<C> {
    type Item = Result<HealthCheckResponse, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.every.poll_tick(cx).is_pending() {
                return Poll::Pending;
            }
            let now = status_of(&this.service, &this.name).unwrap_or(ServingStatus::ServiceUnknown);
            if this.last != Some(now) {
                this.last = Some(now);
                return Poll::Ready(Some(Ok(HealthCheckResponse { status: now.into() })));
            }
        }
    }
}
