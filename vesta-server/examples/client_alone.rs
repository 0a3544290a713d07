//! The TCP client on its own, as a service that only asks servers for IDs depends on it:
//!
//! ```toml
//! vesta-server = { version = "0.1", default-features = false, features = ["tls"] }
//! ```
//!
//! which builds neither the server nor sqlx, hyper or a metrics stack. It asks the server at
//! `ADDR` for IDs, one and a batch, explains one, and prints them:
//!
//! ```sh
//! cargo run -p vesta-server --no-default-features --features tls --example client_alone -- 127.0.0.1:7654
//! ```

use vesta_server::{Client, ClientConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .ok_or("usage: client_alone HOST:PORT")?;
    let client = Client::connect(ClientConfig::from_list(&addr)?).await?;
    let id = client.next_id().await?;
    println!("id {id}");
    for id in client.next_ids(3).await?.iter() {
        println!("id {id}");
    }
    let x = client.explain(id).await?;
    println!(
        "explained {id}: machine {} genMethod {:?}",
        x.node(),
        x.gen_method()
    );
    Ok(())
}
