//! The gRPC side of a server: [`Grpc`] takes an HTTP/2 request whose `content-type` is
//! `application/grpc` (the REST server routes it here, [`is_grpc`]) and answers it from the
//! vesta.v1 service ([`ops`]), the health service ([`health`]) or reflection. Each service is
//! a row of the gate's table ([`vesta_service::gate`]), so a call meets the checks of every
//! other HTTP request: `POST` only (else 405 with `Allow: POST`), and the bearer token
//! (`[server] auth_token_file`) guarding vesta.v1 as it guards the REST API; health and
//! reflection stay open, as `/healthz` does (load balancers and `grpcurl` need no secret).

mod deadline;
mod health;
mod metrics;
mod ops;
mod status;
mod stream;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{Request, Response};
use tonic::body::Body;
use tonic::codegen::Service as _;
use vesta_core::Clock;
use vesta_embed::Flow;
use vesta_service::Service;
use vesta_service::gate::{self, Asked, Gate, Methods, Needs, Refusal, Route, RoutePath};

use crate::pb::vesta_server::VestaServer;

/// The largest request message any service here decodes (tonic's default is 4 MiB): vesta.v1's
/// requests are a few bytes (a `Make` with every field under 200), health's and reflection's a
/// name. A longer one is refused (`OUT_OF_RANGE`, tonic's code) before it is buffered, so a
/// client's open calls pin at most this much each.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// Whether `content_type` (a request's header) asks for gRPC: `application/grpc`, alone or
/// with a `+proto`-style suffix or parameters.
pub fn is_grpc(content_type: &[u8]) -> bool {
    content_type
        .strip_prefix(b"application/grpc")
        .is_some_and(|rest| rest.is_empty() || matches!(rest[0], b'+' | b';'))
}

/// A service of opaque type (tonic-reflection's), behind one call.
type Handler = Box<dyn Fn(Request<Body>) -> Answer + Send + Sync>;

/// The services answered here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Served {
    Vesta,
    Health,
    ReflectionV1,
    ReflectionV1alpha,
}

/// The gRPC routes: one row per service (`/SERVICE/METHOD`).
#[rustfmt::skip]
static ROUTES: [Route<Served>; 4] = [
    Route::new(RoutePath::nonempty_param("/vesta.v1.Vesta/{method}"), Methods::Post, Needs::TOKEN, "vesta", Served::Vesta),
    Route::new(RoutePath::nonempty_param("/grpc.health.v1.Health/{method}"), Methods::Post, Needs::OPEN, "health", Served::Health),
    Route::new(RoutePath::nonempty_param("/grpc.reflection.v1.ServerReflection/{method}"), Methods::Post, Needs::OPEN, "reflection", Served::ReflectionV1),
    Route::new(RoutePath::nonempty_param("/grpc.reflection.v1alpha.ServerReflection/{method}"), Methods::Post, Needs::OPEN, "reflection", Served::ReflectionV1alpha),
];

/// A gRPC answer on its way: it never fails (a failure is a gRPC status inside it).
pub type Answer = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

/// The gRPC services of one server, shared by its connections.
pub struct Grpc<C: Clock + 'static> {
    service: Arc<Service<C>>,
    calls: Arc<metrics::Calls>,
    health: health::Health<C>,
    reflection_v1: Handler,
    reflection_v1alpha: Handler,
}

