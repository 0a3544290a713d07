//! Segment numbers from a slow database: does the prefetch hide it? An open-loop load calls
//! `next` at a fixed rate (default 1,000,000 numbers/s) on one thread while every database round
//! trip takes 2 ms more than it would, and records each call's latency from its intended start
//! (coordinated omission corrected) and from its actual start, in HDR histograms. Run:
//! `cargo bench -p vesta-bench --bench segment_slow_db`
//! (env: `RATE` numbers/s, `SECONDS` measured, `WARMUP_SECONDS`, `DELAY_MS`, `STEP` the table's).
//!
//! The database is a real PostgreSQL server started by the test harness (`vesta-tests`), reached
//! through a small TCP proxy in this file that holds every answer of the server for `DELAY_MS`
//! before passing it on: each round trip (BEGIN, UPDATE, SELECT, COMMIT of a fetch) is that much
//! slower, as with a database farther away. Why not SQLite: it has no round trip to delay, and
//! vesta-segment has no delay seam (nor should production code grow one for a benchmark); the
//! proxy slows the real protocol exchange instead.
//!
//! The same open loop over a bare `AtomicU64` runs in the same process right after, as the
//! floor: what the machine (timer reads, preemption on a shared VM) adds to any call.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vesta_segment::{Database, SegmentError, SegmentSection, Store, Tag};
use vesta_tests::db::Postgres;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Accepts connections and relays them to `upstream`, holding every chunk the upstream sends
/// for `delay` (chunks keep their order; the client side is passed on at once).
async fn delaying_proxy(listener: TcpListener, upstream: SocketAddr, delay: Duration) {
    while let Ok((client, _)) = listener.accept().await {
        let Ok(server) = TcpStream::connect(upstream).await else {
            continue;
        };
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        let (mut client_read, client_write) = client.into_split();
        let (server_read, mut server_write) = server.into_split();
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        });
        tokio::spawn(held_back(server_read, client_write, delay));
    }
}

async fn held_back(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    loop {
        let mut buf = vec![0u8; 16 * 1024];
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                buf.truncate(n);
                if tx.send((tokio::time::Instant::now() + delay, buf)).is_err() {
                    return;
                }
            }
        }
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

/// What one open-loop phase measured.
struct Phase {
    /// From each call's intended start (the schedule) to its answer, ns.
    corrected: Histogram<u64>,
    /// From each call's actual start to its answer, ns.
    service: Histogram<u64>,
    /// Calls that found both segments empty and had to wait for the database.
    stalls: u64,
    calls: u64,
    elapsed: Duration,
}

/// Calls `next` at `rate` per second for `length`, spinning between calls.
fn open_loop(rate: u64, length: Duration, mut next: impl FnMut() -> (u64, bool)) -> Phase {
    let period = 1e9 / rate as f64;
    let total = (length.as_secs_f64() * rate as f64) as u64;
    let (mut corrected, mut service) = (histogram(), histogram());
    let mut stalls = 0;
    let mut last = 0;
    let start = Instant::now();
    for i in 0..total {
        let due = start + Duration::from_nanos((i as f64 * period) as u64);
        let mut now = Instant::now();
        while now < due {
            std::hint::spin_loop();
            now = Instant::now();
        }
        let (n, stalled) = next();
        let done = Instant::now();
        assert!(n > last || i == 0, "{n} after {last}: not increasing");
        last = n;
        stalls += u64::from(stalled);
        corrected.saturating_record((done - due).as_nanos() as u64);
        service.saturating_record((done - now).as_nanos() as u64);
    }
    Phase {
        corrected,
        service,
        stalls,
        calls: total,
        elapsed: start.elapsed(),
    }
}

fn print(name: &str, p: &Phase) {
    let q = |h: &Histogram<u64>, x: f64| h.value_at_quantile(x) as f64 / 1000.0;
    println!(
        "| {name} | {} | {:.0}/s | {} | {:.2} / {:.2} / {:.1} / {:.1} / {:.0} | {:.2} / {:.2} / {:.1} / {:.1} / {:.0} |",
        p.calls,
        p.calls as f64 / p.elapsed.as_secs_f64(),
        p.stalls,
        q(&p.corrected, 0.5),
        q(&p.corrected, 0.99),
        q(&p.corrected, 0.9999),
        q(&p.corrected, 0.99999),
        p.corrected.max() as f64 / 1000.0,
        q(&p.service, 0.5),
        q(&p.service, 0.99),
        q(&p.service, 0.9999),
        q(&p.service, 0.99999),
        p.service.max() as f64 / 1000.0,
    );
}

