//! `bare-tonic`: the baseline server of the gRPC benchmark ([`vesta_bench::baseline::grpc`]).
//!
//! `bare-tonic [ADDR] [SECONDS]` (default 127.0.0.1:18082; exits by itself after SECONDS,
//! default 120).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:18082".into())
        .parse()?;
    let seconds: u64 = args.next().map_or(Ok(120), |s| s.parse())?;
    let listener = TcpListener::bind(addr).await?;
    println!("bare-tonic listening on http://{}", listener.local_addr()?);
    let served = vesta_bench::baseline::grpc::serve(
        listener,
        tokio::time::sleep(Duration::from_secs(seconds)),
    )
    .await;
    println!("bare-tonic handed out {served} numbers");
    Ok(())
}