impl<C: Clock + 'static> Grpc<C> {
    /// The gRPC services over `service`.
    pub fn new(service: Arc<Service<C>>) -> Arc<Self> {
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(crate::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let v1 = reflection()
            .build_v1()
            .expect("the checked-in descriptor set is valid (tests/generated.rs)")
            .max_decoding_message_size(MAX_REQUEST_BYTES);
        let v1alpha = reflection()
            .build_v1alpha()
            .expect("the checked-in descriptor set is valid (tests/generated.rs)")
            .max_decoding_message_size(MAX_REQUEST_BYTES);
        let reflection_v1: Handler = Box::new(move |req| Box::pin(v1.clone().call(req)));
        let reflection_v1alpha: Handler = Box::new(move |req| Box::pin(v1alpha.clone().call(req)));
        Arc::new(Grpc {
            health: health::Health::new(&service),
            calls: Arc::default(),
            service,
            reflection_v1,
            reflection_v1alpha,
        })
    }

    /// Adds `vesta_grpc_calls_total` to `registry` (the server's, prefixed `vesta_`).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.calls.register(registry);
    }

    /// Answers one gRPC request that arrived on a connection whose share of the issuer is
    /// `flow`. Every failure is a gRPC status in the answer (an unknown service or method is
    /// `UNIMPLEMENTED`, a missing token `UNAUTHENTICATED`, a message that does not decode
    /// `INVALID_ARGUMENT`); the future never fails.
    pub fn call<B>(&self, flow: &Flow<C>, req: Request<B>) -> Answer
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    {
        let path = req.uri().path().to_owned();
        let answer = self.route(flow, req);
        let calls = Arc::clone(&self.calls);
        Box::pin(async move {
            let resp = status::undecodable(answer.await?);
            // A trailers-only answer (a refusal) carries its status in its headers.
            let code = resp
                .headers()
                .get("grpc-status")
                .and_then(|v| v.to_str().ok()?.parse::<i32>().ok())
                .map_or(tonic::Code::Ok, tonic::Code::from);
            calls.count(&path, code);
            Ok(resp)
        })
    }

    /// The service `req` names, or a refusal.
    fn route<B>(&self, flow: &Flow<C>, req: Request<B>) -> Answer
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
    {
        let path = req.uri().path();
        let refused = |status: tonic::Status| -> Answer {
            Box::pin(std::future::ready(Ok(status.into_http())))
        };
        let gate = Gate {
            limits: self.service.limits(),
            // The target is bounded by the HTTP/2 header limits; the message by MAX_REQUEST_BYTES.
            max_target_bytes: usize::MAX,
        };
        let asked = Asked {
            method: req.method(),
            target_len: path.len(),
            headers: req.headers(),
        };
        let route = match gate.admit(gate::find(&ROUTES, path).map(|(_, r)| r), asked) {
            Ok(route) => route,
            Err(Refusal::Method { allowed, .. }) => {
                let mut r = Response::new(Body::empty());
                *r.status_mut() = http::StatusCode::METHOD_NOT_ALLOWED;
                r.headers_mut().insert(
                    http::header::ALLOW,
                    http::HeaderValue::from_static(allowed.allow()),
                );
                return Box::pin(std::future::ready(Ok(r)));
            }
            Err(Refusal::NoRoute) => {
                let service = path
                    .strip_prefix('/')
                    .and_then(|p| p.split_once('/'))
                    .map_or("", |(service, _)| service);
                return refused(tonic::Status::unimplemented(format!(
                    "no service {service:?} here: this server answers vesta.v1.Vesta, \
                     grpc.health.v1.Health and server reflection"
                )));
            }
            Err(Refusal::Token) => {
                return refused(tonic::Status::unauthenticated(
                    vesta_service::auth::NEEDS_TOKEN,
                ));
            }
            Err(other) => {
                let why = other.message(req.method()).unwrap_or_default();
                return refused(tonic::Status::failed_precondition(why));
            }
        };
        match route.handler {
            Served::Vesta => {
                let ops = ops::Ops::new(Arc::clone(&self.service), flow.clone());
                let mut server = VestaServer::new(ops).max_decoding_message_size(MAX_REQUEST_BYTES);
                Box::pin(server.call(req))
            }
            Served::Health => Box::pin(self.health.server().call(req)),
            Served::ReflectionV1 => (self.reflection_v1)(req.map(Body::new)),
            Served::ReflectionV1alpha => (self.reflection_v1alpha)(req.map(Body::new)),
        }
    }
}

impl<C: Clock + 'static> std::fmt::Debug for Grpc<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grpc").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::is_grpc;

    #[test]
    fn grpc_content_types_are_recognised_and_others_are_not() {
        for yes in [
            &b"application/grpc"[..],
            b"application/grpc+proto",
            b"application/grpc;charset=utf-8",
        ] {
            assert!(is_grpc(yes), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            &b"application/grpc-web"[..],
            b"application/grpcx",
            b"application/json",
            b"",
        ] {
            assert!(!is_grpc(no), "{}", String::from_utf8_lossy(no));
        }
    }
}