/// One number from a warm tag, or (a stall) waited for on the runtime.
fn take(tag: &Tag, rt: &tokio::runtime::Handle) -> (u64, bool) {
    match tag.try_next() {
        Ok(n) => (n, false),
        Err(SegmentError::WouldBlock { .. }) => (
            rt.block_on(tag.next()).expect("a number after waiting"),
            true,
        ),
        Err(e) => panic!("{e}"),
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "segment_slow_db: run it with `cargo bench -p vesta-bench --bench segment_slow_db`"
        );
        return;
    }
    let rate = env("RATE", 1_000_000);
    let seconds = env("SECONDS", 10);
    let warmup = env("WARMUP_SECONDS", 2);
    let delay = Duration::from_millis(env("DELAY_MS", 2));
    let step = env("STEP", 10_000) as i64;

    let pg = Postgres::start();
    let direct = pg.create_database("bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let rt = runtime.handle().clone();
    let listener = rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("proxy port");
    let proxy_port = listener.local_addr().expect("proxy address").port();
    let upstream: SocketAddr = format!("127.0.0.1:{}", pg.port()).parse().expect("address");
    rt.spawn(delaying_proxy(listener, upstream, delay));
    let slow = direct.replace(&format!(":{}/", pg.port()), &format!(":{proxy_port}/"));
    let section = SegmentSection {
        db: Some(slow),
        ..SegmentSection::default()
    };
    let (store, tag, round_trip) = rt.block_on(async {
        let url = section.db_url().expect("url");
        let db = Database::connect(&url, section.fetch_timeout())
            .await
            .expect("database through the proxy");
        db.init().await.expect("init");
        db.create_tag("bench", step, 1, None).await.expect("tag");
        let t = Instant::now();
        for _ in 0..10 {
            db.tags().await.expect("query");
        }
        let round_trip = t.elapsed() / 10;
        db.close().await;
        let store = Store::open(&section).await.expect("store");
        let tag = store.tag("bench").await.expect("tag handle");
        (store, tag, round_trip)
    });
    println!("## segment next at {rate}/s, one thread, PostgreSQL behind a {delay:?} delay");
    println!(
        "one query through the proxy: {:.2} ms (a fetch is 4 round trips: BEGIN, UPDATE, \
         SELECT, COMMIT); table step {step}, adaptive step on, prefetch at 10 %",
        round_trip.as_secs_f64() * 1e3
    );
    println!(
        "latency in µs, p50 / p99 / p99.99 / p99.999 / max; \"corrected\" from each call's \
         intended start, \"service\" from its actual start"
    );
    println!();
    println!("| phase | calls | rate | stalls | corrected | service |");
    println!("|---|---|---|---|---|---|");
    let warm = open_loop(rate, Duration::from_secs(warmup), || take(&tag, &rt));
    print(&format!("warm-up {warmup} s (from a cold tag)"), &warm);
    let measured = open_loop(rate, Duration::from_secs(seconds), || take(&tag, &rt));
    print(&format!("vesta Tag::try_next, {seconds} s"), &measured);
    let counter = AtomicU64::new(1);
    let floor = open_loop(rate, Duration::from_secs(seconds), || {
        (counter.fetch_add(1, Ordering::Relaxed), false)
    });
    print(&format!("floor: AtomicU64::fetch_add, {seconds} s"), &floor);
    let s = tag.status();
    println!();
    println!(
        "tag after the run: step {}, {} fetches, {} fetch errors, last fetch {:.2} ms",
        s.step,
        s.fetches,
        s.fetch_errors,
        s.last_fetch_latency_us.unwrap_or(0) as f64 / 1e3
    );
    println!(
        "load average: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    rt.block_on(store.shutdown());
    drop(pg);
}
