//! `vesta gen --grpc URL`: N IDs from a `vesta serve rest` over gRPC (its port: `http://`, or
//! `https://` trusting the CA of `--tls-ca`), one per line, streamed (`StreamIds`: the server
//! issues each chunk as this side reads, so a stopped pipe stops the issuing too).

use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::Context;
use tonic::Request;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use vesta_core::Form;
use vesta_grpc::{VestaClient, pb};

/// Most IDs one `StreamIds` call may ask for (the server's bound); more are asked in turns.
const PER_STREAM: u64 = 1_000_000_000;

/// Streams `count` IDs from the server at `url` and prints them; with `token`, sends it as
/// `authorization: Bearer TOKEN`; an `https://` URL needs `tls_ca`, the CA that signed the
/// server's certificate (which must name the URL's host).
pub fn run(
    url: &str,
    token: Option<&str>,
    tls_ca: Option<&Path>,
    count: u64,
    form: Form,
) -> anyhow::Result<()> {
    let endpoint = endpoint(url, tls_ca)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    runtime.block_on(async {
        let channel: Channel = endpoint
            .connect()
            .await
            .map_err(|e| anyhow::anyhow!("--grpc {url}: cannot connect: {}", sources(&e)))?;
        let mut client = VestaClient::new(channel);
        let mut left = count;
        while left > 0 {
            let n = left.min(PER_STREAM);
            let mut req = Request::new(pb::StreamIdsRequest { count: n });
            if let Some(token) = token {
                let value = format!("Bearer {token}")
                    .parse()
                    .context("--token: not a valid header value")?;
                req.metadata_mut().insert("authorization", value);
            }
            let mut stream = client
                .stream_ids(req)
                .await
                .map_err(|s| refused(url, &s))?
                .into_inner();
            while let Some(chunk) = stream.message().await.map_err(|s| refused(url, &s))? {
                left -= chunk.ids.len() as u64;
                for id in chunk.ids {
                    writeln!(out, "{}", form.encode(id))?;
                }
            }
        }
        anyhow::Ok(())
    })?;
    out.flush()?;
    Ok(())
}

/// The server's endpoint: plaintext HTTP/2 for `http://`, TLS trusting `tls_ca` for
/// `https://`; anything else is refused in one line.
fn endpoint(url: &str, tls_ca: Option<&Path>) -> anyhow::Result<Endpoint> {
    let tls = match (url.split_once("://").map(|(scheme, _)| scheme), tls_ca) {
        (Some("http"), None) => None,
        (Some("http"), Some(_)) => anyhow::bail!(
            "--tls-ca: --grpc {url} is plaintext: give the server's URL as https://HOST:PORT"
        ),
        (Some("https"), Some(ca)) => {
            let pem = std::fs::read(ca).with_context(|| format!("--tls-ca {}", ca.display()))?;
            if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                anyhow::bail!("--tls-ca {}: no PEM CERTIFICATE in the file", ca.display());
            }
            Some(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
        }
        (Some("https"), None) => anyhow::bail!(
            "--grpc {url}: TLS needs --tls-ca FILE, the CA certificate that signed the server's"
        ),
        _ => anyhow::bail!(
            "--grpc {url:?}: give the server's URL as http://HOST:PORT (or https://HOST:PORT \
             with --tls-ca)"
        ),
    };
    let endpoint =
        Endpoint::from_shared(url.to_owned()).with_context(|| format!("--grpc {url}"))?;
    match tls {
        Some(tls) => endpoint
            .tls_config(tls)
            .with_context(|| format!("--grpc {url}")),
        None => Ok(endpoint),
    }
}

/// An error and its causes in one line (tonic's transport error says only "transport error"),
/// a cause that repeats the one before it said once.
fn sources(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

/// A server's refusal in one line: its code and its sentence.
fn refused(url: &str, s: &tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{url}: {:?}: {}", s.code(), s.message())
}
