//! The TCP load engine behind `vesta bench tcp`: C pipelined connections to `vesta serve tcp`,
//! each keeping up to P requests (`NEXT_ID` or `NEXT_IDS`) in flight, closed loop or at a fixed
//! rate. Every server is asked `INFO` first: its layout gives the cap, its `max_batch` bounds
//! the batch.

mod closed;
mod conn;
mod open;

use std::time::Duration;

use vesta_core::{IdRun, Layout};
use vesta_server::ServerInfo;
use vesta_server::proto::{Request, Response};

use crate::config::{BenchError, Field, TcpLoad};
use crate::engine::{self, Ctx, Progress, Worker};
use crate::report::{Protocol, Report, Target};
use crate::tally::Tally;

use self::conn::Conn;

/// Runs the load and reports; `progress` is called about every `tick` from the calling thread.
pub fn run(
    config: TcpLoad,
    tick: Duration,
    progress: impl FnMut(Progress),
) -> Result<Report, BenchError> {
    config.validate()?;
    let mut targets = Vec::with_capacity(config.load.targets.len());
    for address in &config.load.targets {
        let info = info(address).map_err(|message| BenchError::Target {
            target: address.clone(),
            message,
        })?;
        if let Some(b) = config.load.batch
            && b > info.max_batch
        {
            return Err(BenchError::OutOfRange {
                field: Field::Batch,
                value: b.to_string(),
                allowed: format!("1..={} (the server's max_batch)", info.max_batch),
            });
        }
        targets.push(Target {
            address: address.clone(),
            machine: Some(u64::from(info.machine)),
            layout: Some(info.layout.clone()),
            lease: Some(info.lease_state_name().to_owned()),
        });
    }
    let request = match config.load.batch {
        Some(count) => Request::NextIds { count },
        None => Request::NextId,
    };
    let pipeline = config.pipeline;
    let outcome = engine::drive(&config.load, tick, progress, |_, target| {
        let conn = Conn::connect(target)?;
        Ok(TcpWorker {
            conn,
            request: request.clone(),
            pipeline,
        })
    })?;
    Ok(outcome.into_report(Protocol::Tcp { pipeline }, config.load, targets))
}

/// `INFO` of one server, over a connection of its own.
fn info(target: &str) -> Result<ServerInfo, String> {
    match Conn::connect(target)?.call(&Request::Info)? {
        Response::Info(info) => Ok(info),
        Response::Error { code, message } => Err(format!("INFO refused: {code}: {message}")),
        other => Err(format!("expected an INFO answer, got {other:?}")),
    }
}

/// One connection, closed or open loop by whether the run has a schedule.
struct TcpWorker {
    conn: Conn,
    request: Request,
    pipeline: usize,
}

impl Worker for TcpWorker {
    fn run(self, ctx: &Ctx<'_>) -> Result<Tally, String> {
        match ctx.schedule {
            None => closed::run(self.conn, &self.request, self.pipeline, ctx),
            Some(schedule) => open::run(self.conn, &self.request, self.pipeline, schedule, ctx),
        }
    }
}

/// Counts one answer into `tally`, reading IDs in `layout`; returns (IDs, is an error). An
/// answer that is neither IDs nor an error is a broken server.
fn account(tally: &mut Tally, answer: &Response, layout: &Layout) -> Result<(u64, bool), String> {
    match answer {
        Response::Id(id) => {
            tally.ids(*id, 1, Some(layout));
            Ok((1, false))
        }
        Response::Ids(runs) => {
            let mut n = 0;
            for &IdRun { first, count, .. } in runs {
                tally.ids(first, count, Some(layout));
                n += count;
            }
            Ok((n, false))
        }
        Response::Error { code, message } => {
            tally.error(code.name(), || format!("{code}: {message}"));
            Ok((0, true))
        }
        other => Err(format!("unexpected answer {other:?}")),
    }
}

/// The slot of an answer's request id (ids are slot + 1; 0 is the server's own, e.g. GOAWAY).
fn slot_of(request_id: u32, answer: &Response, pipeline: usize) -> Result<usize, String> {
    let slot = (request_id as usize).wrapping_sub(1);
    if slot < pipeline {
        return Ok(slot);
    }
    match answer {
        Response::GoAway { message, .. } => Err(format!("the server said GOAWAY: {message}")),
        _ => Err(format!("answer with unknown request id {request_id}")),
    }
}
