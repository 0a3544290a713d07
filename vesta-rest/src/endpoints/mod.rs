//! The handlers the route table (`routes.rs`) names, one module per endpoint (the two issuing
//! endpoints share one, so do vesta's two segment paths, and Leaf's three paths theirs). A
//! handler parses its request, calls the service's op and writes the answer; refusals become
//! statuses in `error.rs` (Leaf's bodies in `leaf.rs`).

pub mod console;
pub mod expid;
pub mod healthz;
pub mod issue;
pub mod leaf;
pub mod makeid;
pub mod metrics;
pub mod segment;
pub mod seq;
pub mod transtime;
