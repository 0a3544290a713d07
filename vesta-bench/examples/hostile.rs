//! Clients an operator should expect on an exposed port, for trying a server by hand: each mode
//! runs for `--seconds`, while a polite client asks for one ID every 100 ms on a fresh
//! connection and the server's RSS is read from `/proc/<pid>/status` (`--pid`, optional).
//! Everything stops by itself; nothing here retries forever.
//!
//! - `idle-h2`: HTTP/2 connections that open no stream and PING the server every 100 ms;
//! - `zero-window`: HTTP/2 connections with `SETTINGS_INITIAL_WINDOW_SIZE` 0 that open streams
//!   of `/genids?count=N` (`/genid` for N = 0) and never read (then leave, and RSS is watched
//!   for 5 s more);
//! - `slowloris`: HTTP/1 connections that send a request head one byte every 500 ms;
//! - `noread-h1`: HTTP/1 connections that pipeline `/genids` requests and never read;
//! - `greedy-rest`: HTTP/2 connections saturating the issuer with `/genids?count=N`;
//! - `greedy-tcp`: TCP connections pipelining `NEXT_IDS N` (`--addr` is then the TCP server;
//!   the polite client sends single `NEXT_ID`s on its own connection).
//!
//! `cargo run --release -p vesta-bench --example hostile -- MODE --addr 127.0.0.1:8080
//!   [--pid PID] [--conns 16] [--streams 100] [--count 10000] [--seconds 10]`

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Opts {
    mode: String,
    addr: SocketAddr,
    pid: Option<u32>,
    conns: usize,
    streams: usize,
    count: u64,
    seconds: u64,
}

fn parse() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().ok_or("usage: hostile MODE --addr A [...]")?;
    let mut o = Opts {
        mode,
        addr: "127.0.0.1:8080".parse().unwrap(),
        pid: None,
        conns: 16,
        streams: 100,
        count: 10_000,
        seconds: 10,
    };
    while let Some(flag) = args.next() {
        let v = args.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {v}: {e}");
        match flag.as_str() {
            "--addr" => o.addr = v.parse().map_err(|e| bad(&e))?,
            "--pid" => o.pid = Some(v.parse().map_err(|e| bad(&e))?),
            "--conns" => o.conns = v.parse().map_err(|e| bad(&e))?,
            "--streams" => o.streams = v.parse().map_err(|e| bad(&e))?,
            "--count" => o.count = v.parse().map_err(|e| bad(&e))?,
            "--seconds" => o.seconds = v.parse::<u64>().map_err(|e| bad(&e))?.min(600),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(o)
}

fn rss_kb(pid: Option<u32>) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Polite latencies (µs) and failures, shared with the reporter.
#[derive(Default)]
struct Polite {
    lat_us: std::sync::Mutex<Vec<u64>>,
    failed: AtomicU64,
}

impl Polite {
    fn summary(&self) -> String {
        let mut v = self.lat_us.lock().unwrap().clone();
        v.sort_unstable();
        let pct = |p: f64| v.get(((v.len() as f64 - 1.0) * p) as usize).copied();
        format!(
            "polite: {} ok, {} failed; p50 {:?} ms, p99 {:?} ms, max {:?} ms",
            v.len(),
            self.failed.load(Ordering::Relaxed),
            pct(0.5).map(|u| u as f64 / 1000.0),
            pct(0.99).map(|u| u as f64 / 1000.0),
            v.last().map(|u| *u as f64 / 1000.0),
        )
    }
}

/// One `GET /genid` on a fresh HTTP/1.1 connection (blocking, bounded by 10 s).
fn polite_http(addr: SocketAddr) -> Result<(), String> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(b"GET /genid HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    if out.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(out.lines().next().unwrap_or("closed").to_owned())
    }
}

fn frame(op: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u32(5 + payload.len() as u32);
    b.put_u8(op);
    b.put_u32(id);
    b.put_slice(payload);
    b.to_vec()
}

fn hello() -> Vec<u8> {
    frame(0x01, 1, b"VSTA\x01\x01")
}

