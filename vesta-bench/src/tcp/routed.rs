//! The seq load on a cluster (`--server A,B,... --seq-keys N`; docs/seq-cluster.md): each
//! connection of the run holds a socket to every server given (and to any member a move names),
//! and sends each key's `SEQ_NEXT` to the member that owns the key's set. Owners are learned
//! from the answers, as a client does: a member answers a key of another's set `SEQ_MOVED`
//! with the owner's address; the request is resent there at once (same request id, its latency
//! still counted from the first send) and the set remembered as that member's. `SEQ_MOVING`
//! (the set is changing hands) is retried after a pause on the next member. Moves and retries
//! are counted apart from errors; a request moved more than [`MAX_HOPS`] times in a row is
//! counted as the error it was last answered.
//!
//! One thread per connection, like the direct engine: the sockets stay blocking (writes wait
//! as there), and `poll(2)` tells which have answers to read. A set's owner is kept per
//! connection in a table of the 256 sets (`SeqKey::set`), so a key costs an array lookup.
//! Only a run given more than one server comes here: a single server keeps the direct loop
//! ([`super::closed`], [`super::open`]) with nothing added.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use vesta_seq::SeqKey;
use vesta_seq::sets::SETS;
use vesta_server::proto::{ErrorCode, Request, Response};

use super::conn::Conn;
use super::{account, slot_of};
use crate::engine::{Ctx, DRAIN};
use crate::seq::Keys;
use crate::tally::Tally;

/// Moves followed for one request in a row before its answer counts as an error (members that
/// disagree settle within a beat; the Rust client gives up at the same count).
pub(crate) const MAX_HOPS: u8 = 8;
/// The pause before a request answered `SEQ_MOVING` is sent again.
const MOVING_PAUSE: Duration = Duration::from_millis(10);
/// The longest wait in `poll` before the loop checks its clock and flags.
const POLL: Duration = Duration::from_millis(50);
/// No owner learned yet for a set: its keys go to the connection's own server.
const UNKNOWN: u16 = u16::MAX;

/// A member this connection talks to.
struct Member {
    address: String,
    conn: Conn,
    /// Requests encoded for it, written once per turn of the loop.
    out: BytesMut,
    /// Final answers it gave.
    served: u64,
}

/// One connection of a cluster run, connected to every server given.
pub(crate) struct Routed {
    members: Vec<Member>,
    /// The server of this connection (`--server`'s round-robin): keys of sets not yet learned
    /// go there.
    home: u16,
    keys: Keys,
    count: u32,
    pipeline: usize,
}

