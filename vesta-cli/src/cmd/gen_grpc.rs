//! `vesta gen --grpc URL`: N IDs from a `vesta serve rest` over gRPC (its port, `http://`),
//! one per line, streamed (`StreamIds`: the server issues each chunk as this side reads, so a
//! stopped pipe stops the issuing too).

use std::io::{self, BufWriter, Write};

use anyhow::Context;
use tonic::Request;
use vesta_core::Form;
use vesta_grpc::{VestaClient, pb};

/// Most IDs one `StreamIds` call may ask for (the server's bound); more are asked in turns.
const PER_STREAM: u64 = 1_000_000_000;

/// Streams `count` IDs from the server at `url` and prints them; with `token`, sends it as
/// `authorization: Bearer TOKEN`.
pub fn run(url: &str, token: Option<&str>, count: u64, form: Form) -> anyhow::Result<()> {
    if !url.starts_with("http://") {
        anyhow::bail!(
            "--grpc {url:?}: give the server's URL as http://HOST:PORT (TLS over gRPC is not in \
             this build's client yet: use --server with --tls-ca, or REST)"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    runtime.block_on(async {
        let mut client = VestaClient::connect(url.to_owned())
            .await
            .with_context(|| format!("--grpc {url}: cannot connect"))?;
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

/// A server's refusal in one line: its code and its sentence.
fn refused(url: &str, s: &tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{url}: {:?}: {}", s.code(), s.message())
}
