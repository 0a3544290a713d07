//! The load generator behind `vesta bench tcp`: C connections, each keeping up to P requests in
//! flight, for a fixed duration; latency into an HDR histogram and IDs counted per time unit.
//!
//! Two modes:
//! - **closed loop** (no rate): each connection refills its pipeline as answers come back, one
//!   blocking thread per connection, so it measures what the server can do;
//! - **open loop** (`rate`): requests are due on a fixed schedule and latency is measured from
//!   the *intended* send time, not the actual one (no coordinated omission: when the pipeline is
//!   full or the sender is late, the wait shows in the latency). A sender thread paces with
//!   `thread::sleep` (sub-millisecond precision, unlike an async 1 ms timer wheel) and a reader
//!   thread matches answers.
//!
//! Plain threads rather than the async runtime: the generator is the other half of a 2-core
//! loopback measurement, so it must be cheap and its timing precise.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use hdrhistogram::Histogram;
use vesta_core::{IdFields, IdRun, IdType, Layout};

use crate::frame::{self, MAX_MAX_FRAME_BYTES};
use crate::proto::{MIN_VERSION, Request, Response, ServerInfo, VERSION};

/// Longest the generator waits for in-flight answers after the duration ends.
const DRAIN: Duration = Duration::from_secs(3);

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Servers; connections are spread over them round-robin.
    pub endpoints: Vec<String>,
    /// Connections in total.
    pub connections: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// How long requests are sent.
    pub duration: Duration,
    /// IDs per request (`NEXT_IDS`); `None` sends `NEXT_ID`.
    pub batch: Option<u32>,
    /// Requests per second in total (open loop); `None` sends as fast as answers return.
    pub rate: Option<u64>,
}

/// A load run that could not be done.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A setting is out of range.
    #[error("{0}")]
    Config(String),
    /// Connecting, the handshake or the connection failed.
    #[error("connection {conn} to {endpoint}: {message}")]
    Connection {
        /// Which connection.
        conn: usize,
        /// Its server.
        endpoint: String,
        /// What happened.
        message: String,
    },
}

/// Progress so far, as read while the run goes on.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Time since the start.
    pub elapsed: Duration,
    /// Answers received.
    pub requests: u64,
    /// IDs received.
    pub ids: u64,
    /// Error answers received.
    pub errors: u64,
}

/// What a run measured.
#[derive(Debug)]
pub struct LoadReport {
    /// The settings.
    pub config: LoadConfig,
    /// `INFO` of the first server.
    pub server: ServerInfo,
    /// Answers received (IDs or errors).
    pub requests: u64,
    /// IDs received.
    pub ids: u64,
    /// Error answers.
    pub errors: u64,
    /// From the first send to the last answer.
    pub elapsed: Duration,
    /// Latency of every answer in nanoseconds (from the intended send time with a rate).
    pub latency: Histogram<u64>,
    /// With a rate: latency from the moment the request was actually written, in nanoseconds.
    /// The difference to `latency` is the generator's own lateness (pacing, full pipeline).
    pub service: Option<Histogram<u64>>,
    /// IDs received per (machine ID, time value): how full each server's time units were.
    pub per_unit: BTreeMap<(u64, u64), u64>,
}

impl LoadReport {
    /// Answers per second.
    pub fn requests_per_sec(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// IDs per second.
    pub fn ids_per_sec(&self) -> f64 {
        self.ids as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The server's layout.
    pub fn layout(&self) -> &'static Layout {
        self.server
            .layout_type()
            .unwrap_or(IdType::MaxPeak)
            .layout()
    }

    /// How full each server's time units strictly inside the run were, as a fraction of the
    /// layout's capacity per unit (a server's first and last unit are partial by construction),
    /// and over how many units. `None` when no server had three units or more.
    pub fn unit_fill(&self) -> Option<(f64, usize)> {
        let mut by_machine: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (&(machine, _), &n) in &self.per_unit {
            by_machine.entry(machine).or_default().push(n);
        }
        let inner: Vec<u64> = by_machine
            .values()
            .filter(|units| units.len() >= 3)
            .flat_map(|units| units[1..units.len() - 1].iter().copied())
            .collect();
        if inner.is_empty() {
            return None;
        }
        let cap = self.layout().capacity_per_unit() as f64;
        let mean = inner.iter().sum::<u64>() as f64 / inner.len() as f64;
        Some((mean / cap, inner.len()))
    }

    /// Latency at a quantile, in microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }
}

impl LoadConfig {
    /// Checks the settings; messages name the flag and the allowed range.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Config(m));
        if self.endpoints.is_empty() {
            return bad("--server: at least one host:port is needed".into());
        }
        if !(1..=1024).contains(&self.connections) {
            return bad(format!(
                "--connections {} is out of range: allowed 1..=1024",
                self.connections
            ));
        }
        if !(1..=65_536).contains(&self.pipeline) {
            return bad(format!(
                "--pipeline {} is out of range: allowed 1..=65536",
                self.pipeline
            ));
        }
        if self.duration < Duration::from_millis(100) || self.duration > Duration::from_secs(3600) {
            return bad(format!(
                "--duration {:?} is out of range: allowed 100ms..=1h",
                self.duration
            ));
        }
        if let Some(b) = self.batch
            && b == 0
        {
            return bad("--batch 0 is out of range: allowed 1..=the server's max_batch".into());
        }
        if let Some(r) = self.rate
            && !(1..=10_000_000).contains(&r)
        {
            return bad(format!("--rate {r} is out of range: allowed 1..=10000000"));
        }
        Ok(())
    }

