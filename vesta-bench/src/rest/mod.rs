//! The REST load engine behind `vesta bench rest`: C HTTP/1.1 keep-alive connections (hyper's
//! client) to `vesta serve rest`, `GET /genid` or `GET /genids?count=N` (or, with a segment
//! tag, `GET /segment/{tag}`, `/segments/{tag}?count=N` or Leaf's `/api/segment/get/{tag}`),
//! closed loop or at a fixed rate, with the same method and report as the TCP engine. HTTP/1.1
//! has one request in flight per connection, so the connections are the concurrency. Segment
//! numbers are counted and checked to increase on each connection (one server hands them out
//! in order), not read as IDs.
//!
//! With seq keys ([`crate::seq`]) each request is `GET /seq/{key}` of a random key of `0..N`
//! (`?count=N&format=json` with a batch, so that the answer says `first` and `last` and its
//! count is checked).
//!
//! Before the run every server is asked `/healthz` (its machine ID and layout give the cap) and
//! sent one request as the run will send it, so a refusal (a `count` above the server's limit,
//! a fenced lease) fails the run at once with the server's own sentence. Answers are read as
//! IDs and counted per time unit; error answers are counted by status.

mod answer;
mod conn;

use std::time::{Duration, Instant};

use hyper::StatusCode;
use vesta_core::{IdType, Layout, Preset, Remedy};

use crate::config::{BenchError, RestLoad, seq_query};
use crate::engine::{self, Ctx, Progress, Worker};
use crate::report::{Protocol, Report, Target};
use crate::seq::{Keys, key_range};
use crate::tally::Tally;

use self::conn::HttpConn;

/// Runs the load and reports; `progress` is called about every `tick` from the calling thread.
pub fn run(
    config: RestLoad,
    tick: Duration,
    progress: impl FnMut(Progress),
) -> Result<Report, BenchError> {
    config.validate()?;
    let path = config.path();
    // IDs per 200 answer as the run reads them; `None` for a baseline, whose bodies are not IDs.
    let expect = (!config.baseline).then_some(config.load.batch);
    let segment = config.segment.is_some();
    let seq_keys = config.seq_keys;
    let targets = engine::describe_targets(&config.load, |address| match seq_keys {
        Some(_) => describe_seq(address),
        None => describe(address, &path, expect, segment),
    })?;
    let query = seq_query(config.load.batch);
    let outcome = engine::drive(&config.load, tick, progress, |c, target| {
        Ok(RestWorker {
            conn: HttpConn::connect(target)?,
            layout: engine::layout_of(&targets, target),
            path: path.clone(),
            expect,
            segment,
            last: None,
            seq: seq_keys.map(|n| SeqPaths {
                keys: Keys::shaped(n, c, config.seq_shape),
                query: query.clone(),
                path: String::with_capacity(64),
                key: String::with_capacity(32),
            }),
        })
    })?;
    let mut report = outcome.into_report(
        Protocol::Rest {
            baseline: config.baseline,
        },
        config.load,
        targets,
    );
    report.segment = config.segment;
    report.request = Some(match seq_keys {
        Some(n) => format!("GET {path}, {}", key_range(n, config.seq_shape)),
        None => format!("GET {path}"),
    });
    report.seq_keys = seq_keys;
    report.seq_shape = config.seq_shape;
    Ok(report)
}

/// Asks a vesta server what it is (`/healthz`, which must show per-key sequences on) and for
/// key 0's current number (`GET /seq/0/current`, which moves nothing).
fn describe_seq(address: &str) -> Result<Target, String> {
    let target = identify(address, false)?;
    let mut conn = HttpConn::connect(address)?;
    let (_, body) = conn.get("/healthz")?;
    if !answer::health(&body)?.seq {
        return Err(format!(
            "the server has no per-key sequences (to serve them: {})",
            Remedy::ServeSequences
        ));
    }
    let path = "/seq/0/current";
    let (status, body) = conn.get(path)?;
    if status != StatusCode::OK {
        return Err(refused(path, status, &body));
    }
    Ok(target)
}

/// Asks a server what it is (`/healthz`, unless a baseline) and sends it one request of the run.
fn describe(
    address: &str,
    path: &str,
    expect: Option<Option<u32>>,
    segment: bool,
) -> Result<Target, String> {
    let target = match expect {
        Some(_) => identify(address, segment)?,
        None => Target::unknown(address),
    };
    let mut conn = HttpConn::connect(address)?;
    let (status, body) = conn.get(path)?;
    if status != StatusCode::OK {
        return Err(refused(path, status, &body));
    }
    if let Some(batch) = expect {
        answer::ids(&body, batch, |_| {}).map_err(|e| format!("GET {path}: {e}"))?;
    }
    Ok(target)
}

