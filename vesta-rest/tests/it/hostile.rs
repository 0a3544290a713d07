//! Clients that are greedy or hostile rather than polite, against real servers: HTTP/2
//! connections that only PING, streams that grant no flow-control window, HTTP/1 clients that do
//! not read, connections past their age, and a client saturating the issuer next to a polite
//! one. Each test checks that the server gives the slot, the memory or the time unit back, and
//! that a polite client is served meanwhile.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{Client, H2Conn, labelled_sample, rest, rss_bytes, sample, spawn, system_issuer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};
use vesta_rest::{RestKeys, RestSection};
use vesta_rest::{SMALL_BODY_BYTES, STREAM_WINDOW_BYTES};
use vesta_tests::bin::vesta_cmd;

fn closed(metrics: &str, reason: &str) -> f64 {
    labelled_sample(
        metrics,
        &format!("vesta_http_connections_closed_total{{reason=\"{reason}\"}}"),
    )
}

/// Idle HTTP/2 connections hold a slot however diligently they PING: with every slot taken by
/// them, a new client is served once the idle timeout has closed them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_are_closed_even_while_they_ping() {
    let server = spawn(
        system_issuer(),
        RestSection {
            max_connections: 4,
            own: RestKeys {
                header_read_timeout_ms: 500,
                ..RestKeys::default()
            },
            ..rest()
        },
    )
    .await;
    let started = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..4 {
        let c = H2Conn::connect(server.addr, None).await;
        idle.push(tokio::spawn(c.ping_until_closed(
            Duration::from_millis(100),
            Duration::from_secs(5),
        )));
    }
    // Every slot is held: this client waits in the backlog until the idle ones are closed
    // (500 ms; the 10 s bounds here only tell "never" from "late" on a busy machine).
    let reply = timeout(Duration::from_secs(10), server.client().get("/genid"))
        .await
        .expect("a new client got no /genid while idle HTTP/2 connections held every slot");
    reply.id();
    let served_after = started.elapsed();
    assert!(
        served_after >= Duration::from_millis(450),
        "{served_after:?}"
    );
    for conn in idle {
        let (pongs, ended) = conn.await.unwrap();
        assert!(pongs >= 1, "the server answered no PING");
        assert_eq!(ended, Ok(()), "not a graceful close (GOAWAY)");
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    let m = server.client().get("/metrics").await.body;
    assert_eq!(closed(&m, "idle"), 4.0);
    server.stop().await;
}

/// Streams whose client grants no window are closed with their connection after
/// `send_timeout_ms`, and what they pinned comes back; an HTTP/1 client that pipelines requests
/// and never reads goes the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_whose_responses_make_no_progress_are_closed() {
    let server = spawn(
        system_issuer(),
        RestSection {
            own: RestKeys {
                send_timeout_ms: 400,
                ..RestKeys::default()
            },
            ..rest()
        },
    )
    .await;
    let h2 = H2Conn::connect(server.addr, Some(0)).await;
    let mut streams = Vec::new();
    for _ in 0..8 {
        streams.push(h2.open("/genids?count=10000").await.unwrap());
    }
    // HTTP/1: pipelined requests behind a tiny receive buffer, never read.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut h1 = socket.connect(server.addr).await.unwrap();
    let request = b"GET /genids?count=10000 HTTP/1.1\r\nHost: x\r\n\r\n";
    for _ in 0..64 {
        h1.write_all(request).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    let m = server.client().get("/metrics").await.body;
    let pinned = sample(&m, "vesta_http_unsent_bytes");
    assert!(pinned >= 8.0 * SMALL_BODY_BYTES as f64, "{pinned}");
    // Reading now would be progress: wait past the send timeout first, then look.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let ended = timeout(Duration::from_secs(3), h2.driver).await;
    assert!(ended.is_ok(), "the zero-window connection is still open");
    let mut buf = vec![0u8; 1 << 20];
    let h1_closed = timeout(Duration::from_secs(3), async {
        loop {
            match h1.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        h1_closed.is_ok(),
        "the non-reading HTTP/1 connection is still open"
    );
    drop(streams);
    let m = server.client().get("/metrics").await.body;
    assert_eq!(closed(&m, "stalled"), 2.0);
    assert_eq!(sample(&m, "vesta_http_unsent_bytes"), 0.0);
    server.stop().await;
}

/// A connection past `max_connection_age_ms` is asked to go (HTTP/2 GOAWAY, HTTP/1
/// `Connection: close`) without losing a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_their_age_are_closed_gracefully() {
    let server = spawn(
        system_issuer(),
        RestSection {
            own: RestKeys {
                max_connection_age_ms: 600,
                ..RestKeys::default()
            },
            ..rest()
        },
    )
    .await;
    let started = Instant::now();
    let h2 = H2Conn::connect(server.addr, None).await;
    let mut served = 0;
    while let Some(resp) = h2.open("/genid").await {
        let Ok(resp) = resp.await else { break };
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        while let Some(chunk) = body.data().await {
            chunk.unwrap();
        }
        served += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The age is 600 ms; 10 s tells "never" from "late" on a busy machine.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never aged out"
        );
    }
    let ended = timeout(Duration::from_secs(10), h2.driver).await.unwrap();
    assert!(ended.unwrap().is_ok(), "not a graceful close");
    // Not before its age (timers never fire early), and it was served until then.
    assert!(started.elapsed() >= Duration::from_millis(550));
    assert!(served >= 1, "{served}");

    // HTTP/1: the answer in flight says `Connection: close`, or, if the age is reached between
    // two requests, the idle connection is simply closed.
    let mut h1 = TcpStream::connect(server.addr).await.unwrap();
    let started = Instant::now();
    let mut answers = 0;
    let mut buf = [0u8; 4096];
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never aged out"
        );
        let request = b"GET /genid HTTP/1.1\r\nHost: x\r\n\r\n";
        if h1.write_all(request).await.is_err() {
            break;
        }
        let n = timeout(Duration::from_secs(3), h1.read(&mut buf))
            .await
            .unwrap()
            .unwrap_or(0);
        if n == 0 {
            break;
        }
        answers += 1;
        let head = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200 ok"), "{head}");
        if head.contains("connection: close") {
            let n = timeout(Duration::from_secs(3), h1.read(&mut buf))
                .await
                .unwrap()
                .unwrap_or(0);
            assert_eq!(n, 0, "still open after Connection: close");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started.elapsed() >= Duration::from_millis(550));
    assert!(answers >= 1, "{answers}");
    let m = server.client().get("/metrics").await.body;
    assert_eq!(closed(&m, "aged"), 2.0);
    server.stop().await;
}

