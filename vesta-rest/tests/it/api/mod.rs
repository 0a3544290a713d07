//! Every endpoint and every error path, over real HTTP against a real server on an ephemeral
//! loopback port: status codes, content types, JSON shapes, IDs as strings, and that the
//! server keeps serving after each bad request.

mod access;
mod ids;
mod probes;
mod refusals;
mod tools;

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::{Client, T0, issuer_config, manual_issuer, rest, sample, spawn, system_issuer};
use hyper::Method;
use vesta_core::{Epoch, GenMethod, IdFields, IdType, ManualClock};
use vesta_embed::Issuer;
use vesta_rest::RestSection;

fn decode(id: u64) -> IdFields {
    IdFields::decode(id)
}