    fn request(&self) -> Request {
        match self.batch {
            Some(count) => Request::NextIds { count },
            None => Request::NextId,
        }
    }
}

/// Counters shared with the progress reader.
#[derive(Default)]
struct Live {
    requests: AtomicU64,
    ids: AtomicU64,
    errors: AtomicU64,
}

/// What one connection measured.
struct ConnResult {
    latency: Histogram<u64>,
    service: Option<Histogram<u64>>,
    per_unit: BTreeMap<(u64, u64), u64>,
    last_answer: Instant,
}

fn histogram() -> Result<Histogram<u64>, String> {
    // 1 µs .. 60 s at 3 significant digits; values outside are clamped, never dropped.
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).map_err(|e| e.to_string())
}

/// Runs the load; `progress` is called about every `tick` from the calling thread.
pub fn run(
    config: LoadConfig,
    tick: Duration,
    mut progress: impl FnMut(Progress),
) -> Result<LoadReport, LoadError> {
    config.validate()?;
    let server = info(&config.endpoints[0]).map_err(|message| LoadError::Connection {
        conn: 0,
        endpoint: config.endpoints[0].clone(),
        message,
    })?;
    if let Some(b) = config.batch
        && b > server.max_batch
    {
        return Err(LoadError::Config(format!(
            "--batch {b} is out of range: allowed 1..={} (the server's max_batch)",
            server.max_batch
        )));
    }
    let live = Arc::new(Live::default());
    let start = Instant::now();
    let deadline = start + config.duration;
    let mut handles = Vec::with_capacity(config.connections);
    for c in 0..config.connections {
        let endpoint = config.endpoints[c % config.endpoints.len()].clone();
        let cfg = config.clone();
        let live = live.clone();
        let h = thread::Builder::new()
            .name(format!("load-{c}"))
            .spawn(move || {
                let r = match cfg.rate {
                    None => closed_loop(&endpoint, &cfg, &live, deadline),
                    Some(rate) => open_loop(&endpoint, &cfg, &live, start, deadline, rate, c),
                };
                r.map_err(|message| LoadError::Connection {
                    conn: c,
                    endpoint,
                    message,
                })
            })
            .map_err(|e| LoadError::Config(format!("cannot start a load thread: {e}")))?;
        handles.push(h);
    }
    let mut last_tick = start;
    while handles.iter().any(|h| !h.is_finished()) {
        thread::sleep(Duration::from_millis(20));
        if last_tick.elapsed() >= tick {
            last_tick = Instant::now();
            progress(Progress {
                elapsed: start.elapsed(),
                requests: live.requests.load(Ordering::Relaxed),
                ids: live.ids.load(Ordering::Relaxed),
                errors: live.errors.load(Ordering::Relaxed),
            });
        }
    }
    let mut latency = histogram().map_err(LoadError::Config)?;
    let mut service = match config.rate {
        Some(_) => Some(histogram().map_err(LoadError::Config)?),
        None => None,
    };
    let mut per_unit = BTreeMap::new();
    let mut last = start;
    for h in handles {
        let r = h
            .join()
            .map_err(|_| LoadError::Config("a load thread panicked".into()))??;
        let _ = latency.add(&r.latency);
        if let (Some(all), Some(one)) = (service.as_mut(), r.service.as_ref()) {
            let _ = all.add(one);
        }
        for (t, n) in r.per_unit {
            *per_unit.entry(t).or_insert(0) += n;
        }
        last = last.max(r.last_answer);
    }
    Ok(LoadReport {
        config,
        server,
        requests: live.requests.load(Ordering::Relaxed),
        ids: live.ids.load(Ordering::Relaxed),
        errors: live.errors.load(Ordering::Relaxed),
        elapsed: last.saturating_duration_since(start),
        latency,
        service,
        per_unit,
    })
}

