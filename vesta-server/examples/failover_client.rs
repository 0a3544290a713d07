//! The TCP client with failover and the embedded fallback, against two servers running in this
//! process: IDs keep coming when the preferred server is killed, from the other one, and when
//! both are gone, from an embedded issuer (genMethod embed, its own machine ID).
//!
//! ```sh
//! cargo run -p vesta-server --example failover_client
//! ```

use vesta_core::IdFields;
use vesta_embed::IssuerConfig;
use vesta_server::{Client, ClientConfig, ServerHandle, TcpConfig, TcpServer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let phases = run(3).await?;
    for phase in phases {
        println!("{}:", phase.label);
        for id in phase.ids {
            let f = IdFields::decode(id);
            println!("  {id}  machine {} genMethod {}", f.machine, f.gen_method);
        }
    }
    Ok(())
}

/// IDs the client got in one phase of [`run`].
pub struct Phase {
    /// What was up.
    pub label: &'static str,
    /// The IDs, in order.
    pub ids: Vec<u64>,
}

/// Starts servers on machine IDs 924 and 925, takes `n` IDs with both up, `n` after killing
/// the first, and `n` after killing the second (from the fallback issuer, machine 17).
pub async fn run(n: usize) -> Result<Vec<Phase>, Box<dyn std::error::Error>> {
    let first = start_server(924).await?;
    let second = start_server(925).await?;

    // Endpoints in order of preference; when every server fails a whole round of retries,
    // an embedded issuer takes over (genMethod embed, a machine ID of the embed pool).
    let mut config = ClientConfig::new([first.addr().to_string(), second.addr().to_string()]);
    config.fallback = Some(IssuerConfig::builder().machine(17).build()?);
    let client = Client::connect(config).await?;

    let mut phases = Vec::new();
    phases.push(Phase {
        label: "both servers up",
        ids: take(&client, n).await?,
    });
    first.kill().await; // like a crash: connections dropped, nothing answered
    phases.push(Phase {
        label: "first server killed",
        ids: take(&client, n).await?,
    });
    second.kill().await;
    phases.push(Phase {
        label: "both servers killed",
        ids: take(&client, n).await?,
    });
    println!("{:?}", client.stats()); // served, retries, endpoints marked dead, fallback calls
    Ok(phases)
}

/// A server on a free loopback port with static machine ID `machine` (server pool 924..=1023),
/// serving on its own task.
async fn start_server(machine: u64) -> Result<ServerHandle, Box<dyn std::error::Error>> {
    let mut config = TcpConfig::default();
    config.server.listen = "127.0.0.1:0".parse()?;
    config.machine.id = Some(machine);
    Ok(ServerHandle::spawn(TcpServer::start(config).await?))
}

/// `n` IDs, one call each.
async fn take(client: &Client, n: usize) -> Result<Vec<u64>, vesta_server::ClientError> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(client.next_id().await?);
    }
    Ok(ids)
}