/// A client saturating the issuer with `/genids` (here one that grants no window and cancels
/// each stream once its IDs are issued, so it costs the test almost no CPU) does not starve a
/// polite `/genid`: each is answered within `server.max_wait_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polite_genid_is_answered_within_max_wait_next_to_a_saturating_genids_client() {
    let server = spawn(system_issuer(), rest()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let mut greedy = Vec::new();
    for _ in 0..4 {
        let (addr, stop, issued) = (server.addr, stop.clone(), issued.clone());
        greedy.push(tokio::spawn(async move {
            let conn = Arc::new(H2Conn::connect(addr, Some(0)).await);
            // A JoinSet, so aborting this task aborts its streams (and drops the connection).
            let mut streams = tokio::task::JoinSet::new();
            for _ in 0..32 {
                let (conn, stop, issued) = (conn.clone(), stop.clone(), issued.clone());
                streams.spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let Some(resp) = conn.open("/genids?count=10000").await else {
                            return;
                        };
                        // The headers come once the IDs are issued; dropping the stream
                        // cancels the body.
                        if let Ok(r) = resp.await
                            && r.status() == 200
                        {
                            issued.fetch_add(10_000, Ordering::Relaxed);
                        }
                    }
                });
            }
            while streams.join_next().await.is_some() {}
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let polite = Client::new(server.addr, false);
    let started = Instant::now();
    let mut waits = Vec::new();
    while started.elapsed() < Duration::from_millis(3_500) {
        let sent = Instant::now();
        polite.get("/genid").await.id();
        waits.push(sent.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    for g in greedy {
        g.abort(); // its streams may wait up to max_wait_ms for IDs; no need to watch that
    }
    let worst = waits.iter().max().unwrap();
    eprintln!("polite /genid waits: {waits:?}");
    // The promise: a polite /genid is answered with an ID (above) within the configured wait,
    // never starved by the batches (2 s of margin for a busy machine). How long it waited
    // beyond that is a latency, measured by the benchmarks, not asserted here.
    let bound = Duration::from_millis(rest().max_wait_ms) + Duration::from_secs(2);
    assert!(*worst < bound, "a /genid waited {worst:?}, over {bound:?}");
    // And the issuer really was saturated meanwhile (else this test proves nothing): the
    // greedy client took at least one full second's capacity and requests waited for the
    // next unit (the server's own count, not a reading of wall time).
    let issued = issued.load(Ordering::Relaxed);
    assert!(issued >= 1 << 20, "the greedy client got only {issued} IDs");
    let m = polite.get("/metrics").await.body;
    let unit_waits = sample(&m, "vesta_sequence_waits_total");
    assert!(
        unit_waits >= 1.0,
        "the issuer was not saturated: {unit_waits}"
    );
    server.stop().await;
}

/// `vesta serve rest` as a process, so its memory can be read from `/proc`.
struct Process {
    child: Child,
    addr: std::net::SocketAddr,
}

impl Process {
    fn start(conf: &str) -> (Process, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rest.toml");
        std::fs::write(&path, conf).unwrap();
        let mut child = vesta_cmd(["serve", "rest", "--config"])
            .arg(&path)
            .args(["--machine", "1000"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("vesta-rest listening on http://")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .parse()
            .unwrap();
        (Process { child, addr }, dir)
    }

    /// Anonymous resident memory (the heap, not the binary's code pages).
    fn anon_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .expect("RssAnon")
            * 1024
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Opens `conns` connections granting no window with `streams` streams of `/genids` each and
/// holds them until dropped.
async fn zero_window_clients(
    addr: std::net::SocketAddr,
    conns: usize,
    streams: usize,
) -> Vec<(H2Conn, Vec<h2::client::ResponseFuture>)> {
    let mut held = Vec::new();
    for _ in 0..conns {
        let c = H2Conn::connect(addr, Some(0)).await;
        let mut s = Vec::new();
        for _ in 0..streams {
            match c.open("/genids?count=2000").await {
                Some(r) => s.push(r),
                None => break,
            }
        }
        held.push((c, s));
    }
    held
}

/// What clients can add to the server's memory by the formula of docs/hardening.md (its terms
/// beyond the idle server), in bytes.
fn formula_beyond_idle(max_connections: u64, streams: u64, unsent: u64, max_uri_bytes: u64) -> u64 {
    const PER_CONNECTION: u64 = 48 << 10;
    const PER_STREAM: u64 = 4 << 10;
    unsent
        + max_connections * (PER_CONNECTION + max_uri_bytes)
        + max_connections * streams * PER_STREAM
}

/// Clients that open streams of `/genids` and never grant window pin at most what the formula
/// allows (the budget, the stream limit), the server refuses further batches with a clear 503
/// instead of growing, polite single IDs and scrapes still work, and everything pinned comes
/// back when they leave (the server's pinned bytes return to 0 and a second round stays
/// within the same bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_window_streams_pin_bounded_memory_that_comes_back() {
    const CONNS: u64 = 16;
    const STREAMS: u64 = 32;
    const UNSENT: u64 = 4 << 20;
    let (server, _dir) = Process::start(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nmax_connections = {}\n\
         max_streams_per_connection = {STREAMS}\nmax_unsent_bytes = {UNSENT}\n\
         send_timeout_ms = 60000\n",
        CONNS + 2
    ));
    let polite = Client::new(server.addr, false);
    polite.get("/genid").await.id();
    let base = server.anon_bytes();
    // The allocator's own overhead (arenas per worker thread, fragmentation) on top.
    let slack = 4 << 20;
    let bound = base + formula_beyond_idle(CONNS + 2, STREAMS, UNSENT, 4096) + slack;
    let mut peaks = Vec::new();
    for round in 0..2 {
        let hostile = zero_window_clients(server.addr, CONNS as usize, STREAMS as usize).await;
        let opened: usize = hostile.iter().map(|(_, s)| s.len()).sum();
        assert_eq!(opened as u64, CONNS * STREAMS, "round {round}");
        // Let every stream be answered (IDs issued, body pinned, or refused).
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let held = server.anon_bytes();
        eprintln!(
            "round {round}: RssAnon {} KiB at rest, {} KiB held by {opened} zero-window streams \
             (VmRSS {} KiB), bound {} KiB",
            base >> 10,
            held >> 10,
            rss_bytes(server.child.id()) >> 10,
            bound >> 10
        );
        assert!(held < bound, "held {held} bytes, over the bound {bound}");
        peaks.push(held);
        // Batches beyond the budget are refused, naming the limit; single IDs and scrapes work.
        let r = polite.get("/genids?count=10").await;
        assert_eq!(r.status, 503, "{r:?}");
        assert!(r.error().contains("server.max_unsent_bytes"), "{r:?}");
        polite.get("/genid").await.id();
        let m = polite.get("/metrics").await.body;
        let pinned = sample(&m, "vesta_http_unsent_bytes");
        assert!(pinned <= UNSENT as f64, "{pinned}");
        assert!(
            pinned >= (UNSENT / 2) as f64,
            "the budget was not used: {pinned}"
        );
        drop(hostile);
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let m = polite.get("/metrics").await.body;
            if sample(&m, "vesta_http_unsent_bytes") == 0.0 {
                break;
            }
            assert!(Instant::now() < deadline, "pinned bytes not given back");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // What comes back is asserted on the server's own accounting (the pinned bytes above went
    // to 0 after each round) and on the formula's bound: every round, and after both, the
    // process holds less than the bound. Allocator readings are not compared with each other
    // (one arena more or less moves them by a MiB: issue 20); the soak watches the trend.
    let after = server.anon_bytes();
    eprintln!(
        "after both rounds: RssAnon {} KiB, at peak {peaks:?}",
        after >> 10
    );
    assert!(
        after < bound,
        "{after} bytes after both rounds, over the bound {bound}"
    );
    let r = polite.get("/genids?count=10").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(STREAM_WINDOW_BYTES as u64 * CONNS * STREAMS > 2 * UNSENT);
}
