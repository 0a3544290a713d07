//! The Redis peer of the seq load: `INCR key` (`INCRBY key count` with a batch) on C
//! connections, each keeping P commands in flight, closed loop: the shape of the TCP load.
//!
//! A minimal RESP client of our own, no crate: commands are written as RESP arrays of bulk
//! strings (`*2\r\n$4\r\nINCR\r\n$<len>\r\n<key>\r\n`) and replies read as integers
//! (`:<n>\r\n`), simple strings (`+PONG\r\n`) or errors (`-ERR ...\r\n`). Redis answers a
//! connection's commands in order, so a reply belongs to the oldest command in flight: no
//! request ids, a queue of send times.

use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};

use super::Keys;
use crate::config::{BenchError, TcpLoad};
use crate::engine::{self, Ctx, DRAIN, Progress, Worker};
use crate::report::{Protocol, Report, Target};
use crate::tally::Tally;
use crate::tcp::conn::{CONNECT_TIMEOUT, connect_halves};

/// A reply, as far as the load reads one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `:<n>`: `INCR`'s new value.
    Int(i64),
    /// `+<text>`: `PING`'s `PONG`.
    Simple(String),
    /// `-<text>`: an error, its first word the kind (`ERR`, `WRONGTYPE`, ...).
    Error(String),
}

/// Appends `INCR key`, or `INCRBY key by`, as a RESP array of bulk strings.
pub(crate) fn encode_incr(key: &str, by: Option<u32>, out: &mut BytesMut) {
    let mut n = itoa::Buffer::new();
    match by {
        None => out.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n"),
        Some(_) => out.extend_from_slice(b"*3\r\n$6\r\nINCRBY\r\n"),
    }
    bulk(key.as_bytes(), &mut n, out);
    if let Some(by) = by {
        let mut b = itoa::Buffer::new();
        bulk(b.format(by).as_bytes(), &mut n, out);
    }
}

fn bulk(s: &[u8], n: &mut itoa::Buffer, out: &mut BytesMut) {
    out.extend_from_slice(b"$");
    out.extend_from_slice(n.format(s.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

/// Takes the next whole reply off `buf`; `None` until one has fully arrived. A reply of a type
/// the load never asks for (bulk strings, arrays) is an error.
pub(crate) fn parse(buf: &mut BytesMut) -> Result<Option<Reply>, String> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        if buf.len() > 64 << 10 {
            return Err("a RESP line of over 64 KiB without its end".into());
        }
        return Ok(None);
    };
    if end == 0 {
        return Err("an empty RESP line".into());
    }
    let line = &buf[1..end];
    let text = || String::from_utf8_lossy(line).into_owned();
    let reply = match buf[0] {
        b':' => Reply::Int(
            std::str::from_utf8(line)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| format!("`:{}` is not a RESP integer", text()))?,
        ),
        b'+' => Reply::Simple(text()),
        b'-' => Reply::Error(text()),
        _ => {
            return Err(format!(
                "unexpected RESP reply `{}`",
                String::from_utf8_lossy(&buf[..end])
            ));
        }
    };
    buf.advance(end + 2);
    Ok(Some(reply))
}

/// One connection to Redis: the write half, the read half and what has arrived.
struct RedisConn {
    writer: TcpStream,
    reader: TcpStream,
    buf: BytesMut,
    scratch: Box<[u8]>,
}

impl RedisConn {
    fn connect(target: &str) -> Result<RedisConn, String> {
        let (stream, reader) = connect_halves(target)?;
        Ok(RedisConn {
            writer: stream,
            reader,
            buf: BytesMut::with_capacity(64 << 10),
            scratch: vec![0; 64 << 10].into_boxed_slice(),
        })
    }

    /// Reads what has arrived (waiting up to 50 ms); `Ok(false)` when nothing came in time.
    fn fill(&mut self) -> Result<bool, String> {
        crate::tcp::conn::fill(&mut self.reader, &mut self.scratch, &mut self.buf)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.writer
            .write_all(bytes)
            .map_err(|e| format!("write: {e}"))
    }

    /// Sends `PING` and waits for `PONG`: the server is Redis (or speaks RESP) and answers.
    fn ping(&mut self) -> Result<(), String> {
        self.write(b"*1\r\n$4\r\nPING\r\n")?;
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        loop {
            match parse(&mut self.buf)? {
                Some(Reply::Simple(s)) if s == "PONG" => return Ok(()),
                Some(other) => return Err(format!("PING answered {other:?}, not PONG")),
                None if Instant::now() > deadline => {
                    return Err(format!("no answer to PING within {CONNECT_TIMEOUT:?}"));
                }
                None => {
                    self.fill()?;
                }
            }
        }
    }
}

