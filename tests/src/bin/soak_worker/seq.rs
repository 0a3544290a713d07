//! `soak_worker seq`: many concurrent callers of a sequences cluster (`vesta serve tcp
//! --seq-cluster` members) through one `vesta_server::Client` that lists every member: each
//! task calls `seq_next_n(key, 1..=100)` on a key drawn from the group's key set
//! (`vesta_tests::soak::seq::key`: half the calls on the fixed edge keys, half on random ones),
//! paced to the worker's share of the rate, and appends one record per answered range to the
//! call file, stamped with `CLOCK_MONOTONIC` before the call and after its answer. Failed calls
//! are counted by kind (they may have moved a key: a gap, which no rule forbids); an answer that
//! is not `n` numbers in increasing ranges is counted as `bad answer` (a finding).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use vesta_server::{Client, ClientConfig, ClientError};
use vesta_tests::soak::rng::Rng;
use vesta_tests::soak::seq::{FIXED, RECORD_BYTES, encode, key, mono_ns};

use crate::{Command, log};

/// Arguments of `soak_worker seq`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Every member of the cluster, HOST:PORT[,HOST:PORT...] (a move names one of them)
    #[arg(long, value_delimiter = ',', required = true)]
    servers: Vec<String>,
    /// Concurrent calling tasks
    #[arg(long, default_value_t = 64)]
    tasks: u64,
    /// Random keys beside the fixed ones
    #[arg(long, default_value_t = 4_000)]
    random_keys: u32,
    /// The client's retry budget, ms (moves and hand-offs are waited out within it)
    #[arg(long, default_value_t = 10_000)]
    retry_budget_ms: u64,
}

/// What the tasks share.
struct Shared {
    stop: AtomicBool,
    /// Calls begun (the pace's tickets).
    tickets: AtomicU64,
    calls: AtomicU64,
    numbers: AtomicU64,
    bad: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    out: Mutex<File>,
    keys: Vec<String>,
    count: u64,
    rate: f64,
    began: Instant,
}