/// `INFO` of one server, over a connection of its own.
pub fn info(endpoint: &str) -> Result<ServerInfo, String> {
    let mut s = connect(endpoint)?;
    let mut out = BytesMut::new();
    Request::Info.encode(2, &mut out);
    s.write_all(&out).map_err(|e| e.to_string())?;
    let mut buf = BytesMut::new();
    match read_answer(&mut s, &mut buf)? {
        Response::Info(i) => Ok(i),
        other => Err(format!("expected INFO_OK, got {other:?}")),
    }
}

fn connect(endpoint: &str) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(endpoint).map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut out = BytesMut::new();
    Request::Hello {
        min_version: MIN_VERSION,
        max_version: VERSION,
    }
    .encode(1, &mut out);
    s.write_all(&out).map_err(|e| e.to_string())?;
    let mut buf = BytesMut::new();
    match read_answer(&mut s, &mut buf)? {
        Response::HelloOk { .. } => Ok(s),
        other => Err(format!("handshake refused: {other:?}")),
    }
}

fn read_answer(s: &mut TcpStream, buf: &mut BytesMut) -> Result<Response, String> {
    let mut scratch = Scratch::new();
    loop {
        if let Some(f) = frame::decode(buf, MAX_MAX_FRAME_BYTES).map_err(|e| e.to_string())? {
            return Response::parse(&f).map_err(|e| e.to_string());
        }
        if scratch.read_some(s, buf).map_err(|e| e.to_string())? == 0 {
            return Err("closed by the server".into());
        }
    }
}

/// A reusable read buffer: reads copy only what arrived into the frame buffer, never
/// zero-filling spare capacity on the hot path.
struct Scratch(Vec<u8>);

impl Scratch {
    fn new() -> Self {
        Scratch(vec![0; 64 << 10])
    }

    /// Appends what `s` has available to `buf`; `Ok(0)` at end of stream.
    fn read_some(&mut self, s: &mut TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
        let n = s.read(&mut self.0)?;
        buf.extend_from_slice(&self.0[..n]);
        Ok(n)
    }
}

/// Accounts one answer: IDs per unit, counters. Returns (ids, is_error).
fn account(answer: &Response, per_unit: &mut BTreeMap<(u64, u64), u64>) -> (u64, bool) {
    let unit = |id: u64| {
        let f = IdFields::decode(id);
        (f.machine, f.time)
    };
    match answer {
        Response::Id(id) => {
            *per_unit.entry(unit(*id)).or_insert(0) += 1;
            (1, false)
        }
        Response::Ids(runs) => {
            let mut n = 0;
            for IdRun { first, count } in runs {
                *per_unit.entry(unit(*first)).or_insert(0) += count;
                n += count;
            }
            (n, false)
        }
        _ => (0, true),
    }
}

fn closed_loop(
    endpoint: &str,
    cfg: &LoadConfig,
    live: &Live,
    deadline: Instant,
) -> Result<ConnResult, String> {
    let mut s = connect(endpoint)?;
    let request = cfg.request();
    let p = cfg.pipeline;
    // Request ids are slot numbers + 1: a free slot is a free id, its entry the send time.
    let mut sent = vec![Instant::now(); p];
    let mut free: Vec<u32> = (1..=p as u32).rev().collect();
    let mut out = BytesMut::with_capacity(p * 16);
    let mut buf = BytesMut::with_capacity(256 << 10);
    let mut scratch = Scratch::new();
    let mut latency = histogram()?;
    let mut per_unit = BTreeMap::new();
    let mut last_answer = Instant::now();
    let mut now = Instant::now();
    loop {
        if now < deadline {
            while let Some(id) = free.pop() {
                sent[id as usize - 1] = now;
                request.encode(id, &mut out);
            }
            if !out.is_empty() {
                s.write_all(&out).map_err(|e| format!("write: {e}"))?;
                out.clear();
            }
        }
        if free.len() == p && Instant::now() >= deadline {
            break;
        }
        if Instant::now() > deadline + DRAIN {
            return Err(format!(
                "{} answers missing after the drain",
                p - free.len()
            ));
        }
        if scratch
            .read_some(&mut s, &mut buf)
            .map_err(|e| format!("read: {e}"))?
            == 0
        {
            return Err("closed by the server".into());
        }
        now = Instant::now();
        let (mut answers, mut ids, mut errors) = (0, 0, 0);
        while let Some(f) =
            frame::decode(&mut buf, MAX_MAX_FRAME_BYTES).map_err(|e| e.to_string())?
        {
            let answer = Response::parse(&f).map_err(|e| e.to_string())?;
            let slot = (f.request_id as usize).wrapping_sub(1);
            if slot >= p {
                if let Response::GoAway { .. } = answer {
                    return Err("the server said GOAWAY".into());
                }
                return Err(format!("answer with unknown request id {}", f.request_id));
            }
            latency.saturating_record(now.duration_since(sent[slot]).as_nanos() as u64);
            free.push(f.request_id);
            let (n, err) = account(&answer, &mut per_unit);
            answers += 1;
            ids += n;
            errors += u64::from(err);
        }
        if answers > 0 {
            last_answer = now;
            live.requests.fetch_add(answers, Ordering::Relaxed);
            live.ids.fetch_add(ids, Ordering::Relaxed);
            live.errors.fetch_add(errors, Ordering::Relaxed);
        }
    }
    Ok(ConnResult {
        latency,
        service: None,
        per_unit,
        last_answer,
    })
}

