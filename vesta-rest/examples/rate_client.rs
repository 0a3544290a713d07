//! A bounded, rate-limited HTTP/1.1 load client with coordinated-omission-corrected latency.
//!
//! Request `i` is due at `start + i / rate`, whatever happened before it; its latency is counted
//! from that due time to the end of its response, so a stall of the server shows up in every
//! request it delayed (the correction wrk's closed loop lacks). Each of `--connections` threads
//! owns one keep-alive connection and the requests `i ≡ k (mod connections)`; threads sleep
//! precisely (not on a 1 ms async timer) until a request is due. Latencies go to an HDR
//! histogram (1 µs .. 60 s, 3 significant digits).
//!
//! `cargo run --release -p vesta-rest --example rate_client -- --addr 127.0.0.1:8080 \
//!   --path /genid --rate 20000 --seconds 30 --connections 16 [--warmup-seconds 3]`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

struct Opts {
    addr: String,
    path: String,
    rate: f64,
    seconds: f64,
    warmup: f64,
    connections: usize,
}

fn parse_opts() -> Result<Opts, String> {
    let mut o = Opts {
        addr: "127.0.0.1:8080".into(),
        path: "/genid".into(),
        rate: 20_000.0,
        seconds: 30.0,
        warmup: 3.0,
        connections: 16,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<f64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--addr" => o.addr = value,
            "--path" => o.path = value,
            "--rate" => o.rate = num(&value)?,
            "--seconds" => o.seconds = num(&value)?,
            "--warmup-seconds" => o.warmup = num(&value)?,
            "--connections" => o.connections = num(&value)? as usize,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if !(o.rate > 0.0 && o.seconds > 0.0 && o.seconds <= 600.0 && o.connections >= 1) {
        return Err("need rate > 0, 0 < seconds <= 600, connections >= 1".into());
    }
    Ok(o)
}

/// What one connection thread measured.
struct Part {
    corrected: Histogram<u64>,
    service: Histogram<u64>,
    sent: u64,
    errors: u64,
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// Sends one request and reads the whole response; the status line must be 200.
fn roundtrip(
    w: &mut TcpStream,
    r: &mut BufReader<TcpStream>,
    request: &[u8],
    line: &mut String,
    body: &mut Vec<u8>,
) -> Result<(), String> {
    w.write_all(request).map_err(|e| e.to_string())?;
    line.clear();
    r.read_line(line).map_err(|e| e.to_string())?;
    if !line.starts_with("HTTP/1.1 200") {
        return Err(format!("status line {line:?}"));
    }
    let mut len = 0usize;
    loop {
        line.clear();
        if r.read_line(line).map_err(|e| e.to_string())? == 0 {
            return Err("closed".into());
        }
        if line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().map_err(|_| "bad content-length")?;
            }
        }
    }
    body.resize(len, 0);
    r.read_exact(body).map_err(|e| e.to_string())
}

/// Sleeps until `t` (thread sleep to ~60 µs before it, then yields).
fn sleep_until(t: Instant) {
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > Duration::from_micros(80) {
            std::thread::sleep(left - Duration::from_micros(60));
        } else {
            std::thread::yield_now();
        }
    }
}

fn run_connection(o: &Opts, k: usize, start: Instant, measure_from: Instant, end: Instant) -> Part {
    let mut part = Part {
        corrected: new_hist(),
        service: new_hist(),
        sent: 0,
        errors: 0,
    };
    let request = format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", o.path, o.addr).into_bytes();
    let connect = || -> Option<(TcpStream, BufReader<TcpStream>)> {
        let s = TcpStream::connect(&o.addr).ok()?;
        s.set_nodelay(true).ok()?;
        let r = BufReader::new(s.try_clone().ok()?);
        Some((s, r))
    };
    let Some((mut w, mut r)) = connect() else {
        part.errors += 1;
        return part;
    };
    let (mut line, mut body) = (String::new(), Vec::new());
    let gap = Duration::from_secs_f64(1.0 / o.rate);
    let mut i = k as u64;
    loop {
        let due = start + gap.mul_f64(i as f64);
        if due >= end {
            break;
        }
        sleep_until(due);
        let sent_at = Instant::now();
        let ok = roundtrip(&mut w, &mut r, &request, &mut line, &mut body);
        let done = Instant::now();
        part.sent += 1;
        match ok {
            Ok(()) if due >= measure_from => {
                let us = |d: Duration| (d.as_micros() as u64).max(1);
                let _ = part.corrected.record(us(done - due));
                let _ = part.service.record(us(done - sent_at));
            }
            Ok(()) => {}
            Err(e) => {
                part.errors += 1;
                if part.errors == 1 {
                    eprintln!("connection {k}: {e}");
                }
                match connect() {
                    Some((nw, nr)) => (w, r) = (nw, nr),
                    None => break,
                }
            }
        }
        i += o.connections as u64;
    }
    part
}

fn main() {
    let o = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rate_client: {e}");
            std::process::exit(2);
        }
    };
    let start = Instant::now() + Duration::from_millis(200);
    let measure_from = start + Duration::from_secs_f64(o.warmup);
    let end = measure_from + Duration::from_secs_f64(o.seconds);
    let parts: Vec<Part> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..o.connections)
            .map(|k| {
                let o = &o;
                s.spawn(move || run_connection(o, k, start, measure_from, end))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("connection thread panicked"))
            .collect()
    });
    let mut corrected = new_hist();
    let mut service = new_hist();
    let (mut sent, mut errors) = (0, 0);
    for p in &parts {
        corrected.add(&p.corrected).expect("same bounds");
        service.add(&p.service).expect("same bounds");
        sent += p.sent;
        errors += p.errors;
    }
    let measured = corrected.len();
    println!(
        "target {:.0} req/s over {} connections for {:.1} s (after {:.1} s warm-up): {} measured, \
         {:.0} req/s achieved, {} sent, {} errors",
        o.rate,
        o.connections,
        o.seconds,
        o.warmup,
        measured,
        measured as f64 / o.seconds,
        sent,
        errors
    );
    for (name, h) in [
        ("corrected (from due time)", &corrected),
        ("service (from send)", &service),
    ] {
        println!(
            "{name:>26}: p50 {} us  p90 {} us  p99 {} us  p99.9 {} us  p99.99 {} us  max {} us",
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.9),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.999),
            h.value_at_quantile(0.9999),
            h.max()
        );
    }
}