/// Calls until `count` calls are begun or the orchestrator says stop; then writes the summary.
pub fn run(
    args: &Args,
    out: &Path,
    summary: &Path,
    count: u64,
    rate: f64,
    seed: u64,
    commands: Receiver<Command>,
) -> anyhow::Result<()> {
    let file = File::options()
        .create(true)
        .append(true)
        .open(out)
        .with_context(|| format!("opening {}", out.display()))?;
    let keys: Vec<String> = (0..FIXED.len() as u32 + args.random_keys)
        .map(key)
        .collect();
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        tickets: AtomicU64::new(0),
        calls: AtomicU64::new(0),
        numbers: AtomicU64::new(0),
        bad: AtomicU64::new(0),
        errors: Mutex::new(BTreeMap::new()),
        out: Mutex::new(file),
        keys,
        count,
        rate,
        began: Instant::now(),
    });
    {
        let shared = shared.clone();
        std::thread::spawn(move || {
            while let Ok(cmd) = commands.recv() {
                if cmd == Command::Stop {
                    break;
                }
                log(&format!("ignoring {cmd:?}: no issuer in this process"));
            }
            shared.stop.store(true, Ordering::SeqCst);
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let client_stats = rt.block_on(call_all(args, &shared, seed))?;
    let errors = shared
        .errors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let calls = shared.calls.load(Ordering::SeqCst);
    let numbers = shared.numbers.load(Ordering::SeqCst);
    let bad = shared.bad.load(Ordering::SeqCst);
    log(&format!(
        "stopped after {calls} calls, {numbers} numbers, {} failed calls, {bad} bad answers, \
         client retries {}",
        errors.values().sum::<u64>(),
        client_stats.retries
    ));
    let mut counts = errors;
    counts.insert("bad answer".into(), bad);
    counts.insert("client retries".into(), client_stats.retries);
    let summary_json = serde_json::json!({
        "calls": calls,
        "numbers": numbers,
        "counts": counts,
    });
    std::fs::write(summary, summary_json.to_string() + "\n")
        .with_context(|| format!("writing {}", summary.display()))
}

async fn call_all(
    args: &Args,
    shared: &Arc<Shared>,
    seed: u64,
) -> anyhow::Result<vesta_server::ClientStats> {
    let mut config = ClientConfig::new(args.servers.clone());
    config.retry_budget = Duration::from_millis(args.retry_budget_ms);
    let client = loop {
        match Client::connect(config.clone()).await {
            Ok(c) => break c,
            Err(e) if !shared.stop.load(Ordering::SeqCst) => {
                log(&format!("connecting: {e}; again in 200 ms"));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e).context("connecting"),
        }
    };
    let client = Arc::new(client);
    let mut rng = Rng::new(seed);
    let tasks: Vec<_> = (0..args.tasks)
        .map(|_| {
            let (client, shared) = (client.clone(), shared.clone());
            let rng = Rng::new(rng.next_u64());
            tokio::spawn(caller(client, shared, rng))
        })
        .collect();
    let mut progress = tokio::time::interval(Duration::from_secs(10));
    progress.tick().await;
    loop {
        if tasks.iter().all(tokio::task::JoinHandle::is_finished) {
            break;
        }
        tokio::select! {
            _ = progress.tick() => {
                let errors: u64 = shared.errors.lock().unwrap_or_else(PoisonError::into_inner).values().sum();
                log(&format!(
                    "{} calls, {} numbers, {errors} failed calls, {:.0} calls/s",
                    shared.calls.load(Ordering::Relaxed),
                    shared.numbers.load(Ordering::Relaxed),
                    shared.calls.load(Ordering::Relaxed) as f64 / shared.began.elapsed().as_secs_f64(),
                ));
            }
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    for t in tasks {
        t.await.context("a calling task panicked")?;
    }
    Ok(client.stats())
}

/// One calling task.
async fn caller(client: Arc<Client>, shared: Arc<Shared>, mut rng: Rng) {
    const FLUSH_BYTES: usize = 64 << 10;
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_BYTES + 8 * RECORD_BYTES);
    let mut flushed = Instant::now();
    let fixed = FIXED.len() as u64;
    let random = shared.keys.len() as u64 - fixed;
    while !shared.stop.load(Ordering::Relaxed) {
        let ticket = shared.tickets.fetch_add(1, Ordering::Relaxed);
        if ticket >= shared.count {
            break;
        }
        if shared.rate > 0.0 {
            let due = shared.began + Duration::from_secs_f64(ticket as f64 / shared.rate);
            let now = Instant::now();
            if due > now {
                tokio::time::sleep(due - now).await;
            }
        }
        let k = (if random == 0 || rng.chance(50) {
            rng.range(0, fixed - 1)
        } else {
            fixed + rng.range(0, random - 1)
        }) as u32;
        let n = if rng.chance(40) { 1 } else { rng.range(2, 100) };
        let start = mono_ns();
        let answer = client.seq_next_n(&shared.keys[k as usize], n).await;
        let end = mono_ns();
        match answer {
            Ok(ranges) => {
                let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
                let increasing = ranges.windows(2).all(|w| w[0].end <= w[1].start)
                    && ranges.iter().all(|r| r.start < r.end);
                if total != n || !increasing {
                    shared.bad.fetch_add(1, Ordering::Relaxed);
                    log(&format!(
                        "BAD ANSWER: key {:?}, {n} asked, answered {ranges:?}",
                        shared.keys[k as usize]
                    ));
                    continue;
                }
                for (i, r) in ranges.iter().enumerate() {
                    buf.extend(encode(
                        k,
                        i > 0,
                        r.start,
                        (r.end - r.start) as u8,
                        start,
                        end,
                    ));
                }
                shared.calls.fetch_add(1, Ordering::Relaxed);
                shared.numbers.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                let kind = match &e {
                    ClientError::Refused { code, .. } => format!("refused {code:?}"),
                    ClientError::Unavailable { .. } => "unavailable".to_owned(),
                    _ => "other".to_owned(),
                };
                let first = {
                    let mut errors = shared.errors.lock().unwrap_or_else(PoisonError::into_inner);
                    let c = errors.entry(kind).or_insert(0);
                    *c += 1;
                    *c == 1
                };
                if first {
                    log(&format!(
                        "call failed (the first of its kind): key {:?}, n {n}: {e}",
                        shared.keys[k as usize]
                    ));
                }
            }
        }
        if buf.len() >= FLUSH_BYTES || flushed.elapsed() >= Duration::from_millis(100) {
            flush(&shared, &mut buf);
            flushed = Instant::now();
        }
    }
    flush(&shared, &mut buf);
}

/// Appends the whole records in `buf` to the call file (one write: records never interleave).
fn flush(shared: &Shared, buf: &mut Vec<u8>) {
    if buf.is_empty() {
        return;
    }
    let mut out = shared.out.lock().unwrap_or_else(PoisonError::into_inner);
    if let Err(e) = out.write_all(buf) {
        log(&format!("writing the call file: {e}"));
        shared.stop.store(true, Ordering::SeqCst);
    }
    buf.clear();
}