/// Slots shared by the sender and the reader of one open-loop connection.
struct Slots {
    intended: Vec<Instant>,
    /// When each request was actually sent (encoded for the write that follows at once).
    written: Vec<Instant>,
    free: Vec<u32>,
}

struct OpenShared {
    slots: Mutex<Slots>,
    freed: Condvar,
    sender_done: AtomicBool,
    failed: AtomicBool,
}

fn open_loop(
    endpoint: &str,
    cfg: &LoadConfig,
    live: &Live,
    start: Instant,
    deadline: Instant,
    rate: u64,
    conn_index: usize,
) -> Result<ConnResult, String> {
    let mut writer = connect(endpoint)?;
    let mut reader = writer.try_clone().map_err(|e| e.to_string())?;
    reader
        .set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| e.to_string())?;
    let p = cfg.pipeline;
    let shared = OpenShared {
        slots: Mutex::new(Slots {
            intended: vec![start; p],
            written: vec![start; p],
            free: (1..=p as u32).rev().collect(),
        }),
        freed: Condvar::new(),
        sender_done: AtomicBool::new(false),
        failed: AtomicBool::new(false),
    };
    // This connection's share of the rate, staggered so connections do not send in lockstep.
    let conns = cfg.connections as u64;
    let interval = Duration::from_nanos((1_000_000_000 * conns / rate).max(1));
    let offset = interval.mul_f64(conn_index as f64 / conns as f64);
    let request = cfg.request();
    thread::scope(|scope| {
        let r = scope.spawn(|| read_open(&mut reader, &shared, live, deadline));
        let sent = send_open(
            &mut writer,
            &shared,
            &request,
            start + offset,
            interval,
            deadline,
        );
        shared.sender_done.store(true, Ordering::Release);
        if sent.is_err() {
            shared.failed.store(true, Ordering::Release);
        }
        let read = r
            .join()
            .map_err(|_| "the reader panicked".to_owned())
            .and_then(|read| read);
        sent.and(read)
    })
}

fn send_open(
    w: &mut TcpStream,
    shared: &OpenShared,
    request: &Request,
    first: Instant,
    interval: Duration,
    deadline: Instant,
) -> Result<(), String> {
    let mut out = BytesMut::with_capacity(4096);
    let mut k: u32 = 0;
    loop {
        let due = first + interval * k;
        if due >= deadline {
            return Ok(());
        }
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        // Send everything due by now; a full pipeline makes us wait, and that wait counts in
        // the latency because each request keeps its intended time.
        let now = Instant::now();
        {
            let mut slots = shared.slots.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                let due = first + interval * k;
                if due > now || due >= deadline {
                    break;
                }
                if slots.free.is_empty() && !out.is_empty() {
                    // Send what is encoded before waiting: its answers are what frees slots.
                    break;
                }
                while slots.free.is_empty() {
                    if shared.failed.load(Ordering::Acquire) {
                        return Err("the reader failed".into());
                    }
                    slots = shared
                        .freed
                        .wait_timeout(slots, Duration::from_millis(100))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                if let Some(id) = slots.free.pop() {
                    slots.intended[id as usize - 1] = due;
                    // The actual send: the write right below, microseconds later.
                    slots.written[id as usize - 1] = Instant::now();
                    request.encode(id, &mut out);
                    k += 1;
                }
                if out.len() > 64 << 10 {
                    break;
                }
            }
        }
        if !out.is_empty() {
            w.write_all(&out).map_err(|e| format!("write: {e}"))?;
            out.clear();
        }
    }
}

