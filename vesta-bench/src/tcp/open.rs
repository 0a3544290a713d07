//! The open loop on one connection: a sender thread writes each request at its due time from the
//! schedule and a reader thread matches the answers, so neither waits for the other. A request
//! that finds the pipeline full waits for a free slot, and that wait counts in its latency
//! because it keeps its intended time. Each answer is also timed from its actual write
//! ("service"), which tells the tool's own lateness apart.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use vesta_server::proto::Dialect;

use super::conn::{Conn, Reader};
use super::{Requests, account, slot_of};
use crate::engine::{Ctx, DRAIN};
use crate::schedule::{Schedule, sleep_until};
use crate::tally::Tally;

/// Written requests are sent once this many bytes are encoded, even if more are due.
const MAX_WRITE: usize = 64 << 10;

/// The pipeline's slots; request id = slot + 1.
struct Slots {
    /// When each request was due.
    intended: Vec<Instant>,
    /// When each request was encoded for the write that follows at once.
    written: Vec<Instant>,
    in_flight: Vec<bool>,
    free: Vec<u32>,
}

/// What the sender and the reader of one connection share.
struct Shared {
    slots: Mutex<Slots>,
    /// Signalled when the reader frees slots.
    freed: Condvar,
    sender_done: AtomicBool,
    /// Set by whichever side failed; the other stops quietly and the failure is reported once.
    failed: AtomicBool,
}

impl Shared {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        self.freed.notify_all();
    }

    fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

/// Sends on the schedule until the deadline, then waits (up to the drain) for the answers.
pub(super) fn run(
    conn: Conn,
    requests: Requests,
    pipeline: usize,
    schedule: Schedule,
    ctx: &Ctx<'_>,
) -> Result<Tally, String> {
    let Conn { writer, reader } = conn;
    let seq = requests.seq_count();
    let dialect = reader.dialect.clone();
    let shared = Shared {
        slots: Mutex::new(Slots {
            intended: vec![ctx.start; pipeline],
            written: vec![ctx.start; pipeline],
            in_flight: vec![false; pipeline],
            free: (1..=pipeline as u32).rev().collect(),
        }),
        freed: Condvar::new(),
        sender_done: AtomicBool::new(false),
        failed: AtomicBool::new(false),
    };
    thread::scope(|scope| {
        let reading = scope.spawn(|| {
            let r = read(reader, &shared, pipeline, seq, ctx);
            if r.is_err() {
                shared.fail();
            }
            r
        });
        let sent = send(writer, &shared, requests, &dialect, schedule, ctx);
        if sent.is_err() {
            shared.fail();
        }
        shared.sender_done.store(true, Ordering::Release);
        let tally = reading
            .join()
            .map_err(|_| "the reader thread panicked".to_owned())??;
        sent.map(|()| tally)
    })
}

fn send(
    mut writer: TcpStream,
    shared: &Shared,
    mut requests: Requests,
    dialect: &Dialect,
    mut schedule: Schedule,
    ctx: &Ctx<'_>,
) -> Result<(), String> {
    use std::io::Write;
    let mut out = BytesMut::with_capacity(4096);
    loop {
        if schedule.due() >= ctx.deadline || shared.failed() || ctx.live.stopped() {
            return Ok(());
        }
        sleep_until(schedule.due());
        // Encode everything due by now; with the pipeline full, first send what is encoded
        // (its answers are what frees slots), then wait for the reader.
        let now = Instant::now();
        {
            let mut slots = shared.slots();
            loop {
                let due = schedule.due();
                if due > now || due >= ctx.deadline || out.len() >= MAX_WRITE {
                    break;
                }
                let Some(id) = slots.free.pop() else {
                    if !out.is_empty() || shared.failed() || ctx.live.stopped() {
                        break;
                    }
                    slots = shared
                        .freed
                        .wait_timeout(slots, Duration::from_millis(100))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    continue;
                };
                let slot = id as usize - 1;
                slots.intended[slot] = due;
                slots.written[slot] = Instant::now();
                slots.in_flight[slot] = true;
                requests.encode(id, dialect, &mut out);
                schedule.advance();
            }
        }
        if !out.is_empty() {
            writer.write_all(&out).map_err(|e| format!("write: {e}"))?;
            out.clear();
        }
    }
}

fn read(
    mut reader: Reader,
    shared: &Shared,
    pipeline: usize,
    seq: Option<u32>,
    ctx: &Ctx<'_>,
) -> Result<Tally, String> {
    let mut tally = Tally::new(true);
    let layout = reader.dialect.layout.clone();
    loop {
        let outstanding = pipeline - shared.slots().free.len();
        if shared.sender_done.load(Ordering::Acquire) && outstanding == 0
            || shared.failed()
            || ctx.live.stopped()
        {
            return Ok(tally);
        }
        if Instant::now() > ctx.deadline + DRAIN {
            return Err(format!(
                "{outstanding} answers missing {DRAIN:?} after the end"
            ));
        }
        if !reader.fill()? {
            continue;
        }
        let now = Instant::now();
        let (mut answers, mut ids, mut errors) = (0, 0, 0);
        let mut slots = shared.slots();
        while let Some((request_id, answer)) = reader.next()? {
            let slot = slot_of(request_id, &answer, pipeline)?;
            if !std::mem::replace(&mut slots.in_flight[slot], false) {
                return Err(format!("a second answer to request id {request_id}"));
            }
            tally.answer(slots.intended[slot], slots.written[slot], now);
            slots.free.push(request_id);
            let (n, error) = account(&mut tally, &answer, &layout, seq)?;
            answers += 1;
            ids += n;
            errors += u64::from(error);
        }
        drop(slots);
        if answers > 0 {
            shared.freed.notify_one();
            ctx.live.add(answers, ids, errors);
        }
    }
}
