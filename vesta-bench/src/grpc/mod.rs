//! The gRPC load engine behind `vesta bench grpc`: C HTTP/2 connections (tonic's client, one
//! connection each) to the gRPC service of `vesta serve rest` on its port, one call in flight on
//! each: `NextId`, `NextIds` with a batch, or `StreamIds` with a batch read chunk by chunk;
//! closed loop or at a fixed rate, with the same method and report as the other engines. A
//! stream's latency is the whole call's, from the send (or its due time) to its last chunk.
//!
//! Before the run every vesta server is asked `/healthz` on the same port (its machine ID and
//! layout give the cap) and sent one call as the run will send it, so a refusal fails the run
//! at once with the server's own sentence. Error statuses are counted by code.

mod conn;

use std::time::{Duration, Instant};

use vesta_core::Layout;

use crate::config::{BenchError, GrpcLoad};
use crate::engine::{self, Ctx, Progress, Worker};
use crate::report::{Protocol, Report, Target};
use crate::tally::Tally;

use self::conn::{Call, GrpcConn};

/// Runs the load and reports; `progress` is called about every `tick` from the calling thread.
pub fn run(
    config: GrpcLoad,
    tick: Duration,
    progress: impl FnMut(Progress),
) -> Result<Report, BenchError> {
    config.validate()?;
    let call = match (config.load.batch, config.stream) {
        (None, _) => Call::One,
        (Some(n), false) => Call::Batch(u64::from(n)),
        (Some(n), true) => Call::Stream(u64::from(n)),
    };
    let targets = engine::describe_targets(&config.load, |address| {
        describe(address, call, config.baseline)
    })?;
    let outcome = engine::drive(&config.load, tick, progress, |_, target| {
        Ok(GrpcWorker {
            conn: GrpcConn::connect(target)?,
            layout: engine::layout_of(&targets, target),
            call,
            baseline: config.baseline,
        })
    })?;
    let mut report = outcome.into_report(
        Protocol::Grpc {
            baseline: config.baseline,
        },
        config.load,
        targets,
    );
    report.request = Some(call.name());
    Ok(report)
}

/// Asks a server what it is (`/healthz` on its port, unless a baseline) and makes one call of
/// the run.
fn describe(address: &str, call: Call, baseline: bool) -> Result<Target, String> {
    let target = if baseline {
        Target::unknown(address)
    } else {
        crate::rest::identify(address, false)?
    };
    let mut conn = GrpcConn::connect(address)?;
    conn.call(call, |_| {})?
        .map_err(|s| format!("{} answered {:?}: {}", call.name(), s.code(), s.message()))?;
    Ok(target)
}

/// One connection: one call at a time, on the schedule or back to back.
struct GrpcWorker {
    conn: GrpcConn,
    /// The server's layout, to count IDs per time unit (none for a baseline or custom one).
    layout: Option<Layout>,
    call: Call,
    /// A baseline's answers are timed, not counted as IDs.
    baseline: bool,
}

impl Worker for GrpcWorker {
    fn run(mut self, ctx: &Ctx<'_>) -> Result<Tally, String> {
        let mut tally = Tally::new(ctx.schedule.is_some());
        let mut schedule = ctx.schedule;
        let layout = self.layout.as_ref();
        while let Some(intended) = ctx.next_send(&mut schedule) {
            let written = Instant::now();
            let outcome = self.conn.call(self.call, |id| tally.ids(id, 1, layout))?;
            tally.answer(intended, written, Instant::now());
            match outcome {
                Ok(n) => ctx.live.add(1, if self.baseline { 0 } else { n }, 0),
                Err(status) => {
                    tally.error(&format!("{:?}", status.code()), || {
                        format!("{:?}: {}", status.code(), status.message())
                    });
                    ctx.live.add(1, 0, 1);
                }
            }
        }
        Ok(tally)
    }
}