fn read_open(
    r: &mut TcpStream,
    shared: &OpenShared,
    live: &Live,
    deadline: Instant,
) -> Result<ConnResult, String> {
    let p = shared
        .slots
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .intended
        .len();
    let mut buf = BytesMut::with_capacity(256 << 10);
    let mut scratch = Scratch::new();
    let mut latency = histogram()?;
    let mut service = histogram()?;
    let mut per_unit = BTreeMap::new();
    let mut last_answer = Instant::now();
    let fail = |m: String| {
        shared.failed.store(true, Ordering::Release);
        shared.freed.notify_all();
        Err(m)
    };
    loop {
        let outstanding = p - shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .free
            .len();
        if shared.sender_done.load(Ordering::Acquire) && outstanding == 0 {
            break;
        }
        if shared.failed.load(Ordering::Acquire) {
            return Err("the sender failed".into());
        }
        if Instant::now() > deadline + DRAIN {
            return fail(format!("{outstanding} answers missing after the drain"));
        }
        match scratch.read_some(r, &mut buf) {
            Ok(0) => return fail("closed by the server".into()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return fail(format!("read: {e}")),
        }
        let now = Instant::now();
        let (mut answers, mut ids, mut errors) = (0, 0, 0);
        let mut slots = shared.slots.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let f = match frame::decode(&mut buf, MAX_MAX_FRAME_BYTES) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    drop(slots);
                    return fail(e.to_string());
                }
            };
            let answer = match Response::parse(&f) {
                Ok(a) => a,
                Err(e) => {
                    drop(slots);
                    return fail(e.to_string());
                }
            };
            let slot = (f.request_id as usize).wrapping_sub(1);
            if slot >= p {
                drop(slots);
                return fail(format!("unexpected answer {answer:?}"));
            }
            latency.saturating_record(now.duration_since(slots.intended[slot]).as_nanos() as u64);
            service.saturating_record(now.duration_since(slots.written[slot]).as_nanos() as u64);
            slots.free.push(f.request_id);
            let (n, err) = account(&answer, &mut per_unit);
            answers += 1;
            ids += n;
            errors += u64::from(err);
        }
        drop(slots);
        if answers > 0 {
            shared.freed.notify_one();
            last_answer = now;
            live.requests.fetch_add(answers, Ordering::Relaxed);
            live.ids.fetch_add(ids, Ordering::Relaxed);
            live.errors.fetch_add(errors, Ordering::Relaxed);
        }
    }
    Ok(ConnResult {
        latency,
        service: Some(service),
        per_unit,
        last_answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(per_unit: &[((u64, u64), u64)]) -> LoadReport {
        LoadReport {
            config: LoadConfig {
                endpoints: vec!["x:1".into()],
                connections: 1,
                pipeline: 1,
                duration: Duration::from_secs(1),
                batch: None,
                rate: None,
            },
            server: ServerInfo {
                machine: 924,
                gen_method: 1,
                id_type: 0,
                id_version: 0,
                lease_state: 0,
                seq_bits: 20,
                time_bits: 30,
                unit_ms: 1000,
                epoch_ms: 0,
                server_pool_start: 924,
                last_issued_time: 0,
                end_of_life_ms: 0,
                max_batch: 65536,
                max_frame_bytes: 65536,
                connections: 1,
                reason: String::new(),
            },
            requests: 0,
            ids: 0,
            errors: 0,
            elapsed: Duration::from_secs(1),
            latency: histogram().unwrap(),
            service: None,
            per_unit: per_unit.iter().copied().collect(),
        }
    }

    #[test]
    fn unit_fill_ignores_the_partial_first_and_last_units() {
        let cap = 1 << 20;
        let r = report(&[
            ((924, 10), 5),
            ((924, 11), cap),
            ((924, 12), cap / 2),
            ((924, 13), 7),
            // A second server, counted on its own: its partial ends are dropped too.
            ((925, 11), 3),
            ((925, 12), cap),
            ((925, 13), 9),
        ]);
        let (fill, units) = r.unit_fill().unwrap();
        assert_eq!(units, 3);
        assert!((fill - 2.5 / 3.0).abs() < 1e-9, "{fill}");
        assert!(
            report(&[((924, 1), 1), ((924, 2), 2)])
                .unit_fill()
                .is_none()
        );
    }

    #[test]
    fn settings_are_checked_with_the_flag_named() {
        let mut c = report(&[]).config;
        c.validate().unwrap();
        c.pipeline = 0;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "--pipeline 0 is out of range: allowed 1..=65536"
        );
        c.pipeline = 1;
        c.duration = Duration::from_millis(10);
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .starts_with("--duration")
        );
    }
}
