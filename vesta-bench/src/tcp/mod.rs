//! The TCP load engine behind `vesta bench tcp`: C pipelined connections to `vesta serve tcp`,
//! each keeping up to P requests (`NEXT_ID` or `NEXT_IDS`; `SEQ_NEXT` of random keys with
//! `seq_keys`, [`crate::seq`]) in flight, closed loop or at a fixed rate. Every server is asked
//! `INFO` first: its layout gives the cap, its `max_batch` bounds the batch. With a peer
//! ([`crate::Peer`]), the seq load goes to Redis or PostgreSQL instead. A seq load on more than
//! one server routes each key to the member of the cluster that owns it (`routed`).

mod closed;
pub(crate) mod conn;
mod open;
mod routed;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use vesta_core::{IdRun, Layout};
use vesta_server::ServerInfo;
use vesta_server::proto::{Dialect, ErrorCode, Request, Response};

use crate::config::{BenchError, Field, Peer, TcpLoad};
use crate::engine::{self, Ctx, Progress, Worker};
use crate::report::{Protocol, Report, Target};
use crate::seq::{self, Keys};
use crate::tally::Tally;

use self::conn::Conn;

/// Runs the load and reports; `progress` is called about every `tick` from the calling thread.
pub fn run(
    config: TcpLoad,
    tick: Duration,
    progress: impl FnMut(Progress),
) -> Result<Report, BenchError> {
    config.validate()?;
    match (config.peer, config.seq_keys) {
        (Some(Peer::Redis), Some(n)) => return seq::redis::run(config, n, tick, progress),
        (Some(Peer::Postgres), Some(n)) => return seq::postgres::run(config, n, tick, progress),
        _ => {}
    }
    let mut targets = Vec::with_capacity(config.load.targets.len());
    for address in &config.load.targets {
        let info = info(address).map_err(|message| BenchError::Target {
            target: address.clone(),
            message,
        })?;
        if config.seq_keys.is_some() {
            seq_on(address).map_err(|message| BenchError::Target {
                target: address.clone(),
                message,
            })?;
        } else if let Some(b) = config.load.batch
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
            machines: match info.machines.len() {
                0 | 1 => Vec::new(),
                _ => info.machines.iter().map(|m| u64::from(m.machine)).collect(),
            },
        });
    }
    let request = match config.load.batch {
        Some(count) => Request::NextIds { count },
        None => Request::NextId,
    };
    let (pipeline, seq_keys, count) = (config.pipeline, config.seq_keys, config.load.batch);
    let shape = config.seq_shape;
    let all = &config.load.targets;
    let outcome = engine::drive(&config.load, tick, progress, |c, target| {
        if let Some(n) = seq_keys
            && all.len() > 1
        {
            let keys = Keys::new(n, c);
            let routed = routed::Routed::connect(all, c, keys, count.unwrap_or(1), pipeline)?;
            return Ok(TcpWorker::Routed(routed));
        }
        let conn = Conn::connect(target)?;
        let requests = match seq_keys {
            Some(n) => Requests::Seq {
                keys: Keys::shaped(n, c, shape),
                count: count.unwrap_or(1),
            },
            None => Requests::Fixed(request.clone()),
        };
        Ok(TcpWorker::Direct {
            conn,
            requests,
            pipeline,
        })
    })?;
    let mut report = outcome.into_report(Protocol::Tcp { pipeline }, config.load, targets);
    report.seq_keys = seq_keys;
    report.seq_shape = shape;
    Ok(report)
}

/// Asks a server for key 0's current number (`SEQ_CURRENT`, which moves nothing): an error
/// unless it serves per-key sequences (a member of a cluster that names key 0's owner, or says
/// its set is moving, does).
fn seq_on(target: &str) -> Result<(), String> {
    let current = Request::SeqCurrent {
        key: Bytes::from_static(b"0"),
    };
    match Conn::connect(target)?.call(&current)? {
        Response::SeqCurrent(_)
        | Response::Error {
            code: ErrorCode::SeqMoved | ErrorCode::SeqMoving,
            ..
        } => Ok(()),
        Response::Error { code, message } => Err(format!("SEQ_CURRENT refused: {code}: {message}")),
        other => Err(format!("expected a SEQ_CURRENT answer, got {other:?}")),
    }
}

/// What a connection sends: the same request every time, or `SEQ_NEXT` of a random key.
pub(crate) enum Requests {
    /// `NEXT_ID` or `NEXT_IDS`.
    Fixed(Request),
    /// `SEQ_NEXT` of `count` numbers of the next key.
    Seq {
        /// This connection's keys.
        keys: Keys,
        /// Numbers per call.
        count: u32,
    },
}

impl Requests {
    /// Appends the next request, with id `id`.
    pub(crate) fn encode(&mut self, id: u32, dialect: &Dialect, out: &mut BytesMut) {
        match self {
            Requests::Fixed(r) => r.encode(id, dialect, out),
            Requests::Seq { keys, count } => Request::SeqNext {
                count: *count,
                key: Bytes::copy_from_slice(keys.next_text().0.as_bytes()),
            }
            .encode(id, dialect, out),
        }
    }

    /// The count every `SEQ` answer must carry; `None` when the answers are IDs.
    pub(crate) fn seq_count(&self) -> Option<u32> {
        match self {
            Requests::Fixed(_) => None,
            Requests::Seq { count, .. } => Some(*count),
        }
    }
}

/// `INFO` of one server, over a connection of its own.
fn info(target: &str) -> Result<ServerInfo, String> {
    match Conn::connect(target)?.call(&Request::Info)? {
        Response::Info(info) => Ok(info),
        Response::Error { code, message } => Err(format!("INFO refused: {code}: {message}")),
        other => Err(format!("expected an INFO answer, got {other:?}")),
    }
}

/// One connection: to one server, closed or open loop by whether the run has a schedule; or
/// a seq load's connection to every member of a cluster.
enum TcpWorker {
    Direct {
        conn: Conn,
        requests: Requests,
        pipeline: usize,
    },
    Routed(routed::Routed),
}

impl Worker for TcpWorker {
    fn run(self, ctx: &Ctx<'_>) -> Result<Tally, String> {
        match (self, ctx.schedule) {
            (
                TcpWorker::Direct {
                    conn,
                    requests,
                    pipeline,
                },
                None,
            ) => closed::run(conn, requests, pipeline, ctx),
            (
                TcpWorker::Direct {
                    conn,
                    requests,
                    pipeline,
                },
                Some(schedule),
            ) => open::run(conn, requests, pipeline, schedule, ctx),
            (TcpWorker::Routed(r), _) => r.run(ctx),
        }
    }
}

/// Counts one answer into `tally`, reading IDs in `layout`; returns (IDs or numbers, is an
/// error). In a seq run (`seq` the count asked) an answer must be a `SEQ` of that count; in an
/// ID run, IDs. Anything else but an error is a broken server.
fn account(
    tally: &mut Tally,
    answer: &Response,
    layout: &Layout,
    seq: Option<u32>,
) -> Result<(u64, bool), String> {
    match answer {
        Response::Seq { last, count } => match seq {
            Some(asked) if *count == asked => Ok((u64::from(asked), false)),
            Some(asked) => Err(format!(
                "SEQ_NEXT of {asked} answered a SEQ of {count} (last {last}): a server answers \
                 at most its seq.step numbers a call"
            )),
            None => Err(format!("unexpected answer {answer:?}")),
        },
        Response::Error { code, message } => {
            tally.error(code.name(), || format!("{code}: {message}"));
            Ok((0, true))
        }
        _ if seq.is_some() => Err(format!("expected a SEQ answer, got {answer:?}")),
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
