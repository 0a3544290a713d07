//! `soak_worker rest`: an HTTP/1.1 client of `vesta serve rest`, mostly `/genids` batches and
//! some single `/genid` calls, riding out server restarts by retrying. Every request has a
//! deadline: one that times out is counted (and shows in the log) rather than waited on forever.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::StatusCode;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::{Command, Job, Sink, Stats, log};

/// The longest one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest `/genids` count asked (the server's default `max_count`).
const MAX_COUNT: u64 = 10_000;

/// Arguments of `soak_worker rest`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Base URL of the server, e.g. http://127.0.0.1:8080
    #[arg(long)]
    url: String,
}

/// Fetches until the job is done or stopped; returns what it saw.
pub fn run(args: &Args, job: Job<'_>, sink: &mut Sink) -> anyhow::Result<Stats> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(fetch_all(args, job, sink))
}

async fn fetch_all(args: &Args, job: Job<'_>, sink: &mut Sink) -> anyhow::Result<Stats> {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let mut stats = Stats::default();
    let mut failing = 0u64;
    'work: while sink.written() < job.count {
        for cmd in job.commands.try_iter() {
            match cmd {
                Command::Stop => break 'work,
                other => log(&format!("ignoring {other:?}: no issuer in this process")),
            }
        }
        sink.tick()?;
        let wait = job.pace.ahead_by(sink.written());
        if !wait.is_zero() {
            tokio::time::sleep(wait.min(Duration::from_millis(20))).await;
            continue;
        }
        let want = job.count - sink.written();
        let single = want == 1 || job.rng.chance(20);
        let uri = if single {
            format!("{}/genid", args.url)
        } else {
            let n = job.rng.range(1, job.pace.max_batch(MAX_COUNT)).min(want);
            format!("{}/genids?count={n}", args.url)
        };
        let outcome = tokio::time::timeout(REQUEST_TIMEOUT, fetch(&client, &uri)).await;
        let problem = match outcome {
            Err(_) => {
                stats.bump("timeouts");
                format!("{uri}: no answer within {REQUEST_TIMEOUT:?}")
            }
            Ok(Err((kind, e))) => {
                stats.bump(kind);
                format!("{uri}: {e}")
            }
            Ok(Ok((StatusCode::OK, body))) => match parse(&body, single) {
                Some(ids) => {
                    for id in ids {
                        sink.push(id)?;
                    }
                    if failing > 0 {
                        log(&format!("answers again after {failing} failed requests"));
                        failing = 0;
                    }
                    continue;
                }
                None => {
                    stats.bump("unparsable 200 bodies");
                    format!(
                        "{uri}: unparsable body {:?}",
                        String::from_utf8_lossy(&body)
                    )
                }
            },
            Ok(Ok((status, body))) => {
                stats.bump(format!("http {}", status.as_u16()));
                format!("{uri}: {status} {}", String::from_utf8_lossy(&body))
            }
        };
        if failing == 0 {
            log(&format!("request failed: {problem}"));
        }
        failing += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(stats)
}

/// One GET: the status and the whole body, or the kind of failure and its text.
async fn fetch(
    client: &Client<HttpConnector, Empty<Bytes>>,
    uri: &str,
) -> Result<(StatusCode, Bytes), (&'static str, String)> {
    let uri: hyper::Uri = uri
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| ("bad urls", e.to_string()))?;
    let resp = client.get(uri).await.map_err(|e| {
        let kind = if e.is_connect() {
            "connect errors"
        } else {
            "request errors"
        };
        (kind, format!("{e:?}"))
    })?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| ("body errors", e.to_string()))?
        .to_bytes();
    Ok((status, body))
}

/// The body of `/genids`.
#[derive(serde::Deserialize)]
struct IdList {
    ids: Vec<String>,
}

/// `/genid`: one decimal; `/genids`: `{"ids": ["...", ...]}`.
fn parse(body: &[u8], single: bool) -> Option<Vec<u64>> {
    if single {
        let text = std::str::from_utf8(body).ok()?;
        return text.parse().ok().map(|id| vec![id]);
    }
    let list: IdList = serde_json::from_slice(body).ok()?;
    list.ids.iter().map(|t| t.parse().ok()).collect()
}