/// Asks the vesta server at `address` what it is (`/healthz`): its machine, layout and lease;
/// with `segment`, an error unless it serves segment numbers. The gRPC engine asks the same
/// port.
pub(crate) fn identify(address: &str, segment: bool) -> Result<Target, String> {
    let mut conn = HttpConn::connect(address)?;
    let (status, body) = conn.get("/healthz")?;
    if status != StatusCode::OK {
        return Err(refused("/healthz", status, &body));
    }
    let health = answer::health(&body)?;
    if segment && !health.segments {
        return Err("the server has no segment mode (no [segment] db in its config)".into());
    }
    Ok(Target {
        address: address.to_owned(),
        machine: Some(health.machine),
        layout: health_layout(&health)?,
        lease: Some(health.lease),
        machines: health.machines.iter().map(|m| m.machine).collect(),
    })
}

/// A refusal of `GET path` in one line, with the server's own sentence.
fn refused(path: &str, status: StatusCode, body: &[u8]) -> String {
    format!(
        "GET {path} answered {status}: {}",
        answer::error_sentence(body)
    )
}

/// The layout `/healthz` names: a preset (Vesta's by its type), or `None` for a custom
/// layout, which it only names (its IDs are then counted but not split into time units).
fn health_layout(health: &answer::Health) -> Result<Option<Layout>, String> {
    if health.layout == "vesta" || health.layout.is_empty() {
        let code = health.id_type.unwrap_or(0);
        let t =
            IdType::from_code(code).map_err(|e| format!("/healthz gave an unknown type: {e}"))?;
        return Ok(Some(t.layout().clone()));
    }
    Ok(health.layout.parse::<Preset>().ok().map(Preset::layout))
}

/// One connection: one request at a time, on the schedule or back to back.
struct RestWorker {
    conn: HttpConn,
    /// The server's layout, to count IDs per time unit (none for a custom one).
    layout: Option<Layout>,
    path: String,
    expect: Option<Option<u32>>,
    /// Segment numbers, not IDs: counted and checked to increase, not tallied by time unit.
    segment: bool,
    /// The last segment number this connection received.
    last: Option<u64>,
    /// Per-key sequences: each request's path is made from the next key.
    seq: Option<SeqPaths>,
}

/// The paths of a seq run's requests on one connection.
struct SeqPaths {
    keys: Keys,
    /// `?count=N&format=json`, or nothing.
    query: String,
    /// The current request's path.
    path: String,
    /// The current request's key.
    key: String,
}

impl SeqPaths {
    /// The next request's path and its key.
    fn next(&mut self) -> (&str, &str) {
        let (text, _) = self.keys.next_text();
        self.key.clear();
        self.key.push_str(text);
        self.path.clear();
        self.path.push_str("/seq/");
        self.path.push_str(text);
        self.path.push_str(&self.query);
        (&self.path, &self.key)
    }
}

impl Worker for RestWorker {
    fn run(mut self, ctx: &Ctx<'_>) -> Result<Tally, String> {
        let mut tally = Tally::new(ctx.schedule.is_some());
        let mut schedule = ctx.schedule;
        while let Some(intended) = ctx.next_send(&mut schedule) {
            let written = Instant::now();
            let (status, body, key) = match &mut self.seq {
                Some(seq) => {
                    let (path, key) = seq.next();
                    let (status, body) = self.conn.get(path)?;
                    (status, body, Some(key))
                }
                None => {
                    let (status, body) = self.conn.get(&self.path)?;
                    (status, body, None)
                }
            };
            tally.answer(intended, written, Instant::now());
            if status == StatusCode::OK {
                let ids = match (self.expect, key) {
                    (Some(batch), Some(key)) => answer::seq(&body, key, batch)
                        .map_err(|e| format!("GET /seq/{key}{}: {e}", seq_query(batch)))?,
                    (expect, _) => match expect {
                        Some(batch) if self.segment => self.numbers(&body, batch)?,
                        Some(batch) => {
                            answer::ids(&body, batch, |id| tally.ids(id, 1, self.layout.as_ref()))
                                .map_err(|e| format!("GET {}: {e}", self.path))?
                        }
                        None => 0,
                    },
                };
                ctx.live.add(1, ids, 0);
            } else {
                tally.error(status.as_str(), || {
                    format!("{status}: {}", answer::error_sentence(&body))
                });
                ctx.live.add(1, 0, 1);
            }
        }
        Ok(tally)
    }
}

impl RestWorker {
    /// Counts the segment numbers of an answer; an error if one does not follow the last one
    /// this connection received (one server hands a tag's numbers out in increasing order).
    fn numbers(&mut self, body: &[u8], batch: Option<u32>) -> Result<u64, String> {
        let mut backwards = None;
        let last = &mut self.last;
        let n = answer::ids(body, batch, |n| {
            if last.is_some_and(|l| n <= l) && backwards.is_none() {
                backwards = Some((last.unwrap_or(0), n));
            }
            *last = Some(n);
        })
        .map_err(|e| format!("GET {}: {e}", self.path))?;
        match backwards {
            Some((before, n)) => Err(format!(
                "GET {}: segment number {n} after {before} on one connection: not increasing",
                self.path
            )),
            None => Ok(n),
        }
    }
}