/// Runs the Redis peer of a seq load (`config.peer` is Redis, `config.seq_keys` set).
pub(crate) fn run(
    config: TcpLoad,
    n: u64,
    tick: Duration,
    progress: impl FnMut(Progress),
) -> Result<Report, BenchError> {
    let targets = engine::describe_targets(&config.load, |address| {
        RedisConn::connect(address)?.ping()?;
        Ok(Target::unknown(address))
    })?;
    let (pipeline, by) = (config.pipeline, config.load.batch);
    let outcome = engine::drive(&config.load, tick, progress, |conn, target| {
        let mut c = RedisConn::connect(target)?;
        c.ping()?;
        Ok(RedisWorker {
            conn: c,
            keys: Keys::shaped(n, conn, config.seq_shape),
            by,
            pipeline,
        })
    })?;
    let mut report = outcome.into_report(Protocol::Redis { pipeline }, config.load, targets);
    report.seq_keys = Some(n);
    report.seq_shape = config.seq_shape;
    Ok(report)
}

struct RedisWorker {
    conn: RedisConn,
    keys: Keys,
    by: Option<u32>,
    pipeline: usize,
}

impl Worker for RedisWorker {
    /// The closed loop: keep `pipeline` commands in flight until the deadline, then wait (up
    /// to the drain) for the replies. Latency counts from the send.
    fn run(mut self, ctx: &Ctx<'_>) -> Result<Tally, String> {
        let mut tally = Tally::new(false);
        let asked = u64::from(self.by.unwrap_or(1));
        let mut sent: VecDeque<Instant> = VecDeque::with_capacity(self.pipeline);
        let mut out = BytesMut::with_capacity(self.pipeline * 32);
        loop {
            if ctx.live.stopped() {
                return Ok(tally);
            }
            let now = Instant::now();
            if now < ctx.deadline {
                while sent.len() < self.pipeline {
                    sent.push_back(now);
                    encode_incr(self.keys.next_text().0, self.by, &mut out);
                }
                if !out.is_empty() {
                    self.conn.write(&out)?;
                    out.clear();
                }
            } else if sent.is_empty() {
                return Ok(tally);
            } else if now > ctx.deadline + DRAIN {
                return Err(format!(
                    "{} replies missing {DRAIN:?} after the end",
                    sent.len()
                ));
            }
            if !self.conn.fill()? {
                continue;
            }
            let now = Instant::now();
            let (mut answers, mut numbers, mut errors) = (0, 0, 0);
            while let Some(reply) = parse(&mut self.conn.buf)? {
                let at = sent
                    .pop_front()
                    .ok_or_else(|| format!("a reply with no command in flight: {reply:?}"))?;
                tally.answer(at, at, now);
                answers += 1;
                match reply {
                    // The key's value after the call: at least the count it was moved by.
                    Reply::Int(v) if v >= 0 && v as u64 >= asked => numbers += asked,
                    Reply::Int(v) => {
                        return Err(format!("INCR by {asked} answered {v}: below the count"));
                    }
                    Reply::Error(text) => {
                        let kind = text.split_whitespace().next().unwrap_or("ERR").to_owned();
                        tally.error(&kind, || text.clone());
                        errors += 1;
                    }
                    Reply::Simple(s) => return Err(format!("INCR answered +{s}")),
                }
            }
            if answers > 0 {
                ctx.live.add(answers, numbers, errors);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_resp_arrays_of_bulk_strings() {
        let mut out = BytesMut::new();
        encode_incr("42", None, &mut out);
        assert_eq!(&out[..], b"*2\r\n$4\r\nINCR\r\n$2\r\n42\r\n");
        out.clear();
        encode_incr("18446744073709551615", Some(1000), &mut out);
        assert_eq!(
            &out[..],
            &b"*3\r\n$6\r\nINCRBY\r\n$20\r\n18446744073709551615\r\n$4\r\n1000\r\n"[..]
        );
    }

    #[test]
    fn replies_are_read_whole_and_in_order() {
        let mut buf =
            BytesMut::from(&b":1\r\n:9223372036854775807\r\n+PONG\r\n-ERR value is not"[..]);
        assert_eq!(parse(&mut buf), Ok(Some(Reply::Int(1))));
        assert_eq!(parse(&mut buf), Ok(Some(Reply::Int(i64::MAX))));
        assert_eq!(parse(&mut buf), Ok(Some(Reply::Simple("PONG".into()))));
        // Cut short: nothing until the rest arrives, and nothing is consumed.
        assert_eq!(parse(&mut buf), Ok(None));
        buf.extend_from_slice(b" an integer or out of range\r\n:");
        assert_eq!(
            parse(&mut buf),
            Ok(Some(Reply::Error(
                "ERR value is not an integer or out of range".into()
            )))
        );
        assert_eq!(parse(&mut buf), Ok(None));
        buf.extend_from_slice(b"-3\r\n");
        assert_eq!(parse(&mut buf), Ok(Some(Reply::Int(-3))));
        assert!(buf.is_empty());
        let mut bulk = BytesMut::from(&b"$5\r\nhello\r\n"[..]);
        assert_eq!(parse(&mut bulk), Err("unexpected RESP reply `$5`".into()));
        let mut empty = BytesMut::from(&b"\r\n"[..]);
        assert_eq!(parse(&mut empty), Err("an empty RESP line".into()));
        let mut bad = BytesMut::from(&b":x1\r\n"[..]);
        assert_eq!(parse(&mut bad), Err("`:x1` is not a RESP integer".into()));
    }
}