impl Routed {
    /// Connection `conn` of a run on `targets` (more than one).
    pub(crate) fn connect(
        targets: &[String],
        conn: usize,
        keys: Keys,
        count: u32,
        pipeline: usize,
    ) -> Result<Routed, String> {
        let members = targets
            .iter()
            .map(|t| member(t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Routed {
            members,
            home: (conn % targets.len()) as u16,
            keys,
            count,
            pipeline,
        })
    }

    /// Runs until the deadline (closed loop, or on the schedule), then waits (up to the drain)
    /// for the answers in flight, moves and retries included.
    pub(crate) fn run(mut self, ctx: &Ctx<'_>) -> Result<Tally, String> {
        let mut tally = Tally::new(ctx.schedule.is_some());
        self.drive(ctx, &mut tally)?;
        for m in &self.members {
            tally.served(&m.address, m.served);
        }
        Ok(tally)
    }

    fn drive(&mut self, ctx: &Ctx<'_>, tally: &mut Tally) -> Result<(), String> {
        let pipeline = self.pipeline;
        let mut schedule = ctx.schedule;
        let layout = self.members[0].conn.reader.dialect.layout.clone();
        let seq = Some(self.count);
        let mut owner = [UNKNOWN; SETS as usize];
        // Per slot (request id = slot + 1): when it was due, when first written, its key, the
        // member it was last sent to, the moves it took.
        let mut intended = vec![ctx.start; pipeline];
        let mut written = vec![ctx.start; pipeline];
        let mut key = vec![0u64; pipeline];
        let mut at = vec![0u16; pipeline];
        let mut hops = vec![0u8; pipeline];
        let mut in_flight = vec![false; pipeline];
        let mut free: Vec<u32> = (1..=pipeline as u32).rev().collect();
        // Requests answered SEQ_MOVING, with when to send them again.
        let mut parked: Vec<(Instant, usize)> = Vec::new();
        let mut text = itoa::Buffer::new();
        let mut ready: Vec<usize> = Vec::with_capacity(self.members.len());
        loop {
            if ctx.live.stopped() {
                return Ok(());
            }
            let now = Instant::now();
            // Retries whose pause is over, to the member their set now points at.
            let mut i = 0;
            while i < parked.len() {
                if parked[i].0 <= now {
                    let (_, slot) = parked.swap_remove(i);
                    let m = route(&owner, key[slot], self.home);
                    at[slot] = m;
                    self.send(m, slot, key[slot], &mut text);
                } else {
                    i += 1;
                }
            }
            if now < ctx.deadline {
                while let Some(&id) = free.last() {
                    let due = match &mut schedule {
                        None => now,
                        Some(s) if s.due() <= now && s.due() < ctx.deadline => {
                            let due = s.due();
                            s.advance();
                            due
                        }
                        Some(_) => break,
                    };
                    free.pop();
                    let slot = id as usize - 1;
                    let k = self.keys.next_key();
                    let m = route(&owner, k, self.home);
                    (intended[slot], written[slot], key[slot]) = (due, Instant::now(), k);
                    (at[slot], hops[slot], in_flight[slot]) = (m, 0, true);
                    self.send(m, slot, k, &mut text);
                }
            } else if free.len() == pipeline {
                return Ok(());
            } else if now > ctx.deadline + DRAIN {
                return Err(format!(
                    "{} answers missing {DRAIN:?} after the end",
                    pipeline - free.len()
                ));
            }
            for m in &mut self.members {
                if !m.out.is_empty() {
                    m.conn.write(&m.out)?;
                    m.out.clear();
                }
            }
            // Wait for answers, at most until the next retry or the next request is due.
            let mut wait = POLL;
            if let Some(next) = parked.iter().map(|p| p.0).min() {
                wait = wait.min(next.saturating_duration_since(now));
            }
            // (With the pipeline full, a request due waits for an answer, not for its time.)
            if let Some(s) = &schedule
                && now < ctx.deadline
                && !free.is_empty()
            {
                wait = wait.min(s.due().saturating_duration_since(Instant::now()));
            }
            self.readable(wait, &mut ready)?;
            if ready.is_empty() {
                continue;
            }
            let now = Instant::now();
            let (mut answers, mut numbers, mut errors) = (0, 0, 0);
            for &m in &ready {
                if !self.members[m].conn.reader.fill()? {
                    continue;
                }
                while let Some((request_id, answer)) = self.members[m].conn.reader.next()? {
                    let slot = slot_of(request_id, &answer, pipeline)?;
                    if !in_flight[slot] || usize::from(at[slot]) != m {
                        return Err(format!(
                            "an answer to request id {request_id} from {}, which it was not \
                             (or no longer) sent to",
                            self.members[m].address
                        ));
                    }
                    let set = set_of(key[slot]);
                    match &answer {
                        Response::Error {
                            code: ErrorCode::SeqMoved,
                            message,
                        } if hops[slot] < MAX_HOPS => {
                            let address = message.split(' ').next().unwrap_or_default();
                            let to = self.member_at(address)?;
                            owner[set] = to;
                            (at[slot], hops[slot]) = (to, hops[slot] + 1);
                            tally.moves += 1;
                            self.send(to, slot, key[slot], &mut text);
                            continue;
                        }
                        Response::Error {
                            code: ErrorCode::SeqMoving,
                            ..
                        } => {
                            // Ask the next member after the pause: this one may be the one cut
                            // off from the database while another has taken the set.
                            owner[set] = ((m + 1) % self.members.len()) as u16;
                            tally.moving += 1;
                            parked.push((now + MOVING_PAUSE, slot));
                            continue;
                        }
                        Response::Seq { .. } => owner[set] = m as u16,
                        _ => {}
                    }
                    in_flight[slot] = false;
                    free.push(request_id);
                    tally.answer(intended[slot], written[slot], now);
                    let (n, error) = account(tally, &answer, &layout, seq)?;
                    self.members[m].served += 1;
                    answers += 1;
                    numbers += n;
                    errors += u64::from(error);
                }
            }
            if answers > 0 {
                ctx.live.add(answers, numbers, errors);
            }
            // Moved requests are written with the next turn's.
        }
    }

    /// Encodes `SEQ_NEXT` of `key` with request id `slot + 1` for member `m`.
    fn send(&mut self, m: u16, slot: usize, key: u64, text: &mut itoa::Buffer) {
        let member = &mut self.members[usize::from(m)];
        Request::SeqNext {
            count: self.count,
            key: Bytes::copy_from_slice(text.format(key).as_bytes()),
        }
        .encode(
            slot as u32 + 1,
            &member.conn.reader.dialect,
            &mut member.out,
        );
    }

    /// The member at `address` (as a move names it), connected now if it is new.
    fn member_at(&mut self, address: &str) -> Result<u16, String> {
        if let Some(i) = self.members.iter().position(|m| m.address == address) {
            return Ok(i as u16);
        }
        if self.members.len() >= usize::from(UNKNOWN) {
            return Err(format!("too many members to follow a move to {address}"));
        }
        let m = member(address).map_err(|e| format!("the member {address} a move named: {e}"))?;
        self.members.push(m);
        Ok((self.members.len() - 1) as u16)
    }

    /// Fills `ready` with the members that have bytes to read (or a closed or failed socket,
    /// which the read then reports), waiting up to `wait`.
    fn readable(&self, wait: Duration, ready: &mut Vec<usize>) -> Result<(), String> {
        ready.clear();
        let mut fds: Vec<PollFd<'_>> = self
            .members
            .iter()
            .map(|m| PollFd::from_borrowed_fd(m.conn.reader.fd(), PollFlags::IN))
            .collect();
        let timeout = Timespec::try_from(wait).map_err(|e| e.to_string())?;
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(format!("poll: {e}")),
        }
        ready.extend(
            fds.iter()
                .enumerate()
                .filter(|(_, fd)| !fd.revents().is_empty())
                .map(|(i, _)| i),
        );
        Ok(())
    }
}

/// The member `owner` names for `key`'s set, else `home`.
fn route(owner: &[u16; SETS as usize], key: u64, home: u16) -> u16 {
    match owner[set_of(key)] {
        UNKNOWN => home,
        m => m,
    }
}

/// The set of numeric key `key` (its section's, `SeqKey::set`).
fn set_of(key: u64) -> usize {
    SeqKey::Num(key).set().get() as usize
}

fn member(address: &str) -> Result<Member, String> {
    Ok(Member {
        address: address.to_owned(),
        conn: Conn::connect(address)?,
        out: BytesMut::with_capacity(4096),
        served: 0,
    })
}
