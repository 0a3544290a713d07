//! gRPC for vesta-rs: the `vesta.v1` service (`proto/vesta/v1/vesta.proto`), its messages, a
//! client, and the service a REST server answers on its own port.
//!
//! - [`pb`]: the messages and service, generated from the `.proto` by tonic and checked in
//!   (`src/gen/`; `tests/generated.rs` fails when they differ from what the `.proto` compiles
//!   to, so building this crate needs no proto compiler).
//! - Feature `client` (default): [`VestaClient`] over tonic's HTTP/2 channel, for Rust services
//!   that call a `vesta serve rest` without the server stack.
//! - Feature `server`: [`Grpc`], what vesta-rest routes `application/grpc` requests to: the ops
//!   of vesta-service (written once for every transport) mapped to gRPC, the standard health
//!   service (`grpc.health.v1`) and server reflection (`grpc.reflection.v1` and `v1alpha`).
//!
//! The service, its errors and limits: docs/grpc.md.

/// The `vesta.v1` messages and service, as generated from `proto/vesta/v1/vesta.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    include!("gen/vesta.v1.rs");
}

/// The `.proto` compiled to a `FileDescriptorSet` (protobuf bytes), what server reflection
/// answers with.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("gen/vesta.v1.bin");

/// The service's full name, as health checks and reflection know it.
pub const SERVICE_NAME: &str = "vesta.v1.Vesta";

#[cfg(feature = "client")]
pub use pb::vesta_client::VestaClient;

#[cfg(feature = "server")]
mod server;

#[cfg(feature = "server")]
pub use server::{Grpc, MAX_REQUEST_BYTES, is_grpc};