/// Reads one frame: (op, id, payload).
async fn read_frame(s: &mut TcpStream, buf: &mut BytesMut) -> Option<(u8, u32, Bytes)> {
    loop {
        if buf.len() >= 4 {
            let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
            if buf.len() >= 4 + len {
                buf.advance(4);
                let mut f = buf.split_to(len);
                let op = f.get_u8();
                let id = f.get_u32();
                return Some((op, id, f.freeze()));
            }
        }
        if s.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
}

fn spawn_polite(o: &Opts, stop: Arc<AtomicBool>, polite: Arc<Polite>) {
    let addr = o.addr;
    let tcp = o.mode == "greedy-tcp";
    tokio::spawn(async move {
        let mut tcp_conn = None;
        let mut next_id = 2u32;
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            let r = if tcp {
                let c = match &mut tcp_conn {
                    Some(c) => c,
                    None => {
                        let mut s = TcpStream::connect(addr).await.unwrap();
                        s.write_all(&hello()).await.unwrap();
                        let mut buf = BytesMut::new();
                        read_frame(&mut s, &mut buf).await.unwrap();
                        tcp_conn.insert((s, buf))
                    }
                };
                next_id += 1;
                c.0.write_all(&frame(0x10, next_id, &[])).await.unwrap();
                match tokio::time::timeout(Duration::from_secs(10), read_frame(&mut c.0, &mut c.1))
                    .await
                {
                    Ok(Some((0x90, _, _))) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            } else {
                tokio::task::spawn_blocking(move || polite_http(addr))
                    .await
                    .unwrap()
            };
            match r {
                Ok(()) => polite
                    .lat_us
                    .lock()
                    .unwrap()
                    .push(t.elapsed().as_micros() as u64),
                Err(e) => {
                    polite.failed.fetch_add(1, Ordering::Relaxed);
                    eprintln!("polite request failed after {:?}: {e}", t.elapsed());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

async fn h2_connect(
    addr: SocketAddr,
    window: Option<u32>,
) -> Option<(
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
    Option<h2::PingPong>,
)> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    let mut b = h2::client::Builder::new();
    if let Some(w) = window {
        b.initial_window_size(w);
    }
    let (send, mut conn) = b.handshake::<_, Bytes>(tcp).await.ok()?;
    let ping = conn.ping_pong();
    Some((send, tokio::spawn(conn), ping))
}

fn get(addr: SocketAddr, path: &str) -> hyper::Request<()> {
    hyper::Request::get(format!("http://{addr}{path}"))
        .body(())
        .unwrap()
}

#[tokio::main]
async fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("hostile: {e}");
            std::process::exit(2);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let polite = Arc::new(Polite::default());
    let started = Instant::now();
    let closed = Arc::new(AtomicU64::new(0));
    let opened = Arc::new(AtomicU64::new(0));
    println!("before: rss {:?} kB", rss_kb(o.pid));
    spawn_polite(&o, stop.clone(), polite.clone());
    let mut holders = Vec::new();
    for c in 0..o.conns {
        let (addr, streams, count, mode) = (o.addr, o.streams, o.count, o.mode.clone());
        let (stop, closed, opened) = (stop.clone(), closed.clone(), opened.clone());
        holders.push(tokio::spawn(async move {
            match mode.as_str() {
                "idle-h2" => {
                    let Some((_send, driver, ping)) = h2_connect(addr, None).await else {
                        return;
                    };
                    let mut ping = ping.unwrap();
                    let t = Instant::now();
                    tokio::pin!(driver);
                    loop {
                        tokio::select! {
                            _ = &mut driver => {
                                closed.fetch_add(1, Ordering::Relaxed);
                                if c == 0 { println!("idle-h2: conn 0 closed by the server after {:?}", t.elapsed()); }
                                return;
                            }
                            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                                if stop.load(Ordering::Relaxed) { return; }
                                let _ = tokio::time::timeout(Duration::from_secs(1), ping.ping(h2::Ping::opaque())).await;
                            }
                        }
                    }
                }
                "zero-window" | "greedy-rest" => {
                    let zero = mode == "zero-window";
                    let Some((send, driver, _)) = h2_connect(addr, zero.then_some(0)).await else {
                        return;
                    };
                    let path = if count == 0 { "/genid".to_owned() } else { format!("/genids?count={count}") };
                    let mut held = Vec::new();
                    let mut tasks = Vec::new();
                    for _ in 0..streams {
                        let Ok(mut s) = send.clone().ready().await else { break };
                        let Ok((resp, _)) = s.send_request(get(addr, &path), true) else { break };
                        if zero {
                            held.push(resp);
                            opened.fetch_add(1, Ordering::Relaxed);
                        } else {
                            let (send, stop, path, opened) = (send.clone(), stop.clone(), path.clone(), opened.clone());
                            tasks.push(tokio::spawn(async move {
                                let mut resp = Some(resp);
                                while !stop.load(Ordering::Relaxed) {
                                    let r = match resp.take() { Some(r) => r, None => {
                                        let Ok(mut s) = send.clone().ready().await else { return };
                                        let Ok((r, _)) = s.send_request(get(addr, &path), true) else { return };
                                        r
                                    }};
                                    let Ok(r) = r.await else { return };
                                    let mut body = r.into_body();
                                    while let Some(Ok(d)) = body.data().await {
                                        let _ = body.flow_control().release_capacity(d.len());
                                    }
                                    opened.fetch_add(1, Ordering::Relaxed);
                                }
                            }));
                        }
                    }
                    tokio::pin!(driver);
                    tokio::select! {
                        _ = &mut driver => { closed.fetch_add(1, Ordering::Relaxed); }
                        _ = async { while !stop.load(Ordering::Relaxed) { tokio::time::sleep(Duration::from_millis(50)).await } } => {}
                    }
                    for t in tasks { t.abort(); }
                    drop(held);
                }
                "slowloris" => {
                    let Ok(mut s) = TcpStream::connect(addr).await else { return };
                    let head = b"GET /genid HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
                    for b in head {
                        if stop.load(Ordering::Relaxed) || s.write_all(&[*b]).await.is_err() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    let mut buf = [0u8; 64];
                    if matches!(tokio::time::timeout(Duration::from_millis(10), s.read(&mut buf)).await, Ok(Ok(0)) | Ok(Err(_))) {
                        closed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                "noread-h1" => {
                    let Ok(mut s) = TcpStream::connect(addr).await else { return };
                    let req = format!("GET /genids?count={count} HTTP/1.1\r\nHost: x\r\n\r\n");
                    for _ in 0..streams {
                        if stop.load(Ordering::Relaxed) { break; }
                        match tokio::time::timeout(Duration::from_secs(1), s.write_all(req.as_bytes())).await {
                            Ok(Ok(())) => { opened.fetch_add(1, Ordering::Relaxed); }
                            _ => break,
                        }
                    }
                    while !stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                "greedy-tcp" => {
                    let Ok(mut s) = TcpStream::connect(addr).await else { return };
                    s.write_all(&hello()).await.unwrap();
                    let (mut r, mut w) = s.into_split();
                    let batch = (count as u32).to_be_bytes();
                    let writer = tokio::spawn({
                        let stop = stop.clone();
                        async move {
                            let mut id = 2u32;
                            while !stop.load(Ordering::Relaxed) {
                                let mut burst = Vec::new();
                                for _ in 0..streams { id = id.wrapping_add(1).max(2); burst.extend(frame(0x11, id, &batch)); }
                                if w.write_all(&burst).await.is_err() { return; }
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                    });
                    let mut buf = vec![0u8; 1 << 16];
                    while !stop.load(Ordering::Relaxed) {
                        match tokio::time::timeout(Duration::from_millis(200), r.read(&mut buf)).await {
                            Ok(Ok(0)) | Ok(Err(_)) => break,
                            _ => {}
                        }
                    }
                    writer.abort();
                }
                other => eprintln!("unknown mode {other}"),
            }
        }));
    }
    let deadline = started + Duration::from_secs(o.seconds);
    let mut peak = 0;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss = rss_kb(o.pid).unwrap_or(0);
        peak = peak.max(rss);
        println!(
            "t={:>5.1}s rss {rss} kB, hostile connections closed by the server {}, streams/requests {}",
            started.elapsed().as_secs_f64(),
            closed.load(Ordering::Relaxed),
            opened.load(Ordering::Relaxed)
        );
    }
    stop.store(true, Ordering::Relaxed);
    for h in holders {
        let _ = tokio::time::timeout(Duration::from_secs(2), h).await;
    }
    println!("peak rss {peak} kB; {}", polite.summary());
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        println!("after leaving: rss {:?} kB", rss_kb(o.pid));
    }
}
