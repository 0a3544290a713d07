//! `bare-hyper`: the baseline server of the REST benchmark ([`vesta_bench::baseline`]).
//!
//! `bare-hyper [ADDR] [SECONDS] [timer]` (default 127.0.0.1:18081; exits by itself after
//! SECONDS, default 120). With `timer`, HTTP/1 gets vesta-rest's 5 s header read timeout.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:18081".into())
        .parse()?;
    let seconds: u64 = args.next().map_or(Ok(120), |s| s.parse())?;
    let timer = args
        .next()
        .is_some_and(|a| a == "timer")
        .then_some(Duration::from_secs(5));
    let listener = TcpListener::bind(addr).await?;
    println!("bare-hyper listening on http://{}", listener.local_addr()?);
    let served = vesta_bench::baseline::serve(
        listener,
        timer,
        tokio::time::sleep(Duration::from_secs(seconds)),
    )
    .await;
    println!("bare-hyper served {served} requests");
    Ok(())
}
