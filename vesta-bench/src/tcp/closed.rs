//! The closed loop on one connection: keep the pipeline full, refilling it as answers come back,
//! so the run measures what the server can do. Latency counts from the send.

use std::time::Instant;

use bytes::BytesMut;

use super::conn::Conn;
use super::{Requests, account, slot_of};
use crate::engine::{Ctx, DRAIN};
use crate::tally::Tally;

/// Runs until the deadline, then waits (up to the drain) for the answers in flight.
pub(super) fn run(
    mut conn: Conn,
    mut requests: Requests,
    pipeline: usize,
    ctx: &Ctx<'_>,
) -> Result<Tally, String> {
    let mut tally = Tally::new(false);
    let layout = conn.reader.dialect.layout.clone();
    let seq = requests.seq_count();
    // Request ids are slot + 1: a free slot is a free id, its entry the send time.
    let mut sent = vec![ctx.start; pipeline];
    let mut in_flight = vec![false; pipeline];
    let mut free: Vec<u32> = (1..=pipeline as u32).rev().collect();
    let mut out = BytesMut::with_capacity(pipeline * 16);
    loop {
        if ctx.live.stopped() {
            return Ok(tally);
        }
        let now = Instant::now();
        if now < ctx.deadline {
            while let Some(id) = free.pop() {
                let slot = id as usize - 1;
                sent[slot] = now;
                in_flight[slot] = true;
                requests.encode(id, &conn.reader.dialect, &mut out);
            }
            if !out.is_empty() {
                conn.write(&out)?;
                out.clear();
            }
        } else if free.len() == pipeline {
            return Ok(tally);
        } else if now > ctx.deadline + DRAIN {
            return Err(format!(
                "{} answers missing {DRAIN:?} after the end",
                pipeline - free.len()
            ));
        }
        if !conn.reader.fill()? {
            continue;
        }
        let now = Instant::now();
        let (mut answers, mut ids, mut errors) = (0, 0, 0);
        while let Some((request_id, answer)) = conn.reader.next()? {
            let slot = slot_of(request_id, &answer, pipeline)?;
            if !std::mem::replace(&mut in_flight[slot], false) {
                return Err(format!("a second answer to request id {request_id}"));
            }
            tally.answer(sent[slot], sent[slot], now);
            free.push(request_id);
            let (n, error) = account(&mut tally, &answer, &layout, seq)?;
            answers += 1;
            ids += n;
            errors += u64::from(error);
        }
        if answers > 0 {
            ctx.live.add(answers, ids, errors);
        }
    }
}
