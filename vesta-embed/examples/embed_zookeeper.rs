//! Embeds an issuer whose machine ID is leased from ZooKeeper: the lowest free ID of the
//! embed pool is claimed, kept while the process runs, and given back at shutdown.
//!
//! ```sh
//! cargo run -p vesta-embed --example embed_zookeeper -- 127.0.0.1:2181
//! ```
//!
//! With no ZooKeeper at that address it says so and exits with status 2 within the connect
//! timeout (2 s here); it never hangs.

use std::error::Error;
use std::time::Duration;

use vesta_embed::{Issuer, IssuerConfig, LeaseError, StartError};

/// How long the example waits for a ZooKeeper session (`zookeeper.connect_timeout_ms`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

fn main() {
    let connect = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:2181".to_owned());
    match run(&connect, 5) {
        Ok(leased) => {
            println!("leased machine {} from {connect}", leased.machine);
            for id in leased.ids {
                println!("{id}");
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            if is_unreachable(e.as_ref()) {
                eprintln!(
                    "start a ZooKeeper there, or pass the address of one: \
                     cargo run -p vesta-embed --example embed_zookeeper -- HOST:PORT"
                );
                std::process::exit(2);
            }
            std::process::exit(1);
        }
    }
}

/// True if `e` says no ZooKeeper answered at all (rather than, say, a full pool).
pub fn is_unreachable(e: &(dyn Error + 'static)) -> bool {
    matches!(
        e.downcast_ref(),
        Some(StartError::ZooKeeper(LeaseError::Unreachable { .. }))
    )
}

/// What [`run`] got from its lease.
pub struct Leased {
    /// The machine ID ZooKeeper granted.
    pub machine: u64,
    /// The IDs issued under it.
    pub ids: Vec<u64>,
}

/// Leases a machine ID from the ZooKeeper at `connect` (`host:port[,host:port...]`), issues `n`
/// IDs and releases the ID (final mark, claim deleted). Fails within [`CONNECT_TIMEOUT`] when
/// no ZooKeeper answers.
pub fn run(connect: &str, n: u64) -> Result<Leased, Box<dyn Error>> {
    let mut config = IssuerConfig::builder()
        .zookeeper(connect)
        .zookeeper_root("/vesta/examples")
        .build()?;
    config.zookeeper.connect_timeout_ms = CONNECT_TIMEOUT.as_millis() as u64;
    config.validate()?;

    // Claims the ID and waits until the clock is past its high-water mark: no ID issued by
    // an earlier holder of this machine ID can come again.
    let issuer = Issuer::start(config)?;
    let machine = issuer.status().machine;
    let ids = issuer.next_ids(n)?.iter().collect();
    if let Err(e) = issuer.shutdown() {
        eprintln!("warning: {e} (the claim expires with the session; no ID can repeat)");
    }
    Ok(Leased { machine, ids })
}
